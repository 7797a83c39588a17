"""Whether a study's night is running, ended or was interrupted, read from its storage (any
host) and this host's runner files.

A night is *running* while one of its runners lives: a RUNNING trial whose heartbeat is fresh
(RDB storages: no older than two heartbeat intervals, the rule by which a runner calls another
one silent, :meth:`tuner.sweep.runners.Runners.await_silent`), a RUNNING trial whose runner is a
live process of this host (the journal storage has no heartbeat), or a runner file of this
host whose lock a live process holds (:func:`tuner.study.inflight.live_runners`, between two
trials too). Otherwise it *ended* when its last sweep wrote why it stopped
(:attr:`tuner.record.StudyInfo.stop_reason`, emptied when a sweep starts), and was
*interrupted* when that reason is a signal (SIGHUP, SIGINT, SIGTERM: the server torn down, the
night resumable), when no reason was written (the runner was killed or crashed), or when a
trial is still RUNNING without a live runner.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from tuner.record import Status, TrialRecord
from tuner.server import HANDLED
from tuner.study.inflight import live_runners, runner_alive
from tuner.study.storage import StudyStore

__all__ = ["NightState", "StudyState", "study_state"]

#: The stop reasons an interrupted sweep writes (:class:`tuner.errors.Interrupted`: the signal's name).
SIGNAL_NAMES = frozenset(signal.Signals(s).name for s in HANDLED)


class NightState(StrEnum):
    """A study's night, as :func:`study_state` reads it."""

    RUNNING = "running"
    ENDED = "ended"
    INTERRUPTED = "interrupted"
    EMPTY = "not started"  #: no relaunch recorded yet, and no live runner


@dataclass(frozen=True)
class StudyState:
    """``state``; ``why``: one sentence of what it rests on; ``in_flight``: the trial numbers
    live runners are relaunching now (oldest first); ``ages``: seconds since each in-flight
    trial's last heartbeat (RDB storages only)."""

    state: NightState
    why: str
    in_flight: tuple[int, ...] = ()
    ages: dict[int, float] = field(default_factory=dict)


def study_state(store: StudyStore, study_dir: Path | None = None,
                records: list[TrialRecord] | None = None) -> StudyState:
    """The night of ``store`` (see the module docstring); ``study_dir``: the folder holding this
    host's runner files (``results/<study>/``), None when not known (then only heartbeats and
    this host's runner pids are read); ``records``: the study's records when already read
    (:meth:`StudyStore.records` with ``relaunched_only=False``). Raises what the storage raises."""
    recs = store.records(relaunched_only=False) if records is None else records
    running = {rec.trial: rec for _, rec in store.running()}
    ages = store.heartbeat_ages()
    interval = store.heartbeat_interval()
    fresh = {n: a for n, a in (ages or {}).items() if interval is not None and a <= 2 * interval}
    alive = sorted(n for n, rec in running.items() if n in fresh or (rec.runner and runner_alive(rec.runner)))
    runners = live_runners(study_dir) if study_dir is not None else []
    if alive or runners:
        if alive:
            beat = [f"{fresh[n]:.0f} s ago" for n in alive if n in fresh]
            who = ", ".join(sorted({running[n].runner for n in alive if running[n].runner})) or "a runner"
            why = (f"trial{'s' if len(alive) > 1 else ''} {', '.join(map(str, alive))} in flight on {who}"
                   + (f" (last heartbeat {beat[0]})" if beat else ""))
        else:
            why = f"runner {runners[0].get('runner', '?')} is alive between two trials"
        return StudyState(NightState.RUNNING, why, tuple(alive), {n: fresh[n] for n in alive if n in fresh})
    relaunched = [r for r in recs if r.kind.relaunched]
    reason = store.info().stop_reason
    if running:
        n = min(running)
        return StudyState(NightState.INTERRUPTED, f"trial {n} is still marked running but its runner "
                          f"({running[n].runner or '?'}) sends no heartbeat and is not alive here")
    if not relaunched:
        return StudyState(NightState.EMPTY, "no relaunch recorded yet" + (f"; the last sweep stopped: {reason}"
                                                                          if reason else ""))
    if reason in SIGNAL_NAMES:
        return StudyState(NightState.INTERRUPTED, f"the last sweep was stopped by {reason}; run it again to resume")
    if not reason:
        last = max(relaunched, key=lambda r: r.trial)
        cut = (f"; trial {last.trial} was left {last.status}" if last.status in (Status.INTERRUPTED, Status.RUNNING)
               else "")
        return StudyState(NightState.INTERRUPTED, "the last sweep wrote no end mark (killed, or it crashed)" + cut)
    return StudyState(NightState.ENDED, reason)
