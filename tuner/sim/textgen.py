"""Deterministic output text for the simulated model: smoke-check answers and counting.

One token is one string delta. Rules, on the last user message:

* "Count from A to B" (or "count to B"): ``"A"``, ``", A+1"``, ... ``", B"``; natural end after B.
* "What is the capital of France?": ``"The capital of France is Paris."`` (7 tokens).
* anything else: filler words chosen by a CRC of the prompt; natural end after 64 tokens.

With ``ignore_eos`` the text continues past its natural end until ``max_tokens`` (counting goes
on, the others continue with filler). The first K tokens may be reasoning tokens (kind
``"reasoning"``); they count towards ``max_tokens``. ``wrong=True`` (fault ``wrong-output``)
answers every prompt with filler: no Paris, no counting.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Iterator

NATURAL_LENGTH = 64  # tokens a free-form answer has before EOS
_WORDS = ("the", "model", "decodes", "one", "token", "per", "step", "while", "every", "rank",
          "waits", "for", "an", "allreduce", "across", "eight", "devices", "and", "latency",
          "dominates", "small", "messages", "so", "protocol", "choice", "matters", "more",
          "than", "bandwidth", "in", "this", "regime")
_REASONING = ("Let", " me", " think", " about", " this", " step", " by", " step", ".")
_COUNT_RE = re.compile(r"count(?:\s+from\s+(-?\d+))?\s+to\s+(-?\d+)", re.IGNORECASE)
_FRANCE_RE = re.compile(r"capital\s+of\s+france", re.IGNORECASE)
_PARIS = ("The", " capital", " of", " France", " is", " Paris", ".")


def count_prompt_tokens(text: str) -> int:
    """Rough prompt length in tokens (~4 characters per token, at least 1)."""
    return max(1, (len(text) + 3) // 4)


def _filler(seed: int, start: int = 0) -> Iterator[str]:
    """Endless deterministic filler words; a period every 12 words."""
    for i in itertools.count(start):
        word = _WORDS[(seed + i * 7) % len(_WORDS)]
        tok = word.capitalize() if i == 0 else " " + word
        yield tok + ("." if i % 12 == 11 else "")


def _answer(question: str, wrong: bool) -> tuple[Iterator[str], int]:
    """(endless token stream, natural length) for one question."""
    seed = zlib.crc32(question.encode("utf-8", "replace"))
    if wrong:
        return _filler(seed + 1), NATURAL_LENGTH
    m = _COUNT_RE.search(question)
    if m:
        lo = int(m.group(1)) if m.group(1) is not None else 1
        hi = int(m.group(2))
        step = 1 if hi >= lo else -1

        def numbers() -> Iterator[str]:
            for k, v in enumerate(itertools.count(lo, step)):
                yield str(v) if k == 0 else f", {v}"

        return numbers(), abs(hi - lo) + 1
    if _FRANCE_RE.search(question):
        return itertools.chain(_PARIS, _filler(seed, 1)), len(_PARIS)
    return _filler(seed), NATURAL_LENGTH


def plan_tokens(question: str, *, max_tokens: int, ignore_eos: bool, reasoning_tokens: int = 0,
                wrong: bool = False) -> tuple[list[tuple[str, str]], str]:
    """Tokens to emit as ``(kind, text)`` with kind ``"reasoning"`` or ``"content"``, and the
    finish reason (``"stop"`` at the natural end, ``"length"`` when max_tokens cut it)."""
    k = max(0, reasoning_tokens)
    stream, natural = _answer(question, wrong)
    total_natural = k + natural
    n = max_tokens if ignore_eos else min(max_tokens, total_natural)
    finish = "stop" if (not ignore_eos and total_natural <= max_tokens) else "length"
    out: list[tuple[str, str]] = []
    reasoning = itertools.cycle(_REASONING)
    for i in range(n):
        if i < k:
            out.append(("reasoning", next(reasoning)))
        else:
            out.append(("content", next(stream)))
    return out, finish
