"""vLLM's allreduce backends in the simulator (tuner/sim/arbackends.py): each switch moves the
decode allreduce as that vLLM version would and logs vLLM's line; a missing flashinfer falls back
with vLLM's message; pcie-4x-backends' PCIe IPC backend decodes ~10 % faster than NCCL (cost
model numbers); a real server started with a switch answers a request."""

from __future__ import annotations

import dataclasses

import pytest

from tests.simproc import chat, content_of, run_sim, stream_chunks
from tuner.sim.arbackends import plan_for, read_switches
from tuner.sim.costmodel import CostModel
from tuner.sim.ncclenv import settings_from
from tuner.sim.profiles import BUILTIN, load_profile

BOX = BUILTIN["pcie-4x-backends"]
NVL = BUILTIN["nvlink-8x"]
IPC = {"VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "1"}
USING_DEFAULT = ("Using ['PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of "
                 "potential backends: ['FLASHINFER_PCIE_IPC', 'FLASHINFER', 'NCCL_SYMM_MEM', "
                 "'QUICK_REDUCE', 'AITER_CUSTOM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].")
PCIE_VETO = ("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
             "To silence this warning, specify disable_custom_all_reduce=True explicitly.")
IPC_MISSING = ("FlashInfer PCIe IPC all-reduce was requested but this FlashInfer build does not "
               "provide PcieIpcAllReduceWorkspace; falling back to another all-reduce backend.")


def msgs(lines) -> list[str]:
    return [m for _, _, m in lines]


def h100(tmp_path, **keys) -> object:
    """nvlink-8x as 8 H100 on NVSwitch (SM 9.0, multicast): a TOML profile on disk."""
    extra = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}\n" for k, v in keys.items())
    path = tmp_path / "h100.toml"
    path.write_text('extends = "nvlink-8x"\ncompute_capability = 90\nnvswitch_multicast = true\n'
                    f"symm_mem_us = 12.0\nflashinfer_us = 7.0\n{extra}")
    return load_profile(str(path))


def test_pcie_box_defaults_to_nccl_with_vllm_030s_lines():
    plan = plan_for(BOX, {})
    assert plan.enabled == ("PYNCCL",) and plan.pick(BOX.decode_bytes) == "PYNCCL"
    init = msgs(plan.init_lines)
    assert "SymmMemCommunicator: Device capability 12.0 not supported, communicator is not available." in init
    assert "FlashInfer All Reduce is disabled because it is not supported for world_size=4." in init
    assert PCIE_VETO in init
    assert msgs(plan.rank0_lines) == [USING_DEFAULT]
    assert CostModel(BOX, settings_from({})).breakdown(1).allreduce.via == "nccl"


def test_pcie_ipc_switch_takes_decode_and_is_about_ten_percent_faster():
    nccl = CostModel(BOX, settings_from({}), plan_for(BOX, {})).breakdown(1)
    plan = plan_for(BOX, IPC)
    ipc = CostModel(BOX, settings_from({}), plan).breakdown(1)
    assert plan.enabled == ("FLASHINFER_PCIE_IPC", "PYNCCL") and ipc.allreduce.via == "flashinfer_pcie_ipc"
    assert ipc.allreduce.time_us == pytest.approx(36.0) and nccl.allreduce.time_us == pytest.approx(46.88, abs=0.01)
    assert ipc.tok_s / nccl.tok_s == pytest.approx(1.102, abs=0.005)
    assert msgs(plan.rank0_lines)[-1].startswith("Using ['FLASHINFER_PCIE_IPC', 'PYNCCL'] all-reduce backends")
    assert msgs(plan.warmup_lines) == ["Initialized FlashInfer PCIe IPC all-reduce for TP4, hidden_dim=5120, "
                                       "dtype=torch.bfloat16, max_tokens=512."]
    assert plan.pick(BOX.decode_bytes * 8192) == "PYNCCL"  # the prefill is above the captured sizes


def test_a_variable_the_version_lacks_is_ignored_silently():
    old = dataclasses.replace(BOX, vllm_version="0.29.0")
    plan = plan_for(old, IPC)
    assert plan.enabled == ("PYNCCL",)
    assert not any("PCIe IPC" in m for m in msgs(plan.init_lines + plan.rank0_lines + plan.warmup_lines))
    assert "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC" not in read_switches("0.29.0", IPC)
    assert msgs(plan.rank0_lines)[0].endswith("potential backends: ['FLASHINFER', 'NCCL_SYMM_MEM', "
                                              "'QUICK_REDUCE', 'AITER_CUSTOM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].")
    assert plan_for(dataclasses.replace(BOX, vllm_version="0.17.0"), {}).rank0_lines == ()  # no line before 0.22


def test_missing_flashinfer_falls_back_with_vllms_messages():
    plan = plan_for(BOX, {**IPC, "VLLM_ALLREDUCE_USE_FLASHINFER": "1"}, missing=("flashinfer",))
    assert plan.enabled == ("PYNCCL",) and plan.pick(BOX.decode_bytes) == "PYNCCL"
    assert IPC_MISSING in msgs(plan.rank0_lines)
    assert "FlashInfer All Reduce is disabled because flashinfer is not available" in msgs(plan.init_lines)


def test_nvlink_8x_custom_allreduce_flag_moves_decode_to_nccl_on_a100():
    plan = plan_for(NVL, {})
    assert plan.enabled == ("CUSTOM", "PYNCCL") and plan.ca_max == 8 * 1024 * 1024
    assert "SymmMemCommunicator: Device capability 8.0 not supported, communicator is not available." in msgs(
        plan.init_lines)
    assert not msgs(plan_for(NVL, {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}).init_lines)
    off = dataclasses.replace(NVL, disable_custom_all_reduce=True)
    assert CostModel(off, settings_from({})).breakdown(1).allreduce.via == "nccl"
    assert plan_for(dataclasses.replace(NVL, vllm_version="0.27.0"), {}).registers_info is False


def test_h100_symm_mem_caps_custom_and_takes_decode_without_it(tmp_path):
    box = h100(tmp_path)
    plan = plan_for(box, {})
    assert plan.enabled == ("CUSTOM", "SYMM_MEM", "PYNCCL") and plan.ca_max == 256 * 1024
    assert plan.pick(box.decode_bytes) == "CUSTOM" and plan.pick(1024 * 1024) == "SYMM_MEM"
    off = dataclasses.replace(box, disable_custom_all_reduce=True)
    assert CostModel(off, settings_from({})).breakdown(1).allreduce.via == "symm_mem"
    assert plan_for(off, {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}).pick(box.decode_bytes) == "PYNCCL"
    old = dataclasses.replace(off, vllm_version="0.10.2")  # default 0 in 0.10.2
    assert plan_for(old, {}).pick(box.decode_bytes) == "PYNCCL"
    pcie = dataclasses.replace(box, nvswitch_multicast=False)
    assert ("SymmMemCommunicator: symmetric memory multicast operations are not supported."
            in msgs(plan_for(pcie, {}).init_lines))


def test_flashinfer_switch_by_version_and_its_workspace_refusal(tmp_path):
    box = dataclasses.replace(h100(tmp_path), vllm_version="0.22.0")
    fi = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}
    plan = plan_for(box, fi)
    assert plan.enabled[0] == "FLASHINFER" and plan.pick(box.decode_bytes) == "FLASHINFER"
    assert CostModel(box, settings_from({}), plan).breakdown(1).allreduce.via == "flashinfer"
    assert plan_for(dataclasses.replace(box, vllm_version="0.16.0"), fi).pick(box.decode_bytes) == "CUSTOM"
    pcie = dataclasses.replace(box, nvlink_fully_connected=False, link="pcie", nvswitch_multicast=False)
    bad = plan_for(pcie, fi)
    assert "FLASHINFER" in msgs(bad.rank0_lines)[-1] and bad.pick(box.decode_bytes) == "PYNCCL"
    assert msgs(bad.lazy_lines) == ["Failed to initialize FlashInfer All Reduce workspace: CUDA error: peer access "
                                    "is not supported between these two devices. FlashInfer All Reduce will be "
                                    "disabled."]


def test_nccl_symmetric_memory_by_version():
    env = {"VLLM_USE_NCCL_SYMM_MEM": "1"}
    new = dataclasses.replace(BOX, vllm_version="0.22.0")
    assert plan_for(new, env).pick(BOX.decode_bytes) == "NCCL_SYMM_MEM"  # 10 KiB <= 16 KiB
    assert CostModel(new, settings_from({}), plan_for(new, env)).breakdown(1).allreduce.via == "nccl_symm_mem"
    old = dataclasses.replace(BOX, vllm_version="0.11.0")  # from 2 MiB at TP 4 up to 0.16
    assert plan_for(old, env).pick(BOX.decode_bytes) == "PYNCCL"
    assert plan_for(old, env).pick(2 * 1024 * 1024) == "NCCL_SYMM_MEM"
    assert plan_for(dataclasses.replace(BOX, vllm_version="0.10.2"), env).enabled == ("PYNCCL",)


def test_a_value_vllm_cannot_read_fails_the_start():
    with pytest.raises(ValueError, match="invalid literal for int"):
        plan_for(BOX, {"VLLM_ALLREDUCE_USE_SYMM_MEM": "yes"})
    done = run_sim("model", "--profile", "pcie-4x-backends", "--env", "VLLM_ALLREDUCE_USE_SYMM_MEM=yes")
    assert done.returncode == 1 and "ValueError: invalid literal for int()" in done.stderr


def test_model_command_shows_the_backend_and_its_effect():
    done = run_sim("model", "--profile", "pcie-4x-backends", "--env", "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1")
    assert done.returncode == 0, done.stderr
    rows = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert rows["backend"] == "FLASHINFER_PCIE_IPC" and rows["backend_us"] == "36.0"
    assert rows["vs_nccl_only"] == "+10.2 %"
    bad = run_sim("model", "--profile", "pcie-4x-backends", "--sim-missing", "flashinfr")
    assert bad.returncode == 2 and "unknown package 'flashinfr'; accepted: flashinfer" in bad.stderr
    bad = run_sim("serve", "--vllm-version", "latest")
    assert bad.returncode == 2 and "--vllm-version must look like 0.30.0, got 'latest'" in bad.stderr


def test_server_with_the_switch_logs_it_and_answers(sim):
    s = sim(env=IPC, profile="pcie-4x-backends", workers=1)
    s.wait_ready()
    using = [ln for ln in s.lines if "all-reduce backends (in dispatch order)" in ln]
    assert len(using) == 1 and "[cuda_communicator.py:" in using[0] and "INFO" in using[0]
    assert using[0].endswith("Using ['FLASHINFER_PCIE_IPC', 'PYNCCL'] all-reduce backends (in dispatch order) for "
                             "group 'tp:0' out of potential backends: ['FLASHINFER_PCIE_IPC', 'FLASHINFER', "
                             "'NCCL_SYMM_MEM', 'QUICK_REDUCE', 'AITER_CUSTOM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].")
    assert sum(ln.endswith(PCIE_VETO) for ln in s.lines) == 2  # rank 0 and rank 1
    s.wait_line("Initialized FlashInfer PCIe IPC all-reduce for TP4, hidden_dim=5120")
    model = s.sim_json("MODEL")
    assert model["via"] == "flashinfer_pcie_ipc" and model["vllm_version"] == "0.30.0"
    chunks, done = stream_chunks(s.url, chat("What is the capital of France?"))
    assert done and "Paris" in content_of(chunks)


def test_server_without_flashinfer_falls_back_to_nccl(sim):
    s = sim("--sim-missing", "flashinfer", env=IPC, profile="pcie-4x-backends", workers=1)
    t = sim("--vllm-version", "0.29.0", env=IPC, profile="pcie-4x-backends")
    for x in (s, t):
        x.wait_ready()
    assert sum(ln.endswith(IPC_MISSING) and "WARNING" in ln for ln in s.lines) == 1  # local rank 0 only
    assert s.sim_json("MODEL")["via"] == "nccl" and s.sim_json("MODEL")["missing"] == ["flashinfer"]
    assert any(ln.endswith("Using ['PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0' out of "
                           "potential backends: ['FLASHINFER_PCIE_IPC', 'FLASHINFER', 'NCCL_SYMM_MEM', "
                           "'QUICK_REDUCE', 'AITER_CUSTOM', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].") for ln in s.lines)
    assert t.sim_json("MODEL")["via"] == "nccl" and not any("PCIe IPC" in ln for ln in t.lines)
    u = sim(env={**IPC, "TUNER_SIM_MISSING": "flashinfer"}, profile="pcie-4x-backends")
    u.wait_ready()
    assert u.sim_json("MODEL")["missing"] == ["flashinfer"] and any(IPC_MISSING in ln for ln in u.lines)
    chunks, done = stream_chunks(u.url, chat("What is the capital of France?"))
    assert done and "Paris" in content_of(chunks)
