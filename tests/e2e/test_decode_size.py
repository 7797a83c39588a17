"""Relaunches spent only where a knob can act: after ``nccl-tune diagnose`` of the simulator's
PCIe box (the decode allreduce, 14,336 B, runs Ring/LL on one channel), a sweep of the safe
presets never relaunches a set that differs from a measured one only by a variable that cannot
change that allreduce (channel caps, the Simple buffer size, a protocol list NCCL already
picks from), and never launches one that cannot initialise there (Tree with LL only). Every
preset is still accounted for: trials.csv has a row for each one skipped (why, and the set it
equals) and report.md a "Sets not measured" table, also after a resume and `nccl-tune report`;
the run never ends "all presets measured"."""

from __future__ import annotations

import pandas as pd

from tests.helpers import ROOT, cli, example_text, free_port
from tuner.inputs.space import load_space

SKIPPED = ("ll", "ring-ll", "tree-ll", "max-connections-1", "channels-8", "ll-allreduce", "ring-ll-allreduce")


def test_sets_equal_at_the_decode_size_are_relaunched_once(tmp_path):
    text = example_text("sim.toml")
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "0.3"')
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 6", "repeats = 2")
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT}/search_spaces/safe.toml"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    res = cli("diagnose", str(cfg), "--results", str(tmp_path / "r"), "--study", "d")
    assert res.returncode == 0, res.stderr
    sweep = ("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "d", "--mode", "presets",
             "--trials", "10", "--no-confirm", "--no-final-baseline")
    res = cli(*sweep)
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "d" / "trials.csv")
    launched = df[df["kind"] == "preset"]["preset"].tolist()
    # deployment-tuned acts through CUDA_DEVICE_MAX_CONNECTIONS alone at 14,336 B; ll, ring-ll,
    # max-connections-1 and channels-8 are one of the sets already measured there; so are the
    # allreduce-only LL presets (NCCL 2.27.3 reads them; its allreduce runs Ring/LL there already),
    # while tree-ll-allreduce changes the allreduce and leaves the other collectives theirs.
    assert launched == ["deployment-tuned", "simple", "p2p-disable", "tree-ll-allreduce"], \
        df[["trial", "kind", "preset"]]
    for preset in ("ll", "ring-ll", "max-connections-1", "channels-8"):
        assert f"preset {preset} " in res.stderr or f"[{preset}]" in res.stderr, preset
    assert "tree-ll" in res.stderr and "no algorithm/protocol available for function AllGather" in res.stderr
    # every preset is in trials.csv: measured, or skipped with why and the set it equals
    presets = [p.name for p in load_space(ROOT / "search_spaces" / "safe.toml").presets]
    assert sorted(df["preset"].dropna()) == sorted(presets), df[["trial", "kind", "preset"]]
    skipped = df[df["status"] == "skipped"].set_index("preset")
    assert sorted(skipped.index) == sorted(SKIPPED)
    assert skipped.loc["tree-ll", "kind"] == "invalid" and "AllGather" in skipped.loc["tree-ll", "cause"]
    for name in ("ll", "ring-ll", "max-connections-1", "channels-8", "ll-allreduce", "ring-ll-allreduce"):
        row = skipped.loc[name]
        assert row["kind"] == "duplicate" and row["cause"].startswith("the same set to NCCL at "), row
        equal = df[df["trial"] == row["duplicate_of"]].iloc[0]
        assert equal["status"] != "skipped" and row["verdict_note"].startswith(f"trial {equal['trial']} ("), row
    assert (skipped["verdict"] == "not measured").all() and skipped["output_tok_s"].isna().all()
    # the judgement beside trials.csv (the notebook's numbers) survives the rows not measured
    assert (tmp_path / "r" / "d" / "judgement.json").is_file()
    assert "all presets measured" not in res.stderr
    assert "sweep ended: 11 presets: 4 measured, 7 skipped (see report.md, Sets not measured)" in res.stderr
    md = (tmp_path / "r" / "d" / "report.md").read_text()
    table = md[md.index("## Sets not measured"):]
    assert "| trial | name | variables | why | equal to |" in table
    for name in SKIPPED:
        assert f"| {name} |" in table, name
    # a resume relaunches nothing and `nccl-tune report` rebuilds the same files from the storage
    again = cli(*sweep)
    assert again.returncode == 0 and "0 relaunches this run" in again.stderr, again.stderr
    assert "sweep ended: 11 presets: 4 measured, 7 skipped (see report.md, Sets not measured)" in again.stderr
    first = (tmp_path / "r" / "d" / "trials.csv").read_text()
    assert cli("report", "--study", "d", "--results", str(tmp_path / "r")).returncode == 0
    assert (tmp_path / "r" / "d" / "trials.csv").read_text() == first
    assert all(f"| {name} |" in (tmp_path / "r" / "d" / "report.md").read_text() for name in SKIPPED)
