"""tuner.measure.bench against servers that need things (an API key, the completions endpoint) and
streams that stall behind keep-alives; the same client and error mapping as the probe."""

from __future__ import annotations

import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tuner.errors import ProbeHTTPError
from tuner.measure.bench import format_table, run_bench

KEY = "sk-bench-1234"


@pytest.fixture
def ref():
    servers = []

    def start(**opts):
        server, url = refserver.start_in_thread(**opts)
        servers.append(server)
        return url

    yield start
    for s in servers:
        refserver.stop(s)


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


@pytest.mark.alone
def test_stall_behind_keepalives_is_recorded(ref):
    url = ref(rate=1000.0, stall_after=3, keepalive="empty-delta", keepalive_interval=0.05)
    (lv,) = run_bench(url, concurrency=[2], requests=1, max_tokens=20, warmup=0, stall_timeout_s=0.3)
    assert lv.ok == 0 and len(lv.errors) == 2 and all(e.startswith("ProbeStalled") for e in lv.errors)
    assert lv.wall_s < 2.0
    assert "C=2: 2x ProbeStalled" in format_table([lv])


@pytest.mark.alone
def test_bursty_delivery_keeps_aggregate_drops_ttft(ref):
    url = ref(rate=500.0, burst_after=0)
    (lv,) = run_bench(url, concurrency=[2], requests=1, max_tokens=100, warmup=0)
    assert lv.ok == 2 and lv.completion_tokens == 200
    assert lv.ttft_avg_s is None  # not measurable in a burst
    assert lv.aggregate_tok_s == pytest.approx(2 * refserver.truth_output_tok_s(100, 500.0), rel=0.1)


def test_guessed_counts_are_said_under_the_table(ref):
    url = ref(rate=2000.0, usage=False, no_finish=True, chunk_tokens=2)
    (lv,) = run_bench(url, concurrency=[1], requests=1, max_tokens=20, warmup=0)
    assert lv.tokens_counted and lv.completion_tokens == 10
    assert "lower bound" in format_table([lv])
    url = ref(rate=2000.0, usage=False, chunk_tokens=2)  # a "length" finish: exactly max_tokens
    (lv,) = run_bench(url, concurrency=[1], requests=1, max_tokens=20, warmup=0)
    assert not lv.tokens_counted and lv.completion_tokens == 20 and "lower bound" not in format_table([lv])
