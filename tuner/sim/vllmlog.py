"""vLLM's own log lines, in its format: ``(<process> pid=<pid>) LEVEL MM-DD HH:MM:SS [file:line]
message`` (vllm/logger.py). Wording is vLLM's (the files named in each function); the file:line
tags are as public vLLM logs of the 0.10-0.11 era show them and matter to no parser.
"""

from __future__ import annotations

import time

from .profiles import Profile

#: vLLM's first CUDA-graph capture sizes (vllm/config: 1, 2, 4, then steps of 8); the simulator
#: logs the collectives of these only, to keep start-up logs short.
CAPTURE_SIZES = (1, 2, 4, 8)


def stamp(now: float | None = None) -> str:
    """vLLM's time stamp (``%m-%d %H:%M:%S``)."""
    return time.strftime("%m-%d %H:%M:%S", time.localtime(now))


def text(level: str, src: str, msg: str, process: str, pid: int | str) -> str:
    """One formatted vLLM line; ``pid`` may be a placeholder the worker fills in."""
    return f"({process} pid={pid}) {level} {stamp()} [{src}] {msg}"


def plain(level: str, src: str, msg: str) -> str:
    """One vLLM line in the format of vLLM 0.8 and earlier (no process prefix):
    ``LEVEL MM-DD HH:MM:SS [file:line] message``."""
    return f"{level} {stamp()} [{src}] {msg}"


def engine_config(profile: Profile, model: str, engine: str = "V1") -> tuple[str, str, str]:
    """The engine's start line (vllm/v1/engine/core.py; vllm/engine/llm_engine.py for
    ``engine="V0"``), with the flags a tool reads."""
    flag = profile.disable_custom_all_reduce
    return ("INFO", "core.py:77" if engine == "V1" else "llm_engine.py:242",
            f"Initializing a {engine} LLM engine (v{profile.vllm_version}) with config: model='{model}', "
            f"speculative_config=None, tokenizer='{model}', skip_tokenizer_init=False, "
            f"tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, "
            f"dtype=torch.bfloat16, max_seq_len={profile.max_model_len}, download_dir=None, "
            f"load_format=auto, tensor_parallel_size={profile.tp}, pipeline_parallel_size=1, "
            f"data_parallel_size=1, disable_custom_all_reduce={flag}, quantization=None, "
            f"enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, "
            f"served_model_name={model}, enable_prefix_caching=True, chunked_prefill_enabled=True")


def chunked_prefill(profile: Profile) -> tuple[str, str, str]:
    """The API server's scheduler line naming max_num_batched_tokens (vllm/config/scheduler.py)."""
    return ("INFO", "scheduler.py:205",
            f"Chunked prefill is enabled with max_num_batched_tokens={profile.profile_run_tokens}.")


def using_nccl(profile: Profile) -> tuple[str, str, str]:
    """Every worker's NCCL line (vllm/distributed/device_communicators/pynccl.py)."""
    return ("INFO", "pynccl.py:70", f"vLLM is using nccl=={profile.nccl_version}")


def custom_allreduce_init(profile: Profile) -> list[tuple[str, str, str]]:
    """What ``CustomAllreduce.__init__`` logs on each worker
    (vllm/distributed/device_communicators/custom_all_reduce.py); nothing when it is disabled
    by flag (vLLM then never builds it) or when it is enabled. The lines of every backend a
    server builds are ``arbackends.plan_for(...).init_lines``."""
    from .arbackends import plan_for

    return [e for e in plan_for(profile).init_lines if e[1].startswith("custom_all_reduce.py")]


def custom_allreduce_capture(profile: Profile, enabled: bool) -> list[tuple[str, str, str]]:
    """``CustomAllreduce.register_graph_buffers`` at the end of CUDA-graph capture: one line
    per worker when the custom allreduce is enabled."""
    if not enabled:
        return []
    count = profile.allreduces_per_token * len(CAPTURE_SIZES)
    return [("INFO", "custom_all_reduce.py:213", f"Registering {count} cuda graph addresses")]


def graph_capture_done() -> tuple[str, str, str]:
    """The model runner's end-of-capture line (vllm/v1/worker/gpu_model_runner.py)."""
    return ("INFO", "gpu_model_runner.py:3480", "Graph capturing finished in 4 secs, took 0.48 GiB")
