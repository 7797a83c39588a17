"""Concurrency benchmark: the table inference-server operators print (output tok/s by concurrency).

For each concurrency level C the bench runs C worker threads; each worker owns one keep-alive
``httpx.Client`` and issues ``requests`` streamed requests one after another with
``tuner.measure.stream.stream_once``.  So a level sends **C x requests requests in total, with C in flight at
a time** (the table prints "ok/total" with total = C x requests).

Per level (units: s, tok/s):

* ``wall_s``: from the moment the workers are started (clients already built) until the last
  request of the level has finished (or failed).
* ``aggregate_tok_s`` = sum of completion tokens of the ok requests / ``wall_s``.
* ``latency_avg_s`` / ``latency_p50_s`` / ``latency_p99_s``: E2E latency of the ok requests
  (request sent -> last token chunk; ``tuner.measure.results``' definitions), percentiles linearly
  interpolated; None when no request succeeded.
* ``ttft_avg_s``: mean TTFT of the ok requests whose timing is measurable (not a burst,
  ``tuner.measure.results.is_burst``); None when there is none.
* ``tokens_counted``: True when any ok request's token count was a guess (no usage chunk and no
  ``length`` finish: chunks counted, a lower bound); the table says so under it.
* ``errors``: one short string per failed request (``"ProbeStalled: ..."``); a failed request
  does not stop its worker.

Completion tokens are ``usage.completion_tokens`` (``ignore_eos: true``, so every request makes
max_tokens tokens on vLLM/SGLang); see ``tuner.measure.tally`` and ``tuner.measure.stream`` for the
definitions and errors. Requests go through ``tuner.measure.stream.stream_once`` on clients from
``tuner.measure.client.make_client`` (the same API key header, stall clock and httpx-to-ProbeError
mapping as the probe).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from tuner.errors import Interrupted, ProbeError
from tuner.measure.client import discover_model, make_client
from tuner.measure.runs import DEFAULT_PROMPT
from tuner.measure.stream import Endpoint, stream_once
from tuner.record import LevelResult

__all__ = ["format_table", "levels_to_json", "run_bench"]

_ERR_CHARS = 160
_FIGURE = re.compile(r"\d+(?:\.\d+)?")  # the figures in an error message: durations, counts, statuses


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    text = " ".join(text.split())
    return text if len(text) <= _ERR_CHARS else text[: _ERR_CHARS - 3] + "..."


def _run_level(
    base_url: str,
    *,
    model: str,
    concurrency: int,
    requests: int,
    max_tokens: int,
    prompt: str,
    stall_timeout_s: float,
    endpoint: Endpoint | str,
    api_key: str | None,
) -> LevelResult:
    clients = [make_client(stall_timeout_s, api_key=api_key) for _ in range(concurrency)]
    lock = threading.Lock()
    e2e: list[float] = []
    ttft: list[float] = []
    errors: list[str] = []
    tokens = 0
    counted = False

    def worker(client: httpx.Client) -> None:
        nonlocal tokens, counted
        for _ in range(requests):
            try:
                m = stream_once(
                    client, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                    stall_timeout_s=stall_timeout_s, endpoint=endpoint,
                )
            except ProbeError as e:
                with lock:
                    errors.append(_short(e))
                continue
            except Interrupted:
                raise
            except Exception as e:  # a bench row must survive any one request, even a bug
                with lock:
                    errors.append(_short(e))
                continue
            with lock:
                e2e.append(m.e2e_s)
                if m.timing_measurable:
                    ttft.append(m.ttft_s)
                tokens += m.completion_tokens
                counted = counted or m.tokens_counted

    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"bench-c{concurrency}") as pool:
            t0 = time.perf_counter()
            futures = [pool.submit(worker, c) for c in clients]
            for f in futures:
                f.result()
            wall = time.perf_counter() - t0
    finally:
        for c in clients:
            c.close()

    lat = sorted(e2e)
    return LevelResult(
        concurrency=concurrency,
        ok=len(lat),
        total=concurrency * requests,
        errors=errors,
        wall_s=wall,
        aggregate_tok_s=tokens / wall if wall > 0 else 0.0,
        latency_avg_s=statistics.fmean(lat) if lat else None,
        latency_p50_s=float(np.percentile(lat, 50.0)) if lat else None,
        latency_p99_s=float(np.percentile(lat, 99.0)) if lat else None,
        completion_tokens=tokens,
        ttft_avg_s=statistics.fmean(ttft) if ttft else None,
        tokens_counted=counted,
    )


def run_bench(
    base_url: str,
    *,
    model: str | None = None,
    concurrency: Sequence[int] = (1, 2, 4, 8),
    requests: int = 4,
    max_tokens: int = 256,
    prompt: str = DEFAULT_PROMPT,
    stall_timeout_s: float = 60.0,
    warmup: int = 1,
    endpoint: Endpoint | str = "chat",
    on_level: Callable[[LevelResult], None] | None = None,
    api_key: str | None = None,
) -> list[LevelResult]:
    """Run the concurrency table; returns one LevelResult per entry of ``concurrency`` (in order).

    Each level: C workers x ``requests`` sequential requests each (C x requests in total, C in
    flight).  ``model=None``: ``discover_model(base_url)`` (raises ProbeError subclasses when the
    server is unreachable or lists no model).  ``warmup`` unrecorded single requests run first;
    a failing warm-up raises.  Request failures inside a level are recorded in
    ``LevelResult.errors``, never raised.  ``on_level(level)`` is called after each level.
    ``endpoint``: "chat" or "completions"; ``api_key``: sent as ``Authorization: Bearer``.
    """
    if requests < 1:
        raise ValueError("requests must be >= 1")
    levels = [int(c) for c in concurrency]
    if not levels or any(c < 1 for c in levels):
        raise ValueError(f"concurrency levels must be integers >= 1, got {list(concurrency)!r}")
    with make_client(stall_timeout_s, api_key=api_key) as client:
        if model is None:
            model = discover_model(base_url, client=client, timeout_s=min(stall_timeout_s, 30.0))
        for _ in range(max(0, warmup)):
            stream_once(client, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                        stall_timeout_s=stall_timeout_s, endpoint=endpoint)
    out: list[LevelResult] = []
    for c in levels:
        res = _run_level(
            base_url, model=model, concurrency=c, requests=requests, max_tokens=max_tokens,
            prompt=prompt, stall_timeout_s=stall_timeout_s, endpoint=endpoint, api_key=api_key,
        )
        out.append(res)
        if on_level is not None:
            on_level(res)
    return out


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def error_kinds(errors: Sequence[str]) -> list[tuple[int, str]]:
    """``errors`` grouped by kind, in order of first occurrence: ``[(count, message), ...]``.

    Messages that differ only in their figures (each request's measured silence before a stall,
    the keep-alive lines it saw) are one kind; a figure that differs within a kind is shown as
    its range, ``0.3-0.4``, so the line says what happened without a line per duration.
    """
    groups: dict[str, list[str]] = {}
    for e in errors:
        groups.setdefault(_FIGURE.sub("#", e), []).append(e)
    kinds = []
    for members in groups.values():
        ranges = []
        for column in zip(*(_FIGURE.findall(m) for m in members), strict=True):
            lo, hi = min(column, key=float), max(column, key=float)
            ranges.append(lo if float(lo) == float(hi) else f"{lo}-{hi}")
        text = _FIGURE.split(members[0])  # the words around the figures
        kinds.append((len(members), text[0] + "".join(f + t for f, t in zip(ranges, text[1:], strict=True))))
    return kinds


def format_table(levels: Sequence[LevelResult]) -> str:
    """Fixed-width text table: C, ok/total, errors, wall s, agg tok/s, lat avg, p50, p99 (s).

    The errors follow the table, one line per kind (:func:`error_kinds`) with its count and
    level, then a note when token counts were guessed (aggregate tok/s is then a lower bound).
    """
    header = ("C", "ok/total", "errors", "wall s", "agg tok/s", "lat avg s", "p50 s", "p99 s")
    rows = [
        (
            str(lv.concurrency),
            f"{lv.ok}/{lv.total}",
            str(len(lv.errors)),
            f"{lv.wall_s:.2f}",
            f"{lv.aggregate_tok_s:.1f}",
            _fmt(lv.latency_avg_s, ".3f"),
            _fmt(lv.latency_p50_s, ".3f"),
            _fmt(lv.latency_p99_s, ".3f"),
        )
        for lv in levels
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    for lv in levels:
        for n, e in error_kinds(lv.errors):
            lines.append(f"C={lv.concurrency}: {n}x {e}")
    guessed = [str(lv.concurrency) for lv in levels if lv.tokens_counted]
    if guessed:
        lines.append(f"note: at C={','.join(guessed)} the server sent no usage chunk and no finish_reason 'length': "
                     "tokens were counted from chunks, so agg tok/s is a lower bound")
    return "\n".join(lines)


def levels_to_json(levels: Sequence[LevelResult]) -> list[dict[str, Any]]:
    """``[LevelResult.to_json(), ...]``: dicts with every LevelResult field (s, tok/s)."""
    return [lv.to_json() for lv in levels]
