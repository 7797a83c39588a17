"""llama.cpp's server (``llama-server``), as read in its source (tools/server/server.cpp, builds
b5000 to b6000).

Command: ``common/arg.cpp`` (``-m``/``--model``, ``--port``, default 8080; no tensor
parallelism over NCCL: ``--split-mode row`` splits tensors across GPUs with its own copies).
Routes: ``/health`` answers 503 ``{"error": {"message": "Loading model"}}`` on every path while
the model loads; ``/v1/models``. A stream's last chunk carries a ``timings`` object; the role
chunk has ``content: null``. Version line ``"build: %d (%s)"`` (common/common.cpp).
"""

from __future__ import annotations

from tuner.servers.kind import ServerKind

__all__ = ["LLAMACPP"]

LLAMACPP = ServerKind(
    name="llamacpp",
    title="llama.cpp",
    command=(r"\bllama-server\b", r"\bllama\.cpp\b"),
    log_marks=(r"\bllama_model_load\b", r"\bllama_context\b", r"\bsrv +\w+: ", r"\bmain: server is listening"),
    model_options=("-m", "--model"),
    default_port=8080,
    version_lines=(r"^build: (?P<v>\d+) \(",),
    env_prefixes=("LLAMA_",),
    # tools/server/server.cpp, main: "%s: server is listening on %s"
    port_lines=(r"server is listening on https?://(?:\[[^\]]*\]|[^\s:/]+):(?P<port>\d{1,5})",),
    launch_line="{env}llama-server -m MODEL.gguf{flags}",
    sources="llama.cpp b5000-b6000: tools/server/server.cpp, common/arg.cpp",
)
