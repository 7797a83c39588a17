"""One streamed completion, timed: the request, the stream read line by line, the stall clock.

Request body: ``stream: true``, ``stream_options: {include_usage: true}``, ``temperature: 0``,
``max_tokens``, ``ignore_eos: true`` (vLLM/SGLang sampling-parameter extension: every run makes
exactly max_tokens tokens). Endpoints: ``"chat"`` (``POST /v1/chat/completions``) or
``"completions"`` (``POST /v1/completions``, for models without a chat template).

A stall is time without a token: keep-alive traffic (SSE comments, ``data: {}``, empty or
role-only deltas, usage-only chunks) never resets the stall clock, only a token chunk or a chunk
with a finish_reason does. httpx's read timeout restarts on any byte, so the probe checks its own
clock after every line; a stream that sends nothing at all ends at httpx's read timeout, set to
the same ``stall_timeout_s``. A stall is therefore reported at the first line that arrives after
``stall_timeout_s`` without a token (within one keep-alive interval of it), or
``stall_timeout_s`` after the last byte when nothing more comes: never later than twice
``stall_timeout_s`` after the last token. Before the first token the stall clock starts at the
response headers, not at the send: a server that holds a request behind a warm-up gate and
then answers it (sgl-project/sglang #33719) has not stalled for the time it held it.

A 400 or 422 naming a field the probe added (``stream_options``:
:data:`tuner.measure.client.DROPPABLE_FIELDS`) sends the request once more without it, and every
later request on that client goes without it (``RunMetrics.dropped`` says so; without usage the
tokens are counted as :mod:`tuner.measure.tally` says). A 200 whose body is a bare JSON error
(``{"error": {...}}``, ``{"object": "error", ...}``) instead of SSE is a ``ProbeError`` quoting
the server's message.

A run ends at ``data: [DONE]``, or at a chunk that holds a finish_reason once usage is known:
the rest of the body is read for at most :data:`tuner.measure.client.DRAIN_S` s (so the
connection is reused) and ignored: pings after [DONE], or silence, from a server that never
closes cannot hold the run (:class:`tuner.measure.client.DrainBound`; the connection is then
closed). An error body (status >= 400) is read for at
most :data:`tuner.measure.client.ERROR_BODY_BYTES` bytes and about
:data:`tuner.measure.client.DRAIN_S` s. A request that gets no response headers at all within
``stall_timeout_s`` raises :class:`tuner.errors.ProbeNoAnswer` (a ``ProbeStalled``): before
readiness is proven that is a warm-up, waited on (:func:`tuner.server.readiness.wait_ready`).

Errors: ``ProbeIncomplete`` (ended before max_tokens with ignore_eos), ``ProbeDisconnected``
(connection dropped, or ended without [DONE] or a finish), plain ``ProbeError`` (no tokens, bad
SSE/JSON, an error event or object in the stream), and those of :mod:`tuner.measure.client`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

import httpx

from tuner.errors import ProbeError, ProbeFirstTokenLate, ProbeNoAnswer, ProbeStalled
from tuner.measure.client import (
    DRAIN_S,
    DrainBound,
    api_url,
    bounded_body,
    probe_error_from,
    refused_field,
    refused_fields,
    request_timeouts,
    status_error,
    unframed_error,
)
from tuner.measure.results import RunMetrics
from tuner.measure.sse import DONE, SseFramer, timed_lines
from tuner.measure.tally import Tally, run_metrics

__all__ = ["Endpoint", "stream_once"]

#: The API a probe streams from.
Endpoint = Literal["chat", "completions"]

_SSE_FIELDS = ("data", "event", "id", "retry", ":")
_ENDPOINT_PATHS: dict[str, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


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
    min_tokens: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RunMetrics:
    """Stream one completion and time it (the request and the stall rules: module docstring;
    the definitions: :mod:`tuner.measure.results`, :mod:`tuner.measure.tally`; SSE:
    :mod:`tuner.measure.sse`).

    ``endpoint``: "chat" or "completions" (ValueError otherwise). ``stall_timeout_s`` (s):
    longest time without a token, keep-alive traffic or not; the client's own timeout is
    overridden. ``ignore_eos`` True (the probe) makes a stream that ends before ``max_tokens``
    an error, unless ``min_tokens`` is given: an answer that ends early (finish ``stop``, a
    server that ignores ``ignore_eos``) with at least ``min_tokens`` tokens is measured for the
    tokens that came (``RunMetrics.ended_early``); False (the smoke check) takes the answer as it
    ends. A stall before the first token, after the response headers came, is
    ``ProbeFirstTokenLate``. ``extra``: more request fields (``seed``, ``logprobs``); one a 400
    names (:data:`tuner.measure.client.DROPPABLE_FIELDS`) is dropped as ``stream_options`` is.

    Raises ProbeHTTPError, ProbeStalled (ProbeNoAnswer: no response headers), ProbeDisconnected, ProbeConnectError, ProbeIncomplete
    (ended before max_tokens with ignore_eos: finish_reason abort/stop, usage short), ProbeError
    (no tokens, bad SSE/JSON, an error event or object in the stream).
    """
    path, body = _request(endpoint, model, prompt, max_tokens, ignore_eos)
    body.update(extra or {})
    dropped = tuple(sorted(refused_fields(client) & body.keys()))  # refused before: sent without
    for name in dropped:
        del body[name]
    url = api_url(base_url, path)
    retry = False  # a 400 named a field the probe added: sent once more without it
    unframed: list[str] = []  # body lines that are not SSE (a bare JSON error after a 200)
    clock = time.perf_counter
    tally = Tally(endpoint)
    framer = SseFramer()
    done = False  # [DONE] seen
    keepalive = 0  # lines that were not token chunks (to say so in a stall message)

    t_send = clock()
    last_token = t_send
    answered = False  # response headers arrived (a request without them may be a warm-up gate)
    ended: float | None = None  # [DONE], or a finish with usage: the rest is drained, bounded
    try:
        with client.stream("POST", url, json=body, timeout=request_timeouts(stall_timeout_s)) as resp:
            answered = True
            last_token = clock()  # the stall clock starts at the headers: the wait for them is httpx's bound
            if resp.status_code >= 400:
                text = bounded_body(resp)
                refused = refused_field(resp, body, text)
                if refused is None:
                    raise status_error(resp, client, endpoint, text=text)
                retry = bool(refused_fields(client, add=refused))
            drain = DrainBound(resp)
            try:
                for line, now in () if retry else timed_lines(resp.iter_bytes(), clock):
                    if ended is not None:
                        if now - ended > DRAIN_S:
                            break  # pings after the end: the run is over
                        continue
                    if now - last_token > stall_timeout_s:
                        if tally.finish_reason is not None:
                            break  # finished, then silence or pings without [DONE]: the run is complete
                        pings = f"; {keepalive} keep-alive lines arrived meanwhile" if keepalive else ""
                        raise (ProbeStalled if tally.times else ProbeFirstTokenLate)(
                            f"no token for {now - last_token:.1f} s (stall timeout {stall_timeout_s:g} s) "
                            f"{tally.progress(max_tokens)}{pings}", stall_timeout_s)
                    item = framer.feed(line)
                    if item is not None:
                        event, obj = item
                        if obj is DONE:
                            done, ended = True, now
                            drain.start()  # the body's end is read for a second at most (reuse)
                            continue
                        token = tally.feed(obj, event, now)
                        if tally.finish_reason is not None and tally.usage_tokens is not None:
                            ended = now
                            drain.start()
                        if token:
                            last_token = now
                            continue
                    if line:
                        keepalive += 1
                        if item is None and len(unframed) < 200 and not line.startswith(_SSE_FIELDS):
                            unframed.append(line)
                else:
                    item = None if ended is not None or retry else framer.flush()
                    if item is not None:
                        tally.feed(item[1], item[0], clock())
            finally:
                drain.cancel()
    except httpx.HTTPError as e:
        if not answered and isinstance(e, httpx.ReadTimeout):
            raise ProbeNoAnswer(f"no response headers from {url} for {stall_timeout_s:g} s (stall timeout): "
                                "the request was accepted and not answered", stall_timeout_s) from e
        if not done and tally.finish_reason is None:
            err = probe_error_from(e, url, stall_timeout_s, tally.progress(max_tokens))
            if isinstance(err, ProbeStalled) and not tally.times:
                err = ProbeFirstTokenLate(f"{err} (the response headers came at once)", stall_timeout_s)
            raise err from e
    if retry:
        return stream_once(client, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                           stall_timeout_s=stall_timeout_s, endpoint=endpoint, ignore_eos=ignore_eos,
                           min_tokens=min_tokens, extra=extra)
    if not tally.times and unframed:
        auth = client.headers.get("Authorization", "")
        message = unframed_error(unframed, auth[7:] if auth.startswith("Bearer ") else None)
        if message:
            raise ProbeError(f"HTTP {resp.status_code} with an error body instead of an event stream: {message}")
    metrics = run_metrics(tally, t_send, max_tokens, ignore_eos, ended=done or tally.finish_reason is not None,
                          min_tokens=min_tokens)
    return replace(metrics, dropped=dropped) if dropped else metrics


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
