"""Proof on every trial: what NCCL echoed against what the trial set, from real logs of the
independent env-rate server (which prints NCCL's lines only when NCCL_DEBUG asks, and can be
told to drop a variable before "NCCL" reads it, as a server that overwrites one would)."""

from __future__ import annotations

import json

import pandas as pd

from tests.helpers import cli, envrate_command, write_config

PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "ll-and-connections"
env = { NCCL_ALGO = "Ring", CUDA_DEVICE_MAX_CONNECTIONS = "1" }
"""


def _sweep(tmp_path, space_file, extra_env: str):
    effects = '{"NCCL_PROTO=LL": 1.15, "NCCL_ALGO=Ring": 1.15}'
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=4,
                       extra_server=f"env = {{ ENVRATE_EFFECTS = '{effects}'{extra_env} }}",
                       extra_sweep='mode = "presets"', max_tokens=60, repeats=3)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "ev", "--no-confirm")
    assert res.returncode == 0, res.stderr
    return res, pd.read_csv(tmp_path / "r" / "ev" / "trials.csv").set_index("trial")


def test_every_trial_carries_what_nccl_echoed(tmp_path, space_file):
    _res, df = _sweep(tmp_path, space_file, "")
    assert (df["nccl_version"] == "2.21.5").all()
    assert json.loads(df.loc[1, "nccl_confirmed"]) == {"NCCL_PROTO": "LL"}
    assert json.loads(df.loc[2, "nccl_confirmed"]) == {"NCCL_ALGO": "Ring"}
    # CUDA's variable is never echoed by NCCL: unverifiable, never reported as applied
    assert json.loads(df.loc[2, "nccl_unverifiable"]) == ["CUDA_DEVICE_MAX_CONNECTIONS"]
    assert (df["nccl_not_applied"] == "{}").all()
    assert json.loads(df.loc[0, "nccl_ranks"]) == [0, 1]
    # said right after the baseline, in the night's log (its console keeps the headlines)
    assert "NCCL 2.21.5" in (tmp_path / "r" / "ev" / "night.log").read_text()


def test_a_variable_nccl_never_saw_gets_no_speed_verdict(tmp_path, space_file):
    res, df = _sweep(tmp_path, space_file, ', ENVRATE_NO_ECHO = "NCCL_PROTO"')
    assert json.loads(df.loc[1, "nccl_not_applied"]).keys() == {"NCCL_PROTO"}
    assert df.loc[1, "verdict"] == "not applied"
    assert df.loc[2, "verdict"] != "not applied"
    assert "NCCL did not apply NCCL_PROTO" in res.stdout


def test_without_nccl_debug_nothing_is_claimed(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=3,
                       extra_sweep='mode = "presets"', max_tokens=30, repeats=2)
    cfg.write_text(cfg.read_text() + "\n[nccl]\ndebug = false\n")
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r2"), "--study", "quiet", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r2" / "quiet" / "trials.csv").set_index("trial")
    assert json.loads(df.loc[1, "nccl_unverifiable"]) == ["NCCL_PROTO"]  # no NCCL line: unverifiable
    assert df.loc[1, "verdict"] != "not applied"
