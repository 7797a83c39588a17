"""The first baseline's log feeds the NET triage the way it feeds NCCL's model of one node
(tuner/sweep/lessons.py, learn): the study stores both, and the report's triage lines say each
cross-node pair's transport."""

from __future__ import annotations

from pathlib import Path

import optuna

from tests.helpers import ROOT
from tuner.inputs import load_config, load_space
from tuner.nccl import parse_log
from tuner.servers import Backend
from tuner.study import StudyStore
from tuner.sweep.evidence import Evidence
from tuner.sweep.lessons import learn
from tuner.triage import Triage

SOCKETS = ROOT / "tests" / "fixtures" / "nccl_logs" / "nccl-2.11.4-two-node-socket.log"


def test_a_two_node_baseline_stores_the_network_triage(tmp_path: Path):
    space_path = ROOT / "search_spaces" / "network.toml"
    config = tmp_path / "night.toml"
    config.write_text((ROOT / "examples" / "sim.toml").read_text().replace(
        'space = "search_spaces/default.toml"', f'space = "{space_path}"'))
    cfg, space = load_config(config), load_space(space_path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = StudyStore(optuna.create_study(direction="maximize"), space.choices())
    found = Evidence(parse_log(SOCKETS.read_text().splitlines()), Backend("nccl", True, "test"))
    said: list[str] = []
    learn(store, found, cfg, space, tmp_path, said.append)
    stored = Triage.from_dict(store.info().triage)
    assert [f.kind for f in stored.findings] == ["net-sockets"]
    assert stored.network and all(line.startswith("network: ip-10-0-1") for line in stored.network)
    assert "triage: The network across nodes may cost speed (1 finding)" in "\n".join(said)
    assert any(line.startswith("triage: network: ip-10-0-139-244 -> ip-10-0-142-242 via NET/Socket") for line in said)
