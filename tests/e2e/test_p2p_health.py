"""P2P health through a real night: the baseline launch asks for NCCL's own P2P check
(NCCL_RUN_DIAGNOSTICS=1), the independent test server (tests/servers/envrate_server.py) answers
with NCCL 2.31's DIAG report as DIAG_PRINT writes it, and the failed pair reaches the night's
output and report.md beside the host's facts (a fixture tree: tests/fixtures/p2phost/clean)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import cli, envrate_command, write_config
from tuner.server.p2phost import ROOT_VAR

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "p2phost"


def test_nccls_failed_pair_is_named_with_the_hosts_facts(tmp_path, space_file):
    space = space_file('[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n')
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=2,
                       extra_server='env = { ENVRATE_DIAG = "write-mismatch", ENVRATE_NCCL_VERSION = "2.31.2" }',
                       extra_sweep='mode = "presets"', max_tokens=40, repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "p2p", "--no-confirm",
              "--no-final-baseline", env={**os.environ, ROOT_VAR: str(TREES / "clean")})
    assert res.returncode == 0, res.stderr
    study = tmp_path / "r" / "p2p"
    assert "NCCL DIAG [INFO] p2p: write mismatch" in (study / "logs" / "trial-0000.log").read_text()
    assert "NCCL DIAG" not in (study / "logs" / "trial-0001.log").read_text()  # a set's launch: no check asked
    gate = "P2P gate: NCCL's P2P check: write mismatch from GPU 0 to GPU 1 (ranks 0->1, path PHB)"
    section = (study / "report.md").read_text().split("## P2P health\n\n", 1)[1].split("\n## ", 1)[0]
    items = [line[2:] for line in section.splitlines() if line.startswith("- ")]
    assert items[0].startswith(gate + ": data written or read over P2P between them was wrong or never arrived. Fix: "
                               "check the affected pair with 'nvidia-smi topo -p2p p', then check Linux bare-metal "
                               "IOMMU mode and PCIe ACS settings; until then `NCCL_P2P_DISABLE=1`")
    assert items[1] == ("P2P health: NCCL's own P2P check (NCCL_RUN_DIAGNOSTICS=1): only 1/2 GPU-to-GPU peer "
                        "accesses passed verification")
    assert any(line.startswith(gate) for line in res.stdout.splitlines())  # the terminal says it after the verdict
