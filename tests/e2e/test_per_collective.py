"""Presets that only a newer NCCL reads (the per-collective ``AllReduce:LL`` of 2.24+, src/graph/
tuning.cc parseList): loaded while the version is unknown, said in the dry run with the release
they need, skipped without a relaunch when the baseline's NCCL is older (the env-rate server
loads 2.21.5) and launched, exactly as written, when it is newer (the simulator's 2.27.3)."""

from __future__ import annotations

import json

import pandas as pd

from tests.helpers import ROOT, cli, envrate_command, example_text, free_port, write_config

SPACE = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "ll-allreduce"
env = { NCCL_PROTO = "AllReduce:LL" }
[[presets]]
name = "ring-ll-allreduce"
env = { NCCL_ALGO = "allreduce:ring", NCCL_PROTO = "AllReduce:LL;Broadcast:Simple" }
"""
NEEDS = "needs NCCL 2.24+: launched once the baseline shows an NCCL that new"


def test_the_dry_run_says_which_presets_need_a_newer_nccl(tmp_path):
    res = cli("sweep", str(ROOT / "examples" / "vllm-tp8.toml"), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    for name in ("ll-allreduce: NCCL_PROTO=AllReduce:LL",
                 "ring-ll-allreduce: NCCL_ALGO=AllReduce:Ring NCCL_PROTO=AllReduce:LL",
                 "tree-ll-allreduce: NCCL_ALGO=AllReduce:Tree NCCL_PROTO=AllReduce:LL"):
        line = next(x for x in res.stdout.splitlines() if f" {name}" in x)
        assert line.endswith(f" - {NEEDS}"), line
    assert "NOT REACHED" not in res.stdout and "reached only if" not in res.stdout, res.stdout
    # the global LL stays its own preset: to an unknown NCCL the two are different sets
    assert " ll: NCCL_PROTO=LL\n" in res.stdout or " ll: NCCL_PROTO=LL" in res.stdout


def test_an_older_nccl_skips_the_preset_without_a_relaunch(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(SPACE), trials=5,
                       extra_sweep='mode = "presets"', max_tokens=30, repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "old", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "old" / "trials.csv")
    rows = df.set_index("preset")
    assert (df[df["status"] == "ok"]["nccl_version"] == "2.21.5").all()
    for name in ("ll-allreduce", "ring-ll-allreduce"):
        assert rows.loc[name, "status"] == "skipped", df[["trial", "preset", "status", "cause"]]
        assert "needs NCCL 2.24+ and the baseline's NCCL is 2.21.5" in rows.loc[name, "cause"]
    launched = df[df["status"] == "ok"]
    assert list(launched["preset"].fillna("")) == ["", "ll", ""], launched[["trial", "preset"]]  # no relaunch for them


def test_a_newer_nccl_launches_it_as_written(tmp_path):
    text = example_text("sim.toml")  # the simulator's profile loads NCCL 2.27.3
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "0.3"')
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 6", "repeats = 2")
    (tmp_path / "space.toml").write_text(SPACE)
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{tmp_path / "space.toml"}"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "new", "--mode", "presets",
              "--trials", "5", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "new" / "trials.csv").set_index("preset")
    assert df.loc["ll-allreduce", "status"] == "ok" and df.loc["ll-allreduce", "nccl_version"] == "2.27.3"
    assert json.loads(df.loc["ll-allreduce", "nccl_confirmed"]) == {"NCCL_PROTO": "AllReduce:LL"}
    assert json.loads(df.loc["ring-ll-allreduce", "nccl_confirmed"]) == {
        "NCCL_ALGO": "allreduce:ring", "NCCL_PROTO": "AllReduce:LL;Broadcast:Simple"}
    assert df.loc["ll", "status"] == "ok"  # a set of its own, not the same as AllReduce:LL
