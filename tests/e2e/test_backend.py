"""Who carries the decode allreduce, found from the baseline's log: on the simulator's
`nvlink-8x` box vLLM's custom allreduce does, so NCCL variables cannot change decode speed and
the sweep stops right after the baseline (exit 5) instead of spending the budget; a space that
varies the backend itself (vLLM's --disable-custom-all-reduce) is swept, the flag reaching the
server's command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.helpers import cli, free_port

SPACE = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""
FLAG_SPACE = """
[variables."--disable-custom-all-reduce"]
values = ["on"]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""


def _config(tmp_path, space: str):
    (tmp_path / "space.toml").write_text(space)
    path = tmp_path / "exp.toml"
    path.write_text(f"""
[server]
command = ["{{python}}", "-m", "tuner.sim", "serve", "--profile", "nvlink-8x", "--port", "{{port}}", "--load-time", "0.3"]
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 5
[probe]
max_tokens = 32
repeats = 2
[sweep]
space = "{tmp_path / 'space.toml'}"
trials = 3
""")
    return path


def test_nccl_not_on_the_decode_path_stops_after_the_baseline(tmp_path):
    res = cli("sweep", str(_config(tmp_path, SPACE)), "--results", str(tmp_path / "r"), "--study", "nv")
    assert res.returncode == 5, res.stderr
    assert "NCCL does not carry the decode allreduce" in res.stderr and "--force" in res.stderr
    df = pd.read_csv(tmp_path / "r" / "nv" / "trials.csv")
    assert list(df["kind"]) == ["baseline"] and df.iloc[0]["allreduce_backend"] == "custom_allreduce"
    res = cli("sweep", str(_config(tmp_path, SPACE)), "--results", str(tmp_path / "r"), "--study", "forced",
              "--force", "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert "sweeping anyway (--force)" in res.stderr


def test_a_space_that_varies_the_backend_is_swept(tmp_path):
    res = cli("sweep", str(_config(tmp_path, FLAG_SPACE)), "--results", str(tmp_path / "r"), "--study", "flag",
              "--seed", "1", "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert "which can move it to NCCL" in res.stderr
    df = pd.read_csv(tmp_path / "r" / "flag" / "trials.csv")
    df = df[df["status"] != "skipped"]
    flagged = df[df["flags"].map(json.loads).map(lambda f: "--disable-custom-all-reduce" in f)]
    assert len(flagged) >= 1, df[["trial", "kind", "env", "flags"]]
    row = flagged.iloc[0]
    assert row["allreduce_backend"] == "nccl"  # with the flag, NCCL carries decode
    # the set's backend choice, proven by the launch's own engine-config line
    assert row["backend_choice"] == "vllm-custom-allreduce-off" and row["backend_applied"] is True
    assert row["backend_reason"] == 'vllm logged "disable_custom_all_reduce=True,"'
    assert "--disable-custom-all-reduce" in Path(row["log"]).read_text().splitlines()[0]  # the launched argv
