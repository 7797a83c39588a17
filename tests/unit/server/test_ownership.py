"""Whose listener is on the port (tuner/server/ownership.py), with real sockets on 127.0.0.1 and
real processes: ours when a process of the launched tree holds it, a stranger's named by pid and
command, a second listener beside ours, a holder the system hides (accepted only while it is the
same socket, appeared after the launch and goes at the teardown), a container's listener."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tuner.errors import ForeignListener, MachineNotClean
from tuner.launchers import launcher_of
from tuner.server import ServerProcess, ownership
from tuner.server.ownership import ListenerCheck, Listening, socket_owners

from ._support import config, free_port

ME = psutil.Process(os.getpid())


def _listen(port: int, *, reuse_port: bool = False) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def _stranger(port: int, *, reuse_port: bool = False) -> subprocess.Popen:
    """Another process listening on ``port`` (not of any launched tree); prints "up" once it listens."""
    code = ("import socket, sys, time; s = socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            + ("s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1); " if reuse_port else "")
            + f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, "stranger-on-the-port"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def _proc_net(tmp_path: Path, port: int, inode: int, uid: int = 1001) -> Path:
    """A /proc/net stand-in whose tcp file shows one socket listening on ``port``."""
    d = tmp_path / "net"
    d.mkdir(exist_ok=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    line = (f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  {uid}        0 "
            f"{inode} 1 0000000000000000 100 0 0 10 0\n")
    (d / "tcp").write_text(header + line)
    (d / "tcp6").write_text(header)
    return d


def test_our_tree_holding_the_listener_is_ours_and_said_once():
    port = free_port()
    check = ListenerCheck("127.0.0.1", port)
    check.before_launch()
    assert check.check([ME], os.getpid(), "at readiness") == ""  # nothing listens yet
    with _listen(port):
        said = check.check([ME], os.getpid(), "at readiness")
        assert said is not None and said.startswith(f"listener on port {port}: pid {os.getpid()} (")
        assert said.endswith("of the launched tree holds it")
        assert check.check([ME], os.getpid(), "before the recorded runs") is None  # unchanged: not said again
        check.after_teardown(port_free=False, launched=os.getpid())  # seen as ours: the teardown judges the rest


def test_a_stranger_is_named_by_pid_and_command():
    port = free_port()
    check = ListenerCheck("127.0.0.1", port)
    check.before_launch()
    stranger = _stranger(port)
    try:
        with pytest.raises(ForeignListener) as info:
            check.check([], 4242, "at readiness")
    finally:
        stranger.kill()
        stranger.wait()
    err = info.value
    assert isinstance(err, MachineNotClean) and err.exit_code == 3 and err.port == port
    assert f"pid {stranger.pid} (python" in str(err) and " -c import socket" in str(err)
    assert "not by the server nccl-tune launched (pid 4242) (at readiness)" in str(err)


def test_a_second_listener_beside_ours_is_foreign():
    port = free_port()
    check = ListenerCheck("127.0.0.1", port)
    with _listen(port, reuse_port=True):
        stranger = _stranger(port, reuse_port=True)  # SO_REUSEPORT: the kernel would share the requests
        try:
            with pytest.raises(ForeignListener, match="beside our own listener") as info:
                check.check([ME], os.getpid(), "after the recorded runs")
        finally:
            stranger.kill()
            stranger.wait()
    assert f"pid {stranger.pid}" in str(info.value)


def test_a_hidden_holder_is_accepted_while_it_stays_the_same_socket(tmp_path, monkeypatch):
    port = free_port()
    net = _proc_net(tmp_path, port, inode=777)
    check = ListenerCheck("127.0.0.1", port, proc_net=net)
    check.before_launch()
    with _listen(port):  # it answers; the system hides who holds it
        monkeypatch.setattr(ownership, "listening", lambda p: [Listening(None, "127.0.0.1")])
        said = check.check([], 1, "at readiness")
        assert said is not None and "a listener whose holder the system hides" in said
        assert "a socket of uid 1001" in said and "it must go at our teardown" in said
        assert check.check([], 1, "before the recorded runs") is None
        _proc_net(tmp_path, port, inode=778)  # another socket took its place
        with pytest.raises(ForeignListener, match="the listening socket changed"):
            check.check([], 1, "after the recorded runs")
        _proc_net(tmp_path, port, inode=777)
        with pytest.raises(ForeignListener, match="outlived our server"):
            check.after_teardown(port_free=False, launched=1)
    (net / "tcp").write_text("header\n")  # gone with our teardown: it was ours
    check.after_teardown(port_free=True, launched=1)


def test_a_hidden_holder_that_answered_before_the_launch_is_foreign(tmp_path, monkeypatch):
    port = free_port()
    with _listen(port):
        check = ListenerCheck("127.0.0.1", port, proc_net=_proc_net(tmp_path, port, inode=9))
        check.before_launch()
        monkeypatch.setattr(ownership, "listening", lambda p: [Listening(None, "127.0.0.1")])
        with pytest.raises(ForeignListener, match="it answered before our launch"):
            check.check([], 1, "at readiness")


def test_a_containers_listener_is_accepted_for_a_docker_run(tmp_path):
    port = free_port()
    check = ListenerCheck("127.0.0.1", port, launcher_of(["/usr/bin/docker", "run", "img"]).listener_outside,
                          proc_net=tmp_path / "none")
    check.before_launch()
    proxy = _stranger(port)  # docker-proxy's place: a process outside the launched tree
    try:
        said = check.check([], 1, "at readiness")
        assert said is not None and "a container's listener" in said and f"pid {proxy.pid}" in said
    finally:
        proxy.kill()
        proxy.wait()
    check.after_teardown(port_free=True, launched=1)  # went with the teardown


def test_an_unreadable_system_list_falls_back_to_our_own_sockets(monkeypatch):
    port = free_port()
    monkeypatch.setattr(ownership, "listening", lambda p: None)  # psutil.AccessDenied (macOS without root)
    check = ListenerCheck("127.0.0.1", port)
    with _listen(port):
        said = check.check([ME], os.getpid(), "at readiness")
    assert said is not None and "seen in its own sockets" in said


def test_socket_owners_reads_listening_sockets_of_the_port(tmp_path):
    port = free_port()
    net = _proc_net(tmp_path, port, inode=12345, uid=0)
    assert socket_owners(port, net) == {12345: 0}
    assert socket_owners(port + 1, net) == {}
    assert socket_owners(port, tmp_path / "absent") is None
    with _listen(port) as s:
        real = socket_owners(port)
        assert real is not None and os.fstat(s.fileno()).st_ino in real and os.getuid() in real.values()


def test_a_server_whose_port_a_stranger_answers_is_never_ready(tmp_path):
    """A launch whose own process never binds (it sleeps) while a stranger answers on its port:
    readiness raises ForeignListener, and the launch's log does not call the stranger ours."""
    port = free_port()
    cfg = config([sys.executable, "-c", "import time; time.sleep(60)"], port=port)
    stranger = _stranger(port)
    try:
        with ServerProcess(cfg, {}, tmp_path / "t.log") as server:
            with pytest.raises(ForeignListener):
                server.check_listener("at readiness")
            # gone before the teardown, which would otherwise wait 10 s for the port to be free
            stranger.kill()
            stranger.wait()
    finally:
        stranger.kill()
        stranger.wait()
    assert "of the launched tree holds it" not in (tmp_path / "t.log").read_text()
