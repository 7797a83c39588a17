"""A run ends at [DONE]: what a server sends after it (pings, or nothing, never closing) cannot
hold the run; an error body is read for a bounded time; a request with no response headers is
ProbeNoAnswer (a warm-up gate before readiness)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tuner.errors import ProbeHTTPError, ProbeNoAnswer
from tuner.measure.stream import stream_once


def _chunk(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _serve(after_done: str):
    stop = threading.Event()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if after_done == "held":
                stop.wait(60)
                return
            if after_done == "gate then slow first token":
                stop.wait(2.5)  # a warm-up gate holds the headers
            self.send_response(503 if after_done == "503 trickle" else 200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if after_done == "gate then slow first token":
                stop.wait(2.5)  # and the first token comes a while after them

            def send(data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            if after_done != "503 trickle":
                for i in range(5):
                    send(_chunk({"choices": [{"index": 0, "delta": {"content": f"{i} "}, "finish_reason": None}]}))
                send(_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
                send(_chunk({"choices": [], "usage": {"completion_tokens": 5}}) + b"data: [DONE]\n\n")
            while not stop.is_set():  # never closes
                if after_done in ("pings", "503 trickle"):
                    send(b": ping\n\n" if after_done == "pings" else b'{"error": "Loading model"} ')
                stop.wait(0.2)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, stop


@pytest.mark.parametrize("after_done", ["pings", "silence"])
def test_nothing_after_done_holds_the_run(after_done):
    srv, stop = _serve(after_done)
    try:
        t0 = time.monotonic()
        with httpx.Client() as client:
            m = stream_once(client, f"http://127.0.0.1:{srv.server_port}", model="m", prompt="p", max_tokens=5,
                            stall_timeout_s=60)
        assert m.completion_tokens == 5
        assert time.monotonic() - t0 < 20  # the drain is about a second, never the stall timeout of 60 s
    finally:
        stop.set()
        srv.shutdown()


def test_an_error_body_that_never_ends_is_read_for_a_bounded_time():
    srv, stop = _serve("503 trickle")
    try:
        t0 = time.monotonic()
        with httpx.Client() as client, pytest.raises(ProbeHTTPError) as err:
            stream_once(client, f"http://127.0.0.1:{srv.server_port}", model="m", prompt="p", max_tokens=5,
                        stall_timeout_s=60)
        assert err.value.status == 503 and "Loading model" in err.value.body_excerpt
        assert time.monotonic() - t0 < 20
    finally:
        stop.set()
        srv.shutdown()


def test_a_request_without_response_headers_is_no_answer():
    srv, stop = _serve("held")
    try:
        with httpx.Client() as client, pytest.raises(ProbeNoAnswer) as err:
            stream_once(client, f"http://127.0.0.1:{srv.server_port}", model="m", prompt="p", max_tokens=5,
                        stall_timeout_s=1.5)
        assert "no response headers" in str(err.value) and err.value.timeout_s == 1.5
    finally:
        stop.set()
        srv.shutdown()


def test_the_stall_clock_starts_at_the_response_headers():
    # held 2.5 s before the headers, then 2.5 s to the first token: 5 s from the send, but never
    # 4 s without a byte; the gate's wait is httpx's bound (sgl-project/sglang #33719)
    srv, stop = _serve("gate then slow first token")
    try:
        with httpx.Client() as client:
            m = stream_once(client, f"http://127.0.0.1:{srv.server_port}", model="m", prompt="p", max_tokens=5,
                            stall_timeout_s=4)
        assert m.completion_tokens == 5
    finally:
        stop.set()
        srv.shutdown()
