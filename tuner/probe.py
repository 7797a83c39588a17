"""Single-stream decode probe: stream one chat completion and time it.

Definitions follow REFERENCE.md section 7 (field-standard):

* Clock: ``time.perf_counter``; t_send is taken just before the request is sent.
* TTFT (s): first chunk carrying content, reasoning (``delta.reasoning`` or
  ``delta.reasoning_content``) or tool calls, from t_send.  The role-only chunk does not count.
* E2E (s): arrival of the last token-bearing chunk, from t_send.
* Output tokens: ``usage.completion_tokens`` of the final usage chunk (includes reasoning
  tokens).  Without usage the token-bearing chunks are counted instead and
  ``RunMetrics.tokens_counted`` is True (an undercount when a server batches tokens into chunks).
* output tok/s = output_tokens / E2E (the figure users quote: "512 tokens in 8.5 s").
* TPOT (s) = (E2E - TTFT) / (output_tokens - 1).  ITL: gaps between token-bearing chunks
  (per chunk, not per token).

Request body: ``stream: true``, ``stream_options: {include_usage: true}``, ``temperature: 0``,
``max_tokens``, ``ignore_eos: true`` (vLLM/SGLang extension: every run makes max_tokens tokens).

Errors (all ``ProbeError``): ``ProbeHTTPError`` (status >= 400), ``ProbeStalled`` (no chunk for
stall_timeout_s), ``ProbeDisconnected`` (connection dropped mid-stream), ``ProbeConnectError``
(nothing listening / connect timeout), plain ``ProbeError`` (zero tokens, bad SSE/JSON, an
``error`` object in the stream, no model to discover).

``stream_once`` is the unit other modules loop over (bench, sequential CI-driven repeats); it
takes a caller-owned ``httpx.Client`` so keep-alive connections are reused.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import httpx

__all__ = [
    "DEFAULT_PROMPT",
    "ProbeError",
    "ProbeHTTPError",
    "ProbeStalled",
    "ProbeDisconnected",
    "ProbeConnectError",
    "RunMetrics",
    "ProbeResult",
    "make_client",
    "percentile",
    "api_url",
    "discover_model",
    "stream_once",
    "run_probe",
    "smoke_check",
    "check_answer",
]

DEFAULT_PROMPT = "Write a long story about a lighthouse keeper and the sea."
SMOKE_PROMPT = "What is the capital of France?"
SMOKE_EXPECT = "Paris"

_BODY_EXCERPT = 500  # characters of an error body kept in ProbeHTTPError


# --------------------------------------------------------------------------------------------
# errors


class ProbeError(Exception):
    """A probe request failed or produced nothing measurable."""


class ProbeHTTPError(ProbeError):
    """The server answered with HTTP status >= 400.  ``.status`` (int), ``.body_excerpt`` (str)."""

    def __init__(self, status: int, body_excerpt: str):
        self.status = status
        self.body_excerpt = body_excerpt
        super().__init__(f"HTTP {status}: {body_excerpt}" if body_excerpt else f"HTTP {status}")


class ProbeStalled(ProbeError):
    """No chunk arrived for ``stall_timeout_s`` seconds (``.timeout_s``)."""

    def __init__(self, message: str, timeout_s: float):
        self.timeout_s = timeout_s
        super().__init__(message)


class ProbeDisconnected(ProbeError):
    """The connection closed or reset before the stream finished."""


class ProbeConnectError(ProbeError):
    """Could not connect to the server (refused, unreachable, connect timeout)."""


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


@dataclass(frozen=True)
class RunMetrics:
    """Timing of one streamed request (units: s, tokens, tok/s).

    ``ttft_s``/``e2e_s`` from the moment the request was sent (perf_counter);
    ``completion_tokens`` from usage unless ``tokens_counted`` (then: token-bearing chunks);
    ``itl_median_s``/``itl_p99_s``: gaps between token-bearing chunks (None with < 2 chunks);
    ``chunks``: token-bearing chunks seen; ``content_deltas``/``reasoning_deltas``: chunks with
    content / reasoning text; ``text``: generated content (reasoning excluded);
    ``finish_reason`` of the last choice that had one (None if none was sent).
    """

    ttft_s: float
    e2e_s: float
    completion_tokens: int
    tokens_counted: bool = False
    itl_median_s: float | None = None
    itl_p99_s: float | None = None
    chunks: int = 0
    content_deltas: int = 0
    reasoning_deltas: int = 0
    text: str = ""
    finish_reason: str | None = None

    @property
    def output_tok_s(self) -> float:
        """completion_tokens / e2e_s (tok/s)."""
        return self.completion_tokens / self.e2e_s if self.e2e_s > 0 else float("inf")

    @property
    def tpot_s(self) -> float | None:
        """(e2e_s - ttft_s) / (completion_tokens - 1) in s; None with fewer than 2 tokens."""
        if self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    def to_json(self) -> dict:
        """``{"output_tok_s","ttft_s","tpot_s","e2e_s","completion_tokens"}`` (floats in s, tok/s)."""
        return {
            "output_tok_s": self.output_tok_s,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "e2e_s": self.e2e_s,
            "completion_tokens": self.completion_tokens,
        }


@dataclass
class ProbeResult:
    """Recorded (non-warm-up) runs of one probe; the summary properties are medians."""

    runs: list[RunMetrics] = field(default_factory=list)

    def _median(self, attr: str) -> float | None:
        vals = [v for v in (getattr(r, attr) for r in self.runs) if v is not None]
        return statistics.median(vals) if vals else None

    @property
    def output_tok_s(self) -> float | None:
        """Median of per-run output tok/s (None with no runs)."""
        return self._median("output_tok_s")

    @property
    def ttft_s(self) -> float | None:
        """Median TTFT (s) over the recorded runs (None with no runs)."""
        return self._median("ttft_s")

    @property
    def tpot_s(self) -> float | None:
        """Median TPOT (s) over the recorded runs (None with no runs)."""
        return self._median("tpot_s")

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
        """True when any run had no usage and counted chunks instead (flag it to the user)."""
        return any(r.tokens_counted for r in self.runs)

    def to_json(self) -> dict:
        """``{"output_tok_s": median, "runs": [RunMetrics.to_json(), ...]}``."""
        return {"output_tok_s": self.output_tok_s, "runs": [r.to_json() for r in self.runs]}


# --------------------------------------------------------------------------------------------
# HTTP helpers


def make_client(stall_timeout_s: float = 60.0, connect_timeout_s: float = 10.0) -> httpx.Client:
    """A keep-alive ``httpx.Client`` whose read timeout is the stall timeout (s)."""
    return httpx.Client(
        timeout=httpx.Timeout(
            connect=min(connect_timeout_s, stall_timeout_s),
            read=stall_timeout_s,
            write=stall_timeout_s,
            pool=stall_timeout_s,
        ),
        headers={"Accept": "text/event-stream, application/json"},
    )


def api_url(base_url: str, path: str) -> str:
    """Join ``base_url`` (``http://h:p`` or ``http://h:p/v1``) and an API path like ``/v1/models``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[:-3]
    return base + path


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("..." if len(text) > _BODY_EXCERPT else "")


def discover_model(base_url: str, *, client: httpx.Client | None = None, timeout_s: float = 10.0) -> str:
    """``data[0].id`` of ``GET /v1/models``.

    Raises ProbeConnectError (unreachable), ProbeHTTPError (status >= 400), ProbeError (no
    model listed or not JSON).
    """
    url = api_url(base_url, "/v1/models")
    own = client is None
    c = client or httpx.Client(timeout=timeout_s)
    try:
        try:
            resp = c.get(url)
        except httpx.ConnectError as e:
            raise ProbeConnectError(f"cannot connect to {url}: {e}") from e
        except httpx.TimeoutException as e:
            raise ProbeStalled(f"no answer from {url} within {timeout_s} s", timeout_s) from e
        except httpx.TransportError as e:
            raise ProbeDisconnected(f"{url}: {type(e).__name__}: {e}") from e
        if resp.status_code >= 400:
            raise ProbeHTTPError(resp.status_code, _excerpt(resp.text))
        try:
            data = resp.json().get("data") or []
            model = data[0]["id"]
        except (ValueError, AttributeError, LookupError, TypeError) as e:
            raise ProbeError(
                f"GET {url} listed no model (expected JSON with data[0].id); pass the model name explicitly"
            ) from e
        if not isinstance(model, str) or not model:
            raise ProbeError(f"GET {url}: data[0].id is not a model name: {model!r}")
        return model
    finally:
        if own:
            c.close()


def _request(endpoint: str, model: str, prompt: str, max_tokens: int, stream: bool, ignore_eos: bool) -> tuple[str, dict]:
    body: dict = {"model": model, "max_tokens": max_tokens, "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return "/v1/chat/completions", body
    if endpoint == "completions":
        body["prompt"] = prompt
        return "/v1/completions", body
    raise ValueError(f"endpoint must be 'chat' or 'completions', not {endpoint!r}")


# --------------------------------------------------------------------------------------------
# one stream


def stream_once(
    client: httpx.Client,
    base_url: str,
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    stall_timeout_s: float = 60.0,
    endpoint: str = "chat",
) -> RunMetrics:
    """Stream one completion and time it (definitions: module docstring / REFERENCE.md s7).

    ``endpoint``: "chat" (POST /v1/chat/completions) or "completions" (POST /v1/completions).
    The per-read timeout is ``stall_timeout_s`` regardless of the client's own timeout.

    Raises ProbeHTTPError, ProbeStalled, ProbeDisconnected, ProbeConnectError, ProbeError.
    """
    path, body = _request(endpoint, model, prompt, max_tokens, stream=True, ignore_eos=True)
    url = api_url(base_url, path)
    timeout = httpx.Timeout(
        connect=min(10.0, stall_timeout_s), read=stall_timeout_s, write=stall_timeout_s, pool=stall_timeout_s
    )
    clock = time.perf_counter
    loads = json.loads

    times: list[float] = []  # arrival of token-bearing chunks
    parts: list[str] = []
    content_deltas = reasoning_deltas = 0
    usage_tokens: int | None = None
    finish_reason: str | None = None
    done = False

    t_send = clock()
    last_seen = t_send
    try:
        with client.stream("POST", url, json=body, timeout=timeout) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise ProbeHTTPError(resp.status_code, _excerpt(resp.text))
            for line in resp.iter_lines():
                now = clock()
                if done or not line.startswith("data:"):
                    # blank separators, SSE comments, event:/id: fields; after [DONE] the rest
                    # of the body is drained (not parsed) so the keep-alive connection is reused
                    continue
                if now - last_seen > stall_timeout_s:
                    raise ProbeStalled(f"no chunk for {now - last_seen:.1f} s (stall timeout {stall_timeout_s} s)", stall_timeout_s)
                last_seen = now
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    continue
                try:
                    obj = loads(payload)
                except ValueError as e:
                    raise ProbeError(f"bad SSE data (not JSON): {payload[:200]!r}") from e
                choices = obj.get("choices")
                if choices:
                    ch = choices[0]
                    token = False
                    if endpoint == "chat":
                        delta = ch.get("delta")
                        if delta:
                            c = delta.get("content")
                            if c:
                                parts.append(c)
                                content_deltas += 1
                                token = True
                            r = delta.get("reasoning") or delta.get("reasoning_content")
                            if r:
                                reasoning_deltas += 1
                                token = True
                            if delta.get("tool_calls"):
                                token = True
                    else:
                        c = ch.get("text")
                        if c:
                            parts.append(c)
                            content_deltas += 1
                            token = True
                    if token:
                        times.append(now)
                    fr = ch.get("finish_reason")
                    if fr:
                        finish_reason = fr
                usage = obj.get("usage")
                if usage:
                    ct = usage.get("completion_tokens")
                    if ct is not None:
                        usage_tokens = int(ct)
                elif "error" in obj and obj["error"]:
                    err = obj["error"]
                    msg = err.get("message", err) if isinstance(err, dict) else err
                    raise ProbeError(f"server error in stream: {_excerpt(str(msg))}")
    except httpx.ConnectError as e:
        raise ProbeConnectError(f"cannot connect to {url}: {e}") from e
    except httpx.ConnectTimeout as e:
        raise ProbeConnectError(f"connect timeout to {url}") from e
    except httpx.TimeoutException as e:
        if not done:  # after [DONE] the measurement is complete; only the drain timed out
            waited = clock() - last_seen
            raise ProbeStalled(
                f"stream stalled: no chunk for {waited:.1f} s (stall timeout {stall_timeout_s} s) after {len(times)} token chunks",
                stall_timeout_s,
            ) from e
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError) as e:
        if not done:
            raise ProbeDisconnected(f"connection dropped after {len(times)} token chunks: {type(e).__name__}: {e}") from e
    except httpx.TransportError as e:
        if not done:
            raise ProbeDisconnected(f"{type(e).__name__}: {e}") from e

    if not done and finish_reason is None:
        raise ProbeDisconnected(f"stream ended without [DONE] or finish_reason after {len(times)} token chunks")
    if not times:
        raise ProbeError(f"stream produced no tokens (finish_reason={finish_reason!r})")

    counted = usage_tokens is None
    tokens = len(times) if counted else usage_tokens
    if tokens <= 0:
        raise ProbeError("usage reports zero completion tokens")
    itl_med = itl_p99 = None
    if len(times) >= 2:
        gaps = sorted(b - a for a, b in zip(times, times[1:]))
        itl_med = percentile(gaps, 50.0)
        itl_p99 = percentile(gaps, 99.0)
    return RunMetrics(
        ttft_s=times[0] - t_send,
        e2e_s=times[-1] - t_send,
        completion_tokens=tokens,
        tokens_counted=counted,
        itl_median_s=itl_med,
        itl_p99_s=itl_p99,
        chunks=len(times),
        content_deltas=content_deltas,
        reasoning_deltas=reasoning_deltas,
        text="".join(parts),
        finish_reason=finish_reason,
    )


# --------------------------------------------------------------------------------------------
# the probe


def run_probe(
    base_url: str,
    *,
    model: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = 512,
    warmup: int = 1,
    repeats: int = 3,
    stall_timeout_s: float = 60.0,
    on_run: Callable[[int, RunMetrics], None] | None = None,
    endpoint: str = "chat",
    client: httpx.Client | None = None,
) -> ProbeResult:
    """``warmup`` unrecorded then ``repeats`` recorded sequential streams on one keep-alive client.

    ``model=None``: ``discover_model(base_url)``.  ``on_run(i, metrics)`` is called after each
    recorded run, i = 0 .. repeats-1.  The first failing run raises (see ``stream_once``).
    Returns a ProbeResult whose ``output_tok_s`` is the median over the recorded runs.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    own = client is None
    c = client or make_client(stall_timeout_s)
    try:
        if model is None:
            model = discover_model(base_url, client=c, timeout_s=min(stall_timeout_s, 30.0))
        for _ in range(max(0, warmup)):
            stream_once(c, base_url, model=model, prompt=prompt, max_tokens=max_tokens, stall_timeout_s=stall_timeout_s, endpoint=endpoint)
        result = ProbeResult()
        for i in range(repeats):
            m = stream_once(c, base_url, model=model, prompt=prompt, max_tokens=max_tokens, stall_timeout_s=stall_timeout_s, endpoint=endpoint)
            result.runs.append(m)
            if on_run is not None:
                on_run(i, m)
        return result
    finally:
        if own:
            c.close()


def smoke_check(
    client: httpx.Client,
    base_url: str,
    model: str,
    prompt: str = SMOKE_PROMPT,
    expect: str = SMOKE_EXPECT,
    max_tokens: int = 32,
    timeout_s: float = 60.0,
) -> tuple[bool, str]:
    """Non-streaming chat request (temperature 0, no ignore_eos): ``(expect in answer, answer)``.

    The comparison is case-insensitive.  The answer is ``message.content``; when that is empty
    (a reasoning model cut off by max_tokens) the reasoning text is used instead.
    Raises ProbeConnectError, ProbeStalled, ProbeDisconnected, ProbeHTTPError, ProbeError.
    """
    path, body = _request("chat", model, prompt, max_tokens, stream=False, ignore_eos=False)
    url = api_url(base_url, path)
    try:
        resp = client.post(url, json=body, timeout=timeout_s)
    except httpx.ConnectError as e:
        raise ProbeConnectError(f"cannot connect to {url}: {e}") from e
    except httpx.TimeoutException as e:
        raise ProbeStalled(f"no answer from {url} within {timeout_s} s", timeout_s) from e
    except httpx.TransportError as e:
        raise ProbeDisconnected(f"{type(e).__name__}: {e}") from e
    if resp.status_code >= 400:
        raise ProbeHTTPError(resp.status_code, _excerpt(resp.text))
    try:
        msg = resp.json()["choices"][0]["message"]
    except (ValueError, LookupError, TypeError) as e:
        raise ProbeError(f"unexpected answer shape from {url}: {_excerpt(resp.text)}") from e
    text = msg.get("content") or msg.get("reasoning") or msg.get("reasoning_content") or ""
    return expect.lower() in text.lower(), text


check_answer = smoke_check
