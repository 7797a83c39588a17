"""Two runners of one study take the last slot of the budget one after the other (the
three-worker night that made 11 relaunches of 10): the one whose trial was asked first and
found within the budget stores its claim at once, so the other counts it and stops, without
waiting for the first one's launch to begin (tuner.sweep.runners.Runners.over_budget)."""

from __future__ import annotations

import time
from pathlib import Path

from tuner.record import Kind, Status, TrialRecord
from tuner.study import RunnerFile
from tuner.study.storage import StudyStore, open_study
from tuner.sweep.runners import UNDECIDED_WAIT_S, Runners

CHOICES = {"NCCL_PROTO": ("unset", "LL", "Simple")}


def _runners(url: str, folder: Path) -> tuple[StudyStore, Runners]:
    store = StudyStore(open_study("s", url), CHOICES)
    return store, Runners(store, RunnerFile(folder, 8000), "vm", heartbeat_s=1, grace_s=5, log=lambda _: None)


def _spend(store: StudyStore, n: int) -> None:
    """``n`` finished relaunches (the budget counts them)."""
    for _ in range(n):
        trial, _, rec = store.ask_fixed(store.params_of({}), TrialRecord(trial=-1, kind=Kind.PRESET))
        store.start(trial, TrialRecord(trial=rec.trial, kind=Kind.PRESET, status=Status.OK))


def test_the_last_slot_is_taken_once_and_the_second_runner_does_not_wait(tmp_path):
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
    started = time.monotonic()
    assert b.over_budget(tb, 10, rb)  # the later one counts the claim: over, at once
    assert time.monotonic() - started < UNDECIDED_WAIT_S / 2
    assert not any(r.trial == tb.number for r in b_store.records())  # nothing stored for the refused one
