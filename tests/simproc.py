"""Helpers of the simulator tests: real ``python -m tuner.sim`` processes in their own session on
free 127.0.0.1 ports, their stderr collected; every process group is SIGKILLed at the end."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if not k.startswith(("NCCL_", "SIM_")) and k != "CUDA_DEVICE_MAX_CONNECTIONS"}


def sim_env(extra: dict | None = None) -> dict:
    """The test environment without NCCL/SIM variables, plus ``extra``."""
    env = dict(CLEAN_ENV, PYTHONPATH=str(ROOT), SIM_WORKER_MAX_LIFETIME_S="120")
    env.update(extra or {})
    return env


class Sim:
    """One ``python -m tuner.sim serve`` process in its own session; stderr collected. With
    ``pipe``, stdout and stderr share one pipe as nccl-tune gives a server: ``raw`` holds every
    byte in arrival order and ``lines`` is it split at newlines (a SIM line may then follow a
    cut NCCL line on the same line)."""

    def __init__(self, *args, env=None, profile="fast-tiny", load=0.2, workers=0, pipe=False):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "tuner.sim", "serve", "--port", str(self.port),
               "--profile", profile, "--load-time", str(load), "--workers", str(workers),
               "--noise", "0", "--launch-noise", "0", "--seed", "1", *args]
        streams = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT) if pipe else \
            dict(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=sim_env(env), stdin=subprocess.DEVNULL,
                                     start_new_session=True, **streams)
        self.pgid = self.proc.pid
        self.lines: list[str] = []
        self.raw = bytearray()
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read_pipe if pipe else self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("SIM READY"):
                self.ready.set()

    def _read_pipe(self):
        pending = b""
        while chunk := self.proc.stdout.read1(65536):
            self.raw += chunk
            *done, pending = (pending + chunk).split(b"\n")
            for line in done:
                text = line.decode(errors="replace")
                self.lines.append(text)
                if "SIM READY" in text:
                    self.ready.set()

    def all_output(self, timeout=10.0) -> bytes:
        """Every byte the server's pipe carried, once the server and its workers closed it."""
        self.reader.join(timeout)
        assert not self.reader.is_alive(), "the pipe is still open"
        return bytes(self.raw)

    def wait_ready(self, timeout=20.0) -> None:
        assert self.ready.wait(timeout), "server not ready:\n" + self.text()

    def text(self) -> str:
        return "\n".join(self.lines)

    def sim_json(self, tag: str) -> dict:
        for line in self.lines:
            if f"SIM {tag} " in line:
                return json.loads(line[line.index(f"SIM {tag} ") + len(tag) + 5:])
        raise AssertionError(f"no SIM {tag} line:\n{self.text()}")

    def schedules(self, count: int, timeout: float = 8.0) -> list[dict]:
        """``{"due": [...], "batch": [...]}`` of the first ``count`` streams (``--log-schedule``:
        one ``SIM SCHEDULE`` line after each), waiting for them up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            found = [json.loads(ln[len("SIM SCHEDULE "):]) for ln in self.lines if ln.startswith("SIM SCHEDULE ")]
            if len(found) >= count:
                return found[:count]
            assert time.monotonic() < deadline, f"{len(found)} of {count} SIM SCHEDULE lines:\n{self.text()}"
            time.sleep(0.02)

    def ready_tok_s(self) -> float:
        line = next(ln for ln in self.lines if "SIM READY" in ln)
        return float(re.search(r" tok_s=([\d.]+)", line).group(1))

    def wait_line(self, needle: str, timeout=8.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in ln for ln in self.lines):
            assert time.monotonic() < deadline, f"{needle!r} not logged:\n{self.text()}"
            time.sleep(0.02)

    def group(self) -> list[int]:
        """Live (non-zombie) processes of the server's process group."""
        out = []
        for p in psutil.process_iter(["status"]):
            try:
                if os.getpgid(p.pid) == self.pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    out.append(p.pid)
            except (ProcessLookupError, psutil.Error):
                pass
        return out

    def signal_group(self, sig) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, sig)

    def wait_group_gone(self, timeout=8.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.proc.poll()
            if not self.group():
                return True
            time.sleep(0.05)
        return False

    def finish(self, timeout=10.0) -> int:
        """SIGTERM the group, wait for the server, return its status; the log is complete."""
        self.signal_group(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self.wait_line("SIM EXIT")
        return code

    def close(self):
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def chat(content, *, max_tokens=16, ignore_eos=False, stream=True, **extra):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "ignore_eos": ignore_eos, "stream": stream, "stream_options": {"include_usage": True},
            **extra}


def stream_chunks(url, body, timeout=10.0, path="/v1/chat/completions"):
    """(list of (t, chunk dict), done flag) of one streamed request."""
    chunks, done = [], False
    with httpx.Client(timeout=timeout) as c, c.stream("POST", url + path, json=body) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append((time.perf_counter(), json.loads(line[6:])))
    return chunks, done


def content_of(chunks):
    return "".join(c["choices"][0]["delta"].get("content", "") for _, c in chunks
                   if c.get("choices"))


def content_deltas(url, body, timeout):
    """Content deltas received before the stream ended or failed; re-raises httpx errors after
    recording what arrived (``exc.received``)."""
    received = []
    try:
        with httpx.Client(timeout=timeout) as c, c.stream(
                "POST", url + "/v1/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    d = json.loads(line[6:])
                    if d["choices"] and "content" in d["choices"][0]["delta"]:
                        received.append(d)
    except httpx.HTTPError as exc:
        exc.received = received
        raise
    return received


def run_sim(*args, env=None, timeout=30) -> subprocess.CompletedProcess:
    """``python -m tuner.sim ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "tuner.sim", *args], cwd=ROOT, env=sim_env(env),
                          capture_output=True, text=True, timeout=timeout)
