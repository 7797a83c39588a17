"""The evidence of a server that spans nodes: every node's log and NCCL files read, the ranks
counted per node (``TrialRecord.node_ranks``) and the proof said per node. Launched for real
against the independent stand-in tests/servers/node_server.py, in local mode."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port
from tuner.inputs import NodesConfig
from tuner.inputs.config import ServerConfig
from tuner.nccl import confirmations, node_ranks, parse_log
from tuner.record import Kind, TrialRecord
from tuner.server import ServerProcess
from tuner.sweep.evidence import node_logs, read
from tuner.sweep.progress import proof_line

NODE_SERVER = Path(__file__).resolve().parents[2] / "servers" / "node_server.py"


def _launch(tmp_path: Path, debug_file: bool) -> TrialRecord:
    log = tmp_path / "logs" / "trial-0001.log"
    env = {"NCCL_DEBUG": "INFO"}
    if debug_file:
        (tmp_path / "logs" / "trial-0001.nccl").mkdir(parents=True)
        env["NCCL_DEBUG_FILE"] = str(tmp_path / "logs" / "trial-0001.nccl" / "%h.%p.log")
    cfg = ServerConfig(command=(sys.executable, str(NODE_SERVER), "--port", "{port}"), port=free_port(),
                       kind="vllm", env=env, teardown_grace_s=2,
                       nodes=NodesConfig(count=2, hosts=("spark-a", "spark-b"), dist_port=free_port()))
    launched = {"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "0"}
    record = TrialRecord(trial=1, kind=Kind.SEARCH, env=launched, log=str(log))
    with ServerProcess(cfg, launched, log, inherited=dict(os.environ)) as server:
        record.started_at = server.create_time
        server.wait_ready(30)
    read(record, launched, server.argv(), cfg.env, None, pattern=env.get("NCCL_DEBUG_FILE"))
    return record


@pytest.mark.parametrize("debug_file", [True, False])
def test_every_node_is_read_and_its_ranks_counted(tmp_path, debug_file):
    record = _launch(tmp_path, debug_file)
    assert record.node_ranks == {"spark-a": 1, "spark-b": 1}
    assert record.nccl_ranks == [0, 1]
    assert record.nccl_confirmed == {"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "0"}
    rows = {r["name"]: r for r in record.nccl_proof}
    assert rows["NCCL_IB_GID_INDEX"]["ranks"] == "2 of 2 ranks on 2 nodes (spark-a 1/1, spark-b 1/1)"
    assert "echoed by 2 of 2 ranks on 2 nodes (spark-a 1/1, spark-b 1/1)" in proof_line(record.nccl_proof)
    if debug_file:
        files = sorted(p.name.split(".")[0] for p in (tmp_path / "logs" / "trial-0001.nccl").iterdir())
        assert files == ["spark-a", "spark-b"]  # %h is the node's name
    assert [p.name for p in node_logs(tmp_path / "logs" / "trial-0001.log")] == ["trial-0001.node1.log"]


def _lines(host: str, pid: int, rank: int, nranks: int, echo: str | None) -> list[str]:
    pre = f"{host}:{pid}:{pid} [{rank}] NCCL INFO "
    said = [f"{pre}NCCL_IB_GID_INDEX set by environment to {echo}"] if echo is not None else []
    return [*said, f"{pre}comm 0x{pid:x} rank {rank} nRanks {nranks} nNodes 2 localRanks 2 localRank 0 MNNVL 0",
            f"{pre}Init COMPLETE"]


def test_a_node_whose_ranks_did_not_echo_is_named():
    lines = (_lines("spark-a", 11, 0, 4, "3") + _lines("spark-a", 12, 1, 4, "3")
             + _lines("spark-b", 21, 2, 4, "0") + _lines("spark-b", 22, 3, 4, "0"))
    parsed = parse_log(lines)
    assert node_ranks(parsed) == {"spark-a": [0, 1], "spark-b": [2, 3]}
    row = confirmations({"NCCL_IB_GID_INDEX": "3"}, parsed).rows[0]
    assert row.status == "not applied"
    assert row.ranks_text() == "2 of 4 ranks on 2 nodes (spark-a 2/2, spark-b 0/2)"


def test_one_host_keeps_the_rank_list():
    parsed = parse_log(_lines("box", 11, 0, 2, "3") + _lines("box", 12, 1, 2, "3"))
    assert node_ranks(parsed) == {"box": [0, 1]}
    assert confirmations({"NCCL_IB_GID_INDEX": "3"}, parsed).rows[0].ranks_text() == "0-1 (2/2)"
