"""Read NCCL environment variables the way NCCL does (REFERENCE.md sections 2 and 3).

Integers go through an emulation of C ``strtoll(value, NULL, 0)`` (NCCL src/misc/param.cc,
``ncclLoadParam``): no unit suffixes, so ``NCCL_BUFFSIZE=4M`` means 4 bytes and ``abc`` means 0.
``NCCL_ALGO`` / ``NCCL_PROTO`` follow ``parseList`` in src/graph/tuning.cc, with the per-collective
grammar of NCCL >= 2.24 (``allreduce:tree;broadcast:ring``) and its strictness (unknown token:
WARN, init fails with ncclInvalidUsage). Everything here is pure: it takes a mapping and returns
settings plus the log lines NCCL would print; nothing is written or exited here.
"""

from __future__ import annotations

import dataclasses
import os

LLONG_MAX = 2**63 - 1
LLONG_MIN = -(2**63)

#: NCCL's algorithm names, in NCCL's index order (src/init.cc ``ncclAlgoStr``).
ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
#: NCCL's protocol names (src/init.cc ``ncclProtoStr``).
PROTOS = ("LL", "LL128", "Simple")
#: Collective names accepted before ``:`` in the >= 2.24 grammar (case-insensitive).
FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
#: NCCL path types, best to worst (src/graph/topo.h ``topoPathTypeStr``); P2P_LEVEL names.
PATH_TYPES = ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")
#: Legacy integer NCCL_P2P_LEVEL values 0-4 (NCCL docs, env.html#nccl-p2p-level).
_OLD_P2P_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")

DEFAULT_BUFFSIZE = 4194304  # bytes, NCCL default for NCCL_BUFFSIZE (REFERENCE.md section 2)
DEFAULT_CUDA_MAX_CONNECTIONS = 8  # CUDA default work queues (REFERENCE.md section 2)
MAXCHANNELS = 64  # NCCL compile-time MAXCHANNELS (REFERENCE.md section 2, 2.23+)
NCCL_MAX_NTHREADS = 512  # src/include/device.h
WARP_SIZE = 32

#: NCCL integer parameters the simulator reads: name -> NCCL default (-2 = "unset" sentinel).
INT_PARAMS = {
    "NCCL_MAX_NCHANNELS": -2,
    "NCCL_MIN_NCHANNELS": -2,
    "NCCL_MAX_NRINGS": -2,
    "NCCL_MIN_NRINGS": -2,
    "NCCL_MAX_CTAS": -2,
    "NCCL_MIN_CTAS": -2,
    "NCCL_BUFFSIZE": -2,
    "NCCL_LL_BUFFSIZE": -2,
    "NCCL_LL128_BUFFSIZE": -2,
    "NCCL_NTHREADS": -2,
    "NCCL_P2P_DISABLE": 0,
    "NCCL_SHM_DISABLE": 0,
    "NCCL_IB_DISABLE": 0,
    "NCCL_CUMEM_ENABLE": -2,
    "NCCL_NVLS_ENABLE": 2,
    "NCCL_CROSS_NIC": 2,
    "NCCL_SOCKET_NTHREADS": -2,
    "NCCL_NSOCKS_PERTHREAD": -2,
}
#: String variables NCCL logs verbatim (``... set by environment to LL``, no trailing period).
STR_PARAMS = ("NCCL_ALGO", "NCCL_PROTO")


class NcclInitError(Exception):
    """NCCL would fail communicator init (e.g. ncclInvalidUsage); ``warn_lines`` are WARN texts."""

    def __init__(self, warn_lines: list[str], result: str = "ncclInvalidUsage"):
        super().__init__("; ".join(warn_lines))
        self.warn_lines = warn_lines
        self.result = result


def strtoll(text: str) -> int:
    """C ``strtoll(text, NULL, 0)``: the integer NCCL reads (REFERENCE.md section 2). Clamped."""
    return strtoll_checked(text)[0]


def strtoll_checked(text: str) -> tuple[int, bool]:
    """``strtoll(text, NULL, 0)`` plus whether it overflowed (C sets ``errno = ERANGE``).

    Skips leading C-locale whitespace, takes one sign, picks base 16 for ``0x``/``0X`` followed by
    a hex digit, base 8 for a leading ``0``, else base 10, and stops at the first character that is
    not a digit of that base: ``"4M"`` -> 4, ``"abc"`` -> 0, ``"0x1f"`` -> 31, ``"010"`` -> 8,
    ``"08"`` -> 0. Out-of-range values clamp to LLONG_MAX / LLONG_MIN with the flag set.
    """
    s, i, n = text, 0, len(text)
    while i < n and s[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and s[i] in "+-":
        neg = s[i] == "-"
        i += 1
    base = 10
    if i < n and s[i] == "0":
        if i + 2 < n and s[i + 1] in "xX" and s[i + 2] in "0123456789abcdefABCDEF":
            base, i = 16, i + 2
        else:
            base = 8
    acc = 0
    while i < n:
        d = "0123456789abcdef".find(s[i].lower()) if s[i].isascii() else -1
        if d < 0 or d >= base:
            break
        acc = acc * base + d
        i += 1
    value = -acc if neg else acc
    if value > LLONG_MAX:
        return LLONG_MAX, True
    if value < LLONG_MIN:
        return LLONG_MIN, True
    return value, False


@dataclasses.dataclass(frozen=True)
class Selection:
    """Allreduce algorithm/protocol enablement after NCCL_ALGO / NCCL_PROTO (tuning.cc).

    ``algo`` maps each of ALGOS to 0/1, ``proto`` maps each of PROTOS to 0/1/2 where 2 is NCCL's
    "LL128 only where NCCL enables it by default" (``protoEnable = {1, 2, 1}``).
    """

    algo: dict
    proto: dict

    @property
    def ll128_forced(self) -> bool:
        """True when the user listed LL128 positively (state 1), bypassing NCCL's safety default."""
        return self.proto.get("LL128") == 1


def _warn_parse(var: str, text: str) -> NcclInitError:
    return NcclInitError([text, f"{var}: ncclInvalidUsage (invalid usage)"])


def _apply_list(lst: str, names: tuple, var: str, value: str, strict: bool) -> dict:
    """One element list of ``parseList``: ``^`` -> every element on except those listed, else
    only the listed ones on. LL128 stays "auto" (2) under ``^`` instead of NCCL's 1: listing LL128
    positively is what the simulator calls forcing it (documented simplification)."""
    neg = lst.startswith("^")
    body = lst[1:] if neg else lst
    out = {k: (1 if neg else 0) for k in names}
    if neg and "LL128" in out:
        out["LL128"] = 2
    for tok in body.split(","):
        if tok == "":  # strtok_r skips empty fields
            continue
        match = [k for k in names if k.lower() == tok.lower()]  # strcasecmp, no trimming
        if match:
            out[match[0]] = 0 if neg else 1
        elif strict:
            raise _warn_parse(var, f'Unrecognized element token "{tok}" when parsing "{value}"')
    return out


def parse_selection_var(value: str | None, names: tuple, default: dict, var: str,
                        func: str = "AllReduce", strict: bool = True) -> dict:
    """Enablement for collective ``func`` from an NCCL_ALGO / NCCL_PROTO value.

    Source: src/graph/tuning.cc ``parseList`` (NCCL >= 2.24). Grammar: ``;``-separated entries,
    each ``[prefix:]list``; only the first entry may omit the prefix (it then applies to every
    collective); ``^list`` enables all but the listed elements. Names compare case-insensitively
    but are not trimmed (``"LL, Simple"`` has an unknown token ``" Simple"``). With ``strict``
    (>= 2.24) an unknown element or prefix raises NcclInitError with NCCL's WARN text; without it
    (<= 2.23) the value is one plain list and unknown tokens are silently ignored.
    Returns a mapping element -> 0/1 (2 = NCCL's automatic LL128).
    """
    if value is None or value == "":
        return dict(default)
    if not strict:
        return _apply_list(value, names, var, value, strict=False)
    out = dict(default)
    entries = [e for e in value.split(";") if e != ""]
    for idx, entry in enumerate(entries):
        parts = [p for p in entry.split(":") if p != ""]
        if not parts:
            continue
        if len(parts) == 1:
            if idx != 0:
                raise _warn_parse(var, f'All entries except the first must have a prefix: "{value}"')
            prefix, lst = None, parts[0]
        else:
            prefix, lst = parts[0], parts[1]
        funcs = FUNCS if prefix is None else [f for f in FUNCS if f.lower() == prefix.lower()]
        if not funcs:
            raise _warn_parse(var, f'Unrecognized prefix token "{prefix}" when parsing "{value}"')
        parsed = _apply_list(lst, names, var, value, strict=True)
        if func in funcs:
            out = parsed
    return out


@dataclasses.dataclass(frozen=True)
class NcclSettings:
    """Everything the cost model needs from the environment, already clamped as NCCL clamps it.

    Units: ``buffsize`` in bytes (Simple protocol FIFO per connection), ``nthreads`` threads per
    CTA (None = NCCL default), channel counts in channels, ``cuda_max_connections`` CUDA work
    queues. ``p2p_level`` is a PATH_TYPES name or None (NCCL's topology default).
    """

    selection: Selection
    max_nchannels: int | None = None
    min_nchannels: int = 0
    buffsize: int = DEFAULT_BUFFSIZE
    nthreads: int | None = None
    p2p_disable: bool = False
    shm_disable: bool = False
    p2p_level: str | None = None
    cuda_max_connections: int = DEFAULT_CUDA_MAX_CONNECTIONS
    nvls_enable: int = 2
    raw: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EnvReport:
    """Result of reading the environment: settings and the INFO / WARN texts NCCL would print."""

    settings: NcclSettings
    info: list
    warn: list


def relevant_env(environ: dict) -> dict:
    """Every NCCL_* variable plus CUDA_DEVICE_MAX_CONNECTIONS, raw strings (for ``SIM ENV``)."""
    return {k: v for k, v in sorted(environ.items())
            if k.startswith("NCCL_") or k == "CUDA_DEVICE_MAX_CONNECTIONS"}


def load_conf_file(environ: dict) -> dict:
    """Merge ``NCCL_CONF_FILE`` (``NAME=VALUE`` lines) under the environment, as NCCL does.

    Environment values win over the file (src/misc/param.cc ``setEnvFile``). ``~/.nccl.conf`` and
    ``/etc/nccl.conf`` are deliberately not read, to keep the simulator hermetic.
    """
    path = environ.get("NCCL_CONF_FILE")
    merged = dict(environ)
    if not path:
        return merged
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return merged
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, val = line.split("=", 1)
        key = key.strip()
        if key and key not in merged:
            merged[key] = val.strip()
    return merged


def _load_int(env: dict, name: str, info: list) -> int | None:
    """``ncclLoadParam``: None when unset/empty, else strtoll value (default on ERANGE)."""
    text = env.get(name)
    if text is None or text == "":
        return None
    value, erange = strtoll_checked(text)
    if erange:
        info.append(f"Invalid value {text} for {name}, using default {INT_PARAMS[name]}.")
        return None
    info.append(f"{name} set by environment to {value}.")
    return value


def _p2p_level(env: dict, info: list) -> str | None:
    """NCCL_P2P_LEVEL (src/graph/paths.cc ``ncclGetLevel``): names are case-sensitive; unknown
    strings are silently ignored; legacy integers 0-4 map to LOC, PIX, PXB, PHB, SYS."""
    text = env.get("NCCL_P2P_LEVEL")
    if not text:
        return None
    level = text if text in PATH_TYPES else None
    if level is None and text[0].isdigit():
        old = max(0, min(strtoll(text), len(_OLD_P2P_LEVELS) - 1))
        level = _OLD_P2P_LEVELS[old]
    if level is not None:
        info.append(f"NCCL_P2P_LEVEL set by environment to {level}")
    return level


def read_env(environ: dict, *, strict_lists: bool = True) -> EnvReport:
    """Read the NCCL variables from ``environ`` (after NCCL_CONF_FILE merge) like NCCL would.

    Returns settings, the INFO messages (``NAME set by environment to VALUE[.]``) and the WARN
    messages for clamped values. Raises NcclInitError for an unknown NCCL_ALGO / NCCL_PROTO token
    when ``strict_lists`` (NCCL >= 2.24 behaviour, REFERENCE.md section 2).
    """
    env = load_conf_file(environ)
    info: list[str] = []
    warn: list[str] = []
    ints = {name: _load_int(env, name, info) for name in INT_PARAMS}

    algo_default = {a: 1 for a in ALGOS}
    proto_default = {"LL": 1, "LL128": 2, "Simple": 1}
    for var in STR_PARAMS:
        if env.get(var):
            info.append(f"{var} set by environment to {env[var]}")
    algo = parse_selection_var(env.get("NCCL_ALGO"), ALGOS, algo_default, "NCCL_ALGO",
                               strict=strict_lists)
    proto = parse_selection_var(env.get("NCCL_PROTO"), PROTOS, proto_default, "NCCL_PROTO",
                                strict=strict_lists)

    # Aliases: NCCL_MAX_NCHANNELS wins over the legacy NRINGS / CTAS names (src/init.cc).
    def first(*names):
        for nm in names:
            if ints[nm] is not None:
                return ints[nm]
        return None

    max_nch = first("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_MAX_CTAS")
    min_nch = first("NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS", "NCCL_MIN_CTAS")
    if max_nch is not None:
        if max_nch > MAXCHANNELS:
            max_nch = MAXCHANNELS
        if max_nch < 1:
            warn.append(f"User asked for a maximum of {max_nch} channels, setting it to 1")
            max_nch = 1
    if min_nch is None or min_nch < 0:
        min_nch = 0
    if min_nch > MAXCHANNELS:
        info.append(f"NCCL_MIN_NCHANNELS {min_nch} above MAXCHANNELS, using {MAXCHANNELS}")
        min_nch = MAXCHANNELS

    nthreads = ints["NCCL_NTHREADS"]
    if nthreads is not None and nthreads > 0:
        # tuning.cc getNthreads: multiple of 32 within [64, 512], WARN and clamp otherwise.
        if nthreads % WARP_SIZE:
            warn.append(f"Invalid NCCL_NTHREADS {nthreads} (must be a multiple of {WARP_SIZE})")
            nthreads = NCCL_MAX_NTHREADS
        elif nthreads > NCCL_MAX_NTHREADS:
            warn.append(f"Invalid NCCL_NTHREADS {nthreads} (maximum {NCCL_MAX_NTHREADS}).")
            nthreads = NCCL_MAX_NTHREADS
        elif nthreads < 2 * WARP_SIZE:
            warn.append(f"Invalid NCCL_NTHREADS {nthreads} (minimum {2 * WARP_SIZE}).")
            nthreads = 2 * WARP_SIZE
    else:
        nthreads = None

    buffsize = ints["NCCL_BUFFSIZE"]
    if buffsize is None or buffsize == -2:
        buffsize = DEFAULT_BUFFSIZE

    for a, b in (("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"),):
        na, nb = ints[a], ints[b]
        if na is not None and not 1 <= na <= 16:
            warn.append(f"Invalid {a} {na}, must be within [1, 16], using 1")
        if nb is not None and na is not None and 1 <= na <= 16 and na * nb > 64:
            warn.append(f"Requested {a}*{b} {na * nb} exceeds 64, clamping")

    conn = DEFAULT_CUDA_MAX_CONNECTIONS
    ctext = env.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if ctext:
        cval = strtoll(ctext)
        # CUDA silently falls back to its default outside 1-32.
        conn = cval if 1 <= cval <= 32 else DEFAULT_CUDA_MAX_CONNECTIONS

    settings = NcclSettings(
        selection=Selection(algo=algo, proto=proto),
        max_nchannels=max_nch,
        min_nchannels=min_nch,
        buffsize=buffsize,
        nthreads=nthreads,
        p2p_disable=ints["NCCL_P2P_DISABLE"] == 1,
        shm_disable=ints["NCCL_SHM_DISABLE"] == 1,
        p2p_level=_p2p_level(env, info),
        cuda_max_connections=conn,
        nvls_enable=2 if ints["NCCL_NVLS_ENABLE"] is None else ints["NCCL_NVLS_ENABLE"],
        raw=relevant_env(env),
    )
    return EnvReport(settings=settings, info=info, warn=warn)


def default_settings() -> NcclSettings:
    """Settings of an empty environment (NCCL defaults)."""
    return read_env({}).settings


def settings_from(env: dict | None = None, **kw) -> NcclSettings:
    """Convenience for tests and benchmarks: settings of ``env`` (a NAME -> string mapping)."""
    return read_env(dict(env or {}), **kw).settings


def current_environ() -> dict:
    """A snapshot of ``os.environ`` as a plain dict."""
    return dict(os.environ)
