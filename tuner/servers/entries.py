"""The catalogue's entries: every released backend switch of vLLM and SGLang, as read.

Each entry was read in the released wheel of that server (PyPI) at the versions its ``source``
names; ``since`` is the first release read that has the switch when an older one read lacks
it, else the oldest release read (the note says so). Log regexes are built from the format
strings in those files, so they match the lines as the server prints them.
"""

from __future__ import annotations

from tuner.servers.choice import BackendChoice

__all__ = ["CATALOGUE", "MiB"]

MiB = 1024 * 1024

_VCA = "vllm/distributed/device_communicators/custom_all_reduce.py, CustomAllreduce.__init__"
#: vLLM's refusals of its custom allreduce (CustomAllreduce.__init__, v0.10.2 to v0.33.0).
_VLLM_CA_REFUSED = r"Custom allreduce is disabled (?:because|due to) [^.]*"
#: pynccl's start line: "vLLM is using nccl==%s" (pynccl.py, PyNcclCommunicator.__init__).
_VLLM_PYNCCL = r"vLLM is using nccl==\d+\.\d+\.\d+"
#: vLLM 0.22+: "Using %s all-reduce backends (in dispatch order) for group '%s' out of potential
#: backends: %s." (cuda_communicator.py, CudaCommunicator._log_all_reduce_backend_selection).
_DISPATCH = r"Using \[{}[^\]]*\] all-reduce backends \(in dispatch order\) for group 'tp"
_VLLM_FI_REFUSED = (r"FlashInfer All Reduce is disabled because [^.]*",
                    r"Failed to initialize FlashInfer All Reduce workspace: [^\n]*")
_VLLM_SYMM_REFUSED = (r"SymmMemCommunicator: [^\n]*(?:not available|not supported)[^\n]*",)
_SG_CA_REFUSED = r"Custom ?[Aa]ll[Rr]educe(?:V2)? is disabled (?:because|due to) [^.]*"
_SG_PYNCCL = r"sglang is using nccl==\d+\.\d+\.\d+"

CATALOGUE: tuple[BackendChoice, ...] = (
    # -- vLLM --------------------------------------------------------------------------------
    BackendChoice(
        name="vllm-custom-allreduce", server="vllm", backend="custom_allreduce", params={},
        since="0.10.2", tp_sizes=(2, 4, 6, 8), max_bytes=8 * MiB, needs=("nvlink above 2 GPUs", "one-node", "p2p"),
        dispatch="CUSTOM", proof=(_DISPATCH.format("'CUSTOM'"),), refusal=(_VLLM_CA_REFUSED,),
        source=f"{_VCA} and should_custom_ar (v0.10.2, v0.11.0, v0.17.0, v0.22.0, v0.33.0)",
        note="the default path, so the baseline, never a preset; TP 16 too in the 0.29.0 and later reads "
             "(_SUPPORTED_WORLD_SIZES); with torch symmetric memory on (0.11.0+ default), SM 9.0 caps it at "
             "512 KiB (TP 6) and 256 KiB (TP 8), SM 10.0 at 2 MiB / 1 MiB (all_reduce_utils.py, "
             "CUSTOM_ALL_REDUCE_MAX_SIZES); FlashInfer's allreduce, default off in the 0.22.0 read and on in "
             "the 0.29.0 read, goes before it where it takes the size"),
    BackendChoice(
        name="vllm-custom-allreduce-off", server="vllm", backend="nccl",
        params={"--disable-custom-all-reduce": "on"}, since="0.10.2",
        dispatch="PYNCCL", proof=(_DISPATCH.format("'PYNCCL'"), r"disable_custom_all_reduce=True[,)]"),
        source="vllm/engine/arg_utils.py, EngineArgs.disable_custom_all_reduce; "
               "vllm/distributed/device_communicators/cuda_communicator.py, CudaCommunicator.__init__ "
               "(v0.10.2, v0.11.0, v0.17.0, v0.22.0, v0.33.0)",
        note="the oldest release read is 0.10.2 (the flag is older); torch symmetric memory (default on from "
             "0.11.0, NVSwitch) or FlashInfer (default on in the 0.29.0 read) may still come before NCCL: "
             "vllm-nccl-only turns them off too"),
    BackendChoice(
        name="vllm-nccl-only", server="vllm", backend="nccl",
        params={"--disable-custom-all-reduce": "on", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
                "VLLM_ALLREDUCE_USE_FLASHINFER": "0"},
        since="0.17.0", dispatch="PYNCCL",
        proof=(_DISPATCH.format("'PYNCCL'"), r"disable_custom_all_reduce=True[,)]"),
        source="vllm/envs.py (VLLM_ALLREDUCE_USE_SYMM_MEM, VLLM_ALLREDUCE_USE_FLASHINFER); "
               "cuda_communicator.py, CudaCommunicator.all_reduce (v0.17.0, v0.22.0, v0.33.0)",
        note="every non-NCCL backend off; VLLM_ALLREDUCE_USE_FLASHINFER is absent in 0.16.0 and present in "
             "0.17.0"),
    BackendChoice(
        name="vllm-symm-mem", server="vllm", backend="symm_mem",
        params={"--disable-custom-all-reduce": "on", "VLLM_ALLREDUCE_USE_SYMM_MEM": "1"},
        since="0.10.2", tp_sizes=(2, 4, 6, 8), max_bytes=64 * MiB, needs=("nvswitch", "sm90", "bf16"),
        dispatch="SYMM_MEM", proof=(_DISPATCH.format("'SYMM_MEM'"),), refusal=_VLLM_SYMM_REFUSED,
        source="vllm/distributed/device_communicators/symm_mem.py, SymmMemCommunicator.__init__; "
               "all_reduce_utils.py, SYMM_MEM_ALL_REDUCE_MAX_SIZES (v0.10.2, v0.11.0, v0.22.0, v0.33.0)",
        note="default 0 in 0.10.2, 1 from 0.11.0; it comes after the custom allreduce in dispatch, hence "
             "--disable-custom-all-reduce; sizes: SM 9.0 64/32/64/64 MiB at TP 2/4/6/8, SM 10.0 8/32/128/128 "
             "MiB; multicast (NVSwitch) needed, else \"symmetric memory multicast operations are not "
             "supported\""),
    BackendChoice(
        name="vllm-nccl-symm-mem", server="vllm", backend="nccl_symmetric",
        params={"VLLM_USE_NCCL_SYMM_MEM": "1"}, since="0.11.0", tp_sizes=(4, 8, 16),
        needs=("nccl>=2.27", "nccl headers"), dispatch="NCCL_SYMM_MEM",
        # before 0.22 no vLLM line names it: NCCL's own TUNING line for a symmetric kernel does
        # ("%s [Symmetric]: %ld Bytes -> Kernel %s ...", src/enqueue.cc, ncclLaunchPrepare, v2.27.3-1)
        proof=(_DISPATCH.format("'NCCL_SYMM_MEM'"), r"AllReduce \[Symmetric\]: \d+ Bytes -> Kernel \S+"),
        refusal=(r"Failed to compile NCCL memory allocator\. Symmetric memory will be disabled\.",),
        source="vllm/distributed/device_communicators/all_reduce_utils.py, should_nccl_symm_mem_allreduce and "
               "NCCL_SYMM_MEM_ALL_REDUCE_CONFIG; pynccl_allocator.py, is_symmetric_memory_enabled "
               "(v0.11.0, v0.22.0, v0.33.0)",
        note="absent in 0.10.2; world size 4 and up; from 0.22.0 the custom allreduce keeps 16-512 KiB at "
             "TP 4 and 16-128 KiB at TP 8 (custom_ar_preferred_ranges); NCCL_ALGO/NCCL_PROTO do not pick "
             "its kernels"),
    BackendChoice(
        name="vllm-flashinfer", server="vllm", backend="flashinfer",
        params={"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}, since="0.17.0", tp_sizes=(2, 4, 8),
        needs=("flashinfer", "sm90"), dispatch="FLASHINFER",
        proof=(_DISPATCH.format("'FLASHINFER'"),), refusal=_VLLM_FI_REFUSED,
        source="vllm/distributed/device_communicators/flashinfer_all_reduce.py, FlashInferAllReduce.__init__ "
               "and should_use_fi_ar; vllm/envs.py (v0.17.0, v0.22.0, v0.33.0)",
        note="absent in 0.16.0; default 0 in the 0.17.0 and 0.22.0 reads, 1 in the 0.29.0 and later "
             "reads; it goes first in dispatch; sizes from the fusion pass's FI_ALLREDUCE_FUSION_MAX_SIZE_MB "
             "(SM 9.0: 64 / 2 / 0.5 MiB at TP 2/4/8); \"FlashInfer All Reduce is disabled because flashinfer "
             "is not available\" when the package is missing"),
    BackendChoice(
        name="vllm-flashinfer-pcie-ipc", server="vllm", backend="flashinfer",
        params={"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "1"}, since="0.30.0", tp_sizes=(2, 4, 8),
        needs=("flashinfer with PcieIpcAllReduceWorkspace", "one-node", "bf16"), dispatch="FLASHINFER_PCIE_IPC",
        proof=(_DISPATCH.format("'FLASHINFER_PCIE_IPC'"),
               r"Initialized FlashInfer PCIe IPC all-reduce for TP\d+, hidden_dim=\d+"),
        refusal=(r"FlashInfer PCIe IPC all-reduce was requested but this FlashInfer build does not provide "
                 r"PcieIpcAllReduceWorkspace",
                 r"FlashInfer PCIe IPC all-reduce (?:requires|does not support|has no)[^\n]*"),
        source="vllm/distributed/device_communicators/flashinfer_pcie_ipc_all_reduce.py, "
               "FlashInferPcieIpcAllReduce.__init__ (v0.30.0, v0.33.0)",
        note="absent in 0.29.0; default 0; the first backend in dispatch"),
    BackendChoice(
        name="vllm-flashinfer-fusion", server="vllm", backend="flashinfer",
        params={"--compilation-config": '{"pass_config": {"fuse_allreduce_rms": true}}'},
        since="0.12.0", tp_sizes=(2, 4, 8), needs=("flashinfer", "sm90"),
        proof=(r"Initialized FlashInfer Allreduce norm fusion workspace with backend=\w+",),
        refusal=(r"Flashinfer is not installed or comm module not found, skipping allreduce fusion pass",
                 r"Flashinfer allreduce fusion is not supported for world size \d+",
                 r"AllReduce fusion pass is disabled for [^.]*",
                 r"Failed to initialize Flashinfer allreduce workspace\. [^\n]*"),
        source="vllm/config/compilation.py, PassConfig.fuse_allreduce_rms; "
               "vllm/compilation/passes/fusion/allreduce_rms_fusion.py, AllReduceFusionPass.__init__ "
               "(v0.12.0, v0.17.0, v0.22.0, v0.33.0)",
        note="the allreduce + RMSNorm fusion pass; named enable_fi_allreduce_fusion in 0.10.2 and 0.11.0 "
             "(0.12.0 has both); its proving line comes from flashinfer_all_reduce.py in the 0.22.0 and 0.33.0 "
             "reads, not in 0.17.0; the 0.33.0 read sets it per optimization level (vllm/config/vllm.py)"),
    # -- SGLang ------------------------------------------------------------------------------
    BackendChoice(
        name="sglang-custom-allreduce-off", server="sglang", backend="nccl",
        params={"--disable-custom-all-reduce": "on"}, since="0.4.7",
        proof=(_SG_PYNCCL,),
        source="python/sglang/srt/server_args.py (0.4.7 to 0.5.21), arg_groups/fields/exec_.py (0.5.23); "
               "distributed/parallel_state.py, GroupCoordinator.__init__ (v0.4.7, v0.5.3, v0.5.23)",
        note="the oldest release read is 0.4.7 (the flag is older); 8 MiB, TP 2/4/6/8 for the custom "
             "allreduce it turns off; from 0.5.13 the JIT CustomAllReduceV2 (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2, "
             "default on) logs at DEBUG only"),
    BackendChoice(
        name="sglang-mscclpp", server="sglang", backend="mscclpp", params={"--enable-mscclpp": "on"},
        since="0.4.7", tp_sizes=(4, 8, 16), needs=("mscclpp",),
        refusal=(r"PyMscclpp is disabled due to [^.]*", r"PyMscclpp is unavailable because [^\n]*"),
        source="python/sglang/srt/distributed/device_communicators/pymscclpp.py, PyMscclppCommunicator.__init__; "
               "parallel_state.py, GroupCoordinator._resolve_outplace_all_reduce_method (v0.4.7, v0.5.3, v0.5.23)",
        note="goes before the custom allreduce where it takes the size; world sizes from the 0.5.23 read "
             "(_SUPPORTED_WORLD_SIZES 4..64); no INFO line says it ran, so the switch plus no refusal is the proof"),
    BackendChoice(
        name="sglang-torch-symm-mem", server="sglang", backend="symm_mem",
        params={"--disable-custom-all-reduce": "on", "--enable-torch-symm-mem": "on"}, since="0.5.3",
        tp_sizes=(4, 6, 8), max_bytes=64 * MiB, needs=("sm90", "nvswitch", "bf16"),
        refusal=(r"TorchSymmMemCommunicator: [^\n]*(?:not available|not supported)[^\n]*",),
        source="python/sglang/srt/distributed/device_communicators/torch_symm_mem.py, "
               "TorchSymmMemCommunicator.__init__; all_reduce_utils.py, TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES "
               "(v0.5.3, v0.5.23)",
        note="absent in 0.5.2; after the custom allreduce in dispatch, hence --disable-custom-all-reduce; "
             "SM 9.0 64/64/128/128 MiB at TP 2/4/6/8, multicast at TP 4/6/8; no INFO line says it ran"),
    BackendChoice(
        name="sglang-symm-mem", server="sglang", backend="nccl_symmetric",
        params={"--disable-custom-all-reduce": "on", "--enable-symm-mem": "on"}, since="0.5.1",
        needs=("torch>=2.8", "nccl>=2.27"), proof=(_SG_PYNCCL,),
        refusal=(r"--enable-symm-mem requires torch>=2\.8",),
        source="python/sglang/srt/distributed/device_communicators/pynccl_allocator.py (v0.5.3, v0.5.23); "
               "server_args.py (v0.5.1)",
        note="absent in 0.4.10 (0.5.0 release candidates not read); NCCL symmetric kernels, which NCCL_ALGO/PROTO "
             "do not pick"),
    BackendChoice(
        name="sglang-flashinfer-fusion", server="sglang", backend="flashinfer",
        params={"--enable-flashinfer-allreduce-fusion": "on"}, since="0.4.9", needs=("flashinfer", "sm90"),
        proof=(r"FlashInfer AllReduce Fusion enabled and workspace initialized: backend=\w+",),
        refusal=(r"FlashInfer comm not available, skipping workspace initialization",
                 r"Failed to initialize FlashInfer workspace \(backend=\w+\): [^\n]*",
                 r"FlashInfer AllReduce fusion disabled: [^\n]*",
                 r"flashinfer\.comm (?:unified )?allreduce_fusion API is not available[^\n]*"),
        source="python/sglang/srt/layers/flashinfer_comm_fusion.py, FlashInferWorkspaceManager.initialize "
               "(v0.4.10, v0.5.23); server_args.py (v0.4.9)",
        note="absent in 0.4.8; deprecated in the 0.5.23 read for --flashinfer-allreduce-fusion-backend=auto, "
             "still accepted; auto-enabled for some models on SM 9.0/10.0 (undo: "
             "--enforce-disable-flashinfer-allreduce-fusion)"),
    BackendChoice(
        name="sglang-pcie-ipc", server="sglang", backend="flashinfer",
        params={"--disable-custom-all-reduce": "on", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, since="0.5.21",
        tp_sizes=(2, 4, 8), needs=("flashinfer with pcie_ipc_comm", "bf16"),
        proof=(r"FlashInfer PCIe-IPC all-reduce enabled \(world=\d+",
               r"FlashInfer PCIe-IPC workspace built \(world=\d+, max_numel=\d+"),
        refusal=(r"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no pcie_ipc_comm",
                 r"Setup FlashInfer PCIe-IPC allreduce failed with [^\n]*",
                 r"FlashInfer PCIe-IPC workspace \(max_numel=\d+\) failed: [^\n]*"),
        source="python/sglang/srt/distributed/device_communicators/pcie_ipc_ar.py, eligible_group and "
               "PcieIpcCommunicator.__init__; sglang/srt/environ.py (v0.5.21, v0.5.23)",
        note="absent in 0.5.20; after the custom allreduce in dispatch, hence --disable-custom-all-reduce (on "
             "PCIe with more than 2 GPUs the custom allreduce refuses anyway); workspace sized for decode "
             "(max batch x hidden), larger reductions stay on NCCL"),
)
