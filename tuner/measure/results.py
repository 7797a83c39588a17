"""What a probe measured: one stream's timing (:class:`RunMetrics`), the recorded runs and their
medians (:class:`ProbeResult`), and the console table of ``nccl-tune probe``.

Definitions (the field-standard ones of vLLM ``vllm/benchmarks/serve.py``, formerly
``benchmarks/benchmark_serving.py``, and SGLang ``python/sglang/bench_serving.py``):

* Clock: ``time.perf_counter``; t_send is taken just before the request is sent.
* TTFT (s): arrival of the first token chunk (:mod:`tuner.measure.tally`), from t_send. E2E (s):
  arrival of the last one.
* Output tokens: ``RunMetrics.tokens_source`` (the rules: :mod:`tuner.measure.tally`).
* output tok/s = output_tokens / E2E (the figure users quote: "512 tokens in 8.5 s").
* decode tok/s = (output_tokens - tokens of the first chunk) / (E2E - TTFT): the tokens that
  came after the first chunk over the time from the first chunk to the last; with one token per
  chunk that is 1 / TPOT, TPOT (s) = (E2E - TTFT) / (output_tokens - 1). ITL: gaps between token
  chunks (per chunk, not per token). All need the tokens to arrive as they are made: see
  :func:`is_burst` for when they do not (``RunMetrics.timing_measurable``). With multi-token
  chunks (``RunMetrics.chunked``: trtllm-serve's ``stream_interval``, speculative decoding;
  NVIDIA/TensorRT-LLM PR #14312, PR #6512) TPOT and ITL are not measurable (a chunk times
  several tokens at once) and 1 / TPOT would count the first chunk's tokens as decoded after it
  (+32 % reported there); decode tok/s stays, from the definition above.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["MIN_TOKEN_GAP_S", "ProbeResult", "RunMetrics", "TokensSource", "format_result", "is_burst"]

#: Shortest plausible time per token of one stream (s): 10,000 tok/s. The fastest single-stream
#: decode published (wafer-scale and LPU systems, small models) is about 2,000-3,000 tok/s, so a
#: stream never makes tokens this fast; a backlog read at once arrives at a few us per chunk
#: (one read, then JSON parsing), 20-100x faster. See :func:`is_burst`.
MIN_TOKEN_GAP_S = 1e-4

#: Where a run's output token count came from (:mod:`tuner.measure.tally`).
TokensSource = Literal["usage", "max_tokens", "chunks"]


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
    ``tokens_source`` ("usage", "max_tokens" or "chunks"; :mod:`tuner.measure.tally`).
    ``itl_median_s``/``itl_p99_s``: gaps between token chunks (None with < 2 chunks or in a
    burst); ``chunks``: token chunks seen; ``content_deltas``/``reasoning_deltas``: chunks with
    content / reasoning text; ``text``: generated content; ``reasoning``: reasoning text;
    ``finish_reason`` of the last choice that had one (None if none was sent); ``dropped``: the
    probe fields the server refused, so the request went without them (``("stream_options",)``:
    no usage asked for; :data:`tuner.measure.client.DROPPABLE_FIELDS`); ``first_chunk_tokens``:
    tokens of the first token chunk (usage per chunk, else 1, else with ``chunked`` the mean per
    chunk); ``chunked``: most chunks carried several tokens (TPOT and ITL not measurable);
    ``ended_early``: the answer ended before ``max_tokens`` although ``ignore_eos`` was set, and
    was measured for the tokens that came (:func:`tuner.measure.tally.run_metrics`).
    ``pieces``: each content chunk's text, in order; ``logprobs``: one ``(token, logprob, {top
    token: logprob})`` per token when the request asked for them and the server sent them.
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
    dropped: tuple[str, ...] = ()
    first_chunk_tokens: float = 1.0
    chunked: bool = False
    ended_early: bool = False
    pieces: tuple[str, ...] = ()
    logprobs: tuple[tuple[str, float | None, dict[str, float]], ...] = ()

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
        when the timing is not measurable (a burst, multi-token chunks)."""
        if self.completion_tokens < 2 or not self.timing_measurable or self.chunked:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    @property
    def decode_tok_s(self) -> float | None:
        """(completion_tokens - first_chunk_tokens) / (e2e_s - ttft_s) (tok/s, prefill and the
        first chunk excluded; 1 / TPOT with one token per chunk); None in a burst, or with
        nothing after the first chunk."""
        span, after = self.e2e_s - self.ttft_s, self.completion_tokens - self.first_chunk_tokens
        if not self.timing_measurable or span <= 0 or after <= 0:
            return None
        return after / span

    def to_json(self) -> dict[str, Any]:
        """``{"output_tok_s", "ttft_s", "tpot_s", "decode_tok_s", "e2e_s", "completion_tokens",
        "tokens_source", "timing_measurable", "chunked", "ended_early"}`` (floats in s and tok/s;
        None when not measurable)."""
        return {
            "output_tok_s": self.output_tok_s,
            "ttft_s": self.ttft_s if self.timing_measurable else None,
            "tpot_s": self.tpot_s,
            "decode_tok_s": self.decode_tok_s,
            "e2e_s": self.e2e_s,
            "completion_tokens": self.completion_tokens,
            "tokens_source": self.tokens_source,
            "timing_measurable": self.timing_measurable,
            "chunked": self.chunked,
            "ended_early": self.ended_early,
        }


@dataclass
class ProbeResult:
    """Recorded (non-warm-up) runs of one probe; the summary properties are medians.

    TTFT, TPOT and decode tok/s are reported only when every run's timing is measurable
    (``timing_measurable``): a probe that mixes bursty and paced runs gives None rather than a
    median over a subset.
    """

    runs: list[RunMetrics] = field(default_factory=list)
    #: Runs whose tokens came in a burst, made again (``run_probe``'s ``redo_bursts``): not in ``runs``.
    bursts: list[RunMetrics] = field(default_factory=list)

    def _median(self, attr: str, timing: bool = False) -> float | None:
        if timing and not (self.decode_measurable if attr == "decode_tok_s" else self.timing_measurable):
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
        """Per recorded run: decode tok/s (:attr:`RunMetrics.decode_tok_s`); empty when any run
        arrived in a burst."""
        if not self.decode_measurable:
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
    def dropped(self) -> tuple[str, ...]:
        """The probe fields any run went without because the server refused them (sorted)."""
        return tuple(sorted({name for r in self.runs for name in r.dropped}))

    def counting_note(self) -> str:
        """One line saying how tokens were counted once the server refused a field, or ``""``."""
        if not self.dropped:
            return ""
        how = {"usage": "from the usage the server still sent",
               "max_tokens": "as max_tokens (ignore_eos and finish_reason length)",
               "chunks": "from token chunks (a lower bound: tok/s is a lower bound too)"}
        source = self.tokens_source
        return (f"the server refused {', '.join(self.dropped)} (HTTP 400): the probe sent its requests "
                f"without it, so no usage was asked for; tokens were counted {how.get(source or '', 'not at all')}")

    @property
    def tokens_source(self) -> TokensSource | None:
        """The weakest source over the runs: "chunks" > "max_tokens" > "usage" (None: no runs)."""
        sources = {r.tokens_source for r in self.runs}
        weakest_first: tuple[TokensSource, ...] = ("chunks", "max_tokens", "usage")
        return next((s for s in weakest_first if s in sources), None)

    @property
    def timing_measurable(self) -> bool:
        """False when any run's tokens arrived in a burst or in multi-token chunks (TTFT/TPOT/ITL
        not measurable)."""
        return all(r.timing_measurable and not r.chunked for r in self.runs)

    @property
    def decode_measurable(self) -> bool:
        """True when no run's tokens arrived in a burst: decode tok/s (tokens after the first
        chunk over the time after it) is measurable, multi-token chunks included."""
        return all(r.timing_measurable for r in self.runs)

    @property
    def chunked(self) -> bool:
        """True when any run's chunks carried several tokens each (TPOT not measurable)."""
        return any(r.chunked for r in self.runs)

    @property
    def ended_early(self) -> bool:
        """True when any run's answer ended before max_tokens and was measured for what came."""
        return any(r.ended_early for r in self.runs)

    def early_note(self, max_tokens: int, kind_title: str = "", honours_ignore_eos: bool = True) -> str:
        """One line when answers ended before ``max_tokens`` (measured for what came), or ``""``:
        how many tokens came and the keys to change."""
        early = [r for r in self.runs if r.ended_early]
        if not early:
            return ""
        came = sorted(r.completion_tokens for r in early)
        who = (f"{kind_title} does not honour ignore_eos" if kind_title and not honours_ignore_eos
               else "the server ended its answers although ignore_eos was set")
        return (f"answers ended before probe.max_tokens = {max_tokens} ({came[0]}-{came[-1]} tokens came; {who}): "
                "tok/s is measured over the tokens that came; to measure full answers lower probe.max_tokens "
                f"(to about {came[0]}) or set probe.prompt to one that asks for a long answer")

    def burst_note(self) -> str:
        """One line when runs whose tokens came in a burst were made again
        (:attr:`bursts`), or when recorded runs still did (TTFT/TPOT/decode tok/s empty), or ``""``."""
        if not self.decode_measurable:
            n = sum(not r.timing_measurable for r in self.runs)
            return (f"the tokens of {n} of {len(self.runs)} recorded runs arrived in a burst (most within a few ms, "
                    "a server or host too busy to send them as they were made)"
                    + (f", and {len(self.bursts)} more made again did too" if self.bursts else "")
                    + ": TTFT, TPOT and decode tok/s are not measurable; output tok/s (tokens / E2E) is")
        if self.bursts:
            return (f"{len(self.bursts)} run{'s' if len(self.bursts) != 1 else ''} whose tokens arrived in a burst "
                    "(a server or host too busy to send them as they were made) "
                    f"{'were' if len(self.bursts) != 1 else 'was'} made again, so every recorded run is paced")
        return ""

    def chunk_note(self) -> str:
        """One line when chunks carried several tokens each, or ``""``."""
        chunked = [r for r in self.runs if r.chunked]
        if not chunked:
            return ""
        per = statistics.median(r.completion_tokens / max(1, r.chunks) for r in chunked)
        return (f"the server sent about {per:.1f} tokens per stream chunk (a stream interval, or speculative "
                "decoding): TPOT and ITL are not measurable and not reported; decode tok/s counts the tokens "
                "after the first chunk over the time from the first chunk to the last")

    def to_json(self) -> dict[str, Any]:
        """``{"output_tok_s", "decode_tok_s", "tokens_source", "tokens_counted",
        "timing_measurable", "chunked", "ended_early", "runs": [RunMetrics.to_json(), ...]}``
        (medians in tok/s)."""
        return {
            "output_tok_s": self.output_tok_s,
            "decode_tok_s": self.decode_tok_s,
            "tokens_source": self.tokens_source,
            "tokens_counted": self.tokens_counted,
            "timing_measurable": self.timing_measurable,
            "chunked": self.chunked,
            "ended_early": self.ended_early,
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
        how = "tokens after the first chunk / time after it" if result.chunked else "1 / TPOT"
        lines.append(f"median decode tok/s ({how}): {result.decode_tok_s:.2f}{bound}")
    if result.tokens_counted:
        lines.append("note: the server sent no usage chunk and no finish_reason 'length', so tokens were "
                     "counted from chunks; a chunk may carry several tokens: counts, output tok/s and decode "
                     "tok/s are lower bounds (TPOT an upper bound).")
    elif result.tokens_source == "max_tokens":
        lines.append("note: no usage chunk; with ignore_eos and finish_reason 'length' the count is max_tokens.")
    if result.ended_early:
        lines.append("note: answers ended before max_tokens although ignore_eos was set (the server ignores it): "
                     "tok/s is over the tokens that came; lower max_tokens, or ask for a long answer, to measure "
                     "full answers.")
    if result.chunked and result.decode_measurable:
        lines.append(f"note: {result.chunk_note()}.")
    if not result.decode_measurable:
        lines.append("note: tokens arrived in a burst (most of them within a few ms), not as they were made: "
                     "TTFT, TPOT and decode tok/s are not measurable; output tok/s (tokens / E2E) is.")
    return "\n".join(lines)
