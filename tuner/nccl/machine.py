"""NCCL's model of the machine, typed, from one launch's parsed log.

NCCL prints what it believes about the machine under the GRAPH subsystem at init: the topology
tree (src/graph/topo.cc, ncclTopoPrint / ncclTopoPrintRec), each search graph (src/graph/search.cc,
ncclTopoPrintGraph) and, when the search fails, the fallback to the simple order (search.cc,
ncclTopoCompute). The channel transports (src/transport/p2p.cc, shm.cc, net.cc) are INIT lines.
:func:`machine_from_log` turns the lines :mod:`tuner.nccl.log` kept into a :class:`NcclMachine`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.nccl.lines import NcclLine
from tuner.nccl.log import ParsedLog
from tuner.nccl.p2p import CPU_ARCHS, CPU_VENDORS, default_p2p_level, default_p2p_reason, read_level
from tuner.nccl.types import NcclVersion

__all__ = [
    "CpuNode",
    "NcclMachine",
    "P2pLevelInForce",
    "PeerTransport",
    "SearchFallback",
    "SearchGraph",
    "TopoLink",
    "machine_from_log",
]

#: NCCL_TOPO_PATTERN_RING (src/include/graph.h).
PATTERN_RING = 4
#: NCCL_TOPO_ID_LOCAL_ID_MASK (src/graph/topo.h): a node id is ``systemId << 56 | localId``.
_LOCAL_MASK = 0x00FFFFFFFFFFFFFF

_LABEL = r"(?:GPU|PCI|NVS|CPU|NIC|NET|GIN|RMA|DEV|CXB)/[0-9A-Fa-f]+(?:-[0-9a-fA-F]+)?"
_NODE = re.compile(rf"^(?P<label>{_LABEL})(?: \((?P<attr>[^)]*)\))?")
_LINK = re.compile(r"^\+ (?P<kind>[A-Z0-9]*)\[(?P<bw>[\d.]+)\] - (?P<rest>.*)$")
_PATHS = re.compile(rf"^(?P<src>{_LABEL}) :(?P<entries>.*)$")
_PATH = re.compile(rf"(?P<dst>{_LABEL}) \((?P<hops>\d+)/(?P<bw>[\d.]+)/(?P<kind>[A-Z0-9]+)\)")
_SYSTEM = re.compile(r"^=== System : maxBw [\d.]+ totalBw [\d.]+ ===")
_PATTERN = re.compile(r"^Pattern (?P<p>\d+), crossNic (?P<x>\d+), nChannels (?P<n>\d+), bw (?P<bi>[\d.]+)/(?P<be>[\d.]+), "
                      r"type (?P<ti>\w+)/(?P<te>\w+)(?:, sameChannels (?P<s>\d+))?")
_ORDER = re.compile(r"^(?P<c>\d+) :(?P<nodes>(?: (?:GPU|NET)/\S+)+)$")
_FALLBACK = re.compile(r"^Could not find a path for pattern (?P<p>\d+), falling back to simple order")
_COMM = re.compile(r"\bcomm 0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<nranks>\d+)(?: nNodes \d+ localRanks (?P<local>\d+))?")
#: src/transport/p2p.cc, shm.cc, net.cc: "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/...",
#: "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s", "... [send] via NET/%s/%d..." and "[receive]".
#: The ids in brackets are decimal device indices from 2.19, the bus id in hex ("%d[%lx]") up to 2.18.
_PEER = re.compile(r"^Channel (?P<c>\d+)(?:/\d+)? : (?P<src>\d+)\[-?[0-9a-fA-Fx]+\] -> (?P<dst>\d+)\[-?[0-9a-fA-Fx]+\]"
                   r"(?: \[(?:send|receive)\])? via (?P<via>\S.*?)(?: comm 0x[0-9a-f]+ nRanks \d+)?\s*$")


@dataclass(frozen=True)
class CpuNode:
    """A CPU (NUMA node) NCCL saw: ``CPU/<sys>-<id> (arch/vendor/model)`` (src/graph/topo.cc,
    ncclTopoPrintRec). ``label`` e.g. ``"CPU/0-0"`` (``"CPU/0"`` before 2.23), ``numa`` the node id,
    ``arch``/``vendor`` names from :data:`CPU_ARCHS`/:data:`CPU_VENDORS` (the number as text when
    unknown), ``model`` NCCL's model number, ``line`` the log line."""

    label: str
    numa: int
    arch: str
    vendor: str
    model: int
    line: str


@dataclass(frozen=True)
class TopoLink:
    """One link of NCCL's topology tree: ``+ PCI[24.0] - GPU/...`` (topo.cc, ncclTopoPrintRec).

    ``src``/``dst`` node labels (``"CPU/0-0"``, ``"GPU/0-1000"``), ``kind`` the link type
    (``LOC``, ``NVL``, ``PCI``, ``SYS``, ``NET``, ``C2C``), ``bw_GBps`` NCCL's bandwidth in GB/s.
    """

    src: str
    dst: str
    kind: str
    bw_GBps: float
    line: str


@dataclass(frozen=True)
class TopoPath:
    """NCCL's path from a GPU (or NIC) to another node: ``GPU/0-1c000 (2/24.0/PIX)`` in the line
    ``GPU/0-1b000 :GPU/0-1b000 (0/5000.0/LOC) GPU/0-1c000 (2/24.0/PIX) ...`` (src/graph/paths.cc,
    printNodePaths, "%s/%lx-%lx (%d/%.1f/%s) "): ``hops`` links, ``bw_GBps`` its bandwidth,
    ``kind`` the path type (``LOC``, ``NVL``, ``PIX``, ``PXB``, ``PHB``, ``SYS``...)."""

    src: str
    dst: str
    hops: int
    bw_GBps: float
    kind: str
    line: str


@dataclass(frozen=True)
class SearchGraph:
    """One graph NCCL's search settled on (src/graph/search.cc, ncclTopoPrintGraph):
    ``Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d``.

    ``bw_intra_GBps``/``bw_inter_GBps`` per channel in GB/s; ``type_intra``/``type_inter`` path
    names (``NVL``, ``PIX``, ``SYS``...); ``same_channels`` None when not printed; ``orders`` each
    channel's line after it (`` 0 : GPU/0 GPU/1 ...``: ranks up to 2.29, ``GPU/<sys>-<id>`` from
    2.30, ``NET/...`` at the ends when there is a network), as its words after ``:``.
    """

    pattern: int
    cross_nic: int
    nchannels: int
    bw_intra_GBps: float
    bw_inter_GBps: float
    type_intra: str
    type_inter: str
    same_channels: int | None
    line: str
    orders: tuple[tuple[str, ...], ...] = ()

    @property
    def is_ring(self) -> bool:
        """True for NCCL_TOPO_PATTERN_RING (4)."""
        return self.pattern == PATTERN_RING


@dataclass(frozen=True)
class SearchFallback:
    """``Could not find a path for pattern %d, falling back to simple order`` (src/graph/search.cc,
    ncclTopoCompute): a WARN up to 2.26, ``INFO(NCCL_GRAPH)`` from 2.27. ``level`` is ``"WARN"`` or
    ``"INFO"``."""

    pattern: int
    level: str
    line: str


@dataclass(frozen=True)
class PeerTransport:
    """One channel connection: ``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`` (src/transport/p2p.cc,
    shm.cc, net.cc). ``src``/``dst`` communicator ranks, ``kind`` the first word of ``via``
    (``P2P``, ``SHM``, ``NET``, ``COLLNET``), ``via`` the whole target (``P2P/CUMEM/read``)."""

    channel: int
    src: int
    dst: int
    kind: str
    via: str
    line: str


@dataclass(frozen=True)
class P2pLevelInForce:
    """The NCCL_P2P_LEVEL NCCL used: ``level`` a path name or None (P2P disabled, or not known);
    ``source`` ``"echo"`` (the NCCL_P2P_LEVEL or NCCL_P2P_DISABLE echo), ``"default"`` (the
    version's default for the CPU and GPU count, :func:`tuner.nccl.p2p.default_p2p_level`) or
    ``"unknown"``; ``reason`` a sentence citing the source."""

    level: str | None
    source: str
    reason: str


@dataclass(frozen=True)
class NcclMachine:
    """What NCCL believed about the machine at one launch (one process's topology and graphs,
    every process's transports).

    ``gpus`` GPU labels of the topology (``"GPU/0-1b000"``), with ``gpu_ranks`` (the rank NCCL
    printed beside each, None from 2.30 where the GPU hangs off a ``DEV`` node) and ``gpu_cpus``
    (the CPU node each sits under); ``paths`` the GPU-to-node paths; ``system_line`` the ``===
    System : maxBw %2.1f totalBw %2.1f ===`` line; ``local_gpus`` GPUs in that process's topology
    (the count ncclTopoCheckP2p reads; the comm line's localRanks without a topology), else None.
    ``process`` the process (``host:pid``) whose topology and graphs these are, ``thread`` its
    logging thread (``host:pid:tid``: one process runs several ranks under nccl-tests ``-t``),
    ``rank`` its rank.
    """

    cpus: tuple[CpuNode, ...]
    gpus: tuple[str, ...]
    links: tuple[TopoLink, ...]
    graphs: tuple[SearchGraph, ...]
    fallbacks: tuple[SearchFallback, ...]
    peers: tuple[PeerTransport, ...]
    p2p_level: P2pLevelInForce
    system_line: str | None
    local_gpus: int | None
    gpu_ranks: tuple[int | None, ...] = ()
    gpu_cpus: tuple[str | None, ...] = ()
    paths: tuple[TopoPath, ...] = ()
    process: str | None = None
    rank: int | None = None
    thread: str | None = None

    @property
    def has_topology(self) -> bool:
        """True when GRAPH topology or graph lines were seen."""
        return bool(self.cpus or self.gpus or self.links or self.graphs)

    @property
    def cpu_vendor(self) -> str | None:
        """The CPU kind :func:`tuner.nccl.p2p.default_p2p_level` takes: the vendor of x86 CPUs
        (``"Intel"``, ``"AMD"``, ``"Zhaoxin"``), else the architecture (``"ARM"``, ``"POWER"``);
        None when no CPU was seen or the nodes differ."""
        kinds = {c.vendor if c.arch == "x86" else c.arch for c in self.cpus}
        return kinds.pop() if len(kinds) == 1 else None

    @property
    def sockets(self) -> int:
        """CPU nodes (NUMA nodes NCCL saw)."""
        return len(self.cpus)

    @property
    def inter_cpu_bw_GBps(self) -> float | None:
        """The bandwidth of the CPU-to-CPU (``SYS``) links, GB/s (the lowest), None if none."""
        bws = [lk.bw_GBps for lk in self.links if lk.kind == "SYS"]
        return min(bws) if bws else None

    @property
    def gpu_pcie_bw_GBps(self) -> float | None:
        """The widest PCI link ending at a GPU, GB/s, None if none."""
        bws = [lk.bw_GBps for lk in self.links if lk.kind == "PCI" and lk.dst.startswith("GPU/")]
        return max(bws) if bws else None

    @property
    def fell_back(self) -> bool:
        """True when NCCL's search fell back to the simple order for any pattern."""
        return bool(self.fallbacks)

    def path(self, src: str, dst: str) -> TopoPath | None:
        """The path NCCL computed from node ``src`` to node ``dst`` (labels), None if not printed."""
        return next((p for p in self.paths if p.src == src and p.dst == dst), None)

    @property
    def ring_graph(self) -> SearchGraph | None:
        """The first ring graph (pattern 4), None if none."""
        return next((g for g in self.graphs if g.is_ring), None)

    def _pairs(self, kind: str) -> frozenset[tuple[int, int]]:
        return frozenset((p.src, p.dst) for p in self.peers if p.kind == kind)

    @property
    def p2p_pairs(self) -> frozenset[tuple[int, int]]:
        """``(src, dst)`` rank pairs connected over P2P."""
        return self._pairs("P2P")

    @property
    def shm_pairs(self) -> frozenset[tuple[int, int]]:
        """``(src, dst)`` rank pairs connected over SHM (through host memory)."""
        return self._pairs("SHM")

    @property
    def net_pairs(self) -> frozenset[tuple[int, int]]:
        """``(src, dst)`` rank pairs connected over the network."""
        return self._pairs("NET")


def _label(text: str) -> str:
    """``TYPE/<sys>-<local>`` in lower-case hex, whichever way NCCL printed it: ``%lx-%lx``
    (2.21+ node lines, 2.23+ link ends) or the whole id ``%lX`` (``GPU/1B000``, ``CPU/1``)."""
    kind, _, ident = text.partition("/")
    if "-" in ident:
        sys_id, _, local = ident.partition("-")
        return f"{kind}/{int(sys_id, 16):x}-{int(local, 16):x}"
    whole = int(ident, 16)
    return f"{kind}/{whole >> 56:x}-{whole & _LOCAL_MASK:x}"


def _cpu(label: str, attr: str, line: str) -> CpuNode | None:
    parts = attr.split("/")
    if len(parts) != 3 or not all(re.fullmatch(r"-?\d+", p) for p in parts):
        return None
    arch, vendor, model = (int(p) for p in parts)
    numa = int(label.rpartition("-")[2], 16)
    return CpuNode(label, numa, CPU_ARCHS.get(arch, str(arch)), CPU_VENDORS.get(vendor, str(vendor)), model, line)


@dataclass
class _Block:
    """One communicator's topology and graphs as one process printed them."""

    lines: list[NcclLine]
    comm: tuple[int, int, int | None] | None = None  # (rank, nRanks, localRanks) of the comm line after it


def _blocks(lines: list[NcclLine]) -> list[_Block]:
    """Split a process's GRAPH lines at each ``=== System`` line (ncclTopoPrint starts every
    communicator's init); each block's communicator is the first comm line after it (src/init.cc
    prints "comm %p rank %d nRanks %d nNodes %d localRanks %d ..." after the graphs)."""
    blocks: list[_Block] = []
    for ln in lines:
        msg = ln.message.strip()
        if m := _COMM.search(msg):
            for b in blocks:
                if b.comm is None:
                    b.comm = (int(m.group("rank")), int(m.group("nranks")),
                              int(m.group("local")) if m.group("local") else None)
            continue
        if _SYSTEM.match(msg) or not blocks or blocks[-1].comm is not None:
            blocks.append(_Block([]))
        blocks[-1].lines.append(ln)
    return blocks


def _choose(parsed: ParsedLog) -> tuple[str, _Block] | None:
    """The block of the lowest rank of the largest communicator (``parsed.nranks``), else any."""
    best: tuple[tuple[int, int], str, _Block] | None = None
    for thread, lines in parsed.graph_lines.items():  # one thread per rank, several per nccl-tests -t process
        for block in _blocks(lines):
            size_ok = block.comm is None or parsed.nranks is None or block.comm[1] == parsed.nranks
            rank = block.comm[0] if block.comm else min(parsed.thread_ranks.get(thread) or {1 << 30})
            key = (0 if size_ok else 1, rank)
            if best is None or key < best[0]:
                best = (key, thread, block)
    return None if best is None else (best[1], best[2])


@dataclass
class _Topo:
    cpus: list[CpuNode]
    gpus: dict[str, tuple[int | None, str | None]]
    links: list[TopoLink]
    paths: list[TopoPath]
    graphs: list[SearchGraph]
    fallbacks: list[SearchFallback]
    system_line: str | None


def _read_block(block: _Block) -> _Topo:
    topo = _Topo([], {}, [], [], [], [], None)
    at_col: dict[int, str] = {}  # the node whose label starts at each column (ncclTopoPrintRec)
    root: str | None = None
    for ln in block.lines:
        raw = ln.message.rstrip()
        msg = raw.strip()
        col = len(raw) - len(raw.lstrip(" "))
        if _SYSTEM.match(msg):
            topo.system_line = msg
        elif m := _FALLBACK.match(msg):
            topo.fallbacks.append(SearchFallback(int(m.group("p")), ln.level, msg))
        elif m := _PATTERN.match(msg):
            topo.graphs.append(SearchGraph(
                int(m.group("p")), int(m.group("x")), int(m.group("n")), float(m.group("bi")), float(m.group("be")),
                m.group("ti"), m.group("te"), int(m.group("s")) if m.group("s") else None, msg))
        elif (m := _ORDER.match(msg)) and topo.graphs:
            g = topo.graphs[-1]
            topo.graphs[-1] = SearchGraph(g.pattern, g.cross_nic, g.nchannels, g.bw_intra_GBps, g.bw_inter_GBps,
                                          g.type_intra, g.type_inter, g.same_channels, g.line,
                                          (*g.orders, tuple(m.group("nodes").split())))
        elif m := _PATHS.match(msg):
            start = _label(m.group("src"))
            for p in _PATH.finditer(m.group("entries")):
                topo.paths.append(TopoPath(start, _label(p.group("dst")), int(p.group("hops")), float(p.group("bw")),
                                           p.group("kind"), msg))
        elif m := _LINK.match(msg):
            owner = at_col.get(col)
            node = _NODE.match(m.group("rest"))
            if owner is None or node is None:
                continue
            dst = _label(node.group("label"))
            topo.links.append(TopoLink(owner, dst, m.group("kind"), float(m.group("bw")), msg))
            if m.group("kind") == "PCI":  # the far node is printed here, its own links below it
                _note_node(topo, dst, node.group("attr"), msg, root)
                at_col[col + len(msg) - len(m.group("rest"))] = dst
            elif dst.startswith("GPU/"):
                topo.gpus.setdefault(dst, (None, root))
        elif node := _NODE.match(msg):
            label = _label(node.group("label"))
            at_col = {col: label}
            root = label if label.startswith("CPU/") else root
            _note_node(topo, label, node.group("attr"), msg, root)
    return topo


def _note_node(topo: _Topo, label: str, attr: str | None, line: str, root: str | None) -> None:
    if label.startswith("CPU/") and attr and (cpu := _cpu(label, attr, line)):
        if all(c.label != label for c in topo.cpus):
            topo.cpus.append(cpu)
    elif label.startswith("GPU/"):
        rank = int(attr.split()[0]) if attr and re.fullmatch(r"\d+", attr.split()[0]) else None
        topo.gpus[label] = (rank, root)


def _peers(parsed: ParsedLog) -> tuple[PeerTransport, ...]:
    """Every process's channel connections on the largest communicator, once each."""
    seen: dict[tuple[int, int, int, str], PeerTransport] = {}
    for lines in parsed.peer_lines.values():
        size: int | None = None
        for ln in lines:
            msg = ln.message.strip()
            if m := _COMM.search(msg):
                size = int(m.group("nranks"))
            elif (m := _PEER.match(msg)) and (size is None or parsed.nranks is None or size == parsed.nranks):
                via = m.group("via")
                key = (int(m.group("c")), int(m.group("src")), int(m.group("dst")), via)
                seen.setdefault(key, PeerTransport(key[0], key[1], key[2], via.split("/")[0], via, msg))
    return tuple(sorted(seen.values(), key=lambda p: (p.channel, p.src, p.dst, p.via)))


def _p2p_in_force(parsed: ParsedLog, process: str | None, version: NcclVersion | None,
                  cpu_vendor: str | None, local_gpus: int | None) -> P2pLevelInForce:
    """The echo of that process (else of any), then the default; paths.cc ncclGetLevel reads
    NCCL_P2P_DISABLE first, then NCCL_P2P_LEVEL, and echoes the level's name."""
    def echo(name: str) -> str | None:
        values = parsed.echoed(name)
        return values.get(process or "") or next(iter(values.values()), None)

    disable = echo("NCCL_P2P_DISABLE")
    if disable is not None and disable.strip() == "1":
        return P2pLevelInForce(None, "echo", "NCCL_P2P_DISABLE set by environment to 1: no P2P between GPUs "
                               "(src/graph/paths.cc, ncclGetLevel sets PATH_LOC)")
    level = echo("NCCL_P2P_LEVEL")
    if level is not None:
        name, _problem, _warn = read_level("NCCL_P2P_LEVEL", level, version or NcclVersion(2, 30, 7))
        if name is not None:
            return P2pLevelInForce(name, "echo", f"NCCL_P2P_LEVEL set by environment to {level} "
                                   "(src/graph/paths.cc, ncclGetLevel)")
    default = default_p2p_level(version, cpu_vendor, local_gpus)
    reason = default_p2p_reason(version, cpu_vendor, local_gpus)
    return P2pLevelInForce(default, "default" if default else "unknown", reason)


def machine_from_log(parsed: ParsedLog, version: NcclVersion | None = None) -> NcclMachine | None:
    """The :class:`NcclMachine` a parsed log shows, or None when it holds no GRAPH or transport line.

    The topology and graphs are those of one process, the lowest rank of the largest communicator
    (every rank prints its own copy); the transports are every process's, once each. ``version``
    defaults to the log's own NCCL version (``parsed.nccl_version``); it and the CPU decide the
    default P2P level when no NCCL_P2P_LEVEL or NCCL_P2P_DISABLE echo says otherwise.
    """
    version = version or parsed.nccl_version
    peers = _peers(parsed)
    chosen = _choose(parsed)
    topo = _read_block(chosen[1]) if chosen else _Topo([], {}, [], [], [], [], None)
    if not peers and not (topo.cpus or topo.gpus or topo.links or topo.graphs or topo.fallbacks or topo.paths
                          or topo.system_line):
        return None
    thread = chosen[0] if chosen else None
    process = chosen[1].lines[0].process if chosen and chosen[1].lines else None
    comm = chosen[1].comm if chosen else None
    local_gpus = len(topo.gpus) if topo.gpus else (comm[2] if comm else None)
    kinds = {c.vendor if c.arch == "x86" else c.arch for c in topo.cpus}
    cpu_vendor = kinds.pop() if len(kinds) == 1 else None
    p2p = _p2p_in_force(parsed, process, version, cpu_vendor, local_gpus)
    gpus = tuple(topo.gpus)
    return NcclMachine(
        cpus=tuple(topo.cpus), gpus=gpus, links=tuple(topo.links), graphs=tuple(topo.graphs),
        fallbacks=tuple(topo.fallbacks), peers=peers, p2p_level=p2p, system_line=topo.system_line,
        local_gpus=local_gpus, gpu_ranks=tuple(topo.gpus[g][0] for g in gpus),
        gpu_cpus=tuple(topo.gpus[g][1] for g in gpus), paths=tuple(topo.paths), process=process,
        rank=comm[0] if comm else None, thread=thread)
