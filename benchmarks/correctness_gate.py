"""The correctness gate's false-alarm rate and power on synthetic greedy answers (tuner/judging/answers.py).

A synthetic model: at each token of an answer the logit gap between the greedy token and its
runner-up is ``d``, drawn per token from a mixture (a share ``UNSURE`` of the tokens with gaps
Exponential(mean 1 nat), the rest 1 + Exponential(mean 6 nats): low-entropy prompts such as the
gate's, where most tokens are sure). Each launch adds its own rounding noise to every gap,
``eps ~ N(0, sigma)`` (a reduction order of its own: another allreduce algorithm, protocol or
channel count); a launch picks the runner-up where ``d + eps < 0``, and from the first such flip
its answer parts from the others' for good (Thinking Machines Lab 2025; Yuan et al.,
arXiv:2506.09501). The baseline's logprobs show its own noisy gap ``|d + eps_baseline|``.

* A *clean* set is the model under its own noise: any verdict "beyond tolerance" is a false alarm.
* A *corrupting* set (a custom allreduce returning wrong data) replaces every token from a
  position drawn in [0, 8) on with garbage, on every prompt (``all``), or on one prompt only
  from a position in [0, 256) (``one``): power is the share flagged.

Each night: the baseline's answers, one baseline re-measure (its own forks, tolerated), and the
set's launch, 4 prompts x 256 tokens, with and without logprobs. Rates over ``--pairs`` nights per
setting (seeded), for sigma 0.02, 0.1 and 0.3 nats and a 5 % / 15 % share of unsure tokens.

    python benchmarks/correctness_gate.py [--pairs 500] [--out benchmarks/results/correctness_gate.txt]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.judging.answers import EARLY_PROMPTS, EARLY_TOKENS, FORK_MARGIN_NATS, judge_answers, self_divergence
from tuner.measure import Answer
from tuner.measure.answers import TokenLogprob

PROMPTS, TOKENS = 4, 256


def gaps(rng: np.random.Generator, unsure: float) -> np.ndarray:
    """Per prompt and token, the true greedy gap (nats)."""
    sure = rng.random((PROMPTS, TOKENS)) >= unsure
    return np.where(sure, 1.0 + rng.exponential(6.0, (PROMPTS, TOKENS)), rng.exponential(1.0, (PROMPTS, TOKENS)))


def launch(d: np.ndarray, rng: np.random.Generator, sigma: float, *, logprobs: bool,
           corrupt: tuple[int, int] | None = None) -> list[Answer]:
    """One launch's answers: token texts ``A<t>`` (greedy) or ``B<t>`` (the runner-up); after a
    flip the path is its own (``X<t>``); ``corrupt``: (prompt or -1 for all, first token) of garbage."""
    seen = d + rng.normal(0.0, sigma, d.shape)
    out = []
    for p in range(PROMPTS):
        toks: list[str] = []
        lps: list[TokenLogprob] = []
        parted = False
        for t in range(TOKENS):
            if corrupt is not None and corrupt[0] in (-1, p) and t >= corrupt[1]:
                tok = f" G{t}"
            elif parted:
                tok = f" X{t}"
            elif seen[p, t] < 0:
                tok, parted = f" B{t}", True
            else:
                tok = f" A{t}"
            toks.append(tok)
            if logprobs:
                other = f" B{t}" if tok != f" B{t}" else f" A{t}"
                lps.append(TokenLogprob(tok, -0.01, {tok: -0.01, other: -0.01 - abs(float(seen[p, t]))}))
        out.append(Answer(f"prompt {p}", tuple(toks), tuple(lps)))
    return out


def night(rng: np.random.Generator, sigma: float, unsure: float, *, logprobs: bool, kind: str) -> bool:
    """True when the gate judges the set's launch beyond tolerance."""
    d = gaps(rng, unsure)
    base = launch(d, rng, sigma, logprobs=logprobs)
    remeasure = launch(d, rng, sigma, logprobs=logprobs)
    corrupt = None
    if kind == "all":
        corrupt = (-1, int(rng.integers(0, 8)))
    elif kind == "one":
        corrupt = (int(rng.integers(0, PROMPTS)), int(rng.integers(0, TOKENS)))
    answers = launch(d, rng, sigma, logprobs=logprobs, corrupt=corrupt)
    return not judge_answers(base, answers, forks_at=self_divergence(base, [remeasure])).within


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=500, help="nights per setting (default 500)")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "correctness_gate.txt")
    args = ap.parse_args(argv)
    lines = [f"correctness gate on synthetic greedy answers: {PROMPTS} prompts x {TOKENS} tokens, {args.pairs} nights "
             f"per row, seed {args.seed}",
             f"rule: FORK_MARGIN_NATS={FORK_MARGIN_NATS:g}, EARLY_TOKENS={EARLY_TOKENS}, EARLY_PROMPTS={EARLY_PROMPTS}; "
             "one baseline re-measure per night (its forks tolerated)",
             "false alarm: a clean set flagged; power: a corrupting set flagged (all prompts from a token in [0, 8); "
             "one prompt from a token in [0, 256))", "",
             f"{'sigma':>6} {'unsure':>6} {'logprobs':>8} {'false alarm':>12} {'power all':>10} {'power one':>10}"]
    for sigma in (0.02, 0.1, 0.3):
        for unsure in (0.05, 0.15):
            for logprobs in (True, False):
                rates = []
                for i, kind in enumerate(("clean", "all", "one")):
                    rng = np.random.default_rng([args.seed, int(sigma * 100), int(unsure * 100), logprobs, i])
                    rates.append(sum(night(rng, sigma, unsure, logprobs=logprobs, kind=kind)
                                     for _ in range(args.pairs)) / args.pairs)
                lines.append(f"{sigma:>6g} {unsure:>6.0%} {'yes' if logprobs else 'no':>8} {rates[0]:>12.2%} "
                             f"{rates[1]:>10.1%} {rates[2]:>10.1%}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
