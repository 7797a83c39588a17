"""The soak gate through the command line, end to end, on the independent env-rate server
(tests/servers/envrate_server.py): a set 50 % faster that hangs after some requests of load
(``ENVRATE_HANG_SET``: its streams stop, /health stays 200, PyTorch's watchdog line is printed)
passes its probe, fails the soak its confirmation launch runs, and is not recommended, the
report saying why; the same night without the fault recommends it after its soak passed. The
soaks here are seconds (``sweep.soak_minutes = 0.1``); ``nccl-tune check`` runs the soak too."""

from __future__ import annotations

import json

import pandas as pd

from tests.helpers import cli, envrate_command, write_config

PRESETS = '[[presets]]\nname = "ring"\nenv = { NCCL_ALGO = "Ring" }\n'
WATCHDOG = "Watchdog caught collective operation timeout"


def _config(tmp_path, space_file, name: str, *, hang: str | None = None, hang_after: int = 12):
    env = {"ENVRATE_EFFECTS": '{"NCCL_ALGO=Ring": 1.5}', "ENVRATE_LOAD_S": "0.1", "ENVRATE_HANG_AFTER": str(hang_after)}
    if hang:
        env["ENVRATE_HANG_SET"] = hang
    server_env = "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"
    return write_config(tmp_path / f"{name}.toml", command=envrate_command(), space=space_file(PRESETS), trials=4,
                        extra_server=server_env, extra_sweep='mode = "presets"\nsoak_minutes = 0.1', max_tokens=60,
                        repeats=3)


def _night(tmp_path, space_file, name: str, **kw):
    cfg = _config(tmp_path, space_file, name, **kw)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", name)
    assert res.returncode == 0, res.stdout + res.stderr
    df = pd.read_csv(tmp_path / "r" / name / "trials.csv")
    return res, df, (tmp_path / "r" / name / "report.md").read_text()


def test_a_fast_set_that_hangs_under_load_is_not_recommended(tmp_path, space_file):
    res, df, report = _night(tmp_path, space_file, "hangs", hang="NCCL_ALGO=Ring")
    confirm = df[df["kind"] == "confirm"].iloc[0]
    assert confirm["status"] == "failed_soak"  # a status of the stored record; its speed was measured
    assert confirm["output_tok_s"] > 0, confirm  # the probe ran before the soak: its figures stay
    assert WATCHDOG in confirm["soak_failure"] and "still 200" in confirm["soak_failure"]
    assert json.loads(confirm["soak_concurrency"]) == [1]
    final = df[(df["kind"] == "baseline")].iloc[-1]
    assert final["soak_s"] > 0 and (pd.isna(final["soak_failure"]) or final["soak_failure"] == "")  # it passed
    assert "Use NCCL_ALGO=Ring" not in res.stdout and "Use NCCL_ALGO=Ring" not in report
    assert "hangs under load" in report and WATCHDOG in report
    first = df[(df["kind"] == "preset")].iloc[0]
    assert pd.isna(first["soak_s"])  # the first-stage launch made no soak


def test_the_same_set_without_the_fault_is_recommended_after_its_soak(tmp_path, space_file):
    _, df, report = _night(tmp_path, space_file, "lasts")
    confirm = df[df["kind"] == "confirm"].iloc[0]
    assert confirm["soak_s"] > 0 and (pd.isna(confirm["soak_failure"]) or confirm["soak_failure"] == "")
    assert confirm["soak_requests"] > 0
    assert "Use NCCL_ALGO=Ring" in report
    assert "It lasted its soak" in report


def test_a_machine_that_hangs_anyway_is_not_blamed_on_the_set(tmp_path, space_file):
    """Every launch hangs under load (the baseline too): the set is not recommended, and the
    report says the machine hangs, not the set."""
    _, df, report = _night(tmp_path, space_file, "machine", hang="ENVRATE_LOAD_S=0.1")
    final = df[(df["kind"] == "baseline")].iloc[-1]
    assert WATCHDOG in final["soak_failure"]
    assert "Use NCCL_ALGO=Ring" not in report
    assert "machine hangs under load" in report and "not to blame" in report


def test_check_runs_the_soak_and_a_set_that_hangs_no_longer_holds(tmp_path, space_file):
    cfg = _config(tmp_path, space_file, "check", hang="NCCL_ALGO=Ring")
    res = cli("check", str(cfg), "--set", "NCCL_ALGO=Ring", "--results", str(tmp_path / "r"), "--study", "chk",
              "--soak", "0.1")
    assert res.returncode == 6, res.stdout + res.stderr
    assert "hangs under load" in res.stdout + res.stderr and WATCHDOG in res.stdout + res.stderr


def test_the_dry_run_shows_the_soak_in_the_plan_and_the_clock(tmp_path, space_file):
    cfg = _config(tmp_path, space_file, "plan")
    res = cli("sweep", str(cfg), "--dry-run", "--soak", "20")
    assert res.returncode == 0, res.stderr
    assert "Soak: 20 min at concurrency 1 after each confirmation's probe" in res.stdout
    assert "A confirmation adds its soak, 20.0 min" in res.stdout
    off = cli("sweep", str(cfg), "--dry-run", "--soak", "0")
    assert "Soak: off" in off.stdout and "adds its soak" not in off.stdout
    bad = cli("sweep", str(cfg), "--dry-run", "--soak", "-1")
    assert bad.returncode == 2 and "--soak" in bad.stderr and "[0, 1440]" in bad.stderr
