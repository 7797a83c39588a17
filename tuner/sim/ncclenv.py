"""Read NCCL's environment variables the way NCCL does, for one simulated NCCL version.

Integers go through C ``strtoll(value, NULL, 0)`` once per process (src/misc/param.cc
``ncclLoadParam``): no unit suffixes (``NCCL_BUFFSIZE=4M`` is 4 bytes, ``abc`` is 0), hex and
octal work, and the read value is echoed at INFO as ``NAME set by environment to VALUE.``.
``NCCL_ALGO`` / ``NCCL_PROTO`` follow ``parseList`` of src/graph/tuning.cc: from 2.24 a
``;``-separated per-collective grammar where an unknown token fails the communicator init
(ncclInvalidUsage); before 2.24 one list whose unknown tokens are ignored. Everything here is pure:
it takes a mapping and returns settings plus the messages NCCL would log.
"""

from __future__ import annotations

import dataclasses
import re

from .ncclconst import (
    DEFAULT_BUFFSIZES,
    DEFAULT_CUDA_MAX_CONNECTIONS,
    FUNCS,
    NCCL_CONFIG_UNDEF_INT,
    OLD_P2P_LEVELS,
    PROTOS,
    algos,
    maxchannels,
    path_types,
    version_tuple,
)

LLONG_MAX = 2**63 - 1
LLONG_MIN = -(2**63)

#: Integer parameters the simulator reads: name -> NCCL's default (src/... ``NCCL_PARAM``).
INT_PARAMS = {
    "NCCL_BUFFSIZE": -2, "NCCL_LL_BUFFSIZE": -2, "NCCL_LL128_BUFFSIZE": -2,  # src/init.cc
    "NCCL_MAX_NCHANNELS": -2, "NCCL_MIN_NCHANNELS": -2,  # src/graph/connect.cc
    "NCCL_MAX_NRINGS": -2, "NCCL_MIN_NRINGS": -2,  # src/graph/connect.cc (legacy names)
    "NCCL_MAX_CTAS": NCCL_CONFIG_UNDEF_INT, "NCCL_MIN_CTAS": NCCL_CONFIG_UNDEF_INT,  # src/init.cc
    "NCCL_NTHREADS": -2, "NCCL_LL128_NTHREADS": -2,  # src/graph/tuning.cc
    "NCCL_SHM_DISABLE": 0,  # src/transport/shm.cc
    "NCCL_IB_DISABLE": 0,  # src/transport/net_ib.cc
    "NCCL_CUMEM_ENABLE": -2,  # src/misc/cudawrap.cc
    "NCCL_NVLS_ENABLE": 2,  # src/transport/nvls.cc
    "NCCL_PAT_ENABLE": 2,  # src/graph/tuning.cc
    "NCCL_CROSS_NIC": 2,  # src/graph/search.cc
    "NCCL_SOCKET_NTHREADS": -2, "NCCL_NSOCKS_PERTHREAD": -2,  # src/transport/net_socket.cc
}


@dataclasses.dataclass(frozen=True)
class Message:
    """One log message NCCL would print: ``level`` INFO/WARN, ``subsys`` the NCCL_DEBUG_SUBSYS
    flags it is logged under (src/include/debug.h), ``src`` ``file:line`` of a WARN."""

    level: str
    subsys: tuple[str, ...]
    text: str
    src: str = ""


def info(text: str, *subsys: str) -> Message:
    """An INFO message under ``subsys`` (``"ALL"`` when none given)."""
    return Message("INFO", subsys or ("ALL",), text)


def warn(text: str, src: str) -> Message:
    """A WARN message (NCCL logs WARN under every subsystem)."""
    return Message("WARN", ("ALL",), text, src)


class NcclInitError(Exception):
    """NCCL fails here: ``messages`` are what it logs, ``result`` the ``ncclResult_t`` name."""

    def __init__(self, messages: list[Message], result: str = "ncclInvalidUsage"):
        super().__init__("; ".join(m.text for m in messages))
        self.messages = messages
        self.result = result

    @property
    def warn_lines(self) -> list[str]:
        """Texts of the WARN messages."""
        return [m.text for m in self.messages if m.level == "WARN"]


def strtoll(text: str) -> int:
    """C ``strtoll(text, NULL, 0)``, clamped to the long long range."""
    return strtoll_checked(text)[0]


def strtoll_checked(text: str) -> tuple[int, bool]:
    """``strtoll(text, NULL, 0)`` plus whether it overflowed (C sets ``errno = ERANGE``).

    Skips leading C-locale whitespace, takes one sign, picks base 16 for ``0x``/``0X`` followed by
    a hex digit, base 8 for a leading ``0``, else base 10, and stops at the first character that is
    not a digit of that base: ``"4M"`` -> 4, ``"abc"`` -> 0, ``"0x1f"`` -> 31, ``"010"`` -> 8.
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


def to_int32(value: int) -> int:
    """What a C ``int`` holds after ``int x = (int64_t)value``: two's complement wrap."""
    return (value + 2**31) % 2**32 - 2**31


@dataclasses.dataclass(frozen=True)
class Selection:
    """Enablement after NCCL_ALGO / NCCL_PROTO (tuning.cc ``algoEnable`` / ``protoEnable``).

    ``algo[func][name]`` is 0/1; ``proto[func][name]`` is 0/1/2 where 2 is LL128's default
    "only where the topology allows it". Only the values for ``func`` AllReduce drive the cost
    model; the others are printed in NCCL's enablement matrix.
    """

    algo: dict
    proto: dict

    def algo_on(self, name: str, func: str = "AllReduce") -> bool:
        """Whether ``name`` is enabled for ``func``."""
        return bool(self.algo[func].get(name, 0))

    def proto_state(self, name: str, func: str = "AllReduce") -> int:
        """0 off, 1 on, 2 automatic (LL128 only)."""
        return self.proto[func][name]

    @property
    def ll128_forced(self) -> bool:
        """LL128 set to 1 for AllReduce: listed, or not excluded by a ``^`` list; it bypasses
        NCCL's topology check (tuning.cc, ``pEnable == 2`` is the only case checked)."""
        return self.proto_state("LL128") == 1


def _parse_error(text: str, line: int) -> NcclInitError:
    return NcclInitError([warn(text, f"graph/tuning.cc:{line}")], "ncclInvalidUsage")


def _parse_list_new(value: str, names: tuple, default: dict) -> dict:
    """``parseList`` of NCCL >= 2.24 (src/graph/tuning.cc): ``[prefix:]list`` entries joined by
    ``;``, only the first without prefix; prefixes and elements compared with ``strcasecmp``
    and never trimmed; ``^`` sets every element to 1 except those listed. Raises NcclInitError."""
    out = {f: dict(default) for f in FUNCS}
    entries = [e for e in value.split(";") if e != ""]  # strtok_r skips empty fields
    first = not value.startswith(";")  # NCCL tests the token's address against the string's
    for entry in entries:
        parts = [p for p in entry.split(":") if p != ""]
        if len(parts) == 1:
            if not first:
                raise _parse_error(f'All entries except the first must have a prefix: "{value}"', 70)
            prefix, lst = None, parts[0]
        else:
            prefix, lst = parts[0], parts[1]
        first = False
        neg = lst.startswith("^")
        body = lst[1:] if neg else lst
        funcs = FUNCS if prefix is None else [f for f in FUNCS if f.lower() == prefix.lower()]
        if not funcs:
            raise _parse_error(f'Unrecognized prefix token "{prefix}" when parsing "{value}"', 113)
        for func in funcs:
            row = {k: 1 if neg else 0 for k in names}
            for tok in (t for t in body.split(",") if t != ""):
                match = [k for k in names if k.lower() == tok.lower()]
                if not match:
                    raise _parse_error(f'Unrecognized element token "{tok}" when parsing "{value}"',
                                       103)
                row[match[0]] = 0 if neg else 1
            out[func] = row
    return out


def _parse_list_old(value: str, names: tuple) -> dict:
    """``parseList`` before 2.24: one list for every collective; ``^`` sets all to 1 first;
    unknown tokens are silently ignored (src/graph/tuning.cc of v2.23.4)."""
    neg = value.startswith("^")
    body = value[1:] if neg else value
    row = {k: 1 if neg else 0 for k in names}
    for tok in (t for t in body.split(",") if t != ""):
        for k in names:
            if k.lower() == tok.lower():
                row[k] = 0 if neg else 1
    return {f: dict(row) for f in FUNCS}


@dataclasses.dataclass(frozen=True)
class NcclSettings:
    """What the cost model needs from the environment, as NCCL stores it.

    Units: ``buffsizes`` in bytes per protocol (C ``int``: may wrap negative), channel counts in
    channels, threads per CTA. ``nthreads`` / ``ll128_nthreads`` are the raw env values (None when
    unset); ``thread_thresholds`` holds NCCL_THREAD_THRESHOLDS' six values (Tree LL/LL128/Simple,
    Ring LL/LL128/Simple), None where not given. ``p2p_level`` is a path type name or None.
    """

    selection: Selection
    version: str = "2.27.3"
    max_nchannels: int = 64
    min_nchannels: int = 0
    max_ctas: int = 64
    min_ctas: int = 1
    buffsizes: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_BUFFSIZES))
    nthreads: int | None = None
    ll128_nthreads: int | None = None
    thread_thresholds: tuple = (None,) * 6
    p2p_disable: bool = False
    shm_disable: bool = False
    p2p_level: str | None = None
    cumem: bool = True
    cuda_max_connections: int = DEFAULT_CUDA_MAX_CONNECTIONS
    nvls_enable: int = 2
    raw: dict = dataclasses.field(default_factory=dict)

    def __hash__(self) -> int:  # cached cost models key on settings
        return hash((self.version, tuple(sorted(self.raw.items()))))

    @property
    def buffsize(self) -> int:
        """The Simple protocol's buffer (NCCL_BUFFSIZE), bytes."""
        return self.buffsizes["Simple"]


@dataclasses.dataclass
class EnvReport:
    """Result of reading the environment: settings and the messages NCCL logs while reading."""

    settings: NcclSettings
    messages: list

    @property
    def info(self) -> list[str]:
        """Texts of the INFO messages."""
        return [m.text for m in self.messages if m.level == "INFO"]

    @property
    def warn(self) -> list[str]:
        """Texts of the WARN messages."""
        return [m.text for m in self.messages if m.level == "WARN"]


def relevant_env(environ: dict) -> dict:
    """Every NCCL_* variable plus CUDA_DEVICE_MAX_CONNECTIONS, raw strings."""
    return {k: v for k, v in sorted(environ.items())
            if k.startswith("NCCL_") or k == "CUDA_DEVICE_MAX_CONNECTIONS"}


def load_conf_file(environ: dict) -> dict:
    """Merge ``NCCL_CONF_FILE`` under the environment as src/misc/param.cc ``setEnvFile`` does:
    lines starting with ``#`` skipped, ``NAME=VALUE`` split at the first ``=`` with nothing
    trimmed, and a variable already in the environment wins. ``~/.nccl.conf`` and
    ``/etc/nccl.conf`` are not read, to keep the simulator hermetic."""
    path = environ.get("NCCL_CONF_FILE")
    merged = dict(environ)
    if not path:
        return merged
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
    except OSError:
        return merged
    for line in lines:
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, val = line.split("=", 1)
        if key and key not in merged:
            merged[key] = val
    return merged


def load_int(env: dict, name: str, msgs: list, default: int | None = None) -> int | None:
    """``ncclLoadParam`` (src/misc/param.cc): None when unset or empty (or out of range: NCCL
    then says it keeps ``default``, by default :data:`INT_PARAMS`'s), else the strtoll value,
    echoed with a period into ``msgs``."""
    text = env.get(name)
    if text is None or text == "":
        return None
    value, erange = strtoll_checked(text)
    if erange:
        msgs.append(info(f"Invalid value {text} for {name}, using default "
                         f"{INT_PARAMS[name] if default is None else default}."))
        return None
    msgs.append(info(f"{name} set by environment to {value}.", "ENV"))
    return value


def _p2p(env: dict, version: str, msgs: list) -> tuple[bool, str | None]:
    """``ncclGetLevel(.., "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")`` (src/graph/paths.cc):
    NCCL_P2P_DISABLE counts only when strtol gives 1; level names are compared with strcmp
    (case-sensitive, unknown names silently ignored); a leading digit is a legacy level."""
    text = env.get("NCCL_P2P_DISABLE")
    if text is not None and to_int32(strtoll(text)) == 1:
        msgs.append(info("NCCL_P2P_DISABLE set by environment to 1"))
        return True, None
    text = env.get("NCCL_P2P_LEVEL")
    if text is None:
        return False, None
    names = path_types(version)
    level = text if text in names else None
    if level is None and text[:1].isdigit():
        level = OLD_P2P_LEVELS[max(0, min(to_int32(strtoll(text)), len(OLD_P2P_LEVELS) - 1))]
    if level is not None:
        msgs.append(info(f"NCCL_P2P_LEVEL set by environment to {level}"))
    return False, level


_THRESHOLD_RE = re.compile(r"\s*([+-]?\d+)")


def _thread_thresholds(env: dict, msgs: list) -> tuple:
    """NCCL_THREAD_THRESHOLDS (src/graph/tuning.cc): ``sscanf("%ld x6")`` - Tree LL/LL128/Simple
    then Ring LL/LL128/Simple; scanning stops at the first non-number; negative values keep the
    default."""
    text = env.get("NCCL_THREAD_THRESHOLDS")
    if text is None:
        return (None,) * 6
    msgs.append(info(f"NCCL_THREAD_THRESHOLDS set by environment to {text}", "ENV"))
    out: list[int | None] = []
    pos = 0
    while len(out) < 6:
        m = _THRESHOLD_RE.match(text, pos)
        if not m:
            break
        out.append(int(m.group(1)))
        pos = m.end()
    out += [None] * (6 - len(out))
    return tuple(v if v is not None and v >= 0 else None for v in out)


def read_env(environ: dict, version: str = "2.27.3") -> EnvReport:
    """Read the NCCL variables of ``environ`` (after the NCCL_CONF_FILE merge) as NCCL
    ``version`` would. Returns settings and the messages logged while reading them; raises
    NcclInitError where NCCL's init fails (an NCCL_ALGO / NCCL_PROTO that parseList refuses)."""
    env = load_conf_file(environ)
    msgs: list[Message] = []
    if (host_id := env.get("NCCL_HOSTID")) is not None:  # src/misc/utils.cc getHostHashOnce
        msgs.append(info(f"NCCL_HOSTID set by environment to {host_id}", "ENV"))
    ints = {name: load_int(env, name, msgs) for name in INT_PARAMS}
    p2p_disable, p2p_level = _p2p(env, version, msgs)
    names_algo = algos(version)
    proto_default = {"LL": 1, "LL128": 2, "Simple": 1}
    algo_default = dict.fromkeys(names_algo, 1)
    strict = version_tuple(version) >= (2, 24, 0)
    rows = {}
    for var, names, default in (("NCCL_PROTO", PROTOS, proto_default),
                                ("NCCL_ALGO", names_algo, algo_default)):
        text = env.get(var)
        if text is None:
            rows[var] = {f: dict(default) for f in FUNCS}
            continue
        msgs.append(info(f"{var} set by environment to {text}", "ENV"))
        try:
            rows[var] = _parse_list_new(text, names, default) if strict else \
                _parse_list_old(text, names)
        except NcclInitError as exc:  # keep what was logged before the failure
            raise NcclInitError(msgs + exc.messages, exc.result) from None

    def given(name: str) -> int | None:
        """The value as NCCL's ``int`` stores it, None when unset or -2 (NCCL's "unset")."""
        value = ints[name]
        return None if value is None or value == -2 else to_int32(value)

    top = maxchannels(version)
    # src/graph/connect.cc ncclMaxNchannels / ncclMinNchannels; NCHANNELS wins over NRINGS.
    max_nch = top
    for name in ("NCCL_MAX_NRINGS", "NCCL_MAX_NCHANNELS"):
        max_nch = v if (v := given(name)) is not None else max_nch
    max_nch = min(max_nch, top)
    if max_nch < 1:
        msgs.append(info(f"User asked for a maximum of {max_nch} channels, setting it to 1",
                         "GRAPH", "ENV"))
        max_nch = 1
    min_nch = 0
    for name in ("NCCL_MIN_NRINGS", "NCCL_MIN_NCHANNELS"):
        min_nch = v if (v := given(name)) is not None else min_nch
    if min_nch > top:
        msgs.append(info(f"User asked for a minimum of {min_nch} channels, limiting to {top}",
                         "GRAPH", "ENV"))
        min_nch = top
    min_nch = max(0, min_nch)
    # src/init.cc envConfigOverride: NCCL_MIN_CTAS / NCCL_MAX_CTAS into the comm config.
    ctas = {"NCCL_MIN_CTAS": 1, "NCCL_MAX_CTAS": top}
    for name, kept in list(ctas.items()):
        raw_value = ints[name]
        if raw_value is None:
            continue
        value = to_int32(raw_value)
        if value <= 0:
            msgs.append(info(f"{name} {value} is too low, leaving it set at {kept}", "ENV"))
        else:
            ctas[name] = value

    # src/init.cc computeBuffSizes: int buffSizes[] = env != -2 ? env : default.
    buffsizes = dict(DEFAULT_BUFFSIZES)
    for proto, name in (("LL", "NCCL_LL_BUFFSIZE"), ("LL128", "NCCL_LL128_BUFFSIZE"),
                        ("Simple", "NCCL_BUFFSIZE")):
        if (v := given(name)) is not None:
            buffsizes[proto] = v

    conn = DEFAULT_CUDA_MAX_CONNECTIONS
    ctext = env.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if ctext:
        cval = strtoll(ctext)
        conn = cval if 1 <= cval <= 32 else DEFAULT_CUDA_MAX_CONNECTIONS  # CUDA ignores others

    def opt(name: str) -> int | None:
        value = ints[name]
        return None if value is None else to_int32(value)

    settings = NcclSettings(
        selection=Selection(algo=rows["NCCL_ALGO"], proto=rows["NCCL_PROTO"]),
        version=version,
        max_nchannels=max_nch,
        min_nchannels=min_nch,
        max_ctas=ctas["NCCL_MAX_CTAS"],
        min_ctas=ctas["NCCL_MIN_CTAS"],
        buffsizes=buffsizes,
        nthreads=opt("NCCL_NTHREADS"),
        ll128_nthreads=opt("NCCL_LL128_NTHREADS"),
        thread_thresholds=_thread_thresholds(env, msgs),
        p2p_disable=p2p_disable,
        shm_disable=ints["NCCL_SHM_DISABLE"] == 1,
        p2p_level=p2p_level,
        cumem=ints["NCCL_CUMEM_ENABLE"] != 0,
        cuda_max_connections=conn,
        nvls_enable=2 if ints["NCCL_NVLS_ENABLE"] is None else to_int32(ints["NCCL_NVLS_ENABLE"]),
        raw=relevant_env(env),
    )
    return EnvReport(settings=settings, messages=msgs)


def drop_vars(environ: dict, names) -> dict:
    """``environ`` without ``names``: a server that overwrites or never forwards them."""
    gone = set(names)
    return {k: v for k, v in environ.items() if k not in gone}


def settings_from(env: dict | None = None, version: str = "2.27.3") -> NcclSettings:
    """Settings of ``env`` (a NAME -> string mapping) for NCCL ``version`` (tests, benchmarks)."""
    return read_env(dict(env or {}), version).settings
