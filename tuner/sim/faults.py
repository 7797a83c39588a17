"""Failure modes the simulator can play (REFERENCE.md sections 2, 3 and 6).

Select with ``--fault MODE[,MODE...]`` or the environment ``SIM_FAULT=MODE[,MODE...]`` (the CLI
wins when both are given). ``K`` = ``--fault-after`` / ``SIM_FAULT_AFTER`` (tokens, default 8),
``N`` = ``--fault-request`` / ``SIM_FAULT_REQUEST`` (1-based completion request, default 1),
``T`` = ``--teardown-s`` / ``SIM_TEARDOWN_S`` (seconds, default 3).

* ``crash-start``: halfway through loading prints ``NCCL WARN Cuda failure 'out of memory'``
  and a Python traceback, stops its workers, exits 1 without ever binding the port.
* ``hang-start``: loads forever: never binds, never answers (SIGTERM still ends it).
* ``crash-mid-stream``: request N sends K tokens, then the whole process dies (exit 1, workers
  stopped first): the client sees a truncated chunked body / reset connection.
* ``hang-mid-stream``: request N sends K tokens, then the engine hangs like an NCCL deadlock:
  the connection stays open with no more data, every later completion hangs too, ``/health``
  still answers 200.
* ``healthy-then-500``: ``/health`` 200, every completion answers HTTP 500
  ``{"error": "EngineCore encountered an issue"}`` (vLLM EngineDeadError).
* ``orphan-workers``: workers ignore SIGTERM and the server exits on SIGTERM without waiting
  for them: they outlive it (like vLLM's EngineCore) until SIGKILL of the process group.
* ``slow-teardown``: on SIGTERM the server closes its port, then takes T seconds to exit.
* ``wrong-output``: answers with filler text: no "Paris", no counting.

NCCL values trigger failures too, as a real NCCL would (see costmodel.check_init and
ncclenv.read_env): an unknown NCCL_ALGO / NCCL_PROTO token, LL128 forced on PCIe, no
algorithm/protocol left for AllReduce, NCCL_BUFFSIZE <= 0 (other than -2): WARN + exit 1 at start.
"""

from __future__ import annotations

import dataclasses

FAULT_MODES = {
    "crash-start": "exit 1 during load after a CUDA out-of-memory WARN",
    "hang-start": "never bind the port, never answer",
    "crash-mid-stream": "process exits after K tokens of request N",
    "hang-mid-stream": "stream stalls after K tokens of request N; connection stays open",
    "healthy-then-500": "/health 200, every completion HTTP 500",
    "orphan-workers": "workers ignore SIGTERM; server exits without waiting for them",
    "slow-teardown": "on SIGTERM take T seconds to exit",
    "wrong-output": "answers without Paris / without counting",
}

DEFAULT_AFTER_TOKENS = 8
DEFAULT_ON_REQUEST = 1
DEFAULT_TEARDOWN_S = 3.0


class FaultError(ValueError):
    """An unknown fault mode or a bad fault parameter; the message lists what is accepted."""


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """Active fault modes and their parameters (``after_tokens`` K tokens, ``on_request`` N,
    ``teardown_s`` seconds)."""

    modes: frozenset = frozenset()
    after_tokens: int = DEFAULT_AFTER_TOKENS
    on_request: int = DEFAULT_ON_REQUEST
    teardown_s: float = DEFAULT_TEARDOWN_S

    def has(self, mode: str) -> bool:
        """Whether ``mode`` is active."""
        return mode in self.modes


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
        on_request=DEFAULT_ON_REQUEST if req in (None, "") else
        _num(req, "fault-request", int, 1),
        teardown_s=DEFAULT_TEARDOWN_S if tear in (None, "") else
        _num(tear, "teardown-s", float, 0.0),
    )
