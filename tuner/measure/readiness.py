"""The real request that proves a server ready (the sweep's and diagnose's readiness rule)."""

from __future__ import annotations

import os
from collections.abc import Callable

from tuner.inputs.config import ExperimentConfig
from tuner.measure import probe

__all__ = ["ready_check"]


def ready_check(cfg: ExperimentConfig) -> Callable[[], None]:
    """The real request that proves readiness: the model list (unless configured) and a short
    streamed completion (a 503 from either means still loading: the launcher keeps waiting)."""
    pc, url = cfg.probe, cfg.server.base_url
    key = probe.find_api_key(cfg.server.api_key, os.environ, cfg.server.env)

    def check() -> None:
        with probe.make_client(pc.stall_timeout_s, api_key=key) as client:
            model = cfg.server.model or probe.discover_model(url, client=client)
            probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=min(8, pc.max_tokens),
                              stall_timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint)
    return check
