"""tuner.measure.bench against the independent reference server (tests/refserver.py).

Each level is checked against the server's own timeline (tests/unit/measure/oracle.py: when it
read each request and wrote each token; brackets that hold however busy the machine is) and
against its pace, which no level can beat: every stream is paced independently at RATE tok/s,
a request of N tokens ends at least ttft + (N - 1) / RATE after it was sent, and each of the C
workers sends REQUESTS requests back to back, so aggregate tok/s < C x N / (ttft + (N - 1) / RATE).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.unit.measure.oracle import level_spans
from tuner.measure.bench import format_table, levels_to_json, run_bench
from tuner.record import LevelResult

RATE, N, TTFT, REQUESTS = 200.0, 50, 0.02, 2  # ~0.27 s per request, ~0.5 s per level


def _levels_and_spans(timeline: list[dict], levels: list[LevelResult], marks: list[float], warmup: int = 1):
    """Each level with its brackets: its requests are those the server read between the
    previous level's on_level call (the warm-up's [DONE] for the first) and its own."""
    streams = sorted(timeline, key=lambda s: s["read"])
    lo = streams[warmup - 1]["done"] if warmup else 0.0
    for lv, hi in zip(levels, marks, strict=True):
        yield lv, level_spans([s for s in streams[warmup:] if lo < s["read"] < hi], lo, hi)
        lo = hi


def test_aggregate_and_latencies_at_c_1_2_4_8(ref_process):
    """At C = 1, 2, 4, 8: C workers on C connections with REQUESTS requests each; aggregate
    tok/s, wall and E2E latencies are those of the server's timeline and never beat its pace."""
    url = ref_process("--rate", str(RATE), "--ttft", str(TTFT), "--model", "bench-model")
    seen, marks = [], []

    def on_level(lv: LevelResult) -> None:
        marks.append(time.perf_counter())
        seen.append(lv)

    levels = run_bench(url, concurrency=[1, 2, 4, 8], requests=REQUESTS, max_tokens=N, on_level=on_level)
    assert [lv.concurrency for lv in levels] == [1, 2, 4, 8]
    assert seen == levels
    pace = TTFT + (N - 1) / RATE
    for lv, spans in _levels_and_spans(ref_process.timeline(url), levels, marks):
        assert lv.total == lv.concurrency * REQUESTS
        assert lv.ok == lv.total and lv.errors == []
        assert lv.completion_tokens == lv.total * N
        assert spans["connections"] == [REQUESTS] * lv.concurrency
        for name in ("wall", "aggregate", "latency_avg", "latency_p50", "latency_p99"):
            got = getattr(lv, "aggregate_tok_s" if name == "aggregate" else f"{name}_s")
            assert got in spans[name], (lv.concurrency, name, got, spans[name])
        assert lv.aggregate_tok_s < lv.concurrency * N / pace
        assert lv.latency_p50_s > pace and lv.latency_avg_s <= lv.latency_p99_s * 1.0001
        assert TTFT < lv.ttft_avg_s <= lv.latency_avg_s


def test_shared_capacity_aggregate_is_fixed(ref):
    """400 tok/s shared by every stream: at C = 2 and 4 the aggregate is that of the server's
    timeline, and never above the capacity (its token slots are 1/rate apart)."""
    rate, n = 400.0, 100
    url = ref(rate=rate, shared_capacity=True)
    marks: list[float] = []
    levels = run_bench(url, concurrency=[2, 4], requests=1, max_tokens=n, warmup=1,
                       on_level=lambda lv: marks.append(time.perf_counter()))
    for lv, spans in _levels_and_spans(ref.timeline(url), levels, marks):
        tokens = lv.concurrency * n
        assert lv.ok == lv.total == lv.concurrency
        assert lv.aggregate_tok_s in spans["aggregate"], (lv.concurrency, lv.aggregate_tok_s, spans["aggregate"])
        assert lv.latency_avg_s in spans["latency_avg"]
        assert lv.aggregate_tok_s < tokens * rate / (tokens - 1)


def test_failures_are_recorded_not_raised(ref):
    url = ref(fail_status=500)
    levels = run_bench(url, concurrency=[1, 2], requests=2, max_tokens=10, warmup=0)
    for lv in levels:
        assert lv.ok == 0 and lv.total == 2 * lv.concurrency
        assert len(lv.errors) == lv.total and all(e.startswith("ProbeHTTPError: HTTP 500") for e in lv.errors)
        assert lv.aggregate_tok_s == 0.0 and lv.latency_p50_s is None
    table = format_table(levels)
    assert "0/2" in table and "0/4" in table
    assert "C=2: 4x ProbeHTTPError: HTTP 500" in table


def test_stalls_are_recorded_and_do_not_hang(ref):
    """The server holds both streams open until the clients leave: the level ends by itself,
    not before the stall timeout."""
    url = ref(rate=1000.0, stall_after=3)
    levels = run_bench(url, concurrency=[2], requests=1, max_tokens=20, warmup=0, stall_timeout_s=0.3)
    (lv,) = levels
    assert lv.ok == 0 and len(lv.errors) == 2 and all(e.startswith("ProbeStalled") for e in lv.errors)
    assert lv.wall_s >= 0.3
    assert [s["held"] is not None for s in ref.timeline(url)] == [True, True]


def test_format_table_and_json():
    levels = [
        LevelResult(1, 4, 4, [], 4.2, 81.4, 1.05, 1.04, 1.10, 342, 0.2),
        LevelResult(8, 31, 32, ["ProbeStalled: no chunk"], 12.0, 413.1, 4.1, 4.0, 5.5, 4957, 0.5),
    ]
    table = format_table(levels)
    header = table.splitlines()[0].split()
    assert header[:5] == ["C", "ok/total", "errors", "wall", "s"]
    for col in ("agg tok/s", "lat avg", "p50", "p99"):
        assert col in table.splitlines()[0]
    assert "31/32" in table and "413.1" in table and "C=8: 1x ProbeStalled: no chunk" in table
    data = levels_to_json(levels)
    json.dumps(data)
    assert data[1]["concurrency"] == 8 and data[1]["aggregate_tok_s"] == 413.1
    assert {"concurrency", "ok", "total", "errors", "wall_s", "aggregate_tok_s", "latency_avg_s", "latency_p50_s", "latency_p99_s"} <= set(data[0])


def test_errors_differing_only_in_their_figures_are_one_line():
    stalls = [f"ProbeStalled: no token for {t} s (stall timeout 0.3 s) after 3 token chunks; {k} keep-alive lines"
              for t, k in (("0.4", 5), ("0.3", 4), ("0.3", 4))]
    lv = LevelResult(3, 0, 4, [*stalls, "ProbeHTTPError: HTTP 503: busy"], 1.0)
    assert format_table([lv]).splitlines()[3:] == [
        "C=3: 3x ProbeStalled: no token for 0.3-0.4 s (stall timeout 0.3 s) after 3 token chunks; 4-5 keep-alive lines",
        "C=3: 1x ProbeHTTPError: HTTP 503: busy",
    ]


def test_rejects_bad_levels():
    with pytest.raises(ValueError):
        run_bench("http://127.0.0.1:9", concurrency=[0], requests=1)
    with pytest.raises(ValueError):
        run_bench("http://127.0.0.1:9", concurrency=[1], requests=0)
