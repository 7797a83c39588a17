"""The sweep loop: recover; stage 1 (baseline, re-measures, presets, proposals); stage 2 (confirmations, final baseline).

What to relaunch, in which order, what to skip and which checks keep their slots is planning's
(:class:`tuner.planning.Planner`, the same rules ``--dry-run`` prints): the untuned baseline
first, then re-measures, retries, the screen's best, presets and proposals as it says, then
the reserved checks. The budget (``--trials``) counts every relaunch of the whole study, those
in flight on other runners included (:func:`tuner.planning.counts_in_budget`): the baseline, its
re-measures, the tuned sets and the confirmations; stage 1 stops where the reserved checks'
slots begin (:class:`tuner.planning.Budget`). Under ``--timeout``/``--until`` a relaunch is started
only when it fits with the reserved checks' time kept after it (:class:`tuner.planning.NightClock`,
the rule the dry run prints): the first stage stops early enough for the confirmations and the
final baseline. The start of the night prints the clock (a relaunch's time by phase, the
duration, which relaunches fit, the expected end), and each relaunch's progress line its number
of the night's and the expected end, both corrected as relaunches are measured.

Several runners (one per host, or per server of a host) may share one study through a
PostgreSQL storage (tuner.study.storage): each measures the baseline of its host type
(tuner.study.host) first unless the study has one, checks before each launch that no earlier
trial of any runner holds the same set, fails the trials of runners whose heartbeat stopped and
retries them once, and at the end waits for the trials of runners that fell silent rather than
leave them unretried. Each trial stores its server's identity; before each relaunch and when it
ends, a runner tears down every server a dead runner of the study left on its host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import optuna

from tuner.diagnose import load_diagnosis
from tuner.errors import BaselineFailed, Interrupted, MachineNotClean, NcclTuneError, StoppedByCheck
from tuner.inputs.config import ExperimentConfig
from tuner.inputs.space import BACKEND_SPACE, SearchSpace, backend_space_path, load_space
from tuner.judging import (
    SINGLE_STREAM,
    UNKNOWN_TYPE,
    Judgement,
    cannot_act_on,
    host_type_groups,
    judge,
    judge_by_host_type,
    judge_levels,
    runs_of,
    stats,
)
from tuner.nccl import NcclVersion, Topology, machine_from_log
from tuner.planning import (
    ESTIMATE_MARGIN,
    EXHAUSTED,
    MAX_SKIPPED_PROPOSALS,
    Budget,
    Facts,
    NightClock,
    PlanEntry,
    Planner,
    Rules,
    Step,
    counts_in_budget,
    deadline_at,
    deadline_name,
    final_baseline_owed,
    flag_params,
    load_decode_context,
    night_sizes,
    outlier_baseline,
    relaunch_time,
    span,
    split_params,
)
from tuner.record import Kind, Status, TopologyRecord, TrialRecord
from tuner.redaction import redact
from tuner.server import ServerIdentity, kill_leftover, preflight, split_inherited
from tuner.server.signals import SignalGuard
from tuner.study.host import this_host
from tuner.study.inflight import RunnerFile, host_name, runner_alive, runner_id
from tuner.study.storage import SETTLE_S, StudyStore, default_storage, heartbeat_settings, open_study
from tuner.study.workers import check_processes, gpus_of
from tuner.sweep import evidence
from tuner.sweep.progress import Progress, proof_line
from tuner.sweep.trial import TrialContext, log_path, relaunch
from tuner.triage import Triage, triage

__all__ = [
    "ESTIMATE_MARGIN",
    "Sweep",
    "SweepOptions",
    "SweepOutcome",
]


@dataclass
class SweepOptions:
    """Command-line choices for one sweep.

    ``trials``: relaunch budget, every relaunch included (None: the config's; :class:`tuner.planning.Budget`). ``timeout_s`` (s) and
    ``until`` (wall clock) bound the night. ``target`` (tok/s): stop at the first set whose CI
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
    min_effect: float = stats.DEFAULT_MIN_EFFECT
    progress: Progress | None = None

    @property
    def study_dir(self) -> Path:
        """``results/<study>/``: storage (by default), CSV, plots, logs."""
        return self.results / self.study


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


class Sweep:
    """One sweep of ``config`` under ``options`` over ``space``; call :meth:`run`.

    The study's metric is ``config.probe.metric``: the sampler is told its medians, ``repeats =
    "auto"`` sizes launches from its runs, and the sweep's verdicts judge on it
    (:func:`tuner.study.storage.check_metric` holds a study to the metric it began with).
    Opening the storage may raise what Optuna/SQLAlchemy raise for a bad URL (the CLI reports
    it as bad input) and OSError for an unusable results folder.
    """

    def __init__(self, config: ExperimentConfig, space: SearchSpace, options: SweepOptions) -> None:
        self.cfg = config
        self.space = space
        self.opt = options
        self.dir = options.study_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.storage_url = options.storage or default_storage(self.dir)
        seed = options.seed if options.seed is not None else config.sweep.seed
        self.heartbeat_s, self.grace_s = heartbeat_settings(os.environ)
        self.store = StudyStore(open_study(options.study, self.storage_url, seed, heartbeat_interval_s=self.heartbeat_s,
                                           grace_period_s=self.grace_s), space.choices())
        self.host = this_host(config)
        self.budget = options.trials or config.sweep.trials
        self.mode = options.mode or config.sweep.mode
        self.target = options.target if options.target is not None else config.sweep.target
        self.baseline_every = (options.baseline_every if options.baseline_every is not None
                               else config.sweep.baseline_every)
        self.progress = options.progress or Progress(self.budget)
        self._learned: Facts | None = None
        # identity at the night's allreduce sizes, from a `nccl-tune diagnose` of this study (results/<study>/diagnose.json)
        self.decode = load_decode_context(self.dir, config)
        self.rules = Rules(config.server.env, self._facts, decode=self.decode, allow_unsafe=options.allow_unsafe)
        self.planner = Planner(space, self.mode, records=lambda: self.store.records(relaunched_only=False),
                               busy_keys=self._busy_keys, problems=self.rules.problems, key_of=self.rules.key_of,
                               decode_bytes=self.decode.nbytes if self.decode is not None else None,
                               judged_at=self.decode.sizes_text() if self.decode is not None else None,
                               baseline_every=self.baseline_every, confirm=options.confirm,
                               final_baseline=options.final_baseline, trials=self.budget,
                               refusal=self.rules.backend_problem)
        self.runner_file = RunnerFile(self.dir, config.server.port)
        self.signals = SignalGuard()
        self._strict_port = False
        self.started = time.monotonic()
        #: the Unix time no relaunch may end after (--timeout from now, --until), None without either
        self.deadline = deadline_at(time.time(), options.timeout_s, options.until)
        self._deadline_words = deadline_name(options.timeout_s, options.until, time.time())
        self._stage2 = False  # the first stage has ended in this run: only reserved checks are left
        self._check_at = 0  # in stage 2: the reserved check (its index in Budget.steps) being made
        self.outcome = SweepOutcome()
        self._backend_said = False
        self._reaped: set[int] = set()  # trials whose dead runner's server was looked for

    # -- helpers -------------------------------------------------------------------------
    def _busy_keys(self) -> set[str]:
        return {self.rules.key_of(*split_params(params)) for params in self.store.pending_params()}

    def _taken(self, trial: optuna.Trial, key: str) -> bool:
        """True when a trial asked before ``trial`` (any runner's, queued or running) holds the
        set ``key``: the earlier one measures it, ``trial`` is dropped."""
        return any(self.rules.key_of(*split_params(p)) == key for p in self.store.pending_params(before=trial.number))

    def _baselines(self) -> list[TrialRecord]:
        """Ok baseline launches of this runner's host type, oldest first."""
        return self.store.ok_baselines(self.host.host_type)

    def _facts(self) -> Facts:
        """The NCCL version and topology the baseline's log showed (else ``[nccl] version``).
        Kept once learned (the study records them once): every set key and check reads them,
        thousands of times per proposal, and each read would be a storage query."""
        if self._learned is not None:
            return self._learned
        info = self.store.info()
        version = NcclVersion.parse(info.nccl_version) if info.nccl_version else self.cfg.nccl.nccl_version
        bases = self._baselines() if info.nccl_learned else []
        server_version = bases[0].host.server.partition(" ")[2] if bases and bases[0].host is not None else ""
        facts = Facts(version, Topology(**dataclasses.asdict(info.topology)) if info.topology is not None else None,
                      self.cfg.nccl.cpu_vendor, server=info.allreduce_server or None,
                      server_version=server_version or None, backend=info.allreduce_backend)
        if info.nccl_learned:
            self._learned = facts
        return facts

    @property
    def plan_budget(self) -> Budget:
        """The night's budget with its reserved checks (``--trials``, ``--no-confirm``, ``--no-final-baseline``)."""
        return self.planner.budget

    def _spent(self) -> int:
        """Relaunches the budget counts: every relaunch of the whole study (baseline, re-measures,
        sets, confirmations), finished or in flight on any runner (a resumed sweep continues the
        count); interrupted trials not (their retry counts instead)."""
        return sum(1 for r in self.store.records() if counts_in_budget(r))

    def _over_budget(self, trial: optuna.Trial, limit: int | None = None) -> bool:
        """True when trials asked before ``trial`` (any runner's) already spend ``limit``
        relaunches (default: the stage-1 share, :attr:`tuner.planning.Budget.screening`; the
        reserved checks pass the whole budget): the earlier trial wins, so runners that check
        at the same moment never launch one relaunch too many, nor both take the last slot.
        Trials still being decided by their runner are waited for (milliseconds; at most
        :data:`tuner.study.storage.SETTLE_S`)."""
        limit = self.plan_budget.screening if limit is None else limit
        deadline = time.monotonic() + SETTLE_S
        while True:
            before = sum(1 for r in self.store.records() if r.trial < trial.number and counts_in_budget(r))
            if before >= limit:
                return True
            if before + self.store.undecided(trial.number) < limit or time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def _spent_words(self) -> str:
        b = self.plan_budget
        kept = f", {b.reserved} kept for the checks" if b.reserved else ""
        return f"relaunch budget of {self.budget} spent: {b.screening} for the baseline and the sets{kept}"

    def _fits(self, *, extra: bool = False, budget: bool = True, then: int | None = None,
              what: str = "another relaunch") -> tuple[bool, str]:
        """Whether another relaunch fits: in stage 1 (``extra`` False) within the stage-1 share
        of the budget, in stage 2 within the whole budget (``budget`` False: time only, for a
        silent runner's trial whose slot its failure frees); always before the deadline with
        ``then`` more relaunches' time kept after it (default: stage 1 keeps every reserved check
        still owed, stage 2 none), each at :attr:`tuner.planning.RelaunchTime.guard_s`."""
        limit = self.budget if extra else self.plan_budget.screening
        if budget and self._spent() >= limit:
            return False, self._spent_words() if not extra else f"relaunch budget of {self.budget} spent"
        if self.deadline is None:
            return True, ""
        guard = relaunch_time(self.cfg, self.store.finished()).guard_s
        then = len(self._checks_left()) if then is None and not extra else (then or 0)
        if time.time() + guard * (1 + then) <= self.deadline:
            return True, ""
        kept = (f" and the {then} reserved check{'s' if then != 1 else ''} after it (~{span(then * guard)}: "
                f"{self._check_names(then)})" if then else "")
        return False, f"{self._deadline_words}: {what} (~{span(guard)}){kept} would not fit"

    def _checks_left(self) -> tuple[Step, ...]:
        """The reserved checks this night still has slots for, in order (the last ones of
        :attr:`tuner.planning.Budget.steps` when some were made)."""
        steps = self.plan_budget.steps
        left = max(0, self.budget - max(self._spent(), self.plan_budget.screening))
        return steps[max(self._check_at, len(steps) - min(left, len(steps))):]

    def _check_names(self, n: int) -> str:
        """The last ``n`` reserved checks in words (``2 confirmations, the final baseline``)."""
        steps = self._checks_left()[-n:] if n else ()
        confirms = sum(1 for step in steps if step is Step.CONFIRM)
        words = [f"{confirms} confirmation{'s' if confirms != 1 else ''}"] if confirms else []
        return ", ".join(words + (["the final baseline"] if Step.FINAL_BASELINE in steps else []))

    def _clock(self) -> NightClock:
        """The rest of the night from now, on the measured (else configured) relaunch time."""
        spent = self._spent()
        stage1 = 0 if self._stage2 else max(0, self.plan_budget.screening - spent)
        return NightClock(relaunch_time(self.cfg, self.store.finished()), time.time(), stage1, self._checks_left(),
                          done=spent, deadline=self.deadline, first_free=not self._baselines())

    # -- recovery ------------------------------------------------------------------------
    def recover(self) -> None:
        """Resume after dead runners on this host: tear down the servers they left and mark
        their trials interrupted (retried once). Trials of dead runners on other hosts are
        failed by Optuna's heartbeat once their grace period passed."""
        left = [(self.runner_file.path, self.runner_file.left_behind), *self.runner_file.orphans()]
        by_id = dict(self.store.running())
        for path, info in left:
            if info.get("server"):
                killed = kill_leftover(ServerIdentity.from_json(info["server"]))
                self.progress.log(f"resume: the previous runner ({info.get('runner')}) died during trial "
                                  f"{info.get('trial')}; tore down its server ({len(killed)} processes)")
            trial_id = info.get("trial_id")
            if trial_id in by_id:
                self._interrupted(trial_id, by_id.pop(trial_id))
            if path != self.runner_file.path:
                path.unlink(missing_ok=True)
        for trial_id, rec in by_id.items():
            if rec.runner.rpartition(":")[0] == host_name() and not runner_alive(rec.runner):
                self._interrupted(trial_id, rec)
        self.store.fail_stale()
        self._reap_dead_servers()

    def _reap_dead_servers(self) -> None:
        """Tear down every server a dead runner of this study on this host left running, found by
        the identity its trial recorded (:meth:`tuner.study.storage.StudyStore.unfinished_servers`),
        whatever results folder or port that runner used. Called on resume, before each relaunch
        (whoever takes over a dead runner's trial first ends its server) and when the runner ends."""
        for number, runner, identity in self.store.unfinished_servers():
            if number in self._reaped or runner.rpartition(":")[0] != host_name() or runner_alive(runner):
                continue
            self._reaped.add(number)
            killed = kill_leftover(identity)
            if killed:
                self.progress.log(f"trial {number}: its runner ({runner}) died; tore down the server it left "
                                  f"(pid {identity.pid or '?'}, {len(killed)} processes)")

    def _interrupted(self, trial_id: int, rec: TrialRecord) -> None:
        self.store.mark_interrupted(trial_id, rec, f"its runner ({rec.runner or '?'}) died mid-trial")
        self.progress.log(f"resume: trial {rec.trial} was interrupted; "
                          + ("it is retried first" if rec.retry_of_trial is None
                             else "it was already a retry and is not tried a third time"))

    def _say_environment(self) -> None:
        """Say which inherited NCCL variables no trial sees, and which hardware selectors stay."""
        removed, kept = split_inherited(os.environ, frozenset(self.space.choices()))
        if removed:
            self.progress.log(f"inherited {', '.join(removed)} removed from every trial, the baseline included; "
                              "variables your cluster needs (interfaces, IB HCAs) belong in server.env")
        if kept:
            self.progress.log(f"inherited {', '.join(kept)} kept for every trial: they select hardware rather "
                              "than tune it (vary one in the space to have it removed)")

    def preflight(self) -> None:
        """Before the first launch: refuse what would only show after ``ready_timeout_s``
        (InputError with every problem), say what only might, and refuse to start when the
        port already answers (MachineNotClean, naming who holds it) or NVML lists a compute process
        on its GPUs that is not this runner's (GpusInUse)."""
        preflight.check(self.cfg, self.dir)
        for warning in preflight.warnings(self.cfg.server):
            self.progress.log(f"warning: {warning}")
        check_processes(gpus_of(self.cfg))  # after recover(): a server this study's dead runner left is gone
        held = preflight.port_held(self.cfg.server)
        if held:
            raise MachineNotClean(held)

    # -- the loop ------------------------------------------------------------------------
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
        for notice in [*self.cfg.notices, *self.space.notices]:
            self.progress.log(notice)
        self._say_environment()
        if self.decode is not None:
            self.progress.log(self.decode.sentence())
            if self.decode.why:
                self.progress.log(f"the sizes: {self.decode.why}")
        self.runner_file.claim(self.opt.study)
        # a night in progress has no end mark: `nccl-tune studies` reads an empty one without a
        # live runner as a night stopped without one (killed, a crash)
        try:
            self.store.update_info(stop_reason="", trials=self.budget)
            with self.signals:
                self.recover()
                self.preflight()
                for line in self._clock().lines(self._deadline_words):
                    self.progress.log(f"clock: {line}")
                (steps or self._loop)()
        finally:
            try:  # no runner ends while a dead runner's server of its study runs on its host
                self._reap_dead_servers()
            except Exception as exc:  # the storage may be what failed: never hide the first error
                self.progress.log(f"could not look for servers dead runners left: {exc}")
            self.runner_file.release()
            self.progress.close()
        return self.outcome

    def _loop(self) -> None:
        baselines = self._baselines()
        if not baselines or self.opt.rebaseline:
            rec = self._baseline(recheck=bool(baselines) or self._baseline_in_flight())
            if rec is not None and rec.ok and self._target_met(rec) and not self.opt.always:
                self.outcome.target_met_untuned = True
                self.outcome.stop_reason = f"target {self.target:g} tok/s already met by the baseline"
                return
        elif self._target_met(baselines[-1]) and not self.opt.always:
            self.outcome.target_met_untuned = True
            self.outcome.stop_reason = f"target {self.target:g} tok/s already met by the baseline"
            return
        if self.target is not None and not self.opt.always:
            reached = [r for r in self.store.finished() if r.kind is not Kind.BASELINE and self._target_met(r)]
            if reached:
                self.outcome.target_reached_by = reached[0].trial
                self.outcome.stop_reason = (f"target {self.target:g} tok/s already reached by trial {reached[0].trial}; "
                                            "no further set launched (--always to tune on)")
                return
        if not self._baselines():
            failed = [r for r in self.store.finished() if r.kind is Kind.BASELINE and r.host_type in ("", self.host.host_type)]
            last = failed[-1] if failed else None
            raise BaselineFailed(
                f"the untuned baseline failed ({last.status if last else '?'}: {last.cause if last else ''}"
                + (f"; server log {last.log}" if last and last.log else "") + "); "
                "no tuned set was launched, since nothing could be compared. Fix the server command or "
                "environment and run the same command again")
        self._check_backend()
        self._plan_fixes()
        # -- screen stage (issue 9): nccl-tests under many sets, the bound, the best sets first --
        if self.cfg.screen:
            from tuner import screen  # here: tuner.screen imports tuner.sweep

            stage = screen.run_stage(
                self.cfg, self.space, self.store, baseline=self._baselines()[0], study_dir=self.dir,
                log=self.progress.log, judgement=self._judgement(), force=self.opt.force,
                deadline=self._screen_deadline(),
                seed=self.opt.seed if self.opt.seed is not None else self.cfg.sweep.seed,
                problems=self.rules.problems, held=self.signals.held)
            self.planner.screened_first(stage.top_sets, stage.check)
        # -- end of the screen stage --------------------------------------------------------------
        since_baseline = 0
        while True:
            self.store.fail_stale()  # a runner that died elsewhere: its trial is retried below
            fits, why = self._fits()
            if not fits:
                if self._await_silent_runners():
                    continue
                self.outcome.stop_reason = why
                break
            left = self.plan_budget.screening - self._spent()  # stage-1 slots left
            if self.planner.remeasure_due(since_baseline, left):
                if self._baseline(recheck=True, limit=self.plan_budget.screening) is None:
                    break  # other runners' trials took the last stage-1 slot
                since_baseline = 0
                continue
            if self.outcome.target_reached_by is not None:
                break
            if self._outlier_remeasure():
                since_baseline = 0
                continue
            if not self._next_trial():
                if self._await_silent_runners():
                    continue
                break
            since_baseline += 1
        self._stage2 = True
        for i, check in enumerate(self.planner.reserved):  # stage 2: each confirmation slot, then the final baseline
            self._check_at = i
            if check is Step.CONFIRM:
                self._confirm()
            else:
                self._final_baseline()
        self.outcome.next_run = self._next_run()

    def _screen_deadline(self) -> float | None:
        """The Unix time no screen run may end after: the deadline less the reserved checks' time."""
        if self.deadline is None:
            return None
        return self.deadline - relaunch_time(self.cfg, self.store.finished()).guard_s * len(self._checks_left())

    def _next_run(self) -> str:
        """What the next run of the same command makes first when a reserved check owed was not
        made (empty when none is owed): the stage-1 relaunches left, then the checks; or the
        checks first, with their expected time; or, the budget spent, that it needs a larger one."""
        if self.outcome.target_reached_by is not None or not (self.outcome.confirm_skipped
                                                              or self.outcome.final_baseline_skipped):
            return ""  # at --target the user asked to stop there
        owed = ("the confirmation and the final baseline after it" if self.outcome.confirm_skipped
                else "the final baseline re-measure")
        n = 2 if self.outcome.confirm_skipped and self.opt.final_baseline else 1
        spent = self._spent()
        if spent + n > self.budget:
            return (f"the budget of {self.budget} relaunches is spent: run the same command with --trials "
                    f"{spent + n} to make {owed}")
        left = self.plan_budget.screening - spent
        if left > 0:
            return (f"the next run of the same command first relaunches up to {left} more set{'s' if left != 1 else ''} "
                    f"(the first stage's slots left), then makes {owed}")
        each = relaunch_time(self.cfg, self.store.finished()).seconds
        about = f", about {span(n * each)}" if each else ""
        return f"the next run of the same command makes {owed} first ({n} relaunch{'es' if n != 1 else ''}{about})"

    def _final_baseline(self) -> None:
        """The final baseline re-measure, right after the confirmations (their fresh baseline,
        and the drift check), in its reserved slot; made when a tuned relaunch followed the last
        baseline launch of this host type (also on a resume)."""
        if not final_baseline_owed(self._baselines(), self.store.finished(), self.host.host_type):
            return
        fits, why = self._fits(extra=True, then=0, what="the final baseline")
        if fits and self._baseline(recheck=True, limit=self.budget) is not None:
            return
        why = why or "the budget was spent by trials asked before it (other runners')"
        self.outcome.final_baseline_skipped = why
        self.progress.log(f"the final baseline re-measure (drift check) was skipped: {why}")

    def _outlier_remeasure(self) -> bool:
        """Once a night: when the judgement's noise warning names the latest baseline launch as
        an outlier (:func:`tuner.planning.outlier_baseline`) and a stage-1 slot is free,
        relaunch the baseline (a re-measure; it counts in the budget and takes a set's slot).
        True when it was relaunched."""
        if self.outcome.outlier_remeasured is not None:
            return False
        bases = self._baselines()
        j = self._judgement()
        trial = outlier_baseline(j)
        if trial is None or not bases or bases[-1].trial != trial:
            return False  # silent, or a later baseline launch already stands beside it
        self.outcome.outlier_remeasured = trial
        self.progress.log(f"trial {trial}'s baseline launch is an outlier ({getattr(j, 'noise_warning', '')}); "
                          "the baseline is relaunched once more (a re-measure: it counts in the budget, one set fewer)")
        return self._baseline(recheck=True, limit=self.plan_budget.screening) is not None

    def _earlier_baseline(self, number: int) -> bool:
        """True when a first (not re-measure) baseline of this host type, ok or still running,
        was asked before trial ``number``: runners that started together each measured one, and
        only the earliest is the study's baseline in the budget."""
        return any(r.kind is Kind.BASELINE and not r.recheck and r.trial < number and r.status in (Status.OK, Status.RUNNING)
                   and r.host_type in ("", self.host.host_type) for r in self.store.records())

    def _baseline_in_flight(self) -> bool:
        """True when another runner is measuring a baseline of this host type right now."""
        return any(r.kind is Kind.BASELINE and r.status is Status.RUNNING and r.host_type == self.host.host_type
                   for r in self.store.records())

    def _retry_owed(self) -> bool:
        """True when the planner's next relaunch is the retry of an interrupted trial."""
        planned = self.planner.next_planned()
        return planned is not None and planned.step is Step.RETRY

    def _await_silent_runners(self) -> bool:
        """Before this runner ends while other runners' trials are in flight: watch their
        heartbeats for two intervals (a live runner beats every interval), and while one stays
        silent (its runner may have died) wait for Optuna's heartbeat check to fail it, up to
        the grace period. True when a trial then awaits its retry (the loop goes on to make
        it, within the time budget)."""
        if not self.store.running() or not self._fits(extra=True, budget=False)[0]:
            return False
        now = time.monotonic()
        watch_until, deadline = now + 2 * self.heartbeat_s + 1, now + self.grace_s + 2 * self.heartbeat_s + 1
        said: set[int] = set()
        while True:
            self.store.fail_stale()
            if self._retry_owed():
                return True
            silent = self.store.silent_running(2 * self.heartbeat_s)
            now = time.monotonic()
            if (not silent and now > watch_until) or now > deadline or not self.store.running():
                return False
            if set(silent) - said:
                said |= set(silent)
                self.progress.log(f"trial{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))}: no heartbeat "
                                  f"for over {2 * self.heartbeat_s} s; waiting up to the {self.grace_s} s grace period "
                                  "to retry it here if its runner died")
            time.sleep(min(self.heartbeat_s, 5))

    def _judgement(self) -> Judgement:
        """This host type's sets judged against its own baseline launches."""
        info = self.store.info()
        finished = self.store.finished()
        groups = judge_by_host_type(finished, metric=self.cfg.probe.metric,
                                    min_effect=info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT,
                                    cannot_act=cannot_act_on(info, finished))
        mine = groups.get(self.host.host_type, groups.get(UNKNOWN_TYPE))
        return mine if mine is not None else judge([], metric=self.cfg.probe.metric)

    def _headline(self) -> Judgement:
        """The judgement the confirmation rests on: this host type's at ``probe.judge_concurrency``
        (:func:`tuner.judging.levels.judge_levels`; C=1, the default, is :meth:`_judgement`)."""
        level = self.cfg.probe.judge_concurrency
        if level == SINGLE_STREAM:
            return self._judgement()
        info = self.store.info()
        groups = host_type_groups(self.store.finished())
        mine = groups.get(self.host.host_type, groups.get(UNKNOWN_TYPE, []))
        return judge_levels(mine, metric=self.cfg.probe.metric, levels=(level,), judged_level=level,
                            min_effect=info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT,
                            cannot_act=cannot_act_on(info, mine)).headline

    def _confirm(self) -> None:
        """Relaunch the next finalist once more in its reserved slot (planning's confirmation
        entry, kind confirm); the final baseline that follows completes the pair its gain must
        hold on. Counts in the budget, bounded by --timeout/--until; made once per finalist
        (also on a resume; an interrupted one is made again)."""
        if self.outcome.target_reached_by is not None:
            self.outcome.confirm_skipped = "the sweep stopped at --target"
            return  # the user asked to stop there
        j = self._headline()
        entry = self.planner.confirmation(j)
        if entry is None:
            return
        # the final baseline after it is the confirmation's fresh baseline: both must fit
        fits, why = self._fits(extra=True, then=1 if self.opt.final_baseline else 0, what="the confirmation")
        if not fits:
            self.outcome.confirm_skipped = why
            self.progress.log(f"the confirmation of trial {entry.equals_trial}'s set was skipped: {why}")
            return
        rec = TrialRecord(trial=-1, kind=entry.kind, preset=entry.name)
        trial, params, rec = self.store.ask_fixed(self.store.params_of(entry.env, flag_params(entry.flags)), rec)
        if self._taken(trial, self.rules.key_of(entry.env, entry.flags)):
            self.store.drop(trial, "the confirmation of this set is in flight on an earlier trial")
            return
        if self._over_budget(trial, self.budget):
            self.store.drop(trial, "the budget was spent by trials asked before it (other runners')")
            self.outcome.confirm_skipped = "the budget was spent by other runners' trials"
            return
        confirmed = next(s for s in j.sets.values() if s.first_trial == entry.equals_trial)
        gain = confirmed.comparison.gain_pct if confirmed.comparison else float("nan")
        self.progress.log(f"confirming trial {entry.equals_trial}'s set ({gain:+.1f} %): relaunched once more, "
                          "then the baseline; the gain must hold on those launches alone")
        done = self._relaunch(trial, params, rec)
        if not done.ok:
            self.outcome.confirm_skipped = (f"its confirmation relaunch (trial {done.trial}) {done.status}"
                                            + (f": {done.cause}" if done.cause else ""))

    def _target_met(self, rec: TrialRecord) -> bool:
        """True when ``rec``'s CI lower bound of tok/s meets ``--target``."""
        if self.target is None or not rec.ok or rec.output_tok_s is None:
            return False
        runs = rec.output_tok_s_runs
        low = rec.output_tok_s * (1 - stats.median_ci_halfwidth(runs)) if len(runs) > 1 else rec.output_tok_s
        return low >= self.target

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
            if planned is not None:
                trial, params, rec = self._ask_planned(planned)
            else:
                trial, params, rec = self.store.ask()
            env, flags = split_params(params)
            if rec.kind is Kind.BASELINE:  # a baseline queued by an older nccl-tune
                self._relaunch(trial, params, rec)
                return True
            bases = self._baselines()
            decision = self.planner.judge(env, flags, baseline=bases[0] if bases else None)
            rec.env, rec.flags, rec.runner = redact(env), flags, runner_id()
            if decision.launch and self._taken(trial, self.rules.key_of(env, flags)):
                self.store.drop(trial, "its set is in flight on an earlier trial (another runner's)")
                if planned is None:  # a named set is passed over once in flight: only proposals repeat
                    skipped += 1
                continue
            if decision.launch and self._over_budget(trial):
                self.store.drop(trial, "the budget was spent by trials asked before it (other runners')")
                self.outcome.stop_reason = self._spent_words()
                return False
            if decision.launch:
                if planned is not None and planned.retry_of is not None:
                    self.progress.log(f"resume: retrying trial {planned.retry_of} (interrupted), once")
                self._relaunch(trial, params, rec)
                return True
            if planned is None:
                skipped += 1
            # stored in the study (every runner, a resume and `nccl-tune report` see it): report.md
            # and trials.csv list each set not measured, with why and the set it equals
            rec.status, rec.cause, rec.host_type = Status.SKIPPED, decision.cause, self.host.host_type
            if planned is not None:  # say why a planned set is not launched (a sampler's repeat is not news)
                self.progress.log(f"trial {trial.number} [{planned.name or planned.kind}] "
                                  f"{json.dumps(rec.env)} not launched: {decision.reason}")
            if decision.duplicate_of is not None:
                rec.kind, rec.duplicate_of = Kind.DUPLICATE, decision.duplicate_of.trial
                value, constraint = self.store.trial_value(decision.duplicate_of.trial)
                self.store.tell_known(trial, rec, value, constraint)
            else:
                rec.kind = Kind.INVALID
                self.store.tell_known(trial, rec, None, 1.0)
        self.outcome.stop_reason = EXHAUSTED
        return False

    def _ask_planned(self, planned: PlanEntry) -> tuple[optuna.Trial, dict[str, str], TrialRecord]:
        rec = TrialRecord(trial=-1, kind=planned.kind, preset=planned.name, retry_of_trial=planned.retry_of)
        return self.store.ask_fixed(self.store.params_of(planned.env, flag_params(planned.flags)), rec)

    def _baseline(self, *, recheck: bool, limit: int | None = None) -> TrialRecord | None:
        """Measure the untuned baseline (a trial like the others, so the sampler learns from it);
        with ``limit``, not when trials asked before it (any runner's) spend that many relaunches
        (then None)."""
        rec = TrialRecord(trial=-1, kind=Kind.BASELINE, recheck=recheck)
        trial, params, rec = self.store.ask_fixed(self.store.params_of({}), rec)
        if limit is not None and self._over_budget(trial, limit):
            self.store.drop(trial, "the budget was spent by trials asked before it (other runners')")
            return None
        return self._relaunch(trial, params, rec)

    def relaunch_set(self, kind: Kind, env: dict[str, str], flags: list[str], *, preset: str = "",
                     recheck: bool = False) -> TrialRecord:
        """One relaunch of the set ``env`` + ``flags`` (``{}``/``[]`` and ``Kind.BASELINE``: the
        untuned baseline) outside planning, for a fixed design run through :meth:`run`
        (``steps``): asked, launched, probed, recorded and told to Optuna exactly as a night's
        relaunch. Returns its record (any status); raises what :meth:`run` raises."""
        rec = TrialRecord(trial=-1, kind=kind, preset=preset, recheck=recheck)
        trial, params, rec = self.store.ask_fixed(self.store.params_of(env, flag_params(flags)), rec)
        return self._relaunch(trial, params, rec)

    def _relaunch(self, trial: optuna.Trial, params: dict[str, str], rec: TrialRecord) -> TrialRecord:
        """One relaunch of ``trial`` (its set from ``params``); records it and tells Optuna."""
        self.outcome.relaunches += 1
        night = self._clock()  # before the store counts this one: it is the first relaunch of the rest
        index = night.done + 1  # the study's count, every relaunch included: a resumed night counts on
        self.progress.plan(max(night.total, index), night.end_at)
        label = rec.preset or ("baseline re-measure" if rec.kind is Kind.BASELINE and rec.recheck else rec.kind.value)
        full_env, rec.flags = split_params(params)
        rec.env = redact(full_env)
        rec.status, rec.runner, rec.started_at = Status.RUNNING, runner_id(), time.time()
        rec.log = str(log_path(self.dir, trial.number))
        rec.host, rec.host_type = self.host.record(), self.host.host_type
        self._reap_dead_servers()  # a retry of a dead runner's trial first ends the server it left
        self.store.start(trial, rec)
        trial_id = trial._trial_id
        ctx = TrialContext(self.cfg, self.dir, self.runner_file, self.signals, self.progress.log, self._facts().version,
                           frozenset([*self.space.choices(), *self.store.planned_only]), self._strict_port,
                           on_server=lambda identity: self.store.set_server(trial_id, identity))
        title = f"trial {trial.number}: {label}"

        last = [""]

        def on_phase(phase: str, detail: str) -> None:
            self.progress.phase(index, title, phase, detail)
            if phase != last[0]:  # one storage write per phase change: `nccl-tune status` reads it
                last[0] = phase
                with contextlib.suppress(Exception):  # a missed write must not stop a measurement
                    self.store.set_phase(trial_id, {"phase": phase, "detail": detail, "since": time.time(),
                                                    "relaunch": index, "of": max(night.total, index),
                                                    "end_at": night.end_at, "label": label})

        runs = self._runs_wanted()
        try:
            with self.store.heartbeat(trial):
                rec, found = relaunch(ctx, rec, trial_id=trial._trial_id, on_phase=on_phase, env=full_env, runs=runs)
        except BaseException as exc:
            said = str(exc) if isinstance(exc, NcclTuneError) and not isinstance(exc, Interrupted) else ""
            rec.status, rec.cause = Status.INTERRUPTED, said or "the runner was interrupted (signal)"
            self.store.abandon(trial, rec)
            raise
        self._strict_port = ctx.strict_port  # learned: this server needs its port free of TIME_WAIT
        rec.host = self.host.record(rec.nccl_version, rec.log)
        if rec.kind is Kind.BASELINE and not rec.recheck and self._earlier_baseline(trial.number):
            rec.recheck = True  # another runner's baseline of this host type came first: a re-measure
        self.store.finish(trial, rec, rec.median(self.cfg.probe.metric) or 0.0)
        self._report(rec, label)
        if rec.kind is Kind.BASELINE and rec.ok and found is not None and not self.store.info().nccl_learned:
            self._learn(found)
        if rec.kind is not Kind.BASELINE and self._target_met(rec):
            self.outcome.target_reached_by = trial.number
            self.outcome.stop_reason = f"target {self.target:g} tok/s reached by trial {trial.number}"
        return rec

    def _learn(self, found: evidence.Evidence) -> None:
        """After the first ok baseline: record the NCCL version, topology and decode-allreduce
        backend the log shows, say them, and stop before the budget is spent when NCCL does not
        carry the decode allreduce (StoppedByCheck) unless --force or the space varies the
        backend itself (a server flag such as --disable-custom-all-reduce)."""
        topo = found.topology()
        version = found.version
        backend = found.backend
        self.store.update_info(nccl_learned=True, nccl_version=str(version or ""),
                               topology=TopologyRecord(**dataclasses.asdict(topo)) if topo else None,
                               allreduce_backend=backend.name, allreduce_backend_reason=backend.reason,
                               allreduce_nccl_on_decode_path=backend.nccl_on_decode_path,
                               allreduce_server=backend.server or "")
        where = (f"{topo.nranks} ranks, {topo.nnodes} node{'s' if topo.nnodes != 1 else ''}, {topo.link or '?'}"
                 if topo else "topology not logged")
        self.progress.log(f"baseline: NCCL {version or '(version not logged)'}, {where}; decode allreduce: "
                          f"{backend.name} ({backend.reason})")
        judged = self._triage(found, topo)
        self.store.update_info(triage=judged.to_dict())
        for line in judged.lines():
            self.progress.log(f"triage: {line}")
        self._check_backend()

    def _night_sizes(self) -> tuple[list[int], int | None]:
        """The decode allreduce sizes (B) the night measures and its largest prefill size (B, None
        when not known or not counted), by the one rule of :func:`tuner.planning.night_sizes`."""
        sizes = night_sizes(self.cfg, load_diagnosis(self.dir))
        return sorted(set(sizes.decode)), (max(sizes.prefill) if sizes.prefill else None)

    def _triage(self, found: evidence.Evidence, topo: Topology | None) -> Triage:
        """NCCL's model of the machine from the baseline's log, judged (:func:`tuner.triage.triage`)."""
        machine = machine_from_log(found.parsed, found.version)
        nranks = topo.nranks if topo is not None else (machine.local_gpus or 0) if machine is not None else 0
        decode, prefill = self._night_sizes()
        if nranks < 2:
            return triage(None, version=found.version, nranks=2)
        disabled = self.cfg.server.env.get("NCCL_P2P_DISABLE", "") not in ("", "0")
        return triage(machine, version=found.version, nranks=nranks, decode_bytes=decode, prefill_bytes=prefill,
                      nnodes=topo.nnodes if topo is not None else 1, p2p_disabled=disabled, files=self.space.files())

    def _plan_fixes(self) -> None:
        """Plan the stored triage's fix sets first (every runner of the study reads the same)."""
        stored = self.store.info().triage
        if not stored:
            return
        for line in self.planner.fixes_first(Triage.from_dict(stored).fix_sets()):
            self.progress.log(f"triage: {line}")

    def _check_backend(self) -> None:
        """When the study's first baseline showed that NCCL does not carry the decode allreduce
        (every runner of the study decides from the stored study info, not only the one that
        measured it): with the server known (vLLM, SGLang), plan its backend space's presets
        first (:meth:`_measure_backends`); with TP 1 or the server not known, stop before the
        budget is spent (StoppedByCheck, naming the backend space and the command), unless
        --force or the space varies a server flag."""
        info = self.store.info()
        if info.allreduce_nccl_on_decode_path is not False or self._backend_said:
            return
        self._backend_said = True
        message = (f"NCCL does not carry the decode allreduce on this server: {info.allreduce_backend} "
                   f"({info.allreduce_backend_reason})")
        if info.allreduce_backend != "none" and info.allreduce_server in ("vllm", "sglang"):
            path, found = backend_space_path(info.allreduce_server, self.cfg.path)
            if found:
                self._measure_backends(path, f"NCCL does not carry the decode allreduce on this server "
                                             f"({info.allreduce_backend} does)")
                return
            advice = (f"the backend space of {info.allreduce_server}, {path}, was not found (looked for it as "
                      "sweep.space's default is found: from the current directory, then beside the experiment file)")
        elif info.allreduce_backend == "none":
            advice = "no backend choice can help: there is no allreduce to tune"
        else:
            advice = ("the server is neither vLLM nor SGLang by its command or log, so the night cannot choose its "
                      "backend space: to measure the backend choice itself run "
                      f"`nccl-tune sweep {self.cfg.path} --space {BACKEND_SPACE.format(server='vllm')} --study "
                      f"{self.opt.study}-backends` (vLLM's switches; {BACKEND_SPACE.format(server='sglang')} for "
                      "SGLang's)")
        message += ". NCCL variables cannot change decode speed here, so no tuned relaunch was spent"
        varies = [n for n in self.space.choices() if n.startswith("-")]
        if varies:
            self.progress.log(f"note: {message}; the space varies {', '.join(varies)}, which can move it to NCCL")
        elif self.opt.force:
            self.progress.log(f"note: {message}; sweeping anyway (--force)")
        else:
            raise StoppedByCheck(f"{message}; {advice}. --force sweeps anyway")

    def _measure_backends(self, path: Path, message: str) -> None:
        """Plan the presets of the backend space at ``path`` first in this night (every runner
        of the study the same), said in one progress line; a preset whose value of a name the
        night's space already searches with other candidates cannot join the study, and is
        said and left out."""
        backends = load_space(path, allow_unsafe=self.opt.allow_unsafe, version=self._facts().version)
        for notice in backends.notices:
            self.progress.log(notice)
        refused = set(self.store.plan_also(backends.choices()))
        if refused:
            kept = [p for p in backends.presets if not {f"{k}={v}" for k, v in p.env.items()} & refused]
            self.progress.log(f"note: {path}: {', '.join(sorted(refused))} cannot join this study (the space "
                              "searches that name with other candidates); the presets holding it are left out")
            backends = dataclasses.replace(backends, presets=kept)
        names = self.planner.backends_first(backends)
        sets = f"{len(names)} backend set{'s' if len(names) != 1 else ''}: {', '.join(names)}" if names else "no new set"
        self.progress.log(f"note: {message}; the night measures the backend space {path} next ({sets}), then the "
                          "space's NCCL sets, whose NCCL variables cannot act at decode here")

    def _runs_wanted(self) -> int:
        """Recorded runs for the next relaunch: ``probe.repeats``, or with ``"auto"`` the count
        the baseline's measured run noise on the study's metric asks for, chosen before the launch
        (:func:`tuner.judging.stats.runs_for_precision`; the first baseline makes ``max_repeats``)."""
        pc = self.cfg.probe
        if isinstance(pc.repeats, int):
            return pc.repeats
        bases = [runs for r in self._baselines() if len(runs := runs_of(r, pc.metric)) >= 2]
        if not bases:
            return pc.max_repeats
        return stats.runs_for_precision(bases, pc.ci_target, pc.max_repeats)

    def _report(self, rec: TrialRecord, label: str) -> None:
        if rec.wall_s:
            self.progress.trial_done(rec.wall_s)
        if rec.ok:
            summary = (f"{rec.output_tok_s:.1f} tok/s (runs "
                       f"{', '.join(f'{r:.1f}' for r in rec.output_tok_s_runs)})")
        else:
            summary = f"{rec.status}: {rec.cause}"
        flags = f" {' '.join(rec.flags)}" if rec.flags else ""
        self.progress.log(f"trial {rec.trial} [{label}] {json.dumps(rec.env)}{flags} -> {summary}")
        if rec.nccl_proof:
            self.progress.log(f"trial {rec.trial} proof: " + proof_line(rec.nccl_proof))
        if rec.backend_choice:  # the backend choice's own proof (sweep/evidence.py), beside NCCL's
            said = ("applied" if rec.backend_applied else "not read" if rec.backend_applied is None
                    else "NOT APPLIED (no speed verdict)")
            self.progress.log(f"trial {rec.trial} backend: {rec.backend_choice} {said}, {rec.allreduce_backend} carried "
                              f"the decode allreduce: {rec.backend_reason}")
        if rec.nccl_unlaunched:
            said = "; ".join(f"{k}={v}" for k, v in rec.nccl_unlaunched.items())
            self.progress.log(f"trial {rec.trial}: NCCL read variables this launch did not set: {said} (set where "
                              "those processes start: `ray start`, the image, or the server itself)"
                              + ("; this baseline is not untuned on those ranks" if rec.kind is Kind.BASELINE else ""))
        if rec.teardown_problem:
            raise MachineNotClean(f"after trial {rec.trial} the machine is not clean: {rec.teardown_problem}. "
                                  "The next trial was not launched; results so far are kept.")

