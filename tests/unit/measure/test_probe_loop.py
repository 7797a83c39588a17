"""run_probe as the one probe loop: stop rules, progress events, per-run callbacks, a caller's
client; the burst rule and the console table."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tuner.errors import ProbeHTTPError
from tuner.measure import ProbeResult, RunMetrics, find_api_key, format_result, make_client, run_probe
from tuner.measure.results import MIN_TOKEN_GAP_S, is_burst
from tuner.measure.runs import FixedRuns, StopWhen


def test_fixed_count_events_and_runs(ref):
    url = ref(rate=2000.0)
    events: list[tuple[str, str]] = []
    runs: list[int] = []
    r = run_probe(url, prompt="x", max_tokens=20, warmup=2, repeats=3, on_event=lambda p, d: events.append((p, d)),
                  on_run=lambda i, m: runs.append(i))
    assert events == [("warmup", "1/2"), ("warmup", "2/2"), ("probing", "run 1/3"), ("probing", "run 2/3"),
                      ("probing", "run 3/3")]
    assert runs == [0, 1, 2] and len(r.runs) == 3
    assert run_probe(url, prompt="x", max_tokens=20, warmup=0, repeats=FixedRuns(2)).runs.__len__() == 2


def test_stop_rule_stops_early_and_is_bounded(ref):
    url = ref(rate=2000.0)
    events: list[str] = []
    rule = StopWhen(lambda runs: len(runs) >= 2, max_runs=5, label="until two")
    r = run_probe(url, prompt="x", max_tokens=10, warmup=0, repeats=rule, on_event=lambda p, d: events.append(d))
    assert len(r.runs) == 2 and events == ["run 1 (until two, at most 5)", "run 2 (until two, at most 5)"]
    never = StopWhen(lambda runs: False, max_runs=4)
    assert len(run_probe(url, prompt="x", max_tokens=10, warmup=0, repeats=never).runs) == 4


class SpreadRule:
    """A rule object of the caller's own (the StopRule protocol): stop once the last three runs
    are within 5 % of each other, at most 6 runs."""

    max_runs = 6

    def done(self, runs: Sequence[RunMetrics]) -> bool:
        last = [r.output_tok_s for r in runs[-3:]]
        return len(last) == 3 and max(last) / min(last) < 1.05


def test_caller_rule_object(ref):
    url = ref(rate=1000.0)
    seen: list[Sequence[RunMetrics]] = []
    r = run_probe(url, prompt="x", max_tokens=50, warmup=0, repeats=SpreadRule(),
                  on_run=lambda i, m: seen.append(m))
    assert 3 <= len(r.runs) <= 6 and len(seen) == len(r.runs)


def test_bad_rules_are_refused():
    with pytest.raises(ValueError):
        FixedRuns(0)
    with pytest.raises(ValueError):
        run_probe("http://127.0.0.1:9", repeats=StopWhen(lambda runs: True, max_runs=0))


def test_caller_owned_client_is_reused_and_left_open():
    server, url = refserver.start_in_thread(rate=5000.0, api_key="sk-loop")
    try:
        with make_client(5.0, api_key="sk-loop") as c:
            run_probe(url, prompt="x", max_tokens=10, warmup=1, repeats=2, client=c)
            run_probe(url, prompt="x", max_tokens=10, warmup=0, repeats=1, client=c)
            assert not c.is_closed
        assert server.connections == 1  # one keep-alive connection for both probes
    finally:
        refserver.stop(server)


def test_runs_before_a_failure_reach_on_run(ref):
    url = ref(rate=2000.0, fail_after_requests=3)  # warm-up + 2 recorded, then HTTP 500
    got: list[int] = []
    with pytest.raises(ProbeHTTPError):
        run_probe(url, prompt="x", max_tokens=10, warmup=1, repeats=5, on_run=lambda i, m: got.append(i))
    assert got == [0, 1]


def test_find_api_key_order():
    assert find_api_key("k1", {"OPENAI_API_KEY": "k2"}, {"VLLM_API_KEY": "k3"}) == "k1"
    assert find_api_key(None, {"OPENAI_API_KEY": "k2"}, {"VLLM_API_KEY": "k3"}) == "k2"
    assert find_api_key(None, {"OPENAI_API_KEY": ""}, {"VLLM_API_KEY": "k3"}) == "k3"
    assert find_api_key(None, {}, {}) is None


# ---------------------------------------------------------------------------------------------
# the burst rule (is_burst is a pure function of arrival times and the token count)


def _paced(n: int, gap: float, t0: float = 1.0) -> list[float]:
    return [t0 + i * gap for i in range(n)]


def test_burst_rule():
    g = MIN_TOKEN_GAP_S
    assert is_burst([2.0] * 200, 200)  # every token at once (case 19)
    assert is_burst([2.0], 200)  # all tokens in one chunk
    assert is_burst(_paced(5, 0.01) + _paced(195, 2e-6, 3.0), 200)  # a few paced, then the rest at once
    assert not is_burst(_paced(200, 0.002), 200)  # 500 tok/s
    assert not is_burst(_paced(8, 0.001), 8)  # a short fast stream: 1,000 tok/s over 7 ms
    assert not is_burst(_paced(50, 4 * 2.1 * g), 200)  # 4 tokens per chunk, just slower than the bound
    assert is_burst(_paced(50, 4 * 0.5 * g), 200)  # 4 tokens per chunk, twice faster than the bound
    # a proxy that delivers batches of 20 chunks every 20 tokens' time: spread over the stream
    batches = [b * 20 * 0.01 + j * 2e-6 for b in range(10) for j in range(20)]
    assert not is_burst(batches, 200)
    assert not is_burst([1.0], 1) and not is_burst([], 0)


def test_result_timing_is_all_or_nothing():
    paced = RunMetrics(ttft_s=0.1, e2e_s=1.1, completion_tokens=101)
    burst = RunMetrics(ttft_s=1.09, e2e_s=1.1, completion_tokens=101, timing_measurable=False)
    r = ProbeResult([paced, paced])
    assert r.timing_measurable and r.decode_tok_s == pytest.approx(100.0) and r.decode_tok_s_runs == [100.0, 100.0]
    mixed = ProbeResult([paced, burst])
    assert not mixed.timing_measurable
    assert mixed.tpot_s is None and mixed.ttft_s is None and mixed.decode_tok_s is None
    assert mixed.decode_tok_s_runs == [] and mixed.output_tok_s == pytest.approx(101 / 1.1)
    assert burst.to_json()["ttft_s"] is None and burst.to_json()["tpot_s"] is None


def test_format_result_says_what_the_count_is():
    exact = RunMetrics(ttft_s=0.1, e2e_s=1.1, completion_tokens=101, tokens_source="max_tokens")
    guess = RunMetrics(ttft_s=0.1, e2e_s=1.1, completion_tokens=51, tokens_source="chunks")
    text = format_result(ProbeResult([exact]))
    assert "(=max_tokens)" in text and "lower bound" not in text and "decode tok/s" in text
    text = format_result(ProbeResult([exact, guess]))
    assert "(counted: a lower bound)" in text and "(a lower bound)" in text.splitlines()[3]


@pytest.mark.parametrize("bursty_runs, redo", [((2,), 3), ((1, 2, 3), 3), ((1, 2), 1)])
def test_a_run_whose_tokens_came_in_a_burst_is_made_again(ref, bursty_runs, redo):
    """The server bursts on the streams given (1-based, warm-up excluded; a redo is a stream of its
    own): each is kept aside in ``bursts`` and made again while ``redo_bursts`` lasts; after that a
    burst is recorded, and decode tok/s says it is not measurable."""
    url = ref(rate=500.0)
    server = ref.server(url)
    streams: list[str] = []

    def on_event(phase: str, detail: str) -> None:
        if phase == "probing":
            streams.append(detail)
            server.opts["burst_after"] = 0 if len(streams) in bursty_runs else None

    res = run_probe(url, model="ref-model", prompt="x", max_tokens=40, warmup=1, repeats=3, on_event=on_event,
                    redo_bursts=redo)
    # a loaded machine may burst a paced stream too: the rule holds whatever the arrival times said
    assert not any(m.timing_measurable for m in res.bursts) and len(res.runs) == 3
    assert len(streams) == 3 + len(res.bursts) and min(len(bursty_runs), redo) <= len(res.bursts) <= redo
    if len(res.bursts) < redo:
        assert res.decode_measurable
    if len(bursty_runs) > redo:
        assert not res.decode_measurable and "not measurable" in res.burst_note()
    assert (res.decode_tok_s is not None) == res.decode_measurable and "made again" in res.burst_note()


def test_without_redo_a_burst_is_recorded(ref):
    url = ref(rate=2000.0, burst_after=0)
    res = run_probe(url, model="ref-model", prompt="x", max_tokens=40, warmup=0, repeats=2)
    assert not res.bursts and len(res.runs) == 2 and res.decode_tok_s is None
    assert res.output_tok_s is not None and "2 of 2 recorded runs" in res.burst_note()
