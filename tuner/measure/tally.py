"""What one stream carried (token chunk times, text, usage, finish) and the run's metrics from it.

* A *token chunk* is an SSE chunk whose first choice carries content (``delta.content``, or
  ``text`` on the completions endpoint), reasoning (``delta.reasoning`` or
  ``delta.reasoning_content``) or tool calls. The role-only chunk, empty deltas, ``data: {}``,
  usage-only chunks and SSE comments are not token chunks.
* Output tokens (``RunMetrics.tokens_source``): ``usage.completion_tokens`` of the last usage
  object with a non-zero count ("usage"; reasoning tokens included); without usage, and with
  ``ignore_eos`` and finish_reason ``length``, exactly ``max_tokens`` ("max_tokens"); otherwise
  the token chunks are counted ("chunks"): a lower bound, since a chunk may carry several tokens,
  flagged by ``RunMetrics.tokens_counted``.

The timing definitions: :mod:`tuner.measure.results`.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from tuner.errors import ProbeDisconnected, ProbeError, ProbeIncomplete
from tuner.measure.results import RunMetrics, TokensSource, is_burst
from tuner.measure.sse import server_error

__all__ = ["Tally", "run_metrics"]

#: Finish reasons of a request that was cut, not answered: never measured (vLLM "abort").
_ABORTED = ("abort", "error", "cancelled")


class Tally:
    """What a stream carried so far: token chunk times (perf_counter s), content and reasoning
    text, the usage count, the finish reason. ``endpoint``: "chat" reads ``delta``, else ``text``."""

    def __init__(self, endpoint: str) -> None:
        self.chat = endpoint == "chat"
        self.times: list[float] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.content_deltas = 0
        self.reasoning_deltas = 0
        self.usage_tokens: int | None = None
        self.first_usage: int | None = None  # usage.completion_tokens carried by the first token chunk
        self.finish_reason: str | None = None
        self.pieces: list[str] = []  # each content chunk's text, in order
        self.logprobs: list[Any] = []  # each token's logprob entry, as the server sent it (OpenAI shape)

    def feed(self, obj: Any, event: str, now: float) -> bool:
        """Take one payload; True when it carries a token or a finish (resets the stall clock)."""
        msg = server_error(obj, event)
        if msg is not None:
            raise ProbeError(f"server error in stream after {len(self.times)} token chunks: {msg}")
        if not isinstance(obj, dict):
            return False
        usage = obj.get("usage")
        counted: int | None = None
        if isinstance(usage, dict):
            ct = usage.get("completion_tokens")
            if isinstance(ct, int) and ct > 0:  # zeros are placeholders (usage in every chunk)
                self.usage_tokens = counted = ct
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
                    self.pieces.append(c)
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
                self.pieces.append(c)
                self.content_deltas += 1
                token = True
        self._logprobs(ch.get("logprobs"))
        if token:
            self.times.append(now)
            if len(self.times) == 1 and counted is not None:
                self.first_usage = counted  # usage per chunk: the first chunk's tokens are known
        fr = ch.get("finish_reason")
        if fr:
            self.finish_reason = str(fr)
            return True
        return token

    def _logprobs(self, lp: Any) -> None:
        """Keep a choice's ``logprobs``: chat's ``{"content": [{token, logprob, top_logprobs}]}``
        or completions' ``{"tokens", "token_logprobs", "top_logprobs"}`` (OpenAI API reference,
        "logprobs"), one entry per token as ``(token, logprob, {top token: logprob})``."""
        if not isinstance(lp, dict):
            return
        content = lp.get("content")
        if isinstance(content, list):
            for item in content:
                if isinstance(item, dict) and isinstance(item.get("token"), str):
                    top = {t["token"]: t["logprob"] for t in item.get("top_logprobs") or []
                           if isinstance(t, dict) and isinstance(t.get("token"), str)
                           and isinstance(t.get("logprob"), (int, float))}
                    self.logprobs.append((item["token"], item.get("logprob"), top))
            return
        tokens, values, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
        if isinstance(tokens, list):
            for i, tok in enumerate(tokens):
                value = values[i] if isinstance(values, list) and i < len(values) else None
                top = tops[i] if isinstance(tops, list) and i < len(tops) and isinstance(tops[i], dict) else {}
                self.logprobs.append((str(tok), value, dict(top)))

    def progress(self, max_tokens: int) -> str:
        """How far the stream got, for an error message ("after 12 token chunks of max_tokens=64")."""
        usage = f", usage {self.usage_tokens} tokens" if self.usage_tokens is not None else ""
        return f"after {len(self.times)} token chunks{usage} of max_tokens={max_tokens}"


def run_metrics(tally: Tally, t_send: float, max_tokens: int, ignore_eos: bool, ended: bool,
                min_tokens: int | None = None) -> RunMetrics:
    """The :class:`~tuner.measure.results.RunMetrics` of a finished stream (``t_send``: perf_counter
    s when the request was sent; ``ended``: [DONE] or a finish_reason arrived; the token count:
    the module docstring).

    An answer that ends before ``max_tokens`` although ``ignore_eos`` was set (a server that
    accepts the field and ignores it: sgl-project/sglang PR #5264, huggingface/text-generation-
    inference #1544) is measured for the tokens that came when ``min_tokens`` is given and at
    least that many came (``ended_early``); an aborted one (finish ``abort``/``error``) never is.

    Multi-token chunks (trtllm-serve's ``stream_interval``, speculative decoding: NVIDIA/
    TensorRT-LLM PR #14312, PR #6512): most chunks carry more than one token (tokens - chunks >
    chunks / 2, the count from usage or ``max_tokens``) makes the run ``chunked``; the tokens of
    the first chunk are usage's count in it when the server sends usage per chunk, else the mean
    per chunk (``first_chunk_tokens``), never counted as decoded after it.

    Raises ProbeDisconnected (not ``ended``), ProbeError (no token chunk), ProbeIncomplete (with
    ``ignore_eos``, fewer than ``max_tokens`` tokens by usage or an abort/stop finish, beyond the
    rule above).
    """
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
    early = False
    if ignore_eos and tokens < max_tokens and (source == "usage" or fr not in (None, "length")):
        ended_by = f"finish_reason {fr!r}" if fr else "the stream's end"
        if min_tokens is None or fr in _ABORTED:
            raise ProbeIncomplete(
                f"the stream ended before max_tokens: {ended_by} {tally.progress(max_tokens)}, although "
                "ignore_eos was set (an aborted request, a stop string, or a server that ignores ignore_eos)")
        if tokens < min_tokens:
            raise ProbeIncomplete(
                f"every answer ends early and this one too soon to measure: {ended_by} after {tokens} tokens, "
                f"fewer than the {min_tokens} a rate needs (probe.max_tokens = {max_tokens}; the server ignores "
                "ignore_eos): set probe.prompt to one that asks for a long answer")
        early = True
    k = len(times)
    chunked = k >= 2 and tokens - k > k / 2
    first = float(tally.first_usage) if tally.first_usage is not None and tally.first_usage <= tokens else (
        tokens / k if chunked else 1.0)
    burst = is_burst(times, tokens)
    itl_med = itl_p99 = None
    if len(times) >= 2 and not burst and not chunked:
        gaps = [b - a for a, b in pairwise(times)]
        itl_med, itl_p99 = (float(q) for q in np.percentile(gaps, [50.0, 99.0]))  # linear, numpy's default
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
        first_chunk_tokens=first,
        chunked=chunked,
        ended_early=early,
        pieces=tuple(tally.pieces),
        logprobs=tuple(tally.logprobs),
    )
