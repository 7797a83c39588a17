"""How NCCL reads its level variables (``NCCL_P2P_LEVEL``, ``NCCL_NET_GDR_LEVEL``): path names
by version, legacy digits.

NCCL reads every level variable through one function, ncclGetLevel (src/graph/paths.cc), and
echoes the level's name, not what was written (``NCCL_NET_GDR_LEVEL=1`` is echoed ``PIX``). It compares the value with ``strcmp`` against the path names of its release (case-sensitive,
untrimmed); failing that, a leading digit is a legacy level 0-5 read by ``strtol``
(src/graph/paths.cc, ncclGetLevel; src/graph/topo.cc, topoPathTypeStr). Anything else is
silently ignored.

Without the variable NCCL picks a default level by release, CPU and GPU count
(:func:`default_p2p_level`, src/graph/paths.cc, ncclTopoCheckP2p).
"""

from __future__ import annotations

from tuner.nccl.cnum import C_SPACE, as_c_int, strtoll_erange
from tuner.nccl.types import NEWEST_VERIFIED, NcclVersion, judged_version
from tuner.nccl.variables import VARIABLES

__all__ = [
    "CPU_ARCHS",
    "CPU_KINDS",
    "CPU_VENDORS",
    "LEVEL_VARIABLES",
    "cpu_kind",
    "default_p2p_level",
    "default_p2p_reason",
    "p2p_levels",
    "read_level",
    "read_p2p_level",
]

#: The variables NCCL reads through ncclGetLevel (src/graph/paths.cc, v2.18.1-1 to v2.30.7-1):
#: ``ncclGetLevel(&ncclTopoUserP2pLevel, "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")`` in
#: ncclTopoCheckP2p/ncclGetUserP2pLevel and ``ncclGetLevel(&ncclTopoUserGdrLevel, NULL,
#: "NCCL_NET_GDR_LEVEL")`` in ncclTopoCheckGdr. Read from the one record per variable
#: (:data:`tuner.nccl.variables.VARIABLES`, ``parse == "level"``).
LEVEL_VARIABLES = frozenset(name for name, v in VARIABLES.items() if v.parse == "level")

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
    """:func:`read_level` for NCCL_P2P_LEVEL."""
    return read_level("NCCL_P2P_LEVEL", value, version)


def read_level(name: str, value: str, version: NcclVersion) -> tuple[str | None, str | None, str | None]:
    """``(level name, problem, warning)`` for a value of the level variable ``name`` (one of
    :data:`LEVEL_VARIABLES`; src/graph/paths.cc, ncclGetLevel reads them all alike).

    ``level name`` is the path NCCL ``version`` uses (``"2"`` -> ``PXB``, ``"1"`` -> ``PIX``), None
    when NCCL ignores the value; ``problem`` says why it is ignored; ``warning`` notes a legacy
    level NCCL clamps. The level name is also what NCCL echoes, so an echo and the value set compare
    equal through it.
    """
    del name  # every level variable is read alike; the name is kept for the record per variable
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


#: NCCL_TOPO_CPU_ARCH_* (src/include/graph.h): 1 x86, 2 POWER, 3 ARM, 4 mixed.
CPU_ARCHS = {1: "x86", 2: "POWER", 3: "ARM", 4: "mixed"}
#: NCCL_TOPO_CPU_VENDOR_* (src/include/graph.h): 1 Intel, 2 AMD, 3 Zhaoxin, 4 mixed.
CPU_VENDORS = {1: "Intel", 2: "AMD", 3: "Zhaoxin", 4: "mixed"}
#: The CPU kinds :func:`default_p2p_level` knows: the x86 vendors NCCL names (src/include/graph.h,
#: NCCL_TOPO_CPU_VENDOR_*) and the non-x86 architectures (NCCL_TOPO_CPU_ARCH_*), whose vendor
#: NCCL does not read. "mixed" is NCCL's own word for several.
CPU_KINDS = ("Intel", "AMD", "Zhaoxin", "ARM", "POWER", "mixed")
#: The first release whose default is PXB on every CPU (src/graph/paths.cc at v2.23.4-1).
DEFAULT_PXB_FROM = NcclVersion(2, 23, 0)
_BEFORE = NcclVersion(2, 22, 3)  # the newest release of the older rule


def cpu_kind(arch: int, vendor: int) -> str:
    """The CPU kind of NCCL's ``(arch, vendor)`` numbers (``CPU/0-0 (1/2/-1)``, src/graph/topo.cc
    ncclTopoPrintRec): the vendor for x86 (``1, 2`` -> ``"AMD"``), else the architecture
    (``3, 0`` -> ``"ARM"``), as ncclTopoCheckP2p tells them apart; unknown numbers as text."""
    if arch == 1:
        return CPU_VENDORS.get(vendor, str(vendor))
    return CPU_ARCHS.get(arch, str(arch))


def _rule(version: NcclVersion, cpu: str | None, local_gpus: int | None) -> str | None:
    if version < DEFAULT_PXB_FROM:
        if cpu is None:
            return None
        return "PXB" if cpu in ("Intel", "ARM", "Zhaoxin") else "SYS"
    if cpu == "AMD":
        return None if local_gpus is None else ("SYS" if local_gpus <= 2 else "PXB")
    if cpu is None and (local_gpus is None or local_gpus <= 2):
        return None  # an AMD host with two GPUs would be SYS
    return "PXB"


def default_p2p_level(version: NcclVersion | None, cpu_vendor: str | None, local_gpus: int | None) -> str | None:
    """The NCCL_P2P_LEVEL NCCL uses when none is set, or None when it cannot be known.

    ``cpu_vendor``: one of :data:`CPU_KINDS` (``"Intel"``, ``"AMD"``, ``"Zhaoxin"`` for x86,
    ``"ARM"``/``"POWER"`` for the architecture) or None if unknown; ``local_gpus``: the GPUs in
    NCCL's topology of one node (``system->nodes[GPU].count``; ``nodes[DEV]`` in 2.30), None if
    unknown. NVML can still veto P2P for any pair whatever the level (ncclNvmlDevicePairs
    ``p2pStatusRead``/``p2pStatusWrite``), which this does not model.

    src/graph/paths.cc, ncclTopoCheckP2p, at v2.18.1-1 .. v2.22.3-1::

        // In general, use P2P whenever we can.
        int p2pLevel = PATH_SYS;
        ...
        if (arch == NCCL_TOPO_CPU_ARCH_ARM) p2pLevel = PATH_PXB;
        if (arch == NCCL_TOPO_CPU_ARCH_X86 && vendor == NCCL_TOPO_CPU_VENDOR_INTEL) {
          p2pLevel = PATH_PXB;
        }
        if (arch == NCCL_TOPO_CPU_ARCH_X86 && vendor == NCCL_TOPO_CPU_VENDOR_ZHAOXIN) {
          p2pLevel = PATH_PXB;
        }

    and at v2.23.4-1 .. v2.30.7-1 (``nodes[DEV]`` from 2.30)::

        // By default don't use P2P across CPU Host Bridges and further apart
        int p2pLevel = PATH_PXB;
        ...
        // Allow P2P between pairs of GPUs on AMD systems
        if ((arch == NCCL_TOPO_CPU_ARCH_X86 && vendor == NCCL_TOPO_CPU_VENDOR_AMD) && system->nodes[GPU].count <= 2) p2pLevel = PATH_SYS;

    An unknown ``version`` is judged by both rules (the supported releases span them): the
    default is known only when they agree for that CPU and GPU count.
    """
    if cpu_vendor is not None and cpu_vendor not in CPU_KINDS:
        cpu_vendor = None
    if version is None:
        old, new = _rule(_BEFORE, cpu_vendor, local_gpus), _rule(NEWEST_VERIFIED, cpu_vendor, local_gpus)
        return old if old == new else None
    return _rule(version, cpu_vendor, local_gpus)


def default_p2p_reason(version: NcclVersion | None, cpu_vendor: str | None, local_gpus: int | None) -> str:
    """One sentence saying what :func:`default_p2p_level` found, and why, citing paths.cc."""
    level = default_p2p_level(version, cpu_vendor, local_gpus)
    cpu = f"{cpu_vendor} CPU" if cpu_vendor else "an unknown CPU"
    gpus = (f"{local_gpus} GPU{'s' if local_gpus != 1 else ''}" if local_gpus is not None
            else "an unknown GPU count")
    src = "(src/graph/paths.cc, ncclTopoCheckP2p)"
    if version is None:
        if level is None:
            return (f"NCCL's default P2P level is not known yet for {cpu} and {gpus}: it needs the NCCL version "
                    f"(up to 2.22 SYS except on Intel, ARM and Zhaoxin; from 2.23 PXB, SYS on AMD with at most "
                    f"2 GPUs) and the CPU {src}")
        return f"NCCL's default P2P level is {level} on {cpu} with {gpus} for every supported version {src}"
    if level is None:
        return f"NCCL {version}'s default P2P level is not known for {cpu} and {gpus} {src}"
    if version < DEFAULT_PXB_FROM:
        rule = "SYS except on Intel, ARM and Zhaoxin CPUs (PXB)"
    else:
        rule = "PXB on every CPU, SYS on AMD with at most 2 GPUs"
    return f"NCCL {version}'s default on {cpu} with {gpus} is {level} ({rule}; {src[1:]}"
