"""Failure modes the simulator can play.

Select with ``--fault MODE[,MODE...]`` or ``SIM_FAULT=MODE[,MODE...]`` (the CLI wins). ``K`` =
``--fault-after`` / ``SIM_FAULT_AFTER`` (tokens, default 8), ``N`` = ``--fault-request`` /
``SIM_FAULT_REQUEST``, ``T`` = ``--teardown-s`` / ``SIM_TEARDOWN_S`` (seconds, default 3).

Which request a request-bound fault hits:

* default (no N): the first *probe request*, i.e. the first streamed completion that asks for
  more than 8 tokens. A readiness request (at most 8 tokens) and a non-streamed smoke check do
  not count, so the fault fires during a probe's warm-up or first recorded run;
* ``N`` given: the N-th completion request of any kind, readiness request included.

Modes:

* ``crash-start``: halfway through loading, a CUDA out-of-memory traceback; the workers are
  stopped and the process exits 1 without ever binding the port.
* ``hang-start``: loads forever: never binds, never answers (SIGTERM still ends it).
* ``crash-mid-stream``: the fault's request sends K tokens, then the process dies (exit 1,
  workers stopped first): the client sees a truncated chunked body / reset connection.
* ``hang-mid-stream``: the fault's request sends K tokens, then the engine hangs like an NCCL
  deadlock: the connection stays open, every later completion hangs too, ``/health`` answers 200.
* ``healthy-then-500``: ``/health`` 200; from the fault's request on, every completion answers
  HTTP 500 ``{"error": "EngineCore encountered an issue"}`` (vLLM EngineDeadError).
* ``orphan-workers``: workers ignore SIGTERM and the server exits on SIGTERM without waiting
  for them: they outlive it (like vLLM's EngineCore) until SIGKILL of the process group.
* ``stuck-workers``: workers ignore SIGTERM, as ranks blocked in a CUDA/NCCL call; the server
  waits for them (5 s, then SIGKILL), so a launcher with a shorter grace SIGKILLs the group.
  Their buffered NCCL output (``--stdout-buffering block``) is lost either way.
* ``slow-teardown``: on SIGTERM the server closes its port, then takes T seconds to exit.
* ``wrong-output``: every answer is filler text: no "Paris", no counting.

NCCL settings trigger failures too, where a real NCCL would (see costmodel and ncclenv).
"""

from __future__ import annotations

import dataclasses

FAULT_MODES = {
    "crash-start": "exit 1 during load after a CUDA out-of-memory error",
    "hang-start": "never bind the port, never answer",
    "crash-mid-stream": "process exits after K tokens of the fault's request",
    "hang-mid-stream": "stream stalls after K tokens of the fault's request",
    "healthy-then-500": "/health 200, completions HTTP 500 from the fault's request on",
    "orphan-workers": "workers ignore SIGTERM; server exits without waiting for them",
    "stuck-workers": "workers ignore SIGTERM; the teardown must SIGKILL them",
    "slow-teardown": "on SIGTERM take T seconds to exit",
    "wrong-output": "answers without Paris / without counting",
}

DEFAULT_AFTER_TOKENS = 8
#: A request asking for at most this many tokens is a readiness request (nccl-tune's own
#: readiness proof asks for 8), not counted by the default rule.
READINESS_MAX_TOKENS = 8
DEFAULT_TEARDOWN_S = 3.0


class FaultError(ValueError):
    """An unknown fault mode or a bad fault parameter; the message lists what is accepted."""


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """Active modes and parameters: ``after_tokens`` K, ``on_request`` N (None = the first probe
    request), ``teardown_s`` seconds."""

    modes: frozenset = frozenset()
    after_tokens: int = DEFAULT_AFTER_TOKENS
    on_request: int | None = None
    teardown_s: float = DEFAULT_TEARDOWN_S

    def has(self, mode: str) -> bool:
        """Whether ``mode`` is active."""
        return mode in self.modes

    def counts(self, stream: bool, max_tokens: int) -> bool:
        """Whether a completion request counts towards the fault's request number."""
        if self.on_request is not None:
            return True
        return stream and max_tokens > READINESS_MAX_TOKENS

    @property
    def target(self) -> int:
        """The counted request number the request-bound faults hit."""
        return self.on_request or 1


def _num(text, name, kind, minimum):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise FaultError(f"{name} must be a number, got {text!r}") from None
    if value < minimum:
        raise FaultError(f"{name} must be >= {minimum}, got {text!r}")
    return value


def parse_faults(cli_modes: str | None = None, *, after_tokens=None, on_request=None,
                 teardown_s=None, environ: dict | None = None) -> FaultPlan:
    """Combine CLI values with ``SIM_FAULT`` / ``SIM_FAULT_AFTER`` / ``SIM_FAULT_REQUEST`` /
    ``SIM_TEARDOWN_S`` from ``environ``; CLI values win. Raises FaultError on bad input."""
    env = environ or {}
    text = cli_modes if cli_modes is not None else env.get("SIM_FAULT", "")
    modes = {m.strip() for m in text.split(",") if m.strip() and m.strip() != "none"}
    unknown = sorted(modes - set(FAULT_MODES))
    if unknown:
        raise FaultError(f"unknown fault mode(s) {', '.join(unknown)}; accepted: "
                         f"{', '.join(FAULT_MODES)}")
    after = after_tokens if after_tokens is not None else env.get("SIM_FAULT_AFTER")
    req = on_request if on_request is not None else env.get("SIM_FAULT_REQUEST")
    tear = teardown_s if teardown_s is not None else env.get("SIM_TEARDOWN_S")
    return FaultPlan(
        modes=frozenset(modes),
        after_tokens=DEFAULT_AFTER_TOKENS if after in (None, "") else
        _num(after, "fault-after (tokens)", int, 0),
        on_request=None if req in (None, "") else _num(req, "fault-request", int, 1),
        teardown_s=DEFAULT_TEARDOWN_S if tear in (None, "") else
        _num(tear, "teardown-s", float, 0.0),
    )
