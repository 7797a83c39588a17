"""Field behaviours of the same kinds as the cases, against the independent reference server
(tests/refserver.py): other keep-alive forms, other SSE framings, other error bodies, early ends,
bursts, keys and endpoints."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tests.unit.measure.oracle import check_run, check_stall
from tuner.errors import ProbeDisconnected, ProbeError, ProbeHTTPError, ProbeIncomplete, ProbeStalled
from tuner.measure import make_client, run_probe
from tuner.measure.sse import timed_lines
from tuner.measure.stream import stream_once


def _once(url: str, max_tokens: int = 40, stall: float = 10.0, **kw):
    with make_client(stall) as c:
        return stream_once(c, url, model="ref-model", prompt="x", max_tokens=max_tokens, stall_timeout_s=stall, **kw)


# ---------------------------------------------------------------------------------------------
# a stall is time without a token


@pytest.mark.parametrize("kind", refserver.KEEPALIVE_KINDS)
@pytest.mark.parametrize("after", [0, 3])
def test_keepalive_traffic_never_resets_the_stall_clock(ref, tap, kind, after):
    """Keep-alives every 0.1 s after `after` tokens: stalled at the first line that comes 0.6 s
    after the last token (the oracle: no earlier line came that late), never sooner."""
    url = ref(rate=1000.0, stall_after=after, keepalive=kind, keepalive_interval=0.1)
    tap.mark()
    with tap.client() as c, pytest.raises(ProbeStalled) as ei:
        stream_once(c, url, model="ref-model", prompt="x", max_tokens=50, stall_timeout_s=0.6)
    (ex,) = tap.posts()
    check_stall(ex, 0.6, str(ei.value))
    # the count the probe saw, as the oracle saw it: on a busy machine the server may fall silent
    # for 0.6 s before its `after`-th token, and that stall is as real as the planned one
    got = len(ex.tokens())
    assert got <= after and f"after {got} token chunks" in str(ei.value)


@pytest.mark.parametrize("kind", refserver.KEEPALIVE_KINDS)
def test_keepalive_traffic_between_tokens_is_not_counted(ref, kind):
    url = ref(rate=2000.0, keepalive=kind)
    m = _once(url, max_tokens=40)
    assert m.completion_tokens == 40 and m.tokens_source == "usage"
    assert m.chunks == 40 and m.content_deltas == 40
    assert m.text.startswith("alpha beta gamma")


def test_a_server_that_sends_nothing_at_all_ends_at_the_stall_timeout():
    """Accepts the connection, reads the request, never answers (not even headers) and never
    closes it: the probe gives up by itself, not before the stall timeout."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        held.append(conn)

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"
    try:
        t = time.perf_counter()
        with pytest.raises(ProbeStalled) as ei:
            _once(url, stall=0.5)
        assert time.perf_counter() - t >= 0.5
        assert ei.value.timeout_s == 0.5
    finally:
        for c in held:
            c.close()
        srv.close()


# ---------------------------------------------------------------------------------------------
# SSE framing


@pytest.mark.parametrize("style", refserver.SSE_STYLES)
@pytest.mark.parametrize("reasoning", [0, 10])
def test_sse_framings(ref, style, reasoning):
    """CRLF, CR, 'data:' without a space, multi-line data events, no blank line between events."""
    url = ref(rate=2000.0, sse_style=style, reasoning_tokens=reasoning)
    m = _once(url, max_tokens=40)
    assert m.completion_tokens == 40 and m.tokens_source == "usage" and m.chunks == 40
    assert m.reasoning_deltas == reasoning and m.content_deltas == 40 - reasoning
    assert m.finish_reason == "length"


@pytest.mark.parametrize("style", ["lf", "multiline"])
def test_line_separators_inside_tokens_are_text(ref, style):
    """U+2028, U+2029 and NEL inside a token are text (str.splitlines would split on them)."""
    url = ref(rate=2000.0, unicode=True, sse_style=style)
    m = _once(url, max_tokens=20)
    assert m.chunks == 20 and m.completion_tokens == 20
    assert "line\u2028sep" in m.text and "next\x85line" in m.text and "\U0001f600" in m.text


# ---------------------------------------------------------------------------------------------
# streams that end early


@pytest.mark.parametrize(
    "opts, said",
    [
        ({"end_after": 10, "finish": "abort"}, "finish_reason 'abort'"),
        ({"end_after": 10, "finish": "stop"}, "finish_reason 'stop'"),
        ({"end_after": 10}, "usage 10 tokens"),  # finish "length", but usage counts 10 of 40
        ({"end_after": 10, "finish": "stop", "usage": False}, "after 10 token chunks"),
    ],
    ids=["abort", "stop", "usage-short", "stop-no-usage"],
)
def test_a_stream_that_ends_before_max_tokens_is_not_ok(ref, opts, said):
    url = ref(rate=2000.0, **opts)
    with pytest.raises(ProbeIncomplete) as ei:
        _once(url, max_tokens=40)
    assert said in str(ei.value) and "max_tokens=40" in str(ei.value)


def test_an_early_stop_is_fine_without_ignore_eos(ref):
    url = ref(rate=2000.0, end_after=10, finish="stop")
    m = _once(url, max_tokens=40, ignore_eos=False)
    assert m.completion_tokens == 10 and m.finish_reason == "stop"


def test_a_dropped_connection_says_how_far_it_got(ref):
    url = ref(rate=1000.0, drop_after=5)
    with pytest.raises(ProbeDisconnected) as ei:
        _once(url, max_tokens=50)
    assert "after 5 token chunks" in str(ei.value) and "max_tokens=50" in str(ei.value)


def test_no_finish_reason_but_done_and_full_usage_is_ok(ref):
    """Some servers never send a finish_reason (cases 10, 11): usage and [DONE] suffice."""
    m = _once(ref(rate=2000.0, no_finish=True), max_tokens=30)
    assert m.completion_tokens == 30 and m.finish_reason is None and m.tokens_source == "usage"


# ---------------------------------------------------------------------------------------------
# error bodies


@pytest.mark.parametrize("style", refserver.ERROR_STYLES)
def test_error_in_the_stream_gives_the_servers_message(ref, style):
    url = ref(rate=2000.0, error_after=4, error_style=style)
    with pytest.raises(ProbeError) as ei:
        _once(url, max_tokens=40)
    assert type(ei.value) is ProbeError
    assert refserver.ERROR_MESSAGE in str(ei.value) and "after 4 token chunks" in str(ei.value)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_http_error_bodies(ref, status):
    url = ref(fail_status=status)
    with pytest.raises(ProbeHTTPError) as ei:
        _once(url)
    assert ei.value.status == status and "EngineCore encountered an issue" in ei.value.body_excerpt
    assert ei.value.hint == ""


# ---------------------------------------------------------------------------------------------
# keys and endpoints


def test_api_key_sent_as_bearer_and_redacted_from_echoing_bodies(ref):
    key = "sk-ref-5678"
    url = ref(rate=2000.0, api_key=key)
    with pytest.raises(ProbeHTTPError) as ei:
        run_probe(url, max_tokens=10, warmup=0, repeats=1, stall_timeout_s=5)
    assert ei.value.status == 401 and "OPENAI_API_KEY" in str(ei.value)
    wrong = "sk-wrong-9999"  # the server echoes the key it got, as OpenAI's 401 does
    with pytest.raises(ProbeHTTPError) as ei:
        run_probe(url, max_tokens=10, warmup=0, repeats=1, stall_timeout_s=5, api_key=wrong)
    assert wrong not in str(ei.value) and "***" in ei.value.body_excerpt and "refused" in str(ei.value)
    result = run_probe(url, max_tokens=10, warmup=0, repeats=2, stall_timeout_s=5, api_key=key)
    assert [r.completion_tokens for r in result.runs] == [10, 10]


def test_no_chat_template_hint_only_on_chat(ref):
    url = ref(rate=2000.0, no_chat_template=True)
    with pytest.raises(ProbeHTTPError) as ei:
        _once(url)
    assert ei.value.status == 400 and "--endpoint completions" in ei.value.hint
    m = _once(url, endpoint="completions")
    assert m.completion_tokens == 40


# ---------------------------------------------------------------------------------------------
# bursts


@pytest.mark.parametrize("burst_after", [0, 5])
def test_bursty_delivery_is_flagged_and_output_tok_s_stays_right(ref, tap, burst_after):
    """The server writes every token after the first `burst_after` in one piece when the last is
    due: flagged as a burst (whenever the arrival times say so, the oracle), output tok/s still
    that of the last token's arrival, and never beating the pace."""
    rate, n = 500.0, 100
    url = ref(rate=rate, burst_after=burst_after)
    tap.mark()
    with tap.client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=n)
    (ex,) = tap.posts()
    (sent,) = ref.timeline(url)
    assert len({t for t, _ in sent["tokens"][burst_after:]}) == 1  # one write
    check_run(m, ex)
    assert m.completion_tokens == n
    assert m.output_tok_s < refserver.truth_output_tok_s(n, rate)


def test_several_tokens_per_paced_chunk_is_not_a_burst(ref, tap):
    """10 chunks of 4 tokens 20 ms apart: paced (the oracle), TPOT over all 40 tokens."""
    url = ref(rate=200.0, chunk_tokens=4)
    tap.mark()
    with tap.client() as c:
        m = stream_once(c, url, model="ref-model", prompt="x", max_tokens=40)
    (ex,) = tap.posts()
    check_run(m, ex)
    assert m.chunks == 10 and m.completion_tokens == 40


def test_lines_of_one_read_share_its_time_however_slow_the_reader():
    """A burst that arrived in one read keeps one arrival time while the client parses it line by
    line (a busy client would otherwise spread it over its parsing and hide the burst); a line
    split over two reads arrived with the second, a CR at a read's end waits for the next byte."""
    clock = iter(float(t) for t in range(100)).__next__
    reads = [b"data: 1\n\ndata: 2\n\ndata: 3\n", b"\ndata: 4", b"\n\r", b"\ndata: 5"]
    got = list(timed_lines(iter(reads), clock))
    assert got == [("data: 1", 0.0), ("", 0.0), ("data: 2", 0.0), ("", 0.0), ("data: 3", 0.0),
                   ("", 1.0), ("data: 4", 2.0), ("", 3.0), ("data: 5", 3.0)]
