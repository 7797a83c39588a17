"""Failure modes the simulator can play.

Select with ``--fault MODE[,MODE...]`` or ``SIM_FAULT=MODE[,MODE...]`` (the CLI wins). ``K`` =
``--fault-after`` / ``SIM_FAULT_AFTER`` (tokens, default 8), ``N`` = ``--fault-request`` /
``SIM_FAULT_REQUEST``, ``T`` = ``--teardown-s`` / ``SIM_TEARDOWN_S`` (seconds, default 3).

Which request a request-bound fault hits:

* default (no N): the first *probe request*, i.e. the first streamed completion that asks for
  more than 8 tokens. A readiness request (at most 8 tokens) and a non-streamed smoke check do
  not count, so the fault fires during a probe's warm-up or first recorded run;
* ``N`` given: the N-th completion request of any kind, readiness request included.

Modes:

* ``crash-start``: halfway through loading, a CUDA out-of-memory traceback; the workers are
  stopped and the process exits 1 without ever binding the port.
* ``hang-start``: loads forever: never binds, never answers (SIGTERM still ends it).
* ``crash-mid-stream``: the fault's request sends K tokens, then the process dies (exit 1,
  workers stopped first): the client sees a truncated chunked body / reset connection.
* ``hang-mid-stream``: the fault's request sends K tokens, then the engine hangs like an NCCL
  deadlock: the connection stays open, every later completion hangs too, ``/health`` answers 200.
* ``healthy-then-500``: ``/health`` 200; from the fault's request on, every completion answers
  HTTP 500 ``{"error": "EngineCore encountered an issue"}`` (vLLM EngineDeadError).
* ``orphan-workers``: workers ignore SIGTERM and the server exits on SIGTERM without waiting
  for them: they outlive it (like vLLM's EngineCore) until SIGKILL of the process group.
* ``stuck-workers``: workers ignore SIGTERM, as ranks blocked in a CUDA/NCCL call; the server
  waits for them (5 s, then SIGKILL), so a launcher with a shorter grace SIGKILLs the group.
  Their buffered NCCL output (``--stdout-buffering block``) is lost either way.
* ``slow-teardown``: on SIGTERM the server closes its port, then takes T seconds to exit.
* ``wrong-output``: every answer is filler text: no "Paris", no counting.
* ``corrupt``: numeric corruption of the allreduce results, as vLLM's custom allreduce over a
  bad P2P link (noonghunna/club-3090 #922: wrong data while NCCL on the same link was right,
  seen as 0 % speculative-decoding acceptance): every answer keeps its first 6 tokens (so the
  one-question smoke check, "Paris" at token 5 of "The capital of France is Paris.", passes)
  and turns to garbled tokens at a token drawn per prompt in [6, 12) (``greedy.CORRUPT_FROM``);
  the baseline's token is then not among the top 20 logprobs. Nothing is logged.
* ``hang-after-load=S``: after S seconds of load (time with at least one request decoding,
  summed over the launch, divided by ``--time-scale``), every stream stops sending tokens, new
  requests get their headers and no token, ``/health`` keeps answering 200; W seconds later
  (``--watchdog-s``, default 600, PyTorch's default NCCL timeout; divided by the time scale too)
  the log gets, once per rank, PyTorch's watchdog line (torch/csrc/distributed/c10d/
  ProcessGroupNCCL.cpp, ``ProcessGroupNCCL::watchdogHandler``)::

      [rank0]:[E1206 16:05:00.123456789 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught
      collective operation timeout: WorkNCCL(SeqNum=N, OpType=ALLREDUCE, NumelIn=7168,
      NumelOut=7168, Timeout(ms)=600000) ran for 600004 milliseconds before timing out.

  (one line in the log). The process then stays up and hung until SIGTERM, as a server whose
  watchdog does not tear it down.

Set-bound faults (``--fault-when``, repeatable; ``SIM_FAULT_WHEN`` with entries separated by
``;``; the profile's ``set_faults`` in the same syntax, the CLI's entries added to it)::

    CONDITION[&CONDITION...] => EFFECT[,EFFECT...]

A CONDITION is ``NAME=VALUE`` (the launch environment holds exactly that string, after
``--ignore-var``), ``NAME`` (set, any value), ``!NAME`` (unset) or ``custom-allreduce`` (vLLM's
custom allreduce carries the decode allreduce: on by default where vLLM enables it, off with
``--disable-custom-all-reduce``). Every condition must hold. EFFECTs: ``corrupt``,
``hang-after-load=S`` (as above), ``speed=F`` (decode and prefill F times faster: tok/s x F;
several matching entries multiply). Example: ``--fault-when 'NCCL_P2P_LEVEL=SYS => corrupt,
speed=1.08' --fault-when 'CUDA_DEVICE_MAX_CONNECTIONS=1 => hang-after-load=90'``. What a launch
resolved is in ``SIM MODEL``'s ``set_effects`` and in ``sim model``'s output.

NCCL settings trigger failures too, where a real NCCL would (see costmodel and ncclenv).
"""

from __future__ import annotations

import dataclasses

FAULT_MODES = {
    "crash-start": "exit 1 during load after a CUDA out-of-memory error",
    "hang-start": "never bind the port, never answer",
    "crash-mid-stream": "process exits after K tokens of the fault's request",
    "hang-mid-stream": "stream stalls after K tokens of the fault's request",
    "healthy-then-500": "/health 200, completions HTTP 500 from the fault's request on",
    "orphan-workers": "workers ignore SIGTERM; server exits without waiting for them",
    "stuck-workers": "workers ignore SIGTERM; the teardown must SIGKILL them",
    "slow-teardown": "on SIGTERM take T seconds to exit",
    "wrong-output": "answers without Paris / without counting",
    "corrupt": "answers turn to garbled tokens from a token in [6, 12): Paris survives",
    "hang-after-load": "=S: streams stall after S s of load (/ time scale); watchdog line later",
}
#: Effects a --fault-when entry may carry.
EFFECTS = ("corrupt", "hang-after-load=S", "speed=F")
DEFAULT_WATCHDOG_S = 600.0  # PyTorch's default NCCL process-group timeout (Timeout(ms)=600000)

DEFAULT_AFTER_TOKENS = 8
#: A request asking for at most this many tokens is a readiness request (nccl-tune's own
#: readiness proof asks for 8), not counted by the default rule.
READINESS_MAX_TOKENS = 8
DEFAULT_TEARDOWN_S = 3.0


class FaultError(ValueError):
    """An unknown fault mode or a bad fault parameter; the message lists what is accepted."""


@dataclasses.dataclass(frozen=True)
class Effects:
    """What a launch plays because of its set: ``corrupt``, ``hang_after_load_s`` (seconds of
    load, before the time scale; None: never), ``speed`` (tok/s factor)."""

    corrupt: bool = False
    hang_after_load_s: float | None = None
    speed: float = 1.0

    def merge(self, other: Effects) -> Effects:
        """Both: corrupt if either, the earlier hang, the speeds multiplied."""
        hangs = [h for h in (self.hang_after_load_s, other.hang_after_load_s) if h is not None]
        return Effects(self.corrupt or other.corrupt, min(hangs) if hangs else None,
                       self.speed * other.speed)

    def as_dict(self) -> dict:
        return {"corrupt": self.corrupt, "hang_after_load_s": self.hang_after_load_s,
                "speed": self.speed}


@dataclasses.dataclass(frozen=True)
class SetFault:
    """One ``--fault-when`` entry: ``conditions`` as ``(kind, name, value)`` with kind ``"eq"``,
    ``"set"``, ``"unset"`` or ``"custom"``; ``effects`` what a matching launch plays."""

    conditions: tuple
    effects: Effects
    text: str = ""

    def matches(self, environ: dict, custom_allreduce: bool) -> bool:
        for kind, name, value in self.conditions:
            if kind == "custom":
                ok = custom_allreduce
            elif kind == "eq":
                ok = environ.get(name) == value
            elif kind == "set":
                ok = name in environ
            else:
                ok = name not in environ
            if not ok:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """Active modes and parameters: ``after_tokens`` K, ``on_request`` N (None = the first probe
    request), ``teardown_s`` seconds, ``hang_after_load_s`` (the unconditional
    ``hang-after-load=S``), ``when`` the set-bound entries, ``time_scale`` (seconds of load and
    the watchdog pass this many times faster), ``watchdog_s``."""

    modes: frozenset = frozenset()
    after_tokens: int = DEFAULT_AFTER_TOKENS
    on_request: int | None = None
    teardown_s: float = DEFAULT_TEARDOWN_S
    hang_after_load_s: float | None = None
    when: tuple = ()
    time_scale: float = 1.0
    watchdog_s: float = DEFAULT_WATCHDOG_S

    def effects(self, environ: dict, custom_allreduce: bool = False,
                profile_entries: tuple = ()) -> Effects:
        """What a launch with ``environ`` plays: the unconditional modes, then every matching
        entry of the profile's ``set_faults`` and of ``when``."""
        out = Effects(corrupt="corrupt" in self.modes, hang_after_load_s=self.hang_after_load_s)
        for entry in (*profile_entries, *self.when):
            if entry.matches(environ, custom_allreduce):
                out = out.merge(entry.effects)
        return out

    def has(self, mode: str) -> bool:
        """Whether ``mode`` is active."""
        return mode in self.modes

    def counts(self, stream: bool, max_tokens: int) -> bool:
        """Whether a completion request counts towards the fault's request number."""
        if self.on_request is not None:
            return True
        return stream and max_tokens > READINESS_MAX_TOKENS

    @property
    def target(self) -> int:
        """The counted request number the request-bound faults hit."""
        return self.on_request or 1


def _num(text, name, kind, minimum):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise FaultError(f"{name} must be a number, got {text!r}") from None
    if value < minimum:
        raise FaultError(f"{name} must be >= {minimum}, got {text!r}")
    return value


def _effects(text: str, where: str) -> Effects:
    corrupt, hang, speed = False, None, 1.0
    for item in (e.strip() for e in text.split(",")):
        name, _, value = item.partition("=")
        name = name.strip()
        if name == "corrupt" and not value:
            corrupt = True
        elif name == "hang-after-load":
            hang = _num(value.strip(), f"{where}: hang-after-load (seconds)", float, 0.0)
        elif name == "speed":
            speed = _num(value.strip(), f"{where}: speed (a tok/s factor)", float, 0.01)
        else:
            raise FaultError(f"{where}: unknown effect {item!r}; accepted: {', '.join(EFFECTS)}")
    return Effects(corrupt, hang, speed)


def parse_when(text: str, where: str = "--fault-when") -> SetFault:
    """One entry ``CONDITION[&CONDITION...] => EFFECT[,EFFECT...]`` (module docstring)."""
    cond_text, sep, eff_text = text.partition("=>")
    if not sep or not cond_text.strip() or not eff_text.strip():
        raise FaultError(f"{where}: {text!r} must look like 'NCCL_P2P_LEVEL=SYS => corrupt' "
                         f"(CONDITION[&CONDITION] => EFFECT[,EFFECT]; effects: {', '.join(EFFECTS)})")
    conds = []
    for c in (c.strip() for c in cond_text.split("&")):
        if c == "custom-allreduce":
            conds.append(("custom", "", ""))
        elif c.startswith("!") and c[1:].strip():
            conds.append(("unset", c[1:].strip(), ""))
        elif "=" in c and c.split("=", 1)[0].strip():
            name, value = c.split("=", 1)
            conds.append(("eq", name.strip(), value.strip()))
        elif c and " " not in c:
            conds.append(("set", c, ""))
        else:
            raise FaultError(f"{where}: bad condition {c!r} in {text!r}; accepted: NAME=VALUE, "
                             "NAME, !NAME, custom-allreduce")
    return SetFault(tuple(conds), _effects(eff_text, where), text.strip())


def parse_when_list(texts, where: str) -> tuple:
    """Entries from an iterable of strings, each possibly several joined by ``;``."""
    return tuple(parse_when(part, where) for t in texts for part in t.split(";") if part.strip())


def parse_faults(cli_modes: str | None = None, *, after_tokens=None, on_request=None,
                 teardown_s=None, environ: dict | None = None, when=None, time_scale=None,
                 watchdog_s=None) -> FaultPlan:
    """Combine CLI values with ``SIM_FAULT`` / ``SIM_FAULT_AFTER`` / ``SIM_FAULT_REQUEST`` /
    ``SIM_TEARDOWN_S`` / ``SIM_FAULT_WHEN`` / ``SIM_TIME_SCALE`` / ``SIM_WATCHDOG_S`` from
    ``environ``; CLI values win. Raises FaultError on bad input."""
    env = environ or {}
    text = cli_modes if cli_modes is not None else env.get("SIM_FAULT", "")
    modes = set()
    hang = None
    for m in (m.strip() for m in text.split(",")):
        if not m or m == "none":
            continue
        if m.startswith("hang-after-load"):
            value = m.partition("=")[2].strip()
            if not value:
                raise FaultError("hang-after-load needs its seconds: hang-after-load=90")
            hang = _num(value, "hang-after-load (seconds)", float, 0.0)
            m = "hang-after-load"
        modes.add(m)
    unknown = sorted(modes - set(FAULT_MODES))
    if unknown:
        raise FaultError(f"unknown fault mode(s) {', '.join(unknown)}; accepted: "
                         f"{', '.join(FAULT_MODES)}")
    after = after_tokens if after_tokens is not None else env.get("SIM_FAULT_AFTER")
    req = on_request if on_request is not None else env.get("SIM_FAULT_REQUEST")
    tear = teardown_s if teardown_s is not None else env.get("SIM_TEARDOWN_S")
    if when:
        entries = parse_when_list(when, "--fault-when")
    else:
        entries = parse_when_list([env.get("SIM_FAULT_WHEN", "")], "SIM_FAULT_WHEN")
    scale = time_scale if time_scale is not None else env.get("SIM_TIME_SCALE")
    dog = watchdog_s if watchdog_s is not None else env.get("SIM_WATCHDOG_S")
    scale_v = 1.0 if scale in (None, "") else _num(scale, "time-scale", float, 1e-6)
    if scale_v <= 0:
        raise FaultError(f"time-scale must be > 0, got {scale!r}")
    return FaultPlan(
        hang_after_load_s=hang, when=entries, time_scale=scale_v,
        watchdog_s=DEFAULT_WATCHDOG_S if dog in (None, "") else _num(dog, "watchdog-s", float, 0.0),
        modes=frozenset(modes),
        after_tokens=DEFAULT_AFTER_TOKENS if after in (None, "") else
        _num(after, "fault-after (tokens)", int, 0),
        on_request=None if req in (None, "") else _num(req, "fault-request", int, 1),
        teardown_s=DEFAULT_TEARDOWN_S if tear in (None, "") else
        _num(tear, "teardown-s", float, 0.0),
    )
