"""The correctness gate's rule: whether a launch's greedy answers part from the baseline's beyond tolerance.

Greedy decoding is not bit-reproducible across launches: a different reduction order (another
allreduce algorithm, protocol or channel count, another batch shape) rounds differently, and
where two candidate tokens are nearly tied the argmax can flip; from there the two answers part
for good ("Defeating Nondeterminism in LLM Inference", Thinking Machines Lab, 2025: 1,000
temperature-0 completions of one prompt on Qwen3-235B gave 80 distinct answers, all identical
for their first 102 tokens; Yuan et al., "Give Me FP32 or Give Me Death? Challenges and
Solutions for Reproducible Reasoning", arXiv:2506.09501, 2025: in BF16 greedy outputs change
with the GPU count and batch size, and they part where the top-2 gap is small; vLLM's docs,
"Reproducibility" and "Batch Invariance": outputs are reproducible only with batch-invariant
kernels and a fixed setup). A *fork* is such a flip; *corruption* (a custom allreduce
returning wrong data over a bad P2P link, noonghunna/club-3090 #922) changes tokens the model
was sure of, usually from the first ones on.

The rule, per prompt (:func:`compare_answer`), on the first divergence between the launch's
answer and the baseline's (by characters, so chunks of several tokens align; the position is
the baseline's token index there):

1. Identical answers: within tolerance.
2. Evidence from the baseline itself (:func:`self_divergence`): where the baseline's own
   launches (its re-measures) part from its reference answer on a prompt, that prompt forks
   there on this machine whatever the set; a divergence at or after that token is within.
3. With the baseline's logprobs at the divergence: within when the baseline's margin between
   its token and the launch's token (the launch's token's logprob, or below the least of the
   top alternatives given when it is not among them) is under :data:`FORK_MARGIN_NATS`: a near
   tie that rounding can flip; beyond otherwise: the baseline was sure and the launch answered
   otherwise.
4. Without logprobs: suspect when it parted before :data:`EARLY_TOKENS`, within after (a late
   divergence cannot be told from a fork without logprobs; the prompts,
   ``tuner.inputs.config.DEFAULT_GATE_PROMPTS``, are chosen to leave little room for one).

A launch is beyond tolerance (:func:`judge_answers`) when any prompt is beyond by its logprobs
(rule 3), or when :data:`EARLY_PROMPTS` prompts (all of them, with fewer) are suspect by rule 4:
one early fork on one prompt is a chance a clean set has, the same fork on two prompts at once
is not, and a corrupting allreduce garbles every answer. The finding names the prompt, the
token and the first differing tokens of both answers (:class:`AnswerCheck`).
``benchmarks/correctness_gate.py`` measures the false-alarm rate of these constants on
synthetic greedy paths (benchmarks/results/correctness_gate.txt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.measure import Answer

__all__ = [
    "EARLY_PROMPTS",
    "EARLY_TOKENS",
    "FORK_MARGIN_NATS",
    "REFERENCE_PRESET",
    "AnswerCheck",
    "Divergence",
    "compare_answer",
    "first_divergence",
    "judge_answers",
    "self_divergence",
]

#: Largest top-2 margin (nats) at which a divergence is a fork. A reduction-order change moves a
#: BF16 logit by a few rounding steps (8 significand bits: about 0.4 % of a logit of ~20, ~0.08
#: nats, accumulated over the layers to a few tenths at most, Yuan et al. 2025); 1 nat (the
#: baseline's token e times likelier than the other) leaves room for that while a token the
#: baseline was sure of (several nats) flipping is not rounding.
FORK_MARGIN_NATS = 1.0
#: Without logprobs: a divergence before this baseline token is suspect, at or after it a
#: fork. Forks need a near tie, rare on the gate's low-entropy prompts and, where they happen,
#: seldom in the first tokens (Thinking Machines 2025: 1,000 runs agreed on their first 102);
#: a corrupting allreduce garbles from the first tokens on (club-3090 #922: 0 % speculative
#: acceptance). A clean set's chance of an early fork grows with the window (32 tokens gave 8 %
#: false alarms at 0.1 nats of rounding noise in benchmarks/correctness_gate.py, 16 about a
#: quarter of that), while a corruption from the first tokens is caught by any window past them.
EARLY_TOKENS = 16
#: The preset name of the reference configuration's launch (tuner/sweep/gate.py): the baseline with
#: the server's own allreduce off and NCCL_P2P_DISABLE=1, whose answers the baseline's are checked against.
REFERENCE_PRESET = "answers reference"
#: Without logprobs, the prompts that must part early (rule 4) for a launch to be beyond
#: tolerance: with a chance q per prompt that a clean set forks early, two of four prompts do with
#: about 6 q^2 (benchmarks/correctness_gate.py measures it).
EARLY_PROMPTS = 2
#: Tokens of each answer quoted from the divergence on.
QUOTED = 3


@dataclass(frozen=True)
class Divergence:
    """Where two answers first part: ``token`` (the baseline's token index), ``set_token`` (the
    launch's), ``baseline`` and ``answer`` (their first differing tokens, :data:`QUOTED` each)."""

    token: int
    set_token: int
    baseline: tuple[str, ...]
    answer: tuple[str, ...]


@dataclass(frozen=True)
class AnswerCheck:
    """One launch's answers against the baseline's: ``within`` (tolerance), ``prompt`` (1-based
    index of the prompt it judges: the first beyond, else the first that parted; 0 when every
    answer matched), ``divergence`` (None when identical), ``why`` (which rule decided),
    ``prompts`` and ``tokens`` (how much was compared: prompts x baseline tokens per answer)."""

    within: bool
    prompt: int = 0
    prompt_text: str = ""
    divergence: Divergence | None = None
    why: str = ""
    prompts: int = 0
    tokens: int = 0

    @property
    def finding(self) -> str:
        """One line: ``prompt 2 parted at token 14: baseline ' Paris' vs set ' Lyon'`` (empty
        when every answer matched)."""
        d = self.divergence
        if d is None:
            return ""
        said = self.prompt_text if len(self.prompt_text) <= 48 else self.prompt_text[:45] + "..."
        return (f"prompt {self.prompt} ({said!r}) parted at token {d.token}: baseline {_quoted(d.baseline)} vs set "
                f"{_quoted(d.answer)}")

    def words(self) -> str:
        """The outcome in words, for the report's reasons."""
        if self.divergence is None:
            return f"answers matched the baseline's on {self.prompts} prompts x {self.tokens} tokens"
        if self.within:
            return f"answers within tolerance of the baseline's ({self.finding}: {self.why})"
        return f"wrong output: {self.finding} ({self.why})"


def _quoted(tokens: Sequence[str]) -> str:
    return " ".join(repr(t) for t in tokens) if tokens else "(end)"


def _index_at(tokens: Sequence[str], offset: int) -> int:
    """The index of the token holding character ``offset`` of the joined text (len when past it)."""
    pos = 0
    for i, tok in enumerate(tokens):
        pos += len(tok)
        if offset < pos:
            return i
    return len(tokens)


def first_divergence(baseline: Answer, answer: Answer) -> Divergence | None:
    """Where ``answer`` first parts from ``baseline``, by characters (None: identical; an answer
    that ended sooner parts where it ended)."""
    a, b = baseline.text, answer.text
    if a == b:
        return None
    offset = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    k, j = _index_at(baseline.tokens, offset), _index_at(answer.tokens, offset)
    return Divergence(k, j, tuple(baseline.tokens[k:k + QUOTED]), tuple(answer.tokens[j:j + QUOTED]))


def _margin(baseline: Answer, d: Divergence) -> float | None:
    """The baseline's margin (nats) between its token and the launch's at ``d``; None without
    its logprobs there. A launch token not among the alternatives given is at least as far as
    the least of them."""
    if d.token >= len(baseline.logprobs) or not d.answer:
        return None
    lp = baseline.logprobs[d.token]
    if not lp.top:
        return None
    best = max(lp.top.values()) if lp.logprob is None else max(lp.logprob, *lp.top.values())
    other = lp.top.get(d.answer[0])
    if other is None:
        return best - min(lp.top.values())
    return best - other


def compare_answer(baseline: Answer, answer: Answer, *, forks_at: int | None = None) -> tuple[bool, Divergence | None, str]:
    """One prompt: ``(within, divergence, why)`` by the module docstring's rule; ``forks_at``:
    the earliest token where the baseline's own launches parted from ``baseline`` on it."""
    d = first_divergence(baseline, answer)
    if d is None:
        return True, None, "identical"
    if forks_at is not None and d.token >= forks_at:
        return True, d, f"the baseline's own launches part at token {forks_at} of this prompt"
    margin = _margin(baseline, d)
    if margin is not None:
        if margin < FORK_MARGIN_NATS:
            return True, d, f"a near tie: the baseline's margin there was {margin:.2f} nats"
        return False, d, f"the baseline's token led by {margin:.2f} nats, a fork needs under {FORK_MARGIN_NATS:g}"
    if d.token >= EARLY_TOKENS:
        return True, d, f"parted late (token {d.token} >= {EARLY_TOKENS}), no logprobs to tell a fork from corruption"
    return False, d, f"parted early (before token {EARLY_TOKENS}) and no logprobs show a near tie"


def self_divergence(reference: Sequence[Answer], others: Sequence[Sequence[Answer]]) -> dict[int, int]:
    """Per prompt (0-based), the earliest token at which another launch of the baseline
    (``others``: its re-measures' answers) parted from its ``reference`` answers: the forks this
    machine makes by itself."""
    out: dict[int, int] = {}
    for answers in others:
        for i, (ref, ans) in enumerate(zip(reference, answers, strict=False)):
            d = first_divergence(ref, ans) if ref.prompt == ans.prompt else None
            if d is not None:
                out[i] = min(out.get(i, d.token), d.token)
    return out


def judge_answers(baseline: Sequence[Answer], answers: Sequence[Answer], *,
                  forks_at: Mapping[int, int] | None = None) -> AnswerCheck:
    """A launch's ``answers`` against the ``baseline``'s, prompt by prompt (matched by prompt
    text; a prompt either side lacks is not compared); beyond tolerance when any prompt is.
    ``forks_at``: :func:`self_divergence`."""
    by_prompt = {a.prompt: a for a in answers}
    first_within: AnswerCheck | None = None
    suspects: list[AnswerCheck] = []  # parted early without logprobs (rule 4)
    compared, tokens = 0, 0
    for i, base in enumerate(baseline):
        ans = by_prompt.get(base.prompt)
        if ans is None:
            continue
        compared, tokens = compared + 1, max(tokens, len(base.tokens))
        within, d, why = compare_answer(base, ans, forks_at=(forks_at or {}).get(i))
        if not within and d is not None and _margin(base, d) is None:
            suspects.append(AnswerCheck(False, i + 1, base.prompt, d, why))
        elif not within:
            return AnswerCheck(False, i + 1, base.prompt, d, why, len(baseline), len(base.tokens))
        elif d is not None and first_within is None:
            first_within = AnswerCheck(True, i + 1, base.prompt, d, why)
    if suspects and len(suspects) >= min(EARLY_PROMPTS, compared):
        s = suspects[0]
        return AnswerCheck(False, s.prompt, s.prompt_text, s.divergence,
                           f"{s.why}, on {len(suspects)} of {compared} prompts", compared, tokens)
    if suspects and first_within is None:
        s = suspects[0]
        first_within = AnswerCheck(True, s.prompt, s.prompt_text, s.divergence,
                                   f"{s.why}, on 1 prompt of {compared} only: a chance fork")
    if first_within is not None:
        return AnswerCheck(True, first_within.prompt, first_within.prompt_text, first_within.divergence,
                           first_within.why, compared, tokens)
    return AnswerCheck(True, prompts=compared, tokens=tokens)
