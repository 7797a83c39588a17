"""NCCL's own cost model for AllReduce: Ring and Tree x LL, LL128, Simple.

A transcription of src/graph/tuning.cc at v2.27.3-1 (ncclTopoTuneModel for the bandwidth and
latency tables, ncclTopoGetAlgoTime for a time at a size) and of src/enqueue.cc
(topoGetAlgoInfo: the smallest time wins, first in index order on ties: Tree before Ring, LL
before LL128 before Simple). Older versions differ in three constants, applied by version:
Tree/Simple ``baseLat`` 0 up to 2.22 (8.4 from 2.23), Tree/Simple ``hwLat`` 4 (NVLink) and 6
(PCI) in 2.18, 28 in 2.19-2.22, 4.0 from 2.23, and Ring/LL at a quarter of the bus bandwidth
for AllReduce up to 2.20 (half from 2.21). The tables quoted are unchanged through v2.30.7-1.

The model reads the graphs NCCL searched (``Pattern ..., nChannels %d, bw %f/%f, type %s/%s``,
src/graph/search.cc ncclTopoPrintGraph): what NCCL believes, not what the hardware does. A
fallen-back search (bw 0.1, one channel) therefore makes NCCL's own model pick Simple.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from tuner.nccl.choice import allreduce_choices
from tuner.nccl.types import NcclVersion, Topology, judged_version

__all__ = ["CostTable", "ModelGraph", "Pick", "allreduce_table", "nccl_pick"]

#: Index order of src/include/device.h (NCCL_ALGO_TREE 0, NCCL_ALGO_RING 1; NCCL_PROTO_LL 0,
#: NCCL_PROTO_LL128 1, NCCL_PROTO_SIMPLE 2): the order ties are broken in.
COST_ALGOS = ("Tree", "Ring")
COST_PROTOS = ("LL", "LL128", "Simple")

# tuning.cc baseLat (us), v2.23+; Tree/Simple is 0 before 2.23.
_BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4)}
# tuning.cc hwLat (us) rows NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET, v2.23+.
_HW_LAT = {
    "nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4)},
    "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7)},
    "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0)},
}
# tuning.cc per compute-capability tables, rows Volta, Ampere, Hopper, Blackwell; columns
# nNodes 1, 2, >2.
_LL_MAX_BWS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
_PER_CH_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (73.4,) * 3)
_PER_CH_TREE_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (73.4, 73.4, 58.0))
_PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (77.4, 82.8, 72.0))
# tuning.cc treeCorrectionFactor: powers of two from 64 B (index log2(nBytes >> 6)).
_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
              1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
               .9),
}
_PATTERN_TREE = 3  # NCCL_TOPO_PATTERN_TREE, src/include/graph.h


class GraphLike(Protocol):
    """What the model reads of one searched graph (``tuner.nccl.machine.SearchGraph`` has it)."""

    @property
    def nchannels(self) -> int: ...
    @property
    def bw_intra_GBps(self) -> float: ...
    @property
    def bw_inter_GBps(self) -> float: ...
    @property
    def type_intra(self) -> str: ...


@dataclass(frozen=True)
class ModelGraph:
    """A graph as the model reads it: ``nchannels``, bandwidth per channel in GB/s (intra and
    inter node), the intra-node path type as NCCL prints it (``NVL``, ``PIX``, ``PHB``, ``SYS``
    ...; src/graph/topo.cc topoPathTypeStr) and the pattern (src/include/graph.h)."""

    nchannels: int
    bw_intra_GBps: float
    type_intra: str
    bw_inter_GBps: float = 0.0
    pattern: int = 4


@dataclass(frozen=True)
class CostTable:
    """The AllReduce rows of NCCL's ``comm->bandwidths`` (GB/s, algorithm bandwidth after the
    bus-to-algorithm ratio) and ``comm->latencies`` (us), keyed (algo, proto); bandwidth 0 means
    NCCL will not use the pair (tuning.cc zeroes disabled pairs)."""

    bandwidth: Mapping[tuple[str, str], float]
    latency: Mapping[tuple[str, str], float]
    nranks: int
    nnodes: int
    nchannels: int

    def time_us(self, algo: str, proto: str, nbytes: int) -> float | None:
        """ncclTopoGetAlgoTime for one pipelined op: latency + bytes / (1000 x bandwidth), the
        Tree bandwidth scaled by treeCorrectionFactor, the multi-node Ring/Simple latency by
        1.4 (the plateau, compute capability >= 8.0 assumed); None where the pair is off."""
        bw = self.bandwidth[(algo, proto)]
        lat = self.latency[(algo, proto)]
        if bw <= 0:
            return None
        log_size = _log2i(nbytes >> 6)
        if algo == "Tree" and 0 <= log_size < 23:
            bw *= _TREE_CORRECTION[proto][log_size]
        if algo == "Ring" and proto == "Simple" and self.nnodes > 1 and \
                nbytes // max(1, self.nchannels * self.nranks) >= 64:
            lat *= 1.4
        return lat + nbytes / (1000 * bw)

    def times_us(self, nbytes: int) -> dict[tuple[str, str], float]:
        """Every enabled pair's time at ``nbytes``, in NCCL's index order."""
        out = {}
        for a in COST_ALGOS:
            for p in COST_PROTOS:
                t = self.time_us(a, p, nbytes)
                if t is not None:
                    out[(a, p)] = t
        return out


@dataclass(frozen=True)
class Pick:
    """The pair NCCL's model picks at ``nbytes`` and its modelled time in us."""

    algo: str
    proto: str
    time_us: float
    nbytes: int

    @property
    def pair(self) -> str:
        """``Ring/LL`` as NCCL's TUNING lines name it."""
        return f"{self.algo}/{self.proto}"


def _log2i(n: int) -> int:
    """src/include/bitops.h log2i: floor(log2(n)), -1 for n <= 0."""
    return n.bit_length() - 1 if n > 0 else -1


def _compcap_index(compcap: int | None) -> int:
    if compcap is None or compcap >= 100:
        return 3
    return 2 if compcap >= 90 else 1 if compcap >= 80 else 0


def _hw_row(type_intra: str) -> str:
    # tuning.cc compares typeIntra (a path type) with LINK_NVL (1 == PATH_NVL): only NVL gets
    # the NVLink row; NVB and every PCIe path get the PCI row.
    return "nvlink" if type_intra.upper() == "NVL" else "pci"


def allreduce_table(ring: GraphLike, nranks: int, *, tree: GraphLike | None = None, nnodes: int = 1,
                    version: NcclVersion | None = None, compcap: int | None = None,
                    cpu_vendor: str | None = None, tree_pattern: int | None = None,
                    env: Mapping[str, str] | None = None,
                    topology: Topology | None = None) -> CostTable:
    """NCCL's AllReduce cost table for ``nranks`` ranks on ``nnodes`` nodes.

    ``ring``/``tree``: the searched graphs (``tree`` defaults to ``ring``); ``compcap``: the
    lowest compute capability x 10 (None: Blackwell's caps, the loosest, which bind only far
    above PCIe bandwidths); ``cpu_vendor`` (``"AMD"``...) picks the multi-node LL cap;
    ``tree_pattern``: comm->maxTreePattern (3 costs Tree 15 %). ``env`` with ``topology``
    switches pairs off as NCCL_ALGO/NCCL_PROTO do (tuner.nccl.choice.allreduce_choices);
    without ``topology`` LL128 follows NCCL's own guard on ``ring.type_intra`` (NVLink only).
    Source: src/graph/tuning.cc ncclTopoTuneModel, v2.27.3-1. Raises ValueError for
    ``nranks`` < 2 or ``nnodes`` < 1.
    """
    if nranks < 2 or nnodes < 1:
        raise ValueError(f"the model needs at least 2 ranks on at least 1 node, got {nranks} on {nnodes}")
    v = judged_version(version)
    graphs = {"Ring": ring, "Tree": tree or ring}
    nsteps = 2 * (nranks - 1)
    cci = _compcap_index(compcap)
    index2 = nnodes - 1 if nnodes <= 2 else 2
    index1 = cci if nnodes == 1 else (1 if (cpu_vendor or "").upper() in ("AMD", "MIXED") else 0)
    ll_max = _LL_MAX_BWS[index1][index2]
    ppn = nranks / nnodes
    bws: dict[tuple[str, str], float] = {}
    lats: dict[tuple[str, str], float] = {}
    for a in COST_ALGOS:
        g = graphs[a]
        intra_row = _hw_row(g.type_intra)
        for pi, p in enumerate(COST_PROTOS):
            bw = g.bw_intra_GBps if nnodes <= 2 else g.bw_inter_GBps
            bus = g.nchannels * bw
            if a == "Ring" and p == "LL":
                bus = min(ll_max, bus * (0.25 if v < NcclVersion(2, 21, 0) else 0.5))
            if a == "Ring" and p == "LL128":
                bus = min(bus * 0.92, g.nchannels * _PER_CH_RING_LL128[cci][index2])
            if a == "Tree":
                bus = min(bus * .92, g.nchannels * _PER_CH_TREE[cci][index2])
            if a == "Tree" and p == "LL":
                bus = min(bus / 3.8, ll_max)
            if a == "Tree" and p == "LL128":
                bus = min(bus * (7.0 / 9.0 if nnodes == 1 else 120.0 / 128.0),
                          g.nchannels * _PER_CH_TREE_LL128[cci][index2])
            if a == "Tree" and tree_pattern == _PATTERN_TREE:
                bus *= .85
            bus *= nranks / nsteps if a == "Ring" else .5
            bws[(a, p)] = bus
            base, intra = _BASE_LAT[a][pi], _HW_LAT[intra_row][a][pi]
            if a == "Tree" and p == "Simple":
                base = 8.4 if v >= NcclVersion(2, 23, 0) else 0.0
                if v < NcclVersion(2, 19, 0):
                    intra = 4.0 if intra_row == "nvlink" else 6.0
                elif v < NcclVersion(2, 23, 0):
                    intra = 28.0
            # latencyInter is not printed; 0 (its value without a NIC pair) is used.
            inter = _HW_LAT["net"]["Tree" if ppn == 1 else a][pi]
            if a == "Ring":
                overhead = 0.0
                if nnodes > 1:
                    overhead = 2.0 if (cpu_vendor or "").upper() == "AMD" else 1.0
                    overhead *= 3 if p == "Simple" else 1
                step = max(intra, overhead)
                inter_steps = 0 if nnodes == 1 else 2 * (nnodes - 1)
                lats[(a, p)] = base + (nsteps - inter_steps) * step + inter_steps * inter
            else:
                lats[(a, p)] = base + 2 * ((nranks // nnodes - 1) * intra + _log2i(nnodes) * inter)
    for pair in list(bws):
        if not _enabled(pair, ring, env, topology, v, nnodes):
            bws[pair] = 0.0
    return CostTable(bws, lats, nranks, nnodes, ring.nchannels)


def _enabled(pair: tuple[str, str], ring: GraphLike, env: Mapping[str, str] | None,
             topology: Topology | None, version: NcclVersion, nnodes: int) -> bool:
    if env and topology is not None and ("NCCL_ALGO" in env or "NCCL_PROTO" in env):
        choices = allreduce_choices(env, topology, version)
        return pair in choices.pairs or pair in choices.maybe
    if env:
        algo = env.get("NCCL_ALGO")
        proto = env.get("NCCL_PROTO")
        if algo and not _listed(pair[0], algo):
            return False
        if proto and not _listed(pair[1], proto):
            return False
        if proto and pair[1] == "LL128" and _listed("LL128", proto):
            return True
    if pair[1] == "LL128":
        # The LL128 guard: typeIntra <= PATH_NVB (tuning.cc, the protocol enable loop).
        return nnodes == 1 and ring.type_intra.upper() in ("LOC", "NVL", "NVB")
    return True


def _listed(name: str, value: str) -> bool:
    """A plain (no per-collective prefix) NCCL_ALGO/NCCL_PROTO list: ``^`` excludes
    (tuning.cc parseList)."""
    text = value.split(";")[0]
    text = text.split(":")[-1]
    negate = text.startswith("^")
    items = {t.strip().lower() for t in text.lstrip("^").split(",") if t.strip()}
    return (name.lower() in items) != negate


def nccl_pick(table: CostTable, nbytes: int) -> Pick | None:
    """The (algo, proto, time_us) NCCL's model picks at ``nbytes``: the smallest time, the first
    in index order on ties (src/enqueue.cc topoGetAlgoInfo); None when every pair is off."""
    best: Pick | None = None
    for (a, p), t in table.times_us(nbytes).items():
        if best is None or t < best.time_us:
            best = Pick(a, p, t, nbytes)
    return best
