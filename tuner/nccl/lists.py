"""How NCCL reads ``NCCL_ALGO`` and ``NCCL_PROTO``, by version (NCCL src/graph/tuning.cc, parseList).

Both variables are lists of names compared with ``strcasecmp``, split on ``,`` by ``strtok_r``
(so empty items vanish, and nothing is trimmed: ``"Ring, Tree"`` holds the item ``" Tree"``).
A leading ``^`` excludes the listed names instead of selecting them.

* Up to 2.23 the whole value is one list applied to every collective. An item that matches no
  name is silently skipped, so ``"Ring,Tre"`` means ``Ring`` and ``"allreduce:tree"`` (the
  later per-collective syntax) matches nothing at all.
* From 2.24 the value is a ``;``-separated series of entries, each ``[Prefix:]list``, where
  ``Prefix`` is one of Broadcast, Reduce, AllGather, ReduceScatter, AllReduce (``strcasecmp``,
  NCCL src/init.cc ``ncclFuncStr``). Only the first entry may omit the prefix ("All entries
  except the first must have a prefix"); an entry resets the rows it names. An unknown item or
  prefix makes NCCL WARN and fail communicator init with ncclInvalidUsage.

The result is a matrix collective -> name -> 0/1/2: 1 enabled, 0 disabled, 2 "automatic"
(only ``LL128`` starts at 2: NCCL enables it by itself where it is safe, see
:func:`tuner.nccl.choice.ll128_auto`). Any value that touches a collective's row turns that row's
LL128 into 0 or 1, never 2: ``^LL`` forces LL128 on.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

from tuner.nccl.types import NcclVersion

__all__ = [
    "ALGO_SINCE",
    "FUNCS",
    "PER_COLLECTIVE_SINCE",
    "PROTOS",
    "Matrix",
    "algos",
    "canonical_text",
    "default_matrix",
    "read_list",
]

#: Collectives in NCCL's order (src/init.cc ``ncclFuncStr``); the only valid prefixes.
FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
#: Protocols (src/init.cc ``ncclProtoStr``).
PROTOS = ("LL", "LL128", "Simple")
#: Algorithms and the release each name arrived in (src/init.cc ``ncclAlgoStr``).
ALGO_SINCE = {
    "Tree": NcclVersion(2, 4, 0),
    "Ring": NcclVersion(2, 4, 0),
    "CollNetDirect": NcclVersion(2, 12, 0),
    "CollNetChain": NcclVersion(2, 14, 0),
    "NVLS": NcclVersion(2, 17, 1),
    "NVLSTree": NcclVersion(2, 18, 1),
    "PAT": NcclVersion(2, 23, 4),
}
#: The release that introduced the per-collective ``;``/``:`` grammar (tuning.cc parseList).
PER_COLLECTIVE_SINCE = NcclVersion(2, 24, 0)

Matrix = dict[str, dict[str, int]]


@functools.cache  # planning asks it hundreds of thousands of times for one or two versions
def algos(version: NcclVersion) -> tuple[str, ...]:
    """Algorithm names NCCL ``version`` knows, in NCCL's order."""
    return tuple(a for a, since in ALGO_SINCE.items() if version >= since)


def elements(name: str, version: NcclVersion) -> tuple[str, ...]:
    """The names ``NCCL_ALGO`` (``name``) or ``NCCL_PROTO`` lists for ``version``."""
    return algos(version) if name == "NCCL_ALGO" else PROTOS


def default_matrix(name: str, version: NcclVersion) -> Matrix:
    """The matrix when the variable is unset: all enabled, LL128 automatic (2)."""
    return {f: {e: (2 if e == "LL128" else 1) for e in elements(name, version)} for f in FUNCS}


@dataclass(frozen=True)
class ListReading:
    """What NCCL makes of one ``NCCL_ALGO``/``NCCL_PROTO`` value.

    ``matrix``: collective -> name -> 0/1/2 as NCCL stores it (the default where NCCL fails);
    ``fails_init``: NCCL WARNs and communicator init fails (ncclInvalidUsage, 2.24+);
    ``problem``: why the value is refused (it fails, or part of it is silently skipped), or None.
    """

    matrix: Matrix
    fails_init: bool
    problem: str | None


def _strtok(text: str, sep: str) -> list[str]:
    """C ``strtok_r`` items: split on ``sep`` and drop empty items."""
    return [t for t in text.split(sep) if t]


def _match(item: str, names: tuple[str, ...]) -> str | None:
    low = item.lower()
    return next((n for n in names if n.lower() == low), None)


@functools.lru_cache(maxsize=4096)
def read_list(name: str, value: str, version: NcclVersion) -> ListReading:
    """Read ``value`` of ``NCCL_ALGO``/``NCCL_PROTO`` as NCCL ``version`` does (module docstring).

    Cached: planning a space reads the same few values for each of its (tens of thousands of)
    points; the reading is never changed by its callers."""
    if version >= PER_COLLECTIVE_SINCE:
        return _read_v224(name, value, version)
    return _read_old(name, value, version)


def _hint(item: str, names: tuple[str, ...], version: NcclVersion) -> str:
    """Why ``item`` matches none of ``names`` in ``version``."""
    if item != item.strip() and _match(item.strip(), names):
        return "it has spaces, which NCCL does not trim"
    later = {a: since for a, since in ALGO_SINCE.items() if since > version}
    hit = _match(item, tuple(later))
    if hit:
        return f"{hit} needs NCCL {later[hit]} or later"
    return f"it is not one of {', '.join(names)}"


def _read_old(name: str, value: str, version: NcclVersion) -> ListReading:
    names = elements(name, version)
    body, on, off = (value[1:], 0, 1) if value.startswith("^") else (value, 1, 0)
    row = {e: off for e in names}
    skipped = []
    for item in _strtok(body, ","):
        hit = _match(item, names)
        if hit:
            row[hit] = on
        else:
            skipped.append(item)
    matrix = {f: dict(row) for f in FUNCS}
    problem = None
    if ";" in value or ":" in value:
        problem = (f"NCCL {version} does not understand the per-collective syntax (2.24+): it reads "
                   f"{value!r} as one list and silently skips what it cannot match")
    elif skipped:
        problem = (f"NCCL {version} silently skips " + "; ".join(f"{i!r} ({_hint(i, names, version)})" for i in skipped)
                   + " (src/graph/tuning.cc, parseList)")
    elif not value:
        problem = f"an empty {name} disables every {'algorithm' if name == 'NCCL_ALGO' else 'protocol'} in NCCL {version}"
    return ListReading(matrix, False, problem)


def _fail(name: str, version: NcclVersion, warn: str, hint: str = "") -> ListReading:
    return ListReading(default_matrix(name, version), True,
                       f"NCCL {version} WARNs \"{warn}\" and communicator init fails with ncclInvalidUsage "
                       f"(src/graph/tuning.cc, parseList){': ' + hint if hint else ''}")


def _read_v224(name: str, value: str, version: NcclVersion) -> ListReading:
    names = elements(name, version)
    matrix = default_matrix(name, version)
    pos = 0
    for entry in value.split(";"):
        at_start = pos == 0
        pos += len(entry) + 1
        if not entry:
            continue
        parts = _strtok(entry, ":")
        if not parts:
            return _fail(name, version, f"All entries except the first must have a prefix: \"{value}\"")
        if len(parts) == 1:
            if not at_start:
                return _fail(name, version, f"All entries except the first must have a prefix: \"{value}\"")
            prefix, body = None, parts[0]
        else:
            prefix, body = parts[0], parts[1]
        on, off = (0, 1) if body.startswith("^") else (1, 0)
        body = body[1:] if body.startswith("^") else body
        rows = [f for f in FUNCS if prefix is None or f.lower() == prefix.lower()]
        if not rows:
            hint = "it has spaces, which NCCL does not trim" if prefix and _match(prefix.strip(), FUNCS) \
                else f"prefixes are {', '.join(FUNCS)}"
            return _fail(name, version, f"Unrecognized prefix token \"{prefix}\"", hint)
        for f in rows:
            matrix[f] = {e: off for e in names}
            for item in _strtok(body, ","):
                hit = _match(item, names)
                if not hit:
                    return _fail(name, version, f"Unrecognized element token \"{item}\"", _hint(item, names, version))
                matrix[f][hit] = on
    problem = None if value else f"an empty {name} is echoed but changes nothing: leave it unset"
    return ListReading(matrix, False, problem)


def _row_text(row: dict[str, int], names: tuple[str, ...]) -> str:
    enabled = [e for e in names if row[e] == 1]
    return ",".join(enabled) if enabled else "^" + ",".join(names)


def canonical_text(name: str, matrix: Matrix, version: NcclVersion) -> str:
    """One spelling per matrix, valid for ``version``: equal matrices give equal strings.

    Rows equal to the default (untouched) are left out; the most common touched row becomes
    the prefix-less first entry when every row is touched; the others get ``Func:`` prefixes.
    """
    names = elements(name, version)
    default = default_matrix(name, version)[FUNCS[0]]
    touched = [f for f in FUNCS if matrix[f] != default]
    if not touched:
        return ""
    texts = {f: _row_text(matrix[f], names) for f in touched}
    if len(touched) == len(FUNCS):
        counts = Counter(texts.values())
        common = max(counts, key=lambda t: (counts[t], -min(FUNCS.index(f) for f in FUNCS if texts[f] == t)))
        rest = [f"{f}:{texts[f]}" for f in FUNCS if texts[f] != common]
        return ";".join([common, *rest])
    return ";".join(f"{f}:{texts[f]}" for f in touched)
