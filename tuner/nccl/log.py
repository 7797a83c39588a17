"""Read what NCCL logged in a server log: version, echoes, ranks, channels, transports, choices.

:func:`parse_log` turns the lines (any mix of ranks, wrappers and NCCL versions, read by
:mod:`tuner.nccl.lines`) into a :class:`ParsedLog`; :func:`topology_from_log` and
:func:`decode_choice` feed the rules of :mod:`tuner.nccl.choice` and :mod:`tuner.nccl.decode`;
:func:`tuner.nccl.proof.confirmations` compares it with the set a trial launched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from tuner.nccl.decode import COPY_ENGINE, SYMMETRIC, DecodeChoice, nccl_name
from tuner.nccl.lines import (
    NCCL_VERSION,
    RAY_COPIED_ENV,
    SERVER_NCCL_VERSION,
    NcclLine,
    read_line,
    strip_wrappers,
)
from tuner.nccl.p2p import cpu_kind
from tuner.nccl.tuning import TuningTable, TuningTableReader
from tuner.nccl.types import NcclVersion, Topology

__all__ = [
    "LINK",
    "NET_LINE",
    "SERVER_LOG",
    "LogSource",
    "Operation",
    "ParsedLog",
    "decode_choice",
    "parse_log",
    "parse_sources",
    "topology_from_log",
]

#: The label of the server's own output (stdout and stderr through nccl-tune's pipe).
SERVER_LOG = "server log"

#: An echo: ``NAME set by environment to VALUE`` (src/misc/param.cc, ncclLoadParam and the env
#: getters), and the NET subsystem's ``NCCL_SOCKET_IFNAME set to X`` / ``NCCL_IB_HCA set to X``
#: (src/misc/socket.cc and src/transport/net_ib.cc in 2.28, NCCL_ names only).
_ECHO = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) set (?P<env>by environment )?to (?P<value>.*?)$")
_INVALID = re.compile(r"^Invalid value (?P<value>.*) for (?P<name>NCCL_[A-Z0-9_]+), using default (?P<default>-?\d+)\.$")
_COMPLETE = re.compile(r"\bInit COMPLETE\b")
_COMM = re.compile(r"\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)"
                   r"(?: nNodes (?P<nnodes>\d+) localRanks (?P<local>\d+))?")
_RING = re.compile(r"^Channel (?P<c>\d+)/(?P<n>\d+) :\s+(?P<order>(?:\d+\s*)+)$")
#: A connection: ``Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s`` (src/transport/p2p.cc; the bus
#: id in hex, ``"%d[%lx]"``, up to 2.18: ``0[101c0]``), ``Channel %02d : ...via SHM/%s/%s`` (shm.cc),
#: ``... [send] via NET/%s/%d...`` and ``[receive]`` (net.cc). The transport runs to the end of the line
#: and may hold spaces (``P2P/direct pointer/read``, ``NET/NCCL RDMA Plugin v6/0/GDRDMA/Shared``).
#: P2P, SHM and ``[send]`` lines are logged by ``src``, ``[receive]`` lines by ``dst``.
LINK = re.compile(r"^Channel (?P<c>\d+)(?:/\d+)? : (?P<src>\d+)\[-?[0-9a-fA-Fx]+\] -> (?P<dst>\d+)\[-?[0-9a-fA-Fx]+\]"
                   r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S.*?)(?: comm 0x[0-9a-f]+ nRanks \d+)?\s*$")
#: ``Init timings: rank %d nranks %d ...`` (2.22, src/init.cc) and ``Init timings - %s: rank %d nranks %d``
#: (2.26+): a line stating its thread's rank.
_TIMINGS = re.compile(r"^Init timings(?::| - \w+:) rank (?P<rank>\d+) nranks (?P<nranks>\d+)")
_SUMMARY = re.compile(r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?"
                      r"(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels, (?P<peer>\d+) p2p channels per peer")
_THRESHOLDS = re.compile(r"^threadThresholds (\d+)/(\d+)/(\d+) \| (\d+)/(\d+)/(\d+) \| (\d+) \| (\d+)")
_OP_NEW = re.compile(r"^(?P<func>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+) "
                     r"channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}")
_OP_TIMED = re.compile(r"^(?:(?P<func>\w+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+) "
                       r"time (?P<time>[\d.]+)")
#: NCCL's symmetric-kernel per-operation line (2.27+): ``"%s [Symmetric]: %ld Bytes -> Kernel %s
#: nchannels %d nthreads %d"`` (src/enqueue.cc, ncclLaunchPrepare, v2.27.3-1, every rank), from
#: 2.28 with `` nWorks %d`` (src/scheduler/symmetric_sched.cc, ncclSymmetricTaskScheduler,
#: v2.28.9-1 to v2.30.7-1, rank 0). The kernel is ncclSymKernelIdToString / ncclSymkKernelIdToString.
_OP_SYM = re.compile(r"^(?P<func>\w+) \[Symmetric\]: (?P<bytes>\d+) Bytes -> Kernel (?P<kernel>\S+) "
                     r"nchannels (?P<nc>\d+) nthreads (?P<nt>\d+)(?: nWorks \d+)?$")
#: NCCL's copy-engine per-operation lines (2.29+, rank 0): ``"%s [Copy Engine]: %ld Bytes ->
#: cudaMemcpy%s"`` (the tail ``"; CE synchronization with NVLS"`` or empty; src/enqueue.cc,
#: ncclLaunchPrepare, v2.29.7-1; src/ce_coll.cc, scheduleCeCollTaskToPlan, v2.30.7-1) and
#: ``"%s [Hierarchical CE]: %ld Bytes -> RMA proxy + CE"`` (ce_coll.cc, v2.30.7-1).
_OP_CE = re.compile(r"^(?P<func>\w+) \[(?:Copy Engine|Hierarchical CE)\]: (?P<bytes>\d+) Bytes -> "
                    r"(?P<how>cudaMemcpy|RMA proxy \+ CE)")
_COLL = re.compile(r"^(?P<func>\w+): opCount \w+ sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
                   r"datatype (?P<dtype>\d+) op \d+ root -?\d+ comm \S+ \[nranks=(?P<nranks>\d+)\]")
_NVLS = re.compile(r"^NVLS multicast support is (?P<not>not )?available")
_PATTERN = re.compile(r"^Pattern \d+, crossNic \d+, nChannels \d+, bw [\d.]+/[\d.]+, type (?P<intra>\w+)/(?P<inter>\w+)")
_TOPO_CPU = re.compile(r"^CPU/[0-9A-Fa-f]+(?:-[0-9a-f]+)? \((?P<arch>-?\d+)/(?P<vendor>-?\d+)/-?\d+\)$")
_TOPO_NVL = re.compile(r"\+ NVL\[[\d.]+\] - (?P<peer>NVS|GPU)/")
#: The GRAPH lines kept whole for :func:`tuner.nccl.machine.machine_from_log`: the topology
#: (src/graph/topo.cc, ncclTopoPrint "=== System : maxBw %2.1f totalBw %2.1f ===" and
#: ncclTopoPrintRec "CPU/0-0 (1/2/-1)", "+ PCI[24.0] - GPU/0-1b000 (0)"), the paths
#: (src/graph/paths.cc, printNodePaths "GPU/0-1b000 :GPU/0-1b000 (0/5000.0/LOC) ..."), the graphs
#: (src/graph/search.cc, ncclTopoPrintGraph "Pattern %d, ..." and " 0 : GPU/0 GPU/1") and the
#: search fallback (ncclTopoCompute "Could not find a path for pattern %d, ...").
GRAPH_LINE = re.compile(
    r"^(?:=== System : |Pattern \d+, crossNic |Could not find a path for pattern "
    r"|\s*\d+ :(?: (?:GPU|NET)/\S+)+\s*$|(?:GPU|NET|GIN|RMA)/[0-9A-Fa-f]+(?:-[0-9a-f]+)? :"
    r"|\s*(?:\+ [A-Z0-9]*\[[\d.]+\] - )?(?:GPU|PCI|NVS|CPU|NIC|NET|GIN|RMA|DEV|CXB)/[0-9A-Fa-f]+)")

#: NCCL's NET lines kept whole per process for :func:`tuner.nccl.netlog.read_network`, spelled alike
#: v2.18.1-1 to v2.30.7-1: the transports' init (src/transport/net_ib.cc, net_ib/init.cc from 2.30,
#: ncclIbInitDevices "NET/IB : Using%s %s; OOB %s:%s" and "NET/IB : No device found.", WARN "NET/IB :
#: No IP interface found."; src/transport/net_socket.cc "NET/Socket : Using%s", WARN "NET/Socket : no
#: interface found"), the network chosen (src/init.cc "Using network %s"; 2.28+ "Initialized NET plugin
#: %s", "Assigned NET plugin %s to comm"), GPU Direct RDMA per HCA (src/graph/topo.cc "NET/%s : GPU Direct
#: RDMA %s for HCA %d '%s'") and per GPU (src/graph/paths.cc, ncclTopoCheckGdr, INFO up to 2.29), and the
#: RoCE GID warnings (src/misc/ibvwrap.cc "Call to ibv_modify_qp failed with ..." and "Call to
#: ibv_query_gid failed ..."; "NET/IB : %s:%d GID table changed"), and no libibverbs to load
#: (src/misc/ibvsymbols.cc "Failed to open libibverbs.so[.1]").
NET_LINE = re.compile(
    r"^(?:NET/IB : (?:Using|No device found|No IP interface found|\S+:\d+ GID table changed)|NET/Socket : (?:Using|no interface)"
    r"|Using network \S|Initialized NET plugin |Assigned NET plugin |NET/\S+ : GPU Direct RDMA (?:Enabled|Disabled) for HCA"
    r"|GPU Direct RDMA (?:Enabled|Disabled) for GPU|Call to ibv_(?:modify_qp|query_gid) failed"
    r"|Failed to open libibverbs)")

#: A warning of NCCL's network transports (``NET/IB: open failed in ncclIbRoceGetVersionNum: ...``,
#: ``NET/IB : Got async event ...``, ``NET/Socket : ...``; src/transport/net_ib*, net_socket.cc):
#: kept with the NET lines whatever its words, so the triage can quote why NCCL left IB.
NET_WARN = re.compile(r"^NET/(?:IB|Socket)\s*:")

#: NCCL's algorithm and protocol indices (src/include/device.h NCCL_ALGO_*, NCCL_PROTO_*).
_ALGO_INDEX = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
_PROTO_INDEX = ("LL", "LL128", "Simple")
#: Bytes per element of ncclDataType_t 0..11 (src/nccl.h.in; collectives.h ncclTypeSize).
_TYPE_SIZE = (1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1)


@dataclass
class Operation:
    """One collective size NCCL logged choices for (TUNING per-operation lines).

    ``choices`` counts each distinct ``(algorithm, protocol, channels)`` seen at that size
    (several communicators or runs may differ); ``algorithm``/``protocol``/``channels`` are the
    most frequent one. ``channels`` is channelHi - channelLo + 1 (2.24+ lines), a symmetric
    kernel's ``nchannels``, else None. A symmetric kernel is ``(SYMMETRIC, kernel name,
    nchannels)``, a copy-engine operation ``(COPY_ENGINE, "cudaMemcpy" or "RMA proxy + CE", None)``.
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


@dataclass(frozen=True)
class LogSource:
    """One place NCCL's lines were read from: ``label`` (:data:`SERVER_LOG`, or an NCCL_DEBUG_FILE
    path as shown to the user), its whole ``lines``, and for a pipe the fragments of cut lines
    whose tails never came (``cut``: ``(process or None, text)``), how many were rejoined, and
    which ``lines`` (indices) a join made: an echo on one proves the launched value, never another."""

    label: str
    lines: list[str]
    cut: tuple[tuple[str | None, str], ...] = ()
    rejoined: int = 0
    joined_lines: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Fold:
    """A Ray-folded line (``[repeated Nx across cluster]``): it stands for ``count`` copies, the
    one shown (``process``'s own line, read as such) and ``count - 1`` hidden ones from processes
    it does not name; numbers may differ between them (Ray's dedup ignores words holding digits). ``kind``: ``"echo"`` (then ``name`` and ``value``), ``"comm"``, ``"complete"``, ``"other"``."""

    count: int
    kind: str
    process: str
    name: str = ""
    value: str = ""


@dataclass
class ParsedLog:
    """Everything nccl-tune reads from one server log (all ranks interleaved).

    ``echoes[name][process]``: the value NCCL echoed (``NAME set by environment to VALUE``) per
    process ``"host:pid"``; ``ranks_of[process]``: the communicator ranks that process reported;
    ``invalid[name]``: values NCCL refused ("Invalid value"); ``warnings``: every NCCL WARN text;
    ``ring_lines``/``tree_lines``: ``Channel 00/16 : 0 1 ...`` and ``Trees ...``; ``transports``:
    ``via`` targets (``P2P/IPC``, ``SHM/direct/direct``, ``NET/IB/0``); ``coll_channels`` and
    ``nvls_channels`` from the "N coll channels" line; ``operations[(func, bytes)]``.

    Provenance, for the per-rank proof (:mod:`tuner.nccl.proof`): ``comm_ranks[process]`` the
    ``(rank, nRanks)`` of each communicator it joined; ``complete`` the processes whose
    ``Init COMPLETE`` reached the log (every init-time echo comes before it); ``source_of[process]``
    and ``echo_source[name][process]`` the :class:`LogSource` label a process's lines and echo
    came from; ``cut[process]`` fragments of its lines that lost their tails (``cut_unknown``: of
    no known process); ``joined_echoes[name]`` the processes whose echo of it is on a line the
    pipe cut and :func:`tuner.nccl.rejoin.rejoin` put back; ``folds`` Ray-folded lines; ``ray_copied_env`` (what
    a server's Ray executor says it copies to workers) and ``ray_workers`` (Ray worker prefixes seen).

    NCCL's model of the machine, kept whole for :func:`tuner.nccl.machine.machine_from_log`:
    ``graph_lines[process]`` its GRAPH lines (:data:`GRAPH_LINE`: topology, paths, graphs, the
    search fallback whether WARN or INFO) and ``peer_lines[process]`` its channel transport lines
    (``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC``), both in order and with that process's
    ``comm 0x... rank %d nRanks %d`` lines among them (they say which communicator the lines belong to).
    Both are keyed by logging thread (``host:pid:tid``), not process: nccl-tests ``-t``/``-g`` runs
    several ranks in one process, one thread each, and their lines interleave.

    Threads: ``threads`` every logging thread (``host:pid:tid`` as NCCL printed it, ``host:pid``
    without a tid); ``thread_ranks[thread]`` the ranks a thread's own lines state (an init or comm
    line, ``Init timings``, or a connection it logged); ``ranks_of[process]`` is their union per
    process. ``peers[(src, dst, via)]`` counts channels per connection; ``diag`` the ``NCCL DIAG``
    messages (2.31+ init diagnostics, NCCL_RUN_DIAGNOSTICS); ``net_lines[process]`` its NET lines
    (:data:`NET_LINE`: the network's init, the network chosen, GPU Direct RDMA, RoCE GID warnings),
    WARN or INFO, in order.
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
    folds: list[Fold] = field(default_factory=list)
    comm_ranks: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    complete: set[str] = field(default_factory=set)
    source_of: dict[str, str] = field(default_factory=dict)
    echo_source: dict[str, dict[str, str]] = field(default_factory=dict)
    cut: dict[str, int] = field(default_factory=dict)
    cut_unknown: int = 0
    joined_echoes: dict[str, set[str]] = field(default_factory=dict)
    rejoined: int = 0
    sources: list[str] = field(default_factory=list)
    ray_copied_env: list[str] | None = None
    ray_workers: bool = False
    graph_lines: dict[str, list[NcclLine]] = field(default_factory=dict)
    peer_lines: dict[str, list[NcclLine]] = field(default_factory=dict)
    threads: set[str] = field(default_factory=set)
    thread_ranks: dict[str, set[int]] = field(default_factory=dict)
    peers: dict[tuple[int, int, str], int] = field(default_factory=dict)
    diag: list[str] = field(default_factory=list)
    net_lines: dict[str, list[NcclLine]] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        """Communicator ranks that logged NCCL lines (empty when no rank was reported)."""
        return sorted({r for rs in self.ranks_of.values() for r in rs})

    def ranks_of_process(self, process: str) -> set[int]:
        """The ranks ``process`` (``host:pid``) ran, from any of its threads (empty if none stated)."""
        return set(self.ranks_of.get(process, set()))

    @property
    def transport_kinds(self) -> set[str]:
        """``{"P2P", "SHM", "NET", ...}``: the first word of each transport seen."""
        return {t.split("/")[0] for t in self.transports}

    def echoed(self, name: str) -> dict[str, str]:
        """``{process: value}`` NCCL echoed for ``name`` (empty if none)."""
        return self.echoes.get(name, {})


def _add_rank(parsed: ParsedLog, process: str, rank: int, thread: str | None = None) -> None:
    parsed.ranks_of.setdefault(process, set()).add(rank)
    if thread is not None and process != "?":
        parsed.thread_ranks.setdefault(thread, set()).add(rank)


def _echo(msg: str) -> re.Match[str] | None:
    """An echo (:data:`_ECHO`); the form without "by environment" only for an ``NCCL_`` name."""
    m = _ECHO.match(msg)
    return m if m and (m.group("env") or m.group("name").startswith("NCCL_")) else None


def parse_log(lines: Iterable[str]) -> ParsedLog:
    """Parse every line of a server log (any mix of ranks, wrappers and NCCL versions)."""
    return parse_sources([LogSource(SERVER_LOG, list(lines))])


def parse_sources(sources: Iterable[LogSource]) -> ParsedLog:
    """Parse NCCL's files and the server log together into one :class:`ParsedLog`, remembering
    which source each process's lines came from (the first that named it)."""
    parsed = ParsedLog()
    for source in sources:
        parsed.sources.append(source.label)
        parsed.rejoined += source.rejoined
        _parse_lines(parsed, source.lines, source.label, source.joined_lines)
        for process, _text in source.cut:
            if process is None:
                parsed.cut_unknown += 1
            else:
                parsed.cut[process] = parsed.cut.get(process, 0) + 1
                parsed.processes.add(process)
                parsed.source_of.setdefault(process, source.label)
    return parsed


def _parse_lines(parsed: ParsedLog, lines: Iterable[str], label: str, joined: frozenset[int] = frozenset()) -> None:
    table = TuningTableReader()
    last_coll: tuple[str, int] | None = None
    for index, raw in enumerate(lines):
        raw = raw.rstrip("\n")
        if raw.startswith("("):
            parsed.ray_workers |= raw.startswith("(RayWorkerWrapper") or "ip=" in raw[:80]
        body, prefix_rank, folded = strip_wrappers(raw)
        parsed.folded |= bool(folded)
        if rc := RAY_COPIED_ENV.search(body):
            parsed.ray_copied_env = [a or b for a, b in re.findall(r"'([^']*)'|\"([^\"]*)\"", rc.group("names"))]
        sv = SERVER_NCCL_VERSION.search(body)
        if sv:
            parsed.server_nccl_version = NcclVersion.parse(sv.group("v"))
        if "not supported on more than two PCIe-only GPUs" in body:
            parsed.pcie_only = True
        line = read_line(body, prefix_rank)
        if line is None:
            vm = NCCL_VERSION.search(body)
            if vm and body.lstrip().startswith("NCCL version"):
                _note_version(parsed, vm)
            continue
        parsed.processes.add(line.process)
        if line.process != "?":
            parsed.threads.add(line.thread)
        parsed.source_of.setdefault(line.process, label)
        if line.host:
            parsed.hosts.add(line.host)
        if prefix_rank is not None:
            _add_rank(parsed, line.process, prefix_rank)
        if line.level == "DIAG":
            parsed.diag.append(line.message.strip())
            continue
        if NET_LINE.match(line.message.strip()) or (line.level == "WARN" and NET_WARN.match(line.message.strip())):
            parsed.net_lines.setdefault(line.process, []).append(line)
        if line.level == "WARN":
            parsed.warnings.append(line.message.strip())
            if GRAPH_LINE.match(line.message):  # the search fallback is a WARN up to 2.26
                parsed.graph_lines.setdefault(line.thread, []).append(line)
            continue
        if line.level == "INFO":
            parsed.info_lines += 1
        if folded:  # the copy shown is its process's own line; the others are counted apart
            _note_fold(parsed, line, folded)
        if _COMPLETE.search(line.message):
            parsed.complete.add(line.process)
        last_coll = _read_message(parsed, line, table, last_coll, label)
        if index in joined and (m := _echo(line.message.strip())):
            parsed.joined_echoes.setdefault(m.group("name"), set()).add(line.process)


def _note_fold(parsed: ParsedLog, line: NcclLine, count: int) -> None:
    msg = line.message.strip()
    if m := _echo(msg):
        parsed.folds.append(Fold(count, "echo", line.process, m.group("name"), m.group("value")))
    elif _COMPLETE.search(msg):
        parsed.folds.append(Fold(count, "complete", line.process))
    elif _COMM.search(msg):
        parsed.folds.append(Fold(count, "comm", line.process))
    else:
        parsed.folds.append(Fold(count, "other", line.process))


def _note_version(parsed: ParsedLog, m: re.Match[str]) -> None:
    parsed.version_lines.append(m.group(0))
    parsed.nccl_version = NcclVersion.parse(m.group("v"))
    cuda = re.search(r"cuda(\d+\.\d+)", m.group("suffix"))
    if cuda:
        parsed.cuda_version = cuda.group(1)


def _read_message(parsed: ParsedLog, line: NcclLine, table: TuningTableReader,
                  last_coll: tuple[str, int] | None, label: str = SERVER_LOG) -> tuple[str, int] | None:
    msg = line.message.strip()
    if GRAPH_LINE.match(line.message):
        parsed.graph_lines.setdefault(line.thread, []).append(line)
    vm = NCCL_VERSION.match(msg)
    if vm:
        _note_version(parsed, vm)
        return last_coll
    if (done := table.feed(line.message)) is not None:
        parsed.tuning = done
        return last_coll
    if m := _echo(msg):
        value = m.group("value")
        if re.fullmatch(r"-?\d+\.", value):
            value = value[:-1]
        name = m.group("name")
        if line.process not in parsed.echoes.get(name, {}) or label != SERVER_LOG:
            parsed.echoes.setdefault(name, {})[line.process] = value  # a file's whole line wins over the pipe
            parsed.echo_source.setdefault(name, {})[line.process] = label
    elif m := _INVALID.match(msg):
        parsed.invalid[m.group("name")] = m.group("value")
    elif m := _COMM.search(msg):
        _add_rank(parsed, line.process, int(m.group("rank")), line.thread)
        parsed.comm_ranks.setdefault(line.process, set()).add((int(m.group("rank")), int(m.group("nranks"))))
        parsed.nranks = max(parsed.nranks or 0, int(m.group("nranks")))
        if m.group("nnodes"):
            parsed.nnodes = int(m.group("nnodes"))
        parsed.graph_lines.setdefault(line.thread, []).append(line)
        parsed.peer_lines.setdefault(line.thread, []).append(line)
    elif m := _TIMINGS.match(msg):
        _add_rank(parsed, line.process, int(m.group("rank")), line.thread)
    elif m := _RING.match(msg):
        parsed.ring_lines.append(msg)
    elif msg.startswith("Trees"):
        parsed.tree_lines.append(msg)
    elif m := LINK.match(msg):
        via, src, dst = m.group("via"), int(m.group("src")), int(m.group("dst"))
        parsed.transports.add(via)
        key = (src, dst, via)
        parsed.peers[key] = parsed.peers.get(key, 0) + 1
        _add_rank(parsed, line.process, dst if m.group("dir") == "receive" else src, line.thread)
        parsed.peer_lines.setdefault(line.thread, []).append(line)
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
    elif m := _OP_SYM.match(msg):
        _add_op(parsed, m.group("func"), int(m.group("bytes")), SYMMETRIC, m.group("kernel"), int(m.group("nc")))
    elif m := _OP_CE.match(msg):
        _add_op(parsed, m.group("func"), int(m.group("bytes")), COPY_ENGINE, m.group("how"), None)
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


# -- what the log says about the machine and the choice --------------------------------------

def topology_from_log(parsed: ParsedLog, *, gpu_arch: int | None = None) -> Topology | None:
    """The :class:`Topology` the log shows, or None when no communicator size was logged.

    ``link``: ``nvswitch`` when NCCL saw an NVSwitch or NVLS multicast, ``nvlink`` when its
    graph search or topology dump shows NVLink between GPUs, ``pcie`` when the graph's intra-node
    path is PCIe (PIX/PXB/PHB/SYS) or vLLM/SGLang logged that the GPUs are PCIe-only; else None.
    ``gpu_arch`` is not in NCCL's INIT lines: pass it from NVML if known. ``cpu_vendor``: the
    CPU kind of every ``CPU/0-0 (arch/vendor/model)`` GRAPH line (src/graph/topo.cc,
    ncclTopoPrintRec; :func:`tuner.nccl.p2p.cpu_kind`), None without GRAPH lines or when they differ.
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
    return Topology(nranks=parsed.nranks, nnodes=nnodes, link=link, has_nvls=has_nvls, gpu_arch=gpu_arch,
                    cpu_vendor=_cpu_vendor(parsed))


def _cpu_vendor(parsed: ParsedLog) -> str | None:
    kinds = {cpu_kind(int(m.group("arch")), int(m.group("vendor")))
             for lines in parsed.graph_lines.values() for ln in lines if (m := _TOPO_CPU.match(ln.message.strip()))}
    return kinds.pop() if len(kinds) == 1 else None


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
