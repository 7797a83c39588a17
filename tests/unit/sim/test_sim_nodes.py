"""``sim serve --nnodes N --node-rank R``: a server across nodes played as one real process per
node on 127.0.0.1, joined by a real TCP rendezvous. Readiness waits for every node; each node's
NCCL lines carry its own host (NCCL_TUNE_NODE) and its ranks; the untuned launch runs on the socket
fallback, NCCL_IB_GID_INDEX=3 on IB; a node that goes away ends the other side with a fatal line."""

from __future__ import annotations

import re
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import free_port
from tests.simproc import run_sim

INIT_LINE = re.compile(r"^(\S+):(\d+):\d+ \[\d+\] NCCL INFO ncclCommInitRank comm \S+ rank (\d+) nranks (\d+) ")
PREFIX = re.compile(r"(?:^|\] )([^\s\[]+):\d+:\d+ \[\d+\] ")
VIA = re.compile(r"NCCL INFO Channel \d+/0 : \d+\[\d+\] -> \d+\[\d+\] \[(send|receive)\] via (\S+)")


def _node(sim, rank: int, master: int, tmp: Path, env: dict | None = None, *args):
    host = f"spark-{'ab'[rank]}"
    flags = ["--nnodes", "2", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
             "--master-port", str(master), *(["--headless"] if rank else []), *args]
    nccl = {"NCCL_TUNE_NODE": host, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(tmp / "nccl.%h.%p.log")}
    return sim(*flags, profile="roce-2x-spark", load=0.2, env={**nccl, **(env or {})})


def _nccl_files(tmp: Path) -> dict[str, list[str]]:
    return {p.name.split(".")[1]: p.read_text().splitlines() for p in sorted(tmp.glob("nccl.*.log"))}


def _wait_connectable(port: int, proc) -> None:
    """Until the head's rendezvous accepts a TCP connection (closed at once: a port probe)."""
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, "the head exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the head never listened"
            time.sleep(0.05)


def test_two_nodes_serve_after_both_joined_on_the_socket_fallback(sim, tmp_path):
    master = free_port()
    head = _node(sim, 0, master, tmp_path)
    _wait_connectable(master, head.proc)  # a probe that says nothing holds nobody up
    with pytest.raises(httpx.ConnectError):  # node 1 has not joined: no HTTP yet
        httpx.get(head.url + "/health", timeout=2)
    assert not head.ready.is_set()
    node = _node(sim, 1, master, tmp_path)
    head.wait_ready(timeout=60)
    node.wait_line("SIM NODE", timeout=30)
    assert httpx.get(head.url + "/health").status_code == 200
    body = httpx.post(head.url + "/v1/completions", json={"model": "sim/minimax-m2-tp2", "max_tokens": 8,
                                                           "prompt": "The capital of France is"}).json()
    assert "Paris" in body["choices"][0]["text"]
    text = head.text()
    assert text.index("SIM NODES ") < text.index("SIM READY ")
    assert head.sim_json("NODES")["hosts"] == {"0": "spark-a", "1": "spark-b"}
    assert head.sim_json("MODEL")["tok_s"] == pytest.approx(24, rel=0.05)  # the cost model's, not timed
    assert head.sim_json("MODEL")["network"] == "Socket"
    assert node.sim_json("NODE")["ranks"] == [1]

    files = _nccl_files(tmp_path)
    assert sorted(files) == ["spark-a", "spark-b"]
    for host, rank in (("spark-a", 0), ("spark-b", 1)):
        lines = files[host]
        inits = [m.groups() for ln in lines if (m := INIT_LINE.match(ln))]
        assert [(h, int(r), int(n)) for h, _, r, n in inits] == [(host, rank, 2)]
        prefixes = {m.group(1) for ln in lines if (m := PREFIX.search(ln))}
        assert prefixes == {host}  # WARN lines too, after their time stamp
        assert "comm 0x" in "\n".join(lines) and " nNodes 2 localRanks 1 localRank 0 " in "\n".join(lines)
        assert any(ln.endswith("NCCL INFO Using network Socket") for ln in lines)
        assert any("NCCL WARN NET/IB: open failed in ncclIbRoceGetVersionNum" in ln for ln in lines)
        vias = {(kind, where) for ln in lines if (m := VIA.search(ln)) for kind, where in [m.groups()]}
        assert vias == {("send", "NET/Socket/0"), ("receive", "NET/Socket/0")}

    node.proc.send_signal(signal.SIGKILL)  # node 1 goes away: the head ends, in vLLM's words
    assert head.proc.wait(timeout=30) == 1
    head.wait_line("SIM EXIT code=1")
    assert "Worker proc VllmWorker-1 died unexpectedly, shutting down executor." in head.text()
    assert "spark-b" in next(ln for ln in head.lines if "died unexpectedly" in ln)


def test_the_gid_set_runs_on_ib_and_a_node_that_loses_the_head_exits(sim, tmp_path):
    master = free_port()
    env = {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_QPS_PER_CONNECTION": "2"}
    node = _node(sim, 1, master, tmp_path, env)  # the node first: it waits for the head
    head = _node(sim, 0, master, tmp_path, env)
    head.wait_ready(timeout=60)
    node.wait_line("SIM NODE", timeout=30)
    assert head.sim_json("MODEL")["tok_s"] == pytest.approx(40, rel=0.05)
    assert head.sim_json("MODEL")["network"] == "IB"
    for host, lines in _nccl_files(tmp_path).items():
        assert any(ln.endswith("NCCL INFO Using network IB") for ln in lines), host
        assert any(ln.endswith("NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.") for ln in lines)
        assert any(ln.endswith("NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 2.") for ln in lines)
        vias = {where for ln in lines if (m := VIA.search(ln)) for where in [m.group(2)]}
        assert vias == {"NET/IB/0", "NET/IB/1"}  # two RoCE ports, one per channel in turn
        assert not any("NCCL WARN" in ln for ln in lines)
        assert any(ln.endswith("Connected all rings, use ring PXN 0 GDR 0") for ln in lines)

    head.proc.send_signal(signal.SIGKILL)  # the head goes away: the node exits non-zero
    assert node.proc.wait(timeout=30) == 1
    node.wait_line("SIM EXIT code=1")
    assert "Lost the head node" in node.text()


def test_a_teardown_that_signals_every_node_is_not_a_lost_node(sim, tmp_path):
    master = free_port()
    head = _node(sim, 0, master, tmp_path)
    node = _node(sim, 1, master, tmp_path)
    head.wait_ready(timeout=60)
    node.wait_line("SIM NODE", timeout=30)
    head.signal_group(signal.SIGTERM)  # as a launcher stops every node
    node.signal_group(signal.SIGTERM)
    assert head.proc.wait(timeout=30) == 0 and node.proc.wait(timeout=30) == 0
    head.wait_line("SIM EXIT code=0")
    node.wait_line("SIM EXIT code=0")
    assert "died unexpectedly" not in head.text() and "Lost the head" not in node.text()


def test_a_head_whose_master_port_is_taken_exits_with_torchs_error(sim, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        head = _node(sim, 0, taken.getsockname()[1], tmp_path)
        assert head.proc.wait(timeout=30) == 1
    head.wait_line("SIM EXIT code=1 reason=master-port")
    assert "The server socket has failed to listen on any local network address." in head.text()


@pytest.mark.parametrize(("args", "says"), [
    (["--profile", "roce-2x-spark"], "--nnodes 1: profile roce-2x-spark spans 2 nodes"),
    (["--profile", "fast-tiny", "--nnodes", "2"], "profile fast-tiny is one node"),
    (["--profile", "roce-2x-spark", "--nnodes", "4"], "give --nnodes 2"),
    (["--profile", "roce-2x-spark", "--nnodes", "2", "--node-rank", "2"], "--node-rank must be within 0-1"),
    (["--profile", "roce-2x-spark", "--nnodes", "2", "--node-rank", "-1"], "--node-rank must be within 0-1"),
    (["--profile", "roce-2x-spark", "--nnodes", "2", "--headless"], "--headless is for node ranks > 0"),
    (["--profile", "roce-4x-spark", "--nnodes", "4", "--master-port", "0"], "--master-port must be within"),
    (["--profile", "roce-2x-spark", "--nnodes", "0"], "--nnodes must be within 1-64"),
])
def test_bad_node_flags_say_which_and_what_is_accepted(args, says):
    r = run_sim("serve", "--port", "0", *args)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
