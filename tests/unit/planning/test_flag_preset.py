"""A preset of server flags (a backend space's, ``"--disable-custom-all-reduce" = "on"``) is
planned as flags, the set its relaunch records, and counts as handled once measured: it is
never planned again (before, the night re-planned it as a duplicate of itself forever)."""

from __future__ import annotations

from pathlib import Path

import optuna

from tuner.inputs.space import load_space
from tuner.planning.entry import Step
from tuner.planning.order import Planner
from tuner.planning.params import flag_params
from tuner.record import Kind, Status, TrialRecord
from tuner.study.storage import StudyStore

SPACE = """
[[presets]]
name = "vllm-custom-allreduce-off"
env = { "--disable-custom-all-reduce" = "on" }
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""


def test_a_flag_preset_is_planned_as_flags_and_once(tmp_path: Path):
    (tmp_path / "space.toml").write_text(SPACE)
    space = load_space(tmp_path / "space.toml")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = StudyStore(optuna.create_study(direction="maximize"), space.choices())
    planner = Planner(space, "presets", records=lambda: store.records(relaunched_only=False),
                      busy_keys=lambda: set(), problems=lambda env: [])
    first = planner.next_planned()
    assert first is not None and (first.step, first.name, first.env, first.flags) == (
        Step.SET, "vllm-custom-allreduce-off", {}, ["--disable-custom-all-reduce"])
    store.enqueue(store.params_of(first.env, flag_params(first.flags)),
                  TrialRecord(trial=-1, kind=Kind.PRESET, preset=first.name))
    trial, _, rec = store.ask()
    rec.flags, rec.status = list(first.flags), Status.RUNNING
    store.start(trial, rec)
    rec.status, rec.output_tok_s_runs, rec.output_tok_s = Status.OK, [70.0, 71.0], 70.5
    store.finish(trial, rec, 70.5)
    after = planner.next_planned()
    assert after is not None and after.name == "ll"
