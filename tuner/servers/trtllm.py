"""NVIDIA TensorRT-LLM's OpenAI server (``trtllm-serve``), as read in its source, v0.20 to v1.x.

Command: ``tensorrt_llm/commands/serve.py`` (the model is ``serve``'s positional after the
program, ``--tp_size``, ``--port``, default 8000). Routes: ``tensorrt_llm/serve/openai_server.py``
(``/health``, ``/v1/models``). Streaming: with ``stream_interval`` above 1 (and with speculative
decoding) a chunk carries the tokens of several iterations (NVIDIA/TensorRT-LLM PR #14312,
PR #6512), so chunk times do not time single tokens. A first request can wait on a kernel
autotune or a CUDA-graph capture (NVIDIA/TensorRT-LLM #9276). Version line ``"TensorRT-LLM
version: %s"`` (tensorrt_llm/__init__.py, logged at import).
"""

from __future__ import annotations

from tuner.servers.kind import ServerKind

__all__ = ["TRTLLM"]

TRTLLM = ServerKind(
    name="trtllm",
    title="TensorRT-LLM",
    command=(r"\btrtllm-serve\b", r"\btensorrt_llm\.commands\.serve\b", r"\btensorrt-llm\b"),
    log_marks=(r"\[TRT-LLM\]", r"\[TensorRT-LLM\]"),
    tp_options=("--tp_size", "--tp-size"),
    model_after="serve",
    default_port=8000,
    version_lines=(r"TensorRT-LLM version: (?P<v>\d+\.\d+\S*)",),
    warmup_lines=(r"[Aa]utotun", r"[Cc]apturing CUDA graph", r"CUDA graph", r"[Cc]ompil\w* .*kernel"),
    env_prefixes=("TRTLLM_",),
    launch_line="{env}trtllm-serve MODEL --tp_size {tp}{flags}",
    sources="TensorRT-LLM v0.20, v1.0: tensorrt_llm/commands/serve.py, tensorrt_llm/serve/openai_server.py",
)
