"""NCCL's own rules for the environment variables nccl-tune sets, by NCCL version.

Every rule below was read in NCCL's sources (github.com/NVIDIA/nccl, tags v2.18.1-1 to
v2.30.7-1); each names the file and function. A value is judged for one NCCL release
(``version``; None means :data:`OLDEST_SUPPORTED`, the strictest rules) and, where the answer
depends on the machine, for one :class:`Topology`.

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
NCCL_NTHREADS                  strtoll; <= 0 means default; not a multiple of 32 -> WARN and 512;
                               above 512 -> 512; below 64 -> 64 (tuning.cc, getNthreads)
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
CUDA_DEVICE_MAX_CONNECTIONS    CUDA's, not NCCL's: work queues per device, 1-32, default 8
                               (CUDA C++ Programming Guide, "CUDA Environment Variables");
                               NCCL never echoes it
=============================  ===========================================================

Integer parameters echo ``NAME set by environment to <decimal>.`` when first read; a value
strtoll cannot hold (ERANGE) makes NCCL log "Invalid value" and use the default
(src/misc/param.cc, ncclLoadParam).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tuner.nccl.lists import (
    FUNCS,
    PER_COLLECTIVE_SINCE,
    PROTOS,
    Matrix,
    algos,
    canonical_text,
    default_matrix,
    read_list,
)
from tuner.nccl.names import HARDWARE_SELECTORS, KNOWN_NAMES, closest_name, is_hardware_selector, read_by  # noqa: F401
from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, NcclVersion, Topology  # noqa: F401

#: Names that mark a variable as secret: its value is passed on, never written.
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
REDACTED = "***"

#: Variables the baseline strips from the inherited environment.
TUNING_PREFIXES = ("NCCL_",)
TUNING_NAMES = ("CUDA_DEVICE_MAX_CONNECTIONS",)
#: nccl-tune's own settings (NCCL_TUNE_HEARTBEAT_S, ...): NCCL never reads them.
OWN_PREFIX = "NCCL_TUNE_"

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
NCCL_STEPS = 8  # src/include/device.h
DEFAULT_BUFFSIZE = 1 << 22  # src/init.cc, DEFAULT_BUFFSIZE (4 MiB)
CUDA_DEFAULT_CONNECTIONS = 8  # CUDA C++ Programming Guide, CUDA_DEVICE_MAX_CONNECTIONS
MAX_CHANNELS_FROM = NcclVersion(2, 25, 0)  # src/include/device.h: MAXCHANNELS 32 -> 64
CTAS_LOW_IGNORED_FROM = NcclVersion(2, 25, 0)  # src/init.cc envConfigOverride: "is too low"
P2P_DISABLE_ECHO_FROM = NcclVersion(2, 23, 0)  # src/graph/paths.cc ncclGetLevel echoes the disable env
CUMEM_AUTO_FROM = NcclVersion(2, 19, 0)  # src/misc/cudawrap.cc: default -2 (automatic)
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")  # src/debug.cc, ncclDebugInit


def _v(version: NcclVersion | None) -> NcclVersion:
    return OLDEST_SUPPORTED if version is None else version


def max_channels(version: NcclVersion | None = None) -> int:
    """NCCL's compile-time MAXCHANNELS for ``version``: 32 up to 2.24, 64 from 2.25 (device.h)."""
    return 64 if _v(version) >= MAX_CHANNELS_FROM else 32


# -- C integer parsing -------------------------------------------------------------------------

_C_SPACE = " \t\n\v\f\r"
_DIGITS = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _strtoll_full(text: str) -> tuple[int, str, bool]:
    """C ``strtoll(text, &end, 0)``: ``(value, rest, overflowed)``.

    Base 0: ``0x`` hex, leading ``0`` octal, else decimal; leading C whitespace skipped;
    stops at the first invalid character; 0 and the whole text as rest if nothing parsed
    (C11 7.22.1.4). Out of range clamps to the int64 bound and sets ERANGE (``overflowed``).
    """
    stripped = text.lstrip(_C_SPACE)
    m = _DIGITS.match(stripped)
    if not m:
        return 0, text, False
    sign, digits = m.groups()
    base = 16 if digits[:2].lower() == "0x" else (8 if digits.startswith("0") and len(digits) > 1 else 10)
    value = -int(digits, base) if sign == "-" else int(digits, base)
    if value > INT64_MAX or value < -INT64_MAX - 1:
        return (INT64_MAX if value > 0 else -INT64_MAX - 1), stripped[m.end():], True
    return value, stripped[m.end():], False


def strtoll(text: str) -> tuple[int, str]:
    """Parse ``text`` as C ``strtoll(text, &end, 0)`` does: ``(value, rest)``.

    ``strtoll("4M") == (4, "M")``, ``strtoll("abc") == (0, "abc")``, ``strtoll("010") == (8, "")``.
    """
    value, rest, _ = _strtoll_full(text)
    return value, rest


def as_c_int(value: int) -> int:
    """``value`` converted to a 32-bit C ``int`` the way gcc does (two's complement wrap)."""
    return (value + 2**31) % 2**32 - 2**31


def _int_problem(value: str) -> tuple[int | None, str | None]:
    """The integer NCCL reads from ``value``, or why the spelling is refused."""
    if not value.strip(_C_SPACE):
        return None, "empty: NCCL ignores an empty value (src/misc/param.cc, ncclLoadParam); leave it unset"
    parsed, rest, overflow = _strtoll_full(value)
    if overflow:
        return None, ("outside the int64 range: NCCL logs \"Invalid value\" and uses its default "
                      "(src/misc/param.cc, ncclLoadParam)")
    if rest.strip(_C_SPACE):
        return None, (f"NCCL reads it with strtoll as {parsed} (it stops at {rest.strip()[:8]!r}); "
                      "write a plain integer such as 16777216: no unit suffixes")
    return parsed, None


# -- secrets and names -----------------------------------------------------------------------

def is_secret(name: str) -> bool:
    """True when ``name`` contains TOKEN, KEY, SECRET or PASSWORD (case-insensitive)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of ``env`` with every secret variable's value replaced by ``***``."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values of the secret variables in ``env`` worth scrubbing from text (4+ chars)."""
    return sorted({v for k, v in env.items() if is_secret(k) and len(v) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text


def is_tuning_variable(name: str, *, include_hardware_selectors: bool = True) -> bool:
    """True for the variables a baseline must not inherit: ``NCCL_*`` and CUDA_DEVICE_MAX_CONNECTIONS.

    nccl-tune's own ``NCCL_TUNE_*`` settings are not NCCL's and are kept.

    With ``include_hardware_selectors=False``, variables that pick hardware
    (:data:`HARDWARE_SELECTORS`, e.g. NCCL_SOCKET_IFNAME) are not counted: a launcher keeps them.
    """
    if name.startswith(OWN_PREFIX) or (not include_hardware_selectors and is_hardware_selector(name)):
        return False
    return name.startswith(TUNING_PREFIXES) or name in TUNING_NAMES


def name_problem(name: str) -> str | None:
    """Why ``name`` is refused as a misspelling of a known NCCL/CUDA name, or None.

    NCCL looks names up with ``getenv`` (exact, case-sensitive), so ``NCCL_ALGOS`` or
    ``nccl_algo`` is never read.
    """
    intended = closest_name(name)
    if intended is None:
        return None
    return f"NCCL never reads {name!r} (getenv is exact and case-sensitive); did you mean {intended}?"


def name_warning(name: str, version: NcclVersion | None = None) -> str | None:
    """A warning for an ``NCCL_*`` name NCCL ``version`` does not read (plugins may), or None."""
    if not name.startswith("NCCL_") or name_problem(name):
        return None
    reads = read_by(name, _v(version))
    if reads is None:
        return (f"{name} is not read by NCCL 2.18.1-2.30.7 itself; PyTorch or a plugin may read it "
                "(e.g. NCCL_TUNER_CONFIG_FILE), otherwise it has no effect")
    if not reads:
        return f"NCCL {_v(version)} does not read {name} (another release does)"
    return None


# -- list variables --------------------------------------------------------------------------

def _matrix(name: str, value: str, version: NcclVersion | None) -> Matrix:
    return read_list(name, value, _v(version)).matrix


# -- P2P levels ------------------------------------------------------------------------------

#: Path names by release, best to worst, up to SYS (src/graph/topo.cc, topoPathTypeStr).
_LEVELS_BEFORE_226 = ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")
_LEVELS_226 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS")
_LEVELS_227 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")
_LEVELS_228 = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
#: Legacy integer levels 0..5 (src/graph/paths.cc, levelsOldToNew).
_OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def p2p_levels(version: NcclVersion | None = None) -> tuple[str, ...]:
    """NCCL_P2P_LEVEL names ``version`` accepts, best (closest) to worst."""
    v = _v(version)
    if v >= NcclVersion(2, 28, 0):
        return _LEVELS_228
    if v >= NcclVersion(2, 27, 0):
        return _LEVELS_227
    if v >= NcclVersion(2, 26, 0):
        return _LEVELS_226
    return _LEVELS_BEFORE_226


def _read_level(value: str, version: NcclVersion) -> tuple[str | None, str | None, str | None]:
    """``(level name, problem, warning)`` for an NCCL_P2P_LEVEL value (paths.cc, ncclGetLevel)."""
    names = p2p_levels(version)
    if value in names:
        return value, None, None
    if value[:1].isdigit():
        parsed, rest, overflow = _strtoll_full(value)
        if rest.strip(_C_SPACE):
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


# -- thread thresholds ----------------------------------------------------------------------

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
    rest = value[pos:].strip(_C_SPACE)
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


# -- the per-variable rules ------------------------------------------------------------------

@dataclass(frozen=True)
class _Reading:
    """What NCCL makes of one value: canonical text ("" = same as unset), problem, warnings."""

    canonical: str
    problem: str | None = None
    warnings: tuple[str, ...] = ()


def _read_int_channels(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = _int_problem(value)
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
    parsed, problem = _int_problem(value)
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
    parsed, problem = _int_problem(value)
    if parsed is None:
        return _Reading(value, problem)
    nt = as_c_int(parsed)
    if nt <= 0:
        return _Reading(value, f"NCCL ignores {name} <= 0 and keeps its default (src/graph/tuning.cc, getNthreads)")
    top = 640 if name == "NCCL_LL128_NTHREADS" else 512
    low = 160 if name == "NCCL_LL128_NTHREADS" else 64
    if nt % 32:
        return _Reading(value, f"{nt} is not a multiple of 32: NCCL WARNs \"Invalid {name}\" and runs {top} threads "
                               "instead (src/graph/tuning.cc, getNthreads)")
    if nt > top:
        return _Reading(str(top), None, (f"{nt} is above {top}: NCCL WARNs and uses {top} (getNthreads)",))
    if nt < low:
        return _Reading(str(low), None, (f"{nt} is below {low}: NCCL WARNs and uses {low} (getNthreads)",))
    return _Reading(str(nt))


def _read_only_one(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = _int_problem(value)
    if parsed is None:
        return _Reading(value, problem)
    if name == "NCCL_P2P_DISABLE":
        parsed = as_c_int(parsed)
    if parsed == 1:
        return _Reading("1")
    if parsed == 0:
        return _Reading("")
    where = "src/graph/paths.cc, ncclGetLevel" if name == "NCCL_P2P_DISABLE" else "src/transport/shm.cc, shmCanConnect"
    return _Reading(value, f"NCCL acts only on 1 ({where}): {parsed} is silently ignored; write 1, or leave it unset")


def _read_cumem(name: str, value: str, version: NcclVersion) -> _Reading:
    parsed, problem = _int_problem(value)
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
    parsed, problem = _int_problem(value)
    if parsed is None:
        return _Reading(value, problem)
    if parsed == 2:
        return _Reading("")
    if parsed == 0:
        return _Reading("0")
    warnings = () if parsed == 1 else (f"NCCL treats {parsed} like 1: NVLS forced on (src/transport/nvls.cc, ncclNvlsInit)",)
    return _Reading("1", None, warnings)


def _read_list(name: str, value: str, version: NcclVersion) -> _Reading:
    reading = read_list(name, value, version)
    if reading.fails_init:
        return _Reading(value, reading.problem)
    return _Reading(canonical_text(name, reading.matrix, version), reading.problem)


def _read_level_var(name: str, value: str, version: NcclVersion) -> _Reading:
    level, problem, warning = _read_level(value, version)
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


_RULES = {
    "NCCL_ALGO": _read_list,
    "NCCL_PROTO": _read_list,
    "NCCL_THREAD_THRESHOLDS": _read_thresholds,
    "NCCL_BUFFSIZE": _read_buffsize,
    "NCCL_LL_BUFFSIZE": _read_buffsize,
    "NCCL_LL128_BUFFSIZE": _read_buffsize,
    "NCCL_MAX_NCHANNELS": _read_int_channels,
    "NCCL_MIN_NCHANNELS": _read_int_channels,
    "NCCL_MAX_NRINGS": _read_int_channels,
    "NCCL_MIN_NRINGS": _read_int_channels,
    "NCCL_MAX_CTAS": _read_int_channels,
    "NCCL_MIN_CTAS": _read_int_channels,
    "NCCL_NTHREADS": _read_nthreads,
    "NCCL_LL128_NTHREADS": _read_nthreads,
    "NCCL_P2P_LEVEL": _read_level_var,
    "NCCL_P2P_DISABLE": _read_only_one,
    "NCCL_SHM_DISABLE": _read_only_one,
    "NCCL_CUMEM_ENABLE": _read_cumem,
    "NCCL_NVLS_ENABLE": _read_nvls,
    "NCCL_DEBUG": _read_debug,
    "CUDA_DEVICE_MAX_CONNECTIONS": _read_cuda_connections,
}

#: The variables whose values this module judges (others: names only).
RULED_NAMES = frozenset(_RULES)

_ACCEPTED = {
    "NCCL_ALGO": "a comma list of {algos} (case-insensitive, no spaces); '^' first excludes; "
                 "from 2.24 also 'AllReduce:Tree;Broadcast:Ring' (every entry after the first needs a prefix)",
    "NCCL_PROTO": "a comma list of LL, LL128, Simple (case-insensitive, no spaces); '^' first excludes; "
                  "from 2.24 also 'AllReduce:LL;...'",
    "NCCL_THREAD_THRESHOLDS": "six decimal numbers separated by spaces (Tree LL LL128 Simple, Ring LL LL128 Simple); "
                              "-1 keeps a default",
    "NCCL_BUFFSIZE": f"a plain integer number of bytes, {NCCL_STEPS} to {INT32_MAX} (decimal, 0x hex, 0 octal; no suffix)",
    "NCCL_NTHREADS": "a multiple of 32 from 64 to 512",
    "NCCL_P2P_LEVEL": "one of {levels} (exact case), or a legacy level 0-5",
    "NCCL_P2P_DISABLE": "1 (disable P2P) or 0 (no effect)",
    "NCCL_SHM_DISABLE": "1 (disable SHM) or 0 (no effect)",
    "NCCL_CUMEM_ENABLE": "0 (off), 1 (on) or -2 (automatic, 2.19+)",
    "NCCL_NVLS_ENABLE": "0 (off), 1 (forced on) or 2 (automatic)",
    "NCCL_DEBUG": "one of " + ", ".join(DEBUG_LEVELS),
    "CUDA_DEVICE_MAX_CONNECTIONS": "a whole number from 1 to 32",
}


def accepted(name: str, version: NcclVersion | None = None) -> str:
    """One line saying what ``name`` accepts under NCCL ``version``, for error messages."""
    v = _v(version)
    if name in ("NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",
                "NCCL_MAX_CTAS", "NCCL_MIN_CTAS"):
        return f"a plain integer number of channels, 1 to {max_channels(v)} for NCCL {v}"
    if name in ("NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE"):
        return _ACCEPTED["NCCL_BUFFSIZE"]
    text = _ACCEPTED.get(name)
    if text is None:
        return "any string"
    return text.format(algos=", ".join(algos(v)), levels=", ".join(p2p_levels(v)))


def _reading(name: str, value: str, version: NcclVersion | None) -> _Reading | None:
    rule = _RULES.get(name)
    return None if rule is None else rule(name, value, _v(version))


def check_value(name: str, value: str, version: NcclVersion | None = None) -> str | None:
    """None when NCCL ``version`` (default :data:`OLDEST_SUPPORTED`) reads ``name=value`` as meant.

    Otherwise one sentence saying why NCCL rejects it (communicator init fails) or silently
    ignores or misreads it: a misspelled name (:func:`name_problem`), an integer NCCL reads
    differently (``4M`` is 4), a list item or level it skips, a value it cannot store. Values
    NCCL only clamps are accepted here and reported by :func:`value_warnings`.
    """
    problem = name_problem(name)
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


def risky_reason(name: str, value: str, version: NcclVersion | None = None) -> str | None:
    """Why a reversible value can still hang a server, or None.

    NCCL_P2P_LEVEL beyond PXB lets P2P cross the CPU's PCIe root complex or the inter-socket
    link, where ACS or an IOMMU may reroute or block peer traffic and hang the first
    collective (NCCL troubleshooting guide, "PCI Access Control Services").
    """
    if name != "NCCL_P2P_LEVEL":
        return None
    level, _problem, _warning = _read_level(value, _v(version))
    levels = p2p_levels(version)
    if level is None or levels.index(level) <= levels.index("PXB"):
        return None
    return (f"NCCL_P2P_LEVEL={level} allows P2P beyond a PCIe switch: where ACS or an IOMMU reroutes "
            "peer traffic the first collective can hang (NCCL troubleshooting guide)")


# -- topology-dependent rules ----------------------------------------------------------------

def ll128_auto(topology: Topology | None, version: NcclVersion | None = None) -> bool | None:
    """Whether NCCL would enable LL128 by itself on ``topology``; None when that is unknown.

    NCCL's own guard (src/graph/tuning.cc, ncclTopoTuneModel, the protocol enable loop) enables
    LL128 only when the intra-node path is NVLink (``typeIntra <= PATH_NVB``), the GPUs share
    one compute capability, and that capability is 7.0, 8.0 or 9.0 up to 2.24, also 10.0 and
    12.0 in 2.25-2.26, any >= 7.0 from 2.27. Across nodes it also depends on the NIC path,
    which is not known here.
    """
    if topology is None or topology.nvlink is None:
        return None
    if not topology.nvlink:
        return False
    if topology.nnodes > 1:
        return None
    v, arch = _v(version), topology.gpu_arch
    if arch is None:
        return None
    if v >= NcclVersion(2, 27, 0):
        return arch >= 70
    if v >= NcclVersion(2, 25, 0):
        return arch in (70, 80, 90, 100, 120)
    return arch in (70, 80, 90)


def _supported(algo: str, func: str, topo: Topology, version: NcclVersion) -> bool:
    """Whether ``algo`` can run ``func`` on ``topo`` (tuning.cc model loop; enqueue.cc cost table)."""
    if algo == "Ring":
        return True
    if algo == "Tree":
        return func == "AllReduce"
    if algo in ("CollNetDirect", "CollNetChain"):
        wanted = ("AllReduce", "AllGather", "ReduceScatter") if algo == "CollNetDirect" else ("AllReduce",)
        return topo.collnet and func in wanted and (algo != "CollNetDirect" or topo.link == "nvswitch")
    if algo == "NVLS":
        return topo.has_nvls and func in ("AllReduce", "AllGather", "ReduceScatter") and (
            topo.nnodes == 1 or topo.collnet)
    if algo == "NVLSTree":
        return topo.has_nvls and topo.nnodes > 1 and func == "AllReduce"
    if algo == "PAT":
        return func in ("AllGather", "ReduceScatter") and topo.nnodes == topo.nranks
    return False


def _protos_for(algo: str) -> tuple[str, ...]:
    return PROTOS if algo in ("Ring", "Tree") else ("Simple",)


@dataclass(frozen=True)
class Choices:
    """The (algorithm, protocol) pairs NCCL may pick for one collective under a set.

    ``pairs``: pairs NCCL's cost model considers; ``maybe``: pairs that depend on LL128's
    automatic rule where the topology does not settle it; ``fallback``: how NCCL got there
    when the set itself left nothing (``""``, ``"ring-backup"`` 2.22-2.23, ``"ring-backup-all"``
    2.19-2.21, which re-enables every Ring protocol); ``fails``: NCCL fails at the first call.
    """

    pairs: frozenset[tuple[str, str]]
    maybe: frozenset[tuple[str, str]]
    fallback: str
    fails: bool


def _old_algo_reset(row: dict[str, int], topo: Topology) -> dict[str, int]:
    """Up to 2.23, a set that disables Ring, Tree, NVLS and NVLSTree without CollNet gets Ring
    and Tree back ("If user has hard set NCCL_ALGO=COLLNET, ignore it", tuning.cc)."""
    if topo.collnet or any(row.get(a, 0) for a in ("Ring", "Tree", "NVLS", "NVLSTree")):
        return row
    return {**row, "Ring": 1, "Tree": 1}


def allreduce_choices(env: Mapping[str, str], topology: Topology, version: NcclVersion | None = None,
                      func: str = "AllReduce") -> Choices:
    """Which (algorithm, protocol) pairs NCCL ``version`` may pick for ``func`` under ``env``.

    Follows src/graph/tuning.cc (ncclTopoTuneModel: enable matrix, CollNet/NVLS/NVLSTree
    disabling, LL128 guard, the 2.19-2.23 Ring bandwidth backup) and src/enqueue.cc
    (topoGetAlgoInfo: "No algorithm/protocol available" when nothing is left, 2.24+ and 2.18).
    """
    v = _v(version)
    algo_row = _matrix("NCCL_ALGO", env["NCCL_ALGO"], v)[func] if "NCCL_ALGO" in env \
        else default_matrix("NCCL_ALGO", v)[func]
    proto_row = _matrix("NCCL_PROTO", env["NCCL_PROTO"], v)[func] if "NCCL_PROTO" in env \
        else default_matrix("NCCL_PROTO", v)[func]
    if v < PER_COLLECTIVE_SINCE:
        algo_row = _old_algo_reset(algo_row, topology)
    topo = topology
    if "NCCL_NVLS_ENABLE" in env and canonical_value("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"], v) == "0":
        topo = Topology(topology.nranks, topology.nnodes, topology.link, False, topology.gpu_arch, topology.collnet)
    auto = ll128_auto(topology, v)
    pairs, maybe = set(), set()

    def proto_on(p: str) -> bool | None:
        state = proto_row[p]
        return bool(state) if state != 2 else auto

    for a in algos(v):
        if not algo_row.get(a) or not _supported(a, func, topo, v):
            continue
        for p in _protos_for(a):
            on = proto_on(p)
            if on:
                pairs.add((a, p))
            elif on is None:
                maybe.add((a, p))
    if pairs or maybe:
        return Choices(frozenset(pairs), frozenset(maybe), "", False)
    if NcclVersion(2, 19, 0) <= v < NcclVersion(2, 22, 0):
        return Choices(frozenset(("Ring", p) for p in PROTOS), frozenset(), "ring-backup-all", False)
    if NcclVersion(2, 22, 0) <= v < PER_COLLECTIVE_SINCE:
        ring = {("Ring", p) for p in PROTOS if proto_on(p)}
        ring_maybe = {("Ring", p) for p in PROTOS if proto_on(p) is None}
        return Choices(frozenset(ring), frozenset(ring_maybe), "ring-backup", not ring and not ring_maybe)
    return Choices(frozenset(), frozenset(), "", True)


#: Collectives a tensor-parallel server runs through NCCL every decode step: the allreduces and,
#: in vLLM's V1 engine, the logits all-gather (vllm/model_executor/layers/logits_processor.py,
#: _gather_logits: all-gather when Platform.use_all_gather(), true with V1).
SERVER_COLLECTIVES = ("AllReduce", "AllGather")


def infeasible_reason(env: Mapping[str, str], topology: Topology, version: NcclVersion | None = None,
                      collectives: Iterable[str] = SERVER_COLLECTIVES) -> str | None:
    """Why ``env`` cannot initialise or fails at the first call of one of ``collectives``, or None.

    * NCCL_NVLS_ENABLE forced on without NVLS hardware: NCCL sets up NVLS buffers and
      ``cuMulticastCreate`` fails (src/transport/nvls.cc).
    * NCCL_ALGO/NCCL_PROTO leaving no pair the topology supports: "No algorithm/protocol
      available" and ncclInvalidUsage at the first call (src/enqueue.cc, topoGetAlgoInfo) from
      2.24 and in 2.18 (2.19-2.23 fall back to Ring, see :func:`allreduce_choices`). E.g. NVLS,
      NVLSTree, CollNet or PAT forced on one PCIe node, or ``NCCL_ALGO=Tree`` (no Tree AllGather)
      on 2.24+: pass ``collectives=("AllReduce",)`` for a server that all-gathers elsewhere.
    * A list NCCL refuses at init (2.24+, :func:`check_value`).
    """
    v = _v(version)
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        if name in env:
            reading = read_list(name, env[name], v)
            if reading.fails_init:
                return f"{name}={env[name]!r}: {reading.problem}"
    nvls = env.get("NCCL_NVLS_ENABLE")
    if nvls is not None and canonical_value("NCCL_NVLS_ENABLE", nvls, v) == "1" and not topology.has_nvls:
        return ("NCCL_NVLS_ENABLE forces NVLS on a machine without NVLink SHARP multicast: NVLS setup fails "
                "at init (src/transport/nvls.cc, ncclNvlsInit and cuMulticastCreate)")
    for func in collectives:
        choice = allreduce_choices(env, topology, v, func)
        if choice.fails:
            shown = ", ".join(f"{k}={env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE") if k in env)
            return (f"{shown} leaves no algorithm/protocol NCCL {v} can run {func} with on {_describe(topology)}: "
                    f"\"No algorithm/protocol available\" at the first {func} (src/enqueue.cc, topoGetAlgoInfo)")
    return None


def _describe(topo: Topology) -> str:
    link = {"pcie": "PCIe", "nvlink": "NVLink", "nvswitch": "NVSwitch"}.get(topo.link or "", "an unknown link")
    node = "one node" if topo.nnodes == 1 else f"{topo.nnodes} nodes"
    nvls = ", NVLS" if topo.has_nvls else ""
    return f"{topo.nranks} GPUs on {node} over {link}{nvls}"


def unsafe_reason(name: str, value: str, topology: Topology | None = None, *,
                  version: NcclVersion | None = None) -> str | None:
    """Why ``name=value`` enables what NCCL's automatic choice would disable here, or None.

    After NCCL's own parsing, any NCCL_PROTO value that leaves LL128 at 1 (listed, or not
    excluded by a ``^`` list: ``^LL``, ``^Simple``, ``LL,LL128``, ``allreduce:LL128``) bypasses
    NCCL's LL128 guard (:func:`ll128_auto`), which exists because LL128 "may cause silent data
    corruption" elsewhere (src/graph/tuning.cc). Unsafe unless the topology is known to pass the
    guard. NCCL_NVLS_ENABLE forcing NVLS is unsafe while the topology is unknown (an NVLS=1 hang
    was reported, NVIDIA/nccl#1197); with a topology, forcing it where it is missing is
    infeasible instead (:func:`infeasible_reason`).
    """
    v = _v(version)
    if name == "NCCL_PROTO":
        reading = read_list(name, value, v)
        if reading.fails_init:
            return None
        forced = [f for f in FUNCS if reading.matrix[f].get("LL128") == 1]
        if not forced or ll128_auto(topology, v):
            return None
        where = "this topology" if topology is not None else "an unknown topology"
        if topology is not None and topology.nvlink is False:
            where = "PCIe"
        rows = "every collective" if len(forced) == len(FUNCS) else ", ".join(forced)
        return (f"NCCL_PROTO={value!r} turns LL128 on for {rows}, bypassing NCCL's own LL128 guard on {where}: "
                "silent data corruption is possible (src/graph/tuning.cc, ncclTopoTuneModel)")
    if name == "NCCL_NVLS_ENABLE" and topology is None and canonical_value(name, value, v) == "1":
        return "forces NVLS, which needs NVSwitch multicast (Hopper or later); a hang was reported (NVIDIA/nccl#1197)"
    return None


def unsafe_set_reason(env: Mapping[str, str], topology: Topology | None = None,
                      version: NcclVersion | None = None) -> str | None:
    """Why the whole set is unsafe though each value alone may not be, or None.

    NCCL 2.19-2.21 fall back to Ring with every protocol, LL128 included, when NCCL_ALGO and
    NCCL_PROTO leave a collective nothing (the Ring bandwidth backup in src/graph/tuning.cc,
    fixed in 2.22: NVIDIA/nccl#1304): LL128 then runs where NCCL's guard disabled it.
    """
    for name, value in env.items():
        reason = unsafe_reason(name, value, topology, version=version)
        if reason:
            return reason
    v = _v(version)
    if topology is None or not NcclVersion(2, 19, 0) <= v < NcclVersion(2, 22, 0) or ll128_auto(topology, v):
        return None
    for func in FUNCS:
        if allreduce_choices(env, topology, v, func).fallback == "ring-backup-all":
            return (f"NCCL {v} finds nothing for {func} under this set and falls back to Ring with every protocol, "
                    "LL128 included, bypassing its LL128 guard (src/graph/tuning.cc; NVIDIA/nccl#1304)")
    return None


# -- sets ------------------------------------------------------------------------------------

_PAIRS = (("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"), ("NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS"),
          ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"))


def cross_problems(env: Mapping[str, str], version: NcclVersion | None = None) -> list[tuple[str, str]]:
    """Problems between variables of one set, whatever the machine, as ``(key, reason)``.

    MIN channels above MAX is not one (NCCL allows it, see :func:`cross_warnings`). A problem is
    an NCCL_ALGO/NCCL_PROTO pair that leaves AllReduce nothing on any hardware where NCCL
    ``version`` does not fall back (2.18, 2.24+): e.g. ``NCCL_ALGO=NVLS`` with ``NCCL_PROTO=LL``
    (NVLS runs Simple only, src/graph/tuning.cc).
    """
    v = _v(version)
    names = [n for n in ("NCCL_ALGO", "NCCL_PROTO") if n in env]
    if not names or any(read_list(n, env[n], v).fails_init for n in names):
        return []
    if all(allreduce_choices(env, topo, v).fails for topo in _GENEROUS):
        shown = " with ".join(f"{n}={env[n]}" for n in names)
        return [(names[-1], f"{shown} leaves no algorithm/protocol pair for AllReduce on any machine: NCCL {v} "
                            "fails at the first allreduce (src/enqueue.cc, topoGetAlgoInfo)")]
    return []


#: Machines on which every algorithm can run: a set failing on all of them fails everywhere.
_GENEROUS = (Topology(nranks=8, nnodes=1, link="nvswitch", has_nvls=True, gpu_arch=90),
             Topology(nranks=16, nnodes=2, link="nvswitch", has_nvls=True, gpu_arch=90, collnet=True))


def _int_of(env: Mapping[str, str], name: str, version: NcclVersion) -> int | None:
    if name not in env:
        return None
    text = canonical_value(name, env[name], version)
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else None


def cross_warnings(env: Mapping[str, str], version: NcclVersion | None = None) -> list[tuple[str, str]]:
    """What NCCL does with combinations it accepts but may surprise, as ``(key, reason)``."""
    v = _v(version)
    out: list[tuple[str, str]] = []
    for lo_name, hi_name in _PAIRS:
        lo, hi = _int_of(env, lo_name, v), _int_of(env, hi_name, v)
        if lo is not None and hi is not None and lo > hi:
            if "CTAS" in lo_name:
                out.append((lo_name, f"{lo_name}={lo} is above {hi_name}={hi}: NCCL WARNs and sets both to {hi} "
                                     "(src/init.cc, envConfigOverride)"))
            else:
                out.append((lo_name, f"{lo_name}={lo} is above {hi_name}={hi}: NCCL keeps {hi} channels, then "
                                     f"duplicates them up to {lo} (\"max, then min\", src/graph/connect.cc, ncclTopoPostset)"))
    for legacy, new in (("NCCL_MAX_NRINGS", "NCCL_MAX_NCHANNELS"), ("NCCL_MIN_NRINGS", "NCCL_MIN_NCHANNELS")):
        if legacy in env and new in env:
            out.append((legacy, f"{new} overrides the legacy {legacy} (src/graph/connect.cc)"))
    if "NCCL_P2P_LEVEL" in env and canonical_value("NCCL_P2P_DISABLE", env.get("NCCL_P2P_DISABLE", "0"), v) == "1":
        out.append(("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE=1 takes precedence: NCCL ignores NCCL_P2P_LEVEL "
                                      "(src/graph/paths.cc, ncclGetLevel)"))
    names = [n for n in ("NCCL_ALGO", "NCCL_PROTO") if n in env]
    if names and not any(read_list(n, env[n], v).fails_init for n in names):
        starved = [f for f in FUNCS[:-1] if allreduce_choices(env, _GENEROUS[0], v, f).fails]
        if starved:
            hint = "; 'AllReduce:<algo>' limits an algorithm to allreduce" if v >= PER_COLLECTIVE_SINCE else ""
            who = f"NCCL {v}" if version is not None else f"NCCL (its version not known yet; judged as {v})"
            out.append((names[0], f"{' with '.join(f'{n}={env[n]}' for n in names)} leaves {', '.join(starved)} "
                                  f"without an algorithm/protocol: {who} fails the first such call the server "
                                  f"makes (src/enqueue.cc, topoGetAlgoInfo){hint}"))
    return out


def _default_equivalent(name: str, canonical: str, version: NcclVersion, topology: Topology | None) -> bool:
    """Whether a canonical value does exactly what leaving ``name`` unset does on ``topology``."""
    if canonical == "":
        return True
    if topology is None:
        return False
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        env = {name: canonical}
        return all(allreduce_choices(env, topology, version, f) == allreduce_choices({}, topology, version, f)
                   for f in FUNCS)
    if name == "NCCL_NVLS_ENABLE" and canonical == "0":
        return not topology.has_nvls
    if name == "NCCL_THREAD_THRESHOLDS":
        overrides, _problem, _warnings = read_thread_thresholds(canonical)
        defaults = default_thread_thresholds(topology.nranks)
        return all(o is None or o == d for o, d in zip(overrides, defaults, strict=True))
    return False


def canonical_set(env: Mapping[str, str], version: NcclVersion | None = None,
                  topology: Topology | None = None) -> dict[str, str]:
    """``env`` as NCCL ``version`` sees it on ``topology``: one spelling per behaviour.

    Values are canonicalised (:func:`canonical_value`) and variables whose value does what
    leaving them unset does are dropped (``NCCL_BUFFSIZE=4194304``,
    ``CUDA_DEVICE_MAX_CONNECTIONS=8``, ``NCCL_P2P_DISABLE=0``, ``NCCL_MAX_NCHANNELS=64`` on
    2.25+, and with a topology e.g. ``NCCL_ALGO=Ring,Tree`` on one PCIe node). Two sets with
    equal results launch the same NCCL behaviour. Unknown variables are kept as given.
    """
    v = _v(version)
    out = {}
    for name, value in env.items():
        canonical = canonical_value(name, value, v)
        if name in _RULES and _default_equivalent(name, canonical, v, topology):
            continue
        out[name] = canonical
    return dict(sorted(out.items()))

