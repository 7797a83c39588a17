"""The soak: a sustained load on a running server, watched for a hang.

A set that is faster for a few minutes of one stream may hang after twenty minutes of load (two
builds of NCCL 2.28.9 on one box: a watchdog kill after about 20 min against a clean 60-min soak,
vllm #42354); a P2P path behind ACS or an IOMMU deadlocks only under traffic (NVIDIA/nccl #2079).
:func:`run_soak` drives each of the probe's concurrency levels in turn, an equal share of the
soak's seconds each: C worker threads, each with its own keep-alive client
(:func:`tuner.measure.client.make_client`), cycle streamed requests
(:func:`tuner.measure.stream.stream_once`, its stall clock and errors) until the level's share is
spent, as :func:`tuner.measure.bench.run_bench` runs one level.

It fails on the first of: a stream with no token within ``stall_timeout_s`` (a stall, or any
other failed request: a server that drops or refuses requests under load does not last either);
a line of the server's log that says a collective hung or the engine died (``watch``, polled
every :data:`WATCH_S` s: the caller reads the log, the patterns are the server kind's
``hang_lines``, PyTorch's ``Watchdog caught collective operation timeout`` among them). On a
failed request the health route is asked once: a server whose ``/health`` still answers 200
while its requests are stuck is the hang a readiness probe never sees, and the result says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from tuner.errors import Interrupted, ProbeStalled
from tuner.measure.client import api_url, make_client
from tuner.measure.runs import DEFAULT_PROMPT
from tuner.measure.stream import Endpoint, stream_once

__all__ = ["WATCH_S", "SoakLevel", "SoakResult", "run_soak"]

#: Seconds between two reads of the server's log during a soak.
WATCH_S = 0.5
#: Seconds the health route gets to answer while requests are stuck.
_HEALTH_TIMEOUT_S = 5.0
_LINE_CHARS = 300


@dataclass(frozen=True)
class SoakLevel:
    """One concurrency level of a soak: ``concurrency`` streams at a time, ``requests`` completed,
    ``tokens`` their completion tokens, ``seconds`` (s) from its start to its last request's end."""

    concurrency: int
    requests: int
    tokens: int
    seconds: float

    @property
    def output_tok_s(self) -> float | None:
        """Completion tokens per second of the level's load (tok/s), None when nothing ran."""
        return self.tokens / self.seconds if self.seconds > 0 and self.requests else None


@dataclass(frozen=True)
class SoakResult:
    """What a soak saw: ``seconds`` (s) of load made, its ``levels`` in order (those it reached),
    ``failure`` (one line, ``""`` when it passed: what failed, at which level, after how long,
    the health route's answer and the server's log line), ``concurrency`` (the levels it was
    asked to run), ``health`` (the status /health answered while a request
    was stuck; None: not asked or no answer), ``log_line`` (the server's hang or fatal line seen
    during the soak, ``""``: none)."""

    seconds: float
    levels: tuple[SoakLevel, ...]
    failure: str = ""
    concurrency: tuple[int, ...] = ()
    health: int | None = None
    log_line: str = ""

    @property
    def passed(self) -> bool:
        """True when no request failed and the server's log showed no hang line."""
        return not self.failure

    @property
    def requests(self) -> int:
        """Requests completed over every level."""
        return sum(lv.requests for lv in self.levels)

    @property
    def tokens(self) -> int:
        """Completion tokens of the requests completed."""
        return sum(lv.tokens for lv in self.levels)

    @property
    def output_tok_s(self) -> float | None:
        """Completion tokens per second of load over the whole soak (tok/s), None when nothing ran."""
        return self.tokens / self.seconds if self.seconds > 0 and self.requests else None


@dataclass
class _Run:
    """The soak's shared state: the first failure wins, every worker stops at it."""

    started: float
    stop: threading.Event
    lock: threading.Lock
    health_url: tuple[str, str, str | None]  # base URL, health route, API key
    failure: str = ""
    health: int | None = None
    log_line: str = ""

    def fail(self, text: str, *, health: int | None = None) -> None:
        with self.lock:
            if not self.failure:
                self.failure, self.health = text, health
        self.stop.set()

    def load_s(self) -> float:
        return time.perf_counter() - self.started

    def ask_health(self) -> tuple[int | None, str]:
        return _health(*self.health_url)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LINE_CHARS else text[: _LINE_CHARS - 3] + "..."


def _health(base_url: str, path: str, api_key: str | None) -> tuple[int | None, str]:
    """The health route's status and the words for it (``/health still 200``)."""
    try:
        with make_client(_HEALTH_TIMEOUT_S, api_key=api_key) as client:
            status = client.get(api_url(base_url, path), timeout=_HEALTH_TIMEOUT_S).status_code
    except httpx.HTTPError as exc:
        return None, f"{path} did not answer ({type(exc).__name__})"
    return status, f"{path} still {status}" if status == 200 else f"{path} answered {status}"


def run_soak(
    base_url: str,
    *,
    model: str,
    duration_s: float,
    concurrency: Sequence[int] = (),
    max_tokens: int = 256,
    prompt: str = DEFAULT_PROMPT,
    stall_timeout_s: float = 60.0,
    endpoint: Endpoint | str = "chat",
    api_key: str | None = None,
    health_path: str = "/health",
    watch: Callable[[], str | None] | None = None,
    on_level: Callable[[int], None] | None = None,
) -> SoakResult:
    """Load the server at ``base_url`` for ``duration_s`` (s) and watch it for a hang (module
    docstring); returns a :class:`SoakResult`, never raises for the server's failures.

    ``concurrency``: the levels, each run for ``duration_s / len(levels)`` s (empty: ``[1]``);
    ``max_tokens``, ``prompt``, ``endpoint``, ``api_key``: each request's, as the probe's;
    ``stall_timeout_s`` (s): the longest time without a token; ``health_path``: the server
    kind's health route; ``watch()``: the server's hang or fatal log line printed since the
    soak began, or None (called every :data:`WATCH_S` s and once at the end);
    ``on_level(C)``: called as level C starts. Raises ValueError for a bad level or duration,
    Interrupted as it comes.
    """
    levels = [int(c) for c in concurrency] or [1]
    if any(c < 1 for c in levels):
        raise ValueError(f"concurrency levels must be integers >= 1, got {list(concurrency)!r}")
    if not duration_s > 0:
        raise ValueError(f"duration_s must be above 0, got {duration_s!r}")
    run = _Run(time.perf_counter(), threading.Event(), threading.Lock(), (base_url, health_path, api_key))
    share = duration_s / len(levels)
    done: list[SoakLevel] = []
    for c in levels:
        if run.stop.is_set():
            break
        if on_level is not None:
            on_level(c)
        done.append(_level(run, c, share, base_url, model=model, max_tokens=max_tokens, prompt=prompt,
                           stall_timeout_s=stall_timeout_s, endpoint=endpoint, api_key=api_key, watch=watch))
    if watch is not None and not run.log_line:
        _check_log(run, watch, levels[-1])  # a line printed as the last requests ended or stalled
    failure = run.failure
    if run.log_line and run.log_line not in failure:
        failure += f"; server log: {run.log_line}"
    return SoakResult(run.load_s(), tuple(done), failure, tuple(levels), run.health, run.log_line)


def _check_log(run: _Run, watch: Callable[[], str | None], c: int) -> None:
    line = watch()
    if line and not run.log_line:
        run.log_line = _one_line(line)
        if not run.stop.is_set():
            load = run.load_s()
            status, said = run.ask_health()
            run.fail(f"the server logged a hang at concurrency {c} after {load:.0f} s of load; {said}; "
                     f"server log: {run.log_line}", health=status)


def _level(run: _Run, c: int, share: float, base_url: str, *, model: str, max_tokens: int, prompt: str,
           stall_timeout_s: float, endpoint: Endpoint | str, api_key: str | None,
           watch: Callable[[], str | None] | None) -> SoakLevel:
    """One level: ``c`` workers cycle requests for ``share`` s, or until the first failure."""
    clients = [make_client(stall_timeout_s, api_key=api_key) for _ in range(c)]
    counts = [0, 0]  # requests, tokens

    def worker(client: httpx.Client, until: float) -> None:
        while not run.stop.is_set() and time.perf_counter() < until:
            try:
                m = stream_once(client, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                                stall_timeout_s=stall_timeout_s, endpoint=endpoint, min_tokens=1)
            except Interrupted:
                raise
            except Exception as exc:  # any failed request fails the soak (ProbeError), even a bug's
                _failed(run, exc, c)
                return
            with run.lock:
                counts[0] += 1
                counts[1] += m.completion_tokens

    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=c, thread_name_prefix=f"soak-c{c}") as pool:
            futures = [pool.submit(worker, client, t0 + share) for client in clients]
            while not all(f.done() for f in futures):
                time.sleep(WATCH_S)  # polled, not waited: the log is read meanwhile
                if watch is not None and not run.log_line:
                    _check_log(run, watch, c)
            for f in futures:
                f.result()
    finally:
        for client in clients:
            client.close()
    return SoakLevel(c, counts[0], counts[1], time.perf_counter() - t0)


def _failed(run: _Run, exc: BaseException, c: int) -> None:
    """Record a failed request: what failed, the level, the load before it, and /health's answer."""
    if run.stop.is_set():
        return  # another worker's failure came first: this one is its consequence
    load = run.load_s()
    status, said = run.ask_health()
    if isinstance(exc, ProbeStalled):
        text = f"no token for {exc.timeout_s:g} s at concurrency {c} after {load:.0f} s of load; {said} ({exc})"
    else:
        text = f"{type(exc).__name__} at concurrency {c} after {load:.0f} s of load; {said} ({exc})"
    run.fail(_one_line(text), health=status)
