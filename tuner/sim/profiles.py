"""Hardware + model profiles: every number of the simulator that is not NCCL's own.

A profile is one TP-N box serving one model. NCCL's constants live in ``ncclconst.py``; a profile
holds (1) what NCCL's topology search would find on that box (its result is the input of NCCL's
tuning model), (2) how the real hardware departs from NCCL's model (the landscape a tuner
explores), (3) the model shape and compute time, (4) log identities (versions, GPU name). Each
field's comment in :class:`Profile` says where its value comes from; the built-ins:

* ``pcie-8x-mla``: the motivating box, 8 RTX PRO 6000 Blackwell (compute capability 12.0, PCIe
  Gen5 only, two CPU sockets) serving a DeepSeek-V3-style MLA model (61 layers, hidden 7168,
  14,336-byte decode allreduce). Values marked "motivating box" are chosen to reproduce what its
  users measured: allreduce ~2/3 of decode time, ~72-81 tok/s single stream.
* ``nvlink-8x``: 8 A100-SXM4 on NVSwitch (no NVLink SHARP) serving a 70B model; vLLM's custom
  allreduce takes every decode-sized allreduce (vLLM custom_all_reduce.py).
* ``nvlink-8x-nccl``: the same box started with ``--disable-custom-all-reduce``.
* ``fast-tiny``: a small TP-4 PCIe box at ~600 tok/s with a 0.3 s load, for quick tests.
* ``pcie-8x-amd-fallback``: the motivating GPUs on two AMD sockets, where NCCL's ring search
  falls back (bw 0.1, SYS, 1 channel), picks Simple at decode and keeps the cross-socket hops
  on SHM: NCCL_PROTO=LL with NCCL_P2P_LEVEL=SYS gives ~+60 %.
* ``pcie-4x-acs``: 4 GPUs under one PCIe switch with ACS on: NCCL_P2P_DISABLE=1 wins at one
  stream, P2P wins with many.
* ``pcie-8x-nccl-right``: one socket, every pair on P2P, LL at decode: knobs inside the noise.
* ``pcie-8x-gates``: ``pcie-8x-mla`` with three set-bound behaviours (``set_faults``), for the
  correctness and soak gates: ``NCCL_P2P_LEVEL=SYS`` corrupts answers (P2P across the socket
  link, a bad link; ~+16 % tok/s), ``CUDA_DEVICE_MAX_CONNECTIONS=1`` with ``NCCL_MAX_NCHANNELS=16``
  (the deployment-tuned preset; neither alone) hangs after 90 s of load (~+12 %),
  ``NCCL_PROTO=LL`` is clean at ~+10 % (it changes the prefill protocol, so its greedy
  answers part late at ``divergence_rate``); sets with two of them combine (speeds multiply).
* ``pcie-4x-backends``: 4 RTX PRO 6000 on one PCIe switch tree serving a 32B model with vLLM
  0.30.0: custom allreduce is refused, NCCL carries decode by default; FlashInfer's PCIe IPC
  allreduce (``VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1``) decodes ~10 % faster.
* ``roce-2x-spark`` / ``roce-4x-spark``: one server spanning 2 / 4 DGX Spark nodes (one GB10 each,
  TP = nodes) over 200G RoCE, NCCL 2.28.9, played by ``serve --nnodes N --node-rank R`` (one
  process per node). In the container the profile plays, NCCL's automatic RoCE GID choice does not
  work, so the untuned launch decodes on the socket fallback (~24 tok/s); ``NCCL_IB_GID_INDEX=3``
  puts it on IB (~40 tok/s); ``NCCL_IB_DISABLE=1`` keeps sockets. The mechanism and its sources
  are in ``ncclnet.py``.

TOML files use the same keys (plus ``extends = "<built-in>"``). Times in ms (``*_ms``) or us
(``*_us``), sizes in bytes, bandwidths in GB/s (1 GB/s = 1000 bytes/us).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib


class ProfileError(ValueError):
    """A profile name or file that cannot be used; the message says why."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """One simulated serving box. See the module docstring; units are in the field names."""

    # -- identity and log lines
    name: str
    model: str  # served model name
    nccl_version: str  # NCCL the server loads ("vLLM is using nccl==X"); selects version rules
    cuda_version: str  # "+cudaX.Y" of NCCL's version line
    vllm_version: str  # in vLLM's engine line
    gpu_name: str  # nccl-tests device lines
    compute_capability: int  # 120 = 12.0; picks NCCL's per-architecture table row (tuning.cc)
    # -- model shape (the decode allreduce is hidden x dtype_bytes x tokens)
    tp: int
    layers: int
    allreduces_per_layer: int  # 2 for a standard TP transformer block (attention + MLP)
    hidden: int
    dtype_bytes: int  # activations in bf16
    max_model_len: int
    profile_run_tokens: int  # vLLM's max_num_batched_tokens: the start-up profiling forward
    # -- compute (everything but the allreduces)
    compute_ms: float  # per decode step at batch 1
    batch_compute_slope: float  # compute(B) = compute_ms * (1 + slope * (B - 1))
    prefill_fixed_ms: float  # TTFT floor (scheduling, first forward)
    prefill_ms_per_token: float
    # -- NCCL's view of the topology: results of its search (src/graph/search.cc), model inputs
    link: str  # "pcie" | "nvlink": the hwLat row (tuning.cc: graph typeIntra == NVL -> NVLINK)
    graph_type_intra: str  # worst path type inside the ring/tree graph (LL128 needs <= NVB)
    graph_nchannels: int  # channels of the ring/tree search graph (the model uses these)
    graph_bw_intra_GBps: float  # per-channel bandwidth the search settled on
    graph_same_channels: bool  # search result; only Broadcast/Reduce latencies use it
    nvls_channels: int  # NVLink SHARP channels; 0 = no NVLS (needs NVSwitch gen 3 + Hopper)
    gpu_path: str  # path type between ring neighbours on one socket
    cross_path: str  # path type of the hops that cross sockets
    cross_fraction: float  # share of ring hops that cross sockets
    p2p_default_level: str  # "auto": NCCL's rule by version, CPU vendor and GPU count
    # (ncclconst.default_p2p_level, src/graph/paths.cc ncclTopoCheckP2p); a path type overrides it
    nvlink_fully_connected: bool  # what vLLM's custom allreduce checks for TP > 2
    # -- how the real hardware departs from NCCL's model
    hop_latency_scale: float  # real P2P hop latency / NCCL's hwLat
    shm_hop_factor: float  # hop through host memory (SHM) / P2P hop
    net_hop_factor: float  # socket hop (SHM disabled too) / NCCL's NET hwLat
    channel_bw_GBps: float  # what one channel (CTA) moves with full threads
    full_bw_threads: int  # threads a channel needs to reach channel_bw_GBps
    channel_sync_us: float  # latency added per launched channel beyond the first
    link_bw_cap_GBps: float  # bus bandwidth ceiling of the whole ring (P2P)
    shm_bw_cap_GBps: float  # ceiling when any ring hop goes through host memory
    net_bw_cap_GBps: float  # ceiling when any ring hop goes through sockets
    buffer_loop_fraction: float  # share of a ring pass exposed per extra pipeline loop
    # -- around the collective
    op_overhead_us: float  # per served allreduce, outside NCCL's kernel (skew, launch, sync)
    bench_launch_us: float  # per all_reduce_perf iteration (back-to-back launches)
    max_conn_one_us: float  # per-allreduce change with CUDA_DEVICE_MAX_CONNECTIONS=1 (<0 helps)
    max_conn_per_doubling_us: float  # per-allreduce cost per doubling above the default 8
    custom_allreduce_us: float  # one vLLM custom allreduce (when it carries the op)
    disable_custom_all_reduce: bool  # vLLM's --disable-custom-all-reduce
    # -- run-to-run behaviour
    load_time_s: float
    noise: float  # per-request multiplicative speed noise (fraction, 1 sigma)
    bench_noise: float  # per all_reduce_perf run (fraction, 1 sigma)
    bench_iter_noise: float  # per all_reduce_perf iteration (fraction, 1 sigma)
    # -- the machine as NCCL prints it under NCCL_DEBUG_SUBSYS=GRAPH (src/graph/topo.cc), and the
    #    search's outcome; defaults keep older TOML profiles valid
    cpu_vendor: str = "Intel"  # Intel | AMD | Zhaoxin | ARM | POWER: P2P default, SYS bandwidth
    cpu_model: int = -1  # NCCL_TOPO_CPU_MODEL_* (graph.h): Intel 1 BDW .. 4 ERP; -1 unset (AMD)
    sockets: int = 1  # CPU (NUMA) nodes; GPUs split evenly, SYS links between them
    gpu_pcie_bw_GBps: float = 24.0  # PCI link width x speed / 80 (topo.cc ncclTopoAddPci): Gen4 x16
    nvlink_bw_GBps: float = 0.0  # NVLink per GPU to the NVSwitch (links x ncclTopoNVLinkBw); 0 = none
    graph_fallback: bool = False  # ring/tree search finds nothing: ncclTopoCompute's simple order
    # -- vLLM's other allreduce backends (arbackends.py); 0 us = as fast as NCCL at that size
    nvswitch_multicast: bool = False  # torch symm mem needs multicast (symm_mem.py rendezvous)
    flashinfer_us: float = 0.0  # one FlashInfer (trtllm) allreduce at the decode size
    symm_mem_us: float = 0.0  # one torch symmetric-memory allreduce at the decode size
    fi_pcie_ipc_us: float = 0.0  # one FlashInfer PCIe IPC allreduce at the decode size
    backend_GBps: float = 20.0  # those backends' bandwidth above the decode size
    # -- answers (greedy.py) and set-bound faults (faults.py, --fault-when syntax, ';' between)
    set_faults: str = ""
    divergence_rate: float = 0.03  # chosen: a 300-token answer parts, set with another reduction order
    launch_divergence_rate: float = 0.003  # chosen: the same, one launch against the ideal path
    # -- a server spanning nodes (ncclnet.py); 0 GPUs per node = every rank on one node
    gpus_per_node: int = 0
    net_ib_ports: str = ""  # RoCE/IB ports NET/IB lists, comma-separated: "rocep1s0f1:1/RoCE,..."
    net_if: str = ""  # the IP interface (NET/IB's OOB, NET/Socket's device)
    net_first_ip: str = "192.168.100.15"  # node k's address: the last number + k
    ib_gid_auto: bool = True  # NCCL's own RoCE GID choice (NCCL_IB_GID_INDEX unset) works here
    ib_gid_index: int = 3  # the GID index that carries RoCE v2 on this fabric
    net_gdr: bool = False  # GPU and NIC support GPU Direct RDMA (NET lines say /GDRDMA)
    ib_hop_factor: float = 1.0  # a cross-node hop on IB / NCCL's NET hwLat
    ib_bw_cap_GBps: float = 22.0  # bus bandwidth ceiling across nodes on IB
    ib_qps_us: float = 0.0  # per-allreduce change per doubling of NCCL_IB_QPS_PER_CONNECTION

    @property
    def nnodes(self) -> int:
        """Nodes one server spans: TP / GPUs per node (1 for a one-node profile)."""
        return self.tp // self.gpus_per_node if self.gpus_per_node else 1

    @property
    def ring_graph(self) -> tuple[int, float, str]:
        """(channels, bw per channel GB/s, type intra) NCCL's search ends on: the profile's
        result, or ncclTopoCompute's fallback (1 channel, 0.1 GB/s, SYS; src/graph/search.cc)."""
        if self.graph_fallback:
            return 1, 0.1, "SYS"
        return self.graph_nchannels, self.graph_bw_intra_GBps, self.graph_type_intra

    @property
    def decode_bytes(self) -> int:
        """Bytes of one decode allreduce at batch 1: hidden x dtype bytes."""
        return self.hidden * self.dtype_bytes

    @property
    def allreduces_per_token(self) -> int:
        """Allreduces per decoded token: layers x allreduces per layer."""
        return self.layers * self.allreduces_per_layer


# Sources of the shared values:
# [nccl1530] NVIDIA/nccl issue 1530: 8x RTX 4090 on PCIe, all_reduce_perf -g 8, 8 B -> 42-43 us.
# [nccl1639] NVIDIA/nccl issue 1639: 8x RTX 5090 on PCIe Gen5, dual Xeon: busbw peaks at 28 GB/s.
# [nccl307]  NVIDIA/nccl-tests issue 307: 8x RTX 4090 log, 2 rings ("Ring 00", "Ring 01").
# [vllm]     vllm/v1 logs: "Chunked prefill is enabled with max_num_batched_tokens=8192".
_PCIE_8X_MLA = Profile(
    name="pcie-8x-mla",
    model="sim/kimi-k2.5-mla-tp8",
    nccl_version="2.27.3",  # public vLLM 0.10-0.11 logs: "vLLM is using nccl==2.27.3"
    cuda_version="12.9",
    vllm_version="0.11.0",
    gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
    compute_capability=120,  # NVIDIA CUDA GPUs table: RTX PRO 6000 Blackwell = 12.0
    tp=8,
    layers=61,  # DeepSeek-V3 config.json num_hidden_layers
    allreduces_per_layer=2,
    hidden=7168,  # DeepSeek-V3 config.json hidden_size
    dtype_bytes=2,
    max_model_len=32768,
    profile_run_tokens=8192,  # [vllm]
    compute_ms=4.55,  # motivating box: the third of decode time that is not allreduce
    batch_compute_slope=0.15,  # motivating box: 81/133/236/413 tok/s at concurrency 1/2/4/8
    prefill_fixed_ms=30.0,  # chosen: a plausible TTFT floor
    prefill_ms_per_token=0.25,  # chosen
    link="pcie",
    graph_type_intra="SYS",  # the ring crosses the CPU sockets
    graph_nchannels=2,  # [nccl307] shows 1-2 search channels on 8 PCIe GPUs; Gen5 assumed 2
    graph_bw_intra_GBps=12.0,  # chosen: the search's per-channel step at PCI_BW
    graph_same_channels=True,  # chosen: search.cc starts with sameChannels=1
    nvls_channels=0,
    gpu_path="PXB",  # GPUs behind PCIe switches on each socket
    cross_path="SYS",
    cross_fraction=0.25,  # 2 of 8 ring hops cross sockets
    p2p_default_level="auto",  # paths.cc at 2.27: PXB (Intel, 8 GPUs)
    nvlink_fully_connected=False,
    hop_latency_scale=1.5,  # [nccl1530]: 8 B in ~42 us with bench_launch_us below
    shm_hop_factor=2.5,  # chosen: a host-memory hop costs ~2.5 P2P hops
    net_hop_factor=2.0,  # chosen: loopback sockets are slower than NCCL's IB-era NET row
    channel_bw_GBps=12.0,  # chosen: one CTA saturates at PCI_BW-like rates
    full_bw_threads=128,  # chosen: the smallest thread count the launch keeps at full rate
    channel_sync_us=0.4,  # chosen: makes fewer channels win at small sizes, as NCCL assumes
    link_bw_cap_GBps=28.0,  # [nccl1639]
    shm_bw_cap_GBps=20.0,  # chosen: host-memory copies below the P2P ceiling
    net_bw_cap_GBps=2.5,  # chosen: TCP loopback class
    buffer_loop_fraction=0.25,  # chosen
    op_overhead_us=37.0,  # motivating box: allreduce ~2/3 of decode at ~72 tok/s
    bench_launch_us=6.0,  # [nccl1530] with hop_latency_scale above
    max_conn_one_us=-0.5,  # chosen: sub-noise gain, as 81.9 vs 81.4 tok/s on the box
    max_conn_per_doubling_us=0.15,  # chosen
    custom_allreduce_us=0.0,
    disable_custom_all_reduce=False,
    load_time_s=2.0,
    noise=0.02,  # motivating box: repeated probes spread ~1-2 %
    bench_noise=0.01,  # chosen: all_reduce_perf run-to-run spread
    bench_iter_noise=0.03,  # chosen: per-iteration jitter (i_cv%)
    cpu_vendor="Intel",  # [nccl1639]: dual Xeon
    cpu_model=3,  # chosen: Sapphire Rapids (a PCIe Gen5 Xeon): NCCL_TOPO_CPU_MODEL_INTEL_SRP
    sockets=2,
    gpu_pcie_bw_GBps=48.0,  # Gen5 x16: 16 x 240 / 80 (topo.cc kvDictPciGen "32.0 GT/s PCIe")
)

_NVLINK_8X = Profile(
    name="nvlink-8x",
    model="sim/llama-70b-tp8",
    nccl_version="2.27.3",
    cuda_version="12.9",
    vllm_version="0.11.0",
    gpu_name="NVIDIA A100-SXM4-80GB",
    compute_capability=80,
    tp=8,
    layers=80,  # Llama-2-70B config.json
    allreduces_per_layer=2,
    hidden=8192,
    dtype_bytes=2,
    max_model_len=32768,
    profile_run_tokens=8192,  # [vllm]
    compute_ms=18.0,  # chosen: ~50 tok/s single stream for a 70B model on A100
    batch_compute_slope=0.08,
    prefill_fixed_ms=20.0,
    prefill_ms_per_token=0.08,
    link="nvlink",
    graph_type_intra="NVL",
    graph_nchannels=12,  # chosen: one channel per A100 NVLink (12 links)
    graph_bw_intra_GBps=20.0,  # topo.h SM80_NVLINK_BW
    graph_same_channels=True,
    nvls_channels=0,  # NVSwitch gen 2: no NVLink SHARP
    gpu_path="NVL",
    cross_path="NVL",
    cross_fraction=0.0,
    p2p_default_level="auto",  # paths.cc at 2.27: PXB (AMD, 8 GPUs)
    nvlink_fully_connected=True,
    hop_latency_scale=1.2,  # chosen
    shm_hop_factor=4.0,  # chosen
    net_hop_factor=2.0,
    channel_bw_GBps=20.0,
    full_bw_threads=256,
    channel_sync_us=0.2,
    link_bw_cap_GBps=240.0,  # 12 NVLink3 links x 20 GB/s (topo.h SM80_NVLINK_BW)
    shm_bw_cap_GBps=20.0,
    net_bw_cap_GBps=2.5,
    buffer_loop_fraction=0.25,
    op_overhead_us=3.0,  # chosen: CUDA-graph replay, little skew
    bench_launch_us=4.0,
    max_conn_one_us=0.0,
    max_conn_per_doubling_us=0.0,
    custom_allreduce_us=9.0,  # chosen: one-shot custom allreduce of 16 KB on A100 NVLink
    disable_custom_all_reduce=False,
    load_time_s=1.5,
    noise=0.02,
    bench_noise=0.01,
    bench_iter_noise=0.03,
    cpu_vendor="AMD",  # chosen: DGX A100's two AMD EPYC 7742
    sockets=2,
    gpu_pcie_bw_GBps=24.0,  # Gen4 x16
    nvlink_bw_GBps=240.0,  # 12 NVLink3 links x SM80_NVLINK_BW (topo.h)
)

_NVLINK_8X_NCCL = dataclasses.replace(_NVLINK_8X, name="nvlink-8x-nccl",
                                      disable_custom_all_reduce=True)

_FAST_TINY = dataclasses.replace(
    _PCIE_8X_MLA,
    name="fast-tiny",
    model="sim/tiny-tp4",
    gpu_name="NVIDIA A10",
    compute_capability=86,
    tp=4,
    layers=16,
    hidden=2048,
    max_model_len=8192,
    profile_run_tokens=2048,
    compute_ms=1.0,
    batch_compute_slope=0.1,
    prefill_fixed_ms=5.0,
    prefill_ms_per_token=0.02,
    graph_type_intra="PXB",
    graph_nchannels=1,
    gpu_path="PXB",
    cross_path="PXB",
    cross_fraction=0.0,
    link_bw_cap_GBps=24.0,
    op_overhead_us=6.0,
    load_time_s=0.3,
    sockets=1,
    gpu_pcie_bw_GBps=24.0,  # A10: Gen4 x16
)


# [k25] Public report on 8x RTX PRO 6000 Blackwell, dual AMD EPYC, NCCL 2.27: Kimi K2.5 ~40 tok/s
#       single stream, 65-68 with NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL; all_reduce_perf busbw 22.2 ->
#       37.6 GB/s with NCCL_MIN_NCHANNELS=8 at large sizes; 32 KB 48.2 -> 26.2 us with a graph fix.
_PCIE_8X_AMD_FALLBACK = dataclasses.replace(
    _PCIE_8X_MLA,
    name="pcie-8x-amd-fallback",
    model="sim/kimi-k2.5-mla-tp8",
    cpu_vendor="AMD",
    cpu_model=-1,  # topo.cc ncclTopoAddCpu sets a model for Intel and Zhaoxin only
    sockets=2,
    # search.cc: the sm100SpeedArrayIntra steps end at 18.0 > AMD_BW 16.0 across the sockets, so no
    # ring or tree fits and ncclTopoCompute falls back: 1 channel, bw 0.1, type SYS
    graph_fallback=True,
    graph_type_intra="SYS",
    graph_nchannels=1,
    graph_bw_intra_GBps=0.1,
    graph_same_channels=True,  # search.cc: no retry without sameChannels on AMD through SYS
    hop_latency_scale=0.63,  # chosen with op_overhead_us: [k25] ~40 tok/s, ~65 with LL + SYS
    shm_hop_factor=4.0,  # chosen: a host-memory hop across the AMD sockets
    channel_bw_GBps=11.1,  # [k25]: 22.2 GB/s busbw on the fallback's 2 channels
    link_bw_cap_GBps=37.6,  # [k25]: busbw with 8 channels and P2P everywhere
    shm_bw_cap_GBps=26.0,  # chosen: below the P2P ceiling, above the 2-channel baseline
    op_overhead_us=69.0,  # chosen: [k25] ~40 tok/s at Simple with SHM across the sockets
    bench_launch_us=0.4,  # [k25]: 32 KB in 26.2 us with LL over P2P
)

# [acs] PCIe boxes where NCCL_P2P_DISABLE=1 flips with concurrency (published: 90 vs 70 tok/s at
#       1 stream, 5000 vs 10000 tok/s at 100 streams, the other way round). The story chosen
#       here: ACS sends every peer write up to the root complex, so a P2P hop is slow (latency)
#       but still wider than a copy through host memory; SHM wins at 1 stream, P2P with many.
_PCIE_4X_ACS = dataclasses.replace(
    _PCIE_8X_MLA,
    name="pcie-4x-acs",
    model="sim/qwen3-32b-tp4",
    gpu_name="NVIDIA L40S",
    compute_capability=89,
    tp=4,
    layers=64,  # Qwen3-32B config.json num_hidden_layers
    hidden=5120,  # Qwen3-32B config.json hidden_size
    compute_ms=7.0,  # chosen: ~76 tok/s single stream with P2P, as [acs]'s 70-90 class
    batch_compute_slope=0.03,  # chosen: a dense 32B model batches well
    cpu_vendor="Intel",
    cpu_model=3,  # chosen: Sapphire Rapids
    sockets=1,
    gpu_pcie_bw_GBps=24.0,  # Gen4 x16
    graph_type_intra="PIX",  # 4 GPUs under one switch: NCCL cannot see ACS
    graph_nchannels=1,  # search.cc: one 20.0 step fits each 24.0 GB/s GPU link
    graph_bw_intra_GBps=20.0,
    gpu_path="PIX",
    cross_path="PIX",
    cross_fraction=0.0,
    hop_latency_scale=4.5,  # chosen: ACS round trip to the root complex per P2P hop
    shm_hop_factor=0.45,  # chosen: a host-memory hop beats that round trip ([acs]: +15 % at 1 stream)
    channel_bw_GBps=12.0,
    link_bw_cap_GBps=20.0,  # chosen: P2P through the root complex
    shm_bw_cap_GBps=8.0,  # chosen: host-memory copies, below it ([acs]: P2P wins with many streams)
    op_overhead_us=12.0,  # chosen
)

# [right] The seeds' own box class where NCCL's model holds: knobs sit inside the noise (published
#         81.9 vs 81.4 tok/s). One socket, GPUs under a switch tree: every pair P2P at PXB.
_PCIE_8X_NCCL_RIGHT = dataclasses.replace(
    _PCIE_8X_MLA,
    name="pcie-8x-nccl-right",
    cpu_vendor="Intel",
    cpu_model=4,  # chosen: Emerald Rapids, one socket
    sockets=1,
    graph_type_intra="PXB",
    graph_nchannels=2,  # chosen: search.cc pass 2 on a Gen5 switch tree, sm100 step 24.0
    graph_bw_intra_GBps=24.0,
    gpu_path="PXB",
    cross_path="PXB",
    cross_fraction=0.0,
    hop_latency_scale=1.0,  # chosen: the hardware is what NCCL's hwLat says
    channel_bw_GBps=24.0,
    link_bw_cap_GBps=40.0,
    op_overhead_us=40.7,  # chosen: [right] 81.4 tok/s at NCCL's defaults
)

# [fi34528] sgl-project/sglang PR #34528 (open): FlashInfer PCIe allreduce, TPOT 9.53 -> 8.18 ms at
#           one stream against NCCL on a PCIe box (-14 % TPOT).
# [rtx6k]   voipmonitor/rtx6kpro notes: a one-shot PCIe allreduce gives about +7 % tok/s at TP 4 and
#           TP 8 on RTX PRO 6000 boxes.
# vLLM ships the switch that reaches such a kernel as VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC in
# 0.30.0 (vllm/envs.py, default 0; flashinfer_pcie_ipc_all_reduce.py): hence vllm_version 0.30.0.
_PCIE_4X_BACKENDS = dataclasses.replace(
    _PCIE_8X_NCCL_RIGHT,
    name="pcie-4x-backends",
    model="sim/qwen3-32b-tp4",
    vllm_version="0.30.0",  # the first release with VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC
    tp=4,
    layers=64,  # Qwen3-32B config.json num_hidden_layers
    hidden=5120,  # Qwen3-32B config.json hidden_size
    compute_ms=9.0,  # chosen: allreduce ~40 % of a single-stream decode step, as on such boxes
    batch_compute_slope=0.03,  # chosen: a dense 32B model batches well
    graph_type_intra="PXB",  # 4 GPUs behind a Gen5 switch on one socket
    graph_nchannels=2,
    op_overhead_us=33.0,  # chosen: NCCL's served allreduce ~45 us at 10 KB (launch, skew, sync)
    fi_pcie_ipc_us=36.0,  # chosen between [fi34528] (-14 % TPOT) and [rtx6k] (+7 %): ~+10 % tok/s
    backend_GBps=20.0,  # chosen: the one-shot kernel's bandwidth above the decode size
)

# [922] noonghunna/club-3090 #922: vLLM's custom allreduce returned wrong data over a patched-driver
#       P2P link while NCCL on the same link was right; the server kept answering.
# [42354] vllm-project/vllm #42354: one NCCL 2.28.9 build hit a watchdog kill after ~20 minutes of
#       load, another ran a clean 60-minute soak.
# The three stories are bound to sets the default search space reaches within a budget of 12
# (the triage's NCCL_P2P_LEVEL=SYS, the deployment-tuned and ll presets); speeds chosen so that the
# broken sets are the fastest: a night that judges on speed alone recommends one of them.
_PCIE_8X_GATES = dataclasses.replace(
    _PCIE_8X_MLA,
    name="pcie-8x-gates",
    set_faults=("NCCL_P2P_LEVEL=SYS => corrupt,speed=1.08;"  # [922]-like: +7.4 % from P2P, x1.08
                # [42354]-like; chosen: bound to the deployment's own set, one CUDA connection with
                # 16 channels, neither alone, so one fast set of the night hangs (the night)
                "CUDA_DEVICE_MAX_CONNECTIONS=1&NCCL_MAX_NCHANNELS=16 => hang-after-load=90,speed=1.12;"
                "NCCL_PROTO=LL => speed=1.10"),  # the clean win
)

# [gb10]  timothystewart6/vllm-gb10 PR #24: two GB10 nodes over RoCE, MiniMax-M2: ~40+ t/s privileged,
#         ~24 t/s in an unprivileged container; NCCL_IB_DISABLE=1 "cuts throughput ~4x"; RoCE needs
#         NCCL_IB_GID_INDEX=3 (RoCE v2, IPv4-mapped); NCCL_NET_GDR_LEVEL=0 (GDR unsafe on GB10).
# [log04] two DGX Spark, NCCL 2.28.9 (reallogs 04): ports rocep1s0f1:1/RoCE and roceP2p1s0f1:1/RoCE
#         [RO], OOB enp1s0f1np1 at 192.168.100.15/16, 16 channels, "GDR 0", busbw 21.99 GB/s.
# [mm2]   MiniMax-M2 config.json: num_hidden_layers 62, hidden_size 3072.
_ROCE_2X_SPARK = dataclasses.replace(
    _PCIE_8X_MLA,
    name="roce-2x-spark",
    model="sim/minimax-m2-tp2",
    nccl_version="2.28.9",  # [log04]
    cuda_version="13.0",  # [log04]
    gpu_name="NVIDIA GB10",
    compute_capability=121,  # NVIDIA CUDA GPUs table: GB10 = 12.1
    tp=2,
    gpus_per_node=1,
    layers=62,  # [mm2]
    hidden=3072,  # [mm2]
    compute_ms=20.9,  # chosen with op_overhead_us: [gb10] ~40 tok/s on IB
    batch_compute_slope=0.1,  # chosen: [gb10] 43 t/s avg at concurrency 4
    link="pcie",
    graph_type_intra="SYS",  # chosen: the ring leaves the node at every hop (no LL128 across the NET)
    graph_nchannels=8,  # [log04]: 16 channels (twice the search's)
    graph_bw_intra_GBps=3.0,  # chosen: 16 x 3 x 0.5 ~ [log04]'s busbw
    gpu_path="SYS",
    cross_path="SYS",
    cross_fraction=0.0,
    cpu_vendor="ARM",
    cpu_model=-1,
    sockets=1,
    gpu_pcie_bw_GBps=24.0,
    net_hop_factor=25.7,  # chosen: a TCP hop between the nodes: [gb10] ~24 tok/s on sockets
    net_bw_cap_GBps=5.5,  # chosen: [gb10] "~4x" below IB
    op_overhead_us=20.0,  # chosen: launch, skew and sync around each served allreduce
    net_ib_ports="rocep1s0f1:1/RoCE,roceP2p1s0f1:1/RoCE",  # [log04]
    net_if="enp1s0f1np1",  # [log04]
    net_first_ip="192.168.100.15",  # [log04]
    ib_gid_auto=False,  # chosen: the unprivileged container of [gb10] (see ncclnet.py)
    ib_gid_index=3,  # [gb10]
    net_gdr=False,  # [log04]: "use ring PXN 0 GDR 0" on GB10 at 2.28.9
    ib_hop_factor=1.0,  # chosen: NCCL's own NET latency
    ib_bw_cap_GBps=22.0,  # [log04]: busbw 21.99 GB/s
    ib_qps_us=-0.3,  # chosen: a sub-noise gain per doubling (NCCL's guide: ECMP, many flows)
    load_time_s=1.0,
    noise=0.02,
)

_ROCE_4X_SPARK = dataclasses.replace(
    _ROCE_2X_SPARK,
    name="roce-4x-spark",
    model="sim/minimax-m2-tp4",
    tp=4,
    compute_ms=12.0,  # chosen: a quarter of the weights per node; the ring pays 6 hops
)

BUILTIN: dict[str, Profile] = {p.name: p for p in (_PCIE_8X_MLA, _NVLINK_8X, _NVLINK_8X_NCCL,
                                                   _FAST_TINY, _PCIE_8X_AMD_FALLBACK, _PCIE_4X_ACS,
                                                   _PCIE_8X_NCCL_RIGHT, _PCIE_4X_BACKENDS,
                                                   _PCIE_8X_GATES, _ROCE_2X_SPARK, _ROCE_4X_SPARK)}
DEFAULT_PROFILE = "pcie-8x-mla"

_FIELDS = {f.name: f for f in dataclasses.fields(Profile)}


def _coerce(key: str, value, source: str):
    """Check a TOML value against the field's annotated type (int, float, str, bool)."""
    kind = _FIELDS[key].type
    if kind == "bool":
        if not isinstance(value, bool):
            raise ProfileError(f"{source}: {key} must be true/false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProfileError(f"{source}: {key} must be an integer, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProfileError(f"{source}: {key} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ProfileError(f"{source}: {key} must be a string, got {value!r}")
    return value


def _validate(p: Profile, source: str) -> Profile:
    """Reject values the cost model cannot use (the message names the key)."""
    from .ncclconst import CPU_CODES, path_types, version_tuple  # local: importable alone

    if p.link not in ("pcie", "nvlink"):
        raise ProfileError(f"{source}: link must be 'pcie' or 'nvlink', got {p.link!r}")
    if p.tp < 1 or p.layers < 1 or p.allreduces_per_layer < 0 or p.hidden < 1:
        raise ProfileError(f"{source}: tp, layers, hidden must be >= 1")
    if not 0.0 <= p.cross_fraction <= 1.0:
        raise ProfileError(f"{source}: cross_fraction must be within [0, 1]")
    if p.graph_nchannels < 1 or p.graph_bw_intra_GBps <= 0 or p.channel_bw_GBps <= 0:
        raise ProfileError(f"{source}: graph_nchannels and bandwidths must be positive")
    if min(p.link_bw_cap_GBps, p.shm_bw_cap_GBps, p.net_bw_cap_GBps, p.full_bw_threads) <= 0:
        raise ProfileError(f"{source}: bandwidth caps and full_bw_threads must be positive")
    if p.compute_ms < 0 or p.load_time_s < 0 or min(p.noise, p.bench_noise, p.bench_iter_noise) < 0:
        raise ProfileError(f"{source}: compute_ms, load_time_s and noises must be >= 0")
    try:
        version_tuple(p.nccl_version)
    except ValueError:
        raise ProfileError(f"{source}: nccl_version must look like 2.27.3, got "
                           f"{p.nccl_version!r}") from None
    if p.cpu_vendor not in CPU_CODES:
        raise ProfileError(f"{source}: cpu_vendor must be one of {', '.join(CPU_CODES)}, "
                           f"got {p.cpu_vendor!r}")
    if p.sockets < 1 or p.gpu_pcie_bw_GBps <= 0 or p.nvlink_bw_GBps < 0:
        raise ProfileError(f"{source}: sockets and gpu_pcie_bw_GBps must be positive")
    if p.gpus_per_node < 0 or (p.gpus_per_node and p.tp % p.gpus_per_node):
        raise ProfileError(f"{source}: gpus_per_node must be 0 (one node) or divide tp ({p.tp}), "
                           f"got {p.gpus_per_node}")
    if not (0.0 <= p.divergence_rate < 1.0 and 0.0 <= p.launch_divergence_rate < 1.0):
        raise ProfileError(f"{source}: divergence_rate and launch_divergence_rate must be within "
                           "[0, 1) (the share of 300-token answers that part)")
    from .faults import FaultError, parse_when_list  # local: importable alone

    try:
        parse_when_list([p.set_faults], f"{source}: set_faults")
    except FaultError as exc:
        raise ProfileError(str(exc)) from None
    names = path_types(p.nccl_version)
    for key in ("gpu_path", "cross_path", "p2p_default_level", "graph_type_intra"):
        if key == "p2p_default_level" and p.p2p_default_level == "auto":
            continue
        if getattr(p, key) not in names:
            raise ProfileError(f"{source}: {key} must be one of {', '.join(names)} "
                               f"(NCCL {p.nccl_version})")
    return p


def profile_from_mapping(data: dict, source: str = "<mapping>") -> Profile:
    """Build a profile from TOML-like data. With ``extends = "<built-in>"`` the given keys
    override that built-in; without it every field must be present. Raises ProfileError."""
    data = dict(data)
    base_name = data.pop("extends", None)
    unknown = sorted(k for k in data if k not in _FIELDS)
    if unknown:
        raise ProfileError(f"{source}: unknown key(s) {', '.join(unknown)}; "
                           f"accepted: extends, {', '.join(_FIELDS)}")
    values = {k: _coerce(k, v, source) for k, v in data.items()}
    if base_name is not None:
        if base_name not in BUILTIN:
            raise ProfileError(f"{source}: extends = {base_name!r} is not a built-in profile "
                               f"({', '.join(BUILTIN)})")
        values.setdefault("name", os.path.splitext(os.path.basename(source))[0])
        return _validate(dataclasses.replace(BUILTIN[base_name], **values), source)
    missing = sorted(k for k, f in _FIELDS.items() if k not in values
                     and f.default is dataclasses.MISSING)
    if missing:
        raise ProfileError(f"{source}: missing key(s) {', '.join(missing)} "
                           "(or add extends = \"<built-in>\")")
    return _validate(Profile(**values), source)


def load_profile(spec: str | None) -> Profile:
    """A built-in profile by name, or a TOML file path (``*.toml`` or any existing file)."""
    spec = spec or DEFAULT_PROFILE
    if spec in BUILTIN:
        return BUILTIN[spec]
    if spec.endswith(".toml") or os.path.isfile(spec):
        try:
            with open(spec, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ProfileError(f"{spec}: cannot read profile: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"{spec}: invalid TOML: {exc}") from None
        return profile_from_mapping(data, spec)
    raise ProfileError(f"unknown profile {spec!r}: use one of {', '.join(BUILTIN)} or a .toml file")
