"""search_spaces/network.toml: NCCL's tunable network variables, loaded by the space loader and
planned by the CLI's dry run on the simulator's example."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT
from tuner.inputs import load_space
from tuner.nccl import HARDWARE_SELECTORS, VARIABLES

SPACE = ROOT / "search_spaces" / "network.toml"


def test_it_searches_the_tunable_network_variables_only():
    space = load_space(SPACE)
    names = set(space.variables)
    assert names == {"NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_CROSS_NIC",
                     "NCCL_IB_DISABLE", "NCCL_IB_SUBNET_AWARE_ROUTING"}
    assert not names & set(HARDWARE_SELECTORS)
    assert all(VARIABLES[n].acts_on == frozenset({"network"}) for n in names)
    presets = {p.name: dict(p.env) for p in space.presets}
    assert presets["roce-gb10"] == {"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "0"}
    assert space.choices()["NCCL_IB_GID_INDEX"][0] == "unset"


def test_the_dry_run_plans_it_on_the_simulators_example(tmp_path: Path):
    config = tmp_path / "net.toml"
    config.write_text((ROOT / "examples" / "sim.toml").read_text().replace(
        'space = "search_spaces/default.toml"', f'space = "{SPACE}"'))
    done = subprocess.run([sys.executable, "-m", "tuner.cli", "sweep", str(config), "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "roce-gb10: NCCL_IB_GID_INDEX=3 NCCL_NET_GDR_LEVEL=0" in done.stdout
    assert "a RoCE GID problem: NCCL_IB_GID_INDEX=3" in done.stdout
    assert "NCCL_IB_DISABLE: unset, 0 (= NCCL's default: same as unset), 1" in done.stdout
