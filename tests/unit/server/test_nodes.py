"""A server that spans nodes (``[server.nodes]``), launched for real against an independent
stand-in (tests/servers/node_server.py: vLLM's multi-node flags, a TCP rendezvous on the head):
local mode (each node its own session, its own log, the launch's marker) and srun mode (one
``srun --multi-prog`` step through the stand-in srun of tests/launchers); nothing of any node left."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import free_port
from tuner.errors import MachineFault, TrialFailed
from tuner.inputs import NodesConfig
from tuner.server import ServerProcess
from tuner.server.teardown import kill_leftover

from ._support import config, marked, one_token_request, wait_for

NODE_SERVER = Path(__file__).resolve().parents[2] / "servers" / "node_server.py"
LAUNCHERS = Path(__file__).resolve().parents[2] / "launchers"


def _cfg(nodes: NodesConfig, **kw: object):
    return config([sys.executable, str(NODE_SERVER), "--port", "{port}"], kind="vllm", nodes=nodes,
                  env={"NCCL_DEBUG": "INFO"}, **kw)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "NODE_SERVER_PIDFILE": str(tmp_path / "pids"), **extra}


def _left(tmp_path: Path) -> list[str]:
    """Every node process the stand-in recorded that still runs (``host pid``)."""
    rows = (tmp_path / "pids").read_text().split("\n") if (tmp_path / "pids").exists() else []
    alive = []
    for row in filter(None, rows):
        _host, pid = row.split()
        try:
            if psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE:
                alive.append(row)
        except psutil.Error:
            continue
    return alive


def test_local_mode_starts_every_node_in_its_own_session_and_ends_them(tmp_path):
    cfg = _cfg(NodesConfig(count=3, hosts=("spark-a", "spark-b", "spark-c"), dist_port=free_port()))
    log = tmp_path / "trial-0001.log"
    with ServerProcess(cfg, {"NCCL_IB_GID_INDEX": "3"}, log, inherited=_env(tmp_path)) as server:
        server.wait_ready(30, ready_check=one_token_request(cfg))
        assert server.node_names() == ["spark-a", "spark-b", "spark-c"]
        assert "--headless" not in server.argv() and "--node-rank" in server.argv()
        nodes = [n.proc for n in server.nodeset.nodes]  # type: ignore[union-attr]
        for node in nodes:
            assert node is not None and os.getsid(node.pid) not in (os.getsid(server.pid), os.getsid(0))
            assert psutil.Process(node.pid).environ()["TUNER_SERVER_ID"] == server.marker
        assert psutil.Process(nodes[0].pid).environ()["NCCL_TUNE_NODE"] == "spark-b"  # type: ignore[union-attr]
        assert psutil.Process(nodes[1].pid).environ()["NCCL_HOSTID"] == "spark-c"  # type: ignore[union-attr]
        assert psutil.Process(server.pid).environ()["NCCL_TUNE_NODE"] == "spark-a"
        marker = server.marker
    assert server.teardown_report is not None and server.teardown_report.clean
    assert marked(marker) == [] and _left(tmp_path) == []
    node2 = (tmp_path / "trial-0001.node2.log").read_text()
    assert node2.startswith("# node 2: spark-c\n")
    assert "--node-rank 2" in node2 and "--headless" in node2
    assert "spark-c:" in node2 and "NCCL_IB_GID_INDEX set by environment to 3" in node2
    assert "rank 2 nRanks 3" in node2 and "teardown" in node2.splitlines()[-1]
    assert "rank 0 nRanks 3" in log.read_text() and "rank 1 " not in log.read_text()


# today's rules on a node's death: before NCCL's first line under NCCL variables alone it is the
# machine's (tuner/server/machine.py, before_nccl); the untuned baseline's is the command's
@pytest.mark.parametrize("env, machine", [({"NCCL_IB_DISABLE": "1"}, True), ({}, False),
                                          ({"NCCL_IB_DISABLE": "1", "VLLM_X": "1"}, False)])
def test_a_node_that_dies_at_start_fails_the_launch_with_its_line(tmp_path, env, machine):
    cfg = _cfg(NodesConfig(count=2, dist_port=free_port()))
    log = tmp_path / "trial-0002.log"
    with pytest.raises(TrialFailed) as caught, \
            ServerProcess(cfg, env, log, inherited=_env(tmp_path, NODE_FAIL_RANK="1")) as server:
        server.wait_ready(30, ready_check=one_token_request(cfg))
    assert isinstance(caught.value, MachineFault) is machine
    assert "node 1 (node1) ended (exit status 1)" in caught.value.cause
    assert "RuntimeError: node_fail: injected" in caught.value.cause
    assert _left(tmp_path) == []


def test_a_node_killed_by_a_dead_runner_is_reaped_by_its_marker(tmp_path):
    cfg = _cfg(NodesConfig(count=2, dist_port=free_port()))
    server = ServerProcess(cfg, {}, tmp_path / "trial-0003.log", inherited=_env(tmp_path))
    server.start()
    try:
        server.wait_ready(30, ready_check=one_token_request(cfg))
        identity = server.identity()
        assert len(_left(tmp_path)) == 2
        kill_leftover(identity, grace_s=2)  # what the next runner does with the dead one's record
        assert wait_for(lambda: _left(tmp_path) == [])
    finally:
        server.teardown()


def test_srun_mode_runs_one_multi_prog_step_and_splits_its_labelled_output(tmp_path):
    cfg = _cfg(NodesConfig(count=2, hosts=("127.0.0.1", "node-b"), launch="srun", dist_port=free_port()))
    log = tmp_path / "trial-0004.log"
    env = _env(tmp_path, PATH=f"{LAUNCHERS}{os.pathsep}{os.environ['PATH']}")
    with ServerProcess(cfg, {"NCCL_CROSS_NIC": "1"}, log, inherited=env) as server:
        assert server.launch_argv()[:6] == ["srun", f"--job-name=nccl-tune-{server.marker[:12]}", "--nodes=2",
                                            "--ntasks-per-node=1", "--label", "--multi-prog"]
        server.wait_ready(30, ready_check=one_token_request(cfg))
    conf = (tmp_path / "trial-0004.multiprog.conf").read_text().splitlines()
    assert conf[0].startswith("0 'env' 'NCCL_TUNE_NODE=127.0.0.1' ") and conf[1].endswith("'--headless'")
    node1 = (tmp_path / "trial-0004.node1.log").read_text()
    assert node1.startswith("# node 1: node-b\n") and "node-b:" in node1 and "rank 1 nRanks 2" in node1
    assert not any(line.startswith("1: ") for line in node1.splitlines())  # the label is read off
    head = log.read_text()
    assert "rank 0 nRanks 2" in head and "node-b" not in head.split("[nccl-tune] removed inherited")[1]
    assert _left(tmp_path) == []


def test_srun_mode_says_which_task_ended(tmp_path):
    cfg = _cfg(NodesConfig(count=2, hosts=("127.0.0.1", "node-b"), launch="srun", dist_port=free_port()))
    env = _env(tmp_path, PATH=f"{LAUNCHERS}{os.pathsep}{os.environ['PATH']}", NODE_FAIL_RANK="1")
    with pytest.raises(TrialFailed) as caught, ServerProcess(cfg, {}, tmp_path / "t.log", inherited=env) as server:
        server.wait_ready(30, ready_check=one_token_request(cfg))
    assert "node 1 (node-b) ended (srun: Exited with exit code 1)" in caught.value.cause
    assert "node_fail: injected" in caught.value.cause
    assert _left(tmp_path) == []


def test_a_dead_runners_srun_step_is_cancelled_by_its_name(tmp_path, monkeypatch):
    """After a runner SIGKILL the next runner stops the step by the handle it recorded: squeue
    lists it by name, scancel cancels JOBID.STEPID (stand-ins that log what they were asked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked"
    (bin_dir / "squeue").write_text(f"#!/bin/sh\necho \"squeue $*\" >> {asked}\n"
                                    f"[ -e {tmp_path}/cancelled ] || echo \"77.0 $STEP\"\n")
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"scancel $*\" >> {asked}\ntouch {tmp_path}/cancelled\n")
    for tool in ("squeue", "scancel"):
        (bin_dir / tool).chmod(0o755)
    path = f"{LAUNCHERS}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}"
    cfg = _cfg(NodesConfig(count=2, hosts=("127.0.0.1", "node-b"), launch="srun", dist_port=free_port()))
    server = ServerProcess(cfg, {}, tmp_path / "t.log", inherited=_env(tmp_path, PATH=path))
    server.start()
    try:
        server.wait_ready(30, ready_check=one_token_request(cfg))
        identity = server.identity()
        step = f"nccl-tune-{server.marker[:12]}"
        assert identity.launcher == ("srun", f"--job-name={step}", "nccl-tune-leftover")
        monkeypatch.setenv("PATH", path)
        monkeypatch.setenv("SLURM_JOB_ID", "77")
        monkeypatch.setenv("STEP", step)
        kill_leftover(identity, grace_s=2)
        assert wait_for(lambda: _left(tmp_path) == [])
        said = asked.read_text()
        assert "squeue --steps --jobs=77" in said and "scancel 77.0" in said
    finally:
        server.teardown()


@pytest.mark.parametrize("command", [["srun", "-n", "1", "vllm", "serve"], ["docker", "run", "img", "vllm", "serve"],
                                     ["env", "A=1", "podman", "run", "img"]])
def test_a_launcher_inside_a_command_spanning_nodes_is_refused(command):
    from tuner.errors import LauncherRefused
    from tuner.inputs import ServerConfig
    from tuner.server import preflight

    cfg = ServerConfig(command=(*command, "--port", "{port}"), kind="vllm", nodes=NodesConfig(count=2))
    check = preflight.launcher_check(cfg)
    assert check.problem is not None and "remove the launcher" in check.problem
    assert check.refused is LauncherRefused
    assert preflight.launcher_check(ServerConfig(command=tuple(command), kind="vllm")).problem is None
