"""Read what NCCL and the inference server logged: version, echoes, channels, choices, backend.

A server log interleaves every rank. NCCL's lines look like ``host:pid:tid [cudaDev] NCCL INFO
msg`` (WARN: ``host:pid:tid [dev] file.cc:123 NCCL WARN msg``; from 2.26 an optional
``[timestamp] `` leads; src/debug.cc, ncclDebugLog), possibly behind a wrapper's prefix:
vLLM's ``(VllmWorker rank=3 pid=123)``/``(Worker_TP3 pid=123)``, Ray's
``(RayWorkerWrapper pid=539, ip=10.0.0.1)`` (plus a ``[repeated 15x across cluster]`` tail when
Ray folds duplicate lines), SGLang's ``[2026-06-28 13:34:12 TP3]``. :func:`parse_log` turns the
lines into a :class:`ParsedLog`; :func:`confirmations` compares it with the set a trial
launched; :func:`allreduce_backend` says who carries the decode allreduce;
:func:`topology_from_log` and :func:`decode_choice` feed :mod:`tuner.nccl.env` and
:mod:`tuner.nccl.decode`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from tuner.nccl import env as nccl_env
from tuner.nccl.decode import DecodeChoice, nccl_name
from tuner.nccl.env import NcclVersion, Topology
from tuner.nccl.lists import FUNCS

# -- line shapes -----------------------------------------------------------------------------

_RAY = re.compile(r"^\((?P<actor>[\w.-]+) pid=(?P<pid>\d+)(?:, ip=[\w.:-]+)?\)\s?")
_WORKER = re.compile(r"^\((?P<actor>[\w.-]+)(?P<inner>[^()]*?\bpid=\d+[^()]*)\)\s?")
_SGLANG = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<tags>(?: [A-Z]+\d+)*)\]\s?")
_RAY_DEDUP = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")
_NCCL = re.compile(
    r"(?:(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+) )?\[(?P<dev>\d+)\](?P<mid>[^\n]*?) "
    r"NCCL (?P<level>INFO|WARN|TRACE)(?: (?P<msg>.*))?$")
_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?P<suffix>\S*)")
_SERVER_VERSION = re.compile(r"\b(?P<server>vLLM|sglang(?:-diffusion)?) is using nccl==(?P<v>\d+\.\d+\.\d+)")
_ECHO = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)$")
_INVALID = re.compile(r"^Invalid value (?P<value>.*) for (?P<name>NCCL_[A-Z0-9_]+), using default (?P<default>-?\d+)\.$")
_COMM = re.compile(r"\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
                   r"(?: nNodes (?P<nnodes>\d+) localRanks (?P<local>\d+))?")
_RING = re.compile(r"^Channel (?P<c>\d+)/(?P<n>\d+) :\s+(?P<order>(?:\d+\s*)+)$")
_LINK = re.compile(r"^Channel (?P<c>\d+)(?:/\d+)? : (?P<src>\d+)\[\w+\] -> (?P<dst>\d+)\[\w+\]"
                   r"(?: \[(?:send|receive)\])? via (?P<via>\S+)")
_SUMMARY = re.compile(r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?"
                      r"(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels, (?P<peer>\d+) p2p channels per peer")
_THRESHOLDS = re.compile(r"^threadThresholds (\d+)/(\d+)/(\d+) \| (\d+)/(\d+)/(\d+) \| (\d+) \| (\d+)")
_OP_NEW = re.compile(r"^(?P<func>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+) "
                     r"channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}")
_OP_TIMED = re.compile(r"^(?:(?P<func>\w+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+) "
                       r"time (?P<time>[\d.]+)")
_COLL = re.compile(r"^(?P<func>\w+): opCount \w+ sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
                   r"datatype (?P<dtype>\d+) op \d+ root -?\d+ comm \S+ \[nranks=(?P<nranks>\d+)\]")
_NVLS = re.compile(r"^NVLS multicast support is (?P<not>not )?available")
_PATTERN = re.compile(r"^Pattern \d+, crossNic \d+, nChannels \d+, bw [\d.]+/[\d.]+, type (?P<intra>\w+)/(?P<inter>\w+)")
_TOPO_NVL = re.compile(r"\+ NVL\[[\d.]+\] - (?P<peer>NVS|GPU)/")

#: NCCL's algorithm and protocol indices (src/include/device.h NCCL_ALGO_*, NCCL_PROTO_*).
_ALGO_INDEX = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
_PROTO_INDEX = ("LL", "LL128", "Simple")
#: Bytes per element of ncclDataType_t 0..11 (src/nccl.h.in; collectives.h ncclTypeSize).
_TYPE_SIZE = (1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1)


@dataclass(frozen=True)
class NcclLine:
    """One NCCL log line: who printed it and the message after ``NCCL INFO``/``WARN``."""

    process: str  # "host:pid", or "?" when the host:pid:tid part is missing
    dev: int
    level: str
    message: str
    prefix_rank: int | None  # from a wrapper prefix (vLLM rank=3, SGLang TP3), if any


def strip_prefixes(line: str) -> tuple[str, int | None, bool]:
    """``(line without wrapper prefixes, rank named by a prefix, Ray folded duplicates)``."""
    rank: int | None = None
    folded = False
    m = _RAY_DEDUP.search(line)
    if m:
        folded, line = True, line[:m.start()]
    for _ in range(3):
        m = _RAY.match(line) or _WORKER.match(line) or _SGLANG.match(line)
        if not m:
            break
        text = m.group(0)
        tp = re.search(r"(?:\brank=|\bTP_?|_TP)(\d+)", text)
        if tp:
            rank = int(tp.group(1))
        line = line[m.end():]
    return line, rank, folded


def read_line(line: str) -> NcclLine | None:
    """The NCCL part of one server-log line, or None if it is not an NCCL line."""
    body, rank, _folded = strip_prefixes(line.rstrip("\n"))
    m = _NCCL.search(body)
    if not m:
        return None
    process = f"{m.group('host')}:{m.group('pid')}" if m.group("host") else "?"
    return NcclLine(process, int(m.group("dev")), m.group("level"), m.group("msg") or "", rank)


# -- the parsed log --------------------------------------------------------------------------

@dataclass
class TuningTable:
    """NCCL's TUNING table (rank 0, src/graph/tuning.cc ncclTopoTuneModel).

    ``entries[func][(algo, proto)] = (latency_us, bandwidth_GBps)``; bandwidth 0 means disabled.
    ``max_threads[(algo, proto)]`` is the "Max NThreads" row.
    """

    entries: dict[str, dict[tuple[str, str], tuple[float, float]]] = field(default_factory=dict)
    max_threads: dict[tuple[str, str], int] = field(default_factory=dict)

    def time_us(self, func: str, algo: str, proto: str, nbytes: int) -> float | None:
        """NCCL's model time for one call: ``latency + nbytes / (1000 * bandwidth)``, Tree AllReduce
        bandwidth scaled by NCCL's correction factor (src/graph/tuning.cc, ncclTopoGetAlgoTime); None if
        the pair is disabled or absent."""
        lat, bw = self.entries.get(func, {}).get((algo, proto), (0.0, 0.0))
        if bw <= 0:
            return None
        log_size = (nbytes >> 6).bit_length() - 1 if nbytes >> 6 else -1
        if algo == "Tree" and func == "AllReduce" and 0 <= log_size < 23:
            bw *= _TREE_CORRECTION[_PROTO_INDEX.index(proto)][log_size]
        return lat + nbytes / (1000 * bw)

    def best(self, func: str, nbytes: int) -> tuple[str, str, float] | None:
        """The pair NCCL's model picks for ``func`` at ``nbytes``: ``(algo, proto, time_us)``."""
        timed = [(t, a, p) for (a, p) in self.entries.get(func, {})
                 if (t := self.time_us(func, a, p, nbytes)) is not None]
        if not timed:
            return None
        t, a, p = min(timed)
        return a, p, t


#: src/graph/tuning.cc treeCorrectionFactor (LL, LL128, Simple), indexed by log2(bytes / 64).
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)


@dataclass
class Operation:
    """One collective size NCCL logged choices for (TUNING per-operation lines).

    ``choices`` counts each distinct ``(algorithm, protocol, channels)`` seen at that size
    (several communicators or runs may differ); ``algorithm``/``protocol``/``channels`` are the
    most frequent one. ``channels`` is channelHi - channelLo + 1 (2.24+ lines), else None.
    """

    func: str
    nbytes: int
    choices: Counter[tuple[str | None, str | None, int | None]] = field(default_factory=Counter)

    @property
    def _top(self) -> tuple[str | None, str | None, int | None]:
        return self.choices.most_common(1)[0][0] if self.choices else (None, None, None)

    @property
    def algorithm(self) -> str | None:
        return self._top[0]

    @property
    def protocol(self) -> str | None:
        return self._top[1]

    @property
    def channels(self) -> int | None:
        return self._top[2]

    @property
    def count(self) -> int:
        return sum(self.choices.values())


@dataclass
class ParsedLog:
    """Everything nccl-tune reads from one server log (all ranks interleaved).

    ``echoes[name][process]``: the value NCCL echoed (``NAME set by environment to VALUE``) per
    process ``"host:pid"``; ``ranks_of[process]``: the communicator ranks that process reported;
    ``invalid[name]``: values NCCL refused ("Invalid value"); ``warnings``: every NCCL WARN text;
    ``ring_lines``/``tree_lines``: ``Channel 00/16 : 0 1 ...`` and ``Trees ...``; ``transports``:
    ``via`` targets (``P2P/IPC``, ``SHM/direct/direct``, ``NET/IB/0``); ``coll_channels`` and
    ``nvls_channels`` from the "N coll channels" line; ``operations[(func, bytes)]``.
    """

    nccl_version: NcclVersion | None = None
    version_lines: list[str] = field(default_factory=list)
    server_nccl_version: NcclVersion | None = None
    cuda_version: str | None = None
    info_lines: int = 0
    echoes: dict[str, dict[str, str]] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    ranks_of: dict[str, set[int]] = field(default_factory=dict)
    processes: set[str] = field(default_factory=set)
    nranks: int | None = None
    nnodes: int | None = None
    hosts: set[str] = field(default_factory=set)
    ring_lines: list[str] = field(default_factory=list)
    tree_lines: list[str] = field(default_factory=list)
    transports: set[str] = field(default_factory=set)
    coll_channels: int | None = None
    nvls_channels: int | None = None
    thread_thresholds: tuple[int, ...] | None = None
    warnings: list[str] = field(default_factory=list)
    tuning: TuningTable | None = None
    operations: dict[tuple[str, int], Operation] = field(default_factory=dict)
    nvls_available: bool | None = None
    graph_intra: set[str] = field(default_factory=set)
    nvlink_peers: set[str] = field(default_factory=set)
    pcie_only: bool = False
    folded: bool = False

    @property
    def ranks(self) -> list[int]:
        """Communicator ranks that logged NCCL lines (empty when no rank was reported)."""
        return sorted({r for rs in self.ranks_of.values() for r in rs})

    @property
    def transport_kinds(self) -> set[str]:
        """``{"P2P", "SHM", "NET", ...}``: the first word of each transport seen."""
        return {t.split("/")[0] for t in self.transports}

    def echoed(self, name: str) -> dict[str, str]:
        """``{process: value}`` NCCL echoed for ``name`` (empty if none)."""
        return self.echoes.get(name, {})


def _add_rank(parsed: ParsedLog, process: str, rank: int) -> None:
    parsed.ranks_of.setdefault(process, set()).add(rank)


class _TableReader:
    """Collects the TUNING table's lines (two layouts: per-algorithm blocks from 2.18,
    "Latency/AlgBw" columns before)."""

    def __init__(self) -> None:
        self.table: TuningTable | None = None
        self.columns: list[tuple[str, str]] = []
        self.algos: list[str] = []

    def feed(self, msg: str) -> TuningTable | None:
        text = msg.strip()
        if text.startswith("Algorithm") and "|" in text:
            self.algos = [t for t in text.split("|", 1)[1].split() if t != "|"]
            if self.table is None or self.algos[:1] == ["Tree"]:  # block 0 starts a new table
                self.table = TuningTable()
            return None
        if text.startswith("Latency/AlgBw"):
            self.table = TuningTable()
            pairs = re.findall(r"(\w+)/\s*(\w+)", text.split("|", 1)[1])
            self.columns = [(a, p) for a, p in pairs]
            return None
        if self.table is None:
            return None
        if text.startswith("Protocol") and self.algos:
            protos = [t for t in text.split("|", 1)[1].split() if t != "|"]
            per = max(1, len(protos) // len(self.algos))
            self.columns = [(self.algos[i // per], protos[i]) for i in range(len(protos)) if i // per < len(self.algos)]
            return None
        if text.startswith("Max NThreads"):
            for col, n in zip(self.columns, re.findall(r"\d+", text.split("|", 1)[1]), strict=False):
                self.table.max_threads[col] = int(n)
            return None
        head, _, rest = text.partition("|")
        if head.strip() in FUNCS and self.columns:
            values = re.findall(r"(-?[\d.]+)\s*/\s*(-?[\d.]+)", rest)
            row = self.table.entries.setdefault(head.strip(), {})
            for col, (lat, bw) in zip(self.columns, values, strict=False):
                row[col] = (float(lat), float(bw))
            return self.table
        return None


def parse_log(lines: Iterable[str]) -> ParsedLog:
    """Parse every line of a server log (any mix of ranks, wrappers and NCCL versions)."""
    parsed = ParsedLog()
    table = _TableReader()
    last_coll: tuple[str, int] | None = None
    for raw in lines:
        raw = raw.rstrip("\n")
        body, prefix_rank, folded = strip_prefixes(raw)
        parsed.folded |= folded
        sv = _SERVER_VERSION.search(body)
        if sv:
            parsed.server_nccl_version = NcclVersion.parse(sv.group("v"))
        if "not supported on more than two PCIe-only GPUs" in body:
            parsed.pcie_only = True
        m = _NCCL.search(body)
        if not m:
            vm = _VERSION.search(body)
            if vm and body.lstrip().startswith("NCCL version"):
                _note_version(parsed, vm)
            continue
        line = NcclLine(f"{m.group('host')}:{m.group('pid')}" if m.group("host") else "?",
                        int(m.group("dev")), m.group("level"), m.group("msg") or "", prefix_rank)
        parsed.processes.add(line.process)
        if m.group("host"):
            parsed.hosts.add(m.group("host"))
        if prefix_rank is not None:
            _add_rank(parsed, line.process, prefix_rank)
        if line.level == "WARN":
            parsed.warnings.append(line.message.strip())
            continue
        if line.level == "INFO":
            parsed.info_lines += 1
        last_coll = _read_message(parsed, line, table, last_coll)
    return parsed


def _note_version(parsed: ParsedLog, m: re.Match[str]) -> None:
    parsed.version_lines.append(m.group(0))
    parsed.nccl_version = NcclVersion.parse(m.group("v"))
    cuda = re.search(r"cuda(\d+\.\d+)", m.group("suffix"))
    if cuda:
        parsed.cuda_version = cuda.group(1)


def _read_message(parsed: ParsedLog, line: NcclLine, table: _TableReader,
                  last_coll: tuple[str, int] | None) -> tuple[str, int] | None:
    msg = line.message.strip()
    vm = _VERSION.match(msg)
    if vm:
        _note_version(parsed, vm)
        return last_coll
    if (done := table.feed(line.message)) is not None:
        parsed.tuning = done
        return last_coll
    if m := _ECHO.match(msg):
        value = m.group("value")
        if re.fullmatch(r"-?\d+\.", value):
            value = value[:-1]
        parsed.echoes.setdefault(m.group("name"), {})[line.process] = value
    elif m := _INVALID.match(msg):
        parsed.invalid[m.group("name")] = m.group("value")
    elif m := _COMM.search(msg):
        _add_rank(parsed, line.process, int(m.group("rank")))
        parsed.nranks = max(parsed.nranks or 0, int(m.group("nranks")))
        if m.group("nnodes"):
            parsed.nnodes = int(m.group("nnodes"))
    elif m := _RING.match(msg):
        parsed.ring_lines.append(msg)
    elif msg.startswith("Trees"):
        parsed.tree_lines.append(msg)
    elif m := _LINK.match(msg):
        parsed.transports.add(m.group("via"))
    elif m := _SUMMARY.match(msg):
        parsed.coll_channels = int(m.group("coll"))
        parsed.nvls_channels = int(m.group("nvls")) if m.group("nvls") else parsed.nvls_channels
    elif m := _THRESHOLDS.match(msg):
        parsed.thread_thresholds = tuple(int(x) for x in m.groups())
    elif m := _NVLS.match(msg):
        parsed.nvls_available = not m.group("not")
    elif m := _PATTERN.match(msg):
        parsed.graph_intra.add(m.group("intra"))
    elif m := _TOPO_NVL.search(msg):
        parsed.nvlink_peers.add(m.group("peer"))
    elif m := _COLL.match(msg):
        dtype = int(m.group("dtype"))
        size = _TYPE_SIZE[dtype] if dtype < len(_TYPE_SIZE) else 0
        return m.group("func"), int(m.group("count")) * size
    elif m := _OP_NEW.match(msg):
        _add_op(parsed, m.group("func"), int(m.group("bytes")), nccl_name(m.group("algo")),
                nccl_name(m.group("proto")), int(m.group("hi")) - int(m.group("lo")) + 1)
    elif m := _OP_TIMED.match(msg):
        func = m.group("func") or (last_coll[0] if last_coll else "unknown")
        algo, proto = int(m.group("algo")), int(m.group("proto"))
        _add_op(parsed, func, int(m.group("bytes")),
                _ALGO_INDEX[algo] if algo < len(_ALGO_INDEX) else None,
                _PROTO_INDEX[proto] if proto < len(_PROTO_INDEX) else None, None)
    return last_coll


def _add_op(parsed: ParsedLog, func: str, nbytes: int, algo: str | None, proto: str | None,
            channels: int | None) -> None:
    op = parsed.operations.setdefault((func, nbytes), Operation(func, nbytes))
    op.choices[(algo, proto, channels)] += 1


def parse_log_file(path: str | Path) -> ParsedLog:
    """:func:`parse_log` on a file, read as UTF-8 with undecodable bytes replaced."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_log(f)


# -- what the log says about the machine and the choice --------------------------------------

def topology_from_log(parsed: ParsedLog, *, gpu_arch: int | None = None) -> Topology | None:
    """The :class:`Topology` the log shows, or None when no communicator size was logged.

    ``link``: ``nvswitch`` when NCCL saw an NVSwitch or NVLS multicast, ``nvlink`` when its
    graph search or topology dump shows NVLink between GPUs, ``pcie`` when the graph's intra-node
    path is PCIe (PIX/PXB/PHB/SYS) or vLLM/SGLang logged that the GPUs are PCIe-only; else None.
    ``gpu_arch`` is not in NCCL's INIT lines: pass it from NVML if known.
    """
    if parsed.nranks is None:
        return None
    link: Literal["pcie", "nvlink", "nvswitch"] | None = None
    if "NVS" in parsed.nvlink_peers or parsed.nvls_available or (parsed.nvls_channels or 0) > 0:
        link = "nvswitch"
    elif parsed.nvlink_peers or parsed.graph_intra & {"NVL", "NVB"}:
        link = "nvlink"
    elif parsed.pcie_only or parsed.graph_intra & {"PIX", "PXB", "PHB", "SYS", "P2C", "PXN"}:
        link = "pcie"
    nnodes = parsed.nnodes or max(1, len(parsed.hosts))
    has_nvls = bool(parsed.nvls_available) or (parsed.nvls_channels or 0) > 0
    return Topology(nranks=parsed.nranks, nnodes=nnodes, link=link, has_nvls=has_nvls, gpu_arch=gpu_arch)


def decode_choice(parsed: ParsedLog, nbytes: int, func: str = "AllReduce") -> DecodeChoice | None:
    """The (algorithm, protocol) NCCL used or would use for ``func`` at ``nbytes``, or None.

    First a per-operation TUNING line at exactly that size; else the TUNING table's cost model
    (:meth:`TuningTable.best`). Both need ``NCCL_DEBUG_SUBSYS`` to include TUNING.
    """
    op = parsed.operations.get((func, nbytes))
    if op and op.algorithm and op.protocol:
        return DecodeChoice(op.algorithm, op.protocol, "per-operation TUNING line")
    if parsed.tuning:
        best = parsed.tuning.best(func, nbytes)
        if best:
            return DecodeChoice(best[0], best[1], f"TUNING table cost model ({best[2]:.1f} us)")
    return None


# -- confirmations ---------------------------------------------------------------------------

#: Variables NCCL reads, and so echoes, during every communicator init when they are set.
_ECHOED_AT_INIT = frozenset({
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_THREAD_THRESHOLDS", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE",
    "NCCL_LL128_BUFFSIZE", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",
    "NCCL_MAX_CTAS", "NCCL_MIN_CTAS", "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_P2P_LEVEL",
    "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE",
})


class Confirmations(NamedTuple):
    """``confirmed`` name -> value NCCL echoed; ``not_applied`` name -> why; ``unverifiable`` names."""

    confirmed: dict[str, str]
    not_applied: dict[str, str]
    unverifiable: list[str]


def why_unverifiable(name: str, value: str, parsed: ParsedLog) -> str:
    """The reason :func:`confirmations` could not verify ``name=value``."""
    if not name.startswith("NCCL_"):
        return f"{name} is read by CUDA or the server, not NCCL: NCCL never echoes it"
    if parsed.info_lines == 0:
        return "the log holds no NCCL INFO line (NCCL_DEBUG=INFO was not in effect)"
    if name == "NCCL_P2P_DISABLE":
        return "NCCL echoes NCCL_P2P_DISABLE only when it is 1 (src/graph/paths.cc, ncclGetLevel)"
    if name == "NCCL_SHM_DISABLE":
        return ("NCCL reads NCCL_SHM_DISABLE only for peers P2P cannot serve (src/transport/shm.cc); "
                "no SHM connection was needed")
    if name == "NCCL_DEBUG_SUBSYS":
        return "NCCL does not echo NCCL_DEBUG_SUBSYS"
    return f"NCCL echoes {name} only when it reads it, which this run may not have needed"


def confirmations(launched_env: Mapping[str, str], parsed: ParsedLog,
                  version: NcclVersion | None = None) -> Confirmations:
    """Compare the set a trial launched with what NCCL echoed on every rank.

    A variable is *confirmed* when every process that logged NCCL lines echoed it with the
    launched value (compared canonically: ``ring`` = ``Ring``, ``0x400000`` = ``4194304``,
    ``2`` = ``PXB``); *not applied* when NCCL reads it at every init yet no process echoed it,
    some did not (unless Ray folded duplicate lines), one echoed another value, or NCCL refused
    it ("Invalid value"); *unverifiable* when NCCL never echoes it (CUDA_DEVICE_MAX_CONNECTIONS,
    ``NCCL_P2P_DISABLE=0``), reads it only on some paths (NCCL_SHM_DISABLE), or the log has no
    NCCL INFO line at all. NCCL_DEBUG itself is confirmed by the presence of INFO lines.
    """
    v = parsed.nccl_version or parsed.server_nccl_version or version
    confirmed: dict[str, str] = {}
    not_applied: dict[str, str] = {}
    unverifiable: list[str] = []
    logged = {p for p in parsed.processes if p != "?"}
    if parsed.ranks_of:  # a process that never initialised a communicator cannot echo init-time reads
        logged &= set(parsed.ranks_of)
    for name, value in launched_env.items():
        if name == "NCCL_DEBUG":
            if parsed.info_lines:
                confirmed[name] = "INFO"
            elif value.upper() in ("INFO", "TRACE"):
                not_applied[name] = "no NCCL INFO line in the log: NCCL never saw NCCL_DEBUG"
            else:
                unverifiable.append(name)
            continue
        if not name.startswith("NCCL_") or parsed.info_lines == 0 or name == "NCCL_DEBUG_SUBSYS":
            unverifiable.append(name)
            continue
        if name in parsed.invalid:
            not_applied[name] = f"NCCL refused {parsed.invalid[name]!r} (\"Invalid value\") and used its default"
            continue
        want = nccl_env.canonical_value(name, value, v)
        echoes = _echoes_for(name, want, parsed, v)
        if not echoes:
            if name == "NCCL_SHM_DISABLE" and want == "1" and "SHM" in parsed.transport_kinds:
                not_applied[name] = "NCCL connected peers over SHM, yet no rank echoed NCCL_SHM_DISABLE=1"
            elif _always_read(name, launched_env, parsed, v):
                not_applied[name] = "no rank echoed it, though NCCL reads it at every communicator init"
            else:
                unverifiable.append(name)
            continue
        wrong = {p: e for p, e in echoes.items() if nccl_env.canonical_value(name, e, v) != want}
        if wrong:
            who, got = next(iter(sorted(wrong.items())))
            not_applied[name] = (f"{_who(parsed, who)} echoed {name}={got} but the trial launched {value}"
                                 + (f" ({len(wrong)} processes differ)" if len(wrong) > 1 else ""))
            continue
        silent = sorted(logged - set(echoes)) if _always_read(name, launched_env, parsed, v) and not parsed.folded else []
        if silent:
            not_applied[name] = (f"{', '.join(_who(parsed, p) for p in silent)} logged NCCL lines but did not "
                                 "echo it")
            continue
        confirmed[name] = next(iter(echoes.values()))
    return Confirmations(confirmed, not_applied, unverifiable)


def _always_read(name: str, env: Mapping[str, str], parsed: ParsedLog, version: NcclVersion | None) -> bool:
    """Whether NCCL reads ``name`` at every communicator init in this run (so silence means dropped)."""
    if name not in _ECHOED_AT_INIT:
        return False
    if name == "NCCL_P2P_LEVEL" and _p2p_disabled(env, version):
        return False  # NCCL_P2P_DISABLE=1 wins before the level is read (src/graph/paths.cc, ncclGetLevel)
    # builds before CUDA 12.1 compile src/transport/nvls.cc's stubs, which never read NCCL_NVLS_ENABLE
    return not (name == "NCCL_NVLS_ENABLE" and (parsed.cuda_version or "").startswith("11."))


def _p2p_disabled(env: Mapping[str, str], version: NcclVersion | None) -> bool:
    return "NCCL_P2P_DISABLE" in env and nccl_env.canonical_value("NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"], version) == "1"


def _echoes_for(name: str, want: str, parsed: ParsedLog, version: NcclVersion | None) -> dict[str, str]:
    """Echoes of ``name``; up to 2.22 NCCL_P2P_DISABLE=1 is echoed as ``NCCL_P2P_LEVEL ... LOC``."""
    echoes = dict(parsed.echoed(name))
    if name == "NCCL_P2P_DISABLE" and not echoes and want == "1" and (
            version is None or version < nccl_env.P2P_DISABLE_ECHO_FROM):
        echoes = {p: "1" for p, e in parsed.echoed("NCCL_P2P_LEVEL").items() if e == "LOC"}
    return echoes


def _who(parsed: ParsedLog, process: str) -> str:
    ranks = sorted(parsed.ranks_of.get(process, ()))
    return f"rank {ranks[0]}" if len(ranks) == 1 else (f"ranks {ranks}" if ranks else f"process {process}")


# -- who carries the decode allreduce --------------------------------------------------------

BackendName = Literal["nccl", "nccl_symmetric", "custom_allreduce", "symm_mem", "flashinfer", "mscclpp",
                      "none", "unknown"]


@dataclass(frozen=True)
class Backend:
    """Who runs the server's decode allreduce.

    ``name``: ``nccl`` (pynccl / torch.distributed), ``nccl_symmetric`` (NCCL symmetric-memory
    kernels, NCCL_ALGO/NCCL_PROTO do not select them), ``custom_allreduce``, ``symm_mem`` (torch
    symmetric memory), ``flashinfer``, ``mscclpp``, ``none`` (tensor parallelism 1) or
    ``unknown``; ``nccl_on_decode_path``: True when NCCL variables can change the decode
    allreduce, False when they cannot, None when unknown; ``reason``: the evidence, quoted.
    """

    name: BackendName
    nccl_on_decode_path: bool | None
    reason: str
    server: Literal["vllm", "sglang"] | None = None
    nccl_version: NcclVersion | None = None


_CA_DISABLED = re.compile(r"Custom ?[Aa]ll[Rr]educe(?:V2)? is disabled (?:because|due to) (?P<why>[^.]*)")
_VLLM_MARK = re.compile(r"\bvLLM\b|vllm\.entrypoints|VllmWorker|Worker_TP\d|EngineCore")
_SGLANG_MARK = re.compile(r"\bsglang\b|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)* TP\d+")


def _flag(argv: Sequence[str], *names: str) -> bool:
    """True when one of ``names`` is given as a bare flag or as ``--flag=true``/``=1``."""
    for a in argv:
        key, sep, val = a.partition("=")
        if key in names and (not sep or val.lower() in ("1", "true")):
            return True
    return False


def _option(argv: Sequence[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            return argv[i + 1]
        key, sep, val = a.partition("=")
        if sep and key in names:
            return val
    return None


def _server_of(argv: Sequence[str], text: str) -> Literal["vllm", "sglang"] | None:
    joined = " ".join(argv)
    if "sglang" in joined:
        return "sglang"
    if "vllm" in joined:
        return "vllm"
    if _SGLANG_MARK.search(text):
        return "sglang"
    if _VLLM_MARK.search(text):
        return "vllm"
    return None


def allreduce_backend(log_lines: Iterable[str], argv: Sequence[str], env: Mapping[str, str] | None = None) -> Backend:
    """Which backend carries the decode allreduce, from the server's log, command and environment.

    vLLM tries, per allreduce, its custom allreduce (world size 2, or more GPUs all joined by
    NVLink; tensors under 8 MiB), then torch symmetric memory (``VLLM_ALLREDUCE_USE_SYMM_MEM``,
    NVSwitch multicast only), then pynccl (vllm/distributed/device_communicators/
    cuda_communicator.py, all_reduce; custom_all_reduce.py, CustomAllreduce.__init__ and
    should_custom_ar). It logs "Custom allreduce is disabled because ..." when it cannot use its
    kernel (more than two PCIe-only GPUs, no P2P, unsupported world size, several nodes) and
    ``--disable-custom-all-reduce`` turns it off. SGLang follows the same custom allreduce with
    ``--disable-custom-all-reduce``, ``--enable-mscclpp``, ``--enable-torch-symm-mem`` and
    ``--enable-symm-mem`` (NCCL symmetric memory) (sglang/srt/server_args.py).
    """
    env = env or {}
    lines = list(log_lines)
    text = "\n".join(lines)
    server = _server_of(argv, text)
    parsed_versions = [m.group("v") for m in _SERVER_VERSION.finditer(text)] or \
        [m.group("v") for m in _VERSION.finditer(text)]
    version = NcclVersion.parse(parsed_versions[-1]) if parsed_versions else None

    def result(name: BackendName, on_path: bool | None, reason: str) -> Backend:
        return Backend(name, on_path, reason, server, version)

    tp_text = _option(argv, "--tensor-parallel-size", "-tp", "--tp", "--tp-size")
    config_tp = re.search(r"tensor_parallel_size=(\d+)", text)
    tp = int(tp_text) if tp_text and tp_text.isdigit() else (int(config_tp.group(1)) if config_tp else None)
    if tp == 1:
        return result("none", False, "tensor parallel size 1: the decode step has no allreduce")
    if server is None:
        return result("unknown", None, "neither the command nor the log names vLLM or SGLang")
    disabled = [m.group(0).strip() for m in _CA_DISABLED.finditer(text)]
    # the engine-config line ("..., disable_custom_all_reduce=True, ..."), not the warning's advice
    flag_off = _flag(argv, "--disable-custom-all-reduce") or re.search(r"disable_custom_all_reduce=True[,)]", text)
    if not flag_off and not disabled:
        if server == "vllm" and not (_VLLM_MARK.search(text) or tp):
            return result("unknown", None, "no vLLM start-up line in the log to judge the allreduce backend by")
        return result("custom_allreduce", False,
                      f"{server}'s custom allreduce is on (no \"Custom allreduce is disabled\" line, no "
                      "--disable-custom-all-reduce): it takes decode-sized allreduces, so NCCL variables "
                      "cannot change them (NCCL still runs the per-step logits all-gather in vLLM's V1 engine); add "
                      "--disable-custom-all-reduce to the server command to measure NCCL")
    why = "--disable-custom-all-reduce" if flag_off else f"\"{disabled[0]}\""
    if server == "vllm":
        if env.get("VLLM_ALLREDUCE_USE_FLASHINFER", "0") not in ("0", "") and "FlashInfer All Reduce is disabled" not in text:
            return result("flashinfer", False, f"custom allreduce off ({why}) but VLLM_ALLREDUCE_USE_FLASHINFER is set")
        if env.get("VLLM_USE_NCCL_SYMM_MEM", "0") not in ("0", ""):
            return result("nccl_symmetric", None, f"custom allreduce off ({why}); VLLM_USE_NCCL_SYMM_MEM routes "
                                                  "allreduces to NCCL symmetric kernels, which NCCL_ALGO/PROTO do not pick")
        if env.get("VLLM_ALLREDUCE_USE_SYMM_MEM", "") == "1" and "SymmMemCommunicator" not in text:
            return result("symm_mem", None, f"custom allreduce off ({why}); VLLM_ALLREDUCE_USE_SYMM_MEM=1 lets torch "
                                            "symmetric memory take small allreduces on NVSwitch GPUs")
    else:
        if _flag(argv, "--enable-mscclpp"):
            return result("mscclpp", False, f"custom allreduce off ({why}) but --enable-mscclpp takes small allreduces")
        if _flag(argv, "--enable-torch-symm-mem"):
            return result("symm_mem", None, f"custom allreduce off ({why}); --enable-torch-symm-mem takes "
                                            "allreduces on SM90+ NVLink GPUs")
        if _flag(argv, "--enable-symm-mem"):
            return result("nccl_symmetric", None, f"custom allreduce off ({why}); --enable-symm-mem uses NCCL "
                                                  "symmetric kernels, which NCCL_ALGO/PROTO do not pick")
    return result("nccl", True, f"custom allreduce off: {why}; the decode allreduce goes to NCCL (pynccl)")


#: Variables a server overwrites in its own environment before NCCL starts, with the source.
SERVER_OVERRIDES: dict[str, dict[str, str]] = {
    "sglang": {
        "CUDA_DEVICE_MAX_CONNECTIONS": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it",
        "NCCL_CUMEM_ENABLE": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it (0, or --enable-symm-mem)",
        "NCCL_NVLS_ENABLE": "sglang/srt/entrypoints/engine.py, _set_envs_and_config sets it from --enable-nccl-nvls",
    },
    "vllm": {
        "NCCL_CUMEM_ENABLE": "vllm/env_override.py (older: vllm/__init__.py) sets 0 unless already non-zero",
    },
}
