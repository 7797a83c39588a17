"""Log lines and info of a simulated Hugging Face text-generation-inference (TGI) server.

The formats of text-generation-inference v2.2.0 (launcher/src/main.rs: ``Args { ... }``,
``Sharding model on N processes``, ``Starting shard rank=R``, ``Shard ready in ...``;
router/src/server.rs: ``Warming up model``, ``Connected``; its tracing timestamps
``2024-08-01T12:00:00.000000Z  INFO target: message``). ``/info``'s fields are router/src/lib.rs's
``Info``. Before 2.3 TGI has no ``GET /v1/models`` (huggingface/text-generation-inference
#2369, PR #2433).
"""

from __future__ import annotations

import time

__all__ = ["connected", "info", "lists_models", "start", "warmup"]


def _ts() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def _line(target: str, message: str, level: str = "INFO") -> str:
    return f"{_ts()}  {level} {target}: {message}"


def start(model: str, shards: int, port: int, version: str) -> list[str]:
    """The launcher's lines up to the webserver's start (shards, their readiness, warm-up)."""
    lines = [_line("text_generation_launcher", f'Args {{ model_id: "{model}", num_shard: Some({shards}), '
                                               f"port: {port}, json_output: false, .. }}"),
             _line("text_generation_launcher", f"Sharding model on {shards} processes")]
    lines += [_line("shard-manager", f"text_generation_launcher: Starting shard rank={r}") for r in range(shards)]
    lines += [_line("shard-manager", f"text_generation_launcher: Shard ready in 0.2s rank={r}") for r in range(shards)]
    lines += [_line("text_generation_launcher", f"Starting Webserver (version {version})"),
              _line("text_generation_router::server", "router/src/server.rs:1922: Warming up model")]
    return lines


def connected() -> str:
    """The router's line once it serves."""
    return _line("text_generation_router::server", "router/src/server.rs:2357: Connected")


def warmup() -> str:
    """A CUDA-graph capture line (server/text_generation_server/models/flash_causal_lm.py)."""
    return _line("text_generation_launcher", "Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]")


def lists_models(version: str) -> bool:
    """True when this TGI version serves ``GET /v1/models`` (2.3 and later)."""
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    return tuple(parts) >= (2, 3)


def info(model: str, version: str, max_total_tokens: int) -> dict:
    """``GET /info``'s body (router/src/lib.rs, ``Info``)."""
    return {"model_id": model, "model_sha": "5206a32e0bd3067aef1ce90f5528ade7d866253f", "model_pipeline_tag":
            "text-generation", "max_total_tokens": max_total_tokens, "version": version, "sha": "db7e043",
            "docker_label": None}
