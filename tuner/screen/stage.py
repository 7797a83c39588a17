"""The screen stage: nccl-tests under many sets in seconds each, then the bound and the best sets.

Order (issue 9): the baseline relaunch first (the runner's), then this stage: the untuned set,
``[screen] trials - 2`` runs chosen by the sampler over the screened variables (its own study,
``<study>-screen``, in the sweep's storage, so a resume continues it), the untuned set again
(its drift tells how stable the screen was); then the tuned relaunches, the best ``top_k``
screened sets first. Screen runs are not counted by ``--trials``; none starts that would end
past ``--timeout``/``--until``.

A proposal NCCL would reject (the sweep's ``problems``) is told infeasible without running; a
set already screened is told its known result; after :data:`MAX_SKIPS` such proposals in a row
the stage runs a random unscreened set instead, and ends when none is left.

After the runs: ``screen.csv``, the ranking (:mod:`tuner.screen.rank`), the export for the
tuner plugin (:mod:`tuner.screen.export`), and the bound (:mod:`tuner.bound`) printed before
any tuned relaunch. When even free allreduce would gain less than a relaunch can tell from
noise (:func:`noise_pct`), the stage raises :class:`tuner.errors.StoppedByCheck` (exit 5)
unless ``force``.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna

from tuner import stats
from tuner.bound import Bound, allreduce_bound
from tuner.config import ExperimentConfig
from tuner.errors import StoppedByCheck
from tuner.judge import Judgement
from tuner.nccl_env import redact
from tuner.record import Kind, Status, TrialRecord, set_key
from tuner.screen import rank
from tuner.screen.export import Export, write_exports
from tuner.screen.measure import RunContext, json_refused, measure
from tuner.screen.run import screen_env, screenable, supports_json
from tuner.screen.sizes import ScreenSizes, screen_sizes
from tuner.screen.store import DUPLICATE, FIRST, INVALID, LAST, SEARCH, UNSET, ScreenRecord, ScreenStore
from tuner.screen.table import SCREEN_CSV, write_screen_csv
from tuner.space import SearchSpace
from tuner.sweep.plan import Planned
from tuner.sweep.storage import StudyStore

#: Proposals of screened or rejected sets in a row before a random unscreened set is run.
MAX_SKIPS = 30
#: Largest screened space enumerated to find an unscreened set (points).
MAX_ENUMERATED = 200_000
#: A screen run is estimated at this factor times the longest one so far (s).
ESTIMATE_MARGIN = 1.2
#: Ranked sets kept in the study's summary (the report lists them).
RANKING_KEPT = 50


@dataclass
class Stage:
    """What the screen found: ``sizes``, every run (``records``), the ranking (``ranked``,
    best first), ``top_sets`` (the first ``top_k`` as planned relaunches, kind preset, named
    ``screen-1``...), ``bad`` (``{screen key: cause}`` of sets with wrong values), the
    ``bound`` (None when it does not apply, ``bound_note`` says why), ``untuned_us`` (us at the
    decode size), ``export`` (tuner-plugin files), ``ended`` (why the runs stopped)."""

    sizes: ScreenSizes
    records: list[ScreenRecord]
    ranked: list[rank.RankedSet]
    top_sets: list[Planned]
    bad: dict[str, str]
    bound: Bound | None
    bound_note: str
    untuned_us: float | None
    export: Export
    ended: str
    noise_pct: float = math.nan
    drift: float | None = None
    notes: list[str] = field(default_factory=list)

    def check(self, env: Mapping[str, str]) -> str | None:
        """Why a set must never be relaunched (its screen reported wrong values), else None.
        Matches on the screened variables only (:func:`tuner.screen.rank.screen_key`)."""
        cause = self.bad.get(rank.screen_key(env))
        return f"the screen reported wrong values for its NCCL variables ({cause})" if cause is not None else None

    def summary(self) -> dict[str, Any]:
        """JSON-able summary for :attr:`tuner.record.StudyInfo.screen` (read by the report)."""
        b = self.bound
        return {
            "decode_bytes": self.sizes.decode, "prefill_bytes": self.sizes.prefill,
            "allreduces_per_token": self.sizes.per_token, "size_reasons": list(self.sizes.reasons),
            "runs": sum(1 for r in self.records if r.ran), "ended": self.ended,
            "untuned_us": self.untuned_us, "untuned_drift": self.drift,
            "best_us": self.ranked[0].decode_us if self.ranked else None,
            "best_set": self.ranked[0].env if self.ranked else None,
            "top_sets": [{"env": p.env, "name": p.preset} for p in self.top_sets],
            "ranking": [{"key": r.key, "env": r.env, "decode_us": r.decode_us, "prefill_us": r.prefill_us}
                        for r in self.ranked[:RANKING_KEPT]],
            "bad_sets": dict(self.bad), "noise_pct": None if math.isnan(self.noise_pct) else self.noise_pct,
            "bound": None if b is None else {
                "share": b.allreduce_share, "max_gain_pct": b.max_gain_pct, "best_gain_pct": b.best_gain_pct,
                "baseline_tpot_s": b.baseline_tpot_s, "baseline_tok_s": b.baseline_tok_s,
                "free_allreduce_tok_s": b.free_allreduce_tok_s, "best_tok_s": b.best_tok_s,
                "reliable": b.reliable, "notes": list(b.notes), "sentence": b.sentence()},
            "bound_note": self.bound_note,
            "export": {"csv": str(self.export.csv or ""), "conf": str(self.export.conf or ""),
                       "lines": self.export.lines, "notes": self.export.notes,
                       "compatibility": self.export.compatibility},
            "notes": list(self.notes),
        }


def noise_pct(judgement: Judgement | None) -> float:
    """The smallest decode gain (%) a relaunch can tell from noise: the larger of the launch
    noise (:func:`tuner.stats.launch_noise`, its prior before two launches of a set exist) and
    the judgement's minimum effect worth calling faster."""
    if judgement is None:
        return 100.0 * max(stats.PRIOR_LAUNCH_SIGMA, stats.DEFAULT_MIN_EFFECT)
    sigma = judgement.noise.sigma if judgement.noise is not None else stats.PRIOR_LAUNCH_SIGMA
    return 100.0 * max(sigma, judgement.min_effect)


def deadline(started_monotonic: float, timeout_s: float | None, until: datetime | None) -> float | None:
    """The Unix time no screen run may end after: ``--timeout`` counted from the sweep's start
    (``started_monotonic``, :func:`time.monotonic`) and ``--until``, the earlier; None without either."""
    ends = [until.timestamp()] if until is not None else []
    if timeout_s is not None:
        ends.append(time.time() - (time.monotonic() - started_monotonic) + timeout_s)
    return min(ends) if ends else None


def nccl_carries(baseline: TrialRecord) -> bool | None:
    """Whether NCCL carries the decode allreduce, from the baseline's ``allreduce_backend``:
    True for ``nccl``, False for another backend (custom allreduce, symmetric memory ...),
    None when unknown."""
    backend = baseline.allreduce_backend
    if not backend or backend == "unknown":
        return None
    return backend == "nccl"


class _Loop:
    """The runs of one stage (see the module docstring)."""

    def __init__(self, cfg: ExperimentConfig, store: ScreenStore, ctx: RunContext, *, trials: int,
                 problems: Callable[[dict[str, str]], list[str]], deadline: float | None,
                 log: Callable[[str], None], seed: int | None) -> None:
        self.cfg, self.store, self.ctx, self.trials = cfg, store, ctx, trials
        self.problems, self.deadline, self.log = problems, deadline, log
        self.rng = random.Random(seed)
        self.decode = 0

    def fits(self) -> tuple[bool, str]:
        if self.deadline is None:
            return True, ""
        walls = [r.wall_s for r in self.store.runs() if r.wall_s]
        estimate = ESTIMATE_MARGIN * max(walls) if walls else self.ctx.timeout_s
        if time.time() + estimate > self.deadline:
            return False, f"--timeout/--until: another screen run (~{estimate:.0f} s) would not fit"
        return True, ""

    def run(self) -> str:
        runs = self.store.runs()
        if not any(r.role == FIRST for r in runs):
            fits, why = self.fits()
            if not fits:
                return why
            self.one({}, FIRST)
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
        skips = 0
        while sum(1 for r in self.store.runs() if r.role != LAST) < self.trials - 1:
            fits, why = self.fits()
            if not fits:
                return why
            if skips >= MAX_SKIPS:
                env = self._unscreened()
                if env is None:
                    return "every screened set was measured (or is rejected by NCCL)"
                self.one(env, SEARCH)
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
            self.one(env, SEARCH, trial)
            skips = 0
        return f"[screen] trials = {self.trials} reached"

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


def run_stage(cfg: ExperimentConfig, space: SearchSpace, store: StudyStore, *, baseline: TrialRecord, study_dir: Path,
              log: Callable[[str], None], judgement: Judgement | None = None, force: bool = False,
              deadline: float | None = None,
              seed: int | None = None, problems: Callable[[dict[str, str]], list[str]] = lambda env: [],
              carries: bool | None = None,
              held: Callable[[], AbstractContextManager[None]] | None = None) -> Stage:
    """Run (or, on a resume, finish) the screen of ``cfg`` over ``space``'s screened variables.

    ``store``: the sweep's :class:`tuner.sweep.storage.StudyStore` (the screen study lives in
    its storage, the summary goes into its StudyInfo ``screen``); ``baseline``: the first ok
    baseline (its TPOT, backend, NCCL version); ``judgement``: the sweep's so far, for the noise
    (:func:`noise_pct`); ``deadline``: Unix time no screen run may end after; ``problems(env)``:
    why NCCL would reject a set; ``carries``: whether NCCL carries the decode allreduce (None:
    from the baseline's backend, :func:`nccl_carries`); ``held``: holds signals during a
    teardown. ``log(text)`` gets the progress lines.

    Raises StoppedByCheck (exit 5) when the bound is below the noise and not ``force`` (after
    writing screen.csv, the exports and the summary), Interrupted on a signal (the run in
    flight is recorded interrupted and redone on resume).
    """
    assert cfg.screen is not None
    sc = cfg.screen
    sizes = screen_sizes(cfg)
    choices = {name: values for name, values in space.choices().items() if screenable(name)}
    sstore = ScreenStore(store, choices, seed)
    if sstore.recover():
        log("screen: runs of a runner that died were marked interrupted; they are made again")
    screen_dir = study_dir / "screen"
    argv = sc.argv(list(sizes.all))
    ctx = RunContext(argv, cfg.server.env, sc.timeout_s, False, screen_dir, log,
                     frozenset({sizes.decode, *([sizes.prefill] if sizes.prefill else [])}), held)
    ctx.json = _json_wanted(sc.json_output, sstore, argv, cfg.server.env, screen_dir, log)
    skipped = sorted(n for n in space.choices() if not screenable(n))
    if skipped:
        log(f"screen: {', '.join(skipped)} not screened (an allreduce benchmark cannot see them; they vary "
            "only in relaunches)")
    loop = _Loop(cfg, sstore, ctx, trials=sc.trials, problems=problems, deadline=deadline, log=log, seed=seed)
    loop.decode = sizes.decode
    for reason in sizes.reasons:
        log(f"screen: {reason}")
    ended = loop.run()
    records = sstore.records()
    write_screen_csv(records, study_dir / SCREEN_CSV)
    stage = _conclude(cfg, sizes, records, baseline, ended, study_dir, carries)
    stage.noise_pct = noise_pct(judgement)
    log(f"screen ended: {ended} ({sum(1 for r in records if r.ran)} runs); results in {study_dir / SCREEN_CSV}")
    for note in stage.notes:
        log(f"screen: {note}")
    stop = _announce(stage, log, force)
    store.update_info(screen=stage.summary())
    if stop:
        raise StoppedByCheck(stop)
    return stage


def _json_wanted(setting: bool | str, sstore: ScreenStore, argv: list[str], server_env: Mapping[str, str],
                 screen_dir: Path, log: Callable[[str], None]) -> bool:
    """Whether to pass ``-J``: the config's choice, or (``auto``) the ``-h`` probe, asked once
    per study (the answer is kept in the screen study)."""
    if isinstance(setting, bool):
        return setting
    known = sstore.get("json")
    if known is not None:
        return known == "true"
    env, _ = screen_env(os.environ, server_env, {})
    ok, why = supports_json(argv, env, screen_dir / "probe-h.log")
    log(f"screen: nccl-tests JSON output (-J) {'used' if ok else 'not used'}: {why}")
    sstore.put("json", "true" if ok else "false")
    return ok


def _conclude(cfg: ExperimentConfig, sizes: ScreenSizes, records: list[ScreenRecord], baseline: TrialRecord,
              ended: str, study_dir: Path, carries: bool | None) -> Stage:
    """Ranking, top sets, the bound and the exports from the finished runs."""
    assert cfg.screen is not None
    ranked = rank.rank_sets(records, sizes.decode, sizes.prefill, cfg.screen.tie_pct)
    bad = rank.bad_sets(records)
    untuned = rank.untuned_time(records, sizes.decode)
    drift = rank.untuned_drift(records, sizes.decode)
    # Only sets at least as fast as the untuned one (within the tie) are worth a relaunch.
    limit = math.inf if untuned is None else untuned * (1.0 + cfg.screen.tie_pct / 100.0)
    worth = [s for s in ranked if s.decode_us <= limit][:cfg.screen.top_k]
    top = [Planned(dict(s.env), [], Kind.PRESET, f"screen-{i + 1}") for i, s in enumerate(worth)]
    notes = []
    if ranked and len(worth) < min(cfg.screen.top_k, len(ranked)):
        notes.append(f"only {len(worth)} screened set(s) were as fast as the untuned one at the decode size "
                     f"({untuned:.2f} us): {len(worth)} relaunched first, not top_k = {cfg.screen.top_k}")
    if drift is not None and abs(drift) > 0.05:
        notes.append(f"the untuned set's screen time moved {drift:+.0%} between the first and last run: "
                     "the screen's ranking is less certain than its numbers suggest")
    if bad:
        notes.append(f"{len(bad)} set(s) reported wrong values and will never be relaunched: "
                     + "; ".join(f"{k} ({v})" for k, v in list(bad.items())[:5]))
    bound, why = _bound(sizes, untuned, ranked, baseline, nccl_carries(baseline) if carries is None else carries)
    export = write_exports(records, study_dir, baseline.nccl_version or _version(records))
    return Stage(sizes, records, ranked, top, bad, bound, why, untuned, export, ended, drift=drift, notes=notes)


def _version(records: list[ScreenRecord]) -> str:
    return next((r.nccl_version for r in records if r.nccl_version), "")


def _bound(sizes: ScreenSizes, untuned: float | None, ranked: list[rank.RankedSet], baseline: TrialRecord,
           carries: bool | None) -> tuple[Bound | None, str]:
    """The bound, or None with why it does not apply."""
    if carries is False:
        return None, (f"NCCL does not carry the decode allreduce ({baseline.allreduce_backend}): the screen's "
                      "times say nothing about decode, so no bound is given")
    if untuned is None:
        return None, "the untuned screen run measured nothing at the decode size: no bound"
    if sizes.per_token is None:
        return None, "no [model] table: the allreduces per token are unknown, so no bound is given"
    if not baseline.tpot_s or baseline.tpot_s <= 0:
        return None, "the baseline's TPOT was not measurable (bursty delivery): no bound"
    best = ranked[0].decode_us if ranked else None
    return allreduce_bound(untuned, sizes.per_token, baseline.tpot_s, best), ""


def _announce(stage: Stage, log: Callable[[str], None], force: bool) -> str:
    """Print the bound; return the stop message when it is below the noise (unless ``force``)."""
    b = stage.bound
    if b is None:
        log(f"screen: {stage.bound_note}")
        return ""
    if b.reliable and b.max_gain_pct is not None:
        best = (f"; the best screened set predicts {b.best_gain_pct:+.1f} % ({b.best_tok_s:.1f} tok/s)"
                if b.best_gain_pct is not None and b.best_tok_s is not None else "")
        log(f"bound: NCCL tuning can gain at most {b.max_gain_pct:.1f} %{best}. Allreduce takes about "
            f"{b.allreduce_share:.0%} of decode time ({b.baseline_tok_s:.1f} tok/s now, "
            f"{b.free_allreduce_tok_s:.1f} if allreduce were free).")
    else:
        log(f"bound: {b.sentence()}")
    for note in b.notes:
        log(f"bound: {note}")
    if b.best_gain_pct is not None and b.best_gain_pct < stage.noise_pct and not b.below_noise(stage.noise_pct):
        log(f"bound: the best screened set's predicted {b.best_gain_pct:+.1f} % is below the {stage.noise_pct:.1f} % "
            "a relaunch can tell from noise: its relaunches will likely show no significant difference")
    if not b.below_noise(stage.noise_pct):
        return ""
    msg = (f"NCCL tuning can gain at most {b.max_gain_pct:.1f} % of decode speed here (allreduce is "
           f"{b.allreduce_share:.0%} of TPOT), below the {stage.noise_pct:.1f} % a relaunch can tell from noise: "
           "relaunching tuned sets is pointless")
    if force:
        log(f"{msg}; --force: relaunching anyway")
        return ""
    return msg + ". Pass --force to relaunch anyway."
