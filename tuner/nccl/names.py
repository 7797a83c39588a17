"""Which environment variable names NCCL reads, by version, which of them pick hardware, which
a baseline must not inherit, and what a misspelled or unread name is told.

The name table was extracted from the ``NCCL_PARAM(...)``, ``ncclGetEnv("NCCL_...")`` and
``getenv("NCCL_...")`` calls of NCCL's sources at every release tag from v2.18.1-1 to v2.30.7-1
(github.com/NVIDIA/nccl); ``NCCL_P2P_LEVEL``, ``NCCL_P2P_DISABLE`` and ``NCCL_NET_GDR_LEVEL`` are
read through a variable (src/graph/paths.cc, ``ncclGetLevel``) and were added by hand. A name is
stored without its ``NCCL_`` prefix with ``(first, last)``: the first and the last release that
reads it, ``""`` meaning "before 2.18.1" and "still in 2.30.7". Release tags are sparse, so a
"first" version is an upper bound; version gating of names is therefore only ever a warning.

``NCCL_TOPO_FILE`` and ``NCCL_GRAPH_FILE`` name files NCCL opens at init (src/graph/topo.cc,
ncclTopoGetSystem; src/graph/search.cc, ncclTopoCompute): their values are paths, kept as given
(:mod:`tuner.nccl.values`), and the XML each needs is :mod:`tuner.nccl.xmlfiles`.

Net and tuner plugins read names of their own (``NCCL_TUNER_CONFIG_FILE`` ...): those are unknown
here on purpose and only get a warning (:func:`name_warning`).
"""

from __future__ import annotations

import re

from tuner.nccl.types import NcclVersion, judged_version

__all__ = [
    "HARDWARE_SELECTORS",
    "OWN_PREFIX",
    "is_hardware_selector",
    "is_tuning_variable",
    "name_problem",
    "name_warning",
]

#: name without ``NCCL_`` -> (first release reading it, last release reading it); "" = open end.
_NAMES: dict[str, tuple[str, str]] = {
    "AGG_CHANNEL_SIZE": ("", "2.19.4"),
    "ALGO": ("", ""),
    "ALLGATHERV_ENABLE": ("2.29.2", ""),
    "ALLOC_P2P_NET_LL_BUFFERS": ("", ""),
    "BUFFSIZE": ("", ""),
    "CGA_CLUSTER_SIZE": ("", ""),
    "CHECK_MODE": ("2.29.7", ""),
    "CHECK_POINTERS": ("", ""),
    "CHUNK_SIZE": ("", ""),
    "COLLNET_ENABLE": ("", ""),
    "COLLNET_NODE_THRESHOLD": ("", ""),
    "COMM_BLOCKING": ("", ""),
    "COMM_ID": ("", ""),
    "COMM_SHRINK_SHARE_RESOURCES": ("2.27.3", ""),
    "COMM_SPLIT_SHARE_RESOURCES": ("", ""),
    "CONF_FILE": ("2.23.4", ""),
    "CONNECT_ROUND_MAX_PEERS": ("2.19.4", ""),
    "CREATE_THREAD_CONTEXT": ("", "2.30.4"),
    "CROSS_NIC": ("", ""),
    "CTA_POLICY": ("2.27.3", ""),
    "CUDA_PATH": ("", "2.20.5"),
    "CUMEM_ENABLE": ("", ""),
    "CUMEM_HOST_ENABLE": ("2.23.4", ""),
    "DEBUG": ("", ""),
    "DEBUG_FILE": ("", ""),
    "DEBUG_SUBSYS": ("", ""),
    "DEBUG_TIMESTAMP_FORMAT": ("2.26.2", ""),
    "DEBUG_TIMESTAMP_LEVELS": ("2.26.2", ""),
    "DEV_API_JIT": ("2.30.7", ""),
    "DISABLE_MEM_MANAGER": ("2.29.7", ""),
    "DMABUF_ENABLE": ("", ""),
    "ELASTIC_BUFFER_REGISTER": ("2.30.3", ""),
    "ENABLE_VERSION_CHECK": ("2.29.2", ""),
    "ENV_PLUGIN": ("2.28.7", ""),
    "GDAKI_USE_RELIABLE_DB": ("2.29.7", ""),
    "GDRCOPY_ENABLE": ("", ""),
    "GDRCOPY_FIFO_ENABLE": ("", ""),
    "GDRCOPY_FLUSH_ENABLE": ("", ""),
    "GDRCOPY_SYNC_ENABLE": ("", ""),
    "GDR_FLUSH_DISABLE": ("", ""),
    "GIN_CONNECTION_RAIL": ("2.30.7", ""),
    "GIN_COUNTER_POOL_SIZE": ("2.28.7", "2.29.7"),
    "GIN_ENABLE": ("2.28.7", ""),
    "GIN_ERROR_QUERY_SEC": ("2.28.7", ""),
    "GIN_EXCLUSIVE_CONTEXTS": ("2.29.7", "2.29.7"),
    "GIN_GDAKI_MAX_DEST_RD_ATOMIC": ("2.30.3", ""),
    "GIN_GDAKI_MAX_QP_RD_ATOMIC": ("2.30.3", ""),
    "GIN_GDAKI_NIC_HANDLER": ("2.28.7", ""),
    "GIN_GDAKI_QP_DEPTH": ("2.28.7", ""),
    "GIN_IB_TC": ("2.30.7", ""),
    "GIN_NCONNECTIONS": ("2.29.7", ""),
    "GIN_NCONTEXTS": ("2.28.7", "2.29.7"),
    "GIN_PLUGIN": ("2.29.7", ""),
    "GIN_PLUGIN_REF_COUNT": ("2.29.7", ""),
    "GIN_PROXY_QUEUE_SIZE": ("2.28.7", ""),
    "GIN_SIGNAL_POOL_SIZE": ("2.28.7", "2.29.7"),
    "GIN_TYPE": ("2.28.7", ""),
    "GRAPH_DUMP_FILE": ("", ""),
    "GRAPH_DUMP_FILE_RANK": ("", ""),
    "GRAPH_FILE": ("", ""),
    "GRAPH_HELPER_DISABLE": ("", ""),
    "GRAPH_MIXING_SUPPORT": ("", ""),
    "GRAPH_REGISTER": ("", ""),
    "GRAPH_STREAM_ORDERING": ("2.30.7", ""),
    "GROUP_CUDA_STREAM": ("", ""),
    "HOSTID": ("", ""),
    "IBVERBS_LIB": ("2.30.3", ""),
    "IB_ADAPTIVE_ROUTING": ("", ""),
    "IB_ADDR_FAMILY": ("2.21.5", ""),
    "IB_ADDR_RANGE": ("2.21.5", ""),
    "IB_AR_THRESHOLD": ("", ""),
    "IB_DATA_DIRECT": ("2.27.3", ""),
    "IB_DEVICE_PCI_ORDER": ("2.29.7", ""),
    "IB_DISABLE": ("", ""),
    "IB_ECE_ENABLE": ("2.23.4", ""),
    "IB_FIFO_TC": ("2.22.3", ""),
    "IB_GID_INDEX": ("", ""),
    "IB_HCA": ("", ""),
    "IB_MERGE_NICS": ("2.20.3", ""),
    "IB_MERGE_VFS": ("", ""),
    "IB_MQP_RETRY_ALL": ("2.24.3", ""),
    "IB_MQP_RETRY_CNT": ("2.24.3", ""),
    "IB_MQP_RETRY_SLEEP_MSEC": ("2.24.3", ""),
    "IB_OOO_RQ": ("2.30.3", ""),
    "IB_PCI_RELAXED_ORDERING": ("", ""),
    "IB_PKEY": ("", ""),
    "IB_PREPOST_RECEIVE_WORK_REQUESTS": ("2.29.7", ""),
    "IB_QPS_PER_CONNECTION": ("", ""),
    "IB_QUERY_PORT_SPEED": ("2.30.7", ""),
    "IB_RECEIVER_SIDE_MATCHING_SCHEME": ("2.29.7", ""),
    "IB_RESILIENCY_PORT_FAILOVER": ("2.29.7", ""),
    "IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS": ("2.29.7", ""),
    "IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY": ("2.29.7", ""),
    "IB_RESILIENCY_PORT_RECOVERY": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX": ("2.30.3", ""),
    "IB_RESILIENCY_PORT_RECOVERY_START_DELAY": ("2.30.3", ""),
    "IB_RETRY_CNT": ("", ""),
    "IB_RETURN_ASYNC_EVENTS": ("2.23.4", ""),
    "IB_ROCE_VERSION_NUM": ("2.21.5", ""),
    "IB_ROUTABLE_FLID_GID_INDEX": ("2.22.3", ""),
    "IB_SL": ("", ""),
    "IB_SPLIT_DATA_ON_QPS": ("", ""),
    "IB_SUBNET_AWARE_ROUTING": ("2.30.7", ""),
    "IB_SUBNET_PREFIX_LEN": ("2.30.7", ""),
    "IB_TC": ("", ""),
    "IB_TIMEOUT": ("", ""),
    "IB_USE_INLINE": ("", ""),
    "IB_WARN_RAIL_LOCAL": ("2.24.3", ""),
    "IGNORE_COLLNET_MISMATCH": ("2.30.3", ""),
    "IGNORE_CPU_AFFINITY": ("", ""),
    "IGNORE_DISABLED_P2P": ("", ""),
    "IGNORE_NET_MISMATCH": ("2.30.3", ""),
    "IPC_USE_ABSTRACT_SOCKET": ("2.29.2", ""),
    "L1_SHARED_MEMORY_CARVEOUT": ("", ""),
    "LAUNCH_MODE": ("", ""),
    "LAUNCH_ORDER_IMPLICIT": ("2.26.2", ""),
    "LAUNCH_RACE_FATAL": ("2.26.2", ""),
    "LEGACY_CUDA_REGISTER": ("2.24.3", ""),
    "LL128_BUFFSIZE": ("", ""),
    "LL128_C2C": ("2.27.3", ""),
    "LL128_NTHREADS": ("", ""),
    "LL_BUFFSIZE": ("", ""),
    "LOCAL_REGISTER": ("2.19.1", ""),
    "LSA_TEAM_SIZE": ("2.29.7", ""),
    "MAX_CTAS": ("", ""),
    "MAX_NCHANNELS": ("", ""),
    "MAX_NRINGS": ("", ""),
    "MAX_P2P_NCHANNELS": ("", ""),
    "MEM_SYNC_DOMAIN": ("", ""),
    "MIN_CTAS": ("", ""),
    "MIN_NCHANNELS": ("", ""),
    "MIN_NRINGS": ("", ""),
    "MIN_P2P_NCHANNELS": ("", ""),
    "MLOPART_RDMA_ENABLE": ("2.30.7", ""),
    "MNNVL": ("2.20.3", "2.20.5"),
    "MNNVL_CLIQUE_ID": ("2.23.4", ""),
    "MNNVL_CROSS_CLIQUE": ("2.30.3", ""),
    "MNNVL_ENABLE": ("2.21.5", ""),
    "MNNVL_RAIL_PER_HOST": ("2.28.7", ""),
    "MNNVL_SCATTER_NETS_ENABLE": ("2.27.5", ""),
    "MNNVL_UUID": ("2.25.1", ""),
    "MULTI_RANK_GPU_ENABLE": ("2.30.3", ""),
    "MULTI_SEGMENT_REGISTER": ("2.29.2", ""),
    "NCHANNELS_PER_NET_PEER": ("", ""),
    "NET": ("", ""),
    "NETDEVS_POLICY": ("2.28.3", ""),
    "NET_DISABLE_INTRA": ("", ""),
    "NET_FORCE_FLUSH": ("", ""),
    "NET_FORCE_MERGE": ("2.24.3", ""),
    "NET_GDR_C2C": ("2.26.2", ""),
    "NET_GDR_LEVEL": ("", ""),
    "NET_GDR_MLOPART": ("2.30.7", ""),
    "NET_GDR_READ": ("", ""),
    "NET_MERGE_LEVEL": ("2.24.3", ""),
    "NET_MERGE_POLICY": ("2.30.7", ""),
    "NET_OPTIONAL_RECV_COMPLETION": ("2.24.3", ""),
    "NET_OVERHEAD": ("", ""),
    "NET_PLUGIN": ("", ""),
    "NET_PLUGIN_REF_COUNT": ("2.26.2", ""),
    "NET_SHARED_BUFFERS": ("", ""),
    "NET_SHARED_COMMS": ("", ""),
    "NO_CACHE": ("2.29.7", ""),
    "NSOCKS_PERTHREAD": ("", ""),
    "NTHREADS": ("", ""),
    "NUM_RMA_CTX": ("2.29.2", ""),
    "NVB_DISABLE": ("", ""),
    "NVB_PRECONNECT": ("", ""),
    "NVLINK_UTIL_CENTRIC_SCHED_ENABLE": ("2.27.3", ""),
    "NVLSTREE_MAX_CHUNKSIZE": ("2.20.3", ""),
    "NVLS_CHUNKSIZE": ("2.21.5", ""),
    "NVLS_ENABLE": ("", ""),
    "NVLS_NCHANNELS": ("", ""),
    "NVTX_DISABLE": ("2.28.3", ""),
    "OOB_NET_ENABLE": ("2.23.4", ""),
    "OOB_NET_IFNAME": ("2.23.4", ""),
    "P2P_DIRECT_DISABLE": ("", ""),
    "P2P_DISABLE": ("", ""),
    "P2P_EPOCH_ENABLE": ("2.29.2", ""),
    "P2P_LEVEL": ("", ""),
    "P2P_LL_THRESHOLD": ("", ""),
    "P2P_MAX_PEERS": ("2.30.3", ""),
    "P2P_NET_CHUNKSIZE": ("", ""),
    "P2P_NVL_CHUNKSIZE": ("", ""),
    "P2P_PCI_CHUNKSIZE": ("", ""),
    "P2P_PER_CHANNEL_NET_BW": ("2.29.2", ""),
    "P2P_PXN_LEVEL": ("", ""),
    "P2P_READ_ENABLE": ("", ""),
    "P2P_SCHEDULE_GROUP_SIZE": ("2.28.7", ""),
    "P2P_USE_CUDA_MEMCPY": ("", ""),
    "PARAM_DUMP_ALL": ("2.30.3", ""),
    "PAT_ENABLE": ("2.23.4", ""),
    "PROFILER_PLUGIN": ("2.23.4", ""),
    "PROGRESS_APPENDOP_FREQ": ("", ""),
    "PROTO": ("", ""),
    "PROXY_APPEND_BATCH_SIZE": ("", ""),
    "PROXY_CPUSET": ("2.28.3", ""),
    "PROXY_DUMP_SIGNAL": ("", ""),
    "PROXY_PROFILE": ("", "2.22.3"),
    "PXN_C2C": ("2.27.3", ""),
    "PXN_DISABLE": ("", ""),
    "RAS_ADDR": ("2.24.3", ""),
    "RAS_ENABLE": ("2.24.3", ""),
    "RAS_TIMEOUT_FACTOR": ("2.24.3", ""),
    "REPORT_CONNECT_PROGRESS": ("2.19.4", ""),
    "RMA_DISABLE": ("2.30.7", ""),
    "RMA_PLUGIN": ("2.30.7", ""),
    "RMA_PLUGIN_REF_COUNT": ("2.30.7", ""),
    "RMA_PROXY_DUMP_SIGNAL": ("2.29.2", ""),
    "RMA_PROXY_QUEUE_SIZE": ("2.29.2", ""),
    "RUNTIME_CONNECT": ("2.22.3", ""),
    "SET_CPU_STACK_SIZE": ("2.28.3", ""),
    "SET_STACK_SIZE": ("", ""),
    "SET_THREAD_NAME": ("", ""),
    "SHADOW_MEMPOOL_MAX_SIZE": ("2.30.7", ""),
    "SHM_DISABLE": ("", ""),
    "SHM_LOCALITY": ("", ""),
    "SHM_MEMCPY_MODE": ("", "2.30.4"),
    "SHM_USE_CUDA_MEMCPY": ("", "2.30.4"),
    "SINGLE_PROC_MEM_REG_ENABLE": ("2.28.3", ""),
    "SOCKET_FAMILY": ("", ""),
    "SOCKET_IFNAME": ("", ""),
    "SOCKET_INLINE": ("2.27.3", ""),
    "SOCKET_MAGIC": ("2.30.7", ""),
    "SOCKET_MIN_TASKSIZE": ("2.27.3", ""),
    "SOCKET_NTHREADS": ("", ""),
    "SOCKET_POLL_TIMEOUT_MSEC": ("2.29.2", ""),
    "SOCKET_RCVBUF": ("2.27.3", ""),
    "SOCKET_RETRY_CNT": ("2.24.3", ""),
    "SOCKET_RETRY_SLEEP_MSEC": ("2.24.3", ""),
    "SOCKET_SNDBUF": ("2.27.3", ""),
    "SYM_CE_THRESHOLD": ("2.29.2", ""),
    "SYM_CTAS": ("2.27.3", ""),
    "SYM_GIN_KERNELS_ENABLE": ("2.29.7", ""),
    "SYM_KERNEL": ("2.27.3", ""),
    "SYM_NOWIN_ENABLE": ("2.29.2", ""),
    "SYM_REUSE_SYSMEM_HANDLES": ("2.30.4", ""),
    "SYM_RS_GIN_CHUNK_SIZE": ("2.30.7", ""),
    "SYM_TMA_ENABLE": ("2.30.3", ""),
    "THREAD_THRESHOLDS": ("", ""),
    "TOPO_DUMP_FILE": ("", ""),
    "TOPO_DUMP_FILE_RANK": ("", ""),
    "TOPO_FILE": ("", ""),
    "TOPO_SPLIT_MLOPART": ("2.30.7", ""),
    "TUNER_PLUGIN": ("2.19.1", ""),
    "UID_STAGGER_RATE": ("2.23.4", ""),
    "UID_STAGGER_THRESHOLD": ("2.23.4", ""),
    "UNPACK_DOUBLE_NCHANNELS": ("2.22.3", ""),
    "WARN_ENABLE_DEBUG_INFO": ("2.19.4", ""),
    "WIN_ENABLE": ("2.27.3", ""),
    "WIN_STRIDE": ("2.27.3", ""),
    "WORK_ARGS_BYTES": ("2.22.3", ""),
    "WORK_FIFO_BYTES": ("2.22.3", ""),
    "WORK_FIFO_DEPTH": ("", "2.21.5"),
}

#: Every ``NCCL_*`` name NCCL 2.18.1 to 2.30.7 reads.
KNOWN_NAMES: frozenset[str] = frozenset("NCCL_" + n for n in _NAMES)

#: Variables that select hardware (an interface, an HCA, a plugin, a topology file) rather than
#: tune collectives: a deployment needs them, so they are neither tuned nor stripped. Each entry
#: names the NCCL source that reads it.
# Not here, though they name a file or library: NCCL_CONF_FILE (src/misc/param.cc, initEnv: a
# file of further variables, tuning included) and NCCL_TUNER_PLUGIN (src/plugin/tuner.cc: a
# tuner changes NCCL's algorithm choice): both tune, so an inherited one never reaches a trial.
HARDWARE_SELECTORS: dict[str, str] = {
    "NCCL_SOCKET_IFNAME": "src/misc/socket.cc, ncclFindInterfaces (network interfaces for bootstrap and sockets)",
    "NCCL_SOCKET_FAMILY": "src/misc/socket.cc (IPv4 or IPv6 for sockets)",
    "NCCL_IB_HCA": "src/transport/net_ib (which InfiniBand/RoCE adapters and ports to use)",
    "NCCL_IB_GID_INDEX": "src/transport/net_ib (RoCE GID of the port)",
    "NCCL_IB_ROUTABLE_FLID_GID_INDEX": "src/transport/net_ib (routable FLID GID index)",
    "NCCL_IB_ADDR_FAMILY": "src/transport/net_ib (address family of the GID)",
    "NCCL_IB_ADDR_RANGE": "src/transport/net_ib (GID address range)",
    "NCCL_IB_ROCE_VERSION_NUM": "src/transport/net_ib (RoCE version of the GID)",
    "NCCL_IB_PKEY": "src/transport/net_ib (InfiniBand partition key)",
    "NCCL_IBVERBS_LIB": "src/misc/ibvsymbols.cc (which libibverbs to load)",
    "NCCL_NET": "src/plugin/net.cc (which network backend: IB, Socket, a plugin)",
    "NCCL_NET_PLUGIN": "src/plugin/net.cc (network plugin library)",
    "NCCL_PROFILER_PLUGIN": "src/plugin/profiler.cc (profiler plugin library)",
    "NCCL_ENV_PLUGIN": "src/plugin/env.cc (environment plugin library)",
    "NCCL_GIN_PLUGIN": "src/plugin/gin.cc (GPU-initiated networking plugin library)",
    "NCCL_RMA_PLUGIN": "src/plugin/rma.cc (RMA plugin library)",
    "NCCL_OOB_NET_IFNAME": "src/bootstrap.cc (out-of-band network interface)",
    "NCCL_TOPO_FILE": "src/graph/topo.cc, ncclTopoGetSystem (topology XML describing the machine)",
    "NCCL_HOSTID": "src/misc/utils.cc, getHostHash (which processes share a host)",
    "NCCL_COMM_ID": "src/bootstrap.cc (bootstrap root address)",
    "NCCL_CUDA_PATH": "src/misc/cudawrap.cc (which libcuda to load, up to 2.20)",
}

#: Names other programs use for NCCL-adjacent settings; never reported as NCCL typos.
_NOT_TYPOS = frozenset({"NCCL_TUNER_CONFIG_FILE"})


def is_hardware_selector(name: str) -> bool:
    """True for variables that select hardware or libraries (:data:`HARDWARE_SELECTORS`)."""
    return name in HARDWARE_SELECTORS


def read_by(name: str, version: NcclVersion) -> bool | None:
    """Whether NCCL ``version`` reads ``name``; None for a name NCCL never reads (2.18.1-2.30.7)."""
    if not name.startswith("NCCL_") or name[5:] not in _NAMES:
        return None
    first, last = _NAMES[name[5:]]
    if first and version < NcclVersion.parse(first):
        return False
    return not (last and version > NcclVersion.parse(last))


def _distance(a: str, b: str) -> int:
    """Optimal-string-alignment edit distance (insert, delete, substitute, swap neighbours)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


_TUNING_EXTRA = ("CUDA_DEVICE_MAX_CONNECTIONS",)


def closest_name(name: str) -> str | None:
    """The known NCCL (or CUDA tuning) name ``name`` most likely misspells, or None.

    A name matches when it equals a known name up to case and surrounding whitespace, or is
    within edit distance 2 of one (1 for names of at most 10 characters) after upper-casing.
    """
    if name in KNOWN_NAMES or name in _TUNING_EXTRA or name in _NOT_TYPOS:
        return None
    folded = re.sub(r"\s+", "", name).upper().replace("-", "_")
    candidates = sorted(KNOWN_NAMES) + list(_TUNING_EXTRA)
    if folded in candidates:
        return folded
    if not (folded.startswith("NCCL") or folded.startswith("CUDA_DEVICE")):
        return None
    best, best_d = None, 99
    for known in candidates:
        d = _distance(folded, known)
        if d < best_d:
            best, best_d = known, d
    limit = 1 if len(folded) <= 10 else 2
    return best if best_d <= limit else None


#: Variables the baseline strips from the inherited environment.
TUNING_PREFIXES = ("NCCL_",)
TUNING_NAMES = ("CUDA_DEVICE_MAX_CONNECTIONS",)
#: nccl-tune's own settings (NCCL_TUNE_HEARTBEAT_S, ...): NCCL never reads them.
OWN_PREFIX = "NCCL_TUNE_"


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
    reads = read_by(name, judged_version(version))
    if reads is None:
        return (f"{name} is not read by NCCL 2.18.1-2.30.7 itself; PyTorch or a plugin may read it "
                "(e.g. NCCL_TUNER_CONFIG_FILE), otherwise it has no effect")
    if not reads:
        return f"NCCL {judged_version(version)} does not read {name} (another release does)"
    return None
