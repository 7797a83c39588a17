"""When a starting server serves: its health endpoint, then the caller's real request.

Loading is waited for (no answer, a status other than 200, a body that says it is loading, a 503
from the first real request), and so is a warm-up: a first request that gets no response headers
while the server keeps logging (:data:`WARMUP_SILENCE_S`); anything else that fails is judged by
the launch (:func:`tuner.server.failure.request_failure`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Protocol

import httpx

from tuner.errors import ProbeError, ProbeFirstTokenLate, ProbeHTTPError, ProbeNoAnswer, TrialFailed
from tuner.inputs import ServerConfig, server_tls
from tuner.record import Status

__all__ = ["WARMUP_SILENCE_S", "says_loading", "wait_ready"]

#: Shortest silence (s) that makes a warming-up server hung while its first request has no
#: response headers: the stall timeout, but never less than this, because a warm-up step (one
#: CUDA-graph batch size, a JIT compile) may print nothing for tens of seconds. Chosen.
WARMUP_SILENCE_S = 20.0

_LOADING_WORDS = ("loading", "starting", "initializing", "initialising", "warming up", "warming_up",
                  "not ready", "not_ready")


def says_loading(body: str) -> bool:
    """True when a health or error body says the server is still loading (``{"status":
    "loading"}``, "model is loading", "starting", "warming up", "not ready" and the like)."""
    text = body
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            status = data.get("status")
            error = data.get("error")
            text = " ".join(str(v) for v in (status, error.get("message") if isinstance(error, dict) else error,
                                             data.get("message")) if v)
    except ValueError:
        pass
    text = text.lower()
    return any(word in text for word in _LOADING_WORDS)


class Starting(Protocol):
    """What the readiness loop needs of a launch (:class:`tuner.server.process.ServerProcess`)."""

    server: ServerConfig
    #: Set by :func:`wait_ready`: health's first 200 to the first request answered (s).
    warmup_s: float | None

    def since_launch(self) -> float:
        """Seconds since the process was spawned."""
        ...

    def check_starting(self) -> None:
        """Raise TrialFailed when the launch cannot become ready any more."""
        ...

    def request_failure(self, exc: Exception, context: str) -> TrialFailed:
        """The TrialFailed for a failed request."""
        ...

    def last_log_line(self) -> str | None:
        """The server's last log line, None when it printed none."""
        ...

    def quiet_s(self) -> float:
        """Seconds since the server last printed anything (since the launch when nothing)."""
        ...

    def check_listener(self, when: str) -> None:
        """Raise unless the launched tree is alive and the listener on the port is ours."""
        ...

    def warmup_line(self, since_s: float) -> str | None:
        """The last line printed after ``since_s`` (s since the launch) that the server's kind
        knows as a warm-up, or None."""
        ...


def wait_ready(launch: Starting, timeout_s: float, ready_check: Callable[[], None] | None = None,
               poll_s: float = 0.25) -> float:
    """Wait until the server serves; return launch-to-ready seconds.

    Polls ``server.health_path`` every ``poll_s`` s (falling back to ``/v1/models`` when it
    answers 404). Until the first success, "not ready yet" is: no connection, no answer, any
    status other than 200, and a 200 whose body says it is loading. Once health answers 200,
    ``ready_check()`` is called: the caller's real request (e.g. a one-token completion)
    raising :class:`tuner.errors.ProbeError` subclasses; a 503 from it, or an error body
    saying it is loading, is also "not ready yet", so a server whose health says 200 while
    its requests fail is judged by the real request.

    Raises, at once rather than after ``timeout_s`` (``launch.check_starting()``, see
    :meth:`tuner.server.failure.LaunchWatch.check`):

    * :class:`tuner.errors.ServerListensElsewhere` when the log announces another port and,
      within :data:`tuner.server.failure.ELSEWHERE_GRACE_S` s, neither announces ``server.port``
      nor listens on it;
    * ``TrialFailed('crashed')`` when the process exits or its log shows a line proving the
      engine died (:attr:`tuner.server.logtail.CauseKind.dead`; vLLM answers 503 on /health then),
      with the log's root cause; :class:`tuner.errors.MachineFault` when that cause is an
      address already in use;
    * :class:`tuner.errors.ForeignListener` (a :class:`tuner.errors.MachineNotClean`) when
      health answers 200 but the listener on the port is not the launched tree's
      (``launch.check_listener``, :class:`tuner.server.ownership.ListenerCheck`); checked again
      after the first request;
    * from ``ready_check``: ``TrialFailed('hung')`` on :class:`tuner.errors.ProbeStalled`,
      ``'crashed'`` when the server exited meanwhile, ``'unhealthy'`` for any other failure
      (``launch.request_failure``: a fatal log line becomes the cause).

    A first request with no response headers (:class:`tuner.errors.ProbeNoAnswer`) is a warm-up
    (SGLang answers /health while its warm-up gate holds every POST, sgl-project/sglang
    #33719): asked again about once a second while the server printed something within the
    last ``max(stall timeout, WARMUP_SILENCE_S)`` s, for at most ``server.warmup_timeout_s`` s
    since health's first 200; silent that long, or past that bound, it is ``hung``.
    ``launch.warmup_s`` is set to health's first 200 to ready (s).

    A first request that gets its headers at once and no token within the stall timeout
    (:class:`tuner.errors.ProbeFirstTokenLate`) while the server has logged, since health's
    first 200, a line its kind knows as a warm-up (``launch.warmup_line``: a kernel compile, a
    CUDA-graph capture; sgl-project/sglang #5031, NVIDIA/TensorRT-LLM #9276) is a warm-up too:
    asked again until ``timeout_s`` (``server.ready_timeout_s``); without such a line it is
    ``hung`` (the stall rule). This holds before a launch's first token only: later stalls are
    judged by the caller.

    A :class:`tuner.errors.TrialFailed` raised by ``ready_check`` itself (a smoke check)
    passes through unchanged. ``TrialFailed('timeout')`` when not ready within ``timeout_s``
    s of the launch, naming the last answer and log line. After readiness a 503 is no longer
    "loading": the caller treats it as unhealthy (``launch.request_failure``).
    """
    server = launch.server
    path = server.health_path
    last = "no answer yet"
    healthy_at: float | None = None  # since launch, health's first 200
    with httpx.Client(timeout=httpx.Timeout(3.0, connect=1.0), verify=server_tls()) as client:
        while True:
            launch.check_starting()
            try:
                r = client.get(server.base_url + path)
                if r.status_code == 404 and path != "/v1/models":
                    path = "/v1/models"
                    continue
                if r.status_code == 200 and not says_loading(r.text[:2000]):
                    if healthy_at is None:
                        healthy_at = launch.since_launch()
                    launch.check_listener("at readiness")  # a stranger's 200 is not our readiness
                    if ready_check is None:
                        return _ready(launch, healthy_at)
                    waiting = _first_request(launch, ready_check, launch.since_launch() - healthy_at, healthy_at,
                                             timeout_s)
                    if waiting is None:
                        launch.check_listener("at readiness")
                        return _ready(launch, healthy_at)
                    last = waiting
                    time.sleep(max(0.0, 1.0 - poll_s))  # real requests at most about once a second
                else:
                    last = f"{path} answered HTTP {r.status_code}: {r.text[:120]!r}"
            except httpx.HTTPError as exc:
                last = f"{path}: {type(exc).__name__}"
            if launch.since_launch() > timeout_s:
                launch.check_starting()
                tail = launch.last_log_line()
                tail = "none" if tail is None else tail
                raise TrialFailed(Status.TIMEOUT, f"not ready after {timeout_s:.0f} s ({last}; "
                                                  f"last log line: {tail[:160]})")
            time.sleep(poll_s)


def _ready(launch: Starting, healthy_at: float) -> float:
    ready = launch.since_launch()
    launch.warmup_s = ready - healthy_at
    return ready


def _first_request(launch: Starting, ready_check: Callable[[], None], warm_s: float, healthy_at: float,
                   timeout_s: float) -> str | None:
    """None when the caller's request succeeded, a description when the server says it is
    still loading or warms up (``warm_s``: s since health's first 200, ``healthy_at``: s from
    the launch to it); raises TrialFailed for any other failure."""
    try:
        ready_check()
        return None
    except ProbeFirstTokenLate as exc:
        line = launch.warmup_line(healthy_at)
        if line is None:  # no warm-up in the log: the stall rule holds
            raise launch.request_failure(exc, "on the first request") from None
        return (f"the first request got its headers but no token for {exc.timeout_s:g} s while the server "
                f"logs a warm-up ({line.strip()[:120]!r}): waiting, at most server.ready_timeout_s = {timeout_s:g}")
    except ProbeNoAnswer as exc:
        quiet, bound = launch.quiet_s(), launch.server.warmup_timeout_s
        silence = max(exc.timeout_s, WARMUP_SILENCE_S)
        if quiet > silence:
            said = f"{exc}, and the server printed nothing for {quiet:.0f} s (hung, not warming up)"
        elif warm_s > bound:
            said = (f"{exc}: still no answer {warm_s:.0f} s after health answered 200 although the server "
                    f"kept logging (server.warmup_timeout_s = {bound:g})")
        else:
            return (f"health answered 200 but the first request got no response headers for {exc.timeout_s:g} s "
                    f"while the server logs: waiting (warm-up?) {warm_s:.0f} s so far")
        raise launch.request_failure(ProbeNoAnswer(said, exc.timeout_s), "on the first request") from None
    except ProbeHTTPError as exc:
        if exc.status == 503 or says_loading(exc.body_excerpt):
            return f"health answered 200 but the first request got HTTP {exc.status}: {exc.body_excerpt[:120]!r}"
        raise launch.request_failure(exc, "on the first request") from None
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 503 or says_loading(exc.response.text[:2000]):
            return f"health answered 200 but the first request got HTTP {exc.response.status_code}"
        raise launch.request_failure(exc, "on the first request") from None
    except (ProbeError, httpx.HTTPError) as exc:
        raise launch.request_failure(exc, "on the first request") from None
