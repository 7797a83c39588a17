"""Servers for the probe tests: the reference server (tests/refserver.py, in a thread or a
process), the real-server cases (tests/cases/NN-*/server.py) and the simulator, all on real
sockets on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests import refserver  # the independent reference server (stdlib only)
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "tests" / "cases"


@pytest.fixture
def ref():
    """Factory: ref(**opts) -> base_url of an in-thread reference server, stopped afterwards."""
    servers = []

    def start(**opts):
        server, url = refserver.start_in_thread(**opts)
        servers.append(server)
        return url

    yield start
    for s in servers:
        refserver.stop(s)


@pytest.fixture
def serve():
    """Factory: serve(argv, env=None, ready="/v1/models") -> base_url of a server process.

    ``{port}`` in argv is replaced by a free port; the call returns once ``GET ready`` answers
    (any status: the server is up); the process and every child it started (the simulator's
    TP workers) are killed afterwards.
    """
    procs = []

    def start(argv: list[str], env: dict[str, str] | None = None, ready: str = "/v1/models",
              timeout_s: float = 30.0, headers: dict[str, str] | None = None) -> str:
        port = free_port()
        full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
        proc = subprocess.Popen([a.replace("{port}", str(port)) for a in argv], cwd=ROOT, env=full_env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                httpx.get(url + ready, timeout=1.0, headers=headers)
                return url
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv} did not start (exit {proc.poll()})") from None
                time.sleep(0.05)

    yield start
    for p in procs:
        try:
            children = psutil.Process(p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        p.kill()
        p.wait(5)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(children, timeout=5)


@pytest.fixture
def case(serve):
    """Factory: case("01-sse-ping-stall", env=None) -> base_url of that case's own server.py."""

    def start(name: str, env: dict[str, str] | None = None) -> str:
        return serve([sys.executable, str(CASES / name / "server.py"), "{port}"], env=env)

    return start


@pytest.fixture
def sim(serve):
    """Factory: sim(*args) -> base_url of ``python -m tuner.sim serve --profile fast-tiny ARGS``."""

    def start(*args: str) -> str:
        argv = [sys.executable, "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}", *args]
        return serve(argv)

    return start
