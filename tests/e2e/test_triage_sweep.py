"""The triage on the simulator: on the box whose ring search falls back, the fallback is said,
quoting NCCL's line, before the first tuned relaunch, and that relaunch is the combined fix."""

from __future__ import annotations

import sys

from tests.helpers import ROOT, cli, write_config


def test_fallback_box_says_the_fallback_and_relaunches_the_fix_first(tmp_path):
    cfg = write_config(tmp_path / "exp.toml", command=[
        sys.executable, "-m", "tuner.sim", "serve", "--profile", "pcie-8x-amd-fallback", "--port", "{port}",
        "--load-time", "0.2"], space=ROOT / "search_spaces" / "default.toml", trials=2, max_tokens=40, repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "fb", "--no-confirm",
              "--no-final-baseline", "-v")  # -v: each relaunch's result line too
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    said = out.index("falling back to simple order")
    first = out.index("trial 1 [fix: fallback]")
    assert said < first
    assert '{"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"}' in out[first:first + 200]
    report = (tmp_path / "r" / "fb" / "report.md").read_text()
    assert "## NCCL's model of the machine" in report


def test_box_where_nccls_model_is_right_plans_no_fix_and_never_relaunches_the_default_level(tmp_path):
    """NCCL 2.27 on 8 GPUs keeps P2P at PXB whatever the CPU (src/graph/paths.cc): a PXB preset is
    the untuned set, recorded as the baseline's duplicate, and the triage says the model looks right."""
    space = tmp_path / "space.toml"
    space.write_text('[variables.NCCL_P2P_LEVEL]\nvalues = ["PXB", "SYS"]\n'
                     '[[presets]]\nname = "p2p-pxb"\nenv = { NCCL_P2P_LEVEL = "PXB" }\n'
                     '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n')
    cfg = write_config(tmp_path / "exp.toml", command=[
        sys.executable, "-m", "tuner.sim", "serve", "--profile", "pcie-8x-nccl-right", "--port", "{port}",
        "--load-time", "0.2"], space=space, trials=3, max_tokens=40, repeats=2,
        extra_sweep='mode = "presets"')
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "right", "--no-confirm",
              "--no-final-baseline")
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert "NCCL's model of this machine looks right" in out
    assert "[fix:" not in out
    assert "trial 1 [p2p-pxb]" in out
    assert "not launched: to NCCL the same set as trial 0 (baseline)" in out.split("trial 1 [p2p-pxb]")[1][:200]
