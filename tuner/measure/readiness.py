"""The real request that proves a server ready (the sweep's and diagnose's readiness rule)."""

from __future__ import annotations

import os
from collections.abc import Callable

from tuner.inputs import ExperimentConfig
from tuner.measure.client import discover_model, find_api_key, make_client
from tuner.measure.stream import stream_once

__all__ = ["ready_check"]


def ready_check(cfg: ExperimentConfig) -> Callable[[], None]:
    """The real request that proves readiness: the model list (unless configured) and a short
    streamed completion (a 503 from either means still loading: the launcher keeps waiting)."""
    pc, url = cfg.probe, cfg.server.base_url
    key = find_api_key(cfg.server.api_key, os.environ, cfg.server.env)

    def check() -> None:
        with make_client(pc.stall_timeout_s, api_key=key) as client:
            model = cfg.server.model or discover_model(url, client=client)
            stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=min(8, pc.max_tokens),
                        stall_timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint)
    return check
