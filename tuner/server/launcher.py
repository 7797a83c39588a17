"""Start the server under one environment, wait until it is ready, tear it down completely.

The server runs as an argv list (never a shell) in its own session. One relaunch::

    wait_port_bindable(cfg.host, cfg.port)            # TIME_WAIT included; PortBusy if held
    with ServerProcess(cfg, env, log_path, flags=flags) as server:
        load_s = server.wait_ready(cfg.ready_timeout_s, ready_check=one_token_request)
        try:
            ...                                      # smoke check, warmup, recorded runs
        except ProbeError as exc:
            raise server.request_failure(exc, "during warmup") from None
    server.teardown_report                           # always set, whatever happened inside

A :class:`tuner.errors.MachineFault` (the address was in use at start-up) is the machine's
fault: wait for the port again (``exc.port`` too when it differs from ``cfg.port``) and relaunch
the same set once; record ``machine_fault`` if it fails again, and never tell the sampler it was
the set's fault.

Teardown is SIGTERM to the process group, a grace period, then SIGKILL, and returns only when no
descendant is left: vLLM's EngineCore and TP workers can outlive a killed API server and rename
themselves (``VLLM::Worker_TP1``, vllm/v1/executor/multiproc_executor.py), so descendants are
tracked while the server runs and every process carrying this launch's marker variable is found
again at teardown, whatever its session or name.

Failures are :class:`tuner.errors.TrialFailed` with a :class:`tuner.record.trial.Status` value:
``crashed`` (the process exited, or its log shows the engine died), ``timeout``, ``hung``,
``unhealthy``; :class:`tuner.errors.MachineFault` (``machine_fault``) when the server could not
bind its address; :class:`ServerListensElsewhere` (``crashed``) when the server announces another
port than ``server.port``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx
import psutil

from tuner.errors import (
    MachineFault,
    MachineNotClean,
    ProbeConnectError,
    ProbeDisconnected,
    ProbeError,
    ProbeHTTPError,
    ProbeStalled,
    TrialFailed,
)
from tuner.inputs.config import ServerConfig
from tuner.nccl import env as nccl_env
from tuner.record import Status
from tuner.server import gpu
from tuner.server.logtail import Cause, CauseKind, LogPump, announced_port, find_cause, line_kind

#: Set in every server's environment; its value identifies the launch across session changes.
MARKER = "TUNER_SERVER_ID"


#: Seconds a server whose log shows a fatal line gets to exit and print the rest of its cause.
DEATH_GRACE_S = 5.0

#: Seconds after a server announced another port during which an announcement of server.port, or
#: a listener on it, still clears it (a router that starts workers on other ports first).
ELSEWHERE_GRACE_S = 3.0

#: Linux keeps a closed TCP connection in TIME_WAIT for TCP_TIMEWAIT_LEN = 60 s
#: (include/net/tcp.h); the default wait for a bindable port covers it with a margin.
PORT_WAIT_S = 90.0


class ServerListensElsewhere(TrialFailed):
    """The server's log announces another port than ``server.port`` (a command without
    ``{port}``, or a port flag overriding it): stopped at once instead of waiting
    ``ready_timeout_s``. ``port`` is the announced port, ``configured`` the expected one."""

    def __init__(self, port: int, configured: int, line: str) -> None:
        self.port, self.configured, self.line = port, configured, line
        super().__init__(Status.CRASHED, f"the server listens on port {port}, but server.port is {configured} "
                                         f"(log: {line.strip()[:160]}); put {{port}} in server.command")


class PortBusy(MachineNotClean):
    """``host:port`` could not be bound within the wait; ``holder`` says who holds it."""

    def __init__(self, host: str, port: int, waited_s: float, holder: str) -> None:
        self.host, self.port, self.waited_s, self.holder = host, port, waited_s, holder
        super().__init__(f"port {port} on {host} could not be bound after {waited_s:.0f} s: {holder}; "
                         "stop whatever holds it or choose another server.port")


def split_inherited(inherited: Mapping[str, str], varied: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """``(removed, kept)``: the inherited NCCL variables a launch drops and keeps.

    Every inherited ``NCCL_*`` and ``CUDA_DEVICE_MAX_CONNECTIONS`` is dropped, so a user's shell
    cannot leak tuning into any measurement, except the variables that select hardware rather
    than tune it (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA`` and kin:
    :data:`tuner.nccl.env.HARDWARE_SELECTORS`, with their NCCL sources), which a cluster needs
    and which are kept unless ``varied`` (the space's names) varies them.
    """
    tuning = sorted(k for k in inherited if nccl_env.is_tuning_variable(k))
    kept = [k for k in tuning if nccl_env.is_hardware_selector(k) and k not in varied]
    return [k for k in tuning if k not in kept], kept


def build_env(inherited: Mapping[str, str], server_env: Mapping[str, str], trial_env: Mapping[str, str],
              varied: Collection[str] = ()) -> tuple[dict[str, str], list[str]]:
    """The server's environment and the inherited tuning variables removed from it
    (:func:`split_inherited`), for the baseline and every trial alike; then ``server_env``
    (fixed for all trials) and ``trial_env`` are applied. Returns ``(env, removed_names)``.
    nccl-tune's own ``NCCL_TUNE_*`` settings (a storage URL may hold a password) are nccl-tune's,
    not the server's: they are left out and not reported.
    """
    removed, _kept = split_inherited(inherited, varied)
    env = {k: v for k, v in inherited.items() if k not in removed and not k.startswith(nccl_env.OWN_PREFIX)}
    env.update(server_env)
    env.update(trial_env)
    return env, removed


@dataclass
class TeardownReport:
    """How a teardown went: ``killed`` if SIGKILL was needed, ``survivors`` (pids, should be
    empty), ``duration_s`` (s), ``port_free`` (nothing listens on the port any more; TIME_WAIT
    sockets may remain, see :func:`wait_port_bindable`), ``gpu`` message or None, ``error`` if
    the teardown itself failed."""

    killed: bool = False
    survivors: list[int] = field(default_factory=list)
    duration_s: float = 0.0
    port_free: bool = True
    gpu: str | None = None
    error: str = ""

    @property
    def clean(self) -> bool:
        """True when nothing of the server remains: no process, port free, GPU memory back."""
        return not self.survivors and self.port_free and self.gpu is None and not self.error


# -- ports -------------------------------------------------------------------------------------

def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def port_bindable(port: int, *, reuse_address: bool = False) -> bool:
    """True when a new server could bind TCP ``port`` on every IPv4 address right now.

    The test binds ``0.0.0.0:port`` as a server would. WITHOUT ``SO_REUSEADDR`` (the default)
    it fails (EADDRINUSE) while anything listens on the port on any address, and also while
    closed connections of the port wait in TIME_WAIT (about 60 s on Linux), which a plain
    connect test cannot see; ``reuse_address=True`` tests as a server that sets the option
    (uvicorn, Python's http.server do), which only a listener blocks.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse_address:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def port_users(port: int) -> str:
    """Who holds TCP ``port``: the listener (pid, name, command line) and how many connections
    of the port wait in TIME_WAIT, as far as psutil can see; ``"nothing visible"`` otherwise."""
    parts: list[str] = []
    try:
        conns = [c for c in psutil.net_connections(kind="tcp") if c.laddr and c.laddr.port == port]
    except (psutil.AccessDenied, PermissionError):
        conns = []
    if any(c.status == psutil.CONN_LISTEN for c in conns):
        parts.append(f"listened on by {port_holder(port)}")
    waiting = sum(1 for c in conns if c.status == psutil.CONN_TIME_WAIT)
    if waiting:
        parts.append(f"{waiting} closed connection(s) in TIME_WAIT (the kernel keeps them about 60 s; "
                     "a server that does not set SO_REUSEADDR cannot bind until they expire)")
    return "; ".join(parts) or "nothing visible holds it (another network namespace or an IPv6 socket?)"


def wait_port_bindable(host: str, port: int, timeout_s: float = PORT_WAIT_S, poll_s: float = 0.5, *,
                       reuse_address: bool = False) -> float:
    """Wait until :func:`port_bindable` (``port``, any address, ``reuse_address`` as there) is
    true; return the seconds waited (0.0 when it was bindable at once). A sweep waits with
    ``reuse_address=True`` (only a listener blocks most servers) until a server of the study fails
    with "address in use", then without it (TIME_WAIT too) for the rest of the sweep.

    Raises :class:`PortBusy` (a :class:`tuner.errors.MachineNotClean`, exit 3) naming the holder
    (:func:`port_users`) when still busy after ``timeout_s`` seconds. ``host`` is only named in
    the message. Call it before every launch.
    """
    t0 = time.monotonic()
    while not port_bindable(port, reuse_address=reuse_address):
        waited = time.monotonic() - t0
        if waited >= timeout_s:
            raise PortBusy(host, port, waited, port_users(port))
        time.sleep(poll_s)
    return time.monotonic() - t0


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


# -- readiness helpers -----------------------------------------------------------------------

_LOADING_WORDS = ("loading", "starting", "initializing", "initialising", "warming up", "warming_up",
                  "not ready", "not_ready")


def says_loading(body: str) -> bool:
    """True when a health or error body says the server is still loading (``{"status":
    "loading"}``, "model is loading", "starting", "warming up", "not ready" and the like)."""
    text = body
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            status = data.get("status")
            error = data.get("error")
            text = " ".join(str(v) for v in (status, error.get("message") if isinstance(error, dict) else error,
                                             data.get("message")) if v)
    except ValueError:
        pass
    text = text.lower()
    return any(word in text for word in _LOADING_WORDS)


class ServerProcess:
    """One launch of the server for one trial, as a context manager.

    ``env`` is the trial's tuned variables (``{}`` for the baseline); ``flags`` are extra argv
    items appended to ``server.command`` (a set may vary server flags, e.g. vLLM's
    ``--disable-custom-all-reduce``); ``inherited`` is the runner's environment (default
    ``os.environ``; its NCCL tuning variables are removed, see :func:`build_env`; ``varied``: the
    names the space varies, whose inherited hardware selectors are removed too). Output goes to
    ``log_path`` (capped at ``server.log_max_bytes``, secrets scrubbed).

    ``with ServerProcess(...) as server:`` starts it (GPU memory recorded first) and always tears
    it down on leaving; ``__exit__`` never raises and leaves the :class:`TeardownReport` in
    ``server.teardown_report``. :meth:`start`, :meth:`wait_ready` and :meth:`teardown` may also
    be called directly.
    """

    def __init__(self, server: ServerConfig, env: Mapping[str, str], log_path: Path, *,
                 flags: Sequence[str] = (), inherited: Mapping[str, str] | None = None,
                 varied: Collection[str] = ()) -> None:
        self.server = server
        self.trial_env = dict(env)
        self.flags = list(flags)
        self.log_path = log_path
        full, self.removed = build_env(os.environ if inherited is None else inherited, server.env, env, varied)
        self.marker = uuid.uuid4().hex
        full[MARKER] = self.marker
        self._env = full
        self._secrets = nccl_env.secret_values(full)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pump: LogPump | None = None
        self.create_time = 0.0
        self.teardown_report: TeardownReport | None = None
        self._launched = 0.0
        self._tracked: dict[int, float] = {}
        self._gpu_before: list[int] | None = None
        self._elsewhere: tuple[int, str, float] | None = None
        self._announced_own = False
        self._death_seen = False

    # -- context manager -----------------------------------------------------------------
    def __enter__(self) -> ServerProcess:
        try:
            self.start(gpu.used_bytes())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.teardown()
        except Exception as err:  # leaving the block must never raise
            self.teardown_report = TeardownReport(error=f"teardown failed: {err!r}")

    # -- start ---------------------------------------------------------------------------
    def argv(self) -> list[str]:
        """The command as launched: ``server.argv()`` followed by ``flags``."""
        return self.server.argv() + self.flags

    def start(self, gpu_before: list[int] | None = None) -> None:
        """Spawn the server in a new session; raises TrialFailed('crashed') if it cannot exec.

        ``gpu_before`` (bytes used per GPU, :func:`tuner.server.gpu.used_bytes`) is what teardown
        waits to get back to.
        """
        self._gpu_before = gpu_before
        argv = self.argv()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:  # a retry of the trial appends: the first attempt stays readable
            f.write(f"[nccl-tune] argv: {nccl_env.scrub(shlex.join(argv), self._secrets)}\n"
                    f"[nccl-tune] trial env: {nccl_env.redact(self.trial_env)}\n"
                    f"[nccl-tune] flags: {self.flags}\n"
                    f"[nccl-tune] removed inherited: {self.removed}\n")
        self._launched = time.monotonic()
        try:
            self.proc = subprocess.Popen(argv, env=self._env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError as exc:
            with open(self.log_path, "a") as f:
                f.write(f"[nccl-tune] could not start: {exc}\n")
            raise TrialFailed(Status.CRASHED, f"could not start {argv[0]}: {exc.strerror or exc}") from None
        try:
            self.create_time = psutil.Process(self.proc.pid).create_time()
        except psutil.Error:
            self.create_time = time.time()
        assert self.proc.stdout is not None
        self.pump = LogPump(self.proc.stdout, self.log_path, max_bytes=self.server.log_max_bytes,
                            secrets=self._secrets, watchers=[self._watch])

    def _watch(self, line: str) -> None:
        """Runs on the log pump's thread for every line: notes another port, notes death."""
        port = announced_port(line)
        if port == self.server.port:
            self._announced_own = True
        elif port is not None and self._elsewhere is None:
            self._elsewhere = (port, line, time.monotonic())
        kind = line_kind(line)
        if kind is not None and kind.dead:
            self._death_seen = True

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

    # -- causes --------------------------------------------------------------------------
    def log_cause(self) -> Cause | None:
        """The cause found in the log tail so far (:func:`tuner.server.logtail.find_cause`), or None."""
        return find_cause(self.pump.tail()) if self.pump else None

    def crash_cause(self) -> str:
        """One line explaining an exit: the log's cause, else the exit status."""
        if self.pump and not self.alive():
            self.pump.drain(1.0)  # the last lines (the cause) may still be in the pipe
        cause = self.log_cause()
        code = self.proc.poll() if self.proc else None
        exit_text = (f"exit status {code}" if code is not None and code >= 0 else
                     f"killed by signal {-code}" if code else "")
        text = cause.text if cause else ""
        return f"{text} ({exit_text})" if text and exit_text else text or exit_text or "no output"

    def crash_failure(self, context: str = "") -> TrialFailed:
        """The error for a server that died (exited, or its log shows the engine died).

        :class:`tuner.errors.MachineFault` when the log shows an address already in use (a
        machine problem: wait for the port and relaunch the same set), else
        ``TrialFailed('crashed')``. ``context`` (e.g. "during warmup") is appended to the cause.
        """
        text = self.crash_cause()
        if self.alive():
            text += " (the server process still runs: its engine died)"
        if context:
            text += f" {context}"
        cause = self.log_cause()
        if cause is not None and cause.kind is CauseKind.ADDRESS_IN_USE:
            port = cause.port or self.server.port
            return MachineFault(f"address already in use at start-up (port {port}): {text}", port=port)
        return TrialFailed(Status.CRASHED, text)

    def _check_alive(self) -> None:
        """Raise when the launch cannot become ready: another port, exited, or dead per its log."""
        if (self._elsewhere is not None and not self._announced_own
                and time.monotonic() - self._elsewhere[2] >= ELSEWHERE_GRACE_S
                and not port_in_use(self.server.host, self.server.port)):
            raise ServerListensElsewhere(self._elsewhere[0], self.server.port, self._elsewhere[1])
        if not self.alive():
            raise self.crash_failure()
        if self._death_seen:
            self.exited_within(DEATH_GRACE_S)  # let it finish printing the root cause
            raise self.crash_failure()

    def _track(self) -> None:
        """Remember every descendant seen, so ones that later leave the tree are still killed."""
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                self._tracked.setdefault(child.pid, child.create_time())
        except psutil.Error:
            pass

    # -- readiness -----------------------------------------------------------------------
    def wait_ready(self, timeout_s: float, ready_check: Callable[[], None] | None = None,
                   poll_s: float = 0.25) -> float:
        """Wait until the server serves; return launch-to-ready seconds.

        Polls ``server.health_path`` every ``poll_s`` s (falling back to ``/v1/models`` when it
        answers 404). Until the first success, "not ready yet" is: no connection, no answer, any
        status other than 200, and a 200 whose body says it is loading. Once health answers 200,
        ``ready_check()`` is called: the caller's real request (e.g. a one-token completion)
        raising :class:`tuner.errors.ProbeError` subclasses; a 503 from it, or an error body
        saying it is loading, is also "not ready yet", so a server whose health says 200 while
        its requests fail is judged by the real request.

        Raises, at once rather than after ``timeout_s``:

        * :class:`ServerListensElsewhere` when the log announces another port and, within
          :data:`ELSEWHERE_GRACE_S` s, neither announces ``server.port`` nor listens on it;
        * ``TrialFailed('crashed')`` when the process exits or its log shows a line proving the
          engine died (:attr:`tuner.server.logtail.CauseKind.dead`; vLLM answers 503 on /health then),
          with the log's root cause; :class:`tuner.errors.MachineFault` when that cause is an
          address already in use;
        * from ``ready_check``: ``TrialFailed('hung')`` on :class:`tuner.errors.ProbeStalled`,
          ``'crashed'`` when the server exited meanwhile, ``'unhealthy'`` for any other failure
          (see :meth:`request_failure`: a fatal log line becomes the cause).

        A :class:`tuner.errors.TrialFailed` raised by ``ready_check`` itself (a smoke check)
        passes through unchanged. ``TrialFailed('timeout')`` when not ready within ``timeout_s``
        s of the launch, naming the last answer and log line. After readiness a 503 is no longer
        "loading": the caller treats it as unhealthy (:meth:`request_failure`).
        """
        path = self.server.health_path
        last = "no answer yet"
        with httpx.Client(timeout=httpx.Timeout(3.0, connect=1.0)) as client:
            while True:
                self._track()
                self._check_alive()
                try:
                    r = client.get(self.server.base_url + path)
                    if r.status_code == 404 and path != "/v1/models":
                        path = "/v1/models"
                        continue
                    if r.status_code == 200 and not says_loading(r.text[:2000]):
                        if ready_check is None:
                            return time.monotonic() - self._launched
                        waiting = self._ready_check(ready_check)
                        if waiting is None:
                            return time.monotonic() - self._launched
                        last = waiting
                        time.sleep(max(0.0, 1.0 - poll_s))  # real requests at most about once a second
                    else:
                        last = f"{path} answered HTTP {r.status_code}: {r.text[:120]!r}"
                except httpx.HTTPError as exc:
                    last = f"{path}: {type(exc).__name__}"
                elapsed = time.monotonic() - self._launched
                if elapsed > timeout_s:
                    self._check_alive()
                    tail = (self.pump.tail(1) if self.pump else []) or ["none"]
                    raise TrialFailed(Status.TIMEOUT, f"not ready after {timeout_s:.0f} s ({last}; "
                                                      f"last log line: {tail[0][:160]})")
                time.sleep(poll_s)

    def _ready_check(self, ready_check: Callable[[], None]) -> str | None:
        """None when the caller's request succeeded, a description when the server says it is
        still loading; raises TrialFailed for any other failure."""
        try:
            ready_check()
            return None
        except ProbeHTTPError as exc:
            if exc.status == 503 or says_loading(exc.body_excerpt):
                return f"health answered 200 but the first request got HTTP {exc.status}: {exc.body_excerpt[:120]!r}"
            raise self.request_failure(exc, "on the first request") from None
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 503 or says_loading(exc.response.text[:2000]):
                return f"health answered 200 but the first request got HTTP {exc.response.status_code}"
            raise self.request_failure(exc, "on the first request") from None
        except (ProbeError, httpx.HTTPError) as exc:
            raise self.request_failure(exc, "on the first request") from None

    def request_failure(self, exc: Exception, context: str) -> TrialFailed:
        """The TrialFailed for a failed request (``context`` says when, e.g. "during warmup").

        A dropped or refused connection gives the server a second to exit. Then: ``crashed``
        (or :class:`tuner.errors.MachineFault`) when the process died, with the log's root
        cause; ``hung`` for :class:`tuner.errors.ProbeStalled`; else ``unhealthy``. When the
        log shows a line proving the engine died (an HTTP 500 from vLLM's EngineDeadError, an
        out-of-memory), that line is the cause and the request's error follows it.
        """
        if isinstance(exc, ProbeDisconnected | ProbeConnectError | httpx.TransportError):
            self.exited_within(1.0)  # a dropped stream is often a dying server: let it finish
        else:
            time.sleep(0.25)  # lines printed with the error response: let the log pump read them
        if not self.alive():
            return self.crash_failure(context)
        cause = self.log_cause()
        said = f"{exc} {context}"
        if cause is not None and cause.kind.dead:
            said = f"{cause.text} ({said})"
        if isinstance(exc, ProbeStalled | httpx.TimeoutException):
            return TrialFailed(Status.HUNG, f"no token for the stall timeout: {said}")
        return TrialFailed(Status.UNHEALTHY, said)

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
        """SIGTERM the group and every tracked or marked process, wait ``grace_s`` (default the
        server's ``teardown_grace_s``), SIGKILL what remains, and wait for all to be gone.

        Then checks that nothing listens on the port and (with NVML) that GPU memory is back to
        its pre-launch level. Never raises; idempotent (a second call returns the first report,
        also kept in ``teardown_report``).
        """
        if self.teardown_report is not None:
            return self.teardown_report
        report = TeardownReport()
        if self.proc is None:
            self.teardown_report = report
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
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
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
        self.teardown_report = report
        return report


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


def kill_leftover(identity: Mapping[str, object], grace_s: float = 10.0) -> list[int]:
    """Tear down a server a dead runner left behind, found by its recorded identity.

    Kills the recorded process group (only if its leader's start time matches, so a reused
    pid is never hit) and every process carrying the launch's marker. Returns the pids that
    were signalled.
    """
    marker = str(identity.get("marker", ""))
    victims = {p.pid: p for p in marked_processes(marker)} if marker else {}
    try:
        pid = int(str(identity.get("pgid", 0) or 0))
        if pid <= 0:
            raise ValueError("no process group recorded")
        leader = psutil.Process(pid)
        if abs(leader.create_time() - float(str(identity.get("create_time", 0)))) < 0.5:
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
