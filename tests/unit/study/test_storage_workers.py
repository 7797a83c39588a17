"""Several runners on one study in a real PostgreSQL server (tests/pg.py), at the storage level:
runners opening an empty database at once, a set another runner asked a moment ago seen as in
flight, planned trials no other runner can take, silent runners found and failed by the
heartbeat, the heartbeat settings tests use."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from optuna.trial import TrialState

from tests.helpers import ROOT
from tuner.errors import InputError
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.study.storage import StudyStore, heartbeat_settings, open_study

CHOICES = {"NCCL_PROTO": ("unset", "LL", "Simple"), "NCCL_ALGO": ("unset", "Ring", "Tree"),
           "NCCL_MAX_NCHANNELS": ("unset", "1", "2", "4", "8")}


def _store(url: str, **kwargs) -> StudyStore:
    return StudyStore(open_study("s", url, seed=None, **kwargs), CHOICES)


@pytest.mark.postgres
def test_runners_opening_an_empty_database_at_once_all_start(pg_url: str):
    """Six runners started in the same second on an empty database all create Optuna's tables
    at once (optuna/optuna#1092); each opens the study, none fails."""
    _open_together(pg_url)


def test_runners_opening_an_empty_sqlite_file_at_once_all_start(tmp_path):
    """The same on a new SQLite file, whose loser's words differ ("UNIQUE constraint failed:
    alembic_version.version_num": a ``status`` polling the study.db a sweep had just made failed
    the sweep with exit 2 that way)."""
    _open_together(f"sqlite:///{tmp_path}/study.db")


def _open_together(url: str) -> None:
    code = ("import sys; from tuner.study.storage import open_study; print('ready', flush=True); "
            "sys.stdin.readline(); open_study('s', sys.argv[1]); print('opened')")
    procs = [subprocess.Popen([sys.executable, "-c", code, url], cwd=ROOT, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    for p in procs:  # all have imported Optuna: then they are let go together
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [p.communicate(timeout=120) for p in procs]
    failed = [err[-1500:] for p, (_, err) in zip(procs, results, strict=True) if p.returncode != 0]
    assert not failed, failed[0]
    assert [out.strip() for out, _ in results] == ["opened"] * 6
    assert len(open_study("s", url, create=False).trials) == 0


@pytest.mark.postgres
def test_a_set_asked_a_moment_ago_by_another_runner_is_in_flight(pg_url: str):
    """Runner A asks the sampler for a set; runner B, asking right after, sees A's set among
    the trials before its own (and A does not see B's among those before A's)."""
    a, b = _store(pg_url), _store(pg_url)
    ta, pa, _ = a.ask()
    tb, pb, _ = b.ask()
    assert tb.number > ta.number
    assert pa in b.pending_params() and pb in a.pending_params()
    assert b.pending_params(before=tb.number) == [pa]
    assert a.pending_params(before=ta.number) == []
    # Planned sets are created whole: the other runner sees them at once, its ask cannot take them.
    tc, pc, rec = a.ask_fixed(a.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET, preset="ll"))
    assert rec.trial == tc.number and rec.kind is Kind.PRESET and rec.preset == "ll"
    assert pc in b.pending_params(before=tc.number + 1)
    td, _, _ = b.ask()
    assert td.number != tc.number
    assert b.study.get_trials(deepcopy=False)[tc.number].params == pc


@pytest.mark.postgres
def test_a_set_still_being_written_is_waited_for(pg_url: str):
    """Optuna writes a proposal's parameters one at a time; a runner checking meanwhile waits
    until they are complete rather than read half a set (and gives up on one that never is)."""
    a, b = _store(pg_url), _store(pg_url)
    trial = a.study.ask()  # asked, no parameter written yet

    def suggest_later() -> None:
        time.sleep(0.4)
        for name, values in CHOICES.items():
            trial.suggest_categorical(name, list(values))

    mine = b.study.ask()
    writer = threading.Thread(target=suggest_later)
    writer.start()
    seen = b.pending_params(before=mine.number, settle_s=10)
    writer.join()
    assert seen == [trial.params] and len(seen[0]) == len(CHOICES)
    dead = a.study.ask()  # a runner that died between ask and its first parameter
    t0 = time.monotonic()
    assert b.pending_params(before=dead.number + 1, settle_s=0.5) == [trial.params]
    assert time.monotonic() - t0 >= 0.5


@pytest.mark.postgres
def test_planned_trial_dropped_or_abandoned_before_its_start_holds_no_record(pg_url: str):
    """A planned trial holds its set but no record until it starts: dropped (its set in flight
    elsewhere), it is FAIL with a note and no record, so it is never retried."""
    a = _store(pg_url)
    trial, _, rec = a.ask_fixed(a.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    assert a.records() == [] and a.undecided(trial.number + 1) == 1
    a.drop(trial, "its set is in flight on an earlier trial")
    frozen = a.study.get_trials()[0]
    assert frozen.state == TrialState.FAIL and frozen.user_attrs["not_launched"].startswith("its set")
    assert a.records() == [] and a.undecided(trial.number + 1) == 0
    started, _, rec = a.ask_fixed(a.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    a.start(started, rec)
    assert [(r.trial, r.kind, r.status) for r in a.records()] == [(1, Kind.PRESET, Status.RUNNING)]
    assert a.undecided(started.number + 1) == 0


@pytest.mark.postgres
def test_a_silent_runners_trial_is_found_then_failed_and_reads_interrupted(pg_url: str):
    """A runner that stops beating: its trial is silent after two intervals, failed by the
    other runner's check after the grace period, and reads as interrupted naming the runner."""
    a = _store(pg_url, heartbeat_interval_s=1, grace_period_s=3)
    # a long grace for the "within the grace period" check, a short one to fail it: neither
    # depends on how fast this machine runs the calls in between
    b = _store(pg_url, heartbeat_interval_s=1, grace_period_s=600)
    trial, _, rec = a.ask_fixed(a.params_of({"NCCL_PROTO": "Simple"}), TrialRecord(trial=-1, kind=Kind.SEARCH))
    rec.runner = "host-a:4242"
    beat = time.monotonic()
    a.start(trial, rec)  # first beat at ask_fixed; none after: host A lost power
    time.sleep(2.2)
    assert b.silent_running(2) == [trial.number]
    b.fail_stale()
    assert b.study.get_trials()[0].state == TrialState.RUNNING  # within the grace period
    time.sleep(max(0.0, 3.5 - (time.monotonic() - beat)))
    c = _store(pg_url, heartbeat_interval_s=1, grace_period_s=3)
    c.fail_stale()
    assert c.silent_running(2) == []
    [lost] = c.records()
    assert lost.status is Status.INTERRUPTED and "host-a:4242" in lost.cause


def test_heartbeat_settings_for_tests():
    assert heartbeat_settings({}) == (30, 120)
    assert heartbeat_settings({"NCCL_TUNE_HEARTBEAT_S": "1", "NCCL_TUNE_GRACE_S": "3"}) == (1, 3)
    for bad in ({"NCCL_TUNE_HEARTBEAT_S": "0"}, {"NCCL_TUNE_GRACE_S": "1.5"},
                {"NCCL_TUNE_HEARTBEAT_S": "5", "NCCL_TUNE_GRACE_S": "5"}):
        with pytest.raises(InputError) as err:
            heartbeat_settings(bad)
        assert "NCCL_TUNE_" in str(err.value)
