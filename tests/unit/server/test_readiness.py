"""Readiness as servers mean it: loading is waited for, death is caught at once, the real
request judges a health endpoint that says 200. Real servers on 127.0.0.1 (tests/cases and
small python -c servers)."""

from __future__ import annotations

import httpx
import pytest

from tuner.errors import TrialFailed
from tuner.record.trial import Status
from tuner.server import ServerProcess
from tuner.server.readiness import says_loading

from ._support import case_command, config, one_token_request, python_server

# A stdlib server whose behaviour over time is set by a few variables; GET /health, POST streams.
TEMPLATE = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
T0 = time.time()
{setup}
def chunk(d): return f"data: {{json.dumps({{'choices':[{{'index':0,'delta':d,'finish_reason':None}}]}})}}\n\n".encode()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, body):
        b = body.encode(); self.send_response(code); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        code, body = health(time.time() - T0); self.reply(code, body)
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        code, body = completion(time.time() - T0)
        if code != 200: return self.reply(code, body)
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        self.wfile.write(chunk({{"content": "x"}})); self.wfile.write(b"data: [DONE]\n\n")
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def server_code(setup: str) -> list[str]:
    return python_server(TEMPLATE.format(setup=setup))


def test_case_07_health_200_while_loading_is_waited_for(tmp_path):
    cfg = config(case_command("07-health-200-while-loading"), ready_timeout_s=20)
    with ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(cfg.ready_timeout_s, ready_check=one_token_request(cfg))
        # ready once loaded, not while /health said 200 "loading" (the old code called it unhealthy at once)
        assert httpx.get(cfg.base_url + "/health").json() == {"status": "ok"}
        one_token_request(cfg)()  # and it measures: the real request works
    assert server.teardown_report is not None and server.teardown_report.clean


def test_requests_503_while_health_says_200_are_still_loading(tmp_path):
    # No loading word anywhere: only the real request tells; 503 means "not yet", then it serves.
    # The first three requests are answered 503 (counted, not timed), each printed to the log.
    cfg = config(server_code('health = lambda t: (200, "{}")\n'
                             'asked = []\n'
                             'def completion(t):\n'
                             '    asked.append(t)\n'
                             '    if len(asked) <= 3: print("answered 503", flush=True); return 503, "Service Unavailable"\n'
                             '    return 200, ""'))
    with ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(20, ready_check=one_token_request(cfg))
        one_token_request(cfg)()  # serving now
    assert (tmp_path / "log").read_text().splitlines().count("answered 503") == 3  # each 503 was waited through


def test_health_503_then_200_without_a_ready_check(tmp_path):
    # SGLang answers 503 on /health until its warm-up is done (here: its first three answers).
    cfg = config(server_code('asked = []\n'
                             'def health(t):\n'
                             '    asked.append(t)\n'
                             '    if len(asked) <= 3: print("answered 503", flush=True); return 503, ""\n'
                             '    return 200, "ok"\n'
                             'completion = lambda t: (200, "")'))
    with ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(20)
    assert (tmp_path / "log").read_text().splitlines().count("answered 503") == 3  # ready only after the 200


def test_engine_dead_503_with_a_fatal_log_line_is_crashed_at_once(tmp_path):
    # vLLM's /health answers 503 once its engine died while the API process lives on.
    setup = ('print("(EngineCore_DP0 pid=2) ERROR 01-01 00:00:01 [core.py:720] EngineCore encountered a fatal error.", flush=True)\n'
             'print("(EngineCore_DP0 pid=2) ERROR 01-01 00:00:01 [core.py:720] RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)\n'
             'print("(APIServer pid=1) ERROR 01-01 00:00:01 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.", flush=True)\n'
             'health = lambda t: (503, "")\ncompletion = lambda t: (500, "")')
    cfg = config(server_code(setup))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(60, ready_check=one_token_request(cfg))
    # crashed at once, by the log line: not the timeout's "not ready after 60 s"
    assert info.value.status == Status.CRASHED and "not ready after" not in info.value.cause
    assert info.value.cause.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert "still runs" in info.value.cause


def test_a_failing_real_request_is_unhealthy(tmp_path):
    cfg = config(server_code('health = lambda t: (200, "ok")\n'
                             'completion = lambda t: (500, \'{"error": {"message": "boom"}}\')'))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(20, ready_check=one_token_request(cfg))
    assert info.value.status == Status.UNHEALTHY and "HTTP 500" in info.value.cause and "boom" in info.value.cause


def test_a_failing_request_takes_its_cause_from_a_fatal_log_line(tmp_path):
    # The engine logs its OOM while answering the request with 500; the process lives on.
    setup = ('def completion(t):\n'
             '    print("(VllmWorker TP0 pid=3) ERROR 01-01 00:00:02 [x.py:1] torch.OutOfMemoryError: CUDA out of memory. '
             'Tried to allocate 2.00 GiB.", flush=True)\n'
             '    return 500, "Internal Server Error"\n'
             'health = lambda t: (200, "ok")')
    cfg = config(server_code(setup))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(20, ready_check=one_token_request(cfg))
    assert info.value.status == Status.UNHEALTHY  # the process still serves (badly): not a crash
    assert info.value.cause.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert "HTTP 500" in info.value.cause


def test_case_16_silent_engine_death_is_hung(tmp_path):
    cfg = config(case_command("16-engine-silent-death-hang"))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {"NCCL_ALGO": "Ring"}, tmp_path / "log") as server:
        server.wait_ready(20, ready_check=one_token_request(cfg, stall_s=2.0))
    assert info.value.status == Status.HUNG
    assert server.teardown_report is not None and server.teardown_report.clean
    with ServerProcess(cfg, {}, tmp_path / "log2") as server:  # the untuned server serves
        server.wait_ready(20, ready_check=one_token_request(cfg, stall_s=2.0))


def test_case_03_cause_is_the_engine_error_not_the_wrapper(tmp_path):
    cfg = config(case_command("03-engine-init-wrapper"))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(30)
    assert info.value.status == Status.CRASHED  # ended by the exit (status below), not the 30 s timeout
    assert info.value.cause.startswith("ValueError: No available memory for the cache blocks.")
    assert info.value.cause.endswith("(exit status 1)")


def test_not_ready_in_time_is_timeout_naming_the_last_answer(tmp_path):
    cfg = config(server_code('health = lambda t: (200, \'{"status": "loading"}\')\ncompletion = lambda t: (503, "")'))
    with pytest.raises(TrialFailed) as info, ServerProcess(cfg, {}, tmp_path / "log") as server:
        server.wait_ready(2, ready_check=one_token_request(cfg))
    assert info.value.status == Status.TIMEOUT
    assert "not ready after 2 s" in info.value.cause and "loading" in info.value.cause


def test_says_loading():
    assert says_loading('{"status": "loading"}') and says_loading('{"error": {"message": "model is loading"}}')
    assert says_loading("Server is starting") and not says_loading('{"status": "ok"}') and not says_loading("")
