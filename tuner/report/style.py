"""How sets and verdicts look in the figures: short set labels, byte sizes people read, and one
fixed colour and marker per verdict.

Short labels (``PROTO=LL ALGO=Ring CH=16 BUF=16777216 (16 MiB) CDMC=1``) keep a row readable;
:func:`names_key` gives the full names they stand for. A byte size is written exactly first,
with its binary unit after it: NCCL reads integer variables with ``strtoll(value, NULL, 0)`` and
ignores what follows the digits (NCCL src/misc/param.cc, ``ncclLoadParam``), so ``16M`` *and*
``16MiB`` both set 16 bytes if pasted; ``16777216 (16 MiB)`` pasted still sets 16777216 bytes
(and a shell refuses the parenthesis).

The verdict colours are the Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008),
told apart by people with any of the common colour-vision deficiencies, plus two Paul Tol
"muted" colours and greys; each verdict also has its own marker, so no verdict is told by colour
alone.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable, Mapping, Sequence

from tuner.judging import stats
from tuner.nccl import VARIABLES, strtoll
from tuner.record import Verdict

__all__ = [
    "SHORT_NAMES",
    "VERDICT_STYLE",
    "names_key",
    "plural",
    "set_label",
    "short_name",
    "size_text",
    "value_text",
    "verdict_color",
    "verdict_marker",
    "verdict_words",
]

#: Short names of common variables (the record's :attr:`tuner.nccl.Variable.short`), in the order a
#: label lists them; other variables keep their name minus ``NCCL_`` and follow, sorted.
SHORT_NAMES: dict[str, str] = {v.name: v.short for v in VARIABLES.values() if v.short}

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def is_size_variable(name: str) -> bool:
    """True for variables NCCL reads as a byte count (``*BUFFSIZE``, ``*CHUNKSIZE``)."""
    return name.endswith(("BUFFSIZE", "CHUNKSIZE"))


def size_text(value: str, sep: str = " ") -> str:
    """A byte count as ``16777216 (16 MiB)``: the exact value NCCL reads first, then the largest
    binary unit that states it exactly (at most two decimals), joined by ``sep``. Values below
    1 KiB, not a whole multiple of a unit, or not a plain decimal integer are returned as written.
    """
    number, rest = strtoll(value)
    if rest or not value.strip().isdigit() or number < 1024:
        return value
    for unit, size in _UNITS:
        amount = number / size
        if amount >= 1 and round(amount, 2) * size == number:
            return f"{value}{sep}({amount:g} {unit})"
    return value


def short_name(name: str) -> str:
    """The label's name for variable ``name`` (:data:`SHORT_NAMES`, else ``name`` minus ``NCCL_``)."""
    return SHORT_NAMES.get(name, name.removeprefix("NCCL_"))


def value_text(name: str, value: str, sep: str = " ") -> str:
    """``value`` of variable ``name`` as a figure shows it (:func:`size_text` for byte counts)."""
    return size_text(value, sep) if is_size_variable(name) else value


def _ordered(names: Iterable[str]) -> list[str]:
    order = list(SHORT_NAMES)
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def set_label(env: Mapping[str, str], flags: Sequence[str] = ()) -> str:
    """A set in short form, e.g. ``PROTO=LL CH=8 BUF=4194304 (4 MiB) --some-flag``: variables in
    :data:`SHORT_NAMES` order, then the others sorted, then the server flags as written (shell
    quoted); ``(untuned)`` for the empty set."""
    words = [f"{short_name(n)}={value_text(n, env[n])}" for n in _ordered(env)]
    if flags:
        words.append(shlex.join(flags))
    return " ".join(words) or "(untuned)"


def names_key(names: Iterable[str], width: int = 150) -> str:
    """The full names behind the short ones used for ``names`` (e.g. ``BUF = NCCL_BUFFSIZE
    (bytes)``), wrapped at ``width`` characters; empty when every name is its own short form."""
    parts = []
    for name in _ordered(set(names)):
        short = short_name(name)
        if short != name:  # no-break spaces inside an entry: lines break only between entries
            parts.append(f"{short}\u00a0=\u00a0{name}" + ("\u00a0(bytes)" if is_size_variable(name) else ""))
    if not parts:
        return ""
    return textwrap.fill("Short names: " + ", ".join(parts), width).replace("\u00a0", " ")


#: Colour and marker of each verdict (every member of :class:`tuner.record.trial.Verdict`), in the
#: order legends list them: from faster to slower, then the verdicts that judge nothing.
VERDICT_STYLE: dict[Verdict, tuple[str, str]] = {
    Verdict.BASELINE: ("#000000", "s"),             # black
    Verdict.FASTER: ("#0072B2", "o"),               # Okabe-Ito blue
    Verdict.FASTER_BELOW_MIN: ("#56B4E9", "^"),     # Okabe-Ito sky blue
    Verdict.NO_DIFFERENCE: ("#8C8C8C", "o"),        # grey
    Verdict.SLOWER_BELOW_MIN: ("#E69F00", "v"),     # Okabe-Ito orange
    Verdict.SLOWER: ("#D55E00", "o"),               # Okabe-Ito vermillion
    Verdict.INCONCLUSIVE: ("#CC79A7", "D"),         # Okabe-Ito reddish purple
    Verdict.FAILED_CONFIRMATION: ("#882255", "X"),  # Tol muted wine
    Verdict.NOT_APPLIED: ("#999933", "P"),          # Tol muted olive
    Verdict.CANNOT_ACT: ("#44AA99", "d"),           # Tol muted teal: a ratio, no verdict
    Verdict.UNVERIFIABLE: ("#009E73", "h"),         # Okabe-Ito bluish green
    Verdict.NOT_ENOUGH_RUNS: ("#BBBBBB", "o"),      # light grey
    Verdict.FAILED: ("#A50F15", "x"),               # dark red: no point, its status is written
    Verdict.PENDING: ("#5F5F5F", "o"),              # dark grey: running or interrupted
    Verdict.NOT_MEASURED: ("#DDDDDD", "."),         # lightest grey: never drawn (not launched)
}


def verdict_color(verdict: Verdict | str) -> str:
    """The colour of ``verdict`` (a :class:`Verdict` or its value)."""
    return VERDICT_STYLE[Verdict(verdict)][0]


def verdict_marker(verdict: Verdict | str) -> str:
    """The matplotlib marker of ``verdict``."""
    return VERDICT_STYLE[Verdict(verdict)][1]


def verdict_words(verdict: Verdict | str, min_effect: float | None = None) -> str:
    """``verdict`` as a legend says it: the ``below the minimum effect`` verdicts name the
    threshold when ``min_effect`` (fraction) is known (``faster, below the 1 % that matters``:
    the whole interval above 1, the gain below it); every other verdict its own value."""
    verdict = Verdict(verdict)
    return stats.verdict_words(verdict, min_effect) if min_effect is not None else verdict.value


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 relaunch``, ``2 relaunches``: ``n`` and ``word`` in the right number (``many``
    defaults to ``word + "s"``, or ``+ "es"`` after s, x, ch, sh)."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {many or word + ('es' if word.endswith(('s', 'x', 'ch', 'sh')) else 's')}"
