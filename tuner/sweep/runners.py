"""The other runners of a study: who asked first, what they left when they died, whom to wait for.

Several runners (one per host, or per server of a host) may share one study through a
PostgreSQL storage (:mod:`tuner.study.storage`). Before each launch a runner checks that no
trial asked before its own holds the same set or spends the last slot of the budget
(:meth:`Runners.taken`, :meth:`Runners.over_budget`); on resume it tears down the servers its
dead predecessors left and marks their trials interrupted, retried once (:meth:`Runners.recover`);
before each relaunch and at its end it tears down every server a dead runner of the study left on
its host (:meth:`Runners.reap`); and before it ends it waits for the trials of runners that fell
silent rather than leave them unretried (:meth:`Runners.await_silent`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator

import optuna

from tuner.errors import Interrupted
from tuner.planning import counts_in_budget, split_params
from tuner.record import Kind, Status, TrialRecord
from tuner.server import ServerIdentity, kill_leftover
from tuner.study import RunnerFile, StudyStore, host_name, runner_alive

__all__ = ["Runners"]

#: How long a runner waits for trials asked before its own to say what they launch before it
#: decides whether its own fits the budget (s); a runner killed in those milliseconds leaves one
#: undecided, which this bounds. Longer than :data:`tuner.study.storage.SETTLE_S` (2 s), which a
#: starved runner outlasted.
UNDECIDED_WAIT_S = 30.0


class Runners:
    """This runner among the study's others: ``store`` (the shared study), ``runner_file``
    (this runner's claim on its results folder), ``host_type`` (:mod:`tuner.study.host`),
    ``heartbeat_s``/``grace_s`` (s, :func:`tuner.study.storage.heartbeat_settings`) and ``log``
    (a progress line)."""

    def __init__(self, store: StudyStore, runner_file: RunnerFile, host_type: str, *, heartbeat_s: int,
                 grace_s: int, log: Callable[[str], None]) -> None:
        self.store, self.runner_file, self.host_type = store, runner_file, host_type
        self.heartbeat_s, self.grace_s, self.log = heartbeat_s, grace_s, log
        self._reaped: set[int] = set()  # trials whose dead runner's server was looked for

    @contextlib.contextmanager
    def holding(self, study: str) -> Iterator[None]:
        """This runner's claim on its results folder and port for ``study``'s night
        (:meth:`tuner.study.RunnerFile.claim`: MachineNotClean when a live runner holds it); at
        its end, however it ends, every server a dead runner of the study left on this host torn
        down (:meth:`reap`) and the claim released."""
        self.runner_file.claim(study)
        try:
            yield
        finally:
            try:  # no runner ends while a dead runner's server of its study runs on its host
                self.reap()
            except Interrupted:
                raise  # a second signal: the claim is still released below
            except Exception as exc:  # the storage may be what failed: never hide the first error
                self.log(f"could not look for servers dead runners left: {exc}")
            finally:
                self.runner_file.release()

    def busy_keys(self, key_of: Callable[[dict[str, str], list[str]], str]) -> set[str]:
        """The keys (``key_of(env, flags)``) of every set queued or running on any runner."""
        return {key_of(*split_params(params)) for params in self.store.pending_params()}

    def taken(self, trial: optuna.Trial, key: str, key_of: Callable[[dict[str, str], list[str]], str]) -> bool:
        """True when a trial asked before ``trial`` (any runner's, queued or running) holds the
        set ``key``: the earlier one measures it, ``trial`` is dropped."""
        return any(key_of(*split_params(p)) == key for p in self.store.pending_params(before=trial.number))

    def over_budget(self, trial: optuna.Trial, limit: int, claim: TrialRecord) -> bool:
        """True when trials asked before ``trial`` (any runner's) already spend ``limit``
        relaunches: the earlier trial wins, so runners that check at the same moment never launch
        one relaunch too many, nor both take the last slot.

        Trials still being decided by their runner (asked, not yet claimed) are waited for:
        milliseconds, unless that runner is starved of CPU. After :data:`UNDECIDED_WAIT_S` only
        those whose runner still beats (a heartbeat within the grace period) are waited for; a
        trial whose runner died before claiming it is then taken as not launched. Meanwhile this
        runner beats for ``trial``, so its own wait never reads as its death. False (within the
        budget) stores ``claim``, the record ``trial`` will relaunch, at once (status running):
        from then on every runner counts it. It used to be written only when the launch began,
        and after a 30 s wait a runner went on without it: a three-worker night made 11 relaunches
        of 10, a two-worker one 7 of 6."""
        deadline = beaten = time.monotonic()
        deadline += UNDECIDED_WAIT_S
        while True:
            before = sum(1 for r in self.store.records() if r.trial < trial.number and counts_in_budget(r))
            if before >= limit:
                return True
            waited = time.monotonic() > deadline
            if before + self.store.undecided(trial.number, beating_within_s=self.grace_s if waited else None) < limit:
                self.store.start(trial, dataclasses.replace(claim, status=Status.RUNNING))
                return False
            if time.monotonic() - beaten >= self.heartbeat_s:
                self.store.beat(trial)
                beaten = time.monotonic()
            time.sleep(0.5 if waited else 0.05)  # past the first wait: a starved runner, read less often

    def earlier_baseline(self, number: int) -> bool:
        """True when a first (not re-measure) baseline of this host type, ok or still running,
        was asked before trial ``number``: runners that started together each measured one, and
        only the earliest is the study's baseline in the budget."""
        return any(r.kind is Kind.BASELINE and not r.recheck and r.trial < number and r.status in (Status.OK, Status.RUNNING)
                   and r.host_type in ("", self.host_type) for r in self.store.records())

    def baseline_in_flight(self) -> bool:
        """True when another runner is measuring a baseline of this host type right now."""
        return any(r.kind is Kind.BASELINE and r.status is Status.RUNNING and r.host_type == self.host_type
                   for r in self.store.records())

    def recover(self) -> None:
        """Resume after dead runners on this host: tear down the servers they left and mark
        their trials interrupted (retried once). Trials of dead runners on other hosts are
        failed by Optuna's heartbeat once their grace period passed."""
        left = [(self.runner_file.path, self.runner_file.left_behind), *self.runner_file.orphans()]
        by_id = dict(self.store.running())
        for path, info in left:
            if info.get("server"):
                killed = kill_leftover(ServerIdentity.from_json(info["server"]))
                self.log(f"resume: the previous runner ({info.get('runner')}) died during trial "
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
        self.reap()

    def reap(self) -> None:
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
                self.log(f"trial {number}: its runner ({runner}) died; tore down the server it left "
                         f"(pid {identity.pid or '?'}, {len(killed)} processes)")

    def _interrupted(self, trial_id: int, rec: TrialRecord) -> None:
        self.store.mark_interrupted(trial_id, rec, f"its runner ({rec.runner or '?'}) died mid-trial")
        self.log(f"resume: trial {rec.trial} was interrupted; "
                 + ("it is retried first" if rec.retry_of_trial is None
                    else "it was already a retry and is not tried a third time"))

    def await_silent(self, fits: Callable[[], bool], retry_owed: Callable[[], bool]) -> bool:
        """Before this runner ends while other runners' trials are in flight (and a relaunch
        ``fits`` in time): watch their heartbeats for two intervals (a live runner beats every
        interval), and while one stays silent (its runner may have died) wait for Optuna's
        heartbeat check to fail it, up to the grace period. True when a trial then awaits its
        retry (``retry_owed``: the loop goes on to make it)."""
        if not self.store.running() or not fits():
            return False
        now = time.monotonic()
        watch_until, deadline = now + 2 * self.heartbeat_s + 1, now + self.grace_s + 2 * self.heartbeat_s + 1
        said: set[int] = set()
        while True:
            self.store.fail_stale()
            if retry_owed():
                return True
            silent = self.store.silent_running(2 * self.heartbeat_s)
            now = time.monotonic()
            if (not silent and now > watch_until) or now > deadline or not self.store.running():
                return False
            if set(silent) - said:
                said |= set(silent)
                self.log(f"trial{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))}: no heartbeat "
                         f"for over {2 * self.heartbeat_s} s; waiting up to the {self.grace_s} s grace period "
                         "to retry it here if its runner died")
            time.sleep(min(self.heartbeat_s, 5))
