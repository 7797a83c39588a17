"""Which environment variable names NCCL reads, by version, which of them pick hardware, which
a baseline must not inherit, and what a misspelled, unknown or unread name is told.

Every name and its releases come from the one record, :data:`tuner.nccl.variables.VARIABLES`
(extracted from NCCL's sources at every tag v2.18.1-1 to v2.30.7-1). NCCL looks a name up with
``getenv`` (exact, case-sensitive), so an ``NCCL_*`` name not in the record is refused before any
launch, with the closest known name (:func:`closest_name`), unless ``allow_unknown`` lets through
a name newer than the record (``--allow-unknown``), with a note (:func:`name_warning`).
"""

from __future__ import annotations

import difflib
import re

from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, NcclVersion, judged_version
from tuner.nccl.variables import VARIABLES, variable

__all__ = [
    "HARDWARE_SELECTORS",
    "KNOWN_NAMES",
    "OWN_PREFIX",
    "closest_name",
    "is_hardware_selector",
    "is_tuning_variable",
    "name_problem",
    "name_warning",
    "read_by",
]

#: Every name the record holds (NCCL's, CUDA_DEVICE_MAX_CONNECTIONS, plugins' and PyTorch's).
KNOWN_NAMES: frozenset[str] = frozenset(VARIABLES)

#: Variables that select hardware (an interface, an HCA, a plugin, a topology file) rather than
#: tune collectives: a deployment needs them, so they are neither tuned nor stripped
#: (:attr:`Variable.hardware`), each with the NCCL source that reads it.
# Not here, though they name a file or library: NCCL_CONF_FILE (src/misc/param.cc, initEnv: a
# file of further variables, tuning included) and NCCL_TUNER_PLUGIN (src/plugin/tuner.cc: a
# tuner changes NCCL's algorithm choice): both tune, so an inherited one never reaches a trial.
# Nor NCCL's network knobs (NCCL_IB_GID_INDEX, NCCL_IB_DISABLE, NCCL_NET_GDR_LEVEL, ...): they say
# how NCCL uses the fabric, not which device, so they are tuned (docs/NCCL.md, "Network settings
# across nodes"); NCCL_IB_HCA and NCCL_SOCKET_IFNAME name devices of one machine and stay here.
HARDWARE_SELECTORS: dict[str, str] = {v.name: f"{v.source} ({v.hardware})" for v in VARIABLES.values() if v.hardware}


def is_hardware_selector(name: str) -> bool:
    """True for variables that select hardware or libraries (:data:`HARDWARE_SELECTORS`)."""
    return name in HARDWARE_SELECTORS


def read_by(name: str, version: NcclVersion) -> bool | None:
    """Whether NCCL ``version`` reads ``name``; None for a name the record does not hold."""
    var = variable(name)
    return None if var is None else var.read_by(version)


def _distance(a: str, b: str) -> int:
    """Optimal-string-alignment edit distance (insert, delete, substitute, swap neighbours)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def closest_name(name: str) -> str | None:
    """The known name ``name`` most likely misspells, or None (also None for a known name).

    After folding case, whitespace and ``-``: the name itself; else the nearest known name
    within edit distance 2 (1 for names of at most 10 characters); else the longest known name
    it starts with (``NCCL_PROTOCOL`` -> ``NCCL_PROTO``); else the closest by
    :func:`difflib.get_close_matches` (ratio 0.8: ``NCCL_NCHANNELS`` -> ``NCCL_MAX_NCHANNELS``);
    else the shortest known name that starts with it (``NCCL_CUMEM`` -> ``NCCL_CUMEM_ENABLE``).
    Only names that start like NCCL's or CUDA_DEVICE_ are matched.
    """
    if name in VARIABLES:
        return None
    folded = re.sub(r"\s+", "", name).upper().replace("-", "_")
    if folded in VARIABLES:
        return folded
    if not folded.startswith(("NCCL", "CUDA_DEVICE")) or folded.startswith(OWN_PREFIX):
        return None
    candidates = sorted(VARIABLES)
    best, best_d = min(((known, _distance(folded, known)) for known in candidates), key=lambda kd: kd[1])
    if best_d <= (1 if len(folded) <= 10 else 2):
        return best
    stems = [k for k in candidates if len(k) >= 9 and folded.startswith(k)]
    if stems:
        return max(stems, key=len)
    close = difflib.get_close_matches(folded, candidates, n=1, cutoff=0.8)
    if close:
        return close[0]
    longer = [k for k in candidates if k.startswith(folded) and len(folded) >= 9]
    return min(longer, key=len) if longer else None


#: Variables the baseline strips from the inherited environment.
TUNING_PREFIXES = ("NCCL_",)
TUNING_NAMES = ("CUDA_DEVICE_MAX_CONNECTIONS",)
#: nccl-tune's own settings (NCCL_TUNE_HEARTBEAT_S, ...): NCCL never reads them.
OWN_PREFIX = "NCCL_TUNE_"


def is_tuning_variable(name: str, *, include_hardware_selectors: bool = True) -> bool:
    """True for the variables a baseline must not inherit: ``NCCL_*`` and CUDA_DEVICE_MAX_CONNECTIONS.

    nccl-tune's own ``NCCL_TUNE_*`` settings are not NCCL's and are kept.

    With ``include_hardware_selectors=False``, variables that pick hardware
    (:data:`HARDWARE_SELECTORS`, e.g. NCCL_SOCKET_IFNAME) are not counted: a launcher keeps them.
    """
    if name.startswith(OWN_PREFIX) or (not include_hardware_selectors and is_hardware_selector(name)):
        return False
    return name.startswith(TUNING_PREFIXES) or name in TUNING_NAMES


def name_problem(name: str, *, allow_unknown: bool = False) -> str | None:
    """Why ``name`` is refused, or None.

    Refused: a name that folds to a known one (``nccl_algo``, ``NCCL-ALGO``: getenv is exact and
    case-sensitive, so NCCL never reads it), and an ``NCCL_*`` name the record does not hold
    (``NCCL_PROTOCOL``, ``NCCL_ALGOS``), with the known name it most likely misspells. With
    ``allow_unknown`` the latter passes (:func:`name_warning` notes it). nccl-tune's own
    ``NCCL_TUNE_*`` settings and names outside NCCL's (``HF_TOKEN``) pass.
    """
    if name in VARIABLES or name.startswith(OWN_PREFIX):
        return None
    intended = closest_name(name)
    if not name.startswith("NCCL_"):
        if intended is None:
            return None
        return f"NCCL never reads {name!r} (getenv is exact and case-sensitive); did you mean {intended}?"
    if allow_unknown:
        return None
    guess = f"; did you mean {intended}?" if intended else ""
    return (f"{name} is not a variable NCCL {OLDEST_SUPPORTED}-{NEWEST_VERIFIED} reads (nor CUDA, PyTorch or a plugin "
            f"NCCL ships), so NCCL would ignore it without a word{guess or '.'} If your NCCL is newer than the record "
            "(tuner/nccl/variables.py), pass --allow-unknown")


def name_warning(name: str, version: NcclVersion | None = None) -> str | None:
    """A note for a name NCCL ``version`` does not read, or None: an ``NCCL_*`` name the record
    does not hold (let through by ``allow_unknown``), or one another release reads. A variable
    removed before ``version`` is refused by :func:`tuner.nccl.values.check_value` instead."""
    if not name.startswith("NCCL_") or name.startswith(OWN_PREFIX):
        return None
    var = variable(name)
    if var is None:
        intended = closest_name(name)
        guess = f" (did you mean {intended}?)" if intended else ""
        return (f"{name} is not in nccl-tune's record of NCCL {OLDEST_SUPPORTED}-{NEWEST_VERIFIED}: let through by "
                f"--allow-unknown as a variable of a newer NCCL{guess}; NCCL ignores it if it does not read it")
    if not var.read_by(judged_version(version)):
        span = (f"from {var.first}" if var.first and not var.last else f"up to {var.last}" if var.last and not var.first
                else f"from {var.first} to {var.last}")
        if version is None:  # before the baseline: the oldest supported release stands in for the unknown one
            return f"{name} is read by NCCL {span} only: the baseline's NCCL version says whether it acts here"
        return f"NCCL {version} does not read {name} (NCCL {span} does)"
    return None
