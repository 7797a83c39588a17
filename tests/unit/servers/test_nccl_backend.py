"""Who carries the decode allreduce, from real vLLM/SGLang log lines (tests/fixtures/server_logs)."""

from pathlib import Path

from tuner.nccl import NcclVersion
from tuner.servers.backend import SERVER_OVERRIDES, allreduce_backend

SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "server_logs"
VLLM_TP8 = ["vllm", "serve", "moonshotai/Kimi-K2.5", "--tensor-parallel-size", "8"]


def lines(name):
    return (SERVER / name).read_text().splitlines()


def test_every_fixture_names_its_source():
    sources = (SERVER / "SOURCES.md").read_text()
    for log in SERVER.glob("*.log"):
        assert f"`{log.name}`" in sources


def test_vllm_pcie_goes_to_nccl():
    b = allreduce_backend(lines("vllm-0.8.5-pcie-custom-ar-disabled.log"), VLLM_TP8)
    assert b.name == "nccl" and b.nccl_on_decode_path is True and b.server == "vllm"
    assert "PCIe-only" in b.reason


def test_vllm_other_disable_reasons():
    assert "P2P" in allreduce_backend(lines("vllm-no-p2p.log"), VLLM_TP8).reason
    b = allreduce_backend(lines("vllm-world-size-16.log"), ["vllm", "serve", "m", "-tp", "16"])
    assert b.name == "nccl" and "unsupported world size" in b.reason


def test_vllm_custom_allreduce_on_means_nccl_is_off_the_decode_path():
    log = lines("vllm-0.9-pynccl-2.26.2.log")
    b = allreduce_backend(log, ["vllm", "serve", "m", "-tp", "4"])
    assert b.name == "custom_allreduce" and b.nccl_on_decode_path is False
    assert b.nccl_version == NcclVersion(2, 26, 2) and "--disable-custom-all-reduce" in b.reason
    b = allreduce_backend(log, ["vllm", "serve", "m", "-tp", "4", "--disable-custom-all-reduce"])
    assert b.name == "nccl" and b.nccl_on_decode_path is True


def test_vllm_engine_config_line():
    log = lines("vllm-0.8.4-engine-config-tp2.log")
    assert allreduce_backend(log, ["vllm", "serve", "m"]).name == "custom_allreduce"
    flagged = [line.replace("disable_custom_all_reduce=False", "disable_custom_all_reduce=True") for line in log]
    assert allreduce_backend(flagged, ["vllm", "serve", "m"]).name == "nccl"


def test_vllm_environment_routes():
    log = lines("vllm-0.8.5-pcie-custom-ar-disabled.log")
    assert allreduce_backend(log, VLLM_TP8, {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}).name == "flashinfer"
    assert allreduce_backend(log, VLLM_TP8, {"VLLM_USE_NCCL_SYMM_MEM": "1"}).name == "nccl_symmetric"


def test_sglang():
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "8"]
    b = allreduce_backend(lines("sglang-pcie-custom-ar-disabled.log"), argv)
    assert b.server == "sglang" and b.name == "nccl" and "PCIe-only" in b.reason
    b = allreduce_backend([], [*argv, "--disable-custom-all-reduce", "--enable-torch-symm-mem"])
    assert b.name == "symm_mem" and b.nccl_on_decode_path is None
    assert allreduce_backend([], [*argv, "--disable-custom-all-reduce", "--enable-mscclpp"]).name == "mscclpp"
    assert allreduce_backend([], argv).name == "custom_allreduce"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in SERVER_OVERRIDES["sglang"]


def test_no_tensor_parallelism_and_unknown_servers():
    assert allreduce_backend([], ["vllm", "serve", "m", "--tensor-parallel-size=1"]).name == "none"
    b = allreduce_backend(["hello"], ["./my_server", "--port", "8000"])
    assert b.name == "unknown" and b.nccl_on_decode_path is None


def test_symmetric_kernel_lines_name_nccl_symmetric():
    # NCCL's own line, src/scheduler/symmetric_sched.cc ncclSymmetricTaskScheduler (v2.30.7-1)
    sym = ("(VllmWorker rank=0 pid=77) h:77:77 [0] NCCL INFO AllReduce [Symmetric]: 14336 Bytes -> Kernel "
           "AllReduce_AGxLLMC_R nchannels 2 nthreads 640 nWorks 1")
    log = [*lines("vllm-0.8.5-pcie-custom-ar-disabled.log"), sym]
    b = allreduce_backend(log, VLLM_TP8)
    assert b.name == "nccl_symmetric" and b.nccl_on_decode_path is None
    assert "AllReduce [Symmetric]: 14336 Bytes -> Kernel AllReduce_AGxLLMC_R" in b.reason
    # an all-gather on the copy engine is not the decode allreduce
    ce = "h:77:77 [0] NCCL INFO AllGather [Copy Engine]: 1048576 Bytes -> cudaMemcpy"
    assert allreduce_backend([*lines("vllm-0.8.5-pcie-custom-ar-disabled.log"), ce], VLLM_TP8).name == "nccl"
