"""Servers for the probe and bench tests, one fixture each: the reference server
(tests/refserver.py) in a thread (``ref``) or a process (``ref_process``), the real-server cases
(tests/cases/NN-*/server.py, ``case``), all on real sockets on 127.0.0.1 (the simulator's
``sim`` is in tests/conftest.py); and ``tap``, the client-side record of when bytes moved
(tests/unit/measure/oracle.py)."""

from __future__ import annotations

import contextlib
import json
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
from tests.unit.measure.oracle import Tap

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "tests" / "cases"


class _InThread:
    """``ref(**opts)`` -> base_url of a new in-thread reference server; ``ref.timeline(url)``: its
    timeline records (tests/refserver.py), ``ref.server(url)``: the server itself."""

    def __init__(self) -> None:
        self.servers: dict[str, refserver.RefServer] = {}

    def __call__(self, **opts) -> str:
        server, url = refserver.start_in_thread(**opts)
        self.servers[url] = server
        return url

    def server(self, url: str) -> refserver.RefServer:
        return self.servers[url]

    def timeline(self, url: str) -> list[dict]:
        return list(self.servers[url].timeline)


class _Processes:
    """``ref_process(*cli_args)`` -> base_url of the reference server run as its own process (GIL
    not shared with the client); ``ref_process.timeline(url)``: its records, from its
    ``--timeline`` file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[subprocess.Popen] = []
        self.files: dict[str, Path] = {}

    def __call__(self, *args: str) -> str:
        path = self.folder / f"timeline-{len(self.procs)}.jsonl"
        proc, url = refserver.spawn(*args, "--timeline", str(path))
        self.procs.append(proc)
        self.files[url] = path
        return url

    def timeline(self, url: str) -> list[dict]:
        path = self.files[url]
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def ref():
    """Factory of in-thread reference servers (:class:`_InThread`), stopped afterwards."""
    servers = _InThread()
    yield servers
    for s in servers.servers.values():
        refserver.stop(s)


@pytest.fixture
def ref_process(tmp_path):
    """Factory of reference-server processes (:class:`_Processes`), killed afterwards."""
    procs = _Processes(tmp_path)
    yield procs
    for p in procs.procs:
        refserver.kill_process(p)


@pytest.fixture
def tap():
    """A :class:`tests.unit.measure.oracle.Tap`: ``tap.client()`` is an httpx client whose
    exchanges it records (closed afterwards)."""
    t = Tap()
    yield t
    t.close()


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

