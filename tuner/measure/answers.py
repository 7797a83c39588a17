"""The correctness gate's answers: a fixed set of prompts asked greedily, each answer's tokens in order.

Each prompt is streamed once (:func:`tuner.measure.stream.stream_once`: the same request, SSE
reading and stall clock as the probe) with ``temperature: 0``, ``seed`` (where the server kind
takes it: :attr:`tuner.servers.ServerKind.takes_seed`), ``ignore_eos`` so every answer is
``max_tokens`` long where the server honours it, and logprobs where the kind takes them
(``logprobs: true`` with ``top_logprobs`` on the chat endpoint, ``logprobs: N`` on completions:
the OpenAI API reference). A server that refuses ``seed`` or ``logprobs`` with a 400 is asked
again without it (:data:`tuner.measure.client.DROPPABLE_FIELDS`); one that ignores them sends no
logprobs, and the answer has none (:attr:`Answer.logprobs` empty): the comparison then works on
the tokens alone. An answer that ends before ``max_tokens`` (a server that ignores
``ignore_eos``) is kept as it came.

The tokens are the server's own token texts when it sends logprobs (one entry per token), else
the stream's content chunks in order (one token each on vLLM and SGLang; several with
multi-token chunks, which the comparison reads by characters: :mod:`tuner.judging.answers`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.measure.stream import Endpoint, stream_once
from tuner.servers import ServerKind

__all__ = ["Answer", "TokenLogprob", "answers_from_json", "answers_to_json", "take_answers"]

#: Alternatives asked per token (``top_logprobs``): the runner-up is all the rule needs, 5 leaves
#: room to find the other answer's token among them (OpenAI allows up to 20).
TOP_LOGPROBS = 5


@dataclass(frozen=True)
class TokenLogprob:
    """One answer token's logprob (natural log) and the alternatives the server gave:
    ``top`` maps a token text to its logprob, best first."""

    token: str
    logprob: float | None
    top: dict[str, float]

    @property
    def margin(self) -> float | None:
        """The top-2 margin (nats): the best logprob less the runner-up's; None without two."""
        values = sorted(self.top.values(), reverse=True)
        return values[0] - values[1] if len(values) >= 2 else None


@dataclass(frozen=True)
class Answer:
    """One prompt's greedy answer: ``prompt``, ``tokens`` (texts in order), ``logprobs`` (one per
    token, empty when the server sent none), ``finish_reason``."""

    prompt: str
    tokens: tuple[str, ...]
    logprobs: tuple[TokenLogprob, ...] = ()
    finish_reason: str | None = None

    @property
    def text(self) -> str:
        """The answer's text."""
        return "".join(self.tokens)

    def to_json(self) -> dict[str, Any]:
        """A JSON object of this answer."""
        return {"prompt": self.prompt, "tokens": list(self.tokens), "finish_reason": self.finish_reason,
                "logprobs": [[lp.token, lp.logprob, lp.top] for lp in self.logprobs]}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Answer:
        """The answer :meth:`to_json` wrote."""
        return cls(str(obj["prompt"]), tuple(obj.get("tokens") or ()),
                   tuple(TokenLogprob(str(t), v, dict(top)) for t, v, top in obj.get("logprobs") or ()),
                   obj.get("finish_reason"))


def answers_to_json(answers: Sequence[Answer]) -> str:
    """The answers as JSON text (one file per launch)."""
    return json.dumps({"answers": [a.to_json() for a in answers]}, ensure_ascii=False)


def answers_from_json(text: str) -> list[Answer]:
    """The answers :func:`answers_to_json` wrote. Raises ValueError for text that is not its JSON."""
    try:
        return [Answer.from_json(a) for a in json.loads(text)["answers"]]
    except (KeyError, TypeError) as e:
        raise ValueError(f"not an answers file: {e}") from e


def _fields(kind: ServerKind, endpoint: str, seed: int) -> dict[str, Any]:
    extra: dict[str, Any] = {"seed": seed} if kind.takes_seed else {}
    if kind.takes_logprobs:
        extra.update({"logprobs": True, "top_logprobs": TOP_LOGPROBS} if endpoint == "chat"
                     else {"logprobs": TOP_LOGPROBS})
    return extra


def take_answers(client: httpx.Client, base_url: str, *, model: str, prompts: Sequence[str], max_tokens: int,
                 kind: ServerKind, seed: int = 0, stall_timeout_s: float = 60.0,
                 endpoint: Endpoint | str = "chat") -> list[Answer]:
    """Ask each of ``prompts`` greedily (the module docstring), ``max_tokens`` tokens each, in
    order; one :class:`Answer` per prompt. Raises what :func:`tuner.measure.stream.stream_once`
    raises (a ProbeError)."""
    extra = _fields(kind, str(endpoint), seed)
    out: list[Answer] = []
    for prompt in prompts:
        m = stream_once(client, base_url, model=model, prompt=prompt, max_tokens=max_tokens,
                        stall_timeout_s=stall_timeout_s, endpoint=endpoint, ignore_eos=True, min_tokens=1,
                        extra=extra)
        lps = tuple(TokenLogprob(t, float(v) if isinstance(v, (int, float)) else None,
                                 dict(sorted(top.items(), key=lambda kv: -kv[1])))
                    for t, v, top in m.logprobs)
        same = bool(lps) and "".join(lp.token for lp in lps) == m.text
        out.append(Answer(prompt, tuple(lp.token for lp in lps) if same else m.pieces,
                          lps if same else (), m.finish_reason))
    return out
