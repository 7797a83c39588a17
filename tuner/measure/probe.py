"""Single-stream decode probe: stream completions and time them, the same way for every caller.

Definitions (the field-standard ones of vLLM ``vllm/benchmarks/serve.py``, formerly
``benchmarks/benchmark_serving.py``, and SGLang ``python/sglang/bench_serving.py``):

* Clock: ``time.perf_counter``; t_send is taken just before the request is sent.
* A *token chunk* is an SSE chunk whose first choice carries content (``delta.content``, or
  ``text`` on the completions endpoint), reasoning (``delta.reasoning`` or
  ``delta.reasoning_content``) or tool calls. The role-only chunk, empty deltas, ``data: {}``,
  usage-only chunks and SSE comments are not token chunks.
* TTFT (s): arrival of the first token chunk, from t_send. E2E (s): arrival of the last one.
* Output tokens (``RunMetrics.tokens_source``): ``usage.completion_tokens`` of the last usage
  object with a non-zero count ("usage"; reasoning tokens included); without usage, and with
  ``ignore_eos`` and finish_reason ``length``, exactly ``max_tokens`` ("max_tokens"); otherwise
  the token chunks are counted ("chunks"): a lower bound, since a chunk may carry several tokens,
  flagged by ``RunMetrics.tokens_counted``.
* output tok/s = output_tokens / E2E (the figure users quote: "512 tokens in 8.5 s").
* TPOT (s) = (E2E - TTFT) / (output_tokens - 1); decode tok/s = 1 / TPOT. ITL: gaps between
  token chunks (per chunk, not per token). All three need the tokens to arrive as they are
  made: see :func:`is_burst` for when they do not (``RunMetrics.timing_measurable``).

Request body: ``stream: true``, ``stream_options: {include_usage: true}``, ``temperature: 0``,
``max_tokens``, ``ignore_eos: true`` (vLLM/SGLang sampling-parameter extension: every run makes
exactly max_tokens tokens). Endpoints: ``"chat"`` (``POST /v1/chat/completions``) or
``"completions"`` (``POST /v1/completions``, for models without a chat template).

The stream is read as Server-Sent Events (WHATWG HTML "Server-sent events", the event stream
interpretation): lines end in CRLF, LF or CR (only those: a U+2028 inside a token is text);
``data:`` with or without the space; several ``data:`` lines of one event are joined with "\\n";
comments (``:``) and ``id:``/``retry:`` fields are ignored; ``event: error`` carries the
server's error. A payload is handled as soon as its data lines parse as JSON, so the arrival time
is the data line's, and servers that omit the blank line between events still work.

A stall is time without a token: keep-alive traffic (SSE comments, ``data: {}``, empty or
role-only deltas, usage-only chunks) never resets the stall clock, only a token chunk or a chunk
with a finish_reason does. httpx's read timeout restarts on any byte, so the probe checks its own
clock after every line; a stream that sends nothing at all ends at httpx's read timeout, set to
the same ``stall_timeout_s``. A stall is therefore reported at the first line that arrives after
``stall_timeout_s`` without a token (within one keep-alive interval of it), or
``stall_timeout_s`` after the last byte when nothing more comes: never later than twice
``stall_timeout_s`` after the last token.

Errors (all ``tuner.errors.ProbeError``, exit status 1): ``ProbeHTTPError`` (status >= 400, with
a hint for a missing chat template or API key), ``ProbeStalled``, ``ProbeDisconnected``
(connection dropped, or ended without [DONE] or a finish), ``ProbeConnectError`` (nothing
listening, connect timeout), ``ProbeIncomplete`` (ended before max_tokens with ignore_eos),
plain ``ProbeError`` (no tokens, bad SSE/JSON, an error event or object in the stream, no model
to discover). httpx exceptions become these in one place, :func:`probe_error_from`.

An API key (``make_client(api_key=...)``) is sent as ``Authorization: Bearer <key>`` and never
appears in a message: an error body that echoes it is redacted.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, Protocol

import httpx

from tuner.errors import (
    ProbeConnectError,
    ProbeDisconnected,
    ProbeError,
    ProbeHTTPError,
    ProbeIncomplete,
    ProbeStalled,
)

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_PROMPT",
    "MIN_TOKEN_GAP_S",
    "SERVER_API_KEY_ENV",
    "SMOKE_EXPECT",
    "SMOKE_PROMPT",
    "CheckResult",
    "Endpoint",
    "FixedRuns",
    "ProbeConnectError",
    "ProbeDisconnected",
    "ProbeError",
    "ProbeHTTPError",
    "ProbeIncomplete",
    "ProbeResult",
    "ProbeStalled",
    "RunMetrics",
    "StopRule",
    "StopWhen",
    "TokensSource",
    "api_url",
    "discover_model",
    "find_api_key",
    "format_result",
    "is_burst",
    "make_client",
    "percentile",
    "probe_error_from",
    "run_probe",
    "smoke_check",
    "stream_once",
]

DEFAULT_PROMPT = "Write a long story about a lighthouse keeper and the sea."
SMOKE_PROMPT = "What is the capital of France?"
SMOKE_EXPECT = "Paris"
SMOKE_MAX_TOKENS = 32  # first try: enough for a plain model's one-line answer
SMOKE_RETRY_MAX_TOKENS = 1024  # room for a reasoning model to think, then answer

#: Environment variables the runner reads an API key from, in order (the OpenAI client's name).
API_KEY_ENV = ("OPENAI_API_KEY",)
#: Names under which a server is given its key in its own environment (vLLM reads
#: ``VLLM_API_KEY`` in ``vllm/entrypoints/openai/api_server.py`` when ``--api-key`` is unset).
SERVER_API_KEY_ENV = ("VLLM_API_KEY",)

#: Shortest plausible time per token of one stream (s): 10,000 tok/s. The fastest single-stream
#: decode published (wafer-scale and LPU systems, small models) is about 2,000-3,000 tok/s, so a
#: stream never makes tokens this fast; a backlog read at once arrives at a few us per chunk
#: (one read, then JSON parsing), 20-100x faster. See :func:`is_burst`.
MIN_TOKEN_GAP_S = 1e-4

Endpoint = Literal["chat", "completions"]
TokensSource = Literal["usage", "max_tokens", "chunks"]

_ENDPOINT_PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
_BODY_EXCERPT = 500  # characters of an error body kept in ProbeHTTPError
_CHAT_TEMPLATE = re.compile(r"chat[ _-]?template", re.IGNORECASE)
_LINE_END = re.compile(rb"\r\n|\r|\n")
_DONE = object()  # the [DONE] sentinel of the SSE framer


# --------------------------------------------------------------------------------------------
# results


def percentile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of an ascending non-empty list; q in [0, 100]."""
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def is_burst(times: Sequence[float], tokens: int) -> bool:
    """True when the tokens of a stream arrived in a burst, so TTFT/TPOT/ITL are not measurable.

    ``times``: arrival times (s, ascending) of the k token chunks; ``tokens``: output tokens.
    Rule: with ``tokens >= 2``, a burst is either all tokens in one chunk (k = 1), or more than
    half of the chunks (m = k // 2 + 1 consecutive ones) arriving within less than
    ``(m - 1) * (tokens / k) * MIN_TOKEN_GAP_S``, i.e. more than half of the tokens delivered
    faster than 10,000 tok/s, a rate no single stream decodes at (:data:`MIN_TOKEN_GAP_S`).

    Why: when a server's HTTP layer is starved (a CPU build on 2 cores, seen with vLLM) or a
    proxy buffers the whole response, the tokens reach the client long after they were made,
    nearly at once: TTFT becomes about E2E, TPOT about 0 (0.01 ms). Output tok/s = tokens / E2E
    stays right, since the last token still arrives when the stream ends. The rule is scaled by
    the token count rather than a fixed window, so a short fast stream (8 tokens at 1,000 tok/s
    within 7 ms) is not a burst, and a long burst parsed by a slow client (1,000 chunks at 20 us
    each) still is. Chunks carrying several tokens (a server's stream interval) are weighed by
    ``tokens / k``. Proxies that deliver in small batches spread over the stream are not bursts
    (their densest half still spans about half of the stream).
    """
    k = len(times)
    if tokens < 2 or k == 0:
        return False
    if k == 1:
        return True
    m = k // 2 + 1
    densest = min(times[i + m - 1] - times[i] for i in range(k - m + 1))
    return densest < (m - 1) * (tokens / k) * MIN_TOKEN_GAP_S


@dataclass(frozen=True)
class RunMetrics:
    """Timing of one streamed request (units: s, tokens, tok/s).

    ``ttft_s``/``e2e_s``: first/last token chunk from the moment the request was sent
    (perf_counter); with ``timing_measurable`` False (a burst, :func:`is_burst`) ``ttft_s`` is
    only when the first token was delivered, not when it was made. ``completion_tokens``: see
    ``tokens_source`` ("usage", "max_tokens" or "chunks"; the module docstring).
    ``itl_median_s``/``itl_p99_s``: gaps between token chunks (None with < 2 chunks or in a
    burst); ``chunks``: token chunks seen; ``content_deltas``/``reasoning_deltas``: chunks with
    content / reasoning text; ``text``: generated content; ``reasoning``: reasoning text;
    ``finish_reason`` of the last choice that had one (None if none was sent).
    """

    ttft_s: float
    e2e_s: float
    completion_tokens: int
    tokens_source: TokensSource = "usage"
    itl_median_s: float | None = None
    itl_p99_s: float | None = None
    chunks: int = 0
    content_deltas: int = 0
    reasoning_deltas: int = 0
    text: str = ""
    finish_reason: str | None = None
    timing_measurable: bool = True
    reasoning: str = ""

    @property
    def tokens_counted(self) -> bool:
        """True when the token count is a guess: no usage and no ``length`` finish, so the token
        chunks were counted (a lower bound; output tok/s is a lower bound too)."""
        return self.tokens_source == "chunks"

    @property
    def output_tok_s(self) -> float:
        """completion_tokens / e2e_s (tok/s)."""
        return self.completion_tokens / self.e2e_s if self.e2e_s > 0 else float("inf")

    @property
    def tpot_s(self) -> float | None:
        """(e2e_s - ttft_s) / (completion_tokens - 1) in s; None with fewer than 2 tokens or
        when the timing is not measurable (a burst)."""
        if self.completion_tokens < 2 or not self.timing_measurable:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    @property
    def decode_tok_s(self) -> float | None:
        """1 / TPOT (tok/s, prefill excluded); None when TPOT is None or 0."""
        tpot = self.tpot_s
        return 1.0 / tpot if tpot else None

    def to_json(self) -> dict[str, Any]:
        """``{"output_tok_s", "ttft_s", "tpot_s", "decode_tok_s", "e2e_s", "completion_tokens",
        "tokens_source", "timing_measurable"}`` (floats in s and tok/s; None when not measurable)."""
        return {
            "output_tok_s": self.output_tok_s,
            "ttft_s": self.ttft_s if self.timing_measurable else None,
            "tpot_s": self.tpot_s,
            "decode_tok_s": self.decode_tok_s,
            "e2e_s": self.e2e_s,
            "completion_tokens": self.completion_tokens,
            "tokens_source": self.tokens_source,
            "timing_measurable": self.timing_measurable,
        }


@dataclass
class ProbeResult:
    """Recorded (non-warm-up) runs of one probe; the summary properties are medians.

    TTFT, TPOT and decode tok/s are reported only when every run's timing is measurable
    (``timing_measurable``): a probe that mixes bursty and paced runs gives None rather than a
    median over a subset.
    """

    runs: list[RunMetrics] = field(default_factory=list)

    def _median(self, attr: str, timing: bool = False) -> float | None:
        if timing and not self.timing_measurable:
            return None
        vals = [v for v in (getattr(r, attr) for r in self.runs) if v is not None]
        return statistics.median(vals) if vals else None

    @property
    def output_tok_s(self) -> float | None:
        """Median of per-run output tok/s (None with no runs)."""
        return self._median("output_tok_s")

    @property
    def output_tok_s_runs(self) -> list[float]:
        """Per recorded run: completion tokens / E2E (tok/s)."""
        return [r.output_tok_s for r in self.runs]

    @property
    def decode_tok_s(self) -> float | None:
        """Median of per-run 1 / TPOT (tok/s); None with no runs or when not measurable."""
        return self._median("decode_tok_s", timing=True)

    @property
    def decode_tok_s_runs(self) -> list[float]:
        """Per recorded run: 1 / TPOT (tok/s); empty when any run's timing is not measurable."""
        if not self.timing_measurable:
            return []
        return [d for d in (r.decode_tok_s for r in self.runs) if d is not None]

    @property
    def ttft_s(self) -> float | None:
        """Median TTFT (s) over the recorded runs (None with no runs or when not measurable)."""
        return self._median("ttft_s", timing=True)

    @property
    def tpot_s(self) -> float | None:
        """Median TPOT (s) over the recorded runs (None with no runs or when not measurable)."""
        return self._median("tpot_s", timing=True)

    @property
    def e2e_s(self) -> float | None:
        """Median E2E latency (s) over the recorded runs (None with no runs)."""
        return self._median("e2e_s")

    @property
    def completion_tokens(self) -> float | None:
        """Median completion tokens over the recorded runs (None with no runs)."""
        return self._median("completion_tokens")

    @property
    def tokens_counted(self) -> bool:
        """True when any run's count is a guess (counted chunks: a lower bound; flag it)."""
        return any(r.tokens_counted for r in self.runs)

    @property
    def tokens_source(self) -> TokensSource | None:
        """The weakest source over the runs: "chunks" > "max_tokens" > "usage" (None: no runs)."""
        sources = {r.tokens_source for r in self.runs}
        weakest_first: tuple[TokensSource, ...] = ("chunks", "max_tokens", "usage")
        return next((s for s in weakest_first if s in sources), None)

    @property
    def timing_measurable(self) -> bool:
        """False when any run's tokens arrived in a burst (TTFT/TPOT/ITL not measurable)."""
        return all(r.timing_measurable for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        """``{"output_tok_s", "decode_tok_s", "tokens_source", "tokens_counted",
        "timing_measurable", "runs": [RunMetrics.to_json(), ...]}`` (medians in tok/s)."""
        return {
            "output_tok_s": self.output_tok_s,
            "decode_tok_s": self.decode_tok_s,
            "tokens_source": self.tokens_source,
            "tokens_counted": self.tokens_counted,
            "timing_measurable": self.timing_measurable,
            "runs": [r.to_json() for r in self.runs],
        }


def format_result(result: ProbeResult) -> str:
    """The console table of ``nccl-tune probe``: one row per recorded run, the median, and a
    note under the table whenever a figure is a guess or not measurable (lines of text)."""
    header = f"{'run':>4} {'tok/s':>9} {'TTFT s':>8} {'TPOT ms':>8} {'decode tok/s':>12} {'E2E s':>7} {'tokens':>7}"
    lines = [header]
    marks = {"usage": "", "max_tokens": " (=max_tokens)", "chunks": " (counted: a lower bound)"}
    for i, r in enumerate(result.runs, 1):
        ttft = f"{r.ttft_s:.3f}" if r.timing_measurable else "-"
        tpot = f"{r.tpot_s * 1000:.2f}" if r.tpot_s is not None else "-"
        dec = f"{r.decode_tok_s:.1f}" if r.decode_tok_s is not None else "-"
        lines.append(f"{i:>4} {r.output_tok_s:>9.2f} {ttft:>8} {tpot:>8} {dec:>12} {r.e2e_s:>7.2f} "
                     f"{r.completion_tokens:>7}{marks[r.tokens_source]}")
    median = result.output_tok_s
    bound = " (a lower bound)" if result.tokens_counted else ""
    lines.append(f"median output tok/s: {median:.2f}{bound}" if median is not None else "no runs")
    if result.decode_tok_s is not None:
        lines.append(f"median decode tok/s (1 / TPOT): {result.decode_tok_s:.2f}{bound}")
    if result.tokens_counted:
        lines.append("note: the server sent no usage chunk and no finish_reason 'length', so tokens were "
                     "counted from chunks; a chunk may carry several tokens: counts, output tok/s and decode "
                     "tok/s are lower bounds (TPOT an upper bound).")
    elif result.tokens_source == "max_tokens":
        lines.append("note: no usage chunk; with ignore_eos and finish_reason 'length' the count is max_tokens.")
    if not result.timing_measurable:
        lines.append("note: tokens arrived in a burst (most of them within a few ms), not as they were made: "
                     "TTFT, TPOT and decode tok/s are not measurable; output tok/s (tokens / E2E) is.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# HTTP: client, URLs, errors


def make_client(stall_timeout_s: float = 60.0, connect_timeout_s: float = 10.0, *,
                api_key: str | None = None) -> httpx.Client:
    """A keep-alive ``httpx.Client`` whose read timeout is the stall timeout (s).

    ``api_key``: sent as ``Authorization: Bearer <key>`` on every request (vLLM ``--api-key``,
    SGLang ``--api-key``); never logged nor put in an error message.
    """
    headers = {"Accept": "text/event-stream, application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(timeout=_timeouts(stall_timeout_s, connect_timeout_s), headers=headers)


def find_api_key(explicit: str | None = None, runner_env: Mapping[str, str] | None = None,
                 server_env: Mapping[str, str] | None = None) -> str | None:
    """The API key to send: ``explicit`` (e.g. ``server.api_key``), else the runner's
    ``OPENAI_API_KEY`` (:data:`API_KEY_ENV`), else a key the server is given in its own
    environment under a known name (:data:`SERVER_API_KEY_ENV`); None when there is none."""
    if explicit:
        return explicit
    for env, names in ((runner_env, API_KEY_ENV), (server_env, SERVER_API_KEY_ENV)):
        for name in names:
            if env and env.get(name):
                return env[name]
    return None


def api_url(base_url: str, path: str) -> str:
    """Join ``base_url`` (``http://h:p`` or ``http://h:p/v1``) and an API path like ``/v1/models``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[:-3]
    return base + path


def _timeouts(stall_timeout_s: float, connect_timeout_s: float = 10.0) -> httpx.Timeout:
    return httpx.Timeout(connect=min(connect_timeout_s, stall_timeout_s), read=stall_timeout_s,
                         write=stall_timeout_s, pool=stall_timeout_s)


def _secret(client: httpx.Client) -> str | None:
    auth = client.headers.get("Authorization", "")
    return auth.split(" ", 1)[1] if auth.startswith("Bearer ") else None


def _excerpt(text: str, secret: str | None = None) -> str:
    if secret:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("..." if len(text) > _BODY_EXCERPT else "")


def probe_error_from(exc: httpx.HTTPError, url: str, timeout_s: float, after: str = "") -> ProbeError:
    """The probe error for an httpx exception (the one mapping used by every request here).

    ConnectError/ConnectTimeout/UnsupportedProtocol -> ProbeConnectError; other timeouts ->
    ProbeStalled (``timeout_s``); dropped connections (RemoteProtocolError, ReadError,
    WriteError, CloseError, other transport errors) -> ProbeDisconnected; anything else (e.g.
    a decoding error) -> ProbeError. ``after`` says how far the request got (e.g. "after 12
    token chunks"); the message never holds request headers (the API key).
    """
    where = f" {after}" if after else ""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol)):
        return ProbeConnectError(f"cannot connect to {url}: {type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return ProbeStalled(f"nothing from {url} for {timeout_s:g} s (stall timeout){where}", timeout_s)
    if isinstance(exc, httpx.TransportError):
        return ProbeDisconnected(f"connection to {url} dropped{where}: {type(exc).__name__}: {exc}")
    return ProbeError(f"{url}{where}: {type(exc).__name__}: {exc}")


def _status_error(resp: httpx.Response, client: httpx.Client, endpoint: str | None = None) -> ProbeHTTPError:
    """ProbeHTTPError for a response with status >= 400 (the body must have been read)."""
    secret = _secret(client)
    body = _excerpt(resp.text, secret)
    hint = ""
    if endpoint == "chat" and _CHAT_TEMPLATE.search(resp.text):
        hint = ("the model has no chat template, as a base model: measure it on the completions endpoint with "
                'probe.endpoint = "completions" in the experiment file or --endpoint completions')
    elif resp.status_code in (401, 403):
        hint = ("the API key sent was refused" if secret else
                "the server requires an API key: set OPENAI_API_KEY or server.api_key")
    return ProbeHTTPError(resp.status_code, body, hint)


def discover_model(base_url: str, *, client: httpx.Client | None = None, timeout_s: float = 10.0,
                   api_key: str | None = None) -> str:
    """``data[0].id`` of ``GET /v1/models``.

    ``api_key`` is used only when no ``client`` is given (a caller's client carries its own).
    Raises ProbeConnectError (unreachable), ProbeHTTPError (status >= 400), ProbeStalled,
    ProbeDisconnected, ProbeError (no model listed or not JSON).
    """
    url = api_url(base_url, "/v1/models")
    c = client or make_client(timeout_s, api_key=api_key)
    try:
        try:
            resp = c.get(url, timeout=_timeouts(timeout_s))
        except httpx.HTTPError as e:
            raise probe_error_from(e, url, timeout_s) from e
        if resp.status_code >= 400:
            raise _status_error(resp, c)
        try:
            model = (resp.json().get("data") or [])[0]["id"]
        except (ValueError, AttributeError, LookupError, TypeError) as e:
            raise ProbeError(
                f"GET {url} listed no model (expected JSON with data[0].id); pass the model name explicitly"
            ) from e
        if not isinstance(model, str) or not model:
            raise ProbeError(f"GET {url}: data[0].id is not a model name: {model!r}")
        return model
    finally:
        if client is None:
            c.close()


def _request(endpoint: str, model: str, prompt: str, max_tokens: int, ignore_eos: bool) -> tuple[str, dict[str, Any]]:
    if endpoint not in _ENDPOINT_PATHS:
        raise ValueError(f"endpoint must be 'chat' or 'completions', not {endpoint!r}")
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if ignore_eos:
        body["ignore_eos"] = True
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return _ENDPOINT_PATHS[endpoint], body


# --------------------------------------------------------------------------------------------
# SSE framing


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Lines of an SSE byte stream, split on CRLF, LF or CR only (not on U+2028 and kin, which
    ``str.splitlines`` and httpx ``iter_lines`` also split on), decoded as UTF-8."""
    buf = b""
    for data in chunks:
        buf = buf + data if buf else data
        start = 0
        for m in _LINE_END.finditer(buf):
            if m.end() == len(buf) and m.group() == b"\r":
                break  # maybe the first half of a CRLF: wait for the next byte
            yield buf[start:m.start()].decode("utf-8", "replace")
            start = m.end()
        buf = buf[start:]
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


class _Framer:
    """Turns SSE lines into payloads: ``None`` (nothing complete yet) or ``(event, obj)``, with
    ``obj`` the parsed JSON of the event's data lines, or ``_DONE`` for ``data: [DONE]``."""

    def __init__(self) -> None:
        self.event = ""
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, Any] | None:
        if not line:  # blank line: the event ends
            pending, event = self.data, self.event
            self.data, self.event = [], ""
            text = "\n".join(pending).strip()
            if not text:
                return None
            if event == "error":
                return event, text  # an error event whose data is plain text
            raise ProbeError(f"bad SSE data (not JSON): {text[:200]!r}")
        if line[0] == ":":
            return None  # comment (keep-alive ping)
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "event":
            self.event = value.strip()
            return None
        if name != "data":
            return None  # id:, retry:, unknown fields
        self.data.append(value)
        text = value if len(self.data) == 1 else "\n".join(self.data)
        if text.strip() == "[DONE]":
            self.data = []
            return self.event, _DONE
        try:
            obj = json.loads(text)
        except ValueError:
            return None  # maybe the first line of a multi-line event: wait for the rest
        self.data = []
        return self.event, obj

    def flush(self) -> tuple[str, Any] | None:
        """At the end of the body: the event left open, if any (unparsed data is an error)."""
        return self.feed("") if self.data else None


def _server_error(obj: Any, event: str) -> str | None:
    """The server's message when ``obj`` reports an error, else None."""
    if not isinstance(obj, dict):
        if event != "error":
            return None
        return _excerpt(obj if isinstance(obj, str) else json.dumps(obj))
    err = obj.get("error")
    if err:
        msg = err.get("message") or json.dumps(err) if isinstance(err, dict) else str(err)
        return _excerpt(str(msg))
    if obj.get("object") == "error" or event == "error":  # vLLM's ErrorResponse, or event: error
        return _excerpt(str(obj.get("message") or obj.get("detail") or json.dumps(obj)))
    return None


# --------------------------------------------------------------------------------------------
# one stream


class _Tally:
    """What a stream carried so far: token chunk times, text, usage, finish."""

    def __init__(self, endpoint: str) -> None:
        self.chat = endpoint == "chat"
        self.times: list[float] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.content_deltas = 0
        self.reasoning_deltas = 0
        self.usage_tokens: int | None = None
        self.finish_reason: str | None = None

    def feed(self, obj: Any, event: str, now: float) -> bool:
        """Take one payload; True when it carries a token or a finish (resets the stall clock)."""
        msg = _server_error(obj, event)
        if msg is not None:
            raise ProbeError(f"server error in stream after {len(self.times)} token chunks: {msg}")
        if not isinstance(obj, dict):
            return False
        usage = obj.get("usage")
        if isinstance(usage, dict):
            ct = usage.get("completion_tokens")
            if isinstance(ct, int) and ct > 0:  # zeros are placeholders (usage in every chunk)
                self.usage_tokens = ct
        choices = obj.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return False
        ch = choices[0]
        token = False
        if self.chat:
            delta = ch.get("delta")
            if isinstance(delta, dict):
                c = delta.get("content")
                if c and isinstance(c, str):
                    self.content.append(c)
                    self.content_deltas += 1
                    token = True
                r = delta.get("reasoning") or delta.get("reasoning_content")
                if r and isinstance(r, str):
                    self.reasoning.append(r)
                    self.reasoning_deltas += 1
                    token = True
                if delta.get("tool_calls"):
                    token = True
        else:
            c = ch.get("text")
            if c and isinstance(c, str):
                self.content.append(c)
                self.content_deltas += 1
                token = True
        if token:
            self.times.append(now)
        fr = ch.get("finish_reason")
        if fr:
            self.finish_reason = str(fr)
            return True
        return token

    def progress(self, max_tokens: int) -> str:
        usage = f", usage {self.usage_tokens} tokens" if self.usage_tokens is not None else ""
        return f"after {len(self.times)} token chunks{usage} of max_tokens={max_tokens}"


def stream_once(
    client: httpx.Client,
    base_url: str,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    stall_timeout_s: float = 60.0,
    endpoint: Endpoint | str = "chat",
    ignore_eos: bool = True,
) -> RunMetrics:
    """Stream one completion and time it (definitions and SSE rules: module docstring).

    ``endpoint``: "chat" or "completions" (ValueError otherwise). ``stall_timeout_s`` (s):
    longest time without a token, keep-alive traffic or not; the client's own timeout is
    overridden. ``ignore_eos`` True (the probe) makes a stream that ends before ``max_tokens``
    an error; False (the smoke check) takes the answer as it ends.

    Raises ProbeHTTPError, ProbeStalled, ProbeDisconnected, ProbeConnectError, ProbeIncomplete
    (ended before max_tokens with ignore_eos: finish_reason abort/stop, usage short), ProbeError
    (no tokens, bad SSE/JSON, an error event or object in the stream).
    """
    path, body = _request(endpoint, model, prompt, max_tokens, ignore_eos)
    url = api_url(base_url, path)
    clock = time.perf_counter
    tally = _Tally(endpoint)
    framer = _Framer()
    done = False  # [DONE] seen: the rest of the body is drained so the connection is reused
    keepalive = 0  # lines that were not token chunks (to say so in a stall message)

    t_send = clock()
    last_token = t_send
    try:
        with client.stream("POST", url, json=body, timeout=_timeouts(stall_timeout_s)) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise _status_error(resp, client, endpoint)
            for line in _lines(resp.iter_bytes()):
                now = clock()
                if done:
                    continue
                if now - last_token > stall_timeout_s:
                    if tally.finish_reason is not None:
                        break  # finished, then silence or pings without [DONE]: the run is complete
                    pings = f"; {keepalive} keep-alive lines arrived meanwhile" if keepalive else ""
                    raise ProbeStalled(
                        f"no token for {now - last_token:.1f} s (stall timeout {stall_timeout_s:g} s) "
                        f"{tally.progress(max_tokens)}{pings}", stall_timeout_s)
                item = framer.feed(line)
                if item is not None:
                    event, obj = item
                    if obj is _DONE:
                        done = True
                    elif tally.feed(obj, event, now):
                        last_token = now
                        continue
                if line:
                    keepalive += 1
            else:
                item = None if done else framer.flush()
                if item is not None:
                    tally.feed(item[1], item[0], clock())
    except httpx.HTTPError as e:
        if not done and tally.finish_reason is None:
            raise probe_error_from(e, url, stall_timeout_s, tally.progress(max_tokens)) from e
    return _metrics(tally, t_send, max_tokens, ignore_eos, ended=done or tally.finish_reason is not None)


def _metrics(tally: _Tally, t_send: float, max_tokens: int, ignore_eos: bool, ended: bool) -> RunMetrics:
    times, fr = tally.times, tally.finish_reason
    if not ended:
        raise ProbeDisconnected(f"the stream ended without [DONE] or a finish_reason {tally.progress(max_tokens)}")
    if not times:
        raise ProbeError(f"stream produced no tokens (finish_reason={fr!r})")
    source: TokensSource
    if tally.usage_tokens is not None:
        tokens, source = tally.usage_tokens, "usage"
    elif ignore_eos and fr == "length":
        tokens, source = max_tokens, "max_tokens"
    else:
        tokens, source = len(times), "chunks"
    if ignore_eos and tokens < max_tokens and (source == "usage" or fr not in (None, "length")):
        ended_by = f"finish_reason {fr!r}" if fr else "the stream's end"
        raise ProbeIncomplete(
            f"the stream ended before max_tokens: {ended_by} {tally.progress(max_tokens)}, although "
            "ignore_eos was set (an aborted request, a stop string, or a server that ignores ignore_eos)")
    burst = is_burst(times, tokens)
    itl_med = itl_p99 = None
    if len(times) >= 2 and not burst:
        gaps = sorted(b - a for a, b in pairwise(times))
        itl_med, itl_p99 = percentile(gaps, 50.0), percentile(gaps, 99.0)
    return RunMetrics(
        ttft_s=times[0] - t_send,
        e2e_s=times[-1] - t_send,
        completion_tokens=tokens,
        tokens_source=source,
        itl_median_s=itl_med,
        itl_p99_s=itl_p99,
        chunks=len(times),
        content_deltas=tally.content_deltas,
        reasoning_deltas=tally.reasoning_deltas,
        text="".join(tally.content),
        finish_reason=fr,
        timing_measurable=not burst,
        reasoning="".join(tally.reasoning),
    )


# --------------------------------------------------------------------------------------------
# the probe loop


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
    max_tokens: int = 512,
    warmup: int = 1,
    repeats: int | StopRule = 3,
    stall_timeout_s: float = 60.0,
    on_run: Callable[[int, RunMetrics], None] | None = None,
    on_event: Callable[[str, str], None] | None = None,
    endpoint: Endpoint | str = "chat",
    client: httpx.Client | None = None,
    api_key: str | None = None,
) -> ProbeResult:
    """The probe loop of ``nccl-tune probe`` and of the sweep: ``warmup`` unrecorded streams,
    then recorded streams until the stop rule says enough, all on one keep-alive client.

    ``repeats``: a count (``FixedRuns(repeats)``) or a :class:`StopRule`, asked after each
    recorded run. ``model=None``: ``discover_model(base_url)``. ``client``: a caller-owned
    client (not closed here; it carries its own API key); otherwise one is made with
    ``api_key`` and closed at the end. ``on_event(phase, detail)`` is called before each stream,
    phase "warmup" (detail "1/2") or "probing" (detail "run 1/3", or for a rule "run 4 (…, at
    most 15)"); ``on_run(i, metrics)`` after each recorded run, i = 0, 1, ...

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
                               stall_timeout_s=stall_timeout_s, endpoint=endpoint)

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
            result.runs.append(m)
            if on_run is not None:
                on_run(len(result.runs) - 1, m)
            if rule.done(result.runs):
                break
        return result
    finally:
        if client is None:
            c.close()


# --------------------------------------------------------------------------------------------
# the smoke check


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`smoke_check` (units: tokens).

    ``ok``: ``expect`` found (case-insensitive) in the answer; ``answer``: the content of the
    last attempt; ``reasoning``: its reasoning text; ``finish_reason`` of the last attempt;
    ``max_tokens``: the budget of the last attempt; ``attempts``: requests made (1 or 2).
    Unpacks as ``(ok, text)`` (text: the answer, or the reasoning when there is no answer), the
    shape callers of the old ``smoke_check`` use.
    """

    ok: bool
    answer: str
    reasoning: str
    finish_reason: str | None
    max_tokens: int
    attempts: int

    @property
    def cut_off(self) -> bool:
        """True when the answer is missing because the budget ran out (finish_reason
        ``length``), e.g. while the model was still reasoning: never a wrong answer."""
        return not self.ok and self.finish_reason == "length"

    @property
    def wrong(self) -> bool:
        """True when the model finished an answer without ``expect``: a real wrong output."""
        return not self.ok and not self.cut_off

    def describe(self, expect: str) -> str:
        """One line saying what happened, for a trial's cause or a warning."""
        tries = f" ({self.attempts} attempts, last with max_tokens={self.max_tokens})" if self.attempts > 1 else ""
        if self.ok:
            return f"answered {self.answer[:120]!r}{tries}"
        if self.cut_off:
            what = "while reasoning" if self.reasoning and not self.answer.strip() else "mid-answer"
            return (f"cut off {what} at max_tokens={self.max_tokens}{tries}; the answer could not be "
                    f"checked for {expect!r} (not a wrong answer: give the check more tokens)")
        return f"answered {(self.answer or self.reasoning)[:120]!r}, expected {expect!r}{tries}"

    def __iter__(self) -> Iterator[Any]:
        return iter((self.ok, self.answer or self.reasoning))


def smoke_check(
    client: httpx.Client,
    base_url: str,
    model: str,
    prompt: str = SMOKE_PROMPT,
    expect: str = SMOKE_EXPECT,
    max_tokens: int = SMOKE_MAX_TOKENS,
    timeout_s: float = 60.0,
    *,
    endpoint: Endpoint | str = "chat",
    retry_max_tokens: int = SMOKE_RETRY_MAX_TOKENS,
) -> CheckResult:
    """Ask ``prompt`` (streamed, temperature 0, no ignore_eos) and look for ``expect`` in the answer.

    When the first attempt is cut off by ``max_tokens`` (finish_reason ``length``) before the
    answer holds ``expect`` (a reasoning model spends the budget thinking), it is asked again once
    with ``retry_max_tokens`` (when larger): room to answer. A check still cut off is
    ``CheckResult.cut_off``, never ``wrong``. ``timeout_s``: the stall timeout (s without a
    token), so a long reasoning answer is not cut by a whole-request timeout.
    Raises ProbeConnectError, ProbeStalled, ProbeDisconnected, ProbeHTTPError, ProbeError.
    """
    budgets = [max_tokens] + ([retry_max_tokens] if retry_max_tokens > max_tokens else [])
    result: CheckResult | None = None
    for attempt, budget in enumerate(budgets, 1):
        m = stream_once(client, base_url, model=model, prompt=prompt, max_tokens=budget,
                        stall_timeout_s=timeout_s, endpoint=endpoint, ignore_eos=False)
        result = CheckResult(ok=expect.lower() in m.text.lower(), answer=m.text, reasoning=m.reasoning,
                             finish_reason=m.finish_reason, max_tokens=budget, attempts=attempt)
        if not result.cut_off:
            break
    assert result is not None  # budgets is never empty
    return result
