"""One relaunch of the server under one set, to one :class:`~tuner.record.trial.TrialRecord`.

Wait until the port is bindable, launch in a new session (:class:`tuner.server.ServerProcess`), wait until ready
(readiness proven by a real request), the optional smoke and counting checks, warm-up and
recorded probe runs (one probe loop, :func:`tuner.measure.run_probe`), the optional concurrency
table, then a teardown that signals cannot cut short and a check that nothing of the server is
left; then what NCCL said in the log (:mod:`tuner.sweep.evidence`). A failure at any step
becomes the record's status and cause; only a signal (Interrupted), a port held by a
stranger (PortBusy) and a listener that is not the launched server's (ForeignListener: checked
at readiness, before and after the recorded runs, after the teardown) escape. Measurements reach
the record only once the listener was proven ours. :class:`Launcher` makes one relaunch of a
study's trial around it: the record started in the storage, the heartbeat, an interruption recorded.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import optuna

from tuner.errors import Interrupted, MachineFault, NcclTuneError, ProbeError, TrialFailed
from tuner.inputs import ExperimentConfig, ProbeConfig
from tuner.judging import runs_of, stats
from tuner.measure import (
    Answer,
    ModelName,
    ProbeResult,
    SoakResult,
    answers_to_json,
    find_api_key,
    find_model,
    make_client,
    ready_check,
    refused_guess,
    run_bench,
    run_probe,
    smoke_check,
    take_answers,
)
from tuner.nccl import DEBUG_FILE_VAR, NcclVersion, SettingsSource, diagnostics_env
from tuner.planning import Decision, Launch, flag_params
from tuner.record import Kind, LevelResult, Metric, Status, TrialRecord
from tuner.server import (
    PORT_WAIT_S,
    ServerIdentity,
    ServerProcess,
    SignalGuard,
    TeardownReport,
    gpu,
    port_holder,
    settings_behind,
    wait_port_bindable,
)
from tuner.study import Host, RunnerFile, StudyStore, runner_id
from tuner.sweep import evidence
from tuner.sweep.progress import Progress
from tuner.sweep.soak import soak_fields, soak_launch

__all__ = ["MACHINE_BACKOFF_S", "MACHINE_WAIT_S", "Launcher", "answers_path", "relaunch", "runs_wanted"]

#: Seconds waited after a machine-suspect failure where NVML cannot show the GPUs' memory: the
#: driver gives a killed server's memory back a few seconds after it exits (vllm PR #57362, sglang
#: PR #39545); 10 s covers that lag with room, and costs little beside a server's load time.
MACHINE_BACKOFF_S = 10.0
#: Longest wait (s) for NVML to show the GPUs' memory back at its lowest level of the night
#: before a relaunch after a machine-suspect failure; the relaunch is made anyway after it.
MACHINE_WAIT_S = 60.0



@dataclass
class MachineClock:
    """What the night learned of the machine's lag: a server's exit leaves its GPUs' memory charged
    for some seconds (vllm PR #57362, sglang PR #39545), so a launch made too soon after it fails
    the start-up memory guard, whatever the set. ``last_exit`` (monotonic s): when the last launch
    that served was torn down; ``delay_s``: how long after it the latest launch started;
    ``settle_s``: the delay that a launch needed to serve after a machine-suspect failure (every
    later launch waits as long after the last exit: a launch that fails costs a load);
    ``backoff_s``: the next wait after a machine-suspect failure without NVML, doubled after each
    (at most :data:`MACHINE_WAIT_S`); ``faulted``: a machine-suspect failure since the last exit."""

    last_exit: float | None = None
    delay_s: float = 0.0
    settle_s: float = 0.0
    backoff_s: float = field(default_factory=lambda: MACHINE_BACKOFF_S)  # read when made: tests shorten it
    faulted: bool = False

    def before_launch(self, log: Callable[[str], None], trial: int) -> None:
        """Wait until ``settle_s`` s have passed since the last exit, then note the launch's delay."""
        if self.last_exit is not None and self.settle_s > 0:
            left = self.last_exit + self.settle_s - time.monotonic()
            if left > 0.05:
                log(f"trial {trial}: waiting {left:.1f} s before the launch: this machine needed {self.settle_s:.1f} s "
                    "after a server's exit before the next one could start (its GPUs' memory freed late)")
                time.sleep(left)
        self.delay_s = time.monotonic() - self.last_exit if self.last_exit is not None else float("inf")

    def served(self) -> None:
        """The launch served: after a machine-suspect failure, its delay is what the machine needs."""
        if self.faulted and self.delay_s != float("inf"):
            self.settle_s = max(self.settle_s, self.delay_s)
        self.faulted = False

    def back_off(self) -> float:
        """The wait to make now (s), the next one doubled."""
        wait, self.backoff_s = self.backoff_s, min(2 * self.backoff_s, MACHINE_WAIT_S)
        return wait


#: ``on_phase(phase, detail)``: progress of the relaunch (launching, loading, warmup, ...).
PhaseCallback = Callable[[str, str], None]


@dataclass
class TrialContext:
    """What every relaunch of a sweep shares: the config, where logs go, the runner's file
    and signal guard, a progress callback ``log(text)`` for notes, the NCCL version whose rules
    apply, and the names the space varies (``varied``: their inherited values never reach a
    trial, hardware selectors included); ``strict_port``: the server needs its port free of
    TIME_WAIT too (it does not set SO_REUSEADDR: learned from an "address in use" start-up);
    ``on_server(identity)``: told the launch's identity before and after the spawn (the sweep
    stores it with the trial, so another runner of this host can tear it down if this one dies);
    ``gpu_floor``: each GPU's lowest used memory (bytes) seen before a launch of the night (what a
    wait after a memory guard waits for); ``last_fault``: the last machine-suspect failure;
    ``soak_s``: the soak (s) this relaunch runs after its probe (0: none; tuner.sweep.soak)."""

    cfg: ExperimentConfig
    study_dir: Path
    runner_file: RunnerFile
    signals: SignalGuard
    log: Callable[[str], None]
    nccl_version: NcclVersion | None = None
    varied: frozenset[str] = frozenset()
    strict_port: bool = False
    launched_pids: set[int] = field(default_factory=set)
    on_server: Callable[[ServerIdentity], None] | None = None
    gpu_floor: list[int] | None = None
    last_fault: MachineFault | None = None
    said: set[str] = field(default_factory=set)
    machine: MachineClock = field(default_factory=MachineClock)
    behind: tuple[SettingsSource, ...] = ()
    soak_s: float = 0.0

    def say_once(self, key: str, text: str) -> None:
        """``log(text)`` the first time the night meets ``key`` (a probe note is said once a night)."""
        if key not in self.said:
            self.said.add(key)
            self.log(text)


def wait_for_machine(ctx: TrialContext, record: TrialRecord, fault: MachineFault, then: str) -> None:
    """After a machine-suspect failure (``fault``), wait until the machine may have recovered,
    saying so with ``then`` (what is relaunched next): the port bindable again (TIME_WAIT too,
    at most :data:`tuner.server.PORT_WAIT_S` s) for an address in use; else, with NVML, each
    GPU's used memory back within 512 MiB of the lowest seen before this night's launches
    (``ctx.gpu_floor``; at most :data:`MACHINE_WAIT_S` s); else :data:`MACHINE_BACKOFF_S` s."""
    if fault.port is not None:
        holder = port_holder(fault.port)
        ctx.log(f"trial {record.trial}: {fault.cause}; the port is held by {holder}; waiting for it (TIME_WAIT too, "
                f"at most {PORT_WAIT_S:.0f} s), then {then} (not yet the set's fault)")
        ctx.strict_port = True
        for port in {ctx.cfg.server.port, fault.port}:
            wait_port_bindable(ctx.cfg.server.host, port)
        return
    if ctx.gpu_floor is not None and gpu.used_bytes() is not None:
        ctx.log(f"trial {record.trial}: {fault.cause}; waiting for the GPUs' memory to be freed (NVML, at most "
                f"{MACHINE_WAIT_S:.0f} s), then {then} (not yet the set's fault)")
        held = gpu.wait_released(ctx.gpu_floor, MACHINE_WAIT_S)
        if held:
            ctx.log(f"trial {record.trial}: {held}; relaunching anyway")
        return
    wait = ctx.machine.back_off()
    ctx.log(f"trial {record.trial}: {fault.cause}; waiting {wait:.0f} s (no NVML to see the GPUs' "
            f"memory freed), then {then} (not yet the set's fault)")
    time.sleep(wait)


def answers_path(study_dir: Path, number: int) -> Path:
    """Where trial ``number``'s greedy answers are kept (the correctness gate's, JSON:
    :func:`tuner.measure.answers_to_json`): ``results/<study>/answers/trial-NNNN.json``."""
    return study_dir / "answers" / f"trial-{number:04d}.json"


def log_path(study_dir: Path, number: int) -> Path:
    """``results/<study>/logs/trial-NNNN.log``: the server's stdout and stderr."""
    return study_dir / "logs" / f"trial-{number:04d}.log"


@dataclass
class Launcher:
    """A study's trials as every relaunch of a night makes them: asked with their
    :class:`tuner.planning.Launch` (:meth:`ask`), recorded as not launched (:meth:`skip`), or
    relaunched (:meth:`launch`): the record started in ``store`` (this runner, its log under
    ``study_dir``, the ``host``), the server launched and measured under the trial's heartbeat
    (:func:`relaunch`), each phase shown by ``progress`` and stored for ``nccl-tune status``, and
    an interruption recorded as such before it propagates. ``strict_port`` is learned from one
    relaunch for the next (:class:`TrialContext`); ``said``: the probe notes said this night."""

    cfg: ExperimentConfig
    study_dir: Path
    store: StudyStore
    runner_file: RunnerFile
    signals: SignalGuard
    progress: Progress
    host: Host
    strict_port: bool = False
    gpu_floor: list[int] | None = None
    #: the last machine-suspect failure a relaunch gave up on (for the wait before the baseline check)
    last_fault: MachineFault | None = None
    said: set[str] = field(default_factory=set)
    machine: MachineClock = field(default_factory=MachineClock)
    #: the sources of NCCL settings no launch sets (:func:`tuner.server.settings_behind`), read at the first launch
    behind: tuple[SettingsSource, ...] | None = None

    def ask(self, rec: TrialRecord | None, key_of: Callable[[dict[str, str], list[str]], str],
            env: dict[str, str] | None = None, flags: list[str] | None = None,
            ) -> tuple[optuna.Trial, Launch, TrialRecord]:
        """A trial of the study for the set ``env`` + ``flags`` recorded as ``rec`` (None: the
        sampler's proposal), its :class:`tuner.planning.Launch` (keyed by ``key_of``) and the
        record, which holds the launch's shown set."""
        if rec is None:
            trial, params, rec = self.store.ask()
        else:
            flag_values = flag_params(flags) if flags is not None else None
            trial, params, rec = self.store.ask_fixed(self.store.params_of(env or {}, flag_values), rec)
        launch = Launch.of(params, key_of)
        rec.env, rec.flags = dict(launch.shown_env), list(launch.flags)
        return trial, launch, rec

    def wait_for_machine(self, rec: TrialRecord, then: str) -> None:
        """Wait after the last machine-suspect failure a relaunch gave up on (:func:`wait_for_machine`),
        before ``then``; nothing to wait for without one."""
        if self.last_fault is None:
            return
        ctx = TrialContext(self.cfg, self.study_dir, self.runner_file, self.signals, self.progress.log,
                           strict_port=self.strict_port, gpu_floor=self.gpu_floor, machine=self.machine)
        wait_for_machine(ctx, rec, self.last_fault, then)
        self.strict_port = ctx.strict_port

    def skip(self, trial: optuna.Trial, rec: TrialRecord, decision: Decision) -> None:
        """Record ``trial`` as not launched (planning's ``decision``) and tell Optuna: a duplicate
        gets the value of the set it equals, an invalid set a failed constraint. Every runner, a
        resume and ``nccl-tune report`` see it: report.md and trials.csv list each set not
        measured, with why and the set it equals."""
        rec.status, rec.cause, rec.host_type = Status.SKIPPED, decision.cause, self.host.host_type
        if decision.duplicate_of is not None:
            rec.kind, rec.duplicate_of = Kind.DUPLICATE, decision.duplicate_of.trial
            self.store.tell_known(trial, rec, *self.store.trial_value(decision.duplicate_of.trial))
        else:
            rec.kind = Kind.INVALID
            self.store.tell_known(trial, rec, None, 1.0)

    def launch(self, trial: optuna.Trial, launch: Launch, rec: TrialRecord, *, night: dict[str, Any],
               version: NcclVersion | None, varied: frozenset[str], runs: int,
               on_fault: Callable[[TrialRecord], bool] | None = None, soak_s: float = 0.0,
               ) -> tuple[TrialRecord, evidence.Evidence | None]:
        """Relaunch ``trial`` under ``launch`` as ``rec`` (``runs`` recorded runs, the rules of
        NCCL ``version``, ``varied``: the names the study varies); ``night``: the relaunch's place
        in the night (``relaunch``, ``of``, ``end_at``, ``label``). ``on_fault(rec)``: called under
        the trial's heartbeat when the relaunch ends ``machine_fault`` (the sweep's baseline
        check, which may settle ``rec``'s status and cause); True from it relaunches the set once
        more (the baseline served only after a longer wait), a machine-suspect failure then the set's.
        ``soak_s``: the soak (s) after the probe (0: none). Returns what :func:`relaunch`
        returns; raises what it raises, the trial then recorded interrupted."""
        index, label = night["relaunch"], night["label"]
        rec.status, rec.runner, rec.started_at = Status.RUNNING, runner_id(), time.time()
        rec.log = str(log_path(self.study_dir, trial.number))
        rec.host, rec.host_type = self.host.record(), self.host.host_type
        self.store.start(trial, rec)
        trial_id = trial._trial_id
        if self.behind is None:  # once a night: what the server sees that no launch sets (a container: its image)
            self.behind = tuple(settings_behind(self.cfg.server, varied=varied))
        ctx = TrialContext(self.cfg, self.study_dir, self.runner_file, self.signals, self.progress.log, version,
                           varied, self.strict_port, on_server=lambda identity: self.store.set_server(trial_id, identity),
                           gpu_floor=self.gpu_floor, said=self.said, machine=self.machine, behind=self.behind,
                           soak_s=soak_s)
        on_phase = self.progress.phases(index, f"trial {trial.number}: {label}",
                                        lambda state: self.store.set_phase(trial_id, state), night)
        try:
            with self.store.heartbeat(trial):
                rec, found = relaunch(ctx, rec, trial_id=trial_id, on_phase=on_phase, env=dict(launch.env), runs=runs)
                self.strict_port, self.gpu_floor, self.last_fault = ctx.strict_port, ctx.gpu_floor, ctx.last_fault
                if rec.status is Status.MACHINE_FAULT and on_fault is not None and on_fault(rec):
                    # the baseline served only after a longer wait than the set's launches got: the set is
                    # relaunched once more as late after the last exit before it can be blamed
                    causes = rec.cause
                    rec, found = relaunch(ctx, rec, trial_id=trial_id, on_phase=on_phase, env=dict(launch.env),
                                          runs=runs, attempts=(rec.launches + 1,))
                    self.strict_port, self.gpu_floor, self.last_fault = ctx.strict_port, ctx.gpu_floor, ctx.last_fault
                    if rec.status is Status.MACHINE_FAULT:
                        rec.status = Status.CRASHED
                        rec.cause = (f"{causes}; relaunched as late after the last server's exit as the baseline: "
                                     f"{rec.cause}: so the failures are the set's")
        except BaseException as exc:
            said = str(exc) if isinstance(exc, NcclTuneError) and not isinstance(exc, Interrupted) else ""
            rec.status, rec.cause = Status.INTERRUPTED, said or "the runner was interrupted (signal)"
            self.store.abandon(trial, rec)
            raise
        rec.host = self.host.record(rec.nccl_version, rec.log)
        return rec, found


def runs_wanted(pc: ProbeConfig, baselines: Sequence[TrialRecord]) -> int:
    """Recorded runs for the next relaunch: ``probe.repeats``, or with ``"auto"`` the count the
    ok ``baselines``' measured run noise on the study's metric asks for, chosen before the launch
    (:func:`tuner.judging.stats.runs_for_precision`; before a baseline with two runs, ``max_repeats``)."""
    if isinstance(pc.repeats, int):
        return pc.repeats
    bases = [runs for r in baselines if len(runs := runs_of(r, pc.metric)) >= 2]
    if not bases:
        return pc.max_repeats
    return stats.runs_for_precision(bases, pc.ci_target, pc.max_repeats)


def relaunch(ctx: TrialContext, record: TrialRecord, *, env: dict[str, str], trial_id: int | None,
             on_phase: PhaseCallback, runs: int, attempts: tuple[int, ...] = (1, 2),
             ) -> tuple[TrialRecord, evidence.Evidence | None]:
    """Launch, measure and tear down the server for ``record`` under ``env`` (the set's real
    values; ``record.env`` has secrets as ``***``) and ``record.flags``; returns the record
    completed (status, cause, runs, medians, timings, what NCCL echoed) and the parsed log
    (None when it cannot be read); ``runs``: recorded runs to make. NCCL's init-time logging is
    added to the launch (:func:`tuner.sweep.evidence.debug_env`), never to the record's set, and to a
    baseline NCCL's init diagnostics (:func:`tuner.nccl.diagnostics_env`: 2.31+, its P2P check).

    A launch that fails in a way not plainly the set's (MachineFault, :mod:`tuner.server.machine`:
    an address in use, a start-up memory guard, a busy device, a container name in use, a crash
    before NCCL's first line) is waited after (:func:`wait_for_machine`) and the set relaunched
    once; a second one leaves the record ``machine_fault`` with both causes, for the caller to
    relaunch the baseline (:class:`Launcher`'s ``on_fault``): never blamed on the set here.
    ``record.launches`` counts the launches made (each counts in the budget); ``attempts``: the
    launch numbers to make (one more after the baseline check: ``(3,)``). Raises PortBusy (exit 3)
    when the port stays held before a launch, ForeignListener (exit 3) when the listener on the
    port was not the launched server's (nothing measured is then in the record), Interrupted on
    SIGHUP/SIGINT/SIGTERM after the teardown finished.
    """
    t0 = time.monotonic()
    causes: list[str] = []
    for attempt in attempts:
        record.launches = attempt
        try:
            _launch_once(ctx, record, env, trial_id, on_phase, runs)
            break
        except MachineFault as fault:
            causes.append(fault.cause)
            ctx.last_fault = fault
            ctx.machine.faulted |= fault.timed  # a lag that passes with time (not a port: its own wait)
            if attempt == attempts[-1]:
                record.status = Status.MACHINE_FAULT
                record.cause = "; relaunched once: ".join(causes)
                break
            wait_for_machine(ctx, record, fault, "relaunching the untuned baseline once" if record.kind is Kind.BASELINE
                             else "relaunching the set once")
    record.wall_s = time.monotonic() - t0
    record.finished_at = time.time()
    server_cfg = ctx.cfg.server
    # a user's NCCL_DEBUG_FILE place may be shared: only this launch's files (ours is emptied per launch)
    pids = ctx.launched_pids if DEBUG_FILE_VAR in server_cfg.env else None
    found = evidence.read(record, env, server_cfg.argv(), server_cfg.env, ctx.nccl_version, kind=server_cfg.kind,
                          pattern=evidence.debug_file(ctx.cfg, Path(record.log)), pids=pids, behind=ctx.behind)
    return record, found


def _launch_once(ctx: TrialContext, record: TrialRecord, env: dict[str, str], trial_id: int | None,
                 on_phase: PhaseCallback, runs: int) -> None:
    """One launch to its teardown; fills the record. Raises MachineFault (a machine-suspect
    failure, :func:`tuner.server.failure.crash_failure`) for the caller to retry, PortBusy, ForeignListener, Interrupted (after the teardown)."""
    server_cfg = ctx.cfg.server
    ctx.signals.check()  # a signal a library swallowed during the last launch stops the night here
    on_phase = _checked(ctx, on_phase)
    on_phase("launching", "")
    ctx.machine.before_launch(ctx.log, record.trial)
    wait_port_bindable(server_cfg.host, server_cfg.port, reuse_address=not ctx.strict_port)
    # a baseline also runs NCCL's own P2P check where its version has one (tuner/sweep/p2p.py)
    diag = diagnostics_env(ctx.nccl_version, server_cfg.env) if record.kind is Kind.BASELINE else {}
    server = ServerProcess(server_cfg, {**env, **evidence.debug_env(ctx.cfg, Path(record.log)), **diag}, Path(record.log),
                           flags=tuple(record.flags), varied=ctx.varied, set_env=env)
    record.removed_inherited = server.removed
    probe_started: float | None = None
    probe_ended: float | None = None
    window = ctx.signals.teardown_window()
    ctx.runner_file.set_trial(record.trial, trial_id, server.identity())  # no window unrecorded: the marker
    if ctx.on_server is not None:
        ctx.on_server(server.identity())
    try:
        # the server's __exit__ (its teardown) runs with signals held: a signal waits for it
        with window.closing(), server, window.opening():
            try:
                ctx.runner_file.set_trial(record.trial, trial_id, server.identity())
                if ctx.on_server is not None:
                    ctx.on_server(server.identity())
                on_phase("loading", "")
                check = ready_check(ctx.cfg, server.kind, server.argv())
                record.load_s = server.wait_ready(server_cfg.ready_timeout_s, ready_check=check)
                _library(record, server)  # while it runs: a torn-down server maps nothing
                ctx.machine.served()
                record.warmup_s = server.warmup_s
                if record.warmup_s is not None and record.warmup_s >= 2.0:
                    ctx.log(f"trial {record.trial}: ready after {record.load_s:.1f} s, {record.warmup_s:.1f} s of "
                            "them a warm-up behind a green health check")
                probe_started = time.monotonic()
                measured = _measure(ctx, server, record, on_phase, runs, check.model)
                on_phase("teardown", "")
            finally:
                probe_ended = time.monotonic()  # before the teardown, which teardown_s times
        server.check_listener_gone()  # an unseen listener must go with our server: else it was not ours
        result, levels, answers, soaked = measured
        _summarise(record, result, levels, soaked, auto=not isinstance(ctx.cfg.probe.repeats, int))  # only answers proven ours reach it
        if answers:
            path = answers_path(ctx.study_dir, record.trial)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(answers_to_json(answers), encoding="utf-8")
        record.status, record.cause = Status.OK, ""
        if record.soak_failure and record.kind is not Kind.BASELINE:  # a baseline that hangs is the machine's
            record.status, record.cause = Status.FAILED_SOAK, record.soak_failure
    except MachineFault:
        raise
    except TrialFailed as exc:
        record.status, record.cause = Status(exc.status), exc.cause
    finally:
        record.probe_s = (probe_ended or time.monotonic()) - probe_started if probe_started is not None else 0.0
        ctx.runner_file.clear_trial()
        ctx.launched_pids = server.pids()
        before = server.gpu_before  # the lowest memory seen before a launch: what a lagging driver gives back
        if before is not None:
            floor = ctx.gpu_floor
            ctx.gpu_floor = before if floor is None or len(floor) != len(before) else list(map(min, floor, before))
        if record.load_s is not None:
            ctx.machine.last_exit = time.monotonic()  # a server that served: its memory is freed from now
        report = server.teardown_report
        if report is not None:
            record.teardown_s = report.duration_s
            # this launch's teardown only: a retried launch's clean teardown clears the first one's
            record.teardown_problem = "" if report.clean else _teardown_problem(report, server_cfg.port)


def _checked(ctx: TrialContext, on_phase: PhaseCallback) -> PhaseCallback:
    """``on_phase`` after :meth:`tuner.server.SignalGuard.check`: a signal swallowed since the last
    phase (a library's handler caught its Interrupted) is raised again at the next one."""

    def phase(name: str, detail: str) -> None:
        ctx.signals.check()
        on_phase(name, detail)

    return phase


def _library(record: TrialRecord, server: ServerProcess) -> None:
    """The NCCL library the ready server's processes mapped, into the record (``nccl_loaded``,
    ``nccl_library``, ``nccl_library_version``, ``nccl_build_id``)."""
    record.nccl_loaded, lib = server.loaded_nccl()
    if lib is not None:
        record.nccl_library, record.nccl_library_version, record.nccl_build_id = lib.path, lib.version, lib.build_id


def _teardown_problem(report: TeardownReport, port: int) -> str:
    problems = []
    if report.survivors:
        problems.append(f"processes {report.survivors} survived SIGKILL")
    if not report.port_free:
        problems.append(f"port {port} is still held by {port_holder(port)}")
    if report.gpu:
        problems.append(report.gpu)
    if report.error:
        problems.append(report.error)
    return "; ".join(problems)


def _needs_tpot(ctx: TrialContext, record: TrialRecord) -> bool:
    """True when this launch's per-token times are a figure the night uses, so a run whose tokens
    came in a burst (a starved host) is made again: the study's metric is decode tok/s (1 / TPOT),
    or this is a baseline whose TPOT the screen's bound needs (tuner.screen.limit, ``bound_for``)."""
    return ctx.cfg.probe.metric is Metric.DECODE or (record.kind is Kind.BASELINE and ctx.cfg.screen is not None)


def _measure(ctx: TrialContext, server: ServerProcess, record: TrialRecord, on_phase: PhaseCallback,
             want: int, found: ModelName | None = None,
             ) -> tuple[ProbeResult, list[LevelResult], list[Answer], SoakResult | None]:
    """Smoke and counting checks, warm-up and recorded runs (one probe loop,
    :func:`tuner.measure.run_probe`), the concurrency table; a failed request is judged by the
    launcher (crashed, hung, unhealthy, with the log's root cause; a refused guessed model name
    names the key to set). The listener is checked to be ours right before the recorded runs and
    after them (ForeignListener otherwise). ``found``: the model name readiness found. How the
    model was named, answers that ended early and multi-token chunks are said once a night and
    kept in ``record.probe_notes``. With ``[gates] answers`` on, the gate's prompts are answered
    greedily (:func:`tuner.measure.take_answers`); with ``ctx.soak_s``, the soak last (a hang it
    finds must not cost the answers; :func:`soak_launch`: its failure is the record's
    ``soak_failure``; :func:`relaunch` then makes a set's launch ``failed_soak``, a baseline's stays ok). Returns the probe's result, the concurrency
    levels, the answers and the soak, for the record once the teardown is done."""
    pc, url = ctx.cfg.probe, ctx.cfg.server.base_url
    key = find_api_key(ctx.cfg.server.api_key, os.environ, ctx.cfg.server.env)
    phase = ["check"]

    def on_event(name: str, detail: str) -> None:
        if name == "probing" and phase[0] != "probing":
            server.check_listener("before the recorded runs")
        phase[0] = name
        on_phase(name, detail)

    levels: list[LevelResult] = []
    kind = server.kind()
    with make_client(pc.stall_timeout_s, api_key=key) as client:
        named = ModelName(ctx.cfg.server.model) if ctx.cfg.server.model else found
        try:
            if named is None:
                named = find_model(url, client=client, kind=kind, argv=server.argv())
            model = named.name
            if pc.check is not None:
                on_phase("check", "")
                _checks(ctx, client, model, record)
            result = run_probe(url, model=model, prompt=pc.prompt, max_tokens=pc.max_tokens,
                               warmup=pc.warmup, repeats=want, stall_timeout_s=pc.stall_timeout_s,
                               endpoint=pc.endpoint, client=client, on_event=on_event,
                               redo_bursts=want if _needs_tpot(ctx, record) else 0)
        except ProbeError as exc:
            raise server.request_failure(refused_guess(exc, named) if named else exc, f"during {phase[0]}") from None
        if pc.metric is Metric.DECODE and not result.decode_measurable:
            raise TrialFailed(Status.UNHEALTHY, f"decode tok/s, the study's metric, was not measurable: "
                              f"{result.burst_note()}. Measure this server with probe.metric = \"output_tok_s\"")
        notes = [("model", named.note), ("counting", result.counting_note()),
                 ("early", result.early_note(pc.max_tokens, kind.title, kind.honours_ignore_eos)),
                 ("chunks", result.chunk_note()), ("bursts", result.burst_note())]
        for topic, note in notes:
            if note:
                record.probe_notes.append(note)
                if topic == "counting":  # per trial, as before
                    ctx.log(f"trial {record.trial}: {note}")
                else:
                    ctx.say_once(topic, f"note: {note}")
                if server.pump is not None:
                    server.pump.note(note)
        server.check_listener("after the recorded runs")
        if pc.concurrency:
            on_phase("concurrency", ",".join(map(str, pc.concurrency)))
            levels = list(run_bench(url, model=model, concurrency=list(pc.concurrency),
                                    requests=pc.concurrency_requests, max_tokens=pc.max_tokens,
                                    prompt=pc.prompt, stall_timeout_s=pc.stall_timeout_s,
                                    endpoint=pc.endpoint, api_key=key))
            server.check_listener("after the concurrency table")
        answers: list[Answer] = []
        gates = ctx.cfg.gates
        if gates.answers:
            on_phase("answers", f"{len(gates.prompts)} prompts x {gates.max_tokens} tokens")
            try:
                answers = take_answers(client, url, model=model, prompts=gates.prompts, max_tokens=gates.max_tokens,
                                       kind=kind, seed=gates.seed, stall_timeout_s=pc.stall_timeout_s,
                                       endpoint=pc.endpoint)
            except ProbeError as exc:
                raise server.request_failure(exc, "during the correctness gate's answers") from None
            server.check_listener("after the answers")
        soaked = None
        if ctx.soak_s > 0:
            on_phase("soak", f"{ctx.soak_s / 60:g} min at concurrency {','.join(map(str, pc.concurrency or (1,)))}")
            soaked = soak_launch(server, pc, url=url, model=model, api_key=key, seconds=ctx.soak_s,
                                 log=Path(record.log))
            ctx.log(f"trial {record.trial}: soak {'passed' if soaked.passed else 'failed: ' + soaked.failure}")
            if soaked.passed:
                server.check_listener("after the soak")
    return result, levels, answers, soaked


def counted_in_order(text: str, n: int) -> bool:
    """True when ``text`` holds the numbers 1..n in order (other text between them allowed)."""
    wanted = 1
    for number in re.findall(r"\d+", text):
        if int(number) == wanted:
            wanted += 1
            if wanted > n:
                return True
    return False


def _checks(ctx: TrialContext, client: httpx.Client, model: str, record: TrialRecord) -> None:
    """The smoke question and the opt-in counting check (:class:`tuner.inputs.config.SmokeCheck`):
    a wrong answer is ``invalid_output``; an answer cut off by its token budget (a reasoning
    model still thinking) is said in the log, never judged wrong."""
    check, url, pc = ctx.cfg.probe.check, ctx.cfg.server.base_url, ctx.cfg.probe
    assert check is not None
    if check.prompt is not None and check.expect is not None:
        res = smoke_check(client, url, model, check.prompt, check.expect, max_tokens=check.max_tokens,
                          timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint)
        if res.wrong:
            raise TrialFailed(Status.INVALID_OUTPUT, f"smoke check: {check.prompt!r} {res.describe(check.expect)}")
        if res.cut_off:
            ctx.log(f"trial {record.trial}: smoke check {res.describe(check.expect)}")
    if check.count_to is not None:
        n = check.count_to
        res = smoke_check(client, url, model, f"Count from 1 to {n}.", "1", max_tokens=8 * n + 16,
                          timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint, retry_max_tokens=16 * n + 64)
        if res.cut_off:
            ctx.log(f"trial {record.trial}: counting check cut off at max_tokens={res.max_tokens}: not judged")
        elif not counted_in_order(res.answer, n):
            raise TrialFailed(Status.INVALID_OUTPUT, f"counting check: 'Count from 1 to {n}.' answered "
                              f"{res.answer[:120]!r}, not 1..{n} in order (corrupted output?)")


def _summarise(record: TrialRecord, result: ProbeResult, levels: list[LevelResult], soaked: SoakResult | None,
               *, auto: bool) -> None:
    """The recorded runs and their medians, the concurrency levels and the soak, into the record
    (ProbeResult's definitions)."""
    soak_fields(record, soaked)
    runs = result.runs
    if levels:
        record.concurrency = levels
    record.output_tok_s_runs = result.output_tok_s_runs
    record.output_tok_s = result.output_tok_s
    record.decode_tok_s_runs = [v for v in result.decode_tok_s_runs if v is not None]
    record.decode_tok_s = result.decode_tok_s
    record.ttft_s, record.tpot_s, record.e2e_s = result.ttft_s, result.tpot_s, result.e2e_s
    record.completion_tokens = result.completion_tokens
    record.tokens_counted = result.tokens_counted
    record.timing_measurable = result.timing_measurable
    record.reasoning_deltas = runs[-1].reasoning_deltas if runs else 0
    if auto:  # the field is repeats = "auto"'s (its bootstrap costs a night's first second of CPU)
        record.ci_halfwidth = stats.median_ci_halfwidth(record.output_tok_s_runs)
