"""Whether a launch ran the backend its set asked for, from log lines as the servers print them.

Each line is built from the format string of the version named beside it (the file and function
are in tuner/servers/entries.py and docs/BACKENDS.md); prefixes as vLLM's V1 workers print them."""

from __future__ import annotations

from tuner.servers import CATALOGUE
from tuner.servers.backend import allreduce_backend, dispatch_order, prove

BY_NAME = {c.name: c for c in CATALOGUE}
VLLM = ["vllm", "serve", "m", "--tensor-parallel-size", "4"]
SGLANG = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "4"]
W = "(VllmWorker_TP0 pid=4242) INFO 03-02 10:00:00 [cuda_communicator.py:353] "
POTENTIAL = ("out of potential backends: ['FLASHINFER_PCIE_IPC', 'FLASHINFER', 'NCCL_SYMM_MEM', 'QUICK_REDUCE', "
             "'AITER_CUSTOM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].")


def dispatch(*names: str) -> str:
    """vLLM 0.33.0's line (cuda_communicator.py, _log_all_reduce_backend_selection)."""
    listed = "[" + ", ".join(f"'{n}'" for n in names) + "]"
    return f"{W}Using {listed} all-reduce backends (in dispatch order) for group 'tp:0' {POTENTIAL}"


def test_the_dispatch_line_names_the_decode_backend():
    log = [dispatch("CUSTOM", "SYMM_MEM", "PYNCCL")]
    assert dispatch_order(log) == (["CUSTOM", "SYMM_MEM", "PYNCCL"], dispatch_order(log)[1])
    b = allreduce_backend(log, [*VLLM, "--disable-custom-all-reduce"])  # the log wins over the flag
    assert b.name == "custom_allreduce" and b.nccl_on_decode_path is False
    assert allreduce_backend([dispatch("PYNCCL")], VLLM).nccl_on_decode_path is True
    other = dispatch("CUSTOM", "PYNCCL").replace("'tp:0'", "'dp:0'")
    assert dispatch_order([other]) is None


def test_vllm_033_nccl_only_is_proven_by_pynccl_alone():
    p = prove(BY_NAME["vllm-nccl-only"], [dispatch("PYNCCL"), W + "vLLM is using nccl==2.28.9"], VLLM, {})
    assert p.applied is True and p.ran == "nccl" and "PYNCCL" in p.reason


def test_vllm_custom_allreduce_off_on_nvswitch_runs_symm_mem_not_nccl():
    p = prove(BY_NAME["vllm-custom-allreduce-off"], [dispatch("SYMM_MEM", "PYNCCL")],
              [*VLLM, "--disable-custom-all-reduce"], {})
    assert p.applied is False and p.ran == "symm_mem" and "SYMM_MEM comes first, not PYNCCL" in p.reason


def test_flashinfer_missing_is_not_applied_with_vllms_own_line():
    # vLLM 0.17.0 to 0.33.0, flashinfer_all_reduce.py, FlashInferAllReduce.__init__
    line = (W.replace("cuda_communicator.py:353", "flashinfer_all_reduce.py:402")
            + "FlashInfer All Reduce is disabled because flashinfer is not available")
    p = prove(BY_NAME["vllm-flashinfer"], [line, dispatch("CUSTOM", "SYMM_MEM", "PYNCCL")], VLLM,
              {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"})
    assert p.applied is False and p.lines == (line,)
    assert '"FlashInfer All Reduce is disabled because flashinfer is not available"' in p.reason
    ok = prove(BY_NAME["vllm-flashinfer"], [dispatch("FLASHINFER", "CUSTOM", "SYMM_MEM", "PYNCCL")], VLLM,
               {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"})
    assert ok.applied is True and ok.ran == "flashinfer"


def test_custom_allreduce_refused_on_pcie_before_022():
    # vLLM 0.11.0, custom_all_reduce.py, CustomAllreduce.__init__: no dispatch line yet
    refused = (W + "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
               "To silence this warning, specify disable_custom_all_reduce=True explicitly.")
    p = prove(BY_NAME["vllm-custom-allreduce"], [refused], VLLM, {})
    assert p.applied is False and "more than two PCIe-only GPUs" in p.reason and p.ran == "nccl"


def test_absent_proving_line_is_named():
    # vLLM 0.30.0+ PCIe IPC asked for, but neither its init line nor a dispatch line is there
    p = prove(BY_NAME["vllm-flashinfer-pcie-ipc"], [W + "vLLM is using nccl==2.28.9"], VLLM,
              {"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "1"})
    assert p.applied is False and "the proving line" in p.reason and "is absent" in p.reason
    # its own line (flashinfer_pcie_ipc_all_reduce.py, v0.33.0) proves it
    init = W + "Initialized FlashInfer PCIe IPC all-reduce for TP4, hidden_dim=7168, dtype=torch.bfloat16, max_tokens=512."
    ok = prove(BY_NAME["vllm-flashinfer-pcie-ipc"], [init], VLLM, {"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "1"})
    assert ok.applied is True and ok.ran == "flashinfer"


def test_a_set_naming_no_backend_switch():
    p = prove(None, [dispatch("CUSTOM", "PYNCCL")], VLLM, {"NCCL_PROTO": "LL"})
    assert p.applied is None and p.choice is None and p.ran == "custom_allreduce"


def test_sglang_nccl_and_pcie_ipc():
    # SGLang 0.5.23: pynccl.py, PyNcclCommunicator.__init__
    nccl = "[2026-03-02 10:00:00 TP0] sglang is using nccl==2.27.5"
    off = [*SGLANG, "--disable-custom-all-reduce"]
    assert prove(BY_NAME["sglang-custom-allreduce-off"], [nccl], off, {}).applied is True
    # SGLang 0.5.21+: pcie_ipc_ar.py, PcieIpcCommunicator.__init__
    missing = ("[2026-03-02 10:00:00 TP0] SGLANG_ENABLE_PCIE_IPC_ALLREDUCE is set but this FlashInfer build has no "
               "pcie_ipc_comm; falling back to NCCL all-reduce.")
    env = {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}
    p = prove(BY_NAME["sglang-pcie-ipc"], [missing, nccl], off, env)
    assert p.applied is False and "no pcie_ipc_comm" in p.reason
    enabled = "[2026-03-02 10:00:00 TP0] FlashInfer PCIe-IPC all-reduce enabled (world=4, workspace sized on first reduction)"
    assert prove(BY_NAME["sglang-pcie-ipc"], [enabled, nccl], off, env).applied is True


def test_sglang_mscclpp_has_no_proving_line_but_its_refusal_counts():
    argv = [*SGLANG, "--enable-mscclpp"]
    assert prove(BY_NAME["sglang-mscclpp"], [], argv, {}).applied is True
    # SGLang 0.5.23, pymscclpp.py, PyMscclppCommunicator.__init__
    refused = ("[2026-03-02 10:00:00 TP0] PyMscclpp is disabled due to an unsupported world size: 2. Supported "
               "world sizes: (4, 8, 16, 32, 64). To silence this warning, specify disable_mscclpp=True explicitly.")
    p = prove(BY_NAME["sglang-mscclpp"], [refused], argv, {})
    assert p.applied is False and "unsupported world size: 2" in p.reason
