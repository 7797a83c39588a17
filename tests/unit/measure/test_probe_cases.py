"""The real-server cases (tests/cases/README.md) at the probe level: each case's own server (or
the simulator for case 17) on 127.0.0.1, the outcome the README asks for. Rates are checked
against when the bytes arrived (tests/unit/measure/oracle.py) and against each server's own
sleeps, which a stream never beats: nothing here depends on how busy the machine is."""

from __future__ import annotations

import pytest

from tests.unit.measure.oracle import check_medians, check_stall
from tuner.errors import ProbeError, ProbeHTTPError, ProbeStalled
from tuner.measure import format_result, make_client, run_probe, smoke_check
from tuner.measure.client import discover_model

KEY = "sk-test-0000"


@pytest.mark.timeout(60)
def test_01_pings_do_not_hide_a_stall(case, tap):
    """3 tokens, then ': ping' every second: hung at the first line that comes after the stall
    timeout (the oracle), pings or not."""
    url = case("01-sse-ping-stall")
    with tap.client() as c, pytest.raises(ProbeStalled) as ei:
        run_probe(url, max_tokens=50, warmup=0, repeats=2, stall_timeout_s=2.0, client=c)
    (ex,) = tap.posts()
    check_stall(ex, 2.0, str(ei.value))
    assert ei.value.timeout_s == 2.0
    assert "after 3 token chunks" in str(ei.value) and "keep-alive" in str(ei.value)


def test_10_api_key_is_sent_and_never_shown(case):
    url = case("10-api-key-401", env={"VLLM_API_KEY": KEY})
    with pytest.raises(ProbeHTTPError) as ei:  # no key: 401, and the error says what to do
        run_probe(url, max_tokens=48, warmup=0, repeats=1, stall_timeout_s=10)
    assert ei.value.status == 401 and "OPENAI_API_KEY" in str(ei.value)
    wrong = "sk-wrong-1234"
    with pytest.raises(ProbeHTTPError) as ei:
        run_probe(url, max_tokens=48, warmup=0, repeats=1, stall_timeout_s=10, api_key=wrong)
    assert "refused" in str(ei.value) and wrong not in str(ei.value)
    assert discover_model(url, api_key=KEY) == "m"
    result = run_probe(url, max_tokens=48, warmup=0, repeats=3, stall_timeout_s=10, api_key=KEY)
    assert [r.completion_tokens for r in result.runs] == [48, 48, 48]
    assert result.output_tok_s < 48 / 0.47  # a 10 ms sleep after each token: never faster
    assert KEY not in repr(result) and KEY not in str(result.to_json())


def test_11_missing_chat_template_suggests_completions(case, tap):
    url = case("11-base-model-no-chat-template")
    with pytest.raises(ProbeHTTPError) as ei:
        run_probe(url, max_tokens=48, warmup=0, repeats=3, stall_timeout_s=10)
    msg = str(ei.value)
    assert ei.value.status == 400 and "chat template" in msg
    assert 'probe.endpoint = "completions"' in msg and "--endpoint completions" in msg
    with tap.client() as c:
        result = run_probe(url, max_tokens=48, warmup=0, repeats=3, stall_timeout_s=10, endpoint="completions",
                           client=c)
    assert [r.completion_tokens for r in result.runs] == [48, 48, 48]
    check_medians(result, tap.posts()[-3:])
    assert result.output_tok_s < 48 / 0.47  # a 10 ms sleep after each token: never faster


def test_13_usage_every_chunk_crlf_split_events(case, tap):
    """Usage zeros until the last chunk, 'data:' without a space, CRLF, events split in two
    writes: 100 tokens, timed when each event's second half arrived (the oracle)."""
    url = case("13-usage-every-chunk")
    with tap.client() as c:
        result = run_probe(url, max_tokens=100, warmup=0, repeats=2, stall_timeout_s=10, client=c)
    for r in result.runs:
        assert r.completion_tokens == 100 and r.tokens_source == "usage" and r.chunks == 50
    check_medians(result, tap.posts())
    # 2 tokens per 22 ms (20 ms + the 2 ms between the halves of each event): never above 100 / 1.08 s
    assert result.output_tok_s < 100 / (49 * 0.022 + 0.002)


def test_14_error_event_gives_the_servers_message(case):
    url = case("14-200-then-error-event")
    with pytest.raises(ProbeError) as ei:
        run_probe(url, max_tokens=50, warmup=0, repeats=1, stall_timeout_s=10)
    assert "upstream overloaded" in str(ei.value) and "after 5 token chunks" in str(ei.value)


def test_15_no_usage_two_tokens_per_chunk_length_is_max_tokens(case, tap):
    url = case("15-no-usage-chunk")
    with tap.client() as c:
        result = run_probe(url, max_tokens=100, warmup=0, repeats=3, stall_timeout_s=10, client=c)
    for r in result.runs:
        assert r.completion_tokens == 100 and r.chunks == 50
        assert r.tokens_source == "max_tokens" and not r.tokens_counted
    check_medians(result, tap.posts())
    assert result.output_tok_s < 100 / (49 * 0.02)  # 100 tokens in 50 chunks 20 ms apart: never faster
    assert not result.tokens_counted and "lower bound" not in format_result(result)


def test_15_otherwise_the_count_is_flagged_as_a_lower_bound(ref):
    """Without usage and without a 'length' finish the count is a guess: said on the console."""
    url = ref(rate=500.0, usage=False, no_finish=True, chunk_tokens=2)
    result = run_probe(url, max_tokens=100, warmup=0, repeats=1, stall_timeout_s=10)
    (r,) = result.runs
    assert r.tokens_counted and r.tokens_source == "chunks" and r.completion_tokens == 50
    text = format_result(result)
    assert "lower bound" in text and "counted" in text


def test_17_reasoning_smoke_check_gets_room_to_answer(sim):
    s = sim("--reasoning-tokens", "40", "--reasoning-field", "reasoning_content")
    s.wait_ready()
    url = s.url
    with make_client(10) as c:
        model = discover_model(url, client=c)
        check = smoke_check(c, url, model, "What is the capital of France?", "Paris", timeout_s=10)
        assert check.ok and not check.wrong and check.attempts == 2 and check.max_tokens == 1024
        assert "Paris" in check.answer and check.reasoning.startswith("Let me think")
        # a check budget with room (check.max_tokens): one attempt
        check = smoke_check(c, url, model, "What is the capital of France?", "Paris", max_tokens=64,
                            retry_max_tokens=64, timeout_s=10)
        assert check.ok and check.attempts == 1
    result = run_probe(url, max_tokens=96, warmup=0, repeats=2, stall_timeout_s=10)
    assert [r.completion_tokens for r in result.runs] == [96, 96]
    assert all(r.reasoning_deltas == 40 for r in result.runs)


def test_17_still_reasoning_after_the_retry_is_cut_off_not_wrong(sim):
    s = sim("--reasoning-tokens", "3000")
    s.wait_ready()
    url = s.url
    with make_client(10) as c:
        check = smoke_check(c, url, discover_model(url, client=c), timeout_s=10, retry_max_tokens=256)
    assert not check.ok and check.cut_off and not check.wrong
    assert check.attempts == 2 and check.finish_reason == "length" and check.answer == ""
    assert "cut off while reasoning" in check.describe("Paris") and "not a wrong answer" in check.describe("Paris")


def test_19_bursty_delivery_flags_timing_keeps_output_tok_s(case, tap):
    """Every token of a completion in one write at the end: each run flagged as a burst whenever
    the arrival times say so (the oracle: 200 chunks read within the 10 ms the rule allows), and
    then shown and summarised as not measurable; output tok/s that of the last token's arrival."""
    url = case("19-bursty-delivery")
    with tap.client() as c:
        result = run_probe(url, max_tokens=200, warmup=1, repeats=3, stall_timeout_s=10, client=c)
    for r in result.runs:
        assert r.completion_tokens == 200
        assert r.timing_measurable or (r.tpot_s is None and r.decode_tok_s is None and r.itl_median_s is None)
    check_medians(result, tap.posts()[-3:])
    assert result.output_tok_s < 200 / (0.02 + 200 / 500)  # nothing leaves before that: never faster
    text = format_result(result)
    rows = [line.split() for line in text.splitlines()[1:4]]  # run, tok/s, TTFT s, TPOT ms, decode tok/s, ...
    for r, row in zip(result.runs, rows, strict=True):
        assert r.timing_measurable or row[2:5] == ["-", "-", "-"]  # never TPOT 0.00 ms
    if not result.timing_measurable:
        assert result.tpot_s is None and result.ttft_s is None and result.decode_tok_s is None
        assert result.decode_tok_s_runs == []
        assert "burst" in text and "not measurable" in text
