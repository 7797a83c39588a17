"""A container's launch end to end through the real launch (ServerProcess), with the stand-in
``docker`` and ``podman`` of tests/launchers/ (case 31's fake, extended): the set reaches the
container, and nothing of it is left running whether the client forwarded SIGTERM, was SIGKILLed
or ran with ``--sig-proxy=false``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.unit.server._support import config
from tuner.launchers import container
from tuner.server import ServerProcess

FAKES = ROOT / "tests" / "launchers"


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    """Each test its own fake daemon (its containers, its names)."""
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "daemon"))


def _containers(tmp_path: Path) -> list[dict]:
    daemon = tmp_path / "daemon"
    return [json.loads(p.read_text()) for p in daemon.glob("*.json") if not p.name.endswith(".spec.json")]


def _command(client: str, *options: str) -> list[str]:
    return [str(FAKES / client), "run", *options, "-p", "{port}:8000", "fake/vllm-openai:v0.10.1.1", "--model", "m",
            "--tensor-parallel-size", "2"]


def _launch(tmp_path: Path, command: list[str], kill_client: bool = False) -> tuple[ServerProcess, str]:
    cfg = config(command)
    log = tmp_path / "logs" / "trial-0000.log"
    with ServerProcess(cfg, {"NCCL_PROTO": "LL", "NCCL_DEBUG": "INFO"}, log) as server:
        server.wait_ready(30)
        assert _containers(tmp_path), "the container runs"
        if kill_client:
            os.kill(server.pid, signal.SIGKILL)  # cannot be forwarded: the container runs on
            server.exited_within(5)
    return server, log.read_text()


@pytest.mark.parametrize(("client", "options", "kill"), [
    ("docker", ("--rm",), False),
    ("docker", (), True),  # SIGKILLed client, no --rm: the container would run on, then stay exited
    ("docker", ("--rm", "--sig-proxy=false"), False),  # SIGTERM ends the client, not the container
    ("podman", ("--rm",), True),
    ("podman", ("--sig-proxy=false", "--name", "mine"), False),
])
def test_the_set_reaches_the_container_and_nothing_stays(tmp_path, client, options, kill):
    server, log = _launch(tmp_path, _command(client, *options), kill_client=kill)
    assert "NCCL_PROTO set by environment to LL" in log  # -e NCCL_PROTO was added
    report = server.teardown_report
    assert report is not None and report.clean, report
    assert "stopped and removed" in report.launcher
    assert _containers(tmp_path) == []  # docker ps -a lists nothing
    assert "stopped and removed" in log.splitlines()[-1]  # the teardown line says it


def test_a_container_that_stays_is_said_at_teardown(tmp_path, monkeypatch):
    monkeypatch.setattr(container, "GONE_WAIT_S", 1.0)  # the bound on the wait, shortened
    # a client whose `stop` and `rm -f` cannot reach the daemon: the container is reported, never "0 survivors" alone
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = FAKES / "docker"
    shim = bin_dir / "docker"
    shim.write_text(f"#!/bin/sh\ncase \"$1\" in stop|rm) exit 1;; esac\nexec {real} \"$@\"\n")
    shim.chmod(0o755)
    command = [str(shim), "run", "--sig-proxy=false", "-p", "{port}:8000", "fake/vllm"]
    try:
        server, log = _launch(tmp_path, command)
        report = server.teardown_report
        assert report is not None and not report.clean
        assert report.left and "still running" in report.left[0]
        assert "still running" in log.splitlines()[-1]
    finally:
        for entry in _containers(tmp_path):
            if entry.get("pid"):
                with contextlib.suppress(OSError):
                    os.kill(entry["pid"], signal.SIGKILL)


def test_a_dead_runner_s_container_is_stopped_from_its_recorded_identity(tmp_path):
    """The runner dies (its server's client SIGKILLed, no teardown): a later runner finds the
    launch by the identity the runner file and the trial stored (a JSON round trip) and stops
    the container by name, though no process of it is left to signal."""
    from tuner.server import ServerIdentity, kill_leftover

    cfg = config(_command("docker", "--sig-proxy=false"))
    server = ServerProcess(cfg, {"NCCL_PROTO": "LL"}, tmp_path / "logs" / "trial-0000.log")
    server.__enter__()  # the runner dies inside: __exit__ (the teardown) never runs
    try:
        server.wait_ready(30)
        stored = server.identity().to_json()
        assert stored["launcher"][-3:-1] == ["--name", server.launcher.handle()[-2]]  # a name, no secret
        os.kill(server.pid, signal.SIGKILL)
        server.exited_within(5)
        assert _containers(tmp_path), "the container runs on without its client"
        kill_leftover(ServerIdentity.from_json(json.loads(json.dumps(stored))), grace_s=2)
        assert _containers(tmp_path) == []
    finally:
        for entry in _containers(tmp_path):
            if entry.get("pid"):
                with contextlib.suppress(OSError):
                    os.kill(entry["pid"], signal.SIGKILL)
        if server.pump is not None:
            server.pump.close()
