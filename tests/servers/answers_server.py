"""An independent test server for the correctness gate: tests/servers/envrate_server.py (its rate,
faults and NCCL log by environment) whose long answers are deterministic per prompt, with logprobs
when asked, and which corrupts or forks them when told by its environment. Imports nothing of ``tuner``.

Answers (a request with ``ignore_eos``): token i of a prompt's answer is a word chosen by a CRC of
the prompt and i, the same on every launch. With ``logprobs`` asked (chat: ``logprobs: true`` and
``top_logprobs``; completions: ``logprobs: N``) each token carries its logprob and the runner-up
``ANSWERS_MARGIN`` (5.0) nats below it, as the OpenAI API shapes them; ``ANSWERS_LOGPROBS=0``
sends none (a server that ignores the field).

Environment:
  ANSWERS_CORRUPT_WHEN  ``NAME=value``: a launch whose environment has it answers garbage from
                        token ANSWERS_CORRUPT_AT (2) on, on every prompt (a corrupting allreduce)
  ANSWERS_CORRUPT_UNLESS ``NAME=value``: every launch whose environment lacks it corrupts the same way
                        (the machine's default path is the corrupting one: club-3090 #922)
  ANSWERS_NEAR_TIE      token index F where every launch's model is nearly tied (margin 0.2 nats
                        between its token and the alternative)
  ANSWERS_FORK_WHEN     ``NAME=value``: a launch whose environment has it takes the alternative at
                        F (a clean fork: rounding flipped a near tie)
"""

import os
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import envrate_server
import refserver

WORDS = ("the", "allreduce", "sums", "every", "rank", "and", "returns", "one", "answer", "to", "all", "of",
         "them", "while", "decode", "waits")
GARBAGE = ("Lyon", "zzz", "###", "qux")


def _has(spec: str) -> bool:
    name, _, value = spec.partition("=")
    return bool(spec) and os.environ.get(name) == value


def _word(seed: int, i: int, alt: bool = False) -> str:
    w = WORDS[(seed + 7 * i + (3 if alt else 0)) % len(WORDS)]
    return w if i == 0 else " " + w


def answer_tokens(prompt: str, n: int) -> list[str]:
    """This launch's answer to ``prompt``: ``n`` tokens."""
    seed = zlib.crc32(prompt.encode("utf-8", "replace"))
    unless = os.environ.get("ANSWERS_CORRUPT_UNLESS", "")
    corrupt = _has(os.environ.get("ANSWERS_CORRUPT_WHEN", "")) or (bool(unless) and not _has(unless))
    corrupt_at = int(os.environ.get("ANSWERS_CORRUPT_AT", "2")) if corrupt else None
    tie = os.environ.get("ANSWERS_NEAR_TIE")
    fork_at = int(tie) if tie and _has(os.environ.get("ANSWERS_FORK_WHEN", "")) else None
    out = []
    for i in range(n):
        if corrupt_at is not None and i >= corrupt_at:
            out.append(" " + GARBAGE[(seed + i) % len(GARBAGE)])
        else:
            out.append(_word(seed, i, alt=fork_at is not None and i >= fork_at))
    return out


def _logprob(prompt: str, i: int, token: str) -> dict:
    seed = zlib.crc32(prompt.encode("utf-8", "replace"))
    tie = os.environ.get("ANSWERS_NEAR_TIE")
    margin = 0.2 if tie and int(tie) == i else float(os.environ.get("ANSWERS_MARGIN", "5.0"))
    base, alt = _word(seed, i), _word(seed, i, alt=True)
    other = alt if token == base else base
    return {"token": token, "logprob": -0.01, "top_logprobs": [{"token": token, "logprob": -0.01},
                                                               {"token": other, "logprob": -0.01 - margin}]}


_natural = refserver._plan_natural


def _plan(body, chat, opts):
    toks, finish = _natural(body, chat, opts)
    if body.get("ignore_eos"):
        toks = answer_tokens(refserver._prompt_of(body, chat), len(toks))
    return toks, finish


_stream = refserver.Handler._stream
_event = refserver.Handler._event


def _stream_with(self, body, chat, t0):
    self._asked = body if os.environ.get("ANSWERS_LOGPROBS", "1") != "0" and body.get("logprobs") else None
    self._prompt, self._index, self._chat = refserver._prompt_of(body, chat), 0, chat
    return _stream(self, body, chat, t0)


def _event_with(self, obj, event=None):
    asked = getattr(self, "_asked", None)
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if asked and choices:
        ch = choices[0]
        text = (ch.get("delta") or {}).get("content") if self._chat else ch.get("text")
        if text:
            lp = _logprob(self._prompt, self._index, text)
            self._index += 1
            ch["logprobs"] = {"content": [lp]} if self._chat else {
                "tokens": [text], "token_logprobs": [lp["logprob"]],
                "top_logprobs": [{t["token"]: t["logprob"] for t in lp["top_logprobs"]}]}
    return _event(self, obj, event)


refserver._plan_natural = _plan
refserver.Handler._stream = _stream_with
refserver.Handler._event = _event_with

if __name__ == "__main__":
    sys.exit(envrate_server.main())
