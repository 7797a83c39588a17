"""A set is blamed only when the baseline stands: case 30 (a GPU's memory freed late by the
driver) and the machine-fault protocol around it (tuner/server/machine.py, tuner/sweep/trial.py
``relaunch``, tuner/sweep/runner.py ``Sweep._baseline_check``).

A launch that fails the machine's way is waited after and relaunched once; a second failure
relaunches the untuned baseline: it runs, the failures are the set's (``crashed``, both causes);
it fails too, the night ends with exit 8 and the same command resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from tests.e2e.test_cases import case_config, sweep
from tests.helpers import ROOT, write_config
from tuner.errors import ExitCode

SERVER = ROOT / "tests" / "servers" / "machine_server.py"


def test_30_memory_freed_late_is_waited_for_not_blamed_on_the_set(tmp_path):
    # RUN.txt's command: the file's budget (3: the baseline and two sets), no checks
    res, df = sweep(tmp_path, case_config(tmp_path, "30-gpu-memory-release-lag"), "--no-final-baseline", "--force",
                    "--trials", "3")
    assert res.returncode == 0, res.stderr
    assert list(df["status"]) == ["ok", "ok", "ok"], df[["status", "cause"]]
    assert list(df["preset"].fillna("")) == ["", "deployment-tuned", "ll"]
    # about 81 tok/s each, measured; a busy machine only slows the fake, so no lower bound
    assert ((df["output_tok_s"] > 0) & (df["output_tok_s"] < 100)).all(), df["output_tok_s"]
    # the first set's first launch met the memory guard and was relaunched; the second set waited as long
    # after the last exit as the first needed (learned) and launched once
    assert list(df["launches"]) == [1, 2, 1]
    assert "Free memory on device" in res.stderr and "not yet the set's fault" in res.stderr
    assert "could be judged" not in res.stdout and "crashed" not in res.stdout  # both sets judged on speed


@pytest.fixture
def quick_backoff(monkeypatch):
    """These fakes heal when told, not with time: the back-off need not be waited in full."""
    monkeypatch.setattr("tuner.sweep.trial.MACHINE_BACKOFF_S", 0.2)


def _night(tmp_path: Path, **state: str) -> tuple[Path, Path]:
    """A config running machine_server.py with one preset (NCCL_PROTO=LL), and its state folder."""
    folder = tmp_path / "state"
    folder.mkdir()
    for name, text in state.items():
        (folder / name).write_text(text)
    space = tmp_path / "space.toml"
    space.write_text('[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n')
    config = write_config(tmp_path / "sweep.toml", command=[sys.executable, str(SERVER), "{port}", str(folder)],
                          space=space, trials=4, max_tokens=24, repeats=2, extra_sweep='mode = "presets"')
    return config, folder


def _records(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name="case", storage=f"sqlite:///{tmp_path / 'r' / 'case' / 'study.db'}")
    return study.get_trials(deepcopy=False)


def test_a_machine_failure_the_baseline_shares_ends_the_night_and_resumes(tmp_path, quick_backoff):
    config, folder = _night(tmp_path, fail_from="2")  # the baseline runs; every later launch meets the guard
    args = ("--no-final-baseline", "--trials", "2")
    res, df = sweep(tmp_path, config, *args)
    assert res.returncode == ExitCode.MACHINE_FAULT, res.stderr
    assert list(df["status"]) == ["ok", "machine_fault", "machine_fault"], df[["status", "cause"]]
    assert list(df["kind"]) == ["baseline", "preset", "baseline"]
    assert "Free memory on device" in df.loc[1, "cause"] and "failed too" in df.loc[1, "cause"]
    assert "it is the machine's, not the set's" in res.stderr and "run the same command again" in res.stderr
    assert "Fix the server command" not in res.stderr
    trials = _records(tmp_path)
    # never told to the sampler as the set's failure: no value, no violated constraint
    assert trials[1].state is optuna.trial.TrialState.FAIL and trials[1].value is None
    (folder / "healed").write_text("")
    res, df = sweep(tmp_path, config, *args)
    assert res.returncode == 0, res.stderr
    ll = df[(df["preset"] == "ll") & (df["status"] == "ok")]
    assert len(ll) == 1, df[["preset", "status", "cause"]]  # the resume relaunched the set and measured it


def test_a_baseline_that_fails_the_machines_way_ends_with_the_machine_exit_and_resumes(tmp_path, quick_backoff):
    config, folder = _night(tmp_path, fail_from="1")
    res, df = sweep(tmp_path, config, "--no-final-baseline", "--trials", "2")
    assert res.returncode == ExitCode.MACHINE_FAULT, res.stderr
    assert list(df["status"]) == ["machine_fault"] and df.loc[0, "launches"] == 2
    assert "failed twice in a way that is not a set's" in res.stderr and "the study resumes" in res.stderr
    assert "Free memory on device" in res.stderr
    (folder / "healed").write_text("")
    res, df = sweep(tmp_path, config, "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert list(df["status"]) == ["machine_fault", "ok", "ok"], df[["status", "cause"]]  # a machine_fault takes no slot


def test_a_set_that_fails_while_the_baseline_runs_is_the_sets_with_both_causes(tmp_path, quick_backoff):
    config, _ = _night(tmp_path, set_crashes="")  # no NCCL line before it: machine-suspect until the baseline runs
    res, df = sweep(tmp_path, config, "--no-final-baseline", "--trials", "3")
    assert res.returncode == 0, res.stderr
    assert list(df["kind"]) == ["baseline", "preset", "baseline"]
    assert list(df["status"]) == ["ok", "crashed", "ok"], df[["status", "cause"]]
    cause = df.loc[1, "cause"]
    assert cause.count("could not be read under this set") == 2, cause  # both launches' causes
    assert "(trial 2) ran at" in cause and "the failures are the set's" in cause
    assert bool(df.loc[2, "recheck"])  # the check's baseline is a re-measure, judged with the rest
    trials = _records(tmp_path)
    assert trials[1].state is optuna.trial.TrialState.COMPLETE and list(trials[1].constraints.values()) == [1.0]  # told as the set's


def test_a_lag_longer_than_the_first_waits_is_learned_not_blamed_on_the_set(tmp_path, monkeypatch):
    """The machine frees a server's memory 5 s after it exits: the set fails after the first
    back-off (2 s), the baseline check waits longer (4 s) and runs, so the set is relaunched as
    late after the last exit as the baseline needed, and measured: never blamed on the set."""
    monkeypatch.setattr("tuner.sweep.trial.MACHINE_BACKOFF_S", 2.0)
    config, _folder = _night(tmp_path, lag_s="5")
    res, df = sweep(tmp_path, config, "--no-final-baseline", "--trials", "3")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}, list(df["cause"])  # never blamed on the set, whatever the timing
    assert df.loc[1, "output_tok_s"] > 0
    if list(df["kind"]) == ["baseline", "preset"]:
        # a machine so busy that the 5 s had passed by the set's launch or its first back-off:
        # measured at its first or second launch, nothing left to learn
        assert df.loc[1, "launches"] in (1, 2)
        return
    assert list(df["kind"]) == ["baseline", "preset", "baseline"]  # the check's baseline is a re-measure
    assert df.loc[1, "launches"] == 3
    assert "waiting" in res.stdout + res.stderr and "after a server's exit" in res.stdout + res.stderr
