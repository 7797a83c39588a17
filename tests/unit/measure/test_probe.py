"""tuner.measure (the probe) against the independent reference server (tests/refserver.py) and mock streams.

The timing figures are checked against when the bytes really arrived (tests/unit/measure/oracle.py:
a bracket that holds however busy the machine is) and against the server's pacing, which a
stream can never beat: the reference server's last token leaves at ttft + (N - 1) / rate after
it read the request, so output tok/s < N / (ttft + (N - 1) / rate) (tuner.measure.results'
definitions: completion_tokens / E2E, E2E including TTFT).
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tests.unit.measure.oracle import check_medians, check_run, check_stall
from tuner.errors import ProbeConnectError, ProbeDisconnected, ProbeError, ProbeHTTPError, ProbeStalled
from tuner.measure import ProbeResult, RunMetrics, make_client, run_probe, smoke_check
from tuner.measure.client import api_url, discover_model
from tuner.measure.stream import stream_once

TTFT = 0.05


# ---------------------------------------------------------------------------------------------
# accuracy


@pytest.mark.parametrize("rate, process", [(80.0, False), (1000.0, False), (5000.0, True)],
                         ids=["80tok/s", "1000tok/s", "5000tok/s-process"])
@pytest.mark.parametrize("reasoning", [False, True], ids=["content", "reasoning"])
def test_output_tok_s_accuracy(ref, ref_process, tap, rate, process, reasoning):
    """Output tok/s, TTFT, TPOT and E2E are those of the arrival times (the oracle's brackets:
    TTFT to the first token chunk, not the role chunk; E2E to the last, not [DONE]), and never
    beat the server's pace; ~0.25 s per run (the brackets do not depend on the length)."""
    n = int(rate) // 4  # about a quarter of a second per run
    k = n // 4 if reasoning else 0
    if process:
        url = ref_process("--rate", str(rate), "--ttft", str(TTFT), "--reasoning-tokens", str(k))
    else:
        url = ref(rate=rate, ttft=TTFT, reasoning_tokens=k)
    seen = []
    with tap.client() as c:
        result = run_probe(url, prompt="hello", max_tokens=n, warmup=1, repeats=1, client=c,
                           on_run=lambda i, m: seen.append(i))
    assert seen == [0]
    run = result.runs[0]
    assert run.completion_tokens == n and not run.tokens_counted
    assert run.reasoning_deltas == k and run.content_deltas == n - k
    _warmup, recorded = tap.posts()
    check_medians(result, [recorded])
    assert result.output_tok_s < refserver.truth_output_tok_s(n, rate, TTFT)
    assert result.e2e_s > TTFT + (n - 1) / rate
    assert run.ttft_s > TTFT


# ---------------------------------------------------------------------------------------------
# definitions


def test_usage_absent_counts_chunks_and_flags(ref):
    # issue 11: with ignore_eos and finish_reason "length" the count is max_tokens, exactly
    url = ref(rate=2000.0, usage=False)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    assert m.tokens_counted is False and m.tokens_source == "max_tokens"
    assert m.completion_tokens == 40
    # no usage and no finish_reason: the chunks are counted, and that is flagged
    url = ref(rate=2000.0, usage=False, no_finish=True)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    assert m.tokens_counted is True and m.tokens_source == "chunks"
    assert m.completion_tokens == 40
    result = ProbeResult(runs=[m])
    assert result.tokens_counted


def test_usage_absent_with_batched_chunks_is_an_undercount_but_flagged(ref):
    url = ref(rate=2000.0, usage=False, chunk_tokens=4, no_finish=True)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    assert m.tokens_counted and m.completion_tokens == 10 and m.chunks == 10
    # issue 11: with a "length" finish, several tokens per chunk never shrink the count
    url = ref(rate=2000.0, usage=False, chunk_tokens=4)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    assert not m.tokens_counted and m.completion_tokens == 40 and m.chunks == 10


def test_usage_present_with_batched_chunks_counts_tokens(ref):
    url = ref(rate=2000.0, chunk_tokens=4)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    assert not m.tokens_counted and m.completion_tokens == 40 and m.chunks == 10


def test_ttft_excludes_role_only_chunk(ref, tap):
    """The role-only chunk leaves at once, the first token 0.3 s later: TTFT is the token's."""
    url = ref(rate=1000.0, ttft=0.3)
    tap.mark()
    with tap.client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=10)
    (ex,) = tap.posts()
    check_run(m, ex)
    assert m.ttft_s > 0.3 and m.e2e_s > 0.3 + 9 / 1000  # the server's pace: never sooner


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_only_deltas_give_nonzero_ttft(ref, tap, field):
    url = ref(rate=1000.0, ttft=0.1, reasoning_tokens=1000, reasoning_field=field)
    tap.mark()
    with tap.client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=20)
    (ex,) = tap.posts()
    check_run(m, ex)
    assert m.ttft_s > 0.1
    assert m.reasoning_deltas == 20 and m.content_deltas == 0 and m.text == ""
    assert m.completion_tokens == 20


def test_itl_and_tpot(ref, tap):
    """ITL median and p99 are those of the gaps between token chunks as they arrived, TPOT
    (E2E - TTFT) / (N - 1); 100 tokens 5 ms apart."""
    url = ref(rate=200.0)
    tap.mark()
    with tap.client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=100)
    (ex,) = tap.posts()
    check_run(m, ex)
    assert m.itl_p99_s >= m.itl_median_s
    assert m.text.startswith("alpha beta gamma")
    assert m.finish_reason == "length"


def test_keep_alive_connection_is_reused():
    """After [DONE] the body is drained, so sequential streams share one TCP connection."""
    server, url = refserver.start_in_thread(rate=5000.0)
    try:
        run_probe(url, prompt="x", max_tokens=10, warmup=1, repeats=3)
        assert server.connections == 1
    finally:
        refserver.stop(server)


def test_completions_endpoint(ref):
    url = ref(rate=2000.0)
    with make_client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=30, endpoint="completions")
    assert m.completion_tokens == 30 and m.content_deltas == 30
    with pytest.raises(ValueError):
        stream_once(httpx.Client(), url, model="m", prompt="x", max_tokens=1, endpoint="bogus")


def test_run_metrics_properties_and_json():
    m = RunMetrics(ttft_s=0.5, e2e_s=2.5, completion_tokens=101)
    assert m.output_tok_s == pytest.approx(101 / 2.5)
    assert m.tpot_s == pytest.approx(0.02)
    assert RunMetrics(ttft_s=0.1, e2e_s=0.1, completion_tokens=1).tpot_s is None
    r = ProbeResult(runs=[m, RunMetrics(0.4, 2.0, 101), RunMetrics(0.6, 3.0, 101)])
    assert r.output_tok_s == pytest.approx(101 / 2.5)
    assert r.ttft_s == pytest.approx(0.5)
    j = r.to_json()
    assert {"output_tok_s", "runs"} <= set(j)  # issue 11 added decode tok/s and the flags
    assert {"output_tok_s", "ttft_s", "tpot_s", "e2e_s", "completion_tokens"} <= set(j["runs"][0])
    json.dumps(j)
    assert ProbeResult().output_tok_s is None


def test_run_probe_repeats_and_callback(ref):
    url = ref(rate=2000.0, model="my/model")
    calls = []
    r = run_probe(url, prompt="x", max_tokens=20, warmup=2, repeats=3, on_run=lambda i, m: calls.append((i, m.completion_tokens)))
    assert calls == [(0, 20), (1, 20), (2, 20)]
    assert len(r.runs) == 3


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("after", [0, 5])
def test_stall_raises_within_timeout(ref, tap, after):
    """The server holds the stream open until the client leaves: the probe gives up by itself,
    at the stall timeout after the last byte (the oracle), never before it."""
    url = ref(rate=1000.0, stall_after=after)
    tap.mark()
    with tap.client() as c, pytest.raises(ProbeStalled) as ei:
        stream_once(c, url, model="ref-model", prompt="x", max_tokens=50, stall_timeout_s=0.5)
    (ex,) = tap.posts()
    check_stall(ex, 0.5, str(ei.value))
    assert len(ex.tokens()) == after
    assert ei.value.timeout_s == 0.5
    assert isinstance(ei.value, ProbeError)


def test_http_500_raises_http_error(ref):
    url = ref(fail_status=500)
    with make_client() as c, pytest.raises(ProbeHTTPError) as ei:
        stream_once(c, url, model="ref-model", prompt="x", max_tokens=10)
    assert ei.value.status == 500
    assert "EngineCore" in ei.value.body_excerpt
    assert "HTTP 500" in str(ei.value)


def test_dropped_connection_raises_disconnected(ref):
    url = ref(rate=1000.0, drop_after=5)
    with make_client() as c, pytest.raises(ProbeDisconnected):
        stream_once(c, url, model="ref-model", prompt="x", max_tokens=50)


def test_connection_refused_raises_connect_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}"
    with make_client(stall_timeout_s=2.0) as c, pytest.raises(ProbeConnectError):
        stream_once(c, url, model="m", prompt="x", max_tokens=5, stall_timeout_s=2.0)
    with pytest.raises(ProbeConnectError):
        run_probe(url, prompt="x", max_tokens=5, stall_timeout_s=2.0)


def _mock_client(sse_lines: list[str], status: int = 200) -> httpx.Client:
    body = "".join(line + "\n" for line in sse_lines).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    return httpx.Client(transport=httpx.MockTransport(handler))


def _chunk(delta=None, finish=None, usage=None, choices=True) -> str:
    obj: dict = {"object": "chat.completion.chunk"}
    obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return "data: " + json.dumps(obj)


def test_mock_stream_parsing_comments_tool_calls_and_usage():
    lines = [
        ": keep-alive comment",
        _chunk({"role": "assistant"}),
        "",
        _chunk({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}),
        "",
        "data:" + _chunk({"content": "hi"})[6:],  # "data:" without the space
        "",
        _chunk({"content": ""}, finish="stop"),
        _chunk(choices=False, usage={"completion_tokens": 7}),
        "data: [DONE]",
    ]
    with _mock_client(lines) as c:
        m = stream_once(c, "http://mock", model="m", prompt="x", max_tokens=7)
    assert m.chunks == 2 and m.completion_tokens == 7 and m.text == "hi"
    assert m.content_deltas == 1 and m.finish_reason == "stop"


def test_mock_stream_without_tokens_raises():
    lines = [_chunk({"role": "assistant"}), _chunk({}, finish="stop"), _chunk(choices=False, usage={"completion_tokens": 0}), "data: [DONE]"]
    with _mock_client(lines) as c, pytest.raises(ProbeError, match="no tokens"):
        stream_once(c, "http://mock", model="m", prompt="x", max_tokens=7)


def test_mock_stream_error_object_raises():
    lines = [_chunk({"content": "a"}), 'data: {"error": {"message": "EngineDeadError"}}', "data: [DONE]"]
    with _mock_client(lines) as c, pytest.raises(ProbeError, match="EngineDeadError"):
        stream_once(c, "http://mock", model="m", prompt="x", max_tokens=7)


def test_mock_stream_truncated_without_done_is_disconnect():
    with _mock_client([_chunk({"content": "a"})]) as c, pytest.raises(ProbeDisconnected):
        stream_once(c, "http://mock", model="m", prompt="x", max_tokens=7)


def test_mock_bad_json_raises():
    with _mock_client(["data: {not json"]) as c, pytest.raises(ProbeError, match="not JSON"):
        stream_once(c, "http://mock", model="m", prompt="x", max_tokens=7)


# ---------------------------------------------------------------------------------------------
# model discovery, smoke check, URLs


def test_discover_model(ref):
    url = ref(model="org/Kimi-K2.5")
    assert discover_model(url) == "org/Kimi-K2.5"
    assert discover_model(url + "/v1/") == "org/Kimi-K2.5"


def test_discover_model_without_models_falls_back_to_a_placeholder():
    def handler(request):
        return httpx.Response(200, json={"object": "list", "data": []})

    with httpx.Client(transport=httpx.MockTransport(handler)) as c:
        assert discover_model("http://mock", client=c) == "default"  # tests/unit/measure/test_model_discovery.py


def test_api_url():
    assert api_url("http://h:1", "/v1/models") == "http://h:1/v1/models"
    assert api_url("http://h:1/", "/v1/models") == "http://h:1/v1/models"
    assert api_url("http://h:1/v1", "/v1/models") == "http://h:1/v1/models"


def test_smoke_check(ref):
    url = ref(rate=1000.0, reasoning_tokens=0)
    with make_client() as c:
        ok, text = smoke_check(c, url, "ref-model", "What is the capital of France?", "paris")
        assert ok and "Paris" in text
        ok, text = smoke_check(c, url, "ref-model", "What is the capital of France?", "Berlin")
        assert not ok


def test_smoke_check_reasoning_model(ref):
    url = ref(rate=1000.0, reasoning_tokens=5, reasoning_field="reasoning_content")
    with make_client() as c:
        ok, text = smoke_check(c, url, "ref-model", "What is the capital of France?", "Paris")
    assert ok and text == "The capital of France is Paris."
    with make_client() as c:  # cut off while thinking: the reasoning text is what there is
        ok, text = smoke_check(c, url, "ref-model", "What is the capital of France?", "Paris", max_tokens=3,
                               retry_max_tokens=3)
    assert not ok and text == "alpha beta gamma"
    with make_client() as c:  # issue 11: by default it is asked again with room to answer
        ok, text = smoke_check(c, url, "ref-model", "What is the capital of France?", "Paris", max_tokens=3)
    assert ok and text == "The capital of France is Paris."


def test_smoke_check_http_error(ref):
    url = ref(fail_status=503)
    with make_client() as c, pytest.raises(ProbeHTTPError) as ei:
        smoke_check(c, url, "ref-model", "What is the capital of France?", "Paris")
    assert ei.value.status == 503


def test_drain_failure_after_done_keeps_the_measurement():
    """A server that never ends the body after [DONE]: the run still counts (only the drain failed)."""

    class Body(httpx.SyncByteStream):
        def __iter__(self):
            yield (_chunk({"content": "a"}) + "\n\n" + _chunk({"content": "b"}, finish="length") + "\n\n").encode()
            yield (_chunk(choices=False, usage={"completion_tokens": 2}) + "\n\ndata: [DONE]\n\n").encode()
            raise httpx.ReadTimeout("drain")

    def handler(request):
        return httpx.Response(200, stream=Body(), headers={"content-type": "text/event-stream"})

    with httpx.Client(transport=httpx.MockTransport(handler)) as c:
        m = stream_once(c, "http://mock", model="m", prompt="x", max_tokens=2)
    assert m.completion_tokens == 2 and m.text == "ab"
