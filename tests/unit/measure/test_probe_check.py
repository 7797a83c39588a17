"""The smoke check: right, wrong, cut off (reasoning or answering), endpoints, errors."""

from __future__ import annotations

import pytest

from tests.unit.measure.oracle import check_stall
from tuner.errors import ProbeHTTPError, ProbeStalled
from tuner.measure import make_client, smoke_check

Q = "What is the capital of France?"


def test_right_answer_in_one_attempt(ref):
    url = ref(rate=1000.0, reasoning_tokens=5)
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "paris")
    assert check.ok and check.attempts == 1 and check.finish_reason == "stop"
    assert check.answer == "The capital of France is Paris." and check.reasoning.startswith("alpha")
    assert "answered" in check.describe("paris")


def test_wrong_answer_is_wrong(ref):
    url = ref(rate=1000.0)
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "Berlin")
    assert not check.ok and check.wrong and not check.cut_off and check.attempts == 1
    assert "expected 'Berlin'" in check.describe("Berlin")


def test_cut_off_mid_answer_is_asked_again(ref):
    """A plain model cut off mid-answer by a tiny budget: asked again with room."""
    url = ref(rate=1000.0)
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "Paris", max_tokens=3)
    assert check.ok and check.attempts == 2
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "Paris", max_tokens=3, retry_max_tokens=3)
    assert check.cut_off and not check.wrong and "mid-answer" in check.describe("Paris")


def test_completions_endpoint(ref):
    url = ref(rate=1000.0, no_chat_template=True)
    with make_client() as c:
        with pytest.raises(ProbeHTTPError) as ei:
            smoke_check(c, url, "ref-model", Q, "Paris")
        assert "completions" in ei.value.hint
        check = smoke_check(c, url, "ref-model", Q, "Paris", endpoint="completions")
    assert check.ok


def test_stall_timeout_is_time_without_a_token(ref, tap):
    """A slow reasoning answer (2 s, a token every 5 ms) passes a 1 s stall timeout; keep-alive
    comments behind a stall do not keep it alive: it gives up at the first line that comes 0.5 s
    after the last token (the oracle)."""
    url = ref(rate=200.0, reasoning_tokens=400)
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "Paris", timeout_s=1.0)
    assert check.ok and check.attempts == 2
    url = ref(rate=1000.0, stall_after=2, keepalive="comment", keepalive_interval=0.1)
    tap.mark()
    with tap.client() as c, pytest.raises(ProbeStalled) as ei:
        smoke_check(c, url, "ref-model", Q, "Paris", timeout_s=0.5)
    (ex,) = tap.posts()
    check_stall(ex, 0.5, str(ei.value))
