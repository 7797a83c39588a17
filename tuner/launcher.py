"""Start the server under one environment, wait until it is ready, tear it down completely.

The server runs as an argv list (never a shell) in its own session. Teardown is SIGTERM to
the process group, a grace period, then SIGKILL, and returns only when no descendant is left:
vLLM's EngineCore and TP workers outlive a killed API server and rename themselves
(REFERENCE.md section 6), so descendants are tracked while the server runs and every process
carrying this launch's marker variable is found again at teardown, whatever its session or name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tuner import gpu, nccl_env
from tuner.config import ServerConfig
from tuner.errors import TrialFailed
from tuner.logtail import LogPump, extract_cause

#: Set in every server's environment; its value identifies the launch across session changes.
MARKER = "TUNER_SERVER_ID"

#: The trial's server did not give a measurable run (status, cause): see tuner.errors.
LaunchFailed = TrialFailed


def build_env(inherited: Mapping[str, str], server_env: Mapping[str, str],
              trial_env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The server's environment and the inherited tuning variables removed from it.

    Every inherited ``NCCL_*`` and ``CUDA_DEVICE_MAX_CONNECTIONS`` is dropped, for the baseline
    and for every trial alike, so a user's shell cannot leak tuning into any measurement; then
    ``server_env`` (fixed for all trials) and ``trial_env`` are applied. Returns
    ``(env, removed_names)``.
    """
    removed = sorted(k for k in inherited if nccl_env.is_tuning_variable(k))
    env = {k: v for k, v in inherited.items() if not nccl_env.is_tuning_variable(k)}
    env.update(server_env)
    env.update(trial_env)
    return env, removed


@dataclass
class TeardownReport:
    """How a teardown went: ``killed`` if SIGKILL was needed, ``survivors`` (pids, should be
    empty), ``duration_s`` (s), ``port_free`` after teardown, ``gpu`` message or None."""

    killed: bool = False
    survivors: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    port_free: bool = True
    gpu: str | None = None

    @property
    def clean(self) -> bool:
        """True when nothing of the server remains: no process, port free, GPU memory back."""
        return not self.survivors and self.port_free and self.gpu is None


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def port_holder(port: int) -> str:
    """Describe who listens on ``port`` (pid, name, command line), as far as psutil can see."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    p = psutil.Process(conn.pid)
                    return f"pid {p.pid} ({p.name()}: {' '.join(p.cmdline())[:160]})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.AccessDenied, PermissionError):
        pass
    return "an unknown process"


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


class ServerProcess:
    """One launch of the server for one trial.

    ``env`` is the trial's tuned variables (``{}`` for the baseline). Output goes to
    ``log_path`` (capped at ``server.log_max_bytes``, secrets scrubbed). Use :meth:`start`,
    :meth:`wait_ready`, then always :meth:`teardown`.
    """

    def __init__(self, server: ServerConfig, env: Mapping[str, str], log_path: Path,
                 inherited: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.trial_env = dict(env)
        self.log_path = log_path
        full, self.removed = build_env(os.environ if inherited is None else inherited, server.env, env)
        self.marker = uuid.uuid4().hex
        full[MARKER] = self.marker
        self._env = full
        self._secrets = nccl_env.secret_values(full)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pump: LogPump | None = None
        self.create_time = 0.0
        self._tracked: dict[int, float] = {}
        self._gpu_before: list[int] | None = None

    # -- start ---------------------------------------------------------------------------
    def start(self, gpu_before: list[int] | None = None) -> None:
        """Spawn the server in a new session; raises LaunchFailed('crashed') if it cannot exec."""
        self._gpu_before = gpu_before
        argv = self.server.argv()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as f:
            shown = {k: v for k, v in nccl_env.redact(self.trial_env).items()}
            f.write(f"[nccl-tune] argv: {nccl_env.scrub(' '.join(argv), self._secrets)}\n"
                    f"[nccl-tune] trial env: {shown}\n"
                    f"[nccl-tune] removed inherited: {self.removed}\n")
        try:
            self.proc = subprocess.Popen(argv, env=self._env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError as exc:
            with open(self.log_path, "a") as f:
                f.write(f"[nccl-tune] could not start: {exc}\n")
            raise LaunchFailed("crashed", f"could not start {argv[0]}: {exc.strerror or exc}") from None
        try:
            self.create_time = psutil.Process(self.proc.pid).create_time()
        except psutil.Error:
            self.create_time = time.time()
        self.pump = LogPump(self.proc.stdout, self.log_path, max_bytes=self.server.log_max_bytes,
                            secrets=self._secrets)

    @property
    def pid(self) -> int:
        """The server's pid (also its process group and session id)."""
        assert self.proc is not None
        return self.proc.pid

    def identity(self) -> dict[str, object]:
        """What a later runner needs to find this server again: pid, pgid, start time, marker."""
        return {"pid": self.pid, "pgid": self.pid, "create_time": self.create_time, "marker": self.marker,
                "port": self.server.port}

    def alive(self) -> bool:
        """True while the server's main process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def exited_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` s for the main process to exit; True if it has."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def crash_cause(self) -> str:
        """One line explaining an exit: the log's cause, else the exit status."""
        if self.pump:
            self.pump.drain(1.0)  # the last lines (the cause) may still be in the pipe
        tail = self.pump.tail() if self.pump else []
        code = self.proc.poll() if self.proc else None
        cause = extract_cause(tail)
        exit_text = f"exit status {code}" if code is not None and code >= 0 else f"killed by signal {-code}" if code else ""
        return f"{cause} ({exit_text})" if cause and exit_text else cause or exit_text or "no output"

    def _track(self) -> None:
        """Remember every descendant seen, so ones that later leave the tree are still killed."""
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                self._tracked.setdefault(child.pid, child.create_time())
        except psutil.Error:
            pass

    # -- readiness -----------------------------------------------------------------------
    def wait_ready(self, timeout_s: float, poll_s: float = 0.25) -> float:
        """Poll the health path every ``poll_s`` s until HTTP 200; return launch-to-ready (s).

        Fails fast: a server that exits is noticed within ``poll_s`` (LaunchFailed 'crashed'
        with the log's cause); not ready within ``timeout_s`` gives LaunchFailed 'timeout'.
        Falls back to ``/v1/models`` when the health path answers 404.
        """
        start = time.monotonic()
        path = self.server.health_path
        with httpx.Client(timeout=httpx.Timeout(5.0, connect=1.0)) as client:
            while True:
                self._track()
                if not self.alive():
                    raise LaunchFailed("crashed", self.crash_cause())
                try:
                    r = client.get(self.server.base_url + path)
                    if r.status_code == 200:
                        return time.monotonic() - start
                    if r.status_code == 404 and path != "/v1/models":
                        path = "/v1/models"
                except httpx.HTTPError:
                    pass
                if time.monotonic() - start > timeout_s:
                    raise LaunchFailed("timeout", f"not ready after {timeout_s:.0f} s "
                                       f"(last log line: {(self.pump.tail(1) or ['none'])[0][:160]})")
                time.sleep(poll_s)

    # -- teardown ------------------------------------------------------------------------
    def _victims(self) -> list[psutil.Process]:
        procs: dict[int, psutil.Process] = {}
        if self.alive():
            try:
                main = psutil.Process(self.pid)
                procs[main.pid] = main
                for c in main.children(recursive=True):
                    procs[c.pid] = c
            except psutil.Error:
                pass
        for pid, ctime in self._tracked.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - ctime) < 0.5:
                    procs[pid] = p
            except psutil.Error:
                pass
        for p in marked_processes(self.marker):
            procs[p.pid] = p
        return [p for p in procs.values() if _running(p)]

    def teardown(self, grace_s: float | None = None, kill_wait_s: float = 15.0,
                 gpu_timeout_s: float = 60.0) -> TeardownReport:
        """SIGTERM the group and every tracked process, wait ``grace_s`` (default the server's
        ``teardown_grace_s``), SIGKILL what remains, and wait for all to be gone.

        Then checks that the port is free and (with NVML) the GPU memory is back to its
        pre-launch level. Never raises; the report says what, if anything, survived.
        """
        report = TeardownReport()
        if self.proc is None:
            return report
        grace = self.server.teardown_grace_s if grace_s is None else grace_s
        t0 = time.monotonic()
        self._track()
        _signal_group(self.pid, signal.SIGTERM)
        for p in self._victims():
            _signal(p, signal.SIGTERM)
        remaining = _wait_gone(self._victims, grace)
        if remaining:
            report.killed = True
            _signal_group(self.pid, signal.SIGKILL)
            for p in remaining:
                _signal(p, signal.SIGKILL)
            remaining = _wait_gone(self._victims, kill_wait_s)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        report.survivors = [p.pid for p in remaining]
        deadline = time.monotonic() + 10.0
        while port_in_use(self.server.host, self.server.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        report.port_free = not port_in_use(self.server.host, self.server.port)
        report.gpu = gpu.wait_released(self._gpu_before, gpu_timeout_s)
        report.duration_s = time.monotonic() - t0
        if self.pump:
            self.pump.note(f"teardown: {'SIGKILL needed' if report.killed else 'exited on SIGTERM'}, "
                           f"{len(report.survivors)} survivors, port free {report.port_free}, "
                           f"{report.duration_s:.1f} s")
            self.pump.close()
        return report


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.Error:
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(victims, timeout_s: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = victims()
        if not alive or time.monotonic() >= deadline:
            return alive
        psutil.wait_procs(alive, timeout=min(0.2, max(0.01, deadline - time.monotonic())))


def kill_leftover(identity: Mapping[str, object], grace_s: float = 10.0) -> list[int]:
    """Tear down a server a dead runner left behind, found by its recorded identity.

    Kills the recorded process group (only if its leader's start time matches, so a reused
    pid is never hit) and every process carrying the launch's marker. Returns the pids that
    were signalled.
    """
    marker = str(identity.get("marker", ""))
    pid = int(identity.get("pgid", 0) or 0)
    victims = {p.pid: p for p in marked_processes(marker)} if marker else {}
    try:
        if pid <= 0:
            raise ValueError("no process group recorded")
        leader = psutil.Process(pid)
        if abs(leader.create_time() - float(identity.get("create_time", 0))) < 0.5:
            victims[leader.pid] = leader
            for c in leader.children(recursive=True):
                victims[c.pid] = c
    except (psutil.Error, ValueError):
        pass
    procs = [p for p in victims.values() if _running(p)]
    for p in procs:
        _signal(p, signal.SIGTERM)
    rest = _wait_gone(lambda: [p for p in procs if _running(p)], grace_s)
    for p in rest:
        _signal(p, signal.SIGKILL)
    _wait_gone(lambda: [p for p in procs if _running(p)], 10.0)
    return [p.pid for p in procs]
