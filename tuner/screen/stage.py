"""The screen stage: nccl-tests under many sets in seconds each, then the bound and the best sets.

Order (issue 9): the baseline relaunch first (the runner's), then this stage: the untuned set,
``[screen] trials - 2`` runs chosen by the sampler over the screened variables (its own study,
``<study>-screen``, in the sweep's storage, so a resume continues it), the untuned set again
(its drift tells how stable the screen was); then the tuned relaunches, the best ``top_k``
screened sets first. Screen runs are not counted by ``--trials``; none starts that would end
past ``--timeout``/``--until``.

The runs: :mod:`tuner.screen.loop`. After them: ``screen.csv``, the ranking
(:mod:`tuner.screen.rank`), the export for the tuner plugin (:mod:`tuner.screen.export`), and the
bound (:mod:`tuner.screen.limit`) printed before any tuned relaunch. When even free allreduce
would gain less than a relaunch can tell from noise, the stage raises
:class:`tuner.errors.StoppedByCheck` (exit 5) unless ``force``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tuner.errors import StoppedByCheck
from tuner.inputs import ExperimentConfig, SearchSpace
from tuner.judging import Judgement
from tuner.planning import ScreenedSet
from tuner.record import RankedEntry, ScreenBound, ScreenExport, ScreenSummary, Status, TopSet, TrialRecord
from tuner.screen import rank
from tuner.screen.bound import Bound
from tuner.screen.export import Export, write_exports
from tuner.screen.limit import announce, bound_for, nccl_carries, noise_pct
from tuner.screen.loop import ScreenLoop
from tuner.screen.measure import RunContext
from tuner.screen.run import screen_env, screenable, supports_json
from tuner.screen.sizes import ScreenSizes, screen_sizes
from tuner.screen.store import CHECK, ScreenRecord, ScreenStore
from tuner.screen.table import SCREEN_CSV, write_screen_csv
from tuner.study import StudyStore

__all__ = ["RANKING_KEPT", "Stage", "run_stage"]

#: Ranked sets kept in the study's summary (the report lists them).
RANKING_KEPT = 50


@dataclass
class Stage:
    """What the screen found: ``sizes``, every run (``records``), the ranking (``ranked``,
    best first), ``top_sets`` (the first ``top_k``, as the planner takes them: ``(name, env)``
    pairs named ``screen-1``...), ``bad`` (``{screen key: cause}`` of sets with wrong values), the
    ``bound`` (None when it does not apply, ``bound_note`` says why), ``untuned_us`` (us at the
    decode size), ``export`` (tuner-plugin files), ``ended`` (why the runs stopped)."""

    sizes: ScreenSizes
    records: list[ScreenRecord]
    ranked: list[rank.RankedSet]
    top_sets: list[ScreenedSet]
    bad: dict[str, str]
    bound: Bound | None
    bound_note: str
    untuned_us: float | None
    export: Export
    ended: str
    noise_pct: float = math.nan
    drift: float | None = None
    notes: list[str] = field(default_factory=list)
    loop: ScreenLoop | None = field(default=None, repr=False)
    on_change: Callable[[Stage], None] | None = field(default=None, repr=False)

    def check(self, env: Mapping[str, str]) -> str | None:
        """Why a set must never be relaunched (its screen reported wrong values), else None.

        Matches on the screened variables only (:func:`tuner.screen.rank.screen_key`). A set
        whose screened variables were never screened (a later proposal of the main sampler) is
        screened once now, role ``check``, so no set reaches a relaunch unscreened; only wrong
        values forbid it (a crash or hang of the benchmark alone does not).
        """
        key = rank.screen_key(env)
        if key not in self.bad and self.loop is not None and key not in {r.key for r in self.records if r.ran}:
            rec = self.loop.one({k: v for k, v in env.items() if screenable(k)}, CHECK)
            self.records.append(rec)
            if rec.status is Status.INVALID_OUTPUT:
                self.bad[key] = rec.cause
            if self.on_change is not None:
                self.on_change(self)
        cause = self.bad.get(key)
        return f"the screen reported wrong values for its NCCL variables ({cause})" if cause is not None else None

    def summary(self) -> ScreenSummary:
        """What the study stores of the stage (:attr:`tuner.record.StudyInfo.screen`, read by the report)."""
        b = self.bound
        return ScreenSummary(
            decode_bytes=self.sizes.decode, prefill_bytes=self.sizes.prefill,
            allreduces_per_token=self.sizes.per_token, size_reasons=list(self.sizes.reasons),
            runs=sum(1 for r in self.records if r.ran), ended=self.ended,
            untuned_us=self.untuned_us, untuned_drift=self.drift,
            best_us=self.ranked[0].decode_us if self.ranked else None,
            best_set=dict(self.ranked[0].env) if self.ranked else None,
            top_sets=[TopSet(dict(p.env), p.name) for p in self.top_sets],
            ranking=[RankedEntry(r.key, dict(r.env), r.decode_us, r.prefill_us) for r in self.ranked[:RANKING_KEPT]],
            bad_sets=dict(self.bad), noise_pct=None if math.isnan(self.noise_pct) else self.noise_pct,
            bound=None if b is None else ScreenBound(
                share=b.allreduce_share, max_gain_pct=b.max_gain_pct, best_gain_pct=b.best_gain_pct,
                baseline_tpot_s=b.baseline_tpot_s, baseline_tok_s=b.baseline_tok_s,
                free_allreduce_tok_s=b.free_allreduce_tok_s, best_tok_s=b.best_tok_s,
                reliable=b.reliable, notes=list(b.notes), sentence=b.sentence()),
            bound_note=self.bound_note,
            export=ScreenExport(csv=str(self.export.csv or ""), conf=str(self.export.conf or ""),
                                lines=list(self.export.lines), notes=list(self.export.notes),
                                compatibility=self.export.compatibility),
            notes=list(self.notes),
        )


def deadline(started_monotonic: float, timeout_s: float | None, until: datetime | None) -> float | None:
    """The Unix time no screen run may end after: ``--timeout`` counted from the sweep's start
    (``started_monotonic``, :func:`time.monotonic`) and ``--until``, the earlier; None without either."""
    ends = [until.timestamp()] if until is not None else []
    if timeout_s is not None:
        ends.append(time.time() - (time.monotonic() - started_monotonic) + timeout_s)
    return min(ends) if ends else None


def run_stage(cfg: ExperimentConfig, space: SearchSpace, store: StudyStore, *, baseline: TrialRecord, study_dir: Path,
              log: Callable[[str], None], judgement: Judgement | None = None, force: bool = False,
              deadline: float | None = None,
              seed: int | None = None, problems: Callable[[dict[str, str]], list[str]] = lambda env: [],
              carries: bool | None = None,
              held: Callable[[], AbstractContextManager[None]] | None = None) -> Stage:
    """Run (or, on a resume, finish) the screen of ``cfg`` over ``space``'s screened variables.

    ``store``: the sweep's :class:`tuner.study.storage.StudyStore` (the screen study lives in
    its storage, the summary goes into its StudyInfo ``screen``); ``baseline``: the first ok
    baseline (its TPOT, backend, NCCL version); ``judgement``: the sweep's so far, for the noise
    (:func:`tuner.screen.limit.noise_pct`); ``deadline``: Unix time no screen run may end after; ``problems(env)``:
    why NCCL would reject a set; ``carries``: whether NCCL carries the decode allreduce (None:
    from the baseline's backend, :func:`tuner.screen.limit.nccl_carries`); ``held``: holds signals during a
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
    loop = ScreenLoop(sstore, ctx, trials=sc.trials, decode=sizes.decode, problems=problems, deadline=deadline,
                      log=log, seed=seed)
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
    stop = announce(stage.bound, stage.bound_note, stage.noise_pct, log, force)
    store.update_info(screen=stage.summary())
    stage.loop = loop

    def changed(st: Stage) -> None:  # a check run: keep screen.csv and the study's summary current
        write_screen_csv(sstore.records(), study_dir / SCREEN_CSV)
        store.update_info(screen=st.summary())

    stage.on_change = changed
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
    top = [ScreenedSet(f"screen-{i + 1}", dict(s.env)) for i, s in enumerate(worth)]
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
    bound, why = bound_for(sizes, untuned, ranked, baseline, nccl_carries(baseline) if carries is None else carries)
    export = write_exports(records, study_dir, baseline.nccl_version or _version(records))
    return Stage(sizes, records, ranked, top, bad, bound, why, untuned, export, ended, drift=drift, notes=notes)


def _version(records: list[ScreenRecord]) -> str:
    return next((r.nccl_version for r in records if r.nccl_version), "")
