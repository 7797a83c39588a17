"""Whether one launch's log proves the backend choice its set asked for (server.backend.prove)."""

from __future__ import annotations

from tuner.servers import CATALOGUE, choice_of
from tuner.servers.backend import prove

ARGV = ["vllm", "serve", "m", "--tensor-parallel-size", "8"]
ENGINE = ("(EngineCore_0 pid=4242) INFO 06-01 12:00:00 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
          "config: model='m', tensor_parallel_size=8, pipeline_parallel_size=1, disable_custom_all_reduce={}, "
          "quantization=None")
FI_MISSING = ("(Worker_TP0 pid=4300) INFO 06-01 12:00:05 [flashinfer_all_reduce.py:51] FlashInfer All Reduce is "
              "disabled because flashinfer is not available")
FI_USED = ("(Worker_TP0 pid=4300) INFO 06-01 12:00:05 [cuda_communicator.py:269] Using ['FLASHINFER', 'PYNCCL'] "
           "all-reduce backends (in dispatch order) for group 'tp:0'")
ADVICE = ("(Worker_TP0 pid=4300) WARNING 06-01 12:00:05 [custom_all_reduce.py:154] Custom allreduce is disabled because "
          "it's not supported on more than two PCIe-only GPUs. To silence this warning, specify "
          "disable_custom_all_reduce=True explicitly.")


def entry(name: str):
    return next(c for c in CATALOGUE if c.name == name)


def test_a_set_naming_no_backend_switch_is_neither_applied_nor_not():
    p = prove(choice_of("vllm", {"NCCL_PROTO": "LL"}), [ENGINE.format(False)], ARGV, {"NCCL_PROTO": "LL"})
    assert p.choice is None and p.applied is None and p.ran == "custom_allreduce"


def test_the_engine_config_line_proves_the_flag():
    choice = choice_of("vllm", {"--disable-custom-all-reduce": "on"})
    assert choice is not None and choice.name == "vllm-custom-allreduce-off"
    p = prove(choice, [ENGINE.format(True)], [*ARGV, "--disable-custom-all-reduce"], {})
    assert p.applied is True and p.ran == "nccl"
    assert p.reason.endswith('the server logged "disable_custom_all_reduce=True,"') and p.lines == (ENGINE.format(True),)


def test_a_flag_the_server_ignored_is_not_applied_and_a_warnings_advice_is_no_proof():
    choice = entry("vllm-custom-allreduce-off")
    p = prove(choice, [ENGINE.format(False), ADVICE], [*ARGV, "--disable-custom-all-reduce"], {})
    assert p.applied is False
    assert "the proving line" in p.reason and "/disable_custom_all_reduce=True[,)]/" in p.reason


def test_the_most_specific_entry_is_the_sets_choice():
    params = {"--disable-custom-all-reduce": "on", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
              "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "NCCL_PROTO": "LL"}
    choice = choice_of("vllm", params)
    assert choice is not None and choice.name == "vllm-nccl-only"


def test_a_refusal_is_quoted_and_a_proving_line_applies():
    choice = entry("vllm-flashinfer")
    env = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}
    refused = prove(choice, [ENGINE.format(False), FI_MISSING], ARGV, env)
    assert refused.applied is False and refused.ran == "custom_allreduce"
    assert refused.reason.endswith('the server logged "FlashInfer All Reduce is disabled because flashinfer is not available"')
    ran = prove(choice, [ENGINE.format(False), FI_USED], ARGV, env)
    assert ran.applied is True and ran.ran == "flashinfer" and "'FLASHINFER', 'PYNCCL'] all-reduce backends" in ran.reason
    silent = prove(choice, [ENGINE.format(False)], ARGV, env)
    assert silent.applied is False and "is absent from the log" in silent.reason
