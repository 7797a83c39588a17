"""The probe loop: warm-up streams, then recorded streams until a stop rule says enough."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from tuner.inputs import DEFAULT_MAX_TOKENS
from tuner.measure.client import discover_model, make_client
from tuner.measure.results import ProbeResult, RunMetrics
from tuner.measure.stream import Endpoint, stream_once

__all__ = ["DEFAULT_PROMPT", "MIN_MEASURED_TOKENS", "FixedRuns", "StopWhen", "run_probe"]

#: Fewest tokens an answer that ended early (before ``max_tokens``, ignore_eos ignored) must
#: carry to be measured: fewer leave too few gaps for a rate. Chosen.
MIN_MEASURED_TOKENS = 8

#: The prompt of every probe unless the experiment file sets one.
DEFAULT_PROMPT = "Write a long story about a lighthouse keeper and the sea."


class StopRule(Protocol):
    """Decides how many recorded runs a probe makes: after each recorded run the loop stops
    when ``done(runs)`` is true or ``max_runs`` runs are recorded (the bound that keeps a rule
    that never settles from running forever). ``describe()``, when present, says the rule in
    a few words for progress lines (e.g. "until the CI half-width <= 1.0 %")."""

    @property
    def max_runs(self) -> int: ...

    def done(self, runs: Sequence[RunMetrics]) -> bool: ...


@dataclass(frozen=True)
class FixedRuns:
    """Exactly ``n`` recorded runs (n >= 1)."""

    n: int

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"repeats must be >= 1, got {self.n}")

    @property
    def max_runs(self) -> int:
        """``n``."""
        return self.n

    def done(self, runs: Sequence[RunMetrics]) -> bool:
        """True once ``n`` runs are recorded."""
        return len(runs) >= self.n


@dataclass(frozen=True)
class StopWhen:
    """A caller's callable as a stop rule: stop when ``when(runs)`` is true, at most ``max_runs``
    runs; ``label`` describes it for progress lines."""

    when: Callable[[Sequence[RunMetrics]], bool]
    max_runs: int
    label: str = ""

    def done(self, runs: Sequence[RunMetrics]) -> bool:
        """``when(runs)``."""
        return bool(self.when(runs))

    def describe(self) -> str:
        """``label``."""
        return self.label


def _run_detail(rule: StopRule, i: int) -> str:
    if isinstance(rule, FixedRuns):
        return f"run {i}/{rule.n}"
    describe = getattr(rule, "describe", None)
    text = describe() if callable(describe) else ""
    return f"run {i} ({text + ', ' if text else ''}at most {rule.max_runs})"


def run_probe(
    base_url: str,
    *,
    model: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    warmup: int = 1,
    repeats: int | StopRule = 3,
    stall_timeout_s: float = 60.0,
    on_run: Callable[[int, RunMetrics], None] | None = None,
    on_event: Callable[[str, str], None] | None = None,
    endpoint: Endpoint | str = "chat",
    client: httpx.Client | None = None,
    api_key: str | None = None,
    min_tokens: int | None = MIN_MEASURED_TOKENS,
    redo_bursts: int = 0,
) -> ProbeResult:
    """The probe loop of ``nccl-tune probe`` and of the sweep: ``warmup`` unrecorded streams,
    then recorded streams until the stop rule says enough, all on one keep-alive client.

    ``repeats``: a count (``FixedRuns(repeats)``) or a :class:`StopRule`, asked after each
    recorded run. ``model=None``: ``discover_model(base_url)``. ``client``: a caller-owned
    client (not closed here; it carries its own API key); otherwise one is made with
    ``api_key`` and closed at the end. ``on_event(phase, detail)`` is called before each stream,
    phase "warmup" (detail "1/2") or "probing" (detail "run 1/3", or for a rule "run 4 (…, at
    most 15)"); ``on_run(i, metrics)`` after each recorded run, i = 0, 1, ...

    ``min_tokens``: an answer that ends before ``max_tokens`` with at least this many tokens
    is measured for what came (``RunMetrics.ended_early``; None: an error, ProbeIncomplete).

    ``redo_bursts``: a recorded run whose tokens arrived in a burst
    (:func:`tuner.measure.results.is_burst`: a starved host or server thread delivered them at
    once) is made again, at most this many times a probe, and kept aside in
    ``ProbeResult.bursts``, not given to ``on_run``. A metric read from per-token times (decode
    tok/s) needs every recorded run paced; output tok/s does not (0: no redo).

    The first failing stream raises (``stream_once``'s errors); the runs recorded before it
    were given to ``on_run``. Returns a ProbeResult of the recorded runs (medians).
    """
    rule: StopRule = FixedRuns(repeats) if isinstance(repeats, int) else repeats
    if rule.max_runs < 1:
        raise ValueError(f"a stop rule needs max_runs >= 1, got {rule.max_runs}")
    c = client or make_client(stall_timeout_s, api_key=api_key)
    try:
        if model is None:
            model = discover_model(base_url, client=c, timeout_s=min(stall_timeout_s, 30.0))

        def once() -> RunMetrics:
            return stream_once(c, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                               stall_timeout_s=stall_timeout_s, endpoint=endpoint, min_tokens=min_tokens)

        n_warm = max(0, warmup)
        for w in range(n_warm):
            if on_event is not None:
                on_event("warmup", f"{w + 1}/{n_warm}")
            once()
        result = ProbeResult()
        while len(result.runs) < rule.max_runs:
            if on_event is not None:
                on_event("probing", _run_detail(rule, len(result.runs) + 1))
            m = once()
            if not m.timing_measurable and len(result.bursts) < redo_bursts:
                result.bursts.append(m)
                continue
            result.runs.append(m)
            if on_run is not None:
                on_run(len(result.runs) - 1, m)
            if rule.done(result.runs):
                break
        return result
    finally:
        if client is None:
            c.close()
