"""How NCCL reads ``NCCL_THREAD_THRESHOLDS``, and its defaults.

Six numbers, Tree LL/LL128/Simple then Ring LL/LL128/Simple, read with
``sscanf("%ld %ld %ld %ld %ld %ld")``: decimal only, negative keeps the default
(src/graph/tuning.cc, ncclTopoTuneModel).
"""

from __future__ import annotations

import re

from tuner.nccl.cnum import C_SPACE, INT64_MAX

__all__ = ["default_thread_thresholds", "read_thread_thresholds"]

_LD = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_THRESHOLD_SLOTS = ("Tree/LL", "Tree/LL128", "Tree/Simple", "Ring/LL", "Ring/LL128", "Ring/Simple")


def read_thread_thresholds(value: str) -> tuple[tuple[int | None, ...], str | None, list[str]]:
    """``(overrides, problem, warnings)`` for NCCL_THREAD_THRESHOLDS.

    ``overrides`` has six entries (Tree LL/LL128/Simple, Ring LL/LL128/Simple), None where NCCL
    keeps its default. NCCL reads ``sscanf("%ld %ld %ld %ld %ld %ld")``: decimal only, stops at
    the first item it cannot read, negative values keep the default (src/graph/tuning.cc,
    ncclTopoTuneModel).
    """
    out: list[int | None] = []
    pos = 0
    while len(out) < 6:
        m = _LD.match(value, pos)
        if not m:
            break
        number = int(m.group(1))
        if abs(number) > INT64_MAX:
            return (None,) * 6, "a number outside the long range (sscanf behaviour is undefined)", []
        out.append(number if number >= 0 else None)
        pos = m.end()
    warnings = []
    rest = value[pos:].strip(C_SPACE)
    if not out:
        return (None,) * 6, "NCCL's sscanf reads no number from it: silently ignored; write e.g. \"-1 -1 -1 64 -1 -1\"", []
    if rest:
        if len(out) < 6:
            return (None,) * 6, (f"sscanf stops at {rest[:8]!r} after {len(out)} of 6 numbers; "
                                 "write six decimal numbers separated by spaces"), []
        warnings.append(f"NCCL reads only six numbers; it ignores {rest[:16]!r}")
    if len(out) < 6:
        warnings.append(f"only {len(out)} of 6 thresholds given; NCCL keeps the defaults for "
                        + ", ".join(_THRESHOLD_SLOTS[len(out):]))
    return tuple(out + [None] * (6 - len(out))), None, warnings


def default_thread_thresholds(nranks: int) -> tuple[int, ...]:
    """NCCL's thresholds for (Tree LL, LL128, Simple, Ring LL, LL128, Simple) in bytes per thread.

    LL and LL128 8, Simple 64 (src/include/comm.h NCCL_*_THREAD_THRESHOLD); Ring/LL times
    ``nranks`` (tuning.cc, ncclTopoTuneModel).
    """
    return (8, 8, 64, 8 * nranks, 8, 64)
