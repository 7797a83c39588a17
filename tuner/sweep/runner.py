"""The sweep loop: recover; stage 1 (baseline, re-measures, presets, proposals); stage 2 (confirmations, final baseline).

What to relaunch, in which order, what to skip and which checks keep their slots is planning's
(:class:`tuner.planning.Planner`, the same rules ``--dry-run`` prints): the untuned baseline
first, then re-measures, retries, the screen's best, presets and proposals as it says, then
the reserved checks. The budget (``--trials``) counts every relaunch of the whole study, those
in flight on other runners included (:func:`tuner.planning.counts_in_budget`): the baseline, its
re-measures, the tuned sets and the confirmations; stage 1 stops where the reserved checks'
slots begin (:class:`tuner.planning.Budget`). Under ``--timeout``/``--until`` a relaunch is started
only when it fits with the reserved checks' time kept after it (:class:`tuner.planning.NightLimits`,
the rule the dry run's clock prints): the first stage stops early enough for the confirmations and
the final baseline. The start of the night prints the clock (a relaunch's time by phase, the
duration, which relaunches fit, the expected end), and each relaunch's progress line its number
of the night's and the expected end, both corrected as relaunches are measured.

Each relaunch reads as the night does: plan (the planner's next set, one
:class:`tuner.planning.Launch`), launch and measure (:func:`tuner.sweep.trial.relaunch`), judge
(the planner's checks before, :mod:`tuner.judging` after), record (the study's storage, the
progress lines). Several runners may share one study (:mod:`tuner.sweep.runners`): each measures
the baseline of its host type (tuner.study.host) first unless the study has one. What the first
baseline teaches the night (NCCL's version and topology, the triage, the backend check) is
:mod:`tuner.sweep.lessons`'.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import optuna

from tuner import screen
from tuner.errors import MachineFailed, MachineNotClean
from tuner.inputs import ExperimentConfig, SearchSpace
from tuner.judging import SINGLE_STREAM, Judgement, stats
from tuner.planning import (
    EXHAUSTED,
    MAX_SKIPPED_PROPOSALS,
    Budget,
    Launch,
    NightClock,
    NightLimits,
    Planner,
    RelaunchTime,
    Rules,
    Step,
    StudyFacts,
    clock_budget,
    counts_in_budget,
    final_baseline_owed,
    fits,
    load_decode_context,
    outlier_baseline,
    reach,
    reach_lines,
    relaunch_time,
    rules_before_the_night,
    span,
    target_met,
    unused_line,
)
from tuner.record import Kind, Status, TrialRecord
from tuner.server import SignalGuard, split_inherited
from tuner.study import RunnerFile, StudyStore, default_storage, heartbeat_settings, open_study, runner_id, this_host
from tuner.sweep import evidence
from tuner.sweep.gate import REFERENCE_ENV, REFERENCE_PRESET, check_answers, reference_record
from tuner.sweep.lessons import backend_check, baseline_failed, host_judgement, learn, measure_backends, plan_fixes
from tuner.sweep.prelaunch import before_first_launch, budget_words
from tuner.sweep.progress import Progress, start_lines, trial_details, trial_lines
from tuner.sweep.runners import Runners
from tuner.sweep.trial import Launcher, runs_wanted

__all__ = [
    "Sweep",
    "SweepOptions",
    "SweepOutcome",
]


@dataclass
class SweepOptions:
    """Command-line choices for one sweep.

    ``trials``: relaunch budget, every relaunch included (None: the config's; :class:`tuner.planning.Budget`). ``timeout_s`` (s) and
    ``until`` (wall clock) bound the night; ``fill_clock``: no trials were given, so under a deadline the budget is
    what fits (set at the start from the relaunch time known, again once the baseline measures one). ``target`` (tok/s): stop at the first set whose CI
    lower bound meets it (``always``: tune even when the baseline meets it).
    """

    study: str
    results: Path = Path("results")
    storage: str | None = None
    trials: int | None = None
    mode: str | None = None
    seed: int | None = None
    baseline_every: int | None = None
    final_baseline: bool = True
    confirm: bool = True
    rebaseline: bool = False
    allow_unsafe: bool = False
    force: bool = False
    target: float | None = None
    always: bool = False
    timeout_s: float | None = None
    until: datetime | None = None
    fill_clock: bool = False
    min_effect: float = stats.DEFAULT_MIN_EFFECT
    progress: Progress | None = None

    @property
    def study_dir(self) -> Path:
        """``results/<study>/``: storage (by default), CSV, plots, logs."""
        return self.results / self.study

    def resolved(self, config: ExperimentConfig) -> SweepOptions:
        """These options with what they leave unset taken from ``config``'s ``[sweep]``."""
        sweep = config.sweep
        return dataclasses.replace(
            self, trials=self.trials or sweep.trials, mode=self.mode or sweep.mode,
            seed=self.seed if self.seed is not None else sweep.seed,
            baseline_every=self.baseline_every if self.baseline_every is not None else sweep.baseline_every,
            target=self.target if self.target is not None else sweep.target)


@dataclass
class SweepOutcome:
    """What a sweep did: relaunches made in this run and why it stopped; ``confirm_skipped`` and
    ``final_baseline_skipped``: why a reserved check owed was not made (empty when it was),
    ``next_run``: what the next run of the same command makes first, when one is owed."""

    relaunches: int = 0
    stop_reason: str = ""
    target_met_untuned: bool = False
    target_reached_by: int | None = None
    final_baseline_skipped: str = ""
    confirm_skipped: str = ""
    next_run: str = ""
    outlier_remeasured: int | None = None

    def target_reached(self, trial: int | None, target: float, *, already: bool = False) -> None:
        """Stop at ``--target`` (tok/s): met by the baseline (``trial`` None) or reached by ``trial``
        (``already``: before this run, so no further set is launched)."""
        if trial is None:
            self.target_met_untuned = True
            self.stop_reason = f"target {target:g} tok/s already met by the baseline"
            return
        self.target_reached_by = trial
        self.stop_reason = (f"target {target:g} tok/s already reached by trial {trial}; no further set launched "
                            "(--always to tune on)" if already else f"target {target:g} tok/s reached by trial {trial}")


#: Why a relaunch asked is dropped when trials asked before it spent the budget.
_SPENT_BEFORE = "the budget was spent by trials asked before it (other runners')"


class Sweep:
    """One sweep of ``config`` under ``options`` over ``space``; call :meth:`run`.

    The study's metric is ``config.probe.metric``: the sampler is told its medians, ``repeats =
    "auto"`` sizes launches from its runs, and the sweep's verdicts judge on it
    (:func:`tuner.study.storage.check_metric` holds a study to the metric it began with).
    Opening the storage may raise what Optuna/SQLAlchemy raise for a bad URL (the CLI reports
    it as bad input) and OSError for an unusable results folder.
    """

    def __init__(self, config: ExperimentConfig, space: SearchSpace, options: SweepOptions) -> None:
        self.cfg, self.space, self.opt = config, space, options.resolved(config)
        self.dir = options.study_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.storage_url = options.storage or default_storage(self.dir)
        heartbeat_s, grace_s = heartbeat_settings(os.environ)
        self.store = StudyStore(open_study(options.study, self.storage_url, self.opt.seed, heartbeat_interval_s=heartbeat_s,
                                           grace_period_s=grace_s), space.choices())
        self.host = this_host(config)
        self.budget, self.target = self.opt.trials or 0, self.opt.target
        self.progress = options.progress or Progress(self.budget)
        self.facts = StudyFacts(self.store.info, lambda: next(iter(self._baselines()), None), config)
        # identity at the night's allreduce sizes, from a `nccl-tune diagnose` of this study (results/<study>/diagnose.json)
        self.decode = load_decode_context(self.dir, config)
        self.rules = Rules(config.server.env, self.facts, decode=self.decode, allow_unsafe=options.allow_unsafe)
        self.runner_file = RunnerFile(self.dir, config.server.port)
        self.runners = Runners(self.store, self.runner_file, self.host.host_type, heartbeat_s=heartbeat_s,
                               grace_s=grace_s, log=self.progress.log)
        self.planner = Planner.judging_by(
            self.rules, space, self.opt.mode or "", records=lambda: self.store.records(relaunched_only=False),
            busy_keys=lambda: self.runners.busy_keys(self.rules.key_of), baseline_every=self.opt.baseline_every or 0,
            confirm=options.confirm, final_baseline=options.final_baseline, trials=self.budget,
            reference=config.gates.answers and config.gates.reference)
        #: the budget with its reserved checks' slots, and the Unix time no relaunch may end after
        self.limits = NightLimits.of(self.planner.budget, time.time(), options.timeout_s, options.until)
        self.signals = SignalGuard()
        self.launcher = Launcher(config, self.dir, self.store, self.runner_file, self.signals, self.progress, self.host)
        self._check_at: int | None = None  # in stage 2: the reserved check (its index in Budget.steps) being made
        self.outcome = SweepOutcome()
        self._backend_said = False

    # -- what the study holds ----------------------------------------------------------------
    def _baselines(self) -> list[TrialRecord]:
        """Ok baseline launches of this runner's host type, oldest first."""
        return self.store.ok_baselines(self.host.host_type)

    def _spent(self, besides: int | None = None) -> int:
        """Relaunches the budget counts: every relaunch of the whole study, finished or in flight
        on any runner (a resumed sweep continues the count); interrupted trials not, nor trial
        ``besides`` (one about to be launched, whose claim is stored already)."""
        return sum(1 for r in self.store.records() if counts_in_budget(r) and r.trial != besides)

    def _per(self) -> RelaunchTime:
        """One relaunch's time, measured (else configured)."""
        return relaunch_time(self.cfg, self.store.finished())

    def _fits(self, step: Step | None = None, *, count_budget: bool = True,
              what: str = "another relaunch") -> tuple[bool, str]:
        """Whether a relaunch (``step`` None: a first-stage one) may start now, and why not
        (:meth:`tuner.planning.NightLimits.allows`)."""
        per = self._per()
        guard = per.guard_s if self.limits.deadline is not None else 0.0
        return self.limits.allows(self._spent(), time.time(), guard, step=step, made=self._check_at or 0,
                                  count_budget=count_budget, what=what, soak_s=per.soak_s)

    def _clock(self, besides: int | None = None) -> NightClock:
        """The rest of the night from now, on the measured (else configured) relaunch time;
        ``besides``: a trial about to be launched, not yet counted as spent (:meth:`_spent`)."""
        return self.limits.clock(self._per(), time.time(), self._spent(besides), stage2=self._check_at is not None,
                                 made=self._check_at or 0, first_free=not self._baselines())

    def _plan_rules(self) -> Rules:
        """The rules the dry run plans by (what the night's store would be read for at every set
        is not needed to count the presets a budget reaches)."""
        return rules_before_the_night(self.cfg, self.dir, allow_unsafe=self.opt.allow_unsafe)

    def _fill_budget(self, *, measured: bool = False) -> None:
        """Without trials given and under a deadline (``fill_clock``): the budget becomes what fits
        (:func:`tuner.planning.clock_budget`), at the start from the relaunch time known, and once
        the baseline has ``measured`` one; said either way."""
        if not self.opt.fill_clock or self.limits.deadline is None:
            return
        budget, fits = clock_budget(self.space, self._plan_rules(), self._per(), time.time(), self.limits.deadline,
                                    mode=self.opt.mode or "", baseline_every=self.opt.baseline_every or 0,
                                    screen_top_k=self.cfg.screen.top_k if self.cfg.screen else None,
                                    confirm=self.opt.confirm, final_baseline=self.opt.final_baseline,
                                    spent=self._spent(), first_free=not self._baselines())
        before = f"before {self.limits.deadline_words} (no --trials or sweep.trials given)"
        if budget is None:
            self.progress.log(f"budget: what fits {before}, counted once the baseline measures a relaunch's time; "
                              f"{self.budget} relaunches until then")
            return
        self.budget = budget
        self.planner.budget = Budget(budget, self.opt.confirm, self.opt.final_baseline, self.planner.budget.reference)
        self.planner.reserved = self.planner.budget.steps
        self.limits = dataclasses.replace(self.limits, budget=self.planner.budget)
        self.store.update_info(trials=budget)
        said = f"what reaches every preset ({fits} fit {before})" if budget != fits else f"what fits {before}"
        self.progress.log(f"budget: {budget} relaunches, {said}" + (", at the relaunch time measured" if measured else ""))

    def _left_out(self) -> list[str]:
        """What the budget leaves out at the night's start, as log lines: the time before the deadline
        it leaves unused (trials given), no room for a tuned set, the presets it does not reach (with
        the --trials that does)."""
        clock = self._clock()
        left = [] if self.opt.fill_clock else [unused_line(clock, self.limits, confirm=self.opt.confirm,
                                                           final_baseline=self.opt.final_baseline)]
        found = reach(self.space, self._plan_rules(), budget=self.budget, baseline_every=self.opt.baseline_every or 0,
                      screen_top_k=self.cfg.screen.top_k if self.cfg.screen else None, confirm=self.opt.confirm,
                      final_baseline=self.opt.final_baseline)
        no_set = budget_words(self.budget, self.opt.confirm, self.opt.final_baseline,
                              reference=self.planner.budget.reference)[1]
        return ([f"clock: {line}" for line in left if line] + ([f"warning: {no_set}"] if no_set else [])
                + [f"warning: {line}" for line in reach_lines(found, self._per(), time.time(), self.limits)])

    # -- the night ------------------------------------------------------------------------------
    def run(self, steps: Callable[[], None] | None = None) -> SweepOutcome:
        """Run relaunches until the budget, time limit, target or space ends the sweep.

        ``steps``: in place of the night's loop, the relaunches to make (``nccl-tune check``'s
        fixed design, each one :meth:`relaunch_set`), with the same recovery, preflight, signal
        handling and teardown around them. Raises MachineNotClean (port held, processes
        survived, another runner alive), BaselineFailed (nothing can be judged), Interrupted on
        SIGHUP/SIGINT/SIGTERM after tearing the server down. What was recorded stays in every case.
        """
        if steps is not None:  # a check judges who carries decode itself: no backend space planned
            self._backend_said = True
        removed, kept = split_inherited(os.environ, frozenset(self.space.choices()))
        for line in start_lines([*self.cfg.notices, *self.space.notices], removed, kept, self.decode):
            self.progress.log(line)
        try:
            with self.runners.holding(self.opt.study):
                # a night in progress has no end mark: `nccl-tune studies` reads an empty one without a
                # live runner as a night stopped without one (killed, a crash)
                self.store.update_info(stop_reason="", trials=self.budget)
                with self.signals:
                    self.runners.recover()
                    before_first_launch(self.cfg, self.dir, self.progress.log, frozenset(self.space.choices()))
                    self._fill_budget()
                    for line in self._clock().lines(self.limits.deadline_words):
                        self.progress.log(f"clock: {line}")
                    if steps is None:  # a check's design is fixed: nothing to reach, no time to fill
                        for line in self._left_out():
                            self.progress.log(line)
                    (steps or self._night)()
        finally:
            self.progress.close()
        return self.outcome

    def _night(self) -> None:
        """The baseline, what it teaches, the screen, the first stage, then the reserved checks."""
        if self._stopped_at_baseline():
            return
        self._fill_budget(measured=True)
        self._check_backend()
        self._reference_check()
        plan_fixes(self.store.info(), self.planner, self.progress.log)
        if self.cfg.screen:  # nccl-tests under many sets, the bound, the best sets first
            stage = screen.run_stage(
                self.cfg, self.space, self.store, baseline=self._baselines()[0], study_dir=self.dir,
                log=self.progress.log, judgement=self._judge(), force=self.opt.force,
                deadline=self.limits.kept_deadline(self._per().guard_s, self._spent()), seed=self.opt.seed,
                problems=self.rules.problems, held=self.signals.held)
            self.planner.screened_first(stage.top_sets, stage.check)
        self._first_stage()
        for i, check in enumerate(self.planner.reserved):  # stage 2: each confirmation slot, then the final baseline
            self._check_at = i
            if check is Step.CONFIRM:
                self._confirm()
            else:
                self._final_baseline()
        if self.outcome.target_reached_by is None and (self.outcome.confirm_skipped
                                                       or self.outcome.final_baseline_skipped):
            self.outcome.next_run = self.limits.next_run(self._spent(), confirm_owed=bool(self.outcome.confirm_skipped),
                                                         each_s=self._per().seconds)

    def _reference_check(self) -> None:
        """Once a night, right after the first baseline (``[gates] reference``): the baseline
        relaunched in the correctness gate's reference configuration (:mod:`tuner.sweep.gate`);
        it counts in the budget (the plan's reference check). Not made when the study has one
        for this host type, or the budget's first stage has no slot left."""
        gates = self.cfg.gates
        if not (gates.answers and gates.reference) or reference_record(self.store, self.host.host_type) is not None:
            return
        fits, why = self._fits(what="the correctness gate's reference check")
        if not fits:
            self.progress.log(f"the correctness gate's reference check was skipped: {why}")
            return
        flags = list(self.cfg.server.server_kind().reference_flags)
        refused = self.store.plan_also({**{k: ("unset", v) for k, v in REFERENCE_ENV.items()},
                                        **{f: ("unset", "on") for f in flags}})
        if refused:
            self.progress.log(f"the correctness gate's reference check was skipped: the study searches "
                              f"{', '.join(refused)} with other values")
            return
        self.progress.log("correctness gate: the baseline relaunched once in the reference configuration ("
                          + " ".join([*flags, *(f"{k}={v}" for k, v in REFERENCE_ENV.items())])
                          + "), to check its answers")
        self.relaunch_set(Kind.PRESET, dict(REFERENCE_ENV), flags, preset=REFERENCE_PRESET)

    def _stopped_at_baseline(self) -> bool:
        """Measure the untuned baseline when the study has none (or ``--rebaseline``); True when
        the night ends there (``--target`` met). Raises BaselineFailed when no baseline is ok."""
        baselines = self._baselines()
        if not baselines or self.opt.rebaseline:
            rec = self._baseline(recheck=bool(baselines) or self.runners.baseline_in_flight())
            met = rec is not None and target_met(rec, self.target)
        else:
            met = target_met(baselines[-1], self.target)
        reached = [r.trial for r in self.store.finished() if r.kind is not Kind.BASELINE and target_met(r, self.target)
                   ] if self.target is not None and not self.opt.always and not met else []
        if (met and not self.opt.always) or reached:
            self.outcome.target_reached(reached[0] if reached else None, self.target or 0.0, already=True)
            return True
        if not self._baselines():
            raise baseline_failed(self.store.finished(), self.host.host_type)
        return False

    def _first_stage(self) -> None:
        """Relaunch what planning says, re-measures as due, until the stage's share, the deadline's
        fit, ``--target`` or the space ends it; other runners' silent trials are waited for."""
        since_baseline = 0
        while True:
            self.store.fail_stale()  # a runner that died elsewhere: its trial is retried below
            fits, why = self._fits()
            if not fits:
                if self._await_silent():
                    continue
                self.outcome.stop_reason = why
                return
            screening = self.limits.budget.screening
            if self.planner.remeasure_due(since_baseline, screening - self._spent()):
                if self._baseline(recheck=True, limit=screening) is None:
                    return  # other runners' trials took the last stage-1 slot
                since_baseline = 0
                continue
            if self.outcome.target_reached_by is not None:
                return
            if self._outlier_remeasure():
                since_baseline = 0
                continue
            if not self._next_trial():
                if self._await_silent():
                    continue
                return
            since_baseline += 1

    def _await_silent(self) -> bool:
        """Wait for other runners' silent trials (:meth:`tuner.sweep.runners.Runners.await_silent`)
        while a retry would fit in time; True when one awaits its retry here."""
        def retry_owed() -> bool:
            planned = self.planner.next_planned()
            return planned is not None and planned.step is Step.RETRY

        return self.runners.await_silent(lambda: self._fits(Step.RETRY, count_budget=False)[0], retry_owed)

    # -- plan -----------------------------------------------------------------------------------
    def _next_trial(self) -> bool:
        """Ask planning for the next set and relaunch it; False when nothing is left to try.
        Named sets not launched are recorded and passed over; :data:`MAX_SKIPPED_PROPOSALS`
        proposals in a row that are not launched end the search."""
        skipped = 0
        while skipped < MAX_SKIPPED_PROPOSALS:
            step = self.planner.next_launch()
            if step.step is Step.DONE:
                self.outcome.stop_reason = step.reason
                return False
            planned = step if step.step is not Step.PROPOSAL else None
            trial, launch, rec = self._ask(None) if planned is None else self._ask(
                TrialRecord(trial=-1, kind=planned.kind, preset=planned.name, retry_of_trial=planned.retry_of),
                planned.env, planned.flags)
            if rec.kind is Kind.BASELINE:  # a baseline queued by an older nccl-tune
                self._relaunch(trial, launch, rec)
                return True
            bases = self._baselines()
            decision = self.planner.judge(dict(launch.env), list(launch.flags), baseline=bases[0] if bases else None)
            rec.runner = runner_id()
            if decision.launch and self.runners.taken(trial, launch.key, self.rules.key_of):
                self.store.drop(trial, "its set is in flight on an earlier trial (another runner's)")
                self.progress.detail(f"trial {trial.number} {json.dumps(dict(launch.env))} not launched: its set is in "
                                     "flight on an earlier trial (another runner's)")
                if planned is None:  # a named set is passed over once in flight: only proposals repeat
                    skipped += 1
                continue
            if decision.launch and self.runners.over_budget(trial, self.limits.budget.screening, rec):
                self.store.drop(trial, _SPENT_BEFORE)
                self.outcome.stop_reason = self.limits.budget.spent_words()
                return False
            if decision.launch:
                if planned is None:  # the sampler's proposal may be the set a dead runner left
                    rec.retry_of_trial = self.planner.retry_owed_by(launch.key)
                retry_of = rec.retry_of_trial
                if retry_of is not None:
                    self.progress.log(f"resume: retrying trial {retry_of} (interrupted), once")
                self._relaunch(trial, launch, rec)
                return True
            if planned is None:
                skipped += 1
            else:  # say why a planned set is not launched (a sampler's repeat is not news)
                self.progress.log(f"trial {trial.number} [{planned.name or planned.kind}] "
                                  f"{json.dumps(rec.env)} not launched: {decision.reason}")
            self.launcher.skip(trial, rec, decision)
        self.outcome.stop_reason = EXHAUSTED
        return False

    def _ask(self, rec: TrialRecord | None, env: dict[str, str] | None = None,
             flags: list[str] | None = None) -> tuple[optuna.Trial, Launch, TrialRecord]:
        # Servers dead runners left are torn down before the trial is asked, not between its
        # budget check and its record: other runners wait only so long for an asked trial to say
        # what it launches (UNDECIDED_WAIT_S), and a teardown on a loaded host outlasted it once.
        self.runners.reap()
        return self.launcher.ask(rec, self.rules.key_of, env, flags)

    def _baseline(self, *, recheck: bool, limit: int | None = None, checking: bool = False,
                  soak_s: float = 0.0) -> TrialRecord | None:
        """Measure the untuned baseline (a trial like the others, so the sampler learns from it);
        with ``limit``, not when trials asked before it (any runner's) spend that many relaunches
        (then None)."""
        trial, launch, rec = self._ask(TrialRecord(trial=-1, kind=Kind.BASELINE, recheck=recheck))
        if limit is not None and self.runners.over_budget(trial, limit, rec):
            self.store.drop(trial, _SPENT_BEFORE)
            return None
        return self._relaunch(trial, launch, rec, checking=checking, soak_s=soak_s)

    def relaunch_set(self, kind: Kind, env: dict[str, str], flags: list[str], *, preset: str = "",
                     recheck: bool = False, soak: bool = False) -> TrialRecord:
        """One relaunch of the set ``env`` + ``flags`` (``{}``/``[]`` and ``Kind.BASELINE``: the
        untuned baseline) outside planning, for a fixed design run through :meth:`run`
        (``steps``): asked, launched, probed, recorded and told to Optuna exactly as a night's
        relaunch; ``soak``: the config's soak after its probe (tuner.sweep.soak). Returns its
        record (any status); raises what :meth:`run` raises."""
        trial, launch, rec = self._ask(TrialRecord(trial=-1, kind=kind, preset=preset, recheck=recheck), env, flags)
        return self._relaunch(trial, launch, rec, soak_s=self.cfg.sweep.soak_s if soak else 0.0)

    # -- launch and measure ---------------------------------------------------------------------
    def _relaunch(self, trial: optuna.Trial, launch: Launch, rec: TrialRecord, *, checking: bool = False,
                  soak_s: float = 0.0) -> TrialRecord:
        """One relaunch of ``trial`` under ``launch`` (``soak_s``: its soak after the probe, s;
        tuner.sweep.soak); records it and tells Optuna. A tuned set
        that ends ``machine_fault`` gets the baseline check (:meth:`_baseline_check`); a relaunch
        left ``machine_fault`` (the baseline's own, or a set's whose baseline check failed) ends
        the night with MachineFailed (exit 8), unless ``checking`` (the check itself: its set says it)."""
        self.outcome.relaunches += 1
        night = self._clock(besides=trial.number)  # this one not counted: it is the first relaunch of the rest
        index = night.done + 1  # the study's count, every relaunch included: a resumed night counts on
        of = max(night.total, index)
        self.progress.plan(of, night.end_at)
        label = rec.preset or ("baseline re-measure" if rec.kind is Kind.BASELINE and rec.recheck else rec.kind.value)
        self.runners.reap()  # a runner found dead since the ask: its server ends before this launch
        failed: list[str] = []
        on_fault = None if rec.kind is Kind.BASELINE else (lambda r: self._baseline_check(r, failed))
        rec, found = self.launcher.launch(trial, launch, rec, version=self.facts().version,
                                          varied=frozenset([*self.space.choices(), *self.store.planned_only]),
                                          runs=runs_wanted(self.cfg.probe, self._baselines()),
                                          night={"relaunch": index, "of": of, "end_at": night.end_at, "label": label},
                                          on_fault=on_fault, soak_s=soak_s)
        if self.cfg.gates.answers:  # the correctness gate settles the status before the sampler is told
            check_answers(rec, store=self.store, study_dir=self.dir, host_type=self.host.host_type,
                          log=self.progress.log)
        self._record(trial, rec, label, found)
        if failed and not checking:
            raise MachineFailed(failed[0])
        if rec.kind is Kind.BASELINE and rec.status is Status.MACHINE_FAULT and not checking:
            raise MachineFailed(
                f"the untuned baseline (trial {rec.trial}) failed twice in a way that is not a set's: {rec.cause}. "
                "It is the machine's (its GPUs, its port, its container engine), not the server command's; "
                f"server log {rec.log}. Free the machine and run the same command again: the study resumes")
        return rec

    def _baseline_check(self, rec: TrialRecord, failed: list[str]) -> bool:
        """A tuned set failed twice in a way not plainly its own (``rec`` is ``machine_fault``):
        wait, then relaunch the untuned baseline (a re-measure: a baseline record like any other,
        judged with the rest, counted in the budget). It runs: the failures are the set's
        (``crashed``, both causes and the baseline's trial in the cause). It fails too: they are
        the machine's; ``rec`` stays ``machine_fault`` (never told to the sampler as the set's)
        and ``failed`` gets the night's closing message. Made whatever the budget says (blame
        needs it; it counts in the budget all the same), but only when it fits the night's
        deadline: else ``rec`` stays ``machine_fault``, unblamed, and the night goes on. True when
        the set's failure passes with time (``MachineFault.timed``: a memory guard) and the baseline
        served but was launched later after the last server's exit than the set's launches were
        (the machine's lag outlasted the set's waits): the set is then relaunched once
        more as late (:class:`tuner.sweep.trial.MachineClock`) before it can be blamed."""
        fits, why = self._fits(Step.RETRY, count_budget=False, what="the baseline check")
        if not fits:
            rec.cause += f"; the baseline could not be relaunched to check ({why}): not blamed on the set"
            return False
        set_delay = self.launcher.machine.delay_s
        timed = self.launcher.last_fault is not None and self.launcher.last_fault.timed  # before the baseline's launch
        self.launcher.wait_for_machine(rec, "relaunching the untuned baseline to see whose fault it is")
        base = self._baseline(recheck=True, checking=True)
        assert base is not None  # no limit: always relaunched
        base_delay = self.launcher.machine.delay_s
        if base.ok and timed and base_delay > set_delay + 0.5:
            rec.cause += (f"; the untuned baseline relaunched after it (trial {base.trial}) ran at "
                          f"{base.output_tok_s or 0:.1f} tok/s, launched {base_delay:.0f} s after the last server's exit "
                          f"against the set's {set_delay:.0f} s")
            return True
        if base.ok:
            rec.status = Status.CRASHED
            rec.cause += (f"; the untuned baseline relaunched after it (trial {base.trial}) ran at "
                          f"{base.output_tok_s or 0:.1f} tok/s, so the failures are the set's")
            return False
        rec.cause += f"; the untuned baseline relaunched after it (trial {base.trial}) failed too ({base.status}: {base.cause})"
        failed.append(
            f"trial {rec.trial} failed twice in a way that is not plainly its set's, and the untuned baseline relaunched "
            f"after it (trial {base.trial}) failed too: it is the machine's, not the set's (trial {rec.trial} is "
            f"recorded machine_fault and was not told to the sampler as failed). Seen: {rec.cause}. Server logs "
            f"{rec.log}, {base.log}. Free the machine (the GPUs' memory, the port, the container engine) and run the "
            "same command again: the study resumes and relaunches the set")
        return False

    # -- record ---------------------------------------------------------------------------------
    def _record(self, trial: optuna.Trial, rec: TrialRecord, label: str, found: evidence.Evidence | None) -> None:
        """Store the finished relaunch and tell Optuna, say it, learn from the study's first ok
        baseline, and stop at ``--target``. Raises MachineNotClean when its teardown left something."""
        if rec.kind is Kind.BASELINE and not rec.recheck and self.runners.earlier_baseline(trial.number):
            rec.recheck = True  # another runner's baseline of this host type came first: a re-measure
        self.store.finish(trial, rec, rec.median(self.cfg.probe.metric) or 0.0)
        if rec.wall_s:
            self.progress.trial_done(rec.wall_s)
        said, *warnings = trial_lines(rec, label)
        (self.progress.detail if rec.ok else self.progress.log)(said)  # the table at the end shows it
        for line in warnings:
            self.progress.log(line)
        for line in trial_details(rec):
            self.progress.detail(line)
        if rec.teardown_problem:
            raise MachineNotClean(f"after trial {rec.trial} the machine is not clean: {rec.teardown_problem}. "
                                  "The next trial was not launched; results so far are kept.")
        if rec.kind is Kind.BASELINE and rec.ok and found is not None and not self.store.info().nccl_learned:
            learn(self.store, found, self.cfg, self.space, self.dir, self.progress.log, self.progress.detail)
            self._check_backend()
        if rec.kind is not Kind.BASELINE and target_met(rec, self.target):
            self.outcome.target_reached(trial.number, self.target or 0.0)

    def _check_backend(self) -> None:
        """Once, after the study's first baseline: plan the server's backend space first when NCCL
        does not carry the decode allreduce, or stop (:func:`tuner.sweep.lessons.backend_check`)."""
        info = self.store.info()
        if info.allreduce_nccl_on_decode_path is False and not self._backend_said:
            self._backend_said = True
            found = backend_check(info, self.cfg, self.space, study=self.opt.study, force=self.opt.force,
                                  log=self.progress.log)
            if found is not None:
                measure_backends(*found, store=self.store, planner=self.planner, allow_unsafe=self.opt.allow_unsafe,
                                 version=self.facts().version, log=self.progress.log)

    # -- judge ----------------------------------------------------------------------------------
    def _judge(self, level: int = SINGLE_STREAM) -> Judgement:
        """This host type's sets judged on the study's metric (:func:`tuner.sweep.lessons.host_judgement`)."""
        return host_judgement(self.store, self.host.host_type, self.cfg.probe.metric, level)

    def _outlier_remeasure(self) -> bool:
        """Once a night: when the judgement's noise warning names the latest baseline launch as
        an outlier (:func:`tuner.planning.outlier_baseline`) and a stage-1 slot is free,
        relaunch the baseline (a re-measure; it counts in the budget and takes a set's slot).
        True when it was relaunched."""
        if self.outcome.outlier_remeasured is not None or self.runners.baseline_in_flight():
            return False  # done, or another runner of the study is relaunching the baseline now
        bases = self._baselines()
        j = self._judge()
        trial = outlier_baseline(j)
        if trial is None or not bases or bases[-1].trial != trial:
            return False  # silent, or a later baseline launch already stands beside it
        self.outcome.outlier_remeasured = trial
        self.progress.log(f"trial {trial}'s baseline launch is an outlier ({getattr(j, 'noise_warning', '')}); "
                          "the baseline is relaunched once more (a re-measure: it counts in the budget, one set fewer)")
        return self._baseline(recheck=True, limit=self.limits.budget.screening) is not None

    def _confirm(self) -> None:
        """Relaunch the next finalist once more in its reserved slot (planning's confirmation
        entry, kind confirm); the final baseline that follows completes the pair its gain must
        hold on. Counts in the budget, bounded by --timeout/--until; made once per finalist
        (also on a resume; an interrupted one is made again)."""
        if self.outcome.target_reached_by is not None:
            self.outcome.confirm_skipped = "the sweep stopped at --target"
            return  # the user asked to stop there
        j = self._judge(self.cfg.probe.judge_concurrency)
        entry = self.planner.confirmation(j)
        if entry is None:
            return
        fits, why = self._fits(Step.CONFIRM, what="the confirmation")  # and its fresh baseline after it
        if not fits:
            self.outcome.confirm_skipped = why
            self.progress.log(f"the confirmation of trial {entry.equals_trial}'s set was skipped: {why}")
            return
        trial, launch, rec = self._ask(TrialRecord(trial=-1, kind=entry.kind, preset=entry.name), entry.env, entry.flags)
        if self.runners.taken(trial, launch.key, self.rules.key_of):
            self.store.drop(trial, "the confirmation of this set is in flight on an earlier trial")
            return
        if self.runners.over_budget(trial, self.budget, rec):
            self.store.drop(trial, _SPENT_BEFORE)
            self.outcome.confirm_skipped = "the budget was spent by other runners' trials"
            return
        confirmed = next(s for s in j.sets.values() if s.first_trial == entry.equals_trial)
        gain = confirmed.comparison.gain_pct if confirmed.comparison else float("nan")
        # a set soaks once: the best set's second slot (no runner-up could be the best) is a fresh launch only
        soak = self.cfg.sweep.soak_s if not confirmed.confirm_trials else 0.0
        again = " (no runner-up could be the best: a second fresh launch of it)" if confirmed.confirm_trials else ""
        self.progress.log(f"confirming trial {entry.equals_trial}'s set ({gain:+.1f} %){again}: relaunched once more, "
                          + (f"with a {span(soak)} soak at concurrency {self._soak_levels()} after its probe, "
                             if soak else "")
                          + "then the baseline; the gain must hold on those launches alone")
        done = self._relaunch(trial, launch, rec, soak_s=soak)
        if not done.status.measured:  # a failed soak is a confirmation made: the verdict says it
            self.outcome.confirm_skipped = (f"its confirmation relaunch (trial {done.trial}) {done.status}"
                                            + (f": {done.cause}" if done.cause else ""))

    def _soak_levels(self) -> str:
        return ",".join(map(str, self.cfg.probe.concurrency or (1,)))

    def _baseline_soak(self) -> float:
        """The final baseline's soak (s): the finalists' soak, where a confirmation of this host
        type was soaked and the deadline leaves its time (so a machine that hangs anyway is not
        blamed on the set); else 0, said."""
        soak = self.cfg.sweep.soak_s
        soaked = any(r.kind is Kind.CONFIRM and r.soak_s is not None and r.host_type == self.host.host_type
                     for r in self.store.finished())
        if not soak or not soaked:
            return 0.0
        deadline = self.limits.deadline
        if deadline is not None and not fits(time.time() + soak, deadline, self._per().guard_s):
            self.progress.log(f"the final baseline is relaunched without its {span(soak)} soak: "
                              f"{self.limits.deadline_words or 'the deadline'} leaves no time for it")
            return 0.0
        return soak

    def _final_baseline(self) -> None:
        """The final baseline re-measure, right after the confirmations (their fresh baseline,
        and the drift check), in its reserved slot; made when a tuned relaunch followed the last
        baseline launch of this host type (also on a resume)."""
        if not final_baseline_owed(self._baselines(), self.store.finished(), self.host.host_type):
            return
        fits, why = self._fits(Step.FINAL_BASELINE, what="the final baseline")
        if fits and self._baseline(recheck=True, limit=self.budget, soak_s=self._baseline_soak()) is not None:
            return
        why = why or _SPENT_BEFORE
        self.outcome.final_baseline_skipped = why
        self.progress.log(f"the final baseline re-measure (drift check) was skipped: {why}")
