"""Numbers and names transcribed from NCCL's source (our own transcription, cited per item).

Unless a line says otherwise the values are those of NCCL v2.27.3 (tag ``v2.27.3-1`` of
github.com/NVIDIA/nccl); where a name or limit changed between versions, a function takes the
simulated version. Units: latencies in us, bandwidths in GB/s (1 GB/s = 1000 bytes/us), sizes in
bytes. Nothing here is a guess: constants that are not NCCL's live in ``profiles.py``.
"""

from __future__ import annotations

#: Collectives in NCCL's index order (src/collectives.cc ``ncclFuncStr``).
FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
#: Protocols in index order (src/collectives.cc ``ncclProtoStr``).
PROTOS = ("LL", "LL128", "Simple")
#: Algorithms in index order (src/collectives.cc ``ncclAlgoStr``); PAT exists from 2.23.
_ALGOS_ALL = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
#: Upper-case names of the TUNING per-operation line (src/collectives.cc ``ncclAlgoToString``,
#: ``ncclProtoToString``).
ALGO_UPPER = {"Tree": "TREE", "Ring": "RING", "CollNetDirect": "COLLNET_DIRECT",
              "CollNetChain": "COLLNET_CHAIN", "NVLS": "NVLS", "NVLSTree": "NVLS_TREE", "PAT": "PAT"}
PROTO_UPPER = {"LL": "LL", "LL128": "LL128", "Simple": "SIMPLE"}
#: ``ncclDatatypeToString`` (src/collectives.cc) for the types the simulator uses.
DATATYPE_NAMES = {"bfloat16": "ncclBfloat16", "half": "ncclFloat16", "float": "ncclFloat32"}
DATATYPE_BYTES = {"bfloat16": 2, "half": 2, "float": 4}

#: Base latency per algorithm x protocol (src/graph/tuning.cc ``baseLat``).
BASE_LAT_US = {
    "Tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "Ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "CollNetDirect": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "CollNetChain": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "NVLS": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "NVLSTree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "PAT": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
}
#: Hardware latency per step, by link class (src/graph/tuning.cc ``hwLat``: NVLINK, PCI, NET).
HW_LAT_US = {
    "nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4), "CollNetDirect": (0, 0, 3.7),
               "CollNetChain": (0, 0, 2.8), "NVLS": (0, 0, 25.0), "NVLSTree": (0, 0, 25.0),
               "PAT": (0, 0, 0)},
    "pcie": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7), "CollNetDirect": (0, 0, 3.7),
             "CollNetChain": (0, 0, 2.8), "NVLS": (0, 0, 0), "NVLSTree": (0, 0, 0), "PAT": (0, 0, 0)},
    "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0), "CollNetDirect": (0, 0, 31.0),
            "CollNetChain": (0, 0, 30.0), "NVLS": (0, 0, 18.0), "NVLSTree": (0, 0, 14.0),
            "PAT": (0, 0, 0)},
}

# Per compute-capability tables of src/graph/tuning.cc, single-node column (index2 = 0).
# Rows: Volta (<80), Ampere (80-89), Hopper (90-99), Blackwell (>=100).
_LL_MAX_BW = (39.0, 87.7, 141.0, 2 * 141.0)  # ``llMaxBws``
_PER_CH_MAX_RING_LL128_BW = (20.0, 20.0, 36.7, 2 * 36.7)  # ``perChMaxRingLL128Bws``
_PER_CH_MAX_TREE_LL128_BW = (20.0, 20.0, 36.7, 2 * 36.7)  # ``perChMaxTreeLL128Bws``
_PER_CH_MAX_TREE_BW = (26.5, 24.0, 38.7, 2 * 38.7)  # ``perChMaxTreeBws``

#: Tree correction factors per protocol, powers of two from 64 B to 256 MB
#: (src/graph/tuning.cc ``treeCorrectionFactor``, used by ``ncclTopoGetAlgoTime``).
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
              1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
               .9),
}

# src/graph/topo.h
PCI_BW = 12.0  # ``PCI_BW``: below this ring bandwidth Ring/Simple defaults to 256 threads
# src/include/device.h
NCCL_STEPS = 8
WARP_SIZE = 32
NCCL_MAX_NTHREADS = 640
NCCL_SIMPLE_MAX_NTHREADS = 512
NCCL_LL_MAX_NTHREADS = 512
NCCL_LL128_MAX_NTHREADS = 640
#: ``ncclProtoGrainSize``: a chunk is rounded down to a multiple of this (src/include/device.h).
PROTO_GRAIN = {"LL": 16, "LL128": WARP_SIZE * 8 // 16 * 15 * 8, "Simple": 512}
LL128_LINEELEMS, LL128_DATAELEMS = 16, 15  # ``NCCL_LL128_LINEELEMS`` / ``..._DATAELEMS``
# src/include/collectives.h: Ring/Simple allreduce chunk steps
ALLREDUCE_CHUNKSTEPS = NCCL_STEPS // 2
# src/include/comm.h: bytes per thread before another channel/thread is used
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
COLLNET_SIMPLE_THREAD_THRESHOLD = 512  # src/graph/tuning.cc, CollNetDirect/Chain Simple
# src/init.cc computeBuffSizes: DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE
DEFAULT_BUFFSIZES = {"LL": 8 * NCCL_LL_MAX_NTHREADS * NCCL_STEPS * 16,
                     "LL128": 120 * NCCL_LL128_MAX_NTHREADS * NCCL_STEPS * 8,
                     "Simple": 1 << 22}
DEFAULT_CUDA_MAX_CONNECTIONS = 8  # CUDA's own default (CUDA C Programming Guide, env vars)
NCCL_CONFIG_UNDEF_INT = -(2**31)  # src/include/nccl.h.in, default of NCCL_MAX_CTAS/NCCL_MIN_CTAS
#: ``levelsOldToNew`` of src/graph/paths.cc: legacy integer NCCL_P2P_LEVEL values.
OLD_P2P_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
#: ``ncclGetErrorString`` (src/init.cc).
ERROR_STRINGS = {
    "ncclUnhandledCudaError": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    "ncclSystemError": "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "ncclInternalError": "internal error - please report this issue to the NCCL developers",
    "ncclInvalidArgument": "invalid argument (run with NCCL_DEBUG=WARN for details)",
    "ncclInvalidUsage": "invalid usage (run with NCCL_DEBUG=WARN for details)",
}


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"2.27.3"`` -> ``(2, 27, 3)``; missing parts are 0. Raises ValueError on other text."""
    x, y, z, *_ = [*(int(p) for p in version.split(".")), 0, 0, 0]
    return x, y, z


def version_code(version: str) -> int:
    """``ncclGetVersion`` code: X*10000 + Y*100 + Z for 2.9+ (src/nccl.h.in ``NCCL_VERSION``)."""
    x, y, z = version_tuple(version)
    return x * 10000 + y * 100 + z


def algos(version: str) -> tuple[str, ...]:
    """Algorithm names of a version: PAT appeared in 2.23 (src/collectives.cc history)."""
    return _ALGOS_ALL if version_tuple(version) >= (2, 23, 0) else _ALGOS_ALL[:-1]


def path_types(version: str) -> tuple[str, ...]:
    """``topoPathTypeStr`` of src/graph/topo.cc, best to worst: C2C from 2.26, P2C from 2.27
    (after PXN in 2.27, before it from 2.28)."""
    v = version_tuple(version)
    if v >= (2, 28, 0):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
    if v >= (2, 27, 0):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS")
    if v >= (2, 26, 0):
        return ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS")
    return ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS")


def maxchannels(version: str) -> int:
    """``MAXCHANNELS`` (src/include/device.h): 32 up to 2.24, 64 from 2.25."""
    return 64 if version_tuple(version) >= (2, 25, 0) else 32


def compcap_index(compute_capability: int) -> int:
    """Row of the per-architecture tables (src/graph/tuning.cc ``compCapIndex``)."""
    if compute_capability >= 100:
        return 3
    if compute_capability >= 90:
        return 2
    return 1 if compute_capability >= 80 else 0


def ll_max_bw(cc: int) -> float:
    """``llMaxBw`` for one node (GB/s)."""
    return _LL_MAX_BW[compcap_index(cc)]


def per_ch_max_tree_bw(cc: int) -> float:
    """``perChMaxTreeBw`` for one node (GB/s)."""
    return _PER_CH_MAX_TREE_BW[compcap_index(cc)]


def per_ch_max_ring_ll128_bw(cc: int) -> float:
    """``perChMaxRingLL128Bw`` for one node (GB/s)."""
    return _PER_CH_MAX_RING_LL128_BW[compcap_index(cc)]


def per_ch_max_tree_ll128_bw(cc: int) -> float:
    """``perChMaxTreeLL128Bw`` for one node (GB/s)."""
    return _PER_CH_MAX_TREE_LL128_BW[compcap_index(cc)]


def log2i(n: int) -> int:
    """NCCL's ``log2i`` (src/include/utils.h, via ``log2Down``): floor(log2(n)), -1 for n <= 0."""
    return n.bit_length() - 1 if n > 0 else -1


# -- NCCL's topology (src/graph/topo.h, src/include/graph.h, src/graph/topo.cc), v2.27.3 unless noted
LOC_BW = 5000.0  # topo.h ``LOC_BW``: maxBw/totalBw of a one-GPU system without NET
#: ``ncclTopoGetInterCpuBw`` (topo.cc) from topo.h: ``AMD_BW`` for every AMD CPU, Intel by model
#: (``BDW_QPI_BW``, ``SKL_QPI_BW``, ``SRP_QPI_BW``, ``ERP_QPI_BW``), ``ZPI_BW`` / ``YONGFENG_ZPI_BW``,
#: ``ARM_BW``, ``P9_BW``.
AMD_BW = 16.0
INTEL_QPI_BW = {1: 6.0, 2: 10.0, 3: 22.0, 4: 40.0}  # model BDW, SKL, SRP, ERP
ZPI_BW, YONGFENG_ZPI_BW, ARM_BW, P9_BW = 6.0, 9.0, 6.0, 32.0
#: ``NCCL_TOPO_CPU_ARCH_*`` / ``NCCL_TOPO_CPU_VENDOR_*`` (src/include/graph.h) for a CPU vendor
#: name of a profile; a field NCCL does not set stays ``NCCL_TOPO_UNDEF`` (-1): ARM has no
#: vendor, and only Intel and Zhaoxin get a model (topo.cc ``ncclTopoAddCpu``).
CPU_CODES = {"Intel": (1, 1), "AMD": (1, 2), "Zhaoxin": (1, 3), "POWER": (2, -1), "ARM": (3, -1)}
#: ``NCCL_TOPO_PATTERN_*`` (src/include/graph.h).
PATTERN_BALANCED_TREE, PATTERN_RING, PATTERN_NVLS = 1, 4, 5
#: ncclTopoCompute (src/graph/search.cc) when no graph is found: every GPU in index order, one
#: channel, ``bwIntra = bwInter = 0.1``, ``typeIntra = typeInter = PATH_SYS``.
FALLBACK_BW = 0.1

# Log formats (printf of NCCL, here as Python format strings with the same widths).
#: topo.cc ``ncclTopoPrint`` (INFO(NCCL_GRAPH), every version 2.18-2.30): ``%2.1f``.
TOPO_SYSTEM_FMT = "=== System : maxBw {:2.1f} totalBw {:2.1f} ==="
TOPO_END_LINE = "=========================================="
#: topo.cc ``ncclTopoPrintRec``: a link is ``"+ %s[%2.1f] - "`` then the remote node; a GPU is
#: ``"%s/<id> (%d)"`` (rank), a CPU ``"%s/<id> (%d/%d/%d)"`` (arch/vendor/model), a PCI switch
#: ``"%s/<id> (%lx)"`` (vendor, device, subsystem ids in 16 bits each); ``<id>`` is ``%lX`` of
#: the whole id before 2.21, ``%lx-%lx`` (system id, local id) from 2.21, where the remote end of
#: a non-PCI link (SYS, NVL) stays ``%lX`` until 2.22 and becomes ``%lx-%lx`` in 2.23.
TOPO_LINK_FMT = "+ {}[{:2.1f}] - "
#: search.cc ``ncclTopoPrintGraph`` (INFO(NCCL_GRAPH), 2.18-2.30); one line per channel
#: ``"%2d :"`` followed by ``" %s/%d"`` per GPU of the channel (GPU/rank).
GRAPH_FMT = ("Pattern {}, crossNic {}, nChannels {}, bw {:f}/{:f}, type {}/{}, "
             "sameChannels {}")
GRAPH_CHANNEL_FMT = "{:2d} :"
#: search.cc ``ncclTopoCompute``: WARN up to 2.26, INFO(NCCL_GRAPH) from 2.27.
FALLBACK_FMT = "Could not find a path for pattern {}, falling back to simple order"
#: Line of that WARN in src/graph/search.cc per tag (what NCCL prints as ``graph/search.cc:N``).
_FALLBACK_WARN_LINE = {(2, 18, 1): 946, (2, 18, 3): 960, (2, 18, 5): 978, (2, 19, 1): 987,
                       (2, 19, 3): 1024, (2, 20, 3): 1025, (2, 21, 5): 1036, (2, 22, 3): 1096,
                       (2, 23, 4): 1118, (2, 25, 1): 1135, (2, 26, 2): 1127}
#: src/transport/shm.cc ``shmSendSetup``: ``"Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s"``
#: (send/recv ``direct`` or ``CE``) up to v2.30.4-1, ``"... via SHM/direct"`` at v2.30.7-1.
#: src/transport/p2p.cc ``p2pSendSetup``: ``"Channel %02d/%01d : %d[%d] -> %d[%d] via
#: P2P/%s%s%s"`` (CUMEM or MNNVL, ``/read``, ``/CE``), or ``via P2P/IPC%s%s`` without cuMem
#: (2.18-2.30).
SHM_VIA = "SHM/direct/direct"
SHM_VIA_2307 = "SHM/direct"


def fallback_is_warn(version: str) -> bool:
    """Whether the search fallback is a WARN (up to 2.26) rather than INFO(NCCL_GRAPH) (2.27+),
    src/graph/search.cc ``ncclTopoCompute`` at v2.26.6-1 and v2.27.3-1."""
    return version_tuple(version) < (2, 27, 0)


def fallback_warn_src(version: str) -> str:
    """``file:line`` of the fallback WARN for ``version``: the last listed tag at or below it."""
    v = version_tuple(version)
    line = max((k for k in _FALLBACK_WARN_LINE if k <= v), default=(2, 18, 1))
    return f"graph/search.cc:{_FALLBACK_WARN_LINE[line]}"


def shm_via(version: str) -> str:
    """The ``via`` part of an SHM channel line for ``version`` (see ``SHM_VIA``)."""
    return SHM_VIA_2307 if version_tuple(version) >= (2, 30, 7) else SHM_VIA


def inter_cpu_bw(cpu_vendor: str, cpu_model: int) -> float:
    """SYS link bandwidth between two CPU sockets (GB/s), topo.cc ``ncclTopoGetInterCpuBw``:
    P9_BW on POWER, ARM_BW on ARM, Intel by model (BDW otherwise), AMD_BW, Zhaoxin by model;
    LOC_BW for another x86 vendor."""
    if cpu_vendor == "POWER":
        return P9_BW
    if cpu_vendor == "ARM":
        return ARM_BW
    if cpu_vendor == "Intel":
        return INTEL_QPI_BW.get(cpu_model, INTEL_QPI_BW[1])
    if cpu_vendor == "AMD":
        return AMD_BW
    if cpu_vendor == "Zhaoxin":
        return YONGFENG_ZPI_BW if cpu_model == 1 else ZPI_BW
    return LOC_BW


def default_p2p_level(version: str, cpu_vendor: str, ngpus: int) -> str:
    """NCCL's own P2P level before NCCL_P2P_LEVEL (src/graph/paths.cc ``ncclTopoCheckP2p``):
    up to 2.22 (v2.22.3-1) PATH_SYS except PATH_PXB on ARM, Intel and Zhaoxin CPUs; from 2.23
    (v2.23.4-1, same at v2.30.7-1) PATH_PXB, PATH_SYS on AMD with at most 2 GPUs in the system."""
    if version_tuple(version) < (2, 23, 0):
        return "PXB" if cpu_vendor in ("ARM", "Intel", "Zhaoxin") else "SYS"
    return "SYS" if cpu_vendor == "AMD" and ngpus <= 2 else "PXB"
