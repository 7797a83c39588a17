"""What a stream's chunks make of its rates (tuner/measure/tally.py, run_metrics): multi-token
chunks (trtllm-serve's stream_interval) and answers that end before max_tokens."""

from __future__ import annotations

import pytest

from tuner.errors import ProbeIncomplete
from tuner.measure.tally import Tally, run_metrics


def _stream(chunks: list[int], step_s: float = 0.01, usage: str = "end", finish: str = "length") -> Tally:
    """A chat stream of ``chunks`` (tokens per chunk), one decode step of ``step_s`` per token,
    the first chunk at 1.0 s; usage at the end, in every chunk (cumulative), or none."""
    tally, made, now = Tally("chat"), 0, 1.0
    for i, n in enumerate(chunks):
        if i:
            now += n * step_s
        made += n
        obj: dict = {"choices": [{"delta": {"content": "x" * n},
                                  "finish_reason": finish if i == len(chunks) - 1 else None}]}
        if usage == "every":
            obj["usage"] = {"completion_tokens": made}
        tally.feed(obj, "", now)
    if usage == "end":
        tally.feed({"choices": [], "usage": {"completion_tokens": made}}, "", now)
    return tally


def test_one_token_a_chunk_is_one_over_tpot():
    m = run_metrics(_stream([1] * 32), 0.5, 32, True, ended=True)
    assert not m.chunked and m.tpot_s == pytest.approx(0.01)
    assert m.decode_tok_s == pytest.approx(100.0)


@pytest.mark.parametrize("usage", ["end", "every"])
def test_chunks_of_8_count_only_the_tokens_after_the_first_chunk(usage):
    m = run_metrics(_stream([8] * 4, usage=usage), 0.5, 32, True, ended=True)
    assert m.chunked and m.first_chunk_tokens == 8
    assert m.tpot_s is None and m.itl_median_s is None  # not measurable per token
    assert m.decode_tok_s == pytest.approx(100.0)  # 24 tokens in 0.24 s; 1 / TPOT would say 129
    assert m.timing_measurable  # not a burst: output tok/s and TTFT stand


def test_a_lone_first_token_then_chunks_is_never_reported_high():
    m = run_metrics(_stream([1, 8, 8, 8, 7], usage="every"), 0.5, 32, True, ended=True)
    assert m.first_chunk_tokens == 1 and m.decode_tok_s == pytest.approx(100.0)
    m = run_metrics(_stream([1, 8, 8, 8, 7], usage="end"), 0.5, 32, True, ended=True)
    assert m.decode_tok_s <= 100.0  # the first chunk's tokens guessed as the mean: low, never high


def test_an_answer_that_ends_early_is_measured_for_what_came():
    tally = _stream([1] * 20, usage="none", finish="stop")
    with pytest.raises(ProbeIncomplete):
        run_metrics(tally, 0.5, 64, True, ended=True)  # no min_tokens: the old rule
    m = run_metrics(tally, 0.5, 64, True, ended=True, min_tokens=8)
    assert m.ended_early and m.completion_tokens == 20 and m.decode_tok_s == pytest.approx(100.0)


def test_too_few_tokens_or_an_abort_still_stop():
    with pytest.raises(ProbeIncomplete, match=r"fewer than the 8 a rate needs.*probe\.prompt"):
        run_metrics(_stream([1] * 5, usage="none", finish="stop"), 0.5, 64, True, ended=True, min_tokens=8)
    with pytest.raises(ProbeIncomplete, match="abort"):
        run_metrics(_stream([1] * 20, usage="none", finish="abort"), 0.5, 64, True, ended=True, min_tokens=8)
