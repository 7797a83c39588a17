"""Request failures quote the server's own message: a 500 (JSON or text), a bare JSON error body
after a 200, and a 400 naming ``stream_options`` (then sent once more without it, the tokens
counted another way). Small stdlib servers on 127.0.0.1, real sockets."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from tuner.errors import ProbeError, ProbeHTTPError
from tuner.measure import make_client, run_probe
from tuner.server.failure import request_failure

Reply = Callable[[BaseHTTPRequestHandler, dict], None]


def _send(h: BaseHTTPRequestHandler, code: int, body: str, ctype: str) -> None:
    data = body.encode()
    h.send_response(code)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _stream(h: BaseHTTPRequestHandler, n: int) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.end_headers()
    for i in range(n):
        chunk = {"choices": [{"index": 0, "delta": {"content": f"{i} "}, "finish_reason": None}]}
        h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    h.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], tuple[str, list[dict]]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(reply: Reply) -> tuple[str, list[dict]]:
        bodies: list[dict] = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                bodies.append(body)
                reply(self, body)

        srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}", bodies

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _probe(url: str, **kw: object):  # type: ignore[no-untyped-def]
    return run_probe(url, model="m", max_tokens=8, warmup=0, repeats=kw.pop("repeats", 1),  # type: ignore[arg-type]
                     stall_timeout_s=5, **kw)  # type: ignore[arg-type]


DEAD = {"object": "error", "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "type": "InternalServerError", "param": None, "code": 500}


@pytest.mark.parametrize(("body", "ctype", "quoted"), [
    (json.dumps(DEAD), "application/json", "HTTP 500: EngineCore encountered an issue."),
    ("Internal Server Error", "text/plain", "HTTP 500: Internal Server Error"),
])
def test_a_500_quotes_the_servers_message(serve, body: str, ctype: str, quoted: str) -> None:
    url, _ = serve(lambda h, b: _send(h, 500, body, ctype))
    with pytest.raises(ProbeHTTPError) as ei:
        _probe(url)
    assert str(ei.value).startswith(quoted) and '"object"' not in str(ei.value)


class _Launch(SimpleNamespace):
    def alive(self) -> bool:
        return True

    def exited_within(self, timeout_s: float) -> bool:
        return False

    def nccl_warnings(self) -> list[str]:
        return []

    def served_warnings(self) -> frozenset[str]:
        return frozenset()


def test_the_fatal_line_of_the_tail_leads_a_500() -> None:
    tail = ["INFO 01-01 00:00:01 [api_server.py:1] Started",
            "node7:4242:4250 [1] enqueue.cc:2112 (ncclAllReduce) NCCL WARN Cuda failure 'an illegal memory access'",
            "INFO:     127.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error"]
    launch = _Launch(pump=SimpleNamespace(tail=lambda n=None: tail), proc=None, server=None)
    exc = ProbeHTTPError(500, "Internal Server Error")
    failed = request_failure(launch, exc, "during warmup")  # type: ignore[arg-type]
    assert str(failed.cause).startswith("NCCL WARN Cuda failure 'an illegal memory access' (HTTP 500: Internal"), \
        failed.cause


@pytest.mark.parametrize("body", [
    {"error": {"message": "CUDA error: an illegal memory access was encountered", "type": "server_error"}},
    {"object": "error", "message": "CUDA error: an illegal memory access was encountered", "code": 500},
])
@pytest.mark.parametrize("pretty", [False, True])
def test_a_bare_json_error_after_a_200_is_the_servers_message(serve, body: dict, pretty: bool) -> None:
    text = json.dumps(body, indent=2 if pretty else None)
    url, _ = serve(lambda h, b: _send(h, 200, text, "text/event-stream"))
    with pytest.raises(ProbeError) as ei:
        _probe(url)
    assert str(ei.value) == ("HTTP 200 with an error body instead of an event stream: "
                             "CUDA error: an illegal memory access was encountered")


REFUSALS = [
    json.dumps({"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"],
                            "msg": "Extra inputs are not permitted"}]}),
    json.dumps({"error": {"message": "Unrecognized request argument supplied: stream_options",
                          "type": "invalid_request_error"}}),
    "include_usage is not a valid option for this model",
]


@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_400_naming_stream_options_is_sent_again_without_it(serve, refusal: str) -> None:
    def reply(h: BaseHTTPRequestHandler, body: dict) -> None:
        if "stream_options" in body:
            _send(h, 400, refusal, "application/json")
        else:
            _stream(h, 8)

    url, bodies = serve(reply)
    with make_client(5) as client:
        result = _probe(url, repeats=3, client=client)
    assert [r.completion_tokens for r in result.runs] == [8, 8, 8]
    assert result.tokens_source == "max_tokens" and result.dropped == ("stream_options",)
    assert ["stream_options" in b for b in bodies] == [True, False, False, False]  # refused once, remembered
    assert "refused stream_options" in result.counting_note() and "as max_tokens" in result.counting_note()


def test_a_400_naming_another_field_is_not_retried(serve) -> None:
    url, bodies = serve(lambda h, b: _send(h, 400, json.dumps({"error": {"message": "temperature must be > 0"}}),
                                           "application/json"))
    with pytest.raises(ProbeHTTPError) as ei:
        _probe(url)
    assert str(ei.value) == "HTTP 400: temperature must be > 0" and len(bodies) == 1
