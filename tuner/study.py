"""The sweep: one Optuna study, one server relaunch per trial, every trial against the baseline.

Order of relaunches: the untuned baseline (trial 0), the space's presets in order, then the
sampler's proposals (search mode). Every trial, whatever its kind, is a point of one
categorical Optuna space (each variable's candidates plus "unset"), so presets teach the
sampler too. A trial that fails is told to the sampler as a violated constraint
(``trial.set_constraint``) so TPE stops proposing that region; tok/s is never recorded as 0.

Sampler: TPE (``multivariate=True``, ``constant_liar=True``), not GPSampler. The space is all
categorical (a few thousand points), where TPE's per-category densities are natural and
GPSampler's one-hot kernel gains little at 10-30 trials; GPSampler would also pull PyTorch
(GBs) onto every runner host, and constant_liar keeps parallel hosts on one PostgreSQL
study from proposing the same point.

Everything a report needs is stored in the trial's user attributes, so ``nccl-tune report``
rebuilds trials.csv and the plots from the storage alone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import warnings

import optuna
import psutil
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import TrialState

from tuner import gpu, nccl_env, probe, stats
from tuner.config import ExperimentConfig
from tuner.errors import SweepAborted
from tuner.launcher import LaunchFailed, ServerProcess, kill_leftover, port_holder, port_in_use
from tuner.progress import Progress
from tuner.space import UNSET, SearchSpace

BASELINE, PRESET, SEARCH, DUPLICATE, INVALID = "baseline", "preset", "search", "duplicate", "invalid"
CONSTRAINT = "server_failed"
_MAX_DUPLICATES = 200


@dataclass
class SweepOptions:
    """Command-line choices for one sweep.

    ``trials``: relaunch budget, baseline included (None: the config's). ``timeout_s`` (s) and
    ``until`` (wall clock) bound the night: a trial is started only if the measured trial time
    says it fits. ``target`` (tok/s): stop at the first set whose CI lower bound meets it.
    """

    study: str
    results: Path = Path("results")
    storage: str | None = None
    trials: int | None = None
    mode: str | None = None
    seed: int | None = None
    allow_unsafe: bool = False
    baseline_every: int | None = None
    final_baseline: bool = True
    rebaseline: bool = False
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
    """What a sweep did: relaunches made, why it stopped, and the study to report from."""

    study: optuna.Study
    relaunches: int = 0
    stop_reason: str = ""
    target_met_untuned: bool = False
    target_reached_by: int | None = None
    baseline_failed: bool = False


def env_key(env: dict[str, str]) -> str:
    """Canonical JSON of an env set: the identity used to never measure a set twice."""
    return json.dumps(dict(sorted(env.items())), separators=(",", ":"))


def default_storage(study_dir: Path) -> str:
    """SQLite storage URL under the study directory (``results/<study>/study.db``)."""
    return f"sqlite:///{(study_dir / 'study.db').resolve()}"


def open_study(name: str, storage: str, seed: int | None = None) -> optuna.Study:
    """Create or load the study (maximise tok/s) with the TPE sampler described above.

    For RDB storages (SQLite, PostgreSQL) a heartbeat is configured so a trial whose runner
    died is failed by ``optuna.storages.fail_stale_trials`` after the grace period.
    """
    # Heartbeats outside Study.optimize and the experimental flag only warn; they work.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    if storage.startswith(("sqlite", "postgresql", "mysql")):
        store: optuna.storages.BaseStorage | str = optuna.storages.RDBStorage(
            storage, heartbeat_interval=30, grace_period=120,
            engine_kwargs={"connect_args": {"timeout": 30}} if storage.startswith("sqlite") else None)
    else:
        store = storage
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                         n_startup_trials=5)
    return optuna.create_study(study_name=name, storage=store, sampler=sampler,
                               direction="maximize", load_if_exists=True)


class _Heartbeat:
    """Records an Optuna heartbeat for a running trial on a thread (RDB storages only)."""

    def __init__(self, study: optuna.Study, trial_id: int, interval_s: float = 30.0) -> None:
        self._stop = threading.Event()
        storage = study._storage
        if not is_heartbeat_enabled(storage):
            self._thread = None
            return

        def beat() -> None:
            while not self._stop.wait(interval_s):
                try:
                    storage.record_heartbeat(trial_id)
                except Exception:  # noqa: BLE001 - a missed beat must not kill a measurement
                    pass

        storage.record_heartbeat(trial_id)
        self._thread = threading.Thread(target=beat, daemon=True, name="optuna-heartbeat")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the runner; ``code`` is the exit status (130 / 143)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.code = 128 + signum


class Sweep:
    """Runs one sweep of ``config`` under ``options`` over ``space``. Call :meth:`run`."""

    def __init__(self, config: ExperimentConfig, space: SearchSpace, options: SweepOptions) -> None:
        self.cfg = config
        self.space = space
        self.opt = options
        self.dir = options.study_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.storage = options.storage or default_storage(self.dir)
        self.study = open_study(options.study, self.storage, options.seed if options.seed is not None else config.sweep.seed)
        self.choices = space.choices()
        self.budget = options.trials or config.sweep.trials
        self.mode = options.mode or config.sweep.mode
        self.target = options.target if options.target is not None else config.sweep.target
        self.baseline_every = options.baseline_every if options.baseline_every is not None else config.sweep.baseline_every
        self.progress = options.progress or Progress(self.budget)
        self.runner_id = f"{socket.gethostname()}:{os.getpid()}"
        self.inflight_path = self.dir / f"inflight-{socket.gethostname()}.json"
        self.started = time.monotonic()
        self.relaunches = 0
        self.outcome = SweepOutcome(study=self.study)
        self._tearing_down = False
        self._pending_signal = 0

    # -- bookkeeping ---------------------------------------------------------------------
    def _finished(self) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.user_attrs.get("kind") not in (DUPLICATE, INVALID)]

    def _measured_keys(self) -> dict[str, optuna.trial.FrozenTrial]:
        out = {}
        for t in self._finished():
            if "env_key" in t.user_attrs and t.user_attrs.get("kind") != BASELINE:
                out.setdefault(t.user_attrs["env_key"], t)
        return out

    def _baselines(self) -> list[optuna.trial.FrozenTrial]:
        """Successful baseline measurements, oldest first (a failed baseline judges nothing)."""
        return [t for t in self._finished() if t.user_attrs.get("kind") == BASELINE
                and t.user_attrs.get("status") == "ok"]

    def _pending_keys(self) -> set[str]:
        keys = set()
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
            if t.params:
                keys.add(env_key({k: v for k, v in t.params.items() if v != UNSET}))
            if "fixed_params" in t.system_attrs:  # enqueued, not yet asked
                keys.add(env_key({k: v for k, v in t.system_attrs["fixed_params"].items() if v != UNSET}))
        return keys

    def _params(self, env: dict[str, str]) -> dict[str, str]:
        return {name: env.get(name, UNSET) for name in self.choices}

    def _enqueue(self, env: dict[str, str], kind: str, label: str, extra: dict | None = None) -> None:
        attrs = {"kind": kind, "preset": label, **(extra or {})}
        self.study.enqueue_trial(self._params(env), user_attrs=attrs, skip_if_exists=False)

    def _planned(self) -> tuple[dict[str, str], str, str, dict] | None:
        """The next set that must run before the sampler proposes: first the retry of a trial
        whose runner died (once), then the space's presets in order, skipping any set already
        measured, in flight, or given up after an interrupted retry."""
        measured = set(self._measured_keys())
        busy = self._pending_keys()
        every = self.study.get_trials(deepcopy=False)
        retried = {t.user_attrs.get("retry_of_trial") for t in every} - {None}
        gave_up = set()
        for t in every:
            if t.state == TrialState.FAIL and t.user_attrs.get("status") == "interrupted":
                env = {k: v for k, v in t.params.items() if v != UNSET}
                key = env_key(env)
                if t.user_attrs.get("retry_of_trial") is not None:
                    gave_up.add(key)
                elif t.number not in retried and key not in measured | busy:
                    kind = t.user_attrs.get("kind", SEARCH)
                    return env, kind, t.user_attrs.get("preset") or kind, {"retry_of_trial": t.number}
        if self.mode in ("search", "presets"):
            for preset in self.space.presets:
                key = env_key(preset.env)
                if key not in measured | busy | gave_up:
                    return dict(preset.env), PRESET, preset.name, {}
        return None

    def _recover(self) -> None:
        """Resume after a dead runner: tear down the server it left, retry its trial once.

        The in-flight record names the trial and the server (marker, process group, start
        time); besides it, any RUNNING trial started on this host by a runner that is no
        longer alive is marked ``interrupted``. Trials of other hosts are failed by Optuna's
        heartbeat (``fail_stale_trials``) once their grace period passed.
        """
        info: dict = {}
        if self.inflight_path.exists():
            try:
                info = json.loads(self.inflight_path.read_text())
            except (OSError, json.JSONDecodeError):
                info = {}
        if info.get("server"):
            killed = kill_leftover(info["server"])
            self.progress.log(f"resume: the previous runner ({info.get('runner')}) died during trial "
                              f"{info.get('trial')}; tore down its server ({len(killed)} processes)")
        host = socket.gethostname()
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            rhost, _, rpid = str(frozen.user_attrs.get("runner", "")).rpartition(":")
            mine = frozen._trial_id == info.get("trial_id") or (
                rhost == host and rpid.isdigit() and not _runner_alive(int(rpid)))
            if mine:
                self._interrupted(frozen)
        if is_heartbeat_enabled(self.study._storage):
            optuna.storages.fail_stale_trials(self.study)
        self.inflight_path.unlink(missing_ok=True)

    def _interrupted(self, frozen: optuna.trial.FrozenTrial) -> None:
        storage, trial_id = self.study._storage, frozen._trial_id
        storage.set_trial_user_attr(trial_id, "status", "interrupted")
        storage.set_trial_user_attr(trial_id, "cause", "runner died mid-trial")
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
        self.progress.log(f"resume: trial {frozen.number} was interrupted; "
                          + ("it is retried first" if frozen.user_attrs.get("retry_of_trial") is None
                             else "it was already a retry and is not tried a third time"))

    # -- budget --------------------------------------------------------------------------
    def _fits(self, extra: bool = False) -> tuple[bool, str]:
        if not extra and self._spent() >= self.budget:
            return False, f"relaunch budget of {self.budget} spent"
        walls = [t.user_attrs.get("wall_s", 0) for t in self._finished()] + self.progress.trial_times
        estimate = max(walls) if walls else 0.0
        now = time.monotonic()
        if self.opt.timeout_s is not None and now - self.started + estimate > self.opt.timeout_s:
            return False, f"--timeout: another trial (~{estimate:.0f} s) would not fit"
        if self.opt.until is not None and datetime.now().timestamp() + estimate > self.opt.until.timestamp():
            return False, f"--until {self.opt.until:%H:%M}: another trial (~{estimate:.0f} s) would not fit"
        return True, ""

    # -- one trial -----------------------------------------------------------------------
    def _measure(self, number: int, trial_id: int | None, env: dict[str, str], label: str) -> dict:
        index = self.relaunches
        label = f"trial {number}: {label}"
        log = self.dir / "logs" / f"trial-{number:04d}.log"
        rec: dict = {"status": "failed", "cause": "", "runs": [], "log": str(log)}
        t0 = time.monotonic()
        server = ServerProcess(self.cfg.server, env, log)
        rec["removed_inherited"] = server.removed
        p0: float | None = None
        try:
            self.progress.phase(index, label, "launching")
            inflight = {"runner": self.runner_id, "trial": number, "trial_id": trial_id,
                        "server": {"marker": server.marker}}
            self.inflight_path.write_text(json.dumps(inflight))  # before start: no window unrecorded
            server.start(gpu.used_bytes())
            inflight["server"] = server.identity()
            self.inflight_path.write_text(json.dumps(inflight))
            self.progress.phase(index, label, "loading")
            rec["load_s"] = server.wait_ready(self.cfg.server.ready_timeout_s)
            p0 = time.monotonic()
            self._probe(server, rec, index, label)
            rec["status"] = "ok"
        except LaunchFailed as exc:
            rec["status"], rec["cause"] = exc.status, exc.cause
        finally:
            probe_s = time.monotonic() - p0 if p0 is not None else 0.0
            self.progress.phase(index, label, "teardown")
            self._tearing_down = True  # a signal now is held until the teardown has finished
            try:
                report = server.teardown()
            finally:
                self._tearing_down = False
            self.inflight_path.unlink(missing_ok=True)
            if self._pending_signal:
                signum, self._pending_signal = self._pending_signal, 0
                raise Interrupted(signum)
        rec["probe_s"] = probe_s
        rec["teardown_s"] = report.duration_s
        rec["wall_s"] = time.monotonic() - t0
        if not report.clean:
            problems = []
            if report.survivors:
                problems.append(f"processes {report.survivors} survived SIGKILL")
            if not report.port_free:
                problems.append(f"port {self.cfg.server.port} is still held by {port_holder(self.cfg.server.port)}")
            if report.gpu:
                problems.append(report.gpu)
            rec["teardown_problem"] = "; ".join(problems)
        return rec

    def _probe(self, server: ServerProcess, rec: dict, index: int, label: str) -> None:
        """Readiness proof, smoke check, warmup, recorded runs and the concurrency table."""
        pc = self.cfg.probe
        url = self.cfg.server.base_url

        def fail(exc: Exception, phase: str) -> LaunchFailed:
            if isinstance(exc, (probe.ProbeDisconnected, probe.ProbeConnectError)):
                server.exited_within(1.0)  # a dropped stream is often a dying server: let it finish
            if not server.alive():
                return LaunchFailed("crashed", f"{server.crash_cause()} during {phase}")
            if isinstance(exc, probe.ProbeStalled):
                return LaunchFailed("hung", f"no token for {pc.stall_timeout_s:.0f} s during {phase}")
            if phase == "ready-check":
                return LaunchFailed("unhealthy", f"ready but the first request failed: {exc}")
            if isinstance(exc, probe.ProbeDisconnected):
                return LaunchFailed("crashed", f"stream dropped during {phase}: {exc}")
            return LaunchFailed("unhealthy", f"{exc} during {phase}")

        with probe.make_client(pc.stall_timeout_s) as client:
            self.progress.phase(index, label, "ready-check")
            try:
                model = self.cfg.server.model or probe.discover_model(url, client=client)
                probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=min(8, pc.max_tokens),
                                  stall_timeout_s=pc.stall_timeout_s)
                if pc.check is not None:
                    ok, answer = probe.smoke_check(client, url, model, pc.check.prompt, pc.check.expect,
                                                   timeout_s=pc.stall_timeout_s)
                    if not ok:
                        raise LaunchFailed("invalid_output", f"smoke check: {pc.check.prompt!r} answered "
                                           f"{answer[:120]!r}, expected {pc.check.expect!r}")
            except probe.ProbeError as exc:
                raise fail(exc, "ready-check") from None
            runs: list[probe.RunMetrics] = []
            want = pc.repeats if isinstance(pc.repeats, int) else pc.max_repeats
            total = pc.warmup + want
            i = 0
            while i < total:
                phase = "warmup" if i < pc.warmup else "probing"
                if i < pc.warmup:
                    detail = f"{i + 1}/{pc.warmup}"
                else:
                    detail = (f"run {i - pc.warmup + 1}/{want}" if isinstance(pc.repeats, int) else
                              f"run {i - pc.warmup + 1} (auto: until the CI half-width <= {pc.ci_target:.1%}, "
                              f"at most {want})")
                self.progress.phase(index, label, phase, detail)
                try:
                    m = probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=pc.max_tokens,
                                          stall_timeout_s=pc.stall_timeout_s)
                except probe.ProbeError as exc:
                    raise fail(exc, phase) from None
                if i >= pc.warmup:
                    runs.append(m)
                    rec["runs"] = [r.output_tok_s for r in runs]
                    if (pc.repeats == "auto" and len(runs) >= 3
                            and stats.median_ci_halfwidth(rec["runs"]) <= pc.ci_target):
                        break
                i += 1
            _summarise(rec, runs)
            if pc.repeats == "auto":
                rec["ci_halfwidth"] = stats.median_ci_halfwidth(rec["runs"])
                if rec["ci_halfwidth"] > pc.ci_target:
                    self.progress.log(f"{label}: CI half-width {rec['ci_halfwidth']:.1%} still above "
                                      f"{pc.ci_target:.1%} after max_repeats={pc.max_repeats} runs")
            if pc.concurrency:
                from tuner import bench

                self.progress.phase(index, label, "concurrency", ",".join(map(str, pc.concurrency)))
                levels = bench.run_bench(url, model=model, concurrency=list(pc.concurrency),
                                         requests=pc.concurrency_requests, max_tokens=pc.max_tokens,
                                         prompt=pc.prompt, stall_timeout_s=pc.stall_timeout_s)
                rec["concurrency"] = bench.levels_to_json(levels)

    def _tell(self, trial: optuna.Trial, rec: dict) -> None:
        for key, value in rec.items():
            trial.set_user_attr(key, value)
        ok = rec["status"] == "ok"
        trial.set_constraint(CONSTRAINT, 0.0 if ok else 1.0)
        if ok:
            value = float(rec["output_tok_s"])
        else:
            # The sampler needs a number; the constraint marks it infeasible. Reports show NaN.
            value = self._penalty()
        self.study.tell(trial, value)

    # -- the loop ------------------------------------------------------------------------
    def preflight(self) -> None:
        """Refuse to start when the port already answers (who holds it is named)."""
        host, port = self.cfg.server.host, self.cfg.server.port
        if port_in_use(host, port):
            raise SweepAborted(f"port {port} on {host} already answers, held by {port_holder(port)}; "
                               "stop that server or choose another server.port before sweeping")

    def _next(self) -> tuple[optuna.Trial, dict[str, str], str, str] | None:
        """Ask Optuna for the next relaunch: a planned retry or preset, else a sampler proposal.

        Sets already measured are told to the sampler with their known result, and sets NCCL
        would reject together with ``server.env`` (MIN channels above MAX) are told as
        infeasible; neither spends a relaunch. None when nothing is left to try.
        """
        skipped = 0
        while True:
            planned = self._planned()
            if planned is not None:
                env, kind, label, extra = planned
                self._enqueue(env, kind, label, extra)
            elif self.mode == "presets":
                return None
            trial = self.study.ask()
            trial.set_user_attr("runner", self.runner_id)  # so a resume can tell this trial is ours
            params = {name: trial.suggest_categorical(name, list(values)) for name, values in self.choices.items()}
            env = {k: str(v) for k, v in params.items() if v != UNSET}
            kind = trial.user_attrs.get("kind", SEARCH)
            label = trial.user_attrs.get("preset") or kind
            key = env_key(env)
            earlier = self._measured_keys().get(key)
            if not env:
                earlier = earlier or (self._baselines() or [None])[0]
            problems = nccl_env.cross_problems({**self.cfg.server.env, **env})
            if earlier is None and not problems:
                trial.set_user_attr("kind", kind)
                return trial, env, kind, label
            if problems:  # NCCL would clamp or reject it: no relaunch, the sampler learns to avoid it
                trial.set_user_attr("kind", INVALID)
                trial.set_user_attr("cause", problems[0][1])
                trial.set_constraint(CONSTRAINT, 1.0)
                self.study.tell(trial, self._penalty())
            else:  # already measured: the sampler is told the known result
                trial.set_user_attr("kind", DUPLICATE)
                trial.set_user_attr("duplicate_of", earlier.number)
                trial.set_constraint(CONSTRAINT, earlier.constraints.get(CONSTRAINT, 0.0))
                self.study.tell(trial, earlier.value)
            skipped += 1
            if skipped >= _MAX_DUPLICATES:
                return None

    def _penalty(self) -> float:
        """Objective value told for a failed or invalid set, with its constraint violated:
        half the worst measured median (never shown as tok/s anywhere)."""
        done = [t.value for t in self._finished() if t.value is not None and t.user_attrs.get("status") == "ok"]
        return 0.5 * min(done) if done else 0.0

    def _target_check(self, rec: dict, kind: str, number: int) -> bool:
        if self.target is None or rec.get("status") != "ok":
            return False
        runs = rec["runs"]
        low = rec["output_tok_s"] * (1 - stats.median_ci_halfwidth(runs)) if len(runs) > 1 else rec["output_tok_s"]
        if low >= self.target:
            if kind == BASELINE:
                self.outcome.target_met_untuned = True
            else:
                self.outcome.target_reached_by = number
            return True
        return False

    def _spent(self) -> int:
        """Relaunches the budget counts: finished baseline, preset and search trials of the
        whole study (a resumed sweep continues the count); drift re-measures are extra."""
        return sum(1 for t in self._finished() if not t.user_attrs.get("recheck"))

    def run(self) -> SweepOutcome:
        """Run relaunches until the budget, time limit or target ends the sweep.

        Raises SweepAborted when the machine is not clean (port held, processes survived);
        Interrupted on SIGINT/SIGTERM after tearing the server down.
        """
        for notice in self.space.notices:
            self.progress.log(notice)
        self._recover()
        self.preflight()
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        since_baseline = 0
        try:
            if not self._baselines() or self.opt.rebaseline:
                if self._run_baseline(recheck=bool(self._baselines())):
                    return self._done()
            elif self.target is not None and not self.opt.always:
                b = self._baselines()[-1]
                if self._target_check(dict(b.user_attrs), BASELINE, b.number):
                    self.outcome.stop_reason = f"target {self.target:g} tok/s already met by the baseline"
                    return self._done()
            if not self._baselines():
                last = [t for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("kind") == BASELINE]
                cause = last[-1].user_attrs.get("cause", "") if last else ""
                self.outcome.stop_reason = (f"the untuned baseline failed ({last[-1].user_attrs.get('status') if last else '?'}"
                                            f": {cause}); no tuned set was launched, since nothing could be "
                                            "compared. Fix the server command or environment and run again")
                self.outcome.baseline_failed = True
                return self._done()
            while True:
                fits, why = self._fits()
                if not fits:
                    self.outcome.stop_reason = why
                    break
                if self.baseline_every and since_baseline >= self.baseline_every:
                    self._run_baseline(recheck=True)
                    since_baseline = 0
                    continue
                nxt = self._next()
                if nxt is None:
                    self.outcome.stop_reason = ("all presets measured" if self.mode == "presets"
                                                else "search space exhausted (only measured or invalid sets proposed)")
                    break
                since_baseline += 1
                if self._run_trial(*nxt):
                    break
            if (self.opt.final_baseline and self.relaunches > 1 and not self.outcome.target_met_untuned
                    and self._fits(extra=True)[0]):
                self._run_baseline(recheck=True, final=True)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
            self.progress.close()
        return self._done()

    def _done(self) -> SweepOutcome:
        self.outcome.relaunches = self.relaunches
        return self.outcome

    def _run_baseline(self, *, recheck: bool, final: bool = False) -> bool:
        """Measure the untuned baseline outside the sampler's queue, record it with add_trial.

        Returns True when the sweep should stop (target already met by the baseline).
        """
        self.relaunches += 1
        number = len(self.study.get_trials(deepcopy=False))
        label = "baseline re-measure" if recheck else "baseline"
        attrs = {"kind": BASELINE, "preset": "", "env": {}, "env_key": env_key({}), "recheck": recheck,
                 "runner": self.runner_id, "started_at": time.time()}
        rec = self._measure(number, None, {}, label)
        rec["finished_at"] = time.time()
        attrs.update(rec)
        ok = rec["status"] == "ok"
        value = float(rec["output_tok_s"]) if ok else 0.0
        params = self._params({})
        dists = {k: optuna.distributions.CategoricalDistribution(list(v)) for k, v in self.choices.items()}
        self.study.add_trial(optuna.trial.create_trial(
            params=params, distributions=dists, value=value, user_attrs=attrs,
            system_attrs={f"constraints:{CONSTRAINT}": 0.0 if ok else 1.0}))
        self._after(number, label, {}, rec)
        if final or recheck:
            return False
        if self.target is not None and self._target_check(rec, BASELINE, number) and not self.opt.always:
            self.outcome.stop_reason = f"target {self.target:g} tok/s already met by the baseline"
            return True
        return False

    def _after(self, number: int, label: str, env: dict[str, str], rec: dict) -> None:
        self.progress.trial_done(rec["wall_s"])
        status = rec["status"]
        summary = (f"{rec['output_tok_s']:.1f} tok/s (runs {', '.join(f'{r:.1f}' for r in rec['runs'])})"
                   if status == "ok" else f"{status}: {rec['cause']}")
        self.progress.log(f"trial {number} [{label}] {json.dumps(nccl_env.redact(env))} -> {summary}")
        if "teardown_problem" in rec:
            raise SweepAborted(f"after trial {number} the machine is not clean: {rec['teardown_problem']}. "
                               "The next trial was not launched; results so far are kept.")

    def _run_trial(self, trial: optuna.Trial, env: dict[str, str], kind: str, label: str) -> bool:
        """Relaunch for one sampler/preset trial and tell Optuna; True when the target is met."""
        self.relaunches += 1
        trial.set_user_attr("kind", kind)
        trial.set_user_attr("preset", label if kind == PRESET else "")
        trial.set_user_attr("env", nccl_env.redact(env))
        trial.set_user_attr("env_key", env_key(nccl_env.redact(env)))
        trial.set_user_attr("runner", self.runner_id)
        trial.set_user_attr("started_at", time.time())
        trial.set_user_attr("log", str(self.dir / "logs" / f"trial-{trial.number:04d}.log"))
        beat = _Heartbeat(self.study, trial._trial_id)
        try:
            rec = self._measure(trial.number, trial._trial_id, env, label)
        except Interrupted:
            beat.stop()
            self.study._storage.set_trial_user_attr(trial._trial_id, "status", "interrupted")
            self.study.tell(trial, state=TrialState.FAIL)
            raise
        beat.stop()
        rec["finished_at"] = time.time()
        self._tell(trial, rec)
        self._after(trial.number, label, env, rec)
        if self._target_check(rec, kind, trial.number):
            self.outcome.stop_reason = f"target {self.target:g} tok/s reached by trial {trial.number}"
            return True
        return False

    def _on_signal(self, signum: int, _frame) -> None:
        if self._tearing_down:
            self._pending_signal = signum
            return
        raise Interrupted(signum)


def _runner_alive(pid: int) -> bool:
    """True when ``pid`` is a live nccl-tune runner (not a reused pid of something else)."""
    if pid == os.getpid():
        return True
    try:
        cmd = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
    return "tuner" in cmd or "nccl-tune" in cmd


def _summarise(rec: dict, runs: list[probe.RunMetrics]) -> None:
    """Medians of the recorded runs into the trial record (probe.ProbeResult's definitions)."""
    result = probe.ProbeResult(runs)
    rec.update(output_tok_s=result.output_tok_s, ttft_s=result.ttft_s, tpot_s=result.tpot_s,
               e2e_s=result.e2e_s, completion_tokens=result.completion_tokens,
               tokens_counted=result.tokens_counted,
               reasoning_deltas=runs[-1].reasoning_deltas if runs else 0,
               run_details=[r.to_json() for r in runs])
