"""What the probe and the bench must report, worked out from when bytes really moved.

A busy machine delays every process at random, so a figure measured on it cannot be held to a
server's configured pace within a tolerance: the tolerance is either too wide to catch a bug or
too narrow for the next busy night. Each figure can instead be bracketed by causality alone:

* client side, :class:`Tap` (an httpx transport around the real one): for every line of a
  response body, ``y``, just before the piece of the body that completed the line was handed up
  to the reader, and ``r``, when the reader asked for the next piece. The probe stamps a line
  (one ``perf_counter()`` call) while it holds that piece, so its stamp lies in [y, r]. Its
  t_send lies between the end of the previous exchange on the tap (or :meth:`Tap.mark`) and the
  moment the request reached the transport.
* server side, tests/refserver.py's timeline: when a request had been read, when each token
  chunk was about to be written, when ``[DONE]`` was. Bytes arrive after they are written, and
  a client sends its next request on a connection only after it read the previous answer.

A correct probe lands inside every bracket however slow the machine is; on an idle machine the
brackets are a fraction of a millisecond wide, so a wrong definition (the role chunk taken for
the first token, E2E ending at [DONE], a read that buffers) falls outside them. The only slack
is :data:`SLACK`, for float rounding. Line stamps are exact for LF and CRLF framing (a line
ending in a lone CR is only known to end when the next byte comes).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import httpx
import numpy as np

__all__ = ["SLACK", "Exchange", "Line", "RunSpans", "Span", "Tap", "burst_known", "check_medians", "check_run",
           "check_stall", "level_spans", "run_spans"]

SLACK = 1e-12  # relative: float rounding of perf_counter arithmetic, not a timing tolerance
TOKEN_GAP_S = 1e-4  # the burst rule's 10,000 tok/s (tuner.measure.results.is_burst's docstring)
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Span:
    """A closed interval [lo, hi] that a reported figure must lie in (s or tok/s)."""

    lo: float
    hi: float

    def __contains__(self, x: object) -> bool:
        if not isinstance(x, (int, float)):
            return False
        slack = SLACK * max(1.0, abs(self.lo), abs(self.hi))
        return self.lo - slack <= x <= self.hi + slack

    def __repr__(self) -> str:
        return f"[{self.lo:.6g}, {self.hi:.6g}]"


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


# -------------------------------------------------------------------------------------------
# client side


@dataclass
class Line:
    """One line of a response body (without its end) and the window in which the reader held
    the piece of the body that completed it (perf_counter s)."""

    text: str
    y: float
    r: float
    piece: int  # index of that piece in the exchange


@dataclass
class Exchange:
    """One request through a :class:`Tap`: ``after`` <= the caller's t_send <= ``start``;
    ``headers`` <= the caller's response-headers time <= ``reading`` (the body's first read:
    the probe's stall clock starts at the headers); ``end``: the body was exhausted or closed;
    ``pieces``: (y, r) of each piece handed up."""

    method: str
    path: str
    after: float
    start: float
    headers: float | None = None
    reading: float | None = None
    lines: list[Line] = field(default_factory=list)
    pieces: list[tuple[float, float]] = field(default_factory=list)
    end: float | None = None

    def tokens(self) -> list[Line]:
        """The lines that carry a token chunk (tuner.measure.tally's definition: a data line
        whose first choice has content, reasoning or tool calls, or text)."""
        return [ln for ln in self.lines if _is_token(ln.text)]


def _is_token(text: str) -> bool:
    if not text.startswith("data:"):
        return False
    try:
        obj = json.loads(text[5:])
    except ValueError:
        return False
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return False
    ch = choices[0]
    delta = ch.get("delta")
    if isinstance(delta, dict):
        return any(isinstance(delta.get(k), str) and delta[k] for k in ("content", "reasoning", "reasoning_content")) \
            or bool(delta.get("tool_calls"))
    return isinstance(ch.get("text"), str) and bool(ch["text"])


class _Stream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, ex: Exchange) -> None:
        self.inner, self.ex = inner, ex

    def __iter__(self) -> Iterator[bytes]:
        ex, buf = self.ex, b""
        ex.reading = time.perf_counter()
        try:
            for data in self.inner:
                if not data:
                    continue
                y = time.perf_counter()
                piece = len(ex.pieces)
                ex.pieces.append((y, y))
                try:
                    yield data
                finally:
                    r = time.perf_counter()
                    ex.pieces[piece] = (y, r)
                    buf += data
                    start = 0
                    for m in _LINE_END.finditer(buf):
                        if m.end() == len(buf) and m.group() == b"\r":
                            break  # maybe half of a CRLF: the reader waits for the next byte too
                        ex.lines.append(Line(buf[start:m.start()].decode("utf-8", "replace"), y, r, piece))
                        start = m.end()
                    buf = buf[start:]
        finally:
            ex.end = time.perf_counter()

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            if self.ex.end is None:
                self.ex.end = time.perf_counter()


class Tap(httpx.BaseTransport):
    """An httpx transport that passes everything through to ``httpx.HTTPTransport`` and keeps
    one :class:`Exchange` per request (in order). Use it from one thread: the brackets chain
    each exchange to the previous one."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self._mark = time.perf_counter()
        self.exchanges: list[Exchange] = []

    def mark(self) -> None:
        """Now is before the caller's next t_send (tightens the first exchange's bracket)."""
        self._mark = time.perf_counter()

    def client(self, stall_timeout_s: float = 60.0, api_key: str | None = None) -> httpx.Client:
        """A client on this tap, as ``tuner.measure.client.make_client`` makes one (the read
        timeout is the stall timeout; ``api_key`` as a Bearer header)."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return httpx.Client(transport=self, timeout=httpx.Timeout(stall_timeout_s), headers=headers)

    def posts(self) -> list[Exchange]:
        """The completion requests (POST), in order."""
        return [ex for ex in self.exchanges if ex.method == "POST"]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        before = [self._mark] + [ex.end for ex in self.exchanges[-1:] if ex.end is not None]
        ex = Exchange(request.method, request.url.path, after=max(before), start=time.perf_counter())
        self.exchanges.append(ex)
        resp = self._inner.handle_request(request)
        ex.headers = time.perf_counter()
        assert isinstance(resp.stream, httpx.SyncByteStream)
        return httpx.Response(resp.status_code, headers=resp.headers, stream=_Stream(resp.stream, ex),
                              extensions=resp.extensions)

    def close(self) -> None:
        self._inner.close()


@dataclass(frozen=True)
class RunSpans:
    """Brackets of one stream's figures (s, tok/s); ``burst``: True or False when the arrival
    times decide the burst rule whatever the stamps inside their windows, None when not."""

    ttft: Span
    e2e: Span
    output_tok_s: Span
    tpot: Span | None
    itl_median: Span | None
    itl_p99: Span | None
    burst: bool | None


def burst_known(toks: Sequence[Line], tokens: int) -> bool | None:
    """The burst rule (tuner.measure.results.is_burst's docstring) over stamps known only to lie in
    [y, r]: True/False when every choice of stamps gives that answer, None otherwise."""
    k = len(toks)
    if tokens < 2 or k == 0:
        return False
    if k == 1:
        return True
    m = k // 2 + 1
    limit = (m - 1) * (tokens / k) * TOKEN_GAP_S
    densest_lo = min(toks[i + m - 1].y - toks[i].r for i in range(k - m + 1))
    densest_hi = min(toks[i + m - 1].r - toks[i].y for i in range(k - m + 1))
    if densest_hi < limit:
        return True
    if densest_lo >= limit:
        return False
    return None


def run_spans(ex: Exchange, tokens: int) -> RunSpans:
    """Brackets of what ``stream_once`` must report for ``ex``, a stream of ``tokens`` tokens."""
    toks = ex.tokens()
    assert toks, "the stream carried no token chunk"
    first, last = toks[0], toks[-1]
    e2e = Span(last.y - ex.start, last.r - ex.after)
    tpot = itl_med = itl_p99 = None
    if tokens >= 2:
        tpot = Span((last.y - first.r) / (tokens - 1), (last.r - first.y) / (tokens - 1))
    if len(toks) >= 2:
        lows = sorted(b.y - a.r for a, b in pairwise(toks))
        highs = sorted(b.r - a.y for a, b in pairwise(toks))
        itl_med = Span(_pct(lows, 50), _pct(highs, 50))
        itl_p99 = Span(_pct(lows, 99), _pct(highs, 99))
    return RunSpans(ttft=Span(first.y - ex.start, first.r - ex.after), e2e=e2e,
                    output_tok_s=Span(tokens / e2e.hi, tokens / e2e.lo), tpot=tpot, itl_median=itl_med,
                    itl_p99=itl_p99, burst=burst_known(toks, tokens))


def check_run(m: Any, ex: Exchange) -> RunSpans:
    """Assert that ``m`` (a RunMetrics) lies in the brackets of ``ex``; returns them. Its burst
    flag must agree with the arrival times whenever they decide it."""
    s = run_spans(ex, m.completion_tokens)
    assert m.e2e_s in s.e2e, ("e2e", m.e2e_s, s.e2e)
    assert m.output_tok_s in s.output_tok_s, ("output tok/s", m.output_tok_s, s.output_tok_s)
    assert m.ttft_s in s.ttft, ("ttft", m.ttft_s, s.ttft)  # when the first token chunk arrived, burst or not
    if s.burst is not None:
        assert m.timing_measurable is not s.burst, ("burst", m.timing_measurable, s.burst)
    if m.timing_measurable and m.chunked:  # several tokens a chunk: TPOT and ITL are not measurable
        assert m.tpot_s is None and m.itl_median_s is None and m.itl_p99_s is None
    elif m.timing_measurable:
        assert s.tpot is None or m.tpot_s in s.tpot, ("tpot", m.tpot_s, s.tpot)
        assert s.itl_median is None or m.itl_median_s in s.itl_median, ("itl median", m.itl_median_s, s.itl_median)
        assert s.itl_p99 is None or m.itl_p99_s in s.itl_p99, ("itl p99", m.itl_p99_s, s.itl_p99)
    else:
        assert m.tpot_s is None and m.itl_median_s is None and m.itl_p99_s is None
    return s


def check_medians(result: Any, exchanges: Sequence[Exchange]) -> None:
    """Assert that a ProbeResult's medians lie between the medians of its runs' brackets."""
    spans = [check_run(m, ex) for m, ex in zip(result.runs, exchanges, strict=True)]
    for name, attr in (("output_tok_s", "output_tok_s"), ("e2e_s", "e2e")):
        lo = statistics.median(getattr(s, attr).lo for s in spans)
        hi = statistics.median(getattr(s, attr).hi for s in spans)
        assert getattr(result, name) in Span(lo, hi), (name, getattr(result, name), Span(lo, hi))
    if result.timing_measurable:
        for name, attr in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
            got = [getattr(s, attr) for s in spans]
            if all(g is not None for g in got):
                span = Span(statistics.median(g.lo for g in got), statistics.median(g.hi for g in got))
                assert getattr(result, name) in span, (name, getattr(result, name), span)


def check_stall(ex: Exchange, timeout_s: float, message: str) -> None:
    """Assert that a stream that raised ProbeStalled did so at the first line that came
    ``timeout_s`` after its last token (after the response headers when it had none, or after
    t_send when none came: httpx's read timeout): every earlier line came
    before that, the last piece the reader held came after it. A "no token for X s" in
    ``message`` must be within those windows too (X printed to 0.1 s)."""
    toks = ex.tokens()
    if toks:
        t_lo, t_hi = toks[-1].y, toks[-1].r
    elif ex.headers is not None:
        t_lo, t_hi = ex.headers, ex.reading if ex.reading is not None else ex.end or ex.headers
    else:
        t_lo, t_hi = ex.after, ex.start
    assert ex.end is not None and ex.end - t_lo >= timeout_s, "gave up before the stall timeout"
    last_piece = len(ex.pieces) - 1  # the probe raised while holding it, or after it at httpx's read timeout
    after = [ln for ln in ex.lines if ln.piece < last_piece and (not toks or ln.piece > toks[-1].piece)]
    late = [ln for ln in after if ln.y - t_hi > timeout_s]
    assert not late, f"{len(late)} lines came after the stall timeout before the probe gave up"
    said = re.search(r"no token for ([\d.]+) s", message)
    if said:  # raised at a line of the last piece: now - last token, printed to 0.1 s
        y, _ = ex.pieces[last_piece]
        silence = Span(y - t_hi - 0.05, ex.end - t_lo + 0.05)
        assert float(said.group(1)) in silence, (said.group(0), silence)


# -------------------------------------------------------------------------------------------
# server side (the bench makes its own clients)


def level_spans(streams: Sequence[dict], lo: float, hi: float) -> dict[str, Any]:
    """Brackets of a bench level from the reference server's timeline records of its requests.

    ``streams``: the level's records (tests/refserver.py); ``lo``: a time before the level's
    clock started (the previous level's ``on_level`` call, or the warm-up's ``done``); ``hi``:
    its ``on_level`` call. Keys: ``wall`` (Span, s), ``aggregate`` (Span, tok/s; all streams
    ok), ``latency`` (list of Span, one per request, s), ``latency_avg`` / ``latency_p50`` /
    ``latency_p99`` (Span, s), ``connections`` (requests per TCP connection).
    """
    assert streams, "no request of this level reached the server"
    tokens = sum(n for s in streams for _, n in s["tokens"])
    wall = Span(max(s["tokens"][-1][0] for s in streams) - min(s["read"] for s in streams), hi - lo)
    by_conn: dict[int, list[dict]] = {}
    for s in sorted(streams, key=lambda s: s["read"]):
        by_conn.setdefault(s["conn"], []).append(s)
    latency = []
    for chain in by_conn.values():
        for i, s in enumerate(chain):
            before = chain[i - 1]["done"] if i else lo  # the client sends after it read [DONE]
            after = chain[i + 1]["read"] if i + 1 < len(chain) else hi
            latency.append(Span(s["tokens"][-1][0] - s["read"], after - before))
    lows, highs = sorted(s.lo for s in latency), sorted(s.hi for s in latency)
    return {
        "wall": wall,
        "aggregate": Span(tokens / wall.hi, tokens / wall.lo),
        "latency": latency,
        "latency_avg": Span(statistics.fmean(lows), statistics.fmean(highs)),
        "latency_p50": Span(_pct(lows, 50), _pct(highs, 50)),
        "latency_p99": Span(_pct(lows, 99), _pct(highs, 99)),
        "connections": sorted(len(c) for c in by_conn.values()),
    }
