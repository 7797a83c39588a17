"""How NCCL reads ``NCCL_P2P_LEVEL``: path names by version, legacy digits.

NCCL compares the value with ``strcmp`` against the path names of its release (case-sensitive,
untrimmed); failing that, a leading digit is a legacy level 0-5 read by ``strtol``
(src/graph/paths.cc, ncclGetLevel; src/graph/topo.cc, topoPathTypeStr). Anything else is
silently ignored.
"""

from __future__ import annotations

from tuner.nccl.cnum import C_SPACE, as_c_int, strtoll_erange
from tuner.nccl.types import NcclVersion, judged_version

__all__ = ["p2p_levels", "read_p2p_level"]

#: Path names by release, best to worst, up to SYS (src/graph/topo.cc, topoPathTypeStr).
_LEVELS_BEFORE_226 = ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")
_LEVELS_226 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS")
_LEVELS_227 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")
_LEVELS_228 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
#: Legacy integer levels 0..5 (src/graph/paths.cc, levelsOldToNew).
_OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def p2p_levels(version: NcclVersion | None = None) -> tuple[str, ...]:
    """NCCL_P2P_LEVEL names ``version`` accepts, best (closest) to worst."""
    v = judged_version(version)
    if v >= NcclVersion(2, 28, 0):
        return _LEVELS_228
    if v >= NcclVersion(2, 27, 0):
        return _LEVELS_227
    if v >= NcclVersion(2, 26, 0):
        return _LEVELS_226
    return _LEVELS_BEFORE_226


def read_p2p_level(value: str, version: NcclVersion) -> tuple[str | None, str | None, str | None]:
    """``(level name, problem, warning)`` for an NCCL_P2P_LEVEL value (paths.cc, ncclGetLevel).

    ``level name`` is the path NCCL ``version`` uses (``"2"`` -> ``PXB``), None when NCCL ignores
    the value; ``problem`` says why it is ignored; ``warning`` notes a legacy level NCCL clamps.
    """
    names = p2p_levels(version)
    if value in names:
        return value, None, None
    if value[:1].isdigit():
        parsed, rest, overflow = strtoll_erange(value)
        if rest.strip(C_SPACE):
            return None, (f"NCCL reads it with strtol as {parsed} (it stops at {rest.strip()[:8]!r}); "
                          "write a level name such as PXB"), None
        old = as_c_int(parsed)
        if overflow or old < 0:
            return None, "too large: NCCL converts it to a negative int and indexes out of bounds", None
        warn = None
        if old > 5:
            warn = f"legacy level {old} is clamped to 5 (SYS) (src/graph/paths.cc, ncclGetLevel)"
        return _OLD_LEVELS[min(old, 5)], None, warn
    later = {"C2C": "2.26", "P2C": "2.27"}
    if value in later:
        return None, f"{value} needs NCCL {later[value]} or later; NCCL {version} silently ignores it", None
    if value.strip().upper() in names:
        return None, (f"NCCL compares level names with strcmp (case-sensitive, untrimmed): {value!r} is "
                      f"silently ignored; write {value.strip().upper()}"), None
    return None, f"NCCL {version} silently ignores {value!r}: not one of {', '.join(names)} or a digit 0-5", None
