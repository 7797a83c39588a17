"""The correctness gate's rule (tuner/judging/answers.py): forks told from corruption, with and
without logprobs, the baseline's own forks, chunks of several tokens, answers that end early."""

from __future__ import annotations

import pytest

from tuner.judging.answers import (
    EARLY_TOKENS,
    FORK_MARGIN_NATS,
    compare_answer,
    first_divergence,
    judge_answers,
    self_divergence,
)
from tuner.measure import Answer
from tuner.measure.answers import TokenLogprob

WORDS = [f" w{i}" for i in range(64)]


def answer(tokens, prompt="p", margins=None, alt=None):
    """An answer of ``tokens``; with ``margins`` (one per token, nats) logprobs whose runner-up is
    ``alt[i]`` (default ``" x"``) that far below the token."""
    lps = ()
    if margins is not None:
        lps = tuple(TokenLogprob(t, -0.01, {t: -0.01, (alt or {}).get(i, " x"): -0.01 - m})
                    for i, (t, m) in enumerate(zip(tokens, margins, strict=True)))
    return Answer(prompt, tuple(tokens), lps)


def parted(at, other=" y", n=48):
    return [*WORDS[:at], other, *WORDS[at + 1:n]]


def test_identical_answers_are_within_and_say_how_much_was_compared():
    base = [answer(WORDS[:48], "a"), answer(WORDS[:48], "b")]
    check = judge_answers(base, [answer(WORDS[:48], "a"), answer(WORDS[:48], "b")])
    assert check.within and check.divergence is None and check.finding == ""
    assert check.words() == "answers matched the baseline's on 2 prompts x 48 tokens"


@pytest.mark.parametrize("at", [0, 1, 5, EARLY_TOKENS - 1])
def test_without_logprobs_an_early_divergence_is_corruption(at):
    within, d, why = compare_answer(answer(WORDS[:48]), answer(parted(at)))
    assert not within and d is not None and d.token == at
    assert "early" in why


@pytest.mark.parametrize("at", [EARLY_TOKENS, EARLY_TOKENS + 5, 47])
def test_without_logprobs_a_late_divergence_is_a_fork(at):
    within, d, _ = compare_answer(answer(WORDS[:48]), answer(parted(at)))
    assert within and d is not None and d.token == at


def test_with_logprobs_a_near_tie_is_a_fork_even_at_the_first_tokens():
    margins = [5.0] * 48
    margins[2] = FORK_MARGIN_NATS / 4
    base = answer(WORDS[:48], margins=margins, alt={2: " y"})
    within, d, why = compare_answer(base, answer(parted(2)))
    assert within and d is not None and d.token == 2 and "near tie" in why


def test_with_logprobs_a_sure_token_flipped_late_is_still_corruption():
    base = answer(WORDS[:48], margins=[5.0] * 48, alt={40: " y"})
    within, d, why = compare_answer(base, answer(parted(40)))
    assert not within and d is not None and d.token == 40
    assert "5.00 nats" in why


def test_with_logprobs_a_token_outside_the_alternatives_counts_as_far_as_the_least_of_them():
    base = answer(WORDS[:48], margins=[3.0] * 48)  # the runner-up is " x", the set answered " Lyon"
    within, _, _ = compare_answer(base, answer(parted(3, " Lyon")))
    assert not within
    flat = answer(WORDS[:48], margins=[0.3] * 48)  # every alternative nearly tied: rounding may pick any
    within, _, _ = compare_answer(flat, answer(parted(3, " Lyon")))
    assert within


def test_the_boundary_of_the_margin():
    at_edge = answer(WORDS[:48], margins=[FORK_MARGIN_NATS] * 48, alt={4: " y"})
    assert not compare_answer(at_edge, answer(parted(4)))[0]
    below = answer(WORDS[:48], margins=[FORK_MARGIN_NATS * 0.99] * 48, alt={4: " y"})
    assert compare_answer(below, answer(parted(4)))[0]


def test_the_baseline_parting_from_itself_makes_that_point_tolerated():
    ref = [answer(WORDS[:48], "a", margins=[5.0] * 48), answer(WORDS[:48], "b", margins=[5.0] * 48)]
    remeasure = [answer(WORDS[:48], "a"), answer(parted(6), "b")]
    forks = self_divergence(ref, [remeasure])
    assert forks == {1: 6}
    assert judge_answers(ref, [answer(WORDS[:48], "a"), answer(parted(7, " z"), "b")], forks_at=forks).within
    early = judge_answers(ref, [answer(WORDS[:48], "a"), answer(parted(5, " z"), "b")], forks_at=forks)
    assert not early.within and early.prompt == 2
    # the fork on prompt 2 says nothing of prompt 1
    assert not judge_answers(ref, [answer(parted(8), "a"), answer(WORDS[:48], "b")], forks_at=forks).within


def test_chunks_of_several_tokens_align_by_characters():
    base = answer(WORDS[:12])
    chunked = answer(["".join(WORDS[i:i + 3]) for i in range(0, 12, 3)])  # the same text in 4 chunks
    assert first_divergence(base, chunked) is None
    bad = answer(["".join(WORDS[0:3]), " w3 Lyon w5", "".join(WORDS[6:12])])
    d = first_divergence(base, bad)
    assert d is not None and d.token == 4 and d.baseline[0] == " w4" and d.set_token == 1


def test_an_answer_that_ends_early_parts_where_it_ended():
    d = first_divergence(answer(WORDS[:10]), answer(WORDS[:4]))
    assert d is not None and d.token == 4 and d.answer == ()
    assert "(end)" in judge_answers([answer(WORDS[:10])], [answer(WORDS[:4])]).finding


def test_the_finding_names_the_prompt_the_token_and_both_answers():
    prompt = "What is the capital of France? Answer in a long and detailed paragraph, please."
    base = [answer(WORDS[:48], "other"), answer([" The", " capital", " is", " Paris", "."], prompt, margins=[4.0] * 5)]
    check = judge_answers(base, [answer(WORDS[:48], "other"),
                                 answer([" The", " capital", " is", " Lyon", "!"], prompt)])
    assert not check.within and check.prompt == 2
    assert check.finding.startswith("prompt 2 ('What is the capital of France? Answer in a lo...') parted at token 3: ")
    assert check.finding.endswith("baseline ' Paris' '.' vs set ' Lyon' '!'")
    assert check.words().startswith("wrong output: prompt 2")
    assert "led by 4.00 nats" in check.why


def test_a_prompt_the_launch_did_not_answer_is_not_compared():
    base = [answer(WORDS[:48], "a"), answer(WORDS[:48], "b")]
    check = judge_answers(base, [answer(WORDS[:48], "b")])
    assert check.within and check.prompts == 1


def test_without_logprobs_one_early_prompt_is_a_chance_fork_two_are_corruption():
    base = [answer(WORDS[:48], p) for p in "abcd"]
    one = judge_answers(base, [answer(parted(3), "a"), *(answer(WORDS[:48], p) for p in "bcd")])
    assert one.within and one.prompt == 1 and "a chance fork" in one.why
    two = judge_answers(base, [answer(parted(3), "a"), answer(parted(9), "b"),
                               *(answer(WORDS[:48], p) for p in "cd")])
    assert not two.within and two.prompt == 1 and "on 2 of 4 prompts" in two.why
    # a single prompt parting early is all the evidence there is
    assert not judge_answers(base[:1], [answer(parted(3), "a")]).within
