"""Hugging Face Text Generation Inference (``text-generation-launcher``), as read in its source,
v2.0 to v3.x.

Command: ``launcher/src/main.rs``, ``Args`` (``--model-id``, ``--num-shard``, ``--port``,
default 3000; ``--json-output`` makes every log line a JSON object). Routes: ``router/src/
server.rs``: ``/health``, ``/info`` (``model_id``, ``version``), ``/v1/chat/completions``, which
serves any ``model`` value (its docs send ``"model": "tgi"``); ``GET /v1/models`` only from 2.3
(huggingface/text-generation-inference #2369, PR #2433), a 404 before. The chat request has no
``ignore_eos`` (router/src/lib.rs, ``ChatRequest``: serde drops unknown fields, TGI #1544), so
an answer may end at the model's EOS before ``max_tokens``. Warm-up: ``"Warming up model"``
(server/text_generation_server/server.py) and CUDA-graph capture (``"Cuda Graphs are enabled
for sizes"``). Shards log ``Shard complete standing by`` / ``Shard {rank} failed to start``
(launcher/src/main.rs). Harmless at start: ``"Could not import Flash Attention enabled models:
%s"`` and ``"Could not import Mamba: %s"`` (server/text_generation_server/models/__init__.py,
v2.x: the kernels are optional). With ``--json-output`` each line is tracing-subscriber's JSON
(``{"timestamp", "level", "fields": {"message"}, "target"}``), the shards' loguru records
re-logged through it (launcher/src/main.rs, ``PythonLogMessage``).
"""

from __future__ import annotations

from tuner.servers.kind import ModelRoute, ServerKind

__all__ = ["TGI"]

TGI = ServerKind(
    name="tgi",
    title="TGI",
    command=(r"\btext-generation-launcher\b", r"\btext-generation-inference\b", r"\btext_generation_server\b"),
    log_marks=(r"\btext_generation_launcher\b", r"\btext_generation_router\b", r"\btext_generation_server\b"),
    tp_options=("--num-shard",),
    model_options=("--model-id",),
    default_port=3000,
    model_routes=(ModelRoute("/v1/models", ("data", 0, "id")), ModelRoute("/info", ("model_id",))),
    any_model_name=True,
    version_lines=(r"\btext[-_]generation[-_]launcher\b.*\bversion[\":= ]+\"?(?P<v>\d+\.\d+\.\d+)",),
    fatal_lines=(r"Shard \d+ failed to start", r"Shard process was signaled to shutdown with signal \d+",
                 r"Webserver Crashed"),
    warmup_lines=(r"Warming up model", r"Cuda Graphs are enabled for sizes", r"[Cc]apturing CUDA graph"),
    benign_lines=(r"Could not import Flash Attention enabled models", r"Could not import Mamba"),
    honours_ignore_eos=False,
    launch_line="{env}text-generation-launcher --model-id MODEL --num-shard {tp}{flags}",
    sources="text-generation-inference v2.2.0, v2.3.0, v3.0: launcher/src/main.rs, router/src/server.rs, "
            "router/src/lib.rs",
    model_list_note="TGI before 2.3 has no model list",
    any_model_example="tgi",
)
