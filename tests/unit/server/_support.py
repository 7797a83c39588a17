"""Helpers for the launcher tests: configs around real servers and a real readiness request."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from tests.helpers import free_port
from tuner.errors import ProbeConnectError, ProbeDisconnected, ProbeHTTPError, ProbeStalled
from tuner.inputs.config import ServerConfig
from tuner.server import MARKER

CASES = Path(__file__).resolve().parents[2] / "cases"


def config(command: list[str], port: int | None = None, **kw: object) -> ServerConfig:
    """A ServerConfig for a test server; ``{port}`` in ``command`` is substituted at launch."""
    kw.setdefault("teardown_grace_s", 2)
    return ServerConfig(command=tuple(command), port=port or free_port(), **kw)  # type: ignore[arg-type]


def case_command(case: str) -> list[str]:
    """argv of a tests/cases server, started as the sweep starts it."""
    return [sys.executable, str(CASES / case / "server.py"), "{port}"]


def python_server(code: str) -> list[str]:
    """argv of a small python -c server; it gets the port as sys.argv[1]."""
    return [sys.executable, "-c", code, "{port}"]


def one_token_request(server: ServerConfig, stall_s: float = 3.0) -> Callable[[], None]:
    """The caller's readiness request: a streamed one-token chat completion read to its end,
    failing with the tuner.errors probe errors."""

    def check() -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "stream": True}
        try:
            with httpx.Client(timeout=httpx.Timeout(stall_s, connect=2.0)) as client, client.stream(
                    "POST", server.base_url + "/v1/chat/completions", json=body) as r:
                if r.status_code >= 400:
                    raise ProbeHTTPError(r.status_code, r.read().decode(errors="replace")[:500])
                for line in r.iter_lines():
                    if line.strip() == "data: [DONE]":
                        return
                raise ProbeDisconnected("stream ended without [DONE]")
        except httpx.ConnectError as exc:
            raise ProbeConnectError(str(exc)) from None
        except httpx.ReadTimeout:
            raise ProbeStalled(f"no chunk for {stall_s} s", stall_s) from None
        except httpx.RemoteProtocolError as exc:
            raise ProbeDisconnected(str(exc)) from None

    return check


def marked(marker: str) -> list[int]:
    """Pids of live processes carrying the launch marker."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == marker and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except psutil.Error:
            continue
    return found


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` passed; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
