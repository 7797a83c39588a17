"""One record per environment variable NCCL (or CUDA, or a plugin NCCL ships) reads: the one table.

Everything nccl-tune knows of a variable is one :class:`Variable` in :data:`VARIABLES`: how NCCL
parses it, the releases that read it, whether NCCL echoes it at init, what it can act on, its
label in the report, its safety note, its source, and what a release changed about it. Name
checks (:mod:`tuner.nccl.names`), value rules (:mod:`tuner.nccl.values`, through
:attr:`Variable.rule`), the proof (:mod:`tuner.nccl.proof`), the decode rule
(:mod:`tuner.nccl.decode`) and the report's labels read this table; a new variable is one entry.

The plain entries (``_v``) were extracted from the ``NCCL_PARAM(...)``, ``DEFINE_NCCL_PARAM(...)``,
``ncclGetEnv("NCCL_...")`` and ``getenv("NCCL_...")`` calls of NCCL's sources at every release tag
v2.18.1-1 to v2.30.7-1 (github.com/NVIDIA/nccl); ``source`` names the file and call of the newest
tag that reads it. ``first``/``last`` are the first and last tag reading it (``""``: before
2.18.1 / still in the newest). Tags are sparse, so ``first`` is an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuner.nccl.types import NcclVersion

__all__ = [
    "ACTS",
    "PARSES",
    "VARIABLES",
    "Variable",
    "VersionFact",
    "variable",
]

Parse = Literal["int", "level", "list", "enum", "string", "path", "numbers", "bool"]
#: How NCCL parses a value: ``int`` C ``strtoll(v, NULL, 0)`` (src/misc/param.cc, ncclLoadParam);
#: ``level`` a path name or legacy digit (src/graph/paths.cc, ncclGetLevel); ``list`` the
#: NCCL_ALGO/NCCL_PROTO grammar (src/graph/tuning.cc, parseList); ``enum`` one of ``values``;
#: ``string``/``path`` kept as written (a path is opened with fopen); ``numbers`` several
#: integers (sscanf); ``bool`` a 2.30 param-registry flag (src/include/param/param.h).
PARSES: tuple[Parse, ...] = ("int", "level", "list", "enum", "string", "path", "numbers", "bool")
Act = Literal["decode", "prefill", "network"]
ACTS: tuple[Act, ...] = ("decode", "prefill", "network")
Reader = Literal["nccl", "cuda", "plugin", "pytorch"]

_DP: frozenset[Act] = frozenset({"decode", "prefill"})
_NET: frozenset[Act] = frozenset({"network"})
_NONE: frozenset[Act] = frozenset()


@dataclass(frozen=True)
class VersionFact:
    """What NCCL ``version`` (and later) changed about a variable, with its primary ``source``."""

    version: str
    text: str
    source: str


@dataclass(frozen=True)
class Variable:
    """One variable as NCCL reads it.

    ``name`` as NCCL's getenv spells it; ``parse`` (:data:`PARSES`); ``source`` the NCCL file and
    call that reads it; ``first``/``last`` the first and last release reading it (``""`` open);
    ``reader`` who reads it (``cuda``: CUDA_DEVICE_MAX_CONNECTIONS; ``plugin``: a plugin NCCL
    ships under plugins/; ``pytorch``: torch.distributed); ``echoed_at_init``: NCCL prints
    ``NAME set by environment to VALUE`` during every communicator init when it is set;
    ``acts_on`` what it can change (:data:`ACTS`; empty = nothing measured; None = not assessed);
    ``short`` its label in the report (``""``: the name minus ``NCCL_``); ``rule`` the value rule
    of :mod:`tuner.nccl.values` (``""``: by ``parse``); ``accepted`` what it accepts, for error
    messages; ``values`` an enum's values; ``legacy_levels`` a level variable's old digits 0..5;
    ``safety`` its safety note; ``unreadable`` what NCCL does when a path cannot be opened;
    ``hardware`` what hardware it selects (non-empty: a hardware
    selector, kept from the inherited environment and checked only for its name); ``facts``
    what releases changed; ``plugin`` (a variable naming a plugin library) what that library can
    do in NCCL's place: the tool names it as a source of settings it did not set; ``read_when``
    when NCCL reads it, for a variable read only on some paths (the network's: an absent echo
    then proves nothing unless the log shows that path was taken).
    """

    name: str
    parse: Parse
    source: str
    first: str = ""
    last: str = ""
    reader: Reader = "nccl"
    echoed_at_init: bool = False
    acts_on: frozenset[Act] | None = None
    short: str = ""
    rule: str = ""
    accepted: str = ""
    values: tuple[str, ...] = ()
    legacy_levels: tuple[str, ...] = ()
    safety: str = ""
    unreadable: str = ""
    hardware: str = ""
    facts: tuple[VersionFact, ...] = ()
    plugin: str = ""
    read_when: str = ""

    @property
    def label(self) -> str:
        """The report's label: :attr:`short`, else the name minus ``NCCL_``."""
        return self.short or self.name.removeprefix("NCCL_")

    def read_by(self, version: NcclVersion) -> bool:
        """Whether NCCL ``version`` reads it (between :attr:`first` and :attr:`last`)."""
        if self.first and version < NcclVersion.parse(self.first):
            return False
        return not (self.last and version > NcclVersion.parse(self.last))


def _v(name: str, parse: Parse, source: str, *, first: str = "", last: str = "", hardware: str = "",
       plugin: str = "") -> Variable:
    """A plain entry: a variable the tool does not tune (read, named, never judged beyond its parse)."""
    acts = _NET if name.startswith(("NCCL_IB_", "NCCL_SOCKET_", "NCCL_NET_")) else None
    return Variable(name, parse, source, first=first, last=last, hardware=hardware, acts_on=acts, plugin=plugin)


def _plugin(name: str, source: str) -> Variable:
    """A variable read by a plugin shipped in NCCL's plugins/ folder (v2.30.7-1), not by NCCL."""
    return Variable(name, "string", f"{source} (v2.30.7-1)", reader="plugin", acts_on=_NONE)


_LEGACY = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")  # src/graph/paths.cc, levelsOldToNew
_CHANNELS = "src/graph/connect.cc, ncclMaxNchannels/ncclMinNchannels (NCCL_PARAM)"
_CTAS = "src/init.cc, envConfigOverride (NCCL_PARAM)"
_CTA_FACT = VersionFact("2.28.3", "NCCL lowers the maximum CTA count on Blackwell from 32 to 16; NCCL_MIN_CTAS=32 "
                        "NCCL_MAX_CTAS=32 restores it", "NCCL 2.28.3 release notes; src/init.cc, v2.28.3-1")
_SHM_GONE = VersionFact("2.30.7", "removed: NCCL ignores it without a word", "src/transport/shm.cc, v2.30.7-1 "
                        "(read up to v2.30.4-1); NCCL 2.30 release notes")
_LL128_SAFETY = "LL128 forced where NCCL did not enable it can corrupt data (NCCL issues #1026, #1054)"

_DETAILED: tuple[Variable, ...] = (
    # In the order the report's labels list them (tuner.report.style).
    Variable("NCCL_PROTO", "list", "src/graph/tuning.cc, ncclTopoTuneModel/parseList (ncclGetEnv)",
             echoed_at_init=True, acts_on=_DP, short="PROTO", rule="list", safety=_LL128_SAFETY,
             accepted="a comma list of LL, LL128, Simple (case-insensitive, no spaces); '^' first excludes; "
                      "from 2.24 also 'AllReduce:LL;...'"),
    Variable("NCCL_ALGO", "list", "src/graph/tuning.cc, ncclTopoTuneModel/parseList (ncclGetEnv)",
             echoed_at_init=True, acts_on=_DP, short="ALGO", rule="list",
             safety="forcing NVLS/CollNet where NCCL cannot build them fails the init",
             accepted="a comma list of {algos} (case-insensitive, no spaces); '^' first excludes; "
                      "from 2.24 also 'AllReduce:Tree;Broadcast:Ring' (every entry after the first needs a prefix)"),
    Variable("NCCL_MAX_NCHANNELS", "int", _CHANNELS, echoed_at_init=True, acts_on=_DP, short="CH", rule="channels"),
    Variable("NCCL_MIN_NCHANNELS", "int", _CHANNELS, echoed_at_init=True, acts_on=_DP, short="MINCH", rule="channels"),
    Variable("NCCL_BUFFSIZE", "int", "src/init.cc, computeBuffSizes (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="BUF", rule="buffsize"),
    Variable("NCCL_LL_BUFFSIZE", "int", "src/init.cc, computeBuffSizes (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="LLBUF", rule="buffsize"),
    Variable("NCCL_LL128_BUFFSIZE", "int", "src/init.cc, computeBuffSizes (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="LL128BUF", rule="buffsize"),
    Variable("NCCL_NTHREADS", "int", "src/graph/tuning.cc, getNthreads (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="NTHR", rule="nthreads", accepted="a multiple of 32 from 64 to 512"),
    Variable("NCCL_MAX_CTAS", "int", _CTAS, echoed_at_init=True, acts_on=_DP, short="MAXCTA", rule="channels",
             facts=(_CTA_FACT,)),
    Variable("NCCL_MIN_CTAS", "int", _CTAS, echoed_at_init=True, acts_on=_DP, short="MINCTA", rule="channels",
             facts=(_CTA_FACT,)),
    Variable("NCCL_P2P_LEVEL", "level", "src/graph/paths.cc, ncclGetLevel (ncclGetEnv)", echoed_at_init=True,
             acts_on=_DP, short="P2P", rule="level", legacy_levels=_LEGACY,
             safety="PHB/SYS can hang where ACS or an IOMMU reroutes P2P (NCCL troubleshooting guide)",
             accepted="one of {levels} (exact case), or a legacy level 0-5"),
    Variable("NCCL_NVLS_ENABLE", "int", "src/transport/nvls.cc, ncclNvlsInit (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="NVLS", rule="nvls", safety="forcing NVLS on where it is not supported fails the init",
             accepted="0 (off), 1 (forced on) or 2 (automatic)"),
    Variable("NCCL_CUMEM_ENABLE", "int", "src/misc/cudawrap.cc, ncclCuMemEnable (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, short="CUMEM", rule="cumem", accepted="0 (off), 1 (on) or -2 (automatic, 2.19+)"),
    Variable("CUDA_DEVICE_MAX_CONNECTIONS", "int", "CUDA C++ Programming Guide, CUDA Environment Variables",
             reader="cuda", acts_on=_DP, short="CDMC", rule="cuda_connections",
             accepted="a whole number from 1 to 32"),
    # The other variables nccl-tune judges.
    Variable("NCCL_THREAD_THRESHOLDS", "numbers", "src/graph/tuning.cc, ncclTopoTuneModel (sscanf)",
             echoed_at_init=True, acts_on=_DP, rule="thresholds",
             accepted="six decimal numbers separated by spaces (Tree LL LL128 Simple, Ring LL LL128 Simple); "
                      "-1 keeps a default"),
    Variable("NCCL_MAX_NRINGS", "int", _CHANNELS, echoed_at_init=True, acts_on=_DP, rule="channels"),
    Variable("NCCL_MIN_NRINGS", "int", _CHANNELS, echoed_at_init=True, acts_on=_DP, rule="channels"),
    Variable("NCCL_LL128_NTHREADS", "int", "src/graph/tuning.cc, getNthreads (NCCL_PARAM)", echoed_at_init=True,
             acts_on=_DP, rule="nthreads", accepted="a multiple of 32 from 160 to 640"),
    Variable("NCCL_P2P_DISABLE", "int", "src/graph/paths.cc, ncclGetLevel (strtol)", acts_on=_DP, rule="only_one",
             accepted="1 (disable P2P) or 0 (no effect)"),
    Variable("NCCL_SHM_DISABLE", "int", "src/transport/shm.cc, shmCanConnect (NCCL_PARAM)", acts_on=_DP,
             rule="only_one", accepted="1 (disable SHM) or 0 (no effect)"),
    Variable("NCCL_DEBUG", "enum", "src/debug.cc, ncclDebugInit", acts_on=_NONE, rule="debug",
             values=("VERSION", "WARN", "INFO", "ABORT", "TRACE")),
    Variable("NCCL_TOPO_FILE", "path", "src/graph/topo.cc, ncclTopoGetSystem (ncclGetEnv)", acts_on=_DP,
             rule="path", hardware="topology XML describing the machine",
             unreadable="NCCL logs \"Could not open XML topology file\" and detects the machine itself "
                        "(src/graph/xml.cc, ncclTopoGetXmlFromFile)",
             accepted="the path of an NCCL topology XML file (root <system version=\"{xml}\">, as "
                      "NCCL_TOPO_DUMP_FILE writes it; in a space file, relative to that file)"),
    Variable("NCCL_GRAPH_FILE", "path", "src/graph/search.cc, ncclTopoCompute (ncclGetEnv)", acts_on=_DP,
             rule="path", unreadable="init fails (\"Could not open XML graph file\", src/graph/xml.cc, "
                                     "ncclTopoGetXmlGraphFromFile)",
             accepted="the path of an NCCL graph XML file (root <graphs version=\"{xml}\"> with <graph> "
                      "children, as NCCL_GRAPH_DUMP_FILE writes it; in a space file, relative to that file)"),
    Variable("NCCL_SHM_USE_CUDA_MEMCPY", "int", "src/transport/shm.cc, NCCL_PARAM(ShmUseCudaMemcpy)",
             last="2.30.4", acts_on=_DP, facts=(_SHM_GONE,)),
    Variable("NCCL_SHM_MEMCPY_MODE", "int", "src/transport/shm.cc, NCCL_PARAM(ShmMemcpyMode)", last="2.30.4",
             acts_on=_DP, facts=(_SHM_GONE,)),
    # Read by PyTorch's ProcessGroupNCCL (torch/csrc/distributed/c10d), not by NCCL.
    Variable("NCCL_ASYNC_ERROR_HANDLING", "int", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (legacy name "
             "of TORCH_NCCL_ASYNC_ERROR_HANDLING)", reader="pytorch", acts_on=_NONE),
    Variable("NCCL_BLOCKING_WAIT", "int", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (legacy name "
             "of TORCH_NCCL_BLOCKING_WAIT)", reader="pytorch", acts_on=_NONE),
    Variable("NCCL_DESYNC_DEBUG", "int", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (legacy name "
             "of TORCH_NCCL_DESYNC_DEBUG)", reader="pytorch", acts_on=_NONE),
    Variable("NCCL_TUNER_CONFIG_FILE", "path", "plugins/tuner/example/plugin.c (the example tuner's CSV)",
             reader="plugin", acts_on=_NONE),
)

#: NCCL's network settings across nodes (read at every tag v2.18.1-1 to v2.30.7-1 unless ``first``
#: says). Tunable: how NCCL uses the fabric it found (which GID, GDR or not, how many QPs, NIC
#: crossing, IB or sockets), so an inherited one is stripped from the baseline like any tuning
#: variable. The machine's (``hardware``): NCCL_IB_HCA and NCCL_SOCKET_IFNAME name devices of one
#: machine; a wrong one leaves NCCL no device ("NET/IB : No device found.") or no interface
#: ("NET/Socket : no interface found") and fails or falls back rather than slows, so they are kept
#: from the runner's environment unless a space names them (docs/NCCL.md, "Network settings across nodes").
_IB_CONNECT = "when it opens an IB/RoCE connection (a peer on another node over NET/IB)"
_NETWORK: tuple[Variable, ...] = (
    Variable("NCCL_IB_HCA", "string", "src/transport/net_ib/init.cc, ncclIbInitDevices (ncclGetEnv; "
             "src/transport/net_ib.cc up to 2.29)", acts_on=_NET, hardware="which InfiniBand/RoCE adapters and ports to use",
             read_when="when it initializes its IB transport, once per process; echoed as 'NCCL_IB_HCA set to X'",
             accepted="a comma list of HCA[:port] names (mlx5_0:1,mlx5_1:1); '^' first excludes, '=' first matches "
                      "names exactly"),
    Variable("NCCL_SOCKET_IFNAME", "string", "src/misc/socket.cc, ncclFindInterfaces (ncclGetEnv)", echoed_at_init=True,
             acts_on=_NET, hardware="network interfaces for bootstrap and sockets",
             read_when="at every bootstrap, once per process, when longer than one character; echoed as 'NCCL_SOCKET_IFNAME "
                       "set by environment to X' (ENV) and 'NCCL_SOCKET_IFNAME set to X' (NET)",
             accepted="a comma list of interface-name prefixes (enp1s0f1np1, eth); '^' first excludes, '=' first "
                      "matches names exactly"),
    Variable("NCCL_IB_DISABLE", "int", "src/transport/net_ib/init.cc, ncclIbInitDevices (NCCL_PARAM(IbDisable); ncclIbInit in net_ib.cc up to 2.27)",
             acts_on=_NET, rule="nonzero", read_when="when it initializes its IB transport, once per process (not "
             "when NCCL_NET names another network or a net plugin carries it)",
             accepted="1 (IB and RoCE off: NCCL falls back to NET/Socket) or 0 (no effect); any other non-zero "
                      "integer acts as 1"),
    Variable("NCCL_IB_GID_INDEX", "int", "src/transport/net_ib/connect.cc, ncclIbGetGidIndex (NCCL_PARAM(IbGidIndex))",
             acts_on=_NET, rule="gid", read_when=_IB_CONNECT + "; from 2.22.3 only on a RoCE port",
             accepted="a whole number: the GID index of the RoCE port (show_gids lists them; 3 is RoCE v2 IPv4 on a "
                      "typical ConnectX), or -1 to let NCCL choose (2.21.5+, its default)",
             facts=(VersionFact("2.21.5", "default -1 (was 0): NCCL picks the GID of NCCL_IB_ADDR_FAMILY and "
                                "NCCL_IB_ROCE_VERSION_NUM (RoCE v2 IPv4 by default)",
                                "src/transport/net_ib.cc, ncclIbGetGidIndex, v2.21.5-1"),
                    VersionFact("2.22.3", "read on RoCE ports only: an InfiniBand port takes "
                                "NCCL_IB_ROUTABLE_FLID_GID_INDEX or 0", "src/transport/net_ib.cc, ncclIbGetGidIndex, "
                                "v2.22.3-1"))),
    Variable("NCCL_IB_QPS_PER_CONNECTION", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbQpsPerConn)",
             acts_on=_NET, rule="qps", read_when=_IB_CONNECT,
             accepted="a whole number of queue pairs per connection, 1 (the default) to 128 (NCCL_IB_MAX_QPS)"),
    Variable("NCCL_CROSS_NIC", "int", "src/graph/search.cc, ncclTopoCompute/ncclTopoGetNetDev (NCCL_PARAM(CrossNic))",
             acts_on=_NET, rule="cross_nic", read_when="when its graph search sees more than one NIC, or picks a "
             "peer's NIC for a send or receive",
             accepted="0 (each ring keeps one NIC rail on every node), 1 (rings may cross NIC rails), 2 (the "
                      "default: search without crossing first, then allow it)"),
    Variable("NCCL_NET_GDR_LEVEL", "level", "src/graph/paths.cc, ncclTopoCheckGdr/ncclGetLevel (ncclGetEnv)",
             acts_on=_NET, rule="level", legacy_levels=_LEGACY,
             read_when="when it checks GPU Direct RDMA for a GPU and NIC (a peer over NET); echoed with the level's "
                       "name, 'NCCL_NET_GDR_LEVEL set by environment to LOC'",
             accepted="one of {levels} (exact case), or a legacy level 0-5 (0 = LOC: GPU Direct RDMA off; "
                      "the default is PXB)",
             facts=(VersionFact("2.30.7", "the 'GPU Direct RDMA Enabled/Disabled for GPU ... / HCA ...' lines are TRACE "
                                "(were INFO)", "src/graph/paths.cc, ncclTopoCheckGdr, v2.30.7-1"),)),
    Variable("NCCL_IB_SUBNET_AWARE_ROUTING", "int", "src/transport/net_ib/connect.cc, ncclIbConnect/ncclIbAccept "
             "(NCCL_PARAM(IbSubnetAwareRouting))", first="2.30.7", acts_on=_NET, rule="nonzero",
             read_when=_IB_CONNECT, accepted="1 (a RoCE connection picks the local NIC on the peer's subnet, "
             "NCCL_IB_SUBNET_PREFIX_LEN bits) or 0 (off, the default)"),
)

_PLAIN: tuple[Variable, ...] = (
    _v("NCCL_AGG_CHANNEL_SIZE", "int", "src/init.cc, NCCL_PARAM(AggChannelSize)", last="2.19.4"),
    _v("NCCL_ALLGATHERV_ENABLE", "int", "src/enqueue.cc, NCCL_PARAM(AllgathervEnable)", first="2.29.2"),
    _v("NCCL_ALLOC_P2P_NET_LL_BUFFERS", "int", "src/init.cc, NCCL_PARAM(AllocP2pNetLLBuffers)"),
    _v("NCCL_CGA_CLUSTER_SIZE", "int", "src/init.cc, NCCL_PARAM(CGAClusterSize)"),
    _v("NCCL_CHECK_MODE", "string", "src/init.cc, ncclGetEnv", first="2.29.7"),
    _v("NCCL_CHECK_POINTERS", "int", "src/init.cc, NCCL_PARAM(CheckPointers)"),
    _v("NCCL_CHUNK_SIZE", "int", "src/enqueue.cc, NCCL_PARAM(ChunkSize)"),
    _v("NCCL_COLLNET_ENABLE", "int", "src/init.cc, NCCL_PARAM(CollnetEnable)"),
    _v("NCCL_COLLNET_NODE_THRESHOLD", "int", "src/init.cc, NCCL_PARAM(CollNetNodeThreshold)"),
    _v("NCCL_COMM_BLOCKING", "int", "src/init.cc, NCCL_PARAM(CommBlocking)"),
    _v("NCCL_COMM_ID", "string", "src/misc/socket.cc, ncclGetEnv", hardware="bootstrap root address"),
    _v("NCCL_COMM_SHRINK_SHARE_RESOURCES", "int", "src/init.cc, NCCL_PARAM(CommShrinkShareResources)", first="2.27.3"),
    _v("NCCL_COMM_SPLIT_SHARE_RESOURCES", "int", "src/init.cc, NCCL_PARAM(CommSplitShareResources)"),
    _v("NCCL_CONF_FILE", "string", "src/misc/param.cc, getenv", first="2.23.4"),
    _v("NCCL_CONNECT_ROUND_MAX_PEERS", "int", "src/transport.cc, NCCL_PARAM(ConnectRoundMaxPeers)", first="2.19.4"),
    _v("NCCL_CREATE_THREAD_CONTEXT", "int", "src/proxy.cc, NCCL_PARAM(CreateThreadContext)", last="2.30.4"),
    _v("NCCL_CTA_POLICY", "string", "src/init.cc, ncclGetEnv (policy names; NCCL_PARAM up to 2.28)", first="2.27.3"),
    _v("NCCL_CUDA_PATH", "string", "src/misc/cudawrap.cc, ncclGetEnv", last="2.20.5", hardware="which libcuda to load, up to 2.20"),
    _v("NCCL_CUMEM_HOST_ENABLE", "int", "src/misc/cudawrap.cc, NCCL_PARAM(CuMemHostEnable)", first="2.23.4"),
    _v("NCCL_DEBUG_FILE", "string", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamDebugFile, const char*)"),
    _v("NCCL_DEBUG_SUBSYS", "string", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamDebugSubsys, uint64_t)"),
    _v("NCCL_DEBUG_TIMESTAMP_FORMAT", "string", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamDebugTsFormat, const char*)", first="2.26.2"),
    _v("NCCL_DEBUG_TIMESTAMP_LEVELS", "string", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamDebugTimestampLevel, uint32_t)", first="2.26.2"),
    _v("NCCL_DEV_API_JIT", "int", "src/gin/gin_host.cc, NCCL_PARAM(DevApiJit)", first="2.30.7"),
    _v("NCCL_DISABLE_MEM_MANAGER", "int", "src/mem_manager.cc, NCCL_PARAM(MemManagerDisable)", first="2.29.7"),
    _v("NCCL_DMABUF_ENABLE", "int", "src/init.cc, NCCL_PARAM(DmaBufEnable)"),
    _v("NCCL_ELASTIC_BUFFER_REGISTER", "int", "src/dev_runtime.cc, NCCL_PARAM(ElasticBufferRegister)", first="2.30.3"),
    _v("NCCL_ENABLE_VERSION_CHECK", "int", "src/dev_runtime.cc, NCCL_PARAM(EnableVersionCheck)", first="2.29.2"),
    _v("NCCL_ENV_PLUGIN", "string", "src/plugin/env.cc, getenv", first="2.28.7", hardware="environment plugin library",
       plugin="an env plugin (2.28.7+): it answers every NCCL variable NCCL reads, and can set any"),
    _v("NCCL_GDAKI_USE_RELIABLE_DB", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinGdakiUseReliableDB)", first="2.29.7"),
    _v("NCCL_GDRCOPY_ENABLE", "int", "src/init.cc, NCCL_PARAM(GdrCopyEnable)"),
    _v("NCCL_GDRCOPY_FIFO_ENABLE", "int", "src/init.cc, NCCL_PARAM(GdrCopyFifoEnable)"),
    _v("NCCL_GDRCOPY_FLUSH_ENABLE", "int", "src/transport/net.cc, NCCL_PARAM(GdrCopyFlushEnable)"),
    _v("NCCL_GDRCOPY_SYNC_ENABLE", "int", "src/transport/net.cc, NCCL_PARAM(GdrCopySyncEnable)"),
    _v("NCCL_GDR_FLUSH_DISABLE", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbGdrFlushDisable)"),
    _v("NCCL_GIN_COUNTER_POOL_SIZE", "int", "src/gin/gin_host.cc, NCCL_PARAM(GinCounterPoolSize)", first="2.28.7", last="2.29.7"),
    _v("NCCL_GIN_ENABLE", "int", "src/gin/gin_host.cc, NCCL_PARAM(GinEnable)", first="2.28.7"),
    _v("NCCL_GIN_ERROR_QUERY_SEC", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinErrorQuerySec)", first="2.28.7"),
    _v("NCCL_GIN_EXCLUSIVE_CONTEXTS", "int", "src/dev_runtime.cc, NCCL_PARAM(GinExclusiveContexts)", first="2.29.7", last="2.29.7"),
    _v("NCCL_GIN_GDAKI_MAX_DEST_RD_ATOMIC", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinGdakiMaxDestRdAtomic)", first="2.30.3"),
    _v("NCCL_GIN_GDAKI_MAX_QP_RD_ATOMIC", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinGdakiMaxQpRdAtomic)", first="2.30.3"),
    _v("NCCL_GIN_GDAKI_NIC_HANDLER", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinGdakiNicHandler)", first="2.28.7"),
    _v("NCCL_GIN_GDAKI_QP_DEPTH", "int", "src/transport/net_ib/gdaki/gin_host_gdaki.cc, NCCL_PARAM(GinGdakiQpDepth)", first="2.28.7"),
    _v("NCCL_GIN_IB_TC", "int", "src/transport/net_ib/gin.cc, NCCL_PARAM(GinIbTc)", first="2.30.7"),
    _v("NCCL_GIN_NCONNECTIONS", "int", "src/gin/gin_host.cc, NCCL_PARAM(GinNconnections)", first="2.29.7"),
    _v("NCCL_GIN_NCONTEXTS", "int", "src/gin/gin_host.cc, NCCL_PARAM(GinNcontexts)", first="2.28.7", last="2.29.7"),
    _v("NCCL_GIN_PLUGIN", "string", "src/plugin/gin.cc, ncclGetEnv", first="2.29.7", hardware="GPU-initiated networking plugin library"),
    _v("NCCL_GIN_PLUGIN_REF_COUNT", "int", "src/plugin/gin.cc, NCCL_PARAM(GinPluginRefCount)", first="2.29.7"),
    _v("NCCL_GIN_PROXY_QUEUE_SIZE", "int", "src/gin/gin_host_proxy.cc, NCCL_PARAM(GinProxyQueueSize)", first="2.28.7"),
    _v("NCCL_GIN_SIGNAL_POOL_SIZE", "int", "src/gin/gin_host.cc, NCCL_PARAM(GinSignalPoolSize)", first="2.28.7", last="2.29.7"),
    _v("NCCL_GIN_TYPE", "int", "src/transport/net_ib/gin.cc, NCCL_PARAM(GinType)", first="2.28.7"),
    _v("NCCL_GRAPH_DUMP_FILE", "string", "src/graph/search.cc, ncclGetEnv"),
    _v("NCCL_GRAPH_DUMP_FILE_RANK", "int", "src/init.cc, NCCL_PARAM(GraphDumpFileRank)"),
    _v("NCCL_GRAPH_HELPER_DISABLE", "int", "src/init.cc, NCCL_PARAM(DisableGraphHelper)"),
    _v("NCCL_GRAPH_MIXING_SUPPORT", "int", "src/init.cc, NCCL_PARAM(GraphMixingSupport)"),
    _v("NCCL_GRAPH_REGISTER", "int", "src/enqueue.cc, NCCL_PARAM(GraphRegister)"),
    _v("NCCL_GRAPH_STREAM_ORDERING", "int", "src/enqueue.cc, NCCL_PARAM(GraphStreamOrdering)", first="2.30.7"),
    _v("NCCL_GROUP_CUDA_STREAM", "int", "src/init.cc, NCCL_PARAM(GroupCudaStream)"),
    _v("NCCL_HOSTID", "string", "src/misc/utils.cc, ncclGetEnv", hardware="which processes share a host"),
    _v("NCCL_IBVERBS_LIB", "string", "src/misc/ibvsymbols.cc, ncclGetEnv", first="2.30.3", hardware="which libibverbs to load"),
    _v("NCCL_IB_ADAPTIVE_ROUTING", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbAdaptiveRouting)"),
    _v("NCCL_IB_ADDR_FAMILY", "string", "src/transport/net_ib/connect.cc, ncclGetEnv", first="2.21.5", hardware="address family of the GID"),
    _v("NCCL_IB_ADDR_RANGE", "string", "src/transport/net_ib/connect.cc, ncclGetEnv", first="2.21.5", hardware="GID address range"),
    _v("NCCL_IB_AR_THRESHOLD", "int", "src/transport/net_ib/p2p.cc, NCCL_PARAM(IbArThreshold)"),
    _v("NCCL_IB_DATA_DIRECT", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbDataDirect)", first="2.27.3"),
    _v("NCCL_IB_DEVICE_PCI_ORDER", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbDevicePciOrder)", first="2.29.7"),
    _v("NCCL_IB_ECE_ENABLE", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbEceEnable)", first="2.23.4"),
    _v("NCCL_IB_FIFO_TC", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbFifoTc)", first="2.22.3"),
    _v("NCCL_IB_MERGE_NICS", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbMergeNics)", first="2.20.3"),
    _v("NCCL_IB_MERGE_VFS", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbMergeVfs)"),
    _v("NCCL_IB_MQP_RETRY_ALL", "int", "src/misc/ibvwrap.cc, NCCL_PARAM(IbMQpRetryAll)", first="2.24.3"),
    _v("NCCL_IB_MQP_RETRY_CNT", "int", "src/misc/ibvwrap.cc, NCCL_PARAM(IbMQpRetryCnt)", first="2.24.3"),
    _v("NCCL_IB_MQP_RETRY_SLEEP_MSEC", "int", "src/misc/ibvwrap.cc, NCCL_PARAM(IbMQpRetryTimeout)", first="2.24.3"),
    _v("NCCL_IB_OOO_RQ", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbOooRq)", first="2.30.3"),
    _v("NCCL_IB_PCI_RELAXED_ORDERING", "int", "src/transport/net_ib/init.cc, NCCL_PARAM(IbPciRelaxedOrdering)"),
    _v("NCCL_IB_PKEY", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbPkey)", hardware="InfiniBand partition key"),
    _v("NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS", "int", "src/transport/net_ib/common.cc, NCCL_PARAM(IbPrepostReceiveWorkRequests)", first="2.29.7"),
    _v("NCCL_IB_QUERY_PORT_SPEED", "int", "src/misc/ibvwrap.cc, NCCL_PARAM(IbQueryPortSpeed)", first="2.30.7"),
    _v("NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME", "int", "src/transport/net_ib/p2p.cc, NCCL_PARAM(IbReceiverSideMatchingScheme)", first="2.29.7"),
    _v("NCCL_IB_RESILIENCY_PORT_FAILOVER", "int", "src/transport/net_ib/p2p_resiliency.cc, NCCL_PARAM(IbResiliencyPortFailover)", first="2.29.7"),
    _v("NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS", "int", "src/transport/net_ib/p2p_resiliency.cc, NCCL_PARAM(IbResiliencyPortFailoverMaxAttempts)", first="2.29.7"),
    _v("NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY", "int", "src/transport/net_ib/p2p_resiliency.cc, NCCL_PARAM(IbResiliencyPortFailoverProbeDelay)", first="2.29.7"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecovery)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAckTimeout)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAliveMsgBatchInterval)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAliveMsgBatchSize)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAliveMsgSequenceSize)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAliveMsgTimeout)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryAttemptsMax)", first="2.30.3"),
    _v("NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY", "int", "src/transport/net_ib/p2p_resiliency_recovery.cc, NCCL_PARAM(IbResiliencyPortRecoveryStartDelay)", first="2.30.3"),
    _v("NCCL_IB_RETRY_CNT", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbRetryCnt)"),
    _v("NCCL_IB_RETURN_ASYNC_EVENTS", "int", "src/transport/net_ib/common.cc, NCCL_PARAM(IbAsyncEvents)", first="2.23.4"),
    _v("NCCL_IB_ROCE_VERSION_NUM", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbRoceVersionNum)", first="2.21.5", hardware="RoCE version of the GID"),
    _v("NCCL_IB_ROUTABLE_FLID_GID_INDEX", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbRoutableFlidIbGidIndex)", first="2.22.3", hardware="routable FLID GID index"),
    _v("NCCL_IB_SL", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbSl)"),
    _v("NCCL_IB_SPLIT_DATA_ON_QPS", "int", "src/transport/net_ib/common.cc, NCCL_PARAM(IbSplitDataOnQps)"),
    _v("NCCL_IB_SUBNET_PREFIX_LEN", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbSubnetPrefixLen)", first="2.30.7"),
    _v("NCCL_IB_TC", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbTc)"),
    _v("NCCL_IB_TIMEOUT", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbTimeout)"),
    _v("NCCL_IB_USE_INLINE", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbUseInline)"),
    _v("NCCL_IB_WARN_RAIL_LOCAL", "int", "src/transport/net_ib/connect.cc, NCCL_PARAM(IbWarnRailLocal)", first="2.24.3"),
    _v("NCCL_IGNORE_COLLNET_MISMATCH", "int", "src/init.cc, NCCL_PARAM(IgnoreCollNetMismatch)", first="2.30.3"),
    _v("NCCL_IGNORE_CPU_AFFINITY", "int", "src/graph/topo.cc, NCCL_PARAM(IgnoreCpuAffinity)"),
    _v("NCCL_IGNORE_DISABLED_P2P", "int", "src/graph/paths.cc, NCCL_PARAM(IgnoreDisabledP2p)"),
    _v("NCCL_IGNORE_NET_MISMATCH", "int", "src/init.cc, NCCL_PARAM(IgnoreNetMismatch)", first="2.30.3"),
    _v("NCCL_IPC_USE_ABSTRACT_SOCKET", "int", "src/os/linux_ipcsocket.cc, NCCL_PARAM(IpcUseAbstractSocket)", first="2.29.2"),
    _v("NCCL_L1_SHARED_MEMORY_CARVEOUT", "int", "src/enqueue.cc, NCCL_PARAM(L1SharedMemoryCarveout)"),
    _v("NCCL_LAUNCH_MODE", "string", "src/init.cc, ncclGetEnv"),
    _v("NCCL_LAUNCH_ORDER_IMPLICIT", "int", "src/enqueue.cc, NCCL_PARAM(LaunchOrderImplicit)", first="2.26.2"),
    _v("NCCL_LAUNCH_RACE_FATAL", "int", "src/misc/strongstream.cc, NCCL_PARAM(LaunchRaceFatal)", first="2.26.2"),
    _v("NCCL_LEGACY_CUDA_REGISTER", "int", "src/transport/p2p.cc, NCCL_PARAM(LegacyCudaRegister)", first="2.24.3"),
    _v("NCCL_LL128_C2C", "int", "src/graph/tuning.cc, NCCL_PARAM(Ll128C2c)", first="2.27.3"),
    _v("NCCL_LOCAL_REGISTER", "int", "src/register/register.cc, NCCL_PARAM(LocalRegister)", first="2.19.1"),
    _v("NCCL_LSA_TEAM_SIZE", "int", "src/dev_runtime.cc, NCCL_PARAM(LsaTeamSize)", first="2.29.7"),
    _v("NCCL_MAX_P2P_NCHANNELS", "int", "src/graph/paths.cc, NCCL_PARAM(MaxP2pNChannels)"),
    _v("NCCL_MEM_SYNC_DOMAIN", "int", "src/enqueue.cc, NCCL_PARAM(MemSyncDomain)"),
    _v("NCCL_MIN_P2P_NCHANNELS", "int", "src/graph/paths.cc, NCCL_PARAM(MinP2pNChannels)"),
    _v("NCCL_MLOPART_RDMA_ENABLE", "int", "src/register/coll_reg.cc, NCCL_PARAM(MloPartRdmaEnable)", first="2.30.7"),
    _v("NCCL_MNNVL", "int", "src/init.cc, NCCL_PARAM(MNNVL)", first="2.20.3", last="2.20.5"),
    _v("NCCL_MNNVL_CLIQUE_ID", "int", "src/init.cc, NCCL_PARAM(MNNVLCliqueId)", first="2.23.4"),
    _v("NCCL_MNNVL_CROSS_CLIQUE", "int", "src/init.cc, NCCL_PARAM(MNNVLCrossClique)", first="2.30.3"),
    _v("NCCL_MNNVL_ENABLE", "int", "src/init.cc, NCCL_PARAM(MNNVLEnable)", first="2.21.5"),
    _v("NCCL_MNNVL_RAIL_PER_HOST", "int", "src/graph/search.cc, NCCL_PARAM(MnnvlRailPerHost)", first="2.28.7"),
    _v("NCCL_MNNVL_SCATTER_NETS_ENABLE", "int", "src/graph/search.cc, NCCL_PARAM(ScatterEnable)", first="2.27.5"),
    _v("NCCL_MNNVL_UUID", "int", "src/init.cc, NCCL_PARAM(MNNVLUUID)", first="2.25.1"),
    _v("NCCL_MULTI_RANK_GPU_ENABLE", "int", "src/init.cc, NCCL_PARAM(MultiRankGpuEnable)", first="2.30.3"),
    _v("NCCL_MULTI_SEGMENT_REGISTER", "int", "src/transport/generic.cc, NCCL_PARAM(MultiSegmentRegister)", first="2.29.2"),
    _v("NCCL_NCHANNELS_PER_NET_PEER", "int", "src/init.cc, NCCL_PARAM(NChannelsPerNetPeer)"),
    _v("NCCL_NET", "string", "src/init.cc, ncclGetEnv", hardware="which network backend: IB, Socket, a plugin"),
    _v("NCCL_NETDEVS_POLICY", "string", "src/graph/topo.cc, ncclGetEnv", first="2.28.3"),
    _v("NCCL_NET_DISABLE_INTRA", "int", "src/graph/paths.cc, NCCL_PARAM(NetDisableIntra)"),
    _v("NCCL_NET_FORCE_FLUSH", "int", "src/graph/paths.cc, NCCL_PARAM(NetForceFlush)"),
    _v("NCCL_NET_FORCE_MERGE", "string", "src/graph/topo.cc, ncclGetEnv", first="2.24.3"),
    _v("NCCL_NET_GDR_C2C", "int", "src/graph/paths.cc, NCCL_PARAM(NetGdrC2c)", first="2.26.2"),
    _v("NCCL_NET_GDR_MLOPART", "int", "src/graph/paths.cc, NCCL_PARAM(NetGdrMloPart)", first="2.30.7"),
    _v("NCCL_NET_GDR_READ", "int", "src/graph/paths.cc, NCCL_PARAM(NetGdrRead)"),
    _v("NCCL_NET_MERGE_LEVEL", "string", "src/graph/topo.cc, ncclGetEnv", first="2.24.3"),
    _v("NCCL_NET_MERGE_POLICY", "string", "src/graph/topo.cc, ncclGetEnv", first="2.30.7"),
    _v("NCCL_NET_OPTIONAL_RECV_COMPLETION", "int", "src/transport/net.cc, NCCL_PARAM(NetOptionalRecvCompletion)", first="2.24.3"),
    _v("NCCL_NET_OVERHEAD", "int", "src/graph/tuning.cc, NCCL_PARAM(NetOverhead)"),
    _v("NCCL_NET_PLUGIN", "string", "src/plugin/net.cc, ncclGetEnv", hardware="network plugin library",
       plugin="a net plugin: it carries inter-node traffic in NCCL's place"),
    _v("NCCL_NET_PLUGIN_REF_COUNT", "int", "src/plugin/net.cc, NCCL_PARAM(NetPluginRefCount)", first="2.26.2"),
    _v("NCCL_NET_SHARED_BUFFERS", "int", "src/transport/net.cc, NCCL_PARAM(NetSharedBuffers)"),
    _v("NCCL_NET_SHARED_COMMS", "int", "src/transport/net.cc, NCCL_PARAM(NetSharedComms)"),
    _v("NCCL_NO_CACHE", "string", "src/param/param.cc, DEFINE_NCCL_PARAM(ncclParamNoCacheStr, const char*)", first="2.29.7"),
    _v("NCCL_NSOCKS_PERTHREAD", "int", "src/transport/net_socket.cc, NCCL_PARAM(SocketNsocksPerThread)"),
    _v("NCCL_NUM_RMA_CTX", "int", "src/init.cc, NCCL_PARAM(NumRmaCtx)", first="2.29.2"),
    _v("NCCL_NVB_DISABLE", "int", "src/graph/paths.cc, NCCL_PARAM(NvbDisable)"),
    _v("NCCL_NVB_PRECONNECT", "int", "src/init.cc, NCCL_PARAM(NvbPreconnect)"),
    _v("NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "int", "src/init.cc, NCCL_PARAM(NvlinkUtilCentricSchedEnable)", first="2.27.3"),
    _v("NCCL_NVLSTREE_MAX_CHUNKSIZE", "int", "src/transport/nvls.cc, NCCL_PARAM(NvlsTreeMaxChunkSize)", first="2.20.3"),
    _v("NCCL_NVLS_CHUNKSIZE", "int", "src/transport/nvls.cc, NCCL_PARAM(NvlsChunkSize)", first="2.21.5"),
    _v("NCCL_NVLS_NCHANNELS", "int", "src/init.cc, NCCL_PARAM(NvlsChannels)"),
    _v("NCCL_NVTX_DISABLE", "int", "src/init_nvtx.cc, NCCL_PARAM(NvtxDisable)", first="2.28.3"),
    _v("NCCL_OOB_NET_ENABLE", "int", "src/bootstrap.cc, NCCL_PARAM(BootstrapNetEnable)", first="2.23.4"),
    _v("NCCL_OOB_NET_IFNAME", "string", "src/bootstrap.cc, ncclGetEnv", first="2.23.4", hardware="out-of-band network interface"),
    _v("NCCL_P2P_DIRECT_DISABLE", "int", "src/transport/p2p.cc, NCCL_PARAM(P2pDirectDisable)"),
    _v("NCCL_P2P_EPOCH_ENABLE", "int", "src/enqueue.cc, NCCL_PARAM(P2pEpochEnable)", first="2.29.2"),
    _v("NCCL_P2P_LL_THRESHOLD", "int", "src/enqueue.cc, NCCL_PARAM(P2pLLThreshold)"),
    _v("NCCL_P2P_MAX_PEERS", "int", "src/init.cc, NCCL_PARAM(MaxP2pPeers)", first="2.30.3"),
    _v("NCCL_P2P_NET_CHUNKSIZE", "int", "src/init.cc, NCCL_PARAM(P2pNetChunkSize)"),
    _v("NCCL_P2P_NVL_CHUNKSIZE", "int", "src/init.cc, NCCL_PARAM(P2pNvlChunkSize)"),
    _v("NCCL_P2P_PCI_CHUNKSIZE", "int", "src/init.cc, NCCL_PARAM(P2pPciChunkSize)"),
    _v("NCCL_P2P_PER_CHANNEL_NET_BW", "int", "src/graph/paths.cc, NCCL_PARAM(P2pPerChannelNetBw)", first="2.29.2"),
    _v("NCCL_P2P_PXN_LEVEL", "int", "src/graph/search.cc, NCCL_PARAM(P2pPxnLevel)"),
    _v("NCCL_P2P_READ_ENABLE", "int", "src/transport/p2p.cc, NCCL_PARAM(P2pReadEnable)"),
    _v("NCCL_P2P_SCHEDULE_GROUP_SIZE", "int", "src/init.cc, NCCL_PARAM(GroupSize)", first="2.28.7"),
    _v("NCCL_P2P_USE_CUDA_MEMCPY", "int", "src/transport/p2p.cc, NCCL_PARAM(P2pUseCudaMemcpy)"),
    _v("NCCL_PARAM_DUMP_ALL", "bool", "src/param/param.cc, DEFINE_NCCL_PARAM(ncclParamDumpAllFlag, bool)", first="2.30.3"),
    _v("NCCL_PAT_ENABLE", "int", "src/graph/tuning.cc, NCCL_PARAM(PatEnable)", first="2.23.4"),
    _v("NCCL_PROFILER_PLUGIN", "string", "src/plugin/profiler.cc, ncclGetEnv", first="2.23.4", hardware="profiler plugin library",
       plugin="a profiler plugin: it is called on every operation"),
    _v("NCCL_PROGRESS_APPENDOP_FREQ", "int", "src/proxy.cc, NCCL_PARAM(ProgressAppendOpFreq)"),
    _v("NCCL_PROXY_APPEND_BATCH_SIZE", "int", "src/proxy.cc, NCCL_PARAM(ProxyAppendBatchSize)"),
    _v("NCCL_PROXY_CPUSET", "string", "src/proxy.cc, ncclGetEnv", first="2.28.3"),
    _v("NCCL_PROXY_DUMP_SIGNAL", "int", "src/proxy.cc, NCCL_PARAM(ProxyDumpSignal)"),
    _v("NCCL_PROXY_PROFILE", "string", "src/misc/profiler.cc, ncclGetEnv", last="2.22.3"),
    _v("NCCL_PXN_C2C", "int", "src/graph/paths.cc, NCCL_PARAM(PxnC2c)", first="2.27.3"),
    _v("NCCL_PXN_DISABLE", "int", "src/graph/paths.cc, NCCL_PARAM(PxnDisable)"),
    _v("NCCL_RAS_ADDR", "string", "src/ras/client_support.cc, ncclGetEnv", first="2.24.3"),
    _v("NCCL_RAS_ENABLE", "int", "src/bootstrap.cc, NCCL_PARAM(RasEnable)", first="2.24.3"),
    _v("NCCL_RAS_TIMEOUT_FACTOR", "int", "src/ras/ras.cc, NCCL_PARAM(RasTimeoutFactor)", first="2.24.3"),
    _v("NCCL_REPORT_CONNECT_PROGRESS", "int", "src/transport.cc, NCCL_PARAM(ReportConnectProgress)", first="2.19.4"),
    _v("NCCL_RMA_DISABLE", "int", "src/dev_runtime.cc, NCCL_PARAM(RMADisable)", first="2.30.7"),
    _v("NCCL_RMA_PLUGIN", "string", "src/plugin/rma.cc, ncclGetEnv", first="2.30.7", hardware="RMA plugin library"),
    _v("NCCL_RMA_PLUGIN_REF_COUNT", "int", "src/plugin/rma.cc, NCCL_PARAM(RmaPluginRefCount)", first="2.30.7"),
    _v("NCCL_RMA_PROXY_DUMP_SIGNAL", "int", "src/rma/rma_proxy.cc, NCCL_PARAM(RmaProxyDumpSignal)", first="2.29.2"),
    _v("NCCL_RMA_PROXY_QUEUE_SIZE", "int", "src/rma/rma_proxy.cc, NCCL_PARAM(RmaProxyQueueSize)", first="2.29.2"),
    _v("NCCL_RUNTIME_CONNECT", "int", "src/init.cc, NCCL_PARAM(RuntimeConnect)", first="2.22.3"),
    _v("NCCL_SET_CPU_STACK_SIZE", "int", "src/init.cc, NCCL_PARAM(SetCpuStackSize)", first="2.28.3"),
    _v("NCCL_SET_STACK_SIZE", "int", "src/init.cc, NCCL_PARAM(SetStackSize)"),
    _v("NCCL_SET_THREAD_NAME", "bool", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamSetThreadName, bool)"),
    _v("NCCL_SHADOW_MEMPOOL_MAX_SIZE", "int", "src/allocator.cc, NCCL_PARAM(ShadowMempoolMaxSize)", first="2.30.7"),
    _v("NCCL_SHM_LOCALITY", "int", "src/transport/shm.cc, NCCL_PARAM(ShmLocality)"),
    _v("NCCL_SINGLE_PROC_MEM_REG_ENABLE", "int", "src/group.cc, NCCL_PARAM(SingleProcMemRegEnable)", first="2.28.3"),
    _v("NCCL_SOCKET_FAMILY", "string", "src/misc/socket.cc, ncclGetEnv", hardware="IPv4 or IPv6 for sockets"),
    _v("NCCL_SOCKET_INLINE", "int", "src/transport/net_socket.cc, NCCL_PARAM(SocketInlineSize)", first="2.27.3"),
    _v("NCCL_SOCKET_MAGIC", "string", "src/misc/socket.cc, ncclGetEnv", first="2.30.7"),
    _v("NCCL_SOCKET_MIN_TASKSIZE", "int", "src/transport/net_socket.cc, NCCL_PARAM(SocketMinTaskSize)", first="2.27.3"),
    _v("NCCL_SOCKET_NTHREADS", "int", "src/transport/net_socket.cc, NCCL_PARAM(SocketNthreads)"),
    _v("NCCL_SOCKET_POLL_TIMEOUT_MSEC", "int", "src/misc/socket.cc, NCCL_PARAM(PollTimeOut)", first="2.29.2"),
    _v("NCCL_SOCKET_RCVBUF", "int", "src/misc/socket.cc, NCCL_PARAM(SocketMaxRecvBuff)", first="2.27.3"),
    _v("NCCL_SOCKET_RETRY_CNT", "int", "src/misc/socket.cc, NCCL_PARAM(RetryCnt)", first="2.24.3"),
    _v("NCCL_SOCKET_RETRY_SLEEP_MSEC", "int", "src/misc/socket.cc, NCCL_PARAM(RetryTimeOut)", first="2.24.3"),
    _v("NCCL_SOCKET_SNDBUF", "int", "src/misc/socket.cc, NCCL_PARAM(SocketMaxSendBuff)", first="2.27.3"),
    _v("NCCL_SYM_CE_THRESHOLD", "int", "src/enqueue.cc, NCCL_PARAM(SymCeThreshold)", first="2.29.2"),
    _v("NCCL_SYM_CTAS", "int", "src/sym_kernels.cc, NCCL_PARAM(SymCTAs)", first="2.27.3"),
    _v("NCCL_SYM_GIN_KERNELS_ENABLE", "int", "src/sym_kernels.cc, NCCL_PARAM(SymGinKernelsEnable)", first="2.29.7"),
    _v("NCCL_SYM_KERNEL", "string", "src/sym_kernels.cc, ncclGetEnv", first="2.27.3"),
    _v("NCCL_SYM_NOWIN_ENABLE", "int", "src/scheduler/symmetric_sched.cc, NCCL_PARAM(SymNoWinEnable)", first="2.29.2"),
    _v("NCCL_SYM_REUSE_SYSMEM_HANDLES", "int", "src/dev_runtime.cc, NCCL_PARAM(SymReuseSysmemHandles)", first="2.30.4"),
    _v("NCCL_SYM_RS_GIN_CHUNK_SIZE", "int", "src/sym_kernels.cc, NCCL_PARAM(SymRsGinChunkSize)", first="2.30.7"),
    _v("NCCL_SYM_TMA_ENABLE", "int", "src/sym_kernels.cc, NCCL_PARAM(SymTmaEnable)", first="2.30.3"),
    _v("NCCL_TOPO_DUMP_FILE", "string", "src/init.cc, ncclGetEnv"),
    _v("NCCL_TOPO_DUMP_FILE_RANK", "int", "src/graph/topo.cc, NCCL_PARAM(TopoDumpFileRank)"),
    _v("NCCL_TOPO_SPLIT_MLOPART", "int", "src/graph/topo.cc, NCCL_PARAM(TopoSplitMlopart)", first="2.30.7"),
    _v("NCCL_TUNER_PLUGIN", "string", "src/plugin/tuner.cc, ncclGetEnv", first="2.19.1",
       plugin="a tuner plugin: it picks the algorithm, protocol and channels in NCCL's place"),
    _v("NCCL_UID_STAGGER_RATE", "int", "src/bootstrap.cc, NCCL_PARAM(StaggerRate)", first="2.23.4"),
    _v("NCCL_UID_STAGGER_THRESHOLD", "int", "src/bootstrap.cc, NCCL_PARAM(StaggerThreshold)", first="2.23.4"),
    _v("NCCL_UNPACK_DOUBLE_NCHANNELS", "int", "src/graph/connect.cc, NCCL_PARAM(UnpackDoubleNChannels)", first="2.22.3"),
    _v("NCCL_WARN_ENABLE_DEBUG_INFO", "bool", "src/debug.cc, DEFINE_NCCL_PARAM(ncclParamWarnEnableDebugInfo, bool)", first="2.19.4"),
    _v("NCCL_WIN_ENABLE", "int", "src/init.cc, NCCL_PARAM(WinEnable)", first="2.27.3"),
    _v("NCCL_WIN_STRIDE", "int", "src/dev_runtime.cc, NCCL_PARAM(WinStride)", first="2.27.3"),
    _v("NCCL_WORK_ARGS_BYTES", "int", "src/init.cc, NCCL_PARAM(WorkArgsBytes)", first="2.22.3"),
    _v("NCCL_WORK_FIFO_BYTES", "int", "src/init.cc, NCCL_PARAM(WorkFifoBytes)", first="2.22.3"),
    _v("NCCL_WORK_FIFO_DEPTH", "int", "src/init.cc, NCCL_PARAM(WorkFifoDepth)", last="2.21.5"),
# plugins
    _plugin("NCCL_INSPECTOR_COLL_POOL_SIZE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_COMM_POOL_SIZE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_DIR", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_P2P_RING_SIZE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_THREAD_ENABLE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_DUMP_VERBOSE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_ENABLE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_ENABLE_P2P", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_P2P_POOL_SIZE", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_POOL_GROW", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_PROM_DUMP", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", "plugins/profiler/inspector/inspector.cc"),
    _plugin("NCCL_PROFILER_CE_POLLER_INTERVAL_MICROSECONDS", "plugins/profiler/example/profiler_plugin_ce.cc"),
    _plugin("NCCL_PROFILER_CE_TIMING", "plugins/profiler/example/profiler_plugin_ce.cc"),
    _plugin("NCCL_PROFILE_CE_BATCH_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_CE_COLL_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_CE_SYNC_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_COLL_API_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_COLL_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_DUMP_FILE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_EVENT_MASK", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_GROUP_API_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_GROUP_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_KERNEL_LAUNCH_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_P2P_API_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_P2P_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_PROXY_CTRL_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_PROFILE_PROXY_DETACH_POOL_SIZE", "plugins/profiler/example/plugin.cc"),
    _plugin("NCCL_TUNER_CONFIG_FILE", "plugins/tuner/example/plugin.c"),
)

#: Every variable nccl-tune knows, by name; the one table.
VARIABLES: dict[str, Variable] = {v.name: v for v in (*_DETAILED, *_NETWORK, *_PLAIN)}


def variable(name: str) -> Variable | None:
    """The record of ``name`` (exact, as getenv reads it), or None."""
    return VARIABLES.get(name)
