"""ServerProcess as a context manager: started on entry, always torn down on leaving."""

from __future__ import annotations

import psutil
import pytest

from tuner.errors import TrialFailed
from tuner.record.trial import Status
from tuner.server import ServerProcess

from ._support import config, marked, python_server, wait_for

# Serves /health; prints its argv and NCCL environment; its child ignores SIGTERM.
SERVER = r"""
import json, os, signal, subprocess, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('child', 'ready', flush=True); time.sleep(600)"])
print("argv", json.dumps(sys.argv[2:]), flush=True)
print("nccl", json.dumps({k: v for k, v in os.environ.items() if k.startswith("NCCL_")}), flush=True)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_with_block_starts_with_flags_and_env_and_always_tears_down(tmp_path):
    cfg = config(python_server(SERVER))
    log = tmp_path / "server.log"
    inherited = {"PATH": "/usr/bin:/bin", "NCCL_PROTO": "LL128"}
    with pytest.raises(RuntimeError, match="inside the block"), \
            ServerProcess(cfg, {"NCCL_ALGO": "Ring"}, log, flags=["--disable-custom-all-reduce"],
                          inherited=inherited) as server:
        assert server.wait_ready(20) > 0
        marker, pid = server.marker, server.pid
        assert server.removed == ["NCCL_PROTO"]
        assert wait_for(lambda: "child ready" in log.read_text())
        raise RuntimeError("inside the block")
    report = server.teardown_report
    assert report is not None and report.clean and report.killed  # the child ignored SIGTERM
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert marked(marker) == []
    text = log.read_text()
    assert 'argv ["--disable-custom-all-reduce"]' in text
    assert 'nccl {"NCCL_ALGO": "Ring"}' in text  # the inherited NCCL_PROTO was removed
    assert "[nccl-tune] flags: ['--disable-custom-all-reduce']" in text and "teardown: SIGKILL needed" in text
    assert server.teardown() is report  # idempotent


def test_a_command_that_cannot_start_is_crashed(tmp_path):
    cfg = config(["/nonexistent/vllm", "serve", "--port", "{port}"])
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log"):
        pass
    assert info.value.status == Status.CRASHED and "could not start /nonexistent/vllm" in info.value.cause
