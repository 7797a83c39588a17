"""NCCL's own rules for each value of the environment variables nccl-tune sets, by NCCL version.

Every rule here and in the other modules of :mod:`tuner.nccl` was read in NCCL's sources
(github.com/NVIDIA/nccl, tags v2.18.1-1 to v2.30.7-1); each names the file and function. A
value is judged for one NCCL release (``version``; None means
:data:`~tuner.nccl.types.OLDEST_SUPPORTED`, the strictest rules). What depends on the machine
(:class:`~tuner.nccl.types.Topology`) is in :mod:`tuner.nccl.choice`, :mod:`tuner.nccl.safety`
and :mod:`tuner.nccl.sets`.

How NCCL reads each variable (``docs/NCCL.md`` has the long form):

=============================  ===========================================================
variable                       how NCCL reads it
=============================  ===========================================================
NCCL_ALGO, NCCL_PROTO          list grammar of :mod:`tuner.nccl.lists` (src/graph/tuning.cc,
                               parseList); echoed verbatim, no trailing period
NCCL_THREAD_THRESHOLDS         ``sscanf("%ld %ld %ld %ld %ld %ld")``: Tree LL/LL128/Simple then
                               Ring LL/LL128/Simple, decimal only, negative = keep default
                               (tuning.cc, ncclTopoTuneModel)
NCCL_BUFFSIZE                  ``strtoll(v, NULL, 0)`` into int64, stored in
                               ``int comm->buffSizes[]``; step = value / NCCL_STEPS (8)
                               (src/init.cc computeBuffSizes; src/include/comm.h)
NCCL_MAX_NCHANNELS / _NRINGS   strtoll, stored in int; above MAXCHANNELS (32 to 2.24, 64 from
                               2.25, src/include/device.h) lowered silently, below 1 raised to
                               1 (src/graph/connect.cc, ncclMaxNchannels); _NCHANNELS wins
NCCL_MIN_NCHANNELS / _NRINGS   strtoll; above MAXCHANNELS lowered, below 0 raised to 0
                               (connect.cc, ncclMinNchannels); MIN above MAX is allowed:
                               "We permit combining max, then min" (connect.cc, ncclTopoPostset)
NCCL_MAX_CTAS / NCCL_MIN_CTAS  strtoll into the communicator config (src/init.cc,
                               envConfigOverride); above MAXCHANNELS capped; 2.25+ ignores <= 0
NCCL_NTHREADS                  strtoll; <= 0 means default; not a multiple of 32 -> 512;
                               above 512 -> 512; below 64 -> 64, each said as a WARN up to
                               2.26, an INFO (GRAPH|ENV) from 2.27 (tuning.cc, getNthreads)
NCCL_P2P_LEVEL                 ``strcmp`` against the path names of that release (case-
                               sensitive), else a leading digit is a legacy level 0-5 read by
                               strtol (src/graph/paths.cc ncclGetLevel; src/graph/topo.cc
                               topoPathTypeStr); echoed as the path name
NCCL_P2P_DISABLE               ``strtol``; only 1 acts (paths.cc, ncclGetLevel); up to 2.22
                               echoed as ``NCCL_P2P_LEVEL ... LOC``
NCCL_SHM_DISABLE               strtoll; only 1 acts (src/transport/shm.cc, shmCanConnect),
                               read only when NCCL tries SHM for a pair P2P cannot serve
NCCL_CUMEM_ENABLE              strtoll; 0 off, > 0 on, -2 automatic (default from 2.19; 0
                               before) (src/misc/cudawrap.cc, ncclCuMemEnable)
NCCL_NVLS_ENABLE               strtoll; 0 off, 2 automatic (default), any other value forces
                               NVLS on (src/transport/nvls.cc, ncclNvlsInit)
NCCL_TOPO_FILE,                a file path NCCL opens at init with fopen, kept as written
NCCL_GRAPH_FILE                (src/graph/topo.cc ncclTopoGetSystem, src/graph/search.cc
                               ncclTopoCompute; the XML each needs: :mod:`tuner.nccl.xmlfiles`)
NCCL_IB_DISABLE,               strtoll; 0 is the default, any other value is on (``if
NCCL_IB_SUBNET_AWARE_ROUTING   (ncclParamX())``: src/transport/net_ib; the latter 2.30.7+)
NCCL_IB_QPS_PER_CONNECTION     strtoll; 1 (default) to 128, NCCL_IB_MAX_QPS (net_ib connect.cc)
NCCL_CROSS_NIC                 strtoll; 0, 1 or 2 (default) (src/graph/search.cc)
NCCL_NET_GDR_LEVEL             as NCCL_P2P_LEVEL (ncclGetLevel); default PXB (paths.cc,
                               ncclTopoCheckGdr)
CUDA_DEVICE_MAX_CONNECTIONS    CUDA's, not NCCL's: work queues per device, 1-32, default 8
                               (CUDA C++ Programming Guide, "CUDA Environment Variables");
                               NCCL never echoes it
=============================  ===========================================================

Integer parameters echo ``NAME set by environment to <decimal>.`` when first read; a value
strtoll cannot hold (ERANGE) makes NCCL log "Invalid value" and use the default
(src/misc/param.cc, ncclLoadParam).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tuner.nccl.cnum import C_SPACE, INT32_MAX, as_c_int, read_int_param, strtoll
from tuner.nccl.lists import ALGO_SINCE, PER_COLLECTIVE_SINCE, algos, canonical_text, read_list
from tuner.nccl.names import name_problem, name_warning
from tuner.nccl.p2p import p2p_levels, read_p2p_level
from tuner.nccl.thresholds import read_thread_thresholds
from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, NcclVersion, judged_version
from tuner.nccl.variables import VARIABLES, variable
from tuner.nccl.xmlfiles import XML_VERSION

__all__ = [
    "DEFAULT_BUFFSIZE",
    "NCCL_STEPS",
    "RULED_NAMES",
    "accepted",
    "canonical_value",
    "check_value",
    "max_channels",
    "nthreads_level",
    "removed_problem",
    "since_text",
    "value_since",
    "value_warnings",
]

NCCL_STEPS = 8  # src/include/device.h
DEFAULT_BUFFSIZE = 1 << 22  # src/init.cc, DEFAULT_BUFFSIZE (4 MiB)
CUDA_DEFAULT_CONNECTIONS = 8  # CUDA C++ Programming Guide, CUDA_DEVICE_MAX_CONNECTIONS
MAX_CHANNELS_FROM = NcclVersion(2, 25, 0)  # src/include/device.h: MAXCHANNELS 32 -> 64
CTAS_LOW_IGNORED_FROM = NcclVersion(2, 25, 0)  # src/init.cc envConfigOverride: "is too low"
CUMEM_AUTO_FROM = NcclVersion(2, 19, 0)  # src/misc/cudawrap.cc: default -2 (automatic)
DEBUG_LEVELS = VARIABLES["NCCL_DEBUG"].values  # src/debug.cc, ncclDebugInit
#: From 2.27 getNthreads logs ``INFO(NCCL_GRAPH|NCCL_ENV, "Invalid %s %d (...)")`` where up to
#: 2.26 it WARNed (src/graph/tuning.cc, getNthreads, v2.26.6-1 vs v2.27.3-1).
NTHREADS_INFO_FROM = NcclVersion(2, 27, 0)


def nthreads_level(version: NcclVersion | None) -> str:
    """The level of NCCL's ``"Invalid NCCL_NTHREADS %d (must be a multiple of 32)"``, ``"(maximum
    %d)."`` and ``"(minimum %d)."`` messages (also for NCCL_LL128_NTHREADS): ``"WARN"`` up to 2.26
    (printed whatever NCCL_DEBUG_SUBSYS says), ``"INFO"`` under the GRAPH and ENV subsystems from
    2.27 (src/graph/tuning.cc, getNthreads); an unknown version is judged as
    :data:`~tuner.nccl.types.OLDEST_SUPPORTED`."""
    return "INFO" if judged_version(version) >= NTHREADS_INFO_FROM else "WARN"


def _nthreads_says(version: NcclVersion) -> str:
    return "WARNs" if nthreads_level(version) == "WARN" else "logs an INFO (GRAPH/ENV subsystems)"


def max_channels(version: NcclVersion | None = None) -> int:
    """NCCL's compile-time MAXCHANNELS for ``version``: 32 up to 2.24, 64 from 2.25 (device.h)."""
    return 64 if judged_version(version) >= MAX_CHANNELS_FROM else 32


# -- the per-variable rules ------------------------------------------------------------------

GID_AUTO_FROM = NcclVersion(2, 21, 5)  # NCCL_IB_GID_INDEX default -1: NCCL picks the GID itself
_MAX_QPS = 128  # NCCL_IB_MAX_QPS, src/transport/net_ib.cc v2.18.1-1 to net_ib/common.h v2.30.7-1


@dataclass(frozen=True)
class _Reading:
    """What NCCL makes of one value: canonical text ("" = same as unset), problem, warnings."""

    canonical: str
    problem: str | None = None
    warnings: tuple[str, ...] = ()


def _read_int_channels(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, problem)
    if parsed != as_c_int(parsed):
        return _Reading(value, f"{parsed} overflows the int NCCL stores it in (it would read {as_c_int(parsed)})")
    if "CTAS" in name and parsed <= 0:
        return _Reading(value, f"NCCL {'ignores' if version >= CTAS_LOW_IGNORED_FROM else 'does not check'} "
                               f"{name} <= 0 (src/init.cc, envConfigOverride): use at least 1")
    if parsed == -2:
        return _Reading("", "NCCL treats -2 as \"unset\" (src/graph/connect.cc): leave it unset")
    top = max_channels(version)
    is_max = "MAX" in name
    warnings = []
    effective = parsed
    if parsed > top:
        effective = top
        warnings.append(f"{name}={parsed} is above MAXCHANNELS={top} of NCCL {version}: NCCL uses {top} "
                        "(src/graph/connect.cc)")
    elif is_max and parsed < 1:
        effective = 1
        warnings.append(f"{name}={parsed} is below 1: NCCL uses 1 (src/graph/connect.cc, ncclMaxNchannels)")
    elif not is_max and parsed < 0:
        effective = 0
        warnings.append(f"{name}={parsed} is below 0: NCCL uses 0 (src/graph/connect.cc, ncclMinNchannels)")
    default = top if is_max and "CTAS" not in name else (0 if not is_max and "CTAS" not in name else None)
    return _Reading("" if effective == default else str(effective), None, tuple(warnings))


def _read_buffsize(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, problem)
    if parsed == -2:
        return _Reading("", "NCCL treats -2 as \"unset\" (src/init.cc, computeBuffSizes): leave it unset")
    if parsed > INT32_MAX:
        return _Reading(value, f"{parsed} overflows the int NCCL stores it in (src/include/comm.h, buffSizes): "
                               f"it would use {as_c_int(parsed)}; the largest value is {INT32_MAX}")
    if parsed < NCCL_STEPS:
        return _Reading(value, f"{parsed} bytes leave a step size of {max(parsed, 0) // NCCL_STEPS} "
                               f"(buffer / NCCL_STEPS={NCCL_STEPS}, src/include/device.h): NCCL cannot move data")
    default = DEFAULT_BUFFSIZE if name == "NCCL_BUFFSIZE" else None
    return _Reading("" if parsed == default else str(parsed))


def _read_nthreads(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, problem)
    nt = as_c_int(parsed)
    if nt <= 0:
        return _Reading(value, f"NCCL ignores {name} <= 0 and keeps its default (src/graph/tuning.cc, getNthreads)")
    top = 640 if name == "NCCL_LL128_NTHREADS" else 512
    low = 160 if name == "NCCL_LL128_NTHREADS" else 64
    says = _nthreads_says(version)
    if nt % 32:
        return _Reading(value, f"{nt} is not a multiple of 32: NCCL {says} \"Invalid {name} {nt} (must be a multiple "
                               f"of 32)\" and runs {top} threads instead (src/graph/tuning.cc, getNthreads)")
    if nt > top:
        return _Reading(str(top), None, (f"{nt} is above {top}: NCCL {says} \"Invalid {name} {nt} (maximum {top}).\" "
                                         f"and uses {top} (src/graph/tuning.cc, getNthreads)",))
    if nt < low:
        return _Reading(str(low), None, (f"{nt} is below {low}: NCCL {says} \"Invalid {name} {nt} (minimum {low}).\" "
                                         f"and uses {low} (src/graph/tuning.cc, getNthreads)",))
    return _Reading(str(nt))


def _read_only_one(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    if name == "NCCL_P2P_DISABLE":
        parsed = as_c_int(parsed)
    if parsed == 1:
        return _Reading("1")
    if parsed == 0:
        return _Reading("")
    where = "src/graph/paths.cc, ncclGetLevel" if name == "NCCL_P2P_DISABLE" else "src/transport/shm.cc, shmCanConnect"
    return _Reading(value, f"NCCL acts only on 1 ({where}): {parsed} is silently ignored; write 1, or leave it unset")


def _read_cumem(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, problem)
    param = as_c_int(parsed)
    if version < CUMEM_AUTO_FROM:  # 2.18: "(param == -2 && supported) || param": any non-zero is on
        default, effective = "0", ("1" if param else "0")
    else:  # "param >= 0 ? param : (param == -2 && supported)"
        default, effective = "auto", ("1" if param > 0 else ("auto" if param == -2 else "0"))
    warnings: tuple[str, ...] = ()
    if param not in (0, 1, -2):
        warnings = (f"NCCL reads {param} as {'on' if effective == '1' else 'off'} "
                    "(src/misc/cudawrap.cc, ncclCuMemEnable)",)
    return _Reading("" if effective == default else ("-2" if effective == "auto" else effective), None, warnings)


def _read_nvls(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, problem)
    if parsed == 2:
        return _Reading("")
    if parsed == 0:
        return _Reading("0")
    warnings = () if parsed == 1 else (f"NCCL treats {parsed} like 1: NVLS forced on (src/transport/nvls.cc, ncclNvlsInit)",)
    return _Reading("1", None, warnings)


def _read_nonzero(name: str, value: str, version: NcclVersion) -> _Reading:
    """An on/off integer NCCL tests as ``if (ncclParamX())``: 0 is the default, any other value is on
    (src/transport/net_ib/init.cc ncclIbInitDevices for NCCL_IB_DISABLE; net_ib/connect.cc for
    NCCL_IB_SUBNET_AWARE_ROUTING)."""
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    if parsed == 0:
        return _Reading("")
    warnings = () if parsed == 1 else (f"NCCL treats {parsed} like 1 (it tests only for non-zero)",)
    return _Reading("1", None, warnings)


def _read_qps(name: str, value: str, version: NcclVersion) -> _Reading:
    """Queue pairs per IB connection: 1 (the default) to NCCL_IB_MAX_QPS, 128 (src/transport/net_ib/
    connect.cc, NCCL_PARAM(IbQpsPerConn) and its qp arrays of NCCL_IB_MAX_QPS)."""
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    if not 1 <= parsed <= _MAX_QPS:
        return _Reading(value, f"{parsed} queue pairs: NCCL sizes its arrays for 1 to {_MAX_QPS} (NCCL_IB_MAX_QPS, "
                               "src/transport/net_ib/connect.cc); write a whole number in that range")
    return _Reading("" if parsed == 1 else str(parsed))


def _read_gid(name: str, value: str, version: NcclVersion) -> _Reading:
    """A GID index; a negative one lets NCCL choose from 2.21.5 (default -1, ``if (*gidIndex >= 0)``
    else its own pick, src/transport/net_ib.cc ncclIbGetGidIndex); before, NCCL passes it to the
    verbs as the GID index itself (``sgid_index``, a uint8_t) and the connection fails."""
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    if parsed >= 0:
        return _Reading(str(parsed))
    if version < GID_AUTO_FROM:
        return _Reading(value, f"{parsed}: NCCL {version} has no automatic GID (from 2.21.5, src/transport/net_ib.cc, "
                               "ncclIbGetGidIndex) and passes it as the index; write the GID index (show_gids)")
    return _Reading("")


def _read_cross_nic(name: str, value: str, version: NcclVersion) -> _Reading:
    """0, 1 or 2 (the default): src/graph/search.cc tests ``== 0``, ``== 1`` and ``== 2``
    (ncclTopoCompute, ncclTopoGetNetDev); any other value passes none of those tests."""
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    if parsed not in (0, 1, 2):
        return _Reading(value, f"{parsed}: NCCL tests NCCL_CROSS_NIC only for 0, 1 and 2 (src/graph/search.cc, "
                               "ncclTopoCompute); write one of those")
    return _Reading("" if parsed == 2 else str(parsed))


def _read_list(name: str, value: str, version: NcclVersion) -> _Reading:
    reading = read_list(name, value, version)
    if reading.fails_init:
        return _Reading(value, reading.problem)
    return _Reading(canonical_text(name, reading.matrix, version), reading.problem)


def _read_level_var(name: str, value: str, version: NcclVersion) -> _Reading:
    level, problem, warning = read_p2p_level(value, version)
    if level is None:
        return _Reading(value, problem)
    return _Reading(level, None, (warning,) if warning else ())


def _read_thresholds(name: str, value: str, version: NcclVersion) -> _Reading:
    overrides, problem, warnings = read_thread_thresholds(value)
    if problem:
        return _Reading(value, problem)
    if all(o is None for o in overrides):
        return _Reading("", None, (*warnings, "every threshold is negative: NCCL keeps all defaults"))
    return _Reading(" ".join("-1" if o is None else str(o) for o in overrides), None, tuple(warnings))


def _read_cuda_connections(name: str, value: str, version: NcclVersion) -> _Reading:
    if not re.fullmatch(r"[0-9]+", value):
        return _Reading(value, "CUDA documents a plain decimal number of connections, 1 to 32")
    n = int(value)
    if not 1 <= n <= 32:
        return _Reading(value, f"{n} is outside CUDA's documented range 1-32")
    return _Reading("" if n == CUDA_DEFAULT_CONNECTIONS else str(n))


def _read_debug(name: str, value: str, version: NcclVersion) -> _Reading:
    if value.upper() in DEBUG_LEVELS:
        return _Reading(value.upper())
    return _Reading(value, f"NCCL knows {', '.join(DEBUG_LEVELS)} (case-insensitive, src/debug.cc); "
                           f"{value!r} turns logging off silently")


def _read_path(name: str, value: str, version: NcclVersion) -> _Reading:
    if not value.strip():
        return _Reading(value, "an empty path, which NCCL cannot open: " + VARIABLES[name].unreadable)
    if not value.startswith("/"):
        return _Reading(value, None, (f"{name}={value} is a relative path: NCCL opens it from the server's working "
                                      "folder (fopen at init); give an absolute path",))
    return _Reading(value)


def _read_int(name: str, value: str, version: NcclVersion) -> _Reading:
    """Any other integer parameter: what C strtoll makes of it (src/misc/param.cc, ncclLoadParam)."""
    parsed, problem = read_int_param(value)
    if parsed is None:
        return _Reading(value, _misread(name, value, problem))
    return _Reading(str(parsed))


def _misread(name: str, value: str, problem: str | None) -> str | None:
    """``problem`` of a refused integer, saying what NCCL would do with a word or suffix."""
    read, rest = strtoll(value)
    if not value.strip(C_SPACE) or not rest.strip(C_SPACE) or not problem or "int64" in problem:
        return problem
    return (f"NCCL reads {value!r} with C strtoll as {read} (it stops at {rest.strip()[:8]!r}){_meaning(name, read)}; "
            "write a plain integer (no words, no unit suffix)")


def _meaning(name: str, read: int) -> str:
    """What a misread 0 or 1 does to an on/off variable (``NCCL_IB_DISABLE`` 0: IB stays enabled)."""
    subject = name.removeprefix("NCCL_").rsplit("_", 1)[0].replace("_", " ")
    if name.endswith("_DISABLE"):
        return f", so {subject} stays ENABLED" if read == 0 else f", so {subject} is disabled"
    if name.endswith("_ENABLE"):
        return f", so {subject} is OFF" if read == 0 else ""
    return ""


#: Value rules by :attr:`~tuner.nccl.variables.Variable.rule` (``int``: any other integer).
_RULES = {
    "list": _read_list,
    "thresholds": _read_thresholds,
    "buffsize": _read_buffsize,
    "channels": _read_int_channels,
    "nthreads": _read_nthreads,
    "level": _read_level_var,
    "only_one": _read_only_one,
    "cumem": _read_cumem,
    "nvls": _read_nvls,
    "debug": _read_debug,
    "cuda_connections": _read_cuda_connections,
    "path": _read_path,
    "int": _read_int,
    "nonzero": _read_nonzero,
    "qps": _read_qps,
    "cross_nic": _read_cross_nic,
    "gid": _read_gid,
}

#: The variables whose values this module judges by a rule of their own (others: names and,
#: for integers, C strtoll).
RULED_NAMES = frozenset(v.name for v in VARIABLES.values() if v.rule)


def accepted(name: str, version: NcclVersion | None = None) -> str:
    """One line saying what ``name`` accepts under NCCL ``version``, for error messages."""
    v = judged_version(version)
    var = variable(name)
    if var is None:
        if name.startswith("NCCL_"):
            return "a variable NCCL reads (tuner/nccl/variables.py), or a newer one with --allow-unknown"
        return "any string"
    if var.rule == "channels":
        return f"a plain integer number of channels, 1 to {max_channels(v)} for NCCL {v}"
    if var.rule == "buffsize":
        return f"a plain integer number of bytes, {NCCL_STEPS} to {INT32_MAX} (decimal, 0x hex, 0 octal; no suffix)"
    if var.values:
        return "one of " + ", ".join(var.values)
    if var.accepted:
        return var.accepted.format(algos=", ".join(algos(v)), levels=", ".join(p2p_levels(v)), xml=XML_VERSION)
    if _rule(name) == "int":
        return "a plain integer (decimal, 0x hex, 0 octal; NCCL reads it with C strtoll: no words, no suffix)"
    return "any string"


def _rule(name: str) -> str:
    """The value rule of ``name``: its own, else ``int`` for an integer NCCL reads, else "".
    A hardware selector without a rule of its own is checked for its name only."""
    var = variable(name)
    if var is None or var.rule:
        return "" if var is None else var.rule
    return "int" if var.parse == "int" and var.reader == "nccl" and not var.hardware else ""


def removed_problem(name: str, version: NcclVersion | None) -> str | None:
    """Why ``name`` does nothing under a known NCCL ``version`` that no longer reads it, or None
    (None too when ``version`` is unknown: only a known target is refused)."""
    var = variable(name)
    if var is None or version is None or not var.last or version <= NcclVersion.parse(var.last):
        return None
    fact = next((f for f in var.facts if version >= NcclVersion.parse(f.version)), None)
    since = f"{fact.version} ({fact.source})" if fact else f"after {var.last}"
    return (f"ignored since NCCL {since}: NCCL {version} does not read {name} (the last release reading it is "
            f"{var.last}), so it would run as if it were unset; remove it")


def _reading(name: str, value: str, version: NcclVersion | None) -> _Reading | None:
    rule = _RULES.get(_rule(name))
    return None if rule is None else rule(name, value, judged_version(version))


def check_value(name: str, value: str, version: NcclVersion | None = None, *,
                allow_unknown: bool = False) -> str | None:
    """None when NCCL ``version`` (default :data:`OLDEST_SUPPORTED`) reads ``name=value`` as meant.

    Otherwise one sentence saying why NCCL rejects it (communicator init fails) or silently
    ignores or misreads it: a misspelled or unknown name (:func:`name_problem`; ``allow_unknown``
    lets an unknown ``NCCL_*`` name through), a variable the known ``version`` no longer reads
    (:func:`removed_problem`), an integer NCCL reads differently (``4M`` is 4, ``yes`` is 0), a
    list item or level it skips, a value it cannot store. Values NCCL only clamps are accepted
    here and reported by :func:`value_warnings`.
    """
    problem = name_problem(name, allow_unknown=allow_unknown) or removed_problem(name, version)
    if problem:
        return problem
    reading = _reading(name, value, version)
    return None if reading is None else reading.problem


def value_warnings(name: str, value: str, version: NcclVersion | None = None) -> list[str]:
    """Where NCCL ``version`` accepts ``name=value`` but changes it (clamps) or ignores part of it."""
    reading = _reading(name, value, version)
    out = [] if reading is None else list(reading.warnings)
    warning = name_warning(name, version)
    if warning:
        out.append(warning)
    return out


def canonical_value(name: str, value: str, version: NcclVersion | None = None) -> str:
    """The spelling of ``value`` that NCCL ``version`` treats identically to every equal spelling.

    Lists in NCCL's case and order (``ring,TREE`` -> ``Tree,Ring``; ``^LL`` -> ``LL128,Simple``),
    integers in decimal (``0x400000`` -> ``4194304``), clamped where NCCL clamps, P2P levels
    as the name NCCL echoes (``2`` -> ``PXB``). ``""`` means "same as unset". A value NCCL
    rejects outright is returned unchanged; unknown variables are returned unchanged.
    """
    reading = _reading(name, value, version)
    return value if reading is None else reading.canonical


def _rule_releases() -> tuple[NcclVersion, ...]:
    """The releases at which a value rule may change, oldest first: every minor release the rules
    state (x.y.0), and each boundary the rules name at a patch (an algorithm's arrival, the
    per-collective grammar, a variable's first/last release and its facts)."""
    minors = {NcclVersion(2, m, 0) for m in range(OLDEST_SUPPORTED.minor, NEWEST_VERIFIED.minor + 1)}
    named = {*ALGO_SINCE.values(), PER_COLLECTIVE_SINCE, MAX_CHANNELS_FROM, CTAS_LOW_IGNORED_FROM, CUMEM_AUTO_FROM}
    for var in VARIABLES.values():
        named |= {NcclVersion.parse(t) for t in (var.first, *(f.version for f in var.facts)) if t}
    both = minors | named | {OLDEST_SUPPORTED, NEWEST_VERIFIED}
    return tuple(sorted(v for v in both if OLDEST_SUPPORTED <= v <= NEWEST_VERIFIED))


_RELEASES = _rule_releases()


@functools.lru_cache(maxsize=4096)  # planning asks it for every point of a space
def value_since(name: str, value: str) -> NcclVersion | None:
    """The oldest release from which NCCL reads ``name=value`` as meant at every later release
    the rules state (to :data:`NEWEST_VERIFIED`), judged by the value rules alone (a variable a
    release stops reading is :func:`removed_problem`'s); None when no release does.

    :data:`OLDEST_SUPPORTED` for a value every release reads (and for a name without a value
    rule); later for a value only a newer grammar or name list reads: ``AllReduce:LL`` needs the
    per-collective syntax of 2.24 (src/graph/tuning.cc, parseList), ``PAT`` 2.23.4. Rules change
    only at the releases of :func:`_rule_releases`, so those are the ones asked."""
    if _RULES.get(_rule(name)) is None:
        return OLDEST_SUPPORTED
    ok = [_reading(name, value, v).problem is None for v in _RELEASES]  # type: ignore[union-attr]
    for i, v in enumerate(_RELEASES):
        if all(ok[i:]):
            return v
    return None


def since_text(version: NcclVersion) -> str:
    """``2.24+`` for 2.24.0, ``2.23.4+`` for a patch release: how a needed release is said."""
    return f"{version.major}.{version.minor}+" if version.patch == 0 else f"{version}+"
