"""The screen stage against the independent all_reduce_perf stand-in and a real SQLite study:
untuned first and last, every run recorded, the corruption guard, resume, small spaces,
hangs, rejected sets, the bound and its stop check, the tuner-plugin export."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest

from tests.helpers import ROOT, standin_command
from tuner.errors import StoppedByCheck
from tuner.inputs.config import load_config
from tuner.inputs.space import load_space
from tuner.planning import ScreenedSet
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.screen import run_stage, screen_key
from tuner.screen.store import CHECK, FIRST, INVALID, LAST, SEARCH, ScreenStore, known_bad
from tuner.study.storage import CONSTRAINT, StudyStore, default_storage, open_study

PY = sys.executable
SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring", "Tree"]
[variables.CUDA_DEVICE_MAX_CONNECTIONS]
values = [1]
"""
LANDSCAPE = {"ENVRATE_AR_US": "40", "ENVRATE_AR_PER_TOKEN": "100", "ENVRATE_COMPUTE_MS": "2",
             "ENVRATE_AR_EFFECTS": json.dumps({"NCCL_PROTO=LL": 0.7, "NCCL_PROTO=Simple": 1.5, "NCCL_ALGO=Ring": 0.9,
                                               "NCCL_ALGO=Tree": 0.5}),
             "ENVRATE_AR_WRONG": json.dumps(["NCCL_ALGO=Tree"])}


@pytest.fixture(autouse=True)
def few_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer proposals of an already screened set before the loop enumerates what is left (each
    one is told to the study, ~15 SQLite commits): these spaces are tiny, and how many skips it
    takes is not the subject; that the loop then enumerates and ends is."""
    monkeypatch.setattr("tuner.screen.loop.MAX_SKIPS", 4)


def setup(tmp_path: Path, *, trials: int = 8, top_k: int = 2, landscape: dict[str, str] | None = None,
          space: str = SPACE, timeout_s: float = 20):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "space.toml").write_text(space)
    env = ", ".join(f"{k} = '{v}'" for k, v in (landscape or LANDSCAPE).items())
    cmd = ", ".join(f'"{a}"' for a in standin_command())
    model = ROOT / "tests" / "fixtures" / "model_configs" / "llama-3.3-70b-instruct.config.json"
    (tmp_path / "exp.toml").write_text(f"""
[server]
command = ["{PY}", "--port", "{{port}}"]
env = {{ {env} }}
[sweep]
space = "{tmp_path / 'space.toml'}"
[screen]
command = [{cmd}]
sizes = [14336, 1835008]
trials = {trials}
top_k = {top_k}
timeout_s = {timeout_s}
[model]
config = "{model}"
allreduces_per_token = 100
""")
    cfg = load_config(tmp_path / "exp.toml")
    sp = load_space(tmp_path / "space.toml")
    study_dir = tmp_path / "r" / "s"
    study_dir.mkdir(parents=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = StudyStore(open_study("s", default_storage(study_dir), seed=3), sp.choices())
    return cfg, sp, store, study_dir


def baseline(tpot_s: float = 0.006, backend: str = "") -> TrialRecord:
    return TrialRecord(trial=0, kind=Kind.BASELINE, status=Status.OK, tpot_s=tpot_s, output_tok_s=1 / tpot_s,
                       allreduce_backend=backend, nccl_version="2.27.5")


def stage_of(cfg, sp, store, study_dir, lines: list[str] | None = None, **kw):
    out = [] if lines is None else lines
    return run_stage(cfg, sp, store, baseline=kw.pop("base", baseline()), study_dir=study_dir, log=out.append,
                     seed=3, **kw)


def test_untuned_first_and_last_every_run_recorded_and_the_best_planned_first(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path)
    lines: list[str] = []
    stage = stage_of(cfg, sp, store, study_dir, lines)
    runs = [r for r in stage.records if r.ran]
    assert len(runs) == 8 and runs[0].role == FIRST and runs[-1].role == LAST
    assert all(r.role == SEARCH for r in runs[1:-1])
    # every screened set is a point of the screened variables only (CDMC cannot be screened)
    assert not any("CUDA_DEVICE_MAX_CONNECTIONS" in r.env for r in stage.records)
    assert any("CUDA_DEVICE_MAX_CONNECTIONS not screened" in line for line in lines)
    screen = pd.read_csv(study_dir / "screen.csv")
    assert list(screen.columns[:11]) == ["run", "role", "set", "size", "time_us_oop", "time_us_ip", "algbw_GBps",
                                         "busbw_GBps", "wrong", "status", "cause"]
    assert screen["run"].nunique() == 8 and set(screen["size"].dropna().astype(int)) >= {14336, 1835008}
    for r in runs:
        assert Path(r.log).name == f"{r.number:04d}.log" and Path(r.log).parent == study_dir / "screen"
    # the fastest screened sets come first, each faster than the untuned set, none with wrong values
    assert [p.name for p in stage.top_sets] == ["screen-1", "screen-2"][:len(stage.top_sets)]
    assert stage.top_sets and stage.top_sets[0].env.get("NCCL_PROTO") == "LL"
    assert all(p.env.get("NCCL_ALGO") != "Tree" for p in stage.top_sets)
    assert all(isinstance(p, ScreenedSet) for p in stage.top_sets)  # (name, env) pairs for the planner
    # the bound: 100 x 40 us of a 6 ms TPOT
    assert stage.bound is not None and stage.bound.allreduce_share == pytest.approx(4.0 / 6.0, rel=0.05)
    bound_line = next(line for line in lines if line.startswith("bound: NCCL tuning can gain at most"))
    assert "the best screened set predicts +" in bound_line
    info = store.info().screen
    assert info is not None and info.bound is not None
    assert info.decode_bytes == 14336 and info.runs == 8 and info.bound.reliable
    assert info.ranking[0].env == stage.top_sets[0].env


def test_wrong_values_are_infeasible_never_planned_and_known_to_the_main_study(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=5, space='[variables.NCCL_ALGO]\nvalues = ["Ring", "Tree"]\n'
                                                                '[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    stage = stage_of(cfg, sp, store, study_dir)
    tree = [r for r in stage.records if r.ran and r.env.get("NCCL_ALGO") == "Tree"]
    assert tree and all(r.status is Status.INVALID_OUTPUT for r in tree)
    sstore = ScreenStore(store, {})
    for r in tree:
        assert sstore.value_of(r.number)[1] == 1.0  # told infeasible
    bad = known_bad(store)
    assert set(bad) == {r.key for r in tree} and all("wrong values" in c for c in bad.values())
    assert stage.check({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}) is not None
    assert stage.check({"NCCL_ALGO": "Ring"}) is None
    assert not any(p.env.get("NCCL_ALGO") == "Tree" for p in stage.top_sets)
    assert "Tree" not in (study_dir / "nccl_tuner.conf").read_text().split("#")[-1]


def test_a_small_space_is_screened_whole_once_and_a_resume_adds_nothing(tmp_path):
    small = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n'
    cfg, sp, store, study_dir = setup(tmp_path, trials=6, space=small)  # more runs than the space has
    stage = stage_of(cfg, sp, store, study_dir)
    runs = [r for r in stage.records if r.ran]
    keys = [r.key for r in runs if r.role == SEARCH]
    assert sorted(keys) == sorted({'{"NCCL_PROTO":"LL"}', '{"NCCL_PROTO":"Simple"}'})
    assert stage.ended == "every screened set was measured (or is rejected by NCCL)"
    again = stage_of(cfg, sp, store, study_dir)
    assert [r.number for r in again.records if r.ran] == [r.number for r in runs]


def test_a_resume_continues_the_same_screen_study(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=4)
    first = stage_of(cfg, sp, store, study_dir)
    assert sum(r.ran for r in first.records) == 4
    more = dataclasses.replace(cfg, screen=cfg.screen.model_copy(update={"trials": 6}))
    second = stage_of(more, sp, store, study_dir)
    roles = [r.role for r in second.records if r.ran]
    # two more searched sets, then the untuned set again: it closes the screen, also on a resume
    assert roles == [FIRST, SEARCH, SEARCH, LAST, SEARCH, SEARCH, LAST]


def test_a_hanging_set_is_a_timeout_result_and_nothing_of_it_is_left(tmp_path):
    hang = {**LANDSCAPE, "ENVRATE_AR_HANG": json.dumps(["NCCL_PROTO=Simple"])}
    small = '[variables.NCCL_PROTO]\nvalues = ["Simple"]\n'
    cfg, sp, store, study_dir = setup(tmp_path, trials=3, space=small, landscape=hang, timeout_s=1.5)
    stage = stage_of(cfg, sp, store, study_dir)
    hung = [r for r in stage.records if r.ran and r.env == {"NCCL_PROTO": "Simple"}]
    assert hung and hung[0].status is Status.TIMEOUT and "killed at the screen timeout" in hung[0].cause
    # only the hanging set waited for its timeout: the untuned runs ended by their own exit
    untuned = [r for r in stage.records if r.ran and r.role in (FIRST, LAST)]
    assert untuned and all("] exit status 0;" in Path(r.log).read_text() for r in untuned)
    assert stage.top_sets == []
    assert "killed at the timeout of 1.5 s; 0 process(es) survived" in Path(hung[0].log).read_text()


def test_sets_nccl_would_reject_are_told_infeasible_without_running(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=6)
    stage = stage_of(cfg, sp, store, study_dir,
                     problems=lambda env: ["Tree is refused here"] if env.get("NCCL_ALGO") == "Tree" else [])
    assert not any(r.ran and r.env.get("NCCL_ALGO") == "Tree" for r in stage.records)
    rejected = [r for r in stage.records if r.role == INVALID]
    assert rejected and all(r.cause == "Tree is refused here" for r in rejected)
    for r in rejected:
        assert ScreenStore(store, {}).study.get_trials()[r.number].constraints[CONSTRAINT] == 1.0


def test_a_bound_below_the_noise_stops_unless_forced(tmp_path):
    tiny = {**LANDSCAPE, "ENVRATE_AR_US": "0.5", "ENVRATE_AR_WRONG": "[]"}
    cfg, sp, store, study_dir = setup(tmp_path, trials=3, landscape=tiny)
    with pytest.raises(StoppedByCheck) as info:
        stage_of(cfg, sp, store, study_dir, base=baseline(tpot_s=0.050))
    assert info.value.exit_code == 5 and "pointless" in str(info.value) and "--force" in str(info.value)
    summary = store.info().screen
    assert summary is not None and summary.bound is not None
    assert summary.bound.max_gain_pct is not None and summary.bound.max_gain_pct < 1.8  # recorded before stopping
    lines: list[str] = []
    stage = stage_of(cfg, sp, store, study_dir, lines, base=baseline(tpot_s=0.050), force=True)
    assert stage.bound is not None and any("--force: relaunching anyway" in line for line in lines)


def test_no_bound_when_nccl_does_not_carry_the_decode_allreduce(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=3)
    lines: list[str] = []
    stage = stage_of(cfg, sp, store, study_dir, lines, base=baseline(backend="custom_allreduce"))
    assert stage.bound is None and "NCCL does not carry the decode allreduce (custom_allreduce)" in stage.bound_note
    assert not any(line.startswith("bound:") for line in lines)
    summary = store.info().screen
    assert summary is not None and summary.bound is None


def test_no_screen_run_starts_past_the_deadline(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=5)
    stage = stage_of(cfg, sp, store, study_dir, deadline=time.time() + 1.0)
    assert not any(r.ran for r in stage.records)
    assert "would not fit" in stage.ended and stage.bound is None


def test_the_tuner_plugin_export_picks_the_fastest_per_size(tmp_path):
    # LL fastest at the decode size, Simple at the large one (its bandwidth part is cheaper)
    land = {**LANDSCAPE, "ENVRATE_AR_WRONG": "[]", "ENVRATE_AR_EFFECTS": json.dumps({"NCCL_PROTO=LL": 0.5}),
            "ENVRATE_AR_LARGE_EFFECTS": json.dumps({"NCCL_PROTO=LL": 3.0, "NCCL_PROTO=Simple": 0.5})}
    space = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n[variables.NCCL_ALGO]\nvalues = ["Ring"]\n'
    cfg, sp, store, study_dir = setup(tmp_path, trials=5, landscape=land, space=space)
    stage = stage_of(cfg, sp, store, study_dir)
    lines = [line for line in (study_dir / "nccl_tuner.conf").read_text().splitlines() if not line.startswith("#")]
    assert lines[0].startswith("allreduce,0,") and ",ring,ll," in lines[0]
    assert lines[-1].endswith(",ring,simple,-1,-1,8,-1,-1") and ",18446744073709551615," in lines[-1]
    assert stage.export.compatibility.startswith("NCCL 2.27.5 loads tuner API v4")
    perf = pd.read_csv(study_dir / "tuner_perf.csv")
    assert set(perf["protocol"]) == {"ll", "simple"} and (perf["ranks"] == 8).all()
    assert any("one channel" in n for n in stage.export.notes)



def test_a_set_never_screened_is_screened_once_before_its_relaunch(tmp_path):
    cfg, sp, store, study_dir = setup(tmp_path, trials=3)
    stage = stage_of(cfg, sp, store, study_dir)
    screened = {r.key for r in stage.records if r.ran}
    bad_env = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    good_env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert screen_key(bad_env) not in screened and screen_key(good_env) not in screened
    assert "wrong values" in stage.check(bad_env)
    assert stage.check(good_env) is None
    checks = [r for r in ScreenStore(store, {}).records() if r.role == CHECK]
    assert [r.env for r in checks] == [{"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}, good_env]
    assert stage.check(bad_env) is not None and stage.check(good_env) is None  # not screened twice
    assert len([r for r in ScreenStore(store, {}).records() if r.role == CHECK]) == 2
    assert set(pd.read_csv(study_dir / "screen.csv")["role"]) >= {CHECK}
    assert screen_key(bad_env) in known_bad(store) and screen_key(bad_env) in store.info().screen.bad_sets


def test_a_failed_untuned_run_stops_the_screen_and_a_broken_benchmark_stops_it_soon(tmp_path):
    everything = {**LANDSCAPE, "ENVRATE_AR_HANG": json.dumps(["ENVRATE_AR_US=40"])}
    cfg, sp, store, study_dir = setup(tmp_path, trials=10, landscape=everything, timeout_s=0.5)
    stage = stage_of(cfg, sp, store, study_dir)
    assert [r.role for r in stage.records if r.ran] == [FIRST]
    assert stage.ended.startswith("the untuned screen run failed (timeout") and stage.bound is None
    sets = {**LANDSCAPE, "ENVRATE_AR_HANG": json.dumps(["NCCL_PROTO=LL", "NCCL_PROTO=Simple", "NCCL_ALGO=Ring",
                                                         "NCCL_ALGO=Tree"])}
    cfg, sp, store, study_dir = setup(tmp_path / "b", trials=20, landscape=sets, timeout_s=0.5)
    stage = stage_of(cfg, sp, store, study_dir)
    assert [r.role for r in stage.records if r.ran] == [FIRST, *[SEARCH] * 5, LAST]
    assert stage.ended.startswith("5 screen runs in a row failed")
