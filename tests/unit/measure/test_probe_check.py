"""The smoke check: right, wrong, cut off (reasoning or answering), endpoints, errors."""

from __future__ import annotations

import time

import pytest

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


@pytest.mark.alone
def test_stall_timeout_is_time_without_a_token(ref):
    """A slow reasoning answer (2 s, a token every 20 ms) passes a 0.5 s stall timeout."""
    url = ref(rate=50.0, reasoning_tokens=100)
    with make_client() as c:
        check = smoke_check(c, url, "ref-model", Q, "Paris", timeout_s=0.5)
    assert check.ok and check.attempts == 2
    url = ref(rate=1000.0, stall_after=2, keepalive="comment", keepalive_interval=0.1)
    with make_client() as c:
        t = time.perf_counter()
        with pytest.raises(ProbeStalled):
            smoke_check(c, url, "ref-model", Q, "Paris", timeout_s=0.5)
        assert time.perf_counter() - t < 1.5
