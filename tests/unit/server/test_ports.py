"""Ports: bindability (TIME_WAIT included) before each launch, and an address in use at
start-up as a machine fault. Case 08's own server relaunched back to back on one fixed port."""

from __future__ import annotations

import socket

import pytest

from tuner.errors import MachineFault, MachineNotClean, PortBusy, TrialFailed
from tuner.record.trial import Status
from tuner.server import ServerProcess, wait_port_bindable
from tuner.server.ports import port_bindable, port_users

from ._support import case_command, config, free_port, one_token_request


def test_a_listener_makes_the_port_unbindable_and_is_named(tmp_path):
    port = free_port()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        assert not port_bindable(port)
        with pytest.raises(PortBusy) as info:
            wait_port_bindable("127.0.0.1", port, timeout_s=1.0, poll_s=0.2)
        assert "could not be bound after 1 s" in str(info.value)  # it waited out its timeout, then said so
    assert isinstance(info.value, MachineNotClean) and info.value.exit_code == 3
    assert f"port {port}" in str(info.value) and "listened on by pid" in str(info.value)
    assert port_bindable(port) and wait_port_bindable("127.0.0.1", port, timeout_s=1.0) < 0.5


def test_case_08_relaunched_back_to_back_on_one_port(tmp_path):
    cfg = config(case_command("08-port-time-wait"), port=free_port())
    with ServerProcess(cfg, {}, tmp_path / "first.log") as server:
        server.wait_ready(20, ready_check=one_token_request(cfg))
        for _ in range(3):
            one_token_request(cfg)()  # HTTP/1.0: the server closes, its side keeps TIME_WAIT
    assert server.teardown_report is not None and server.teardown_report.port_free  # nothing listens...
    assert not port_bindable(cfg.port)  # ...but a server without SO_REUSEADDR cannot bind yet
    assert "TIME_WAIT" in port_users(cfg.port)

    # Launched anyway, it fails with "address already in use": the machine's fault, not the set's.
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {"NCCL_ALGO": "Ring"}, tmp_path / "second.log") as s2:
        s2.wait_ready(20, ready_check=one_token_request(cfg))
    # a machine fault, from the log line, not the 20 s timeout (that would be TIMEOUT)
    assert isinstance(info.value, MachineFault) and info.value.status == Status.MACHINE_FAULT
    assert not Status(info.value.status).blames_set
    assert info.value.port == cfg.port and "Address already in use" in info.value.cause

    # What the sweep does: wait until the port binds (TIME_WAIT lasts about 60 s), then relaunch
    # the set: tests/e2e/test_cases.py::test_08 waits it out for real, once.
    with pytest.raises(PortBusy, match="TIME_WAIT"):
        wait_port_bindable(cfg.host, cfg.port, timeout_s=1.0)
