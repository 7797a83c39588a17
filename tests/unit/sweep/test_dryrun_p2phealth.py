"""``nccl-tune sweep --dry-run``'s P2P health lines, through the command line as a user runs it:
the host read under a fixture root (tests/fixtures/p2phost/, the reader's test-only variable),
one line per gate with its fix, the clean line, what is not readable, and whether the baseline
runs NCCL's own P2P check (2.31+, by the ``[nccl] version`` the file gives)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import cli
from tuner.server.p2phost import ROOT_VAR

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "p2phost"


def _p2p_lines(tree: str, config: str = "examples/sim.toml") -> list[str]:
    res = cli("sweep", config, "--dry-run", env={**os.environ, ROOT_VAR: str(TREES / tree)})
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if line.startswith(("P2P gate", "P2P health"))]


def test_a_gated_host_one_line_per_gate_with_its_fix():
    lines = _p2p_lines("acs_redirect")
    assert lines[0].startswith("P2P gate: ACS redirect (ReqRedir+ CmpltRedir+) on bridges 0000:40:01.1, 0000:60:01.1 "
                               "between GPUs 0 and 1: ")
    assert "Fix: `for b in 0000:40:01.1 0000:60:01.1; do sudo setpci -s $b ECAP_ACS+0x6.w=0000; done`" in lines[0]
    assert lines[1].startswith("P2P gate: IOMMU in translated mode (DMA-FQ, ivhd0) for GPUs 0, 1: ")
    assert "Fix: `iommu=pt` on the kernel command line" in lines[1]
    assert lines[-1].startswith("P2P health: the baselines run NCCL's own P2P check (NCCL_RUN_DIAGNOSTICS=1")
    assert len(lines) == 4  # two gates, NVML not known, the check


def test_a_clean_host_and_an_unreadable_one():
    assert _p2p_lines("clean")[0] == ("P2P health: nothing blocks P2P that this host shows (2 GPUs, ACS redirect off "
                                      "on 2 bridges, IOMMU identity)")
    lines = _p2p_lines("unreadable")
    assert lines[0] == "P2P health: nothing blocks P2P that this host shows (2 GPUs, IOMMU off)"
    assert lines[1] == ("P2P health: not readable: ACS on 2 bridges above the GPUs (0000:40:01.1, 0000:60:01.1): "
                        "not readable (run as root, or `sudo lspci -vvv | grep ACSCtl`)")


def test_an_older_nccl_runs_no_check_of_its_own(tmp_path):
    config = tmp_path / "exp.toml"
    text = Path("examples/sim.toml").read_text()
    assert "[nccl]" not in text
    space = Path("search_spaces/default.toml").resolve()
    config.write_text(text.replace('space = "search_spaces/default.toml"', f'space = "{space}"')
                      + '\n[nccl]\nversion = "2.28.9"\n')
    assert _p2p_lines("clean", str(config))[-1] == (
        "P2P health: NCCL 2.28.9 has no init diagnostics (NCCL_RUN_DIAGNOSTICS, NCCL 2.31+): only the host's facts "
        "are judged.")
