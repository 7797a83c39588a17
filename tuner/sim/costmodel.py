"""Allreduce cost: NCCL's own choice, the resources it launches, then the time the hardware takes.

1. **NCCL's tuning model** (src/graph/tuning.cc ``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``):
   a latency and a bandwidth per collective x algorithm x protocol, computed from the *search
   graph* (its channel count and per-channel bandwidth: NCCL_MAX_NCHANNELS does not move them),
   with NCCL's protocol and Tree factors; time = latency + bytes / (1000 x bandwidth), Tree
   bandwidth scaled by ``treeCorrectionFactor``. NCCL runs the cheapest enabled pair
   (src/enqueue.cc ``topoGetAlgoInfo``); NCCL_ALGO / NCCL_PROTO only change what is enabled.
2. **Launch resources** (src/enqueue.cc ``topoGetAlgoInfo``): from the communicator's channels
   and the pair's thread count, drop channels while ``nBytes < nc * nt * threadThreshold``, then
   halve threads; thresholds from tuning.cc (Ring/LL x nRanks) or NCCL_THREAD_THRESHOLDS.
3. **Chunking** (src/enqueue.cc ``calcCollChunking``): each protocol's buffer (NCCL_BUFFSIZE is
   Simple's; NCCL_LL_BUFFSIZE / NCCL_LL128_BUFFSIZE the others) sets the chunk and the number of
   pipeline loops; a chunk that rounds down to 0 makes ``DIVUP(nBytes, loopSize)`` divide by zero.
4. **Realised time** on the simulated hardware: the pair's base latency plus every ring hop on
   its real transport (P2P, SHM through host memory, sockets, or IB between nodes: ncclnet.py;
   NCCL's tuning tables stay those of one node there), the launched channels and
   threads, the profile's bandwidth ceilings, the extra pipeline loops; parameters and their
   sources are in ``profiles.py``. NCCL's model does not see these departures, which is why its
   pick is not always the fastest: the landscape a tuner explores.

A served decode step costs compute + layers x allreduces per layer x (allreduce + per-op
overhead); an all_reduce_perf iteration costs the allreduce + a launch. Units: us for
allreduces, ms for steps, bytes, GB/s.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .arbackends import VIA, BackendPlan, plan_for
from .ncclconst import (
    ALLREDUCE_CHUNKSTEPS,
    BASE_LAT_US,
    COLLNET_SIMPLE_THREAD_THRESHOLD,
    DATATYPE_NAMES,
    FUNCS,
    HW_LAT_US,
    LL128_DATAELEMS,
    LL128_LINEELEMS,
    NCCL_LL128_MAX_NTHREADS,
    NCCL_LL_MAX_NTHREADS,
    NCCL_MAX_NTHREADS,
    NCCL_SIMPLE_MAX_NTHREADS,
    NCCL_STEPS,
    PCI_BW,
    PROTO_GRAIN,
    PROTOS,
    THREAD_THRESHOLD,
    TREE_CORRECTION,
    WARP_SIZE,
    algos,
    default_p2p_level,
    ll_max_bw,
    log2i,
    maxchannels,
    path_types,
    per_ch_max_ring_ll128_bw,
    per_ch_max_tree_bw,
    per_ch_max_tree_ll128_bw,
)
from .ncclenv import Message, NcclInitError, NcclSettings, info, warn
from .profiles import Profile

#: vLLM's custom allreduce: world sizes it supports and its default max_size (bytes); it takes a
#: tensor strictly smaller than that whose size is a multiple of 16
#: (vllm/distributed/device_communicators/custom_all_reduce.py ``CustomAllreduce``).
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_MAX_BYTES = 8192 * 1024


class CollectiveCrash(Exception):
    """The process dies inside NCCL (not an error return): ``reason`` says why."""

    def __init__(self, reason: str, nbytes: int, proto: str):
        super().__init__(reason)
        self.reason, self.nbytes, self.proto = reason, nbytes, proto


@dataclasses.dataclass(frozen=True)
class Graph:
    """One search graph as the tuning model reads it (src/include/graph.h ``ncclTopoGraph``)."""

    nchannels: int
    bw_intra: float
    type_intra: str
    same_channels: bool


@dataclasses.dataclass(frozen=True)
class TuneModel:
    """NCCL's tables for one communicator: ``latency[func][algo][proto]`` (us),
    ``bandwidth[func][algo][proto]`` (GB/s, 0 = unavailable), ``max_threads[algo][proto]``,
    ``thresholds[algo][proto]`` (bytes per thread), ``nchannels`` (the communicator's), and the
    INFO messages ``ncclTopoTuneModel`` logs on every rank."""

    nranks: int
    latency: dict
    bandwidth: dict
    max_threads: dict
    thresholds: dict
    nchannels: int
    algos: tuple
    messages: tuple


@dataclasses.dataclass(frozen=True)
class AllreduceCost:
    """One allreduce of ``nbytes``: ``via`` ``"nccl"``, ``"custom"`` (vLLM custom allreduce),
    ``"nccl_symm_mem"``, ``"symm_mem"``, ``"flashinfer"`` or ``"flashinfer_pcie_ipc"``
    (arbackends.VIA),
    NCCL's pick and launch (``nchannels`` / ``nthreads``), ``model_us`` NCCL's own estimate,
    ``core_us`` the collective on the hardware, ``time_us`` what a served step pays (core +
    overheads), ``parts`` the breakdown, ``corrupt`` when the protocol runs where NCCL would
    not have enabled it (LL128 forced on PCIe: wrong results)."""

    nbytes: int
    via: str
    algo: str
    proto: str
    nchannels: int
    nthreads: int
    model_us: float
    core_us: float
    time_us: float
    parts: dict
    corrupt: bool = False


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Decode step at ``batch`` streams: times in ms, ``tok_s`` per stream, ``share`` =
    allreduce time / step time."""

    batch: int
    compute_ms: float
    allreduce_ms: float
    step_ms: float
    share: float
    tok_s: float
    allreduce: AllreduceCost


def search_graphs(profile: Profile, version: str) -> dict[str, Graph]:
    """Graphs per algorithm on one node: Ring and Tree share the profile's search result
    (src/init.cc searches the tree graph with the ring's channel count); CollNet graphs are not
    searched without CollNet (0 channels); NVLS has ``nvls_channels``. A failed search
    (``graph_fallback``) leaves ncclTopoCompute's simple order: 1 channel at 0.1 GB/s, SYS
    (src/graph/search.cc); the tree search, bounded by the ring's channels, fails the same way."""
    nch, bw, kind = profile.ring_graph
    ring = Graph(nch, bw, kind, profile.graph_same_channels)
    none = Graph(0, 0.0, kind, True)
    nvls = Graph(profile.nvls_channels, profile.graph_bw_intra_GBps, "NVL", True)
    return {"Tree": ring, "Ring": ring, "CollNetDirect": none, "CollNetChain": none,
            "NVLS": nvls, "NVLSTree": nvls, "PAT": ring}


def ll128_allowed(profile: Profile, version: str) -> bool:
    """Where NCCL turns LL128 on by itself (tuning.cc, ``pEnable == 2``): graph typeIntra at
    most NVB, compute capability 7.0+, one architecture (single node: typeInter passes)."""
    names = path_types(version)
    return (names.index(profile.ring_graph[2]) <= names.index("NVB")
            and profile.compute_capability >= 70)


def comm_channels(profile: Profile, settings: NcclSettings) -> int:
    """The communicator's channels (src/init.cc, src/graph/connect.cc ``ncclTopoPostset``):
    graph channels doubled (capped at MAXCHANNELS), cut to min(NCCL_MAX_NCHANNELS,
    NCCL_MAX_CTAS), then copied up to max(NCCL_MIN_NCHANNELS, NCCL_MIN_CTAS): "max, then min"."""
    top = maxchannels(settings.version)
    n = min(top, 2 * profile.ring_graph[0])
    n = min(n, settings.max_nchannels, settings.max_ctas)
    n = max(n, min(top, max(settings.min_nchannels, settings.min_ctas)))
    return max(1, n)


def _get_nthreads(name: str, env: int | None, lo: int, hi: int, default: int,
                  msgs: list, version: str) -> int:
    """tuning.cc ``getNthreads``: a positive env value must be a multiple of 32 within
    [lo, hi], else it is replaced, said as a WARN up to 2.26 and an INFO under GRAPH/ENV from
    2.27 (v2.26.6-1 graph/tuning.cc:19/22/25 WARN; v2.27.3-1 INFO(NCCL_GRAPH|NCCL_ENV));
    otherwise the default."""
    from .ncclconst import version_tuple

    def said(text: str, line: int) -> Message:
        if version_tuple(version) >= (2, 27, 0):
            return info(text, "GRAPH", "ENV")
        return warn(text, f"graph/tuning.cc:{line}")

    if env is None or env <= 0:
        return default
    if env % WARP_SIZE:
        msgs.append(said(f"Invalid {name} {env} (must be a multiple of {WARP_SIZE})", 19))
        return hi
    if env > hi:
        msgs.append(said(f"Invalid {name} {env} (maximum {hi}).", 22))
        return hi
    if env < lo:
        msgs.append(said(f"Invalid {name} {env} (minimum {lo}).", 25))
        return lo
    return env


def _enabled(profile: Profile, settings: NcclSettings, func: str, algo: str, proto: str,
             force_algo: bool = False) -> bool:
    """tuning.cc enable rules after the user's lists: NVLSTree and CollNet off on one node
    without CollNet; LL128's automatic state decided by the topology."""
    sel = settings.selection
    algo_on = (force_algo or sel.algo_on(algo, func)) and algo not in (
        "NVLSTree", "CollNetDirect", "CollNetChain")
    if algo == "NVLS" and settings.nvls_enable == 0:
        algo_on = False
    state = sel.proto_state(proto, func)
    proto_on = ll128_allowed(profile, settings.version) if state == 2 else bool(state)
    return algo_on and proto_on


def _old_collnet_fallback(settings: NcclSettings, func: str) -> bool:
    """Before 2.24, a user list that leaves no Ring, Tree or NVLS on a node without CollNet
    re-enables Ring and Tree ("If user has hard set NCCL_ALGO=COLLNET, ignore it", v2.23.4)."""
    from .ncclconst import version_tuple

    if version_tuple(settings.version) >= (2, 24, 0):
        return False
    return not any(settings.selection.algo_on(a, func) for a in ("Ring", "Tree", "NVLS"))


@functools.lru_cache(maxsize=512)
def tune_model(profile: Profile, settings: NcclSettings, nranks: int | None = None) -> TuneModel:
    """NCCL's tuning tables for a one-node communicator of ``nranks`` (default: the profile's
    TP size), following ``ncclTopoTuneModel`` of src/graph/tuning.cc (v2.27.3)."""
    n = nranks or profile.tp
    cc = profile.compute_capability
    names = algos(settings.version)
    graphs = search_graphs(profile, settings.version)
    msgs: list[Message] = []
    ring = graphs["Ring"]
    simple_default = 256 if ring.bw_intra * ring.nchannels <= PCI_BW else NCCL_SIMPLE_MAX_NTHREADS
    mt = {a: dict.fromkeys(PROTOS, 0) for a in names}
    mt["Ring"]["Simple"] = _get_nthreads("NCCL_NTHREADS", settings.nthreads, 2 * WARP_SIZE,
                                         NCCL_SIMPLE_MAX_NTHREADS, simple_default, msgs, settings.version)
    mt["Tree"]["Simple"] = _get_nthreads("NCCL_NTHREADS", settings.nthreads, 2 * WARP_SIZE,
                                         NCCL_SIMPLE_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS, msgs, settings.version)
    for a in ("CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"):
        mt[a]["Simple"] = NCCL_MAX_NTHREADS
    mt["Ring"]["LL"] = mt["Tree"]["LL"] = _get_nthreads(
        "NCCL_NTHREADS", settings.nthreads, 2 * WARP_SIZE, NCCL_LL_MAX_NTHREADS,
        NCCL_LL_MAX_NTHREADS, msgs, settings.version)
    mt["Ring"]["LL128"] = mt["Tree"]["LL128"] = _get_nthreads(
        "NCCL_LL128_NTHREADS", settings.ll128_nthreads, NCCL_LL128_MAX_NTHREADS // 4,
        NCCL_LL128_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS, msgs, settings.version)

    lat = {f: {a: dict.fromkeys(PROTOS, 0.0) for a in names} for f in FUNCS}
    bw = {f: {a: dict.fromkeys(PROTOS, 0.0) for a in names} for f in FUNCS}
    hw = "nvlink" if graphs["Ring"].type_intra == "NVL" else "pcie"
    for func in FUNCS:
        nsteps = 2 * (n - 1) if func == "AllReduce" else (n - 1) if func in (
            "ReduceScatter", "AllGather") else n
        for a in names:
            if func in ("Broadcast", "Reduce") and a != "Ring":
                continue
            if func in ("ReduceScatter", "AllGather") and a not in ("PAT", "Ring", "NVLS",
                                                                    "CollNetDirect"):
                continue
            if func == "AllReduce" and a == "PAT":
                continue
            g = graphs[a]
            for pi, p in enumerate(PROTOS):
                if a in ("NVLS", "NVLSTree") and p != "Simple":
                    continue
                if func in ("ReduceScatter", "AllGather") and a == "PAT":
                    continue  # ncclPatEnable: 0 when nNodes != nRanks
                bus = g.nchannels * g.bw_intra
                if a == "Ring" and p == "LL":
                    bus = min(ll_max_bw(cc), bus * .5)
                if a == "Ring" and p == "LL128":
                    bus = min(bus * 0.92, g.nchannels * per_ch_max_ring_ll128_bw(cc))
                if a == "Tree" and func == "AllReduce":
                    bus = min(bus * .92, g.nchannels * per_ch_max_tree_bw(cc))
                if a == "Tree" and p == "LL":
                    bus = min(bus * 1.0 / 3.8, ll_max_bw(cc))
                if a == "Tree" and p == "LL128":
                    bus = min(bus * 7.0 / 9.0, g.nchannels * per_ch_max_tree_ll128_bw(cc))
                # One node: the tree search uses NCCL_TOPO_PATTERN_BALANCED_TREE, so the .85
                # factor for NCCL_TOPO_PATTERN_TREE does not apply.
                if a in ("CollNetDirect", "CollNetChain") and p != "Simple":
                    bus = 0.0
                if not (a != "Ring" and func in ("AllGather", "ReduceScatter")):
                    bus *= (n / nsteps if a == "Ring" else 5.0 / 6.0 if a in (
                        "NVLS", "NVLSTree") else .5)
                bw[func][a][p] = bus
                lat[func][a][p] = BASE_LAT_US[a][p]
                intra = HW_LAT_US[hw][a][pi]
                inter = HW_LAT_US["net"][a][pi]  # ppn > 1; latencyInter is 0 on one node
                if a == "Ring":
                    if func in ("Reduce", "Broadcast"):
                        if g.same_channels:
                            lat[func][a][p] += intra
                        else:
                            step = HW_LAT_US[hw]["Tree"][pi] if p == "Simple" else intra
                            lat[func][a][p] += nsteps * step
                    else:
                        lat[func][a][p] += nsteps * intra
                elif a == "Tree" and func == "AllReduce":
                    lat[func][a][p] += 2 * (n - 1) * intra
                elif a == "CollNetDirect":
                    lat[func][a][p] += 2 * (min(1, n - 1) * intra + (n - 1) * 0.4) + inter
                elif a == "CollNetChain":
                    lat[func][a][p] += 2 * (n - 1) * intra + inter
                elif a == "NVLS":
                    lat[func][a][p] = intra
                elif a == "NVLSTree":
                    lat[func][a][p] += intra
    for func in FUNCS:
        fallback = _old_collnet_fallback(settings, func)
        for a in names:
            for p in PROTOS:
                on = _enabled(profile, settings, func, a, p, fallback and a in ("Ring", "Tree"))
                if not on:
                    bw[func][a][p] = 0.0
    thr = {a: dict(THREAD_THRESHOLD) for a in names}
    thr["Ring"]["LL"] *= n
    thr["CollNetDirect"]["Simple"] = thr["CollNetChain"]["Simple"] = COLLNET_SIMPLE_THREAD_THRESHOLD
    for i, value in enumerate(settings.thread_thresholds):
        if value is not None:
            thr[("Tree", "Ring")[i // 3]][PROTOS[i % 3]] = value
    return TuneModel(n, lat, bw, mt, thr, comm_channels(profile, settings), names, tuple(msgs))


def algo_time(tm: TuneModel, algo: str, proto: str, nbytes: int, func: str = "AllReduce") -> float:
    """``ncclTopoGetAlgoTime``: -1 when unavailable, else latency + bytes / (1000 x bandwidth)
    with Tree allreduce bandwidth scaled by ``treeCorrectionFactor`` (one pipelined op)."""
    bw = tm.bandwidth[func][algo][proto]
    if bw == 0:
        return -1.0
    log_size = log2i(nbytes >> 6)
    if algo == "Tree" and func == "AllReduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[proto][log_size]
    return tm.latency[func][algo][proto] + nbytes / (1000 * bw)


def select(tm: TuneModel, nbytes: int, func: str = "AllReduce") -> tuple[str, str, float] | None:
    """(algo, proto, modelled us) NCCL runs: the minimum time, first in index order on ties
    (src/enqueue.cc ``topoGetAlgoInfo``); None when nothing is available."""
    best = None
    for a in tm.algos:
        for p in PROTOS:
            t = algo_time(tm, a, p, nbytes, func)
            if t >= 0 and (best is None or t < best[2]):
                best = (a, p, t)
    return best


def no_algorithm_error(settings: NcclSettings, dtype: str = "bfloat16") -> NcclInitError:
    """The failure of a collective with nothing enabled (src/enqueue.cc ``topoGetAlgoInfo``):
    ncclInvalidUsage when NCCL_ALGO or NCCL_PROTO is set, else ncclInternalError."""
    algo, proto = settings.raw.get("NCCL_ALGO"), settings.raw.get("NCCL_PROTO")
    detail = (f" NCCL_ALGO was set to {algo}." if algo is not None else "") + \
        (f" NCCL_PROTO was set to {proto}." if proto is not None else "")
    text = (f"Error : no algorithm/protocol available for function AllReduce with datatype "
            f"{DATATYPE_NAMES[dtype]}.{detail}")
    return NcclInitError([warn(text, "enqueue.cc:1828")],
                         "ncclInvalidUsage" if (algo or proto) else "ncclInternalError")


def launch(tm: TuneModel, algo: str, proto: str, nbytes: int) -> tuple[int, int]:
    """(channels, threads per CTA) NCCL launches (src/enqueue.cc ``topoGetAlgoInfo``)."""
    nc = tm.nchannels
    nt = tm.max_threads[algo][proto]
    threshold = tm.thresholds[algo][proto]
    while nbytes < nc * nt * threshold and nc >= 2:
        nc -= 1
    while nbytes < nc * nt * threshold and nt % 128 == 0:
        nt //= 2
    if proto == "Simple":
        nt += WARP_SIZE if algo == "Ring" else 4 * WARP_SIZE if algo == "Tree" else 0
    nt = 3 * WARP_SIZE if nt // WARP_SIZE < 3 else nt
    if algo in ("Tree", "PAT"):
        nt = NCCL_MAX_NTHREADS
    return nc, nt


def chunk_bytes(settings: NcclSettings, algo: str, proto: str, nbytes: int, nc: int,
                nranks: int) -> int:
    """Allreduce chunk (src/enqueue.cc ``calcCollChunking``): buffer / NCCL_STEPS, times the
    chunk steps for Ring/Simple, halved for LL, 15/16 for LL128, rounded down to the protocol's
    grain. 0 means the loop size is 0."""
    step = settings.buffsizes[proto] // NCCL_STEPS
    chunk = step * (ALLREDUCE_CHUNKSTEPS if (proto == "Simple" and algo == "Ring") else 1)
    if proto == "LL":
        chunk //= 2
    elif proto == "LL128":
        chunk = chunk // LL128_LINEELEMS * LL128_DATAELEMS
        if algo == "Tree":
            steps_ll128 = 1 + 0.1 * nranks  # 1 + log2i(nNodes) + 0.1 * ppn, one node
            while nbytes // (nc * chunk or 1) < steps_ll128 * 64 / nranks and chunk > 131072:
                chunk //= 2
            while nbytes // (nc * chunk or 1) < steps_ll128 * 16 / nranks and chunk > 32768:
                chunk //= 2
    return chunk // PROTO_GRAIN[proto] * PROTO_GRAIN[proto]


def check_init(profile: Profile, settings: NcclSettings) -> None:
    """Raise NcclInitError where the communicator init fails: a protocol buffer that wrapped
    negative in its C ``int`` cannot be allocated (the transports size their buffers from
    ``comm->buffSizes``, src/transport/p2p.cc and shm.cc)."""
    from .ncclnet import check_net

    check_net(profile, settings.raw)
    for proto in PROTOS:
        if settings.buffsizes[proto] < 0:
            raise NcclInitError([warn("Cuda failure 'out of memory'", "include/alloc.h:292")],
                                "ncclUnhandledCudaError")


def p2p_level(profile: Profile, settings: NcclSettings, ngpus: int | None = None) -> str:
    """The P2P level in force: NCCL_P2P_LEVEL, else the profile's override, else NCCL's default
    for the version, CPU vendor and GPU count (``ncclconst.default_p2p_level``, src/graph/paths.cc
    ``ncclTopoCheckP2p``)."""
    if settings.p2p_level:
        return settings.p2p_level
    if profile.p2p_default_level != "auto":
        return profile.p2p_default_level
    return default_p2p_level(settings.version, profile.cpu_vendor, ngpus or profile.tp)


def _hops(profile: Profile, settings: NcclSettings, ngpus: int | None = None) -> list[tuple[float, str]]:
    """(share of ring hops, transport): P2P where allowed (src/graph/paths.cc
    ``ncclTopoCheckP2p``: path type at most the P2P level, NCCL_P2P_DISABLE=1 forbids), else
    SHM, else sockets when NCCL_SHM_DISABLE=1. On a profile across nodes the hops that leave a node
    run on the NET plugin NCCL picks (ncclnet.py): ``"IB"``, or ``"NET"`` for its sockets."""
    names = path_types(settings.version)
    level = p2p_level(profile, settings, ngpus)

    def transport(path: str) -> str:
        if not settings.p2p_disable and names.index(path) <= names.index(level):
            return "P2P"
        return "NET" if settings.shm_disable else "SHM"

    if profile.gpus_per_node:  # a server across nodes: nnodes of the ring's hops leave a node
        from .ncclnet import net_choice

        net = "IB" if net_choice(profile, settings.raw).name == "IB" else "NET"
        share = profile.nnodes / max(1, ngpus or profile.tp)
        mix = [(1.0 - share, transport(profile.gpu_path)), (share, net)]
        return [(s, t) for s, t in mix if s > 0]
    mix = [(1.0 - profile.cross_fraction, transport(profile.gpu_path))]
    if profile.cross_fraction > 0:
        mix.append((profile.cross_fraction, transport(profile.cross_path)))
    return mix


def hop_transports(profile: Profile, settings: NcclSettings,
                   ngpus: int | None = None) -> list[tuple[float, str]]:
    """Public view of the ring's hop transports (used by the init log lines)."""
    return _hops(profile, settings, ngpus)


def realized_core(profile: Profile, settings: NcclSettings, tm: TuneModel, algo: str, proto: str,
                  nbytes: int) -> tuple[float, dict, int, int]:
    """Time (us) the collective takes on the simulated hardware, its parts and the launched
    (channels, threads). Raises CollectiveCrash when a chunk rounds down to 0 bytes."""
    n = tm.nranks
    nc, nt = launch(tm, algo, proto, nbytes)
    steps = 2 * (n - 1)
    pi = PROTOS.index(proto)
    hw = "nvlink" if profile.link == "nvlink" else "pcie"
    mix = _hops(profile, settings, n)
    hop = 0.0
    for share, t in mix:
        base = HW_LAT_US[hw][algo][pi] * profile.hop_latency_scale
        if t == "SHM":
            base *= profile.shm_hop_factor
        elif t == "NET":
            base = HW_LAT_US["net"][algo][pi] * profile.net_hop_factor
        elif t == "IB":
            base = HW_LAT_US["net"][algo][pi] * profile.ib_hop_factor
        hop += share * base
    latency = BASE_LAT_US[algo][proto] + steps * hop + (nc - 1) * profile.channel_sync_us
    per_channel = profile.channel_bw_GBps * min(1.0, min(nt, NCCL_LL128_MAX_NTHREADS)
                                                / profile.full_bw_threads)
    bus = min(nc * per_channel, profile.link_bw_cap_GBps)
    used = {t for share, t in mix if share > 0}
    if "SHM" in used:
        bus = min(bus, profile.shm_bw_cap_GBps)
    if "NET" in used:
        bus = min(bus, profile.net_bw_cap_GBps)
    if "IB" in used:
        bus = min(bus, profile.ib_bw_cap_GBps)
    # What each protocol and algorithm delivers of the bus: NCCL's own factors (tuning.cc).
    # Ring and Tree are modelled; other algorithms (NVLS on a TOML profile) reuse Tree's.
    if algo == "Ring":
        bus *= {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}[proto]
        algbw = bus * n / steps
    else:
        bus *= .92 * {"LL": 1 / 3.8, "LL128": 7 / 9, "Simple": 1.0}[proto]
        log_size = log2i(nbytes >> 6)
        factor = TREE_CORRECTION[proto][log_size] if 0 <= log_size < 23 else 1.0
        algbw = bus * 0.5 * factor
    chunk = chunk_bytes(settings, algo, proto, nbytes, nc, n)
    if chunk <= 0:
        raise CollectiveCrash("chunk size 0: DIVUP(nBytes, loopSize) divides by zero", nbytes, proto)
    per_loop = nc * (n if algo == "Ring" else 1) * chunk
    loops = max(1, math.ceil(nbytes / per_loop))
    parts = {"latency": latency, "bandwidth": nbytes / (1000.0 * algbw) if nbytes else 0.0,
             "pipeline": (loops - 1) * steps * hop * profile.buffer_loop_fraction}
    return sum(parts.values()), parts, nc, nt


def _connections_us(profile: Profile, settings: NcclSettings) -> float:
    """CUDA_DEVICE_MAX_CONNECTIONS effect per served allreduce: one queue serialises kernels
    (the allreduce waits less behind compute on this box), many queues cost a little. A stream
    of back-to-back allreduces (all_reduce_perf) does not see it."""
    c = settings.cuda_max_connections
    if c == 1:
        return profile.max_conn_one_us
    if c > 8:
        return profile.max_conn_per_doubling_us * math.log2(c / 8)
    return 0.0


def custom_allreduce_on(profile: Profile, plan: BackendPlan | None = None) -> bool:
    """Whether vLLM's custom allreduce is enabled (custom_all_reduce.py: supported world size,
    and 2 GPUs or fully connected NVLink, unless --disable-custom-all-reduce); ``plan``
    defaults to the profile's own (no vLLM variables set)."""
    return (plan or plan_for(profile)).has("CUSTOM")


class CostModel:
    """Cost model of one (profile, settings) pair; results are cached.

    ``allreduce(nbytes)``: a served allreduce; ``nccl(nbytes, nranks)``: NCCL's collective alone;
    ``breakdown(batch)``: a decode step; ``prefill_ms(prompt_tokens)``: TTFT in ms. NCCL failures
    raise NcclInitError (nothing enabled) or CollectiveCrash (zero chunk). ``speed``: a set's
    ``speed=F`` effect (faults.py): decode steps and prefills F times faster, allreduces as they are.
    """

    def __init__(self, profile: Profile, settings: NcclSettings, plan: BackendPlan | None = None,
                 speed: float = 1.0):
        self.profile = profile
        self.settings = settings
        self.plan = plan or plan_for(profile)
        self.speed = speed

    def tune(self, nranks: int | None = None) -> TuneModel:
        """NCCL's tuning tables (see :func:`tune_model`)."""
        return tune_model(self.profile, self.settings, nranks)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one model per process, bounded cache
    def nccl(self, nbytes: int, nranks: int | None = None, dtype: str = "bfloat16") -> AllreduceCost:
        """NCCL's allreduce of ``nbytes`` on ``nranks`` GPUs: its pick, launch and core time."""
        tm = self.tune(nranks)
        if tm.nranks < 2:
            return AllreduceCost(nbytes, "nccl", "Ring", "Simple", 1, 0, 0.0, 1.0, 1.0,
                                 {"latency": 1.0})
        choice = select(tm, nbytes)
        if choice is None:
            raise no_algorithm_error(self.settings, dtype)
        algo, proto, model_us = choice
        core, parts, nc, nt = realized_core(self.profile, self.settings, tm, algo, proto, nbytes)
        corrupt = proto == "LL128" and not ll128_allowed(self.profile, self.settings.version)
        return AllreduceCost(nbytes, "nccl", algo, proto, nc, nt, model_us, core, core, parts,
                             corrupt)

    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def allreduce(self, nbytes: int) -> AllreduceCost:
        """A served allreduce: the backend vLLM's dispatch picks for ``nbytes`` (the plan's
        ``pick``); NCCL (and NCCL symmetric memory) pay the per-op overhead and the
        CUDA_DEVICE_MAX_CONNECTIONS effect; another backend costs its profile time plus the
        bytes above the decode size at ``backend_GBps`` (a profile time of 0: NCCL's)."""
        p = self.profile
        via = VIA[self.plan.pick(nbytes)]
        if via == "custom":
            t = p.custom_allreduce_us
            return AllreduceCost(nbytes, "custom", "-", "-", 0, 0, t, t, t, {"custom": t})
        c = self.nccl(nbytes)
        parts = dict(c.parts, overhead=p.op_overhead_us,
                     connections=_connections_us(p, self.settings))
        if p.gpus_per_node and "IB" in {t for _, t in _hops(p, self.settings)}:
            from .ncclnet import qps_us

            parts["qps"] = qps_us(p, self.settings.raw)
        total = max(1.0, sum(parts.values()))
        base = {"flashinfer": p.flashinfer_us, "symm_mem": p.symm_mem_us,
                "flashinfer_pcie_ipc": p.fi_pcie_ipc_us}.get(via, 0.0)
        if via in ("nccl", "nccl_symm_mem") or base <= 0:
            return dataclasses.replace(c, via=via, time_us=total, parts=parts)
        t = base + max(0, nbytes - p.decode_bytes) / (1000.0 * p.backend_GBps)
        return AllreduceCost(nbytes, via, "-", "-", 0, 0, t, t, t, {via: t})

    def bench_us(self, nbytes: int, nranks: int | None = None, dtype: str = "bfloat16") -> float:
        """One all_reduce_perf iteration (us, no noise): the collective plus a launch."""
        return self.nccl(nbytes, nranks, dtype).core_us + self.profile.bench_launch_us

    @functools.lru_cache(maxsize=1024)  # noqa: B019
    def breakdown(self, batch: int = 1) -> Breakdown:
        """Decode step with ``batch`` running streams (ms, tok/s per stream, allreduce share)."""
        p = self.profile
        batch = max(1, batch)
        compute = p.compute_ms * (1.0 + p.batch_compute_slope * (batch - 1)) / self.speed
        cost = self.allreduce(p.decode_bytes * batch)
        comm = p.allreduces_per_token * cost.time_us / 1000.0 / self.speed
        step = compute + comm
        return Breakdown(batch, compute, comm, step, comm / step if step else 0.0,
                         1000.0 / step if step else float("inf"), cost)

    def decode_step_ms(self, batch: int = 1) -> float:
        """ms per decode step at ``batch`` concurrent streams."""
        return self.breakdown(batch).step_ms

    def prefill_bytes(self, prompt_tokens: int) -> int:
        """Bytes of one prefill allreduce: hidden x dtype bytes x prompt tokens."""
        return self.profile.decode_bytes * max(1, prompt_tokens)

    def prefill_ms(self, prompt_tokens: int) -> float:
        """TTFT (ms) for a prompt: fixed + per-token compute + the prefill allreduces."""
        p = self.profile
        tokens = max(1, prompt_tokens)
        cost = self.allreduce(self.prefill_bytes(tokens))
        return (p.prefill_fixed_ms + p.prefill_ms_per_token * tokens
                + p.allreduces_per_token * cost.time_us / 1000.0) / self.speed


def expected_tok_s(profile: Profile, settings: NcclSettings) -> float:
    """Single-stream decode rate (tok/s) without noise."""
    return CostModel(profile, settings).breakdown(1).tok_s


def landscape(profile: Profile, envs: dict[str, dict]) -> dict[str, Breakdown]:
    """Breakdown at batch 1 for several named environments (for benchmarks and docs)."""
    from .ncclenv import settings_from

    return {name: CostModel(profile, settings_from(env, profile.nccl_version)).breakdown(1)
            for name, env in envs.items()}
