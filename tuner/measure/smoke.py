"""The smoke check: a question whose answer is known, asked again with room when cut off."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.measure.stream import Endpoint, stream_once

__all__ = ["smoke_check"]

SMOKE_PROMPT = "What is the capital of France?"
SMOKE_EXPECT = "Paris"
SMOKE_MAX_TOKENS = 32  # first try: enough for a plain model's one-line answer
SMOKE_RETRY_MAX_TOKENS = 1024  # room for a reasoning model to think, then answer


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`smoke_check` (units: tokens).

    ``ok``: ``expect`` found (case-insensitive) in the answer; ``answer``: the content of the
    last attempt; ``reasoning``: its reasoning text; ``finish_reason`` of the last attempt;
    ``max_tokens``: the budget of the last attempt; ``attempts``: requests made (1 or 2).
    Unpacks as ``(ok, text)`` (text: the answer, or the reasoning when there is no answer), the
    shape callers of the old ``smoke_check`` use.
    """

    ok: bool
    answer: str
    reasoning: str
    finish_reason: str | None
    max_tokens: int
    attempts: int

    @property
    def cut_off(self) -> bool:
        """True when the answer is missing because the budget ran out (finish_reason
        ``length``), e.g. while the model was still reasoning: never a wrong answer."""
        return not self.ok and self.finish_reason == "length"

    @property
    def wrong(self) -> bool:
        """True when the model finished an answer without ``expect``: a real wrong output."""
        return not self.ok and not self.cut_off

    def describe(self, expect: str) -> str:
        """One line saying what happened, for a trial's cause or a warning."""
        tries = f" ({self.attempts} attempts, last with max_tokens={self.max_tokens})" if self.attempts > 1 else ""
        if self.ok:
            return f"answered {self.answer[:120]!r}{tries}"
        if self.cut_off:
            what = "while reasoning" if self.reasoning and not self.answer.strip() else "mid-answer"
            return (f"cut off {what} at max_tokens={self.max_tokens}{tries}; the answer could not be "
                    f"checked for {expect!r} (not a wrong answer: give the check more tokens)")
        return f"answered {(self.answer or self.reasoning)[:120]!r}, expected {expect!r}{tries}"

    def __iter__(self) -> Iterator[Any]:
        return iter((self.ok, self.answer or self.reasoning))


def smoke_check(
    client: httpx.Client,
    base_url: str,
    model: str,
    prompt: str = SMOKE_PROMPT,
    expect: str = SMOKE_EXPECT,
    max_tokens: int = SMOKE_MAX_TOKENS,
    timeout_s: float = 60.0,
    *,
    endpoint: Endpoint | str = "chat",
    retry_max_tokens: int = SMOKE_RETRY_MAX_TOKENS,
) -> CheckResult:
    """Ask ``prompt`` (streamed, temperature 0, no ignore_eos) and look for ``expect`` in the answer.

    When the first attempt is cut off by ``max_tokens`` (finish_reason ``length``) before the
    answer holds ``expect`` (a reasoning model spends the budget thinking), it is asked again once
    with ``retry_max_tokens`` (when larger): room to answer. A check still cut off is
    ``CheckResult.cut_off``, never ``wrong``. ``timeout_s``: the stall timeout (s without a
    token), so a long reasoning answer is not cut by a whole-request timeout.
    Raises ProbeConnectError, ProbeStalled, ProbeDisconnected, ProbeHTTPError, ProbeError.
    """
    budgets = [max_tokens] + ([retry_max_tokens] if retry_max_tokens > max_tokens else [])
    result: CheckResult | None = None
    for attempt, budget in enumerate(budgets, 1):
        m = stream_once(client, base_url, model=model, prompt=prompt, max_tokens=budget,
                        stall_timeout_s=timeout_s, endpoint=endpoint, ignore_eos=False)
        result = CheckResult(ok=expect.lower() in m.text.lower(), answer=m.text, reasoning=m.reasoning,
                             finish_reason=m.finish_reason, max_tokens=budget, attempts=attempt)
        if not result.cut_off:
            break
    assert result is not None  # budgets is never empty
    return result
