"""The runs of one screen stage: the untuned set, the sampler's sets, the untuned set again.

A proposal NCCL would reject (the sweep's ``problems``) is told infeasible without running; a
set already screened is told its known result; after :data:`MAX_SKIPS` such proposals in a row
a random unscreened set is run instead, and the runs end when none is left, when the untuned
run fails, or after :data:`MAX_FAILED` failed runs in a row. No run starts that
would end past the deadline (the night's rule, :func:`tuner.planning.fits`; its estimate:
:data:`tuner.planning.ESTIMATE_MARGIN` x the longest run so far, or ``timeout_s`` before the first).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable

import optuna

from tuner.planning import ESTIMATE_MARGIN, fits
from tuner.record import Status, set_key
from tuner.redaction import redact
from tuner.screen.measure import RunContext, json_refused, measure
from tuner.screen.store import DUPLICATE, FIRST, INVALID, LAST, SEARCH, UNSET, ScreenRecord, ScreenStore

__all__ = [
    "MAX_ENUMERATED",
    "MAX_FAILED",
    "MAX_SKIPS",
    "ScreenLoop",
]

#: Proposals of screened or rejected sets in a row before a random unscreened set is run.
MAX_SKIPS = 30
#: Largest screened space enumerated to find an unscreened set (points).
MAX_ENUMERATED = 200_000
#: Runs in a row that crashed, hung or timed out after which the screen stops (a broken benchmark
#: would otherwise spend ``trials x timeout_s`` of the night).
MAX_FAILED = 5


class ScreenLoop:
    """The runs of one stage (see the module docstring); :meth:`run` returns why they ended.
    ``decode`` (bytes) is the size whose time the sampler is told."""

    def __init__(self, store: ScreenStore, ctx: RunContext, *, trials: int, decode: int,
                 problems: Callable[[dict[str, str]], list[str]], deadline: float | None,
                 log: Callable[[str], None], seed: int | None) -> None:
        self.store, self.ctx, self.trials, self.decode = store, ctx, trials, decode
        self.problems, self.deadline, self.log = problems, deadline, log
        self.rng = random.Random(seed)

    def fits(self) -> tuple[bool, str]:
        """``(True, "")`` when another run would end before the deadline, else ``(False, why)``."""
        if self.deadline is None:
            return True, ""
        walls = [r.wall_s for r in self.store.runs() if r.wall_s]
        estimate = ESTIMATE_MARGIN * max(walls) if walls else self.ctx.timeout_s
        if not fits(time.time(), self.deadline, estimate):
            return False, f"--timeout/--until: another screen run (~{estimate:.0f} s) would not fit"
        return True, ""

    def run(self) -> str:
        """Make the runs still owed (all of them, or the rest on a resume); returns why they ended.

        The untuned run comes first (again on a resume when it failed before); when it fails,
        nothing else is screened: without the reference no set can be ranked.
        """
        firsts = [r for r in self.store.runs() if r.role == FIRST]
        if not firsts or firsts[-1].status is not Status.OK:
            fits, why = self.fits()
            if not fits:
                return why
            first = self.one({}, FIRST)
            if first.status is not Status.OK:
                return (f"the untuned screen run failed ({first.status}: {first.cause}); nothing else was screened "
                        f"(see {first.log})")
        ended = self._search()
        runs = self.store.runs()
        last = max((r.number for r in runs if r.role == LAST), default=-1)
        if last < max((r.number for r in runs), default=-1):  # none yet, or a resume screened more after it
            fits, why = self.fits()
            if fits:
                self.one({}, LAST)
            else:
                ended = why
        return ended

    def _search(self) -> str:
        skips = failed = 0
        while sum(1 for r in self.store.runs() if r.role != LAST) < self.trials - 1:
            fits, why = self.fits()
            if not fits:
                return why
            if failed >= MAX_FAILED:
                return (f"{failed} screen runs in a row failed (crashed, hung or timed out): the benchmark itself "
                        "looks broken here; see the logs in the screen folder")
            if skips >= MAX_SKIPS:
                env = self._unscreened()
                if env is None:
                    return "every screened set was measured (or is rejected by NCCL)"
                failed = self._count(self.one(env, SEARCH), failed)
                skips = 0
                continue
            trial, params = self.store.ask()
            env = {k: v for k, v in params.items() if v != UNSET}
            rec = ScreenRecord(number=trial.number, role=SEARCH, env=redact(env))
            found = self.problems(env)
            if found:
                rec.role, rec.status, rec.cause = INVALID, Status.SKIPPED, found[0]
                self.store.tell_known(trial, rec, None, 1.0)
                skips += 1
                continue
            earlier = self._screened().get(set_key(env))
            if earlier is not None:
                rec.role, rec.status, rec.duplicate_of = DUPLICATE, Status.SKIPPED, earlier.number
                self.store.tell_known(trial, rec, *self.store.value_of(earlier.number))
                skips += 1
                continue
            failed = self._count(self.one(env, SEARCH, trial), failed)
            skips = 0
        return f"[screen] trials = {self.trials} reached"

    @staticmethod
    def _count(rec: ScreenRecord, failed: int) -> int:
        """Failed runs in a row: wrong values are a result about the set, not a failure."""
        return 0 if rec.status in (Status.OK, Status.INVALID_OUTPUT) else failed + 1

    def _screened(self) -> dict[str, ScreenRecord]:
        out: dict[str, ScreenRecord] = {}
        for r in self.store.runs():
            out.setdefault(r.key, r)
        return out

    def _unscreened(self) -> dict[str, str] | None:
        """A random set of the screened space neither screened nor rejected, or None."""
        names = list(self.store.choices)
        if math.prod(len(v) for v in self.store.choices.values()) > MAX_ENUMERATED:
            return None
        done = set(self._screened()) | {r.key for r in self.store.records() if r.role == INVALID}
        left = []
        for values in itertools.product(*(self.store.choices[n] for n in names)):
            env = {n: v for n, v in zip(names, values, strict=True) if v != UNSET}
            if set_key(env) not in done and not self.problems(env):
                left.append(env)
        return self.rng.choice(left) if left else None

    def one(self, env: dict[str, str], role: str, trial: optuna.Trial | None = None) -> ScreenRecord:
        """Screen ``env`` once (as ``trial`` when the sampler proposed it) and tell the study."""
        if trial is None:
            trial, _ = self.store.ask(env, role)
        rec = ScreenRecord(number=trial.number, role=role, env=redact(env), started_at=time.time())
        self.store.start(trial, rec)
        try:
            measure(self.ctx, rec, env)
            if self.ctx.json and json_refused(rec):
                self.log("screen: this nccl-tests refused -J after all; screening without JSON from now on")
                self.store.put("json", "false")
                self.ctx.json = False
                measure(self.ctx, rec, env)
        except BaseException:
            self.store.abandon(trial, rec)
            raise
        t = rec.time_at(self.decode)
        feasible = rec.status is Status.OK and t is not None
        if rec.status is Status.OK and t is None:
            rec.cause = f"no result row near the decode size {self.decode} B: check [screen] command and sizes"
        self.store.finish(trial, rec, -t if feasible and t is not None else None)
        label = " ".join(f"{k}={v}" for k, v in sorted(rec.env.items())) or "untuned"
        result = f"{t:.2f} us at {self.decode} B" if t is not None else f"{rec.status}: {rec.cause}"
        self.log(f"screen run {rec.number} [{role}] {label} -> {result}")
        return rec
