"""Teardown as strong as before: case 18's worker leaves the session, renames itself and ignores
SIGTERM; nothing of the launch is left."""

from __future__ import annotations

import os
import re

import psutil

from tuner.server import ServerProcess

from ._support import case_command, config, marked, one_token_request, wait_for


def test_case_18_worker_in_its_own_session_is_killed(tmp_path):
    cfg = config(case_command("18-worker-new-session"))
    log = tmp_path / "log"
    with ServerProcess(cfg, {}, log) as server:
        server.wait_ready(20, ready_check=one_token_request(cfg))  # the first request starts the worker
        assert wait_for(lambda: "worker pid" in log.read_text())
        worker = psutil.Process(int(re.search(r"worker pid (\d+)", log.read_text())[1]))
        assert wait_for(lambda: worker.name().startswith("VLLM::Worker"))  # comm is cut at 15 characters
        assert os.getsid(worker.pid) != os.getsid(server.pid)  # out of the server's session and group
        assert psutil.Process(worker.pid).environ().get("TUNER_SERVER_ID") == server.marker
        marker = server.marker
    report = server.teardown_report
    assert report is not None and report.clean and report.killed and report.survivors == []
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert marked(marker) == []
