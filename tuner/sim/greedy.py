"""Greedy answers token by token: where they part from the baseline's, and their logprobs.

The simulated model answers every request as greedy decoding would (temperature and seed change
nothing): a fixed token path per prompt (textgen). Each position ``i`` of that path has a top-1 /
top-2 logprob margin ``m_i`` (nats) drawn from the prompt and the position alone: the same on every
launch. A launch perturbs the logits by ``p_i = eps x E_i`` (``E_i`` ~ Exp(1) drawn per position):

* **the set's reduction order**: a set whose allreduces reduce in another order than the untuned
  launch's (another backend, algorithm, protocol or channel count at the decode sizes of batch 1-8
  or at prefill sizes: ``reduction_key``) changes floating-point sums; its ``eps`` comes from
  ``divergence_rate`` and its ``E_i`` from the order, so every launch of one set answers alike;
* **the launch itself** (``launch_divergence_rate``): run-to-run nondeterminism (batch shapes,
  kernel choice; vLLM's "Batch Invariance" page, off with ``VLLM_BATCH_INVARIANT=1``), drawn anew
  each launch (from ``--seed`` when given).

The answer parts at the first position ``i >= ONSET`` of the content where ``m_i < max(p_i)``:
there the top-2 token wins (the baseline's token is second, a small gap behind) and the text goes
on differently (other filler words, still plausible). With ``m ~ Exp(MARGIN_MEAN)`` the chance per
position is ``eps / (MARGIN_MEAN + eps)``; ``eps`` is chosen so that an answer of ``HORIZON`` tokens
parts with the stated rate. Only positions from ``ONSET`` on can part.

Sources and chosen numbers: Thinking Machines, "Defeating Nondeterminism in LLM Inference" (Horace
He, 2025-09): Qwen3-235B, one prompt 1000 times at temperature 0 under varying batch: 80 distinct
completions, all identical for the first 102 tokens: parting is late and happens at near-ties. vLLM
docs, "Batch Invariance" (VLLM_BATCH_INVARIANT=1): without it outputs depend on the batch. Chosen:
``ONSET`` 64 tokens, ``HORIZON`` 300 tokens, default rates 3 % (a set that changes the order) and
0.3 % (a launch against the ideal path) of 300-token answers, ``MARGIN_MEAN`` 2 nats.

Corruption (``corrupt``: a custom allreduce over a bad P2P link, noonghunna/club-3090 #922) keeps
the first ``CORRUPT_FROM[0]`` tokens and garbles the answer from a position drawn per prompt in
``[CORRUPT_FROM[0], CORRUPT_FROM[1])``: the chosen tokens are junk, with logprobs -0.5 to -4.5,
and the baseline's token is not among the top 20 (its logprob below -12).

Logprobs: ``top(i, n)`` gives the ``n`` most likely ``(token, logprob)`` at position ``i``, the
chosen one first (greedy); ``p1 = 1 / (1 + exp(-m) + r)`` with a rest mass ``r`` in [0.05, 0.55],
the second ``m`` below, the others 0.5-2.5 nats apart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import struct

__all__ = ["CORRUPT_FROM", "HORIZON", "MARGIN_MEAN", "ONSET", "Answer", "LaunchPaths",
           "eps_for_rate", "reduction_key"]

ONSET = 64  # chosen: no parting before this token ([TM]: identical for the first 102 tokens)
HORIZON = 300  # the answer length the rates are stated for (tokens)
MARGIN_MEAN = 2.0  # chosen: mean top-1/top-2 margin in nats
CORRUPT_FROM = (6, 12)  # chosen: the first wrong token is drawn in [6, 12): "Paris" (token 5) survives
MAX_TOP = 20  # vLLM's default max_logprobs
_WORDS = ("a", "result", "holds", "when", "each", "value", "moves", "through", "its", "path",
          "with", "care", "because", "order", "changes", "sums", "slightly", "yet", "meaning",
          "stays", "close", "to", "what", "came", "before", "now", "another", "branch", "begins")
_JUNK = ("ĠĠ", "<0x0A>", "的", "ingly", "0000", "]];", "\\u00", "@@", "irmed", "ĉĉ", "_{", "±")


def _u(*parts) -> float:
    """A uniform draw in (0, 1) fixed by ``parts``."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return (struct.unpack("<Q", h)[0] + 0.5) / 2.0 ** 64


def eps_for_rate(rate: float) -> float:
    """The perturbation scale (nats) at which an answer of HORIZON tokens parts with probability
    ``rate`` (positions ONSET..HORIZON-1, each ``eps / (MARGIN_MEAN + eps)``)."""
    if rate <= 0:
        return 0.0
    rate = min(rate, 0.999999)
    q = 1.0 - (1.0 - rate) ** (1.0 / (HORIZON - ONSET))
    return MARGIN_MEAN * q / (1.0 - q)


def reduction_key(model, untuned) -> str | None:
    """None when ``model`` (costmodel.CostModel) reduces in the same order as ``untuned`` at the
    decode sizes of batch 1, 2, 4, 8 and at prefills of 16, 128 and 1024 tokens; else a key naming
    its order (backend, algorithm, protocol, channels of each)."""

    def picks(m) -> tuple:
        p = m.profile
        sizes = [p.decode_bytes * b for b in (1, 2, 4, 8)] + [m.prefill_bytes(t) for t in (16, 128, 1024)]
        out = []
        for n in sizes:
            c = m.allreduce(n)
            out.append((c.via, c.algo, c.proto, c.nchannels))
        return tuple(out)

    mine = picks(model)
    return None if mine == picks(untuned) else repr(mine)


@dataclasses.dataclass
class Answer:
    """One request's greedy path: ``texts`` (content tokens), ``parted_at`` (first position off the
    baseline's path, None if none), ``corrupt_from`` (None unless corrupted), and what ``top``
    needs."""

    texts: list
    parted_at: int | None
    corrupt_from: int | None
    key: str
    baseline: list  # the baseline's tokens at the same positions

    def margin(self, i: int) -> float:
        branch = "b" if self.parted_at is not None and i > self.parted_at else ""
        return -MARGIN_MEAN * math.log(_u("m", self.key, branch, i))

    def top(self, i: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` (at most MAX_TOP) most likely tokens at position ``i``, chosen first."""
        n = max(1, min(n, MAX_TOP))
        chosen = self.texts[i]
        if self.corrupt_from is not None and i >= self.corrupt_from:
            lp1 = -(0.5 + 4.0 * _u("c1", self.key, i))
            alts = [t for t in _JUNK if t != chosen]
            out, lp = [(chosen, lp1)], lp1
            for j in range(1, n):
                lp -= 0.2 + 0.6 * _u("cg", self.key, i, j)
                out.append((alts[(j - 1) % len(alts)], lp))
            return _unique(out)
        m = self.margin(i)
        if i == self.parted_at:
            m = 0.02 * _u("gap", self.key, i)  # a near-tie that the perturbation tipped
        r = 0.05 + 0.5 * _u("r", self.key, i)
        lp1 = -math.log(1.0 + math.exp(-m) + r)
        second = self.baseline[i] if i == self.parted_at else _alt(self.key, i, chosen)
        out = [(chosen, lp1), (second, lp1 - m)]
        lp = lp1 - m
        for j in range(2, n):
            lp -= 0.5 + 2.0 * _u("g", self.key, i, j)
            out.append((_alt(self.key, i, chosen, j), lp))
        return _unique(out)[:n]


def _unique(items: list) -> list:
    seen, out = set(), []
    for tok, lp in items:
        while tok in seen:
            tok += " "
        seen.add(tok)
        out.append((tok, lp))
    return out


def _alt(key: str, i: int, avoid: str, j: int = 1) -> str:
    """A plausible other token at position ``i`` (``j``-th alternative), never ``avoid``."""
    k = int(_u("alt", key, i, j) * len(_WORDS))
    word = " " + _WORDS[k]
    return word if word != avoid else " " + _WORDS[(k + 1) % len(_WORDS)]


class LaunchPaths:
    """One launch's view: ``set_key`` (reduction_key; None: the untuned order), the rates, whether
    answers are corrupted, and the launch's own nondeterminism key (``rng``)."""

    def __init__(self, set_key: str | None, divergence_rate: float, launch_rate: float,
                 corrupt: bool, rng: random.Random | None = None):
        self.set_key = set_key
        self.set_eps = eps_for_rate(divergence_rate) if set_key is not None else 0.0
        self.launch_eps = eps_for_rate(launch_rate)
        self.launch_key = f"{(rng or random.Random()).getrandbits(64):016x}"
        self.corrupt = corrupt

    def first_part(self, key: str, start: int, n: int) -> int | None:
        """The first position in [max(start, ONSET), n) where the perturbation beats the margin."""
        for i in range(max(start, ONSET), n):
            m = -MARGIN_MEAN * math.log(_u("m", key, "", i))
            p = 0.0
            if self.set_eps:
                p = self.set_eps * -math.log(_u("s", self.set_key, key, i))
            if self.launch_eps:
                p = max(p, self.launch_eps * -math.log(_u("l", self.launch_key, key, i)))
            if m < p:
                return i
        return None

    def answer(self, question: str, tokens: list, content_from: int) -> tuple[list, Answer]:
        """``tokens`` (``(kind, text)``, the baseline's path) as this launch answers them, and the
        Answer that gives their logprobs. Only content tokens (from ``content_from``) part."""
        key = hashlib.blake2b(question.encode("utf-8", "replace"), digest_size=8).hexdigest()
        texts = [t for _, t in tokens]
        base = list(texts)
        corrupt_from = parted = None
        if self.corrupt:
            lo, hi = CORRUPT_FROM
            corrupt_from = max(content_from, lo + int(_u("cf", key) * (hi - lo)))
            for i in range(corrupt_from, len(texts)):
                texts[i] = _JUNK[int(_u("j", key, i) * len(_JUNK))]
        else:
            parted = self.first_part(key, content_from, len(texts))
            if parted is not None:
                texts[parted] = _alt(key, parted, base[parted])
                for i in range(parted + 1, len(texts)):
                    texts[i] = " " + _WORDS[int(_u("w", key, parted, i) * len(_WORDS))]
        out = [(kind, texts[i]) for i, (kind, _) in enumerate(tokens)]
        return out, Answer(texts, parted, corrupt_from, key, base)
