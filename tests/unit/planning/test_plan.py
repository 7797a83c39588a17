"""Planning against a real Optuna study in memory: retries first and once, presets in order,
never a set twice, sets in flight skipped, duplicates and invalid sets never launched."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from tuner.inputs.space import load_space
from tuner.planning.plan import Planner, flag_params, split_params
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.study.storage import StudyStore

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_MAX_NCHANNELS]
values = [4, 8]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


@pytest.fixture
def store(tmp_path: Path) -> StudyStore:
    (tmp_path / "space.toml").write_text(SPACE)
    space = load_space(tmp_path / "space.toml")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    s = StudyStore(study, space.choices())
    s.space = space  # type: ignore[attr-defined]
    return s


def planner(store: StudyStore, problems=lambda env: []) -> Planner:
    return Planner(store.space, "search", records=store.records,  # type: ignore[attr-defined]
                   busy_keys=lambda: {TrialRecord(trial=0, kind=Kind.SEARCH, env=split_params(p)[0]).set_key
                                      for p in store.pending_params()},
                   problems=problems)


def run(store: StudyStore, env: dict[str, str], kind: Kind, status: Status = Status.OK, *,
        retry_of: int | None = None, started_at: float = 0.0) -> TrialRecord:
    """Take one trial through the store as the sweep does (enqueue, ask, start, finish)."""
    store.enqueue(store.params_of(env), TrialRecord(trial=-1, kind=kind, retry_of_trial=retry_of))
    trial, params, rec = store.ask()
    assert split_params(params)[0] == env
    rec.env, rec.status, rec.started_at = env, Status.RUNNING, started_at
    store.start(trial, rec)
    if status is Status.INTERRUPTED:
        store.abandon(trial, replace(rec, status=Status.INTERRUPTED))
        return rec
    rec.status = status
    rec.output_tok_s_runs = [70.0, 71.0] if status is Status.OK else []
    rec.output_tok_s = 70.5 if status is Status.OK else None
    store.finish(trial, rec, rec.output_tok_s or 0.0)
    return rec


def test_presets_in_order_then_none(store):
    p = planner(store)
    assert p.next_planned().preset == "ll"
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET)
    nxt = p.next_planned()
    assert (nxt.preset, nxt.env, nxt.kind) == ("simple", {"NCCL_PROTO": "Simple"}, Kind.PRESET)
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.CRASHED)  # a failed set is measured too
    assert p.next_planned() is None


def test_interrupted_trial_is_retried_first_and_only_once(store):
    p = planner(store)
    first = run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.INTERRUPTED)
    retry = p.next_planned()
    assert (retry.env, retry.retry_of, retry.kind) == ({"NCCL_PROTO": "Simple"}, first.trial, Kind.PRESET)
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.INTERRUPTED, retry_of=first.trial)
    # The retry died too: given up, and its preset is not tried a third time.
    nxt = p.next_planned()
    assert nxt.preset == "ll" and nxt.retry_of is None
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET)
    assert p.next_planned() is None


def test_interrupted_baseline_is_not_planned(store):
    run(store, {}, Kind.BASELINE, Status.INTERRUPTED)
    assert planner(store).next_planned().preset == "ll"


def test_set_in_flight_is_not_planned(store):
    store.enqueue(store.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    assert planner(store).next_planned().preset == "simple"


def test_judge_duplicates_baseline_and_invalid(store):
    base = run(store, {}, Kind.BASELINE)
    measured = run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET)
    p = planner(store, problems=lambda env: ["MIN above MAX"] if env.get("NCCL_MAX_NCHANNELS") == "4" else [])
    assert p.judge({"NCCL_PROTO": "LL"}, [], baseline=base).duplicate_of.trial == measured.trial
    assert p.judge({}, [], baseline=base).duplicate_of.trial == base.trial
    assert p.judge({"NCCL_MAX_NCHANNELS": "4"}, [], baseline=base).invalid_reason == "MIN above MAX"
    assert p.judge({"NCCL_PROTO": "Simple"}, [], baseline=base).launch


def test_flags_round_trip():
    params = {"NCCL_PROTO": "LL", "--disable-custom-all-reduce": "on", "--max-num-seqs": "4", "X": "unset"}
    env, flags = split_params(params)
    assert env == {"NCCL_PROTO": "LL"}
    assert flags == ["--disable-custom-all-reduce", "--max-num-seqs", "4"]
    assert flag_params(flags) == {"--disable-custom-all-reduce": "on", "--max-num-seqs": "4"}


def test_the_screens_best_come_before_the_presets(store):
    from tuner.planning.plan import Planned

    p = planner(store)
    p.extra = [Planned({"NCCL_MAX_NCHANNELS": "8"}, [], Kind.PRESET, "screen-1"),
               Planned({"NCCL_PROTO": "LL"}, [], Kind.PRESET, "screen-2")]
    assert p.next_planned().preset == "screen-1"
    run(store, {"NCCL_MAX_NCHANNELS": "8"}, Kind.PRESET)
    assert p.next_planned().preset == "screen-2"
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET)
    assert p.next_planned().preset == "simple"  # the preset "ll" is the same set as screen-2: not twice


def test_a_set_the_screen_forbids_is_never_launched(store):
    base = run(store, {}, Kind.BASELINE)
    p = planner(store)
    p.screen_check = lambda env: "wrong values" if env.get("NCCL_PROTO") == "Simple" else None
    decision = p.judge({"NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "8"}, [], baseline=base)
    assert not decision.launch and decision.invalid_reason == "wrong values"
    assert p.judge({"NCCL_PROTO": "LL"}, [], baseline=base).launch
