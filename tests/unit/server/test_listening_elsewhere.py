"""A server that announces another port than server.port is stopped at once, with both ports named."""

from __future__ import annotations

import pytest

from tuner.errors import ServerListensElsewhere
from tuner.record.trial import Status
from tuner.server import ServerProcess

from ._support import config, free_port, python_server, wait_for

# Listens on sys.argv[2] (not the configured port) and says so as uvicorn does.
UVICORN_LIKE = r"""
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
p = int(sys.argv[2])  # (not named "port": the launcher substitutes that placeholder in every argv item)
print("INFO:     Started server process [1]", flush=True)
print(f"INFO:     Uvicorn running on http://0.0.0.0:{p} (Press CTRL+C to quit)", flush=True)
HTTPServer(("127.0.0.1", p), BaseHTTPRequestHandler).serve_forever()
"""

# vLLM logs its arguments first, then loads for a long time before it listens.
VLLM_LIKE = r"""
import sys, time
print("(APIServer pid=1) INFO 11-03 05:51:44 [api_server.py:1839] vLLM API server version 0.11.0", flush=True)
print(f"(APIServer pid=1) INFO 11-03 05:51:44 [utils.py:233] non-default args: {{'model_tag': 'm', 'port': {sys.argv[2]}, 'model': 'm'}}", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("code", [UVICORN_LIKE, VLLM_LIKE], ids=["uvicorn", "vllm-args"])
def test_listening_on_another_port_stops_at_once(tmp_path, code):
    other = free_port()
    cfg = config([*python_server(code), str(other)], ready_timeout_s=600)
    with pytest.raises(ServerListensElsewhere) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(cfg.ready_timeout_s)
    err = info.value  # stopped by the announcement: the 600 s timeout would be a TIMEOUT, not this
    assert err.status == Status.CRASHED and err.port == other and err.configured == cfg.port
    assert f"listens on port {other}, but server.port is {cfg.port}" in err.cause and "{port}" in err.cause
    assert server.teardown_report is not None and server.teardown_report.clean


def test_announcing_the_configured_port_is_fine(tmp_path):
    cfg = config([*python_server(UVICORN_LIKE), "{port}"])
    with ServerProcess(cfg, {}, tmp_path / "log") as server:
        # BaseHTTPRequestHandler answers 501 to GET: never ready, but never "elsewhere" either.
        with pytest.raises(Exception) as info:
            server.wait_ready(1.5)
        assert not isinstance(info.value, ServerListensElsewhere) and "not ready after" in str(info.value)


# A router-like launcher: a worker announces its own port first, then the front end listens on
# the configured port (sglang_router starts workers on other ports). Each says which port a
# request reached; the worker is never ready, so a readiness poll of its port would never end.
ROUTER_LIKE = r"""
import sys, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
def handler(name, status):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            print(f"{name} GET {self.path}", flush=True)
            self.send_response(status); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    return H
worker = int(sys.argv[2])
threading.Thread(target=HTTPServer(("127.0.0.1", worker), handler("WORKER", 503)).serve_forever, daemon=True).start()
print(f"INFO:     Uvicorn running on http://127.0.0.1:{worker} (Press CTRL+C to quit)", flush=True)
time.sleep(1)
front = int(sys.argv[1])
print(f"INFO:     Uvicorn running on http://127.0.0.1:{front} (Press CTRL+C to quit)", flush=True)
HTTPServer(("127.0.0.1", front), handler("FRONT", 200)).serve_forever()
"""


def test_another_port_then_the_configured_one_is_fine(tmp_path):
    """Ready from the configured port's answer: the front end was asked, the worker never."""
    log = tmp_path / "log"
    cfg = config([*python_server(ROUTER_LIKE), str(free_port())])
    with ServerProcess(cfg, {}, log) as server:
        server.wait_ready(20)
        assert wait_for(lambda: "FRONT GET /" in log.read_text())
        assert "WORKER GET" not in log.read_text()
