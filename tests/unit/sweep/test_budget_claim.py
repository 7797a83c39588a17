"""Two runners of one study take the last slot of the budget one after the other (the
three-worker night that made 11 relaunches of 10): the one whose trial was asked first and
found within the budget stores its claim at once, so the other counts it and stops, without
waiting for the first one's launch to begin (tuner.sweep.runners.Runners.over_budget)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tuner.record import Kind, Status, TrialRecord
from tuner.study import RunnerFile
from tuner.study.storage import StudyStore, open_study
from tuner.sweep import runners as runners_module
from tuner.sweep.runners import Runners

CHOICES = {"NCCL_PROTO": ("unset", "LL", "Simple")}


def _runners(url: str, folder: Path, grace_s: int = 5) -> tuple[StudyStore, Runners]:
    store = StudyStore(open_study("s", url, heartbeat_interval_s=1, grace_period_s=grace_s), CHOICES)
    return store, Runners(store, RunnerFile(folder, 8000), "vm", heartbeat_s=1, grace_s=grace_s, log=lambda _: None)


def _spend(store: StudyStore, n: int) -> None:
    """``n`` finished relaunches (the budget counts them)."""
    for _ in range(n):
        trial, _, rec = store.ask_fixed(store.params_of({}), TrialRecord(trial=-1, kind=Kind.PRESET))
        store.start(trial, TrialRecord(trial=rec.trial, kind=Kind.PRESET, status=Status.OK))


def test_the_last_slot_is_taken_once_and_the_second_runner_does_not_wait(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/study.db"
    a_store, a = _runners(url, tmp_path / "a")
    b_store, b = _runners(url, tmp_path / "b")
    _spend(a_store, 9)
    final = TrialRecord(trial=-1, kind=Kind.BASELINE, recheck=True)
    ta, _, ra = a_store.ask_fixed(a_store.params_of({}), final)
    tb, _, rb = b_store.ask_fixed(b_store.params_of({}), final)
    assert not a.over_budget(ta, 10, ra)  # the earlier trial: within the budget, and claimed now
    claimed = next(r for r in b_store.records() if r.trial == ta.number)
    assert (claimed.kind, claimed.recheck, claimed.status) == (Kind.BASELINE, True, Status.RUNNING)
    def no_wait(_s: float) -> None:
        raise AssertionError("over_budget waited for a trial whose claim is stored")
    # the later one counts the claim: over, without a single wait (no clock read: CI's cores may be busy)
    monkeypatch.setattr(runners_module, "time", SimpleNamespace(monotonic=time.monotonic, sleep=no_wait))
    assert b.over_budget(tb, 10, rb)
    monkeypatch.undo()
    assert not any(r.trial == tb.number for r in b_store.records())  # nothing stored for the refused one


@pytest.mark.postgres
def test_an_unclaimed_trial_is_waited_for_while_its_runner_beats_and_not_once_it_stops(pg_url, tmp_path, monkeypatch):
    """Past the first wait, an earlier trial asked but not claimed still holds the last slot while its
    runner beats (a runner starved of CPU, alive): the later runner waits and is refused once it is
    claimed. A trial whose runner stopped beating (it died before claiming) holds nothing after the
    grace period: the later runner then takes the slot."""
    monkeypatch.setattr(runners_module, "UNDECIDED_WAIT_S", 0.3)
    # the live part under a grace no starved thread outlasts, the dead part under a 2 s one: neither reads a clock
    a_store, _ = _runners(pg_url, tmp_path / "a", grace_s=3600)
    b_store, b = _runners(pg_url, tmp_path / "b", grace_s=3600)
    _spend(a_store, 9)
    final = TrialRecord(trial=-1, kind=Kind.BASELINE, recheck=True)

    ta, _, ra = a_store.ask_fixed(a_store.params_of({}), final)  # alive: beats, claims after 3 s

    claiming = threading.Event()

    def slow_claim() -> None:
        for _ in range(6):
            time.sleep(0.5)
            a_store.beat(ta)
        claiming.set()
        a_store.start(ta, TrialRecord(trial=ra.trial, kind=Kind.BASELINE, recheck=True))
    thread = threading.Thread(target=slow_claim)
    thread.start()
    tb, _, rb = b_store.ask_fixed(b_store.params_of({}), final)
    # waited past its first 0.3 s for the live runner (before: it went on and took the slot too)
    assert b.over_budget(tb, 10, rb)
    assert claiming.is_set()
    thread.join()
    b_store.drop(tb, "spent")

    dead_store = _runners(pg_url, tmp_path / "c", grace_s=2)[0]
    b = _runners(pg_url, tmp_path / "b2", grace_s=2)[1]
    td, _, _ = dead_store.ask_fixed(dead_store.params_of({}), final)  # its runner dies before claiming
    tc, _, rc = b_store.ask_fixed(b_store.params_of({}), final)
    assert td.number < tc.number
    # 10 spent and the dead runner's trial would be the 11th: it holds the last slot until its heartbeat is
    # older than the grace period, then the slot is this runner's
    assert not b.over_budget(tc, 11, rc)
    ages = b_store.heartbeat_ages()
    assert ages is not None and ages[td.number] > 2
