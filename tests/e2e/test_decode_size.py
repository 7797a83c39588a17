"""Relaunches spent only where a knob can act: after ``nccl-tune diagnose`` of the simulator's
PCIe box (the decode allreduce, 14,336 B, runs Ring/LL on one channel), a sweep of the safe
presets never relaunches a set that differs from a measured one only by a variable that cannot
change that allreduce (channel caps, the Simple buffer size, a protocol list NCCL already
picks from), and never launches one that cannot initialise there (Tree with LL only)."""

from __future__ import annotations

import pandas as pd

from tests.helpers import ROOT, cli, free_port


def test_sets_equal_at_the_decode_size_are_relaunched_once(tmp_path):
    text = (ROOT / "examples" / "sim.toml").read_text()
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "0.3"')
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 4", "repeats = 2")
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT}/search_spaces/safe.toml"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    res = cli("diagnose", str(cfg), "--results", str(tmp_path / "r"), "--study", "d")
    assert res.returncode == 0, res.stderr
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "d", "--mode", "presets",
              "--trials", "10", "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "d" / "trials.csv")
    launched = df[df["kind"] == "preset"]["preset"].tolist()
    # deployment-tuned acts through CUDA_DEVICE_MAX_CONNECTIONS alone at 14,336 B; ll, ring-ll,
    # max-connections-1 and channels-8 are one of the sets already measured there.
    assert launched == ["deployment-tuned", "simple", "p2p-disable"], df[["trial", "kind", "preset"]]
    for preset in ("ll", "ring-ll", "max-connections-1", "channels-8"):
        assert f"preset {preset} " in res.stderr or f"[{preset}]" in res.stderr, preset
    assert "tree-ll" in res.stderr and "no algorithm/protocol available for function AllGather" in res.stderr
