"""Model discovery over a server kind's routes (tuner/measure/client.py, find_model), against a
real stdlib HTTP server whose routes each test sets: the spellings of "no model list" (404,
an empty list, a 200 that is not JSON, no data at all), TGI's /info, SGLang's /get_model_info,
the fallback name, and the message that names the URL, its status and the key to set."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tuner.errors import ProbeHTTPError
from tuner.measure.client import FALLBACK_MODEL, find_model, refused_guess
from tuner.servers import GENERIC, kind_named

TGI = kind_named("tgi")
SGLANG = kind_named("sglang")


@pytest.fixture
def routes() -> Iterator[tuple[dict[str, tuple[int, bytes]], str]]:
    """A real server answering GET path -> (status, body) from the dict the test fills; any
    other path 404 with an empty body (axum's default)."""
    table: dict[str, tuple[int, bytes]] = {}

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            status, body = table.get(self.path, (404, b""))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield table, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _json(obj: object) -> tuple[int, bytes]:
    return 200, json.dumps(obj).encode()


def test_the_model_list_names_the_model_and_nothing_is_said(routes):
    table, url = routes
    table["/v1/models"] = _json({"data": [{"id": "org/m"}]})
    found = find_model(url, kind=TGI)
    assert (found.name, found.note, found.guessed) == ("org/m", "", False)


def test_tgi_before_2_3_answers_404_and_info_names_the_model(routes):
    table, url = routes
    table["/info"] = _json({"model_id": "meta-llama/Llama-3.1-8B", "version": "2.2.0"})
    found = find_model(url, kind=TGI)
    assert found.name == "meta-llama/Llama-3.1-8B" and not found.guessed
    assert f"GET {url}/v1/models answered 404 (TGI before 2.3 has no model list)" in found.note
    assert f"GET {url}/info" in found.note


def test_sglang_falls_back_to_get_model_info(routes):
    table, url = routes
    table["/v1/models"] = _json({"object": "list", "data": []})  # lists nothing
    table["/get_model_info"] = _json({"model_path": "Qwen/Qwen3-8B", "is_generation": True})
    found = find_model(url, kind=SGLANG)
    assert found.name == "Qwen/Qwen3-8B"
    assert "named no model (no data[0].id)" in found.note


@pytest.mark.parametrize("answer", [(404, b""), (200, b"<html>not json</html>"), _json({"data": []}),
                                    _json({"object": "list"}), _json({"data": [{"id": ""}]}), (405, b"")],
                         ids=["404", "200-not-json", "empty-list", "no-data", "empty-id", "405"])
def test_every_spelling_of_no_model_list_falls_back_to_the_commands_model(routes, answer):
    table, url = routes
    table["/v1/models"] = answer
    argv = ["my-server", "--model", "org/served", "--port", "8000"]
    found = find_model(url, kind=kind_named("vllm"), argv=argv)
    assert found.name == "org/served" and found.guessed
    assert f"GET {url}/v1/models" in found.note and "set server.model" in found.note


def test_nothing_named_anywhere_sends_a_placeholder_tgi_takes_any_name(routes):
    table, url = routes
    table["/info"] = _json({"version": "2.2.0"})  # no model_id
    found = find_model(url, kind=TGI, argv=["text-generation-launcher", "--num-shard", "2"])
    assert found.name == FALLBACK_MODEL and found.guessed
    assert "TGI serves any model name" in found.note
    assert found.stop == (f"GET {url}/v1/models answered 404 (TGI before 2.3 has no model list); GET {url}/info "
                          'named no model (no model_id): set server.model (TGI accepts any name, e.g. "tgi")')


def test_a_refused_guess_stops_naming_the_url_its_status_and_the_key(routes):
    _, url = routes
    found = find_model(url, kind=GENERIC)
    assert found.name == FALLBACK_MODEL
    refused = refused_guess(ProbeHTTPError(404, "The model `default` does not exist."), found)
    assert isinstance(refused, ProbeHTTPError) and refused.status == 404
    assert f"GET {url}/v1/models answered 404" in str(refused)
    assert "set server.model" in str(refused)
    other = ProbeHTTPError(500, "boom")
    assert refused_guess(other, found) is other  # only a refused name is the guess's fault


def test_another_error_status_names_the_url_and_the_key(routes):
    table, url = routes
    table["/v1/models"] = (500, b'{"error": {"message": "internal"}}')
    with pytest.raises(ProbeHTTPError) as err:
        find_model(url, kind=GENERIC)
    assert err.value.status == 500
    assert f"GET {url}/v1/models answered 500" in str(err.value) and "server.model" in str(err.value)
