"""Ending a launch: every process it started gone, the port free, the GPU memory back.

Teardown is SIGTERM to the process group, a grace period, then SIGKILL, and returns only when no
descendant is left: vLLM's EngineCore and TP workers can outlive a killed API server and rename
themselves (``VLLM::Worker_TP1``, vllm/v1/executor/multiproc_executor.py), so descendants are
tracked while the server runs (:class:`LaunchProcesses`) and every process carrying the launch's
marker (:data:`tuner.server.identity.MARKER`) is found again at teardown, whatever its session or
name. What the launcher started outside the launched tree (a container, a Slurm step) is its to
end once the tree is gone (:meth:`tuner.launchers.Launcher.stop`), and what it could not end is
said. A server a dead runner left behind is found by its recorded identity (:func:`kill_leftover`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psutil

from tuner.launchers import Launcher, launcher_of
from tuner.server import gpu
from tuner.server.identity import MARKER, ServerIdentity
from tuner.server.ports import port_in_use

__all__ = ["LaunchProcesses", "TeardownReport", "kill_leftover", "tear_down"]


@dataclass
class TeardownReport:
    """How a teardown went: ``killed`` if SIGKILL was needed, ``survivors`` (pids, should be
    empty), ``duration_s`` (s), ``port_free`` (nothing listens on the port any more; TIME_WAIT
    sockets may remain, see :func:`tuner.server.ports.wait_port_bindable`), ``gpu`` message or
    None, ``error`` if the teardown itself failed, ``launcher``: what the launcher's own teardown
    did, in words (``container nccl-tune-31 stopped and removed``; empty for a plain process),
    ``left``: what it could not end (``container NAME still running``; should be empty)."""

    killed: bool = False
    survivors: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    port_free: bool = True
    gpu: str | None = None
    error: str = ""
    launcher: str = ""
    left: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True when nothing of the server remains: no process, port free, GPU memory back."""
        return not self.survivors and not self.left and self.port_free and self.gpu is None and not self.error


def marked_processes(marker_value: str) -> list[psutil.Process]:
    """Every live process whose environment has ``TUNER_SERVER_ID=marker_value``."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == marker_value:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


class LaunchProcesses:
    """The processes of one launch: the ``leader``'s tree while it runs, every descendant
    :meth:`track` saw (one that later leaves the tree is still found) and every process carrying
    ``marker``. ``leader`` is set once the server is spawned."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.leader: subprocess.Popen[bytes] | None = None
        self._seen: dict[int, float] = {}  # pid -> create_time, so a reused pid is never hit

    def track(self) -> None:
        """Remember every descendant of the leader seen now."""
        if self.leader is None:
            return
        try:
            for child in psutil.Process(self.leader.pid).children(recursive=True):
                self._seen.setdefault(child.pid, child.create_time())
        except psutil.Error:
            pass

    def running(self) -> list[psutil.Process]:
        """Every process of the launch that still runs (zombies excluded)."""
        procs: dict[int, psutil.Process] = {}
        if self.leader is not None and self.leader.poll() is None:
            try:
                main = psutil.Process(self.leader.pid)
                procs[main.pid] = main
                for c in main.children(recursive=True):
                    procs[c.pid] = c
            except psutil.Error:
                pass
        for pid, ctime in self._seen.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - ctime) < 0.5:
                    procs[pid] = p
            except psutil.Error:
                pass
        for p in marked_processes(self.marker):
            procs[p.pid] = p
            with contextlib.suppress(psutil.Error):
                self._seen.setdefault(p.pid, p.create_time())
        return [p for p in procs.values() if _running(p)]

    def pids(self) -> set[int]:
        """Every pid known to belong to the launch: the leader and each process seen so far."""
        return ({self.leader.pid} if self.leader is not None else set()) | set(self._seen)


def tear_down(processes: LaunchProcesses, *, host: str, port: int, grace_s: float, kill_wait_s: float = 15.0,
              gpu_before: list[int] | None = None, gpu_timeout_s: float = 60.0,
              launcher: Launcher | None = None) -> TeardownReport:
    """SIGTERM the leader's group and every process of the launch, wait ``grace_s`` s, SIGKILL
    what remains and wait up to ``kill_wait_s`` s for all to be gone; then the ``launcher`` ends
    what it started outside them (:meth:`tuner.launchers.Launcher.stop`, a container by name
    even when its client was SIGKILLed); then wait (up to 10 s) until
    nothing listens on ``host:port`` and (with NVML) up to ``gpu_timeout_s`` s until GPU memory is
    back to ``gpu_before`` (bytes per GPU, :func:`tuner.server.gpu.used_bytes`). A launch that
    never started gives an empty report."""
    report = TeardownReport()
    leader = processes.leader
    if leader is None:
        return report
    t0 = time.monotonic()
    processes.track()
    _signal_group(leader.pid, signal.SIGTERM)
    for p in processes.running():
        _signal(p, signal.SIGTERM)
    remaining = _wait_gone(processes.running, grace_s)
    if remaining:
        report.killed = True
        _signal_group(leader.pid, signal.SIGKILL)
        for p in remaining:
            _signal(p, signal.SIGKILL)
        remaining = _wait_gone(processes.running, kill_wait_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        leader.wait(timeout=5)
    report.survivors = [p.pid for p in remaining]
    if launcher is not None:
        stopped = launcher.stop(grace_s)
        report.launcher, report.left = stopped.said, list(stopped.left)
    deadline = time.monotonic() + 10.0
    while port_in_use(host, port) and time.monotonic() < deadline:
        time.sleep(0.2)
    report.port_free = not port_in_use(host, port)
    report.gpu = gpu.wait_released(gpu_before, gpu_timeout_s)
    report.duration_s = time.monotonic() - t0
    return report


def kill_leftover(identity: ServerIdentity, grace_s: float = 10.0) -> list[int]:
    """Tear down a server a dead runner left behind, found by its recorded identity.

    Kills the recorded process group (only if its leader's start time matches, so a reused
    pid is never hit) and every process carrying the launch's marker, then stops what its
    launcher started outside them (a container, a Slurm step: ``identity.launcher``). Returns
    the pids that were signalled.
    """
    victims = {p.pid: p for p in marked_processes(identity.marker)} if identity.marker else {}
    pgid, started = identity.pgid, identity.create_time
    if pgid is not None and pgid > 0 and started is not None:
        try:
            leader = psutil.Process(pgid)
            if abs(leader.create_time() - started) < 0.5:
                victims[leader.pid] = leader
                for c in leader.children(recursive=True):
                    victims[c.pid] = c
        except psutil.Error:
            pass
    procs = [p for p in victims.values() if _running(p)]
    for p in procs:
        _signal(p, signal.SIGTERM)
    rest = _wait_gone(lambda: [p for p in procs if _running(p)], grace_s)
    for p in rest:
        _signal(p, signal.SIGKILL)
    _wait_gone(lambda: [p for p in procs if _running(p)], 10.0)
    if identity.launcher:  # a container or a step outlives its client: stop it by name
        leftover = launcher_of(identity.launcher)
        leftover.prepare(())
        leftover.stop(grace_s)
    return [p.pid for p in procs]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(p: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.Error):
        p.send_signal(sig)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_gone(victims: Callable[[], Iterable[psutil.Process]], timeout_s: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = list(victims())
        if not alive or time.monotonic() >= deadline:
            return alive
        psutil.wait_procs(alive, timeout=min(0.2, max(0.01, deadline - time.monotonic())))
