"""The real request that proves a server ready (the sweep's and diagnose's readiness rule)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from tuner.errors import ProbeError
from tuner.inputs import ExperimentConfig
from tuner.measure.client import ModelName, find_api_key, find_model, make_client, refused_guess
from tuner.measure.stream import stream_once
from tuner.servers import ServerKind

__all__ = ["ReadyCheck", "ready_check"]


class ReadyCheck:
    """The real request that proves readiness, callable: the model's name (``server.model``, else
    :func:`tuner.measure.client.find_model` over the kind's routes, ``kind()`` asked at the call:
    the kind may be known only from the log) and a short streamed completion. A 503 from either
    means still loading: the launcher keeps waiting. ``model``: the name found by the last call
    that got one (None before), for the probe to reuse."""

    def __init__(self, cfg: ExperimentConfig, kind: Callable[[], ServerKind] | None = None,
                 argv: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.kind = kind or cfg.server.server_kind
        self.argv = list(argv) or cfg.server.argv()
        self.model: ModelName | None = None

    def __call__(self) -> None:
        pc, server = self.cfg.probe, self.cfg.server
        key = find_api_key(server.api_key, os.environ, server.env)
        with make_client(pc.stall_timeout_s, api_key=key) as client:
            model = self.model or (ModelName(server.model) if server.model else
                                   find_model(server.base_url, client=client, kind=self.kind(), argv=self.argv))
            self.model = model
            try:  # an answer may end early (a server that ignores ignore_eos): one token proves readiness
                stream_once(client, server.base_url, model=model.name, prompt=pc.prompt,
                            max_tokens=min(8, pc.max_tokens), stall_timeout_s=pc.stall_timeout_s,
                            endpoint=pc.endpoint, min_tokens=1)
            except ProbeError as exc:
                err = refused_guess(exc, model)
                if err is exc:
                    raise
                raise err from exc


def ready_check(cfg: ExperimentConfig, kind: Callable[[], ServerKind] | None = None,
                argv: Sequence[str] = ()) -> ReadyCheck:
    """The :class:`ReadyCheck` of ``cfg``'s server (``kind``: how to learn its kind, default
    the command's; ``argv``: the command as launched, default ``server.argv()``)."""
    return ReadyCheck(cfg, kind, argv)
