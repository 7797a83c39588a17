"""tuner.measure.bench against servers that need things (an API key, the completions endpoint) and
streams that stall behind keep-alives; the same client and error mapping as the probe."""

from __future__ import annotations

import re
import time

import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tests.unit.measure.oracle import level_spans
from tuner.errors import ProbeHTTPError
from tuner.measure.bench import format_table, run_bench

KEY = "sk-bench-1234"


def test_api_key(ref):
    url = ref(rate=1000.0, api_key=KEY)
    with pytest.raises(ProbeHTTPError) as ei:  # model discovery needs the key too
        run_bench(url, concurrency=[1], requests=1, max_tokens=10)
    assert ei.value.status == 401
    levels = run_bench(url, concurrency=[1, 2], requests=2, max_tokens=10, api_key=KEY)
    assert [(lv.ok, lv.total) for lv in levels] == [(2, 2), (4, 4)]
    levels = run_bench(url, model="ref-model", concurrency=[2], requests=1, max_tokens=10, warmup=0,
                       api_key="sk-wrong-0000")
    assert levels[0].ok == 0 and all("HTTP 401" in e and "sk-wrong" not in e for e in levels[0].errors)


def test_completions_endpoint(ref):
    url = ref(rate=1000.0, no_chat_template=True)
    with pytest.raises(ProbeHTTPError) as ei:
        run_bench(url, concurrency=[1], requests=1, max_tokens=10)
    assert "--endpoint completions" in str(ei.value)
    levels = run_bench(url, concurrency=[1, 2], requests=1, max_tokens=10, endpoint="completions")
    assert all(lv.ok == lv.total for lv in levels) and levels[1].completion_tokens == 20


def test_stall_behind_keepalives_is_recorded(ref):
    """Two streams stalled behind keep-alives: the level ends by itself (the server holds them
    until the clients leave), not before the stall timeout, and the table says it once: the two
    stalls are one kind of error, however long each one's silence measured."""
    url = ref(rate=1000.0, stall_after=3, keepalive="empty-delta", keepalive_interval=0.05)
    (lv,) = run_bench(url, concurrency=[2], requests=1, max_tokens=20, warmup=0, stall_timeout_s=1.0)
    assert lv.ok == 0 and len(lv.errors) == 2 and all(e.startswith("ProbeStalled") for e in lv.errors)
    assert lv.wall_s >= 1.0
    lines = format_table([lv]).splitlines()[3:]
    kinds = {re.sub(r"\d+(?:\.\d+)?", "#", e) for e in lv.errors}  # the same but for the figures
    assert len(lines) == len(kinds) and sum(int(line.split()[1][:-1]) for line in lines) == 2
    assert all(line.startswith("C=2: ") and "x ProbeStalled: " in line and "after 3 token" in line for line in lines)


def test_bursty_delivery_keeps_aggregate_drops_ttft(ref):
    """Every token of each stream written in one piece when the last is due (100 chunks of 10
    tokens within a few ms, against the 50 ms the burst rule allows them): TTFT not measurable,
    the aggregate that of the server's timeline and never beating its pace."""
    rate, n = 5000.0, 1000
    url = ref(rate=rate, burst_after=0, chunk_tokens=10)
    marks: list[float] = []
    (lv,) = run_bench(url, concurrency=[2], requests=1, max_tokens=n, warmup=1,
                      on_level=lambda lv: marks.append(time.perf_counter()))
    assert lv.ok == 2 and lv.completion_tokens == 2 * n
    assert lv.ttft_avg_s is None  # not measurable in a burst
    streams = sorted(ref.timeline(url), key=lambda s: s["read"])
    spans = level_spans(streams[1:], streams[0]["done"], marks[0])
    assert lv.aggregate_tok_s in spans["aggregate"]
    assert lv.aggregate_tok_s < 2 * refserver.truth_output_tok_s(n, rate)


def test_guessed_counts_are_said_under_the_table(ref):
    url = ref(rate=2000.0, usage=False, no_finish=True, chunk_tokens=2)
    (lv,) = run_bench(url, concurrency=[1], requests=1, max_tokens=20, warmup=0)
    assert lv.tokens_counted and lv.completion_tokens == 10
    assert "lower bound" in format_table([lv])
    url = ref(rate=2000.0, usage=False, chunk_tokens=2)  # a "length" finish: exactly max_tokens
    (lv,) = run_bench(url, concurrency=[1], requests=1, max_tokens=20, warmup=0)
    assert not lv.tokens_counted and lv.completion_tokens == 20 and "lower bound" not in format_table([lv])
