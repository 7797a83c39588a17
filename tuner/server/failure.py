"""Why a launch failed: crashed, hung or unhealthy, with the root cause from its log.

Failures are :class:`tuner.errors.TrialFailed` with a :class:`tuner.record.trial.Status` value:
``crashed`` (the process exited, or its log shows the engine died), ``hung``, ``unhealthy``;
:class:`tuner.errors.MachineFault` (``machine_fault``) when the crash is not plainly the set's
(machine-suspect, :mod:`tuner.server.machine`: an address in use, a start-up memory guard, a
busy device, a container name still in use, a crash before NCCL's first line);
:class:`tuner.errors.ServerListensElsewhere` (``crashed``) when the server announces another
port than ``server.port``.

A MachineFault is not yet the set's: the caller waits (for the port, ``exc.port`` too when it
differs from ``server.port``; for the GPUs' memory) and relaunches the same set once; a second
one relaunches the baseline, and only a baseline that runs makes the failures the set's
(:func:`tuner.sweep.trial.relaunch`). The sampler is never told a machine's failure.
"""

from __future__ import annotations

import subprocess
import time
from typing import Protocol

import httpx

from tuner.errors import (
    MachineFault,
    ProbeConnectError,
    ProbeDisconnected,
    ProbeError,
    ProbeHTTPError,
    ProbeStalled,
    ServerListensElsewhere,
    TrialFailed,
)
from tuner.inputs import ServerConfig
from tuner.launchers import Launcher
from tuner.nccl import NCCL_MARK
from tuner.record import Status
from tuner.server.logpump import LogPump
from tuner.server.logtail import Cause, CauseKind, announced_port, find_cause, level_and_body, line_kind
from tuner.server.machine import before_nccl, machine_line
from tuner.server.ports import port_in_use
from tuner.servers import GENERIC, ServerKind, kind_of

__all__ = ["ELSEWHERE_GRACE_S", "LaunchWatch", "crash_cause", "crash_failure", "log_cause", "node_failure",
           "request_failure"]

#: Seconds a server whose log shows a fatal line gets to exit and print the rest of its cause.
DEATH_GRACE_S = 5.0

#: Seconds after a server announced another port during which an announcement of server.port, or
#: a listener on it, still clears it (a router that starts workers on other ports first).
ELSEWHERE_GRACE_S = 3.0


class Launch(Protocol):
    """What the judging needs of a launch (:class:`tuner.server.process.ServerProcess` is one)."""

    server: ServerConfig
    proc: subprocess.Popen[bytes] | None
    pump: LogPump | None

    def alive(self) -> bool:
        """True while the main process has not exited."""
        ...

    def exited_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` s for the main process to exit; True if it has."""
        ...

    def nccl_warnings(self) -> list[str]:
        """NCCL's WARN lines from the launch's NCCL_DEBUG_FILE files (empty when it names none)."""
        ...

    def served_warnings(self) -> frozenset[str]:
        """The NCCL WARN messages printed before the launch served (empty before it served)."""
        ...

    def detached(self) -> list[tuple[int, str]]:
        """``(pid, command line)`` of each process of the launch still running after its main
        process exited (empty while it runs)."""
        ...

    def lifetime_s(self) -> float:
        """Seconds from the spawn to the main process's exit (first seen), or to now."""
        ...

    def nccl_logging(self) -> bool:
        """True when the launch asked NCCL for its INFO lines."""
        ...

    def nccl_seen(self) -> bool:
        """True when NCCL printed a line (server log or NCCL_DEBUG_FILE files)."""
        ...

    @property
    def set_env(self) -> dict[str, str]:
        """The set's own variables (without nccl-tune's logging ones)."""
        ...

    @property
    def launcher(self) -> Launcher:
        """How the command starts the server (its own machine lines)."""
        ...

    @property
    def flags(self) -> list[str]:
        """The set's server flags, appended to the command."""
        ...


def _tail(launch: Launch) -> list[str]:
    """The lines a cause is read from: NCCL's WARNs from its own files (they come before the
    error that quotes them), then the server log's tail."""
    return [*launch.nccl_warnings(), *launch.pump.tail()] if launch.pump else []


def _kind(launch: Launch) -> ServerKind | None:
    """The launch's server kind (``server.kind``, its command, else its log's marks); None when
    nothing names one (the cause is then read with every kind's lines)."""
    server = getattr(launch, "server", None)
    if server is None:
        return None
    kind = kind_of(server.argv(), launch.pump.tail() if launch.pump else (), forced=server.kind)
    return None if kind is GENERIC else kind


def log_cause(launch: Launch) -> Cause | None:
    """The cause found in the log tail so far (:func:`tuner.server.logtail.find_cause`, read with
    the launch's kind; WARNs printed before it served are never the cause), or None."""
    if not launch.pump:
        return None
    return find_cause(_tail(launch), _kind(launch), served=launch.served_warnings())


def daemon_cause(launch: Launch) -> str | None:
    """The cause of a command that put the server in the background, or None.

    When the main process exited with status 0 while a process it started (found by the
    launch's marker, whatever its session) still runs, the command daemonized the server (a
    double fork and ``setsid``, ``nohup ... &`` in a script, ``docker run -d``, a ``--daemon``
    flag): nccl-tune cannot watch, log or tear down what it does not hold in the foreground.
    """
    code = launch.proc.poll() if launch.proc else None
    if code != 0:
        return None
    running = launch.detached()
    if not running:
        return None
    pid, cmd = running[0]
    more = f" and {len(running) - 1} more" if len(running) > 1 else ""
    return (f"the server command exited with status 0 after {launch.lifetime_s():.1f} s while a detached process "
            f"it started (pid {pid}, {cmd[:120]}){more} still ran: the command puts the server in the background "
            "(`&`, nohup, `docker run -d`, a --daemon flag, a double fork); run the server in the foreground")


def crash_cause(launch: Launch) -> str:
    """One line explaining an exit: a daemonizing command (:func:`daemon_cause`), else the
    log's cause followed by the exit (``"... (killed by signal 11)"``), else the exit status.

    What ended the process outranks a warning: after a signal death an ``NCCL WARN`` cause, and
    after any exit a harmless warning, follow the exit as its context (``"killed by signal 9
    [after NCCL WARN ...]"``)."""
    if launch.pump and not launch.alive():
        launch.pump.drain(1.0)  # the last lines (the cause) may still be in the pipe
    daemon = daemon_cause(launch)
    if daemon is not None:
        return daemon
    cause = log_cause(launch)
    code = launch.proc.poll() if launch.proc else None
    exit_text = (f"exit status {code}" if code is not None and code >= 0 else
                 f"killed by signal {-code}" if code else "")
    if cause is None:
        return exit_text or "no output"
    # what ended the process outranks a warning: a signal outranks an NCCL WARN, any exit a
    # harmless warning; the warning stays as the context
    if exit_text and (cause.kind is CauseKind.WARNING or (cause.kind is CauseKind.NCCL_WARN and code is not None
                                                          and code < 0)):
        return f"{exit_text} [after {cause.text}]"
    if exit_text and cause.text.endswith(")") and " (in " in cause.text:
        return f"{cause.text[:-1]}, {exit_text})"  # "(in ncclAllReduce, killed by signal 11)"
    return f"{cause.text} ({exit_text})" if exit_text else cause.text


def crash_failure(launch: Launch, context: str = "") -> TrialFailed:
    """The error for a server that died (exited, or its log shows the engine died).

    :class:`tuner.errors.MachineFault` when the crash is machine-suspect (:mod:`tuner.server.machine`):
    an address already in use (``port`` set: the caller waits for it), a machine line of the
    log (a memory guard, a busy device, a container name in use), or a crash before NCCL's
    first line under a set of NCCL variables only; else ``TrialFailed('crashed')``. ``context``
    (e.g. "during warmup") is appended to the cause.
    """
    text = crash_cause(launch)
    if launch.alive():
        text += " (the server process still runs: its engine died)"
    if context:
        text += f" {context}"
    cause = log_cause(launch)
    if cause is not None and cause.kind is CauseKind.ADDRESS_IN_USE:
        port = cause.port or launch.server.port
        return MachineFault(f"address already in use at start-up (port {port}): {text}", port=port)
    seen = machine_line(_tail(launch), launch.launcher.machine_lines)
    if seen is not None:
        what, line = seen
        said = level_and_body(line)[1].strip()[:200]
        return MachineFault(f"{what}: {text}" if said in text else f"{what} ({said}): {text}", timed=True)
    if before_nccl(launch.set_env, launch.flags, nccl_logging=launch.nccl_logging(), nccl_seen=launch.nccl_seen()):
        return MachineFault(f"a crash before NCCL's first line (the set's NCCL variables cannot act yet): {text}")
    return TrialFailed(Status.CRASHED, text)


def node_failure(launch: Launch, rank: int, name: str, status: str, tail: list[str]) -> TrialFailed:
    """The error for node ``rank`` (``name``) of a server spanning nodes that ended (``status``,
    its log's last lines ``tail``) before the head served: by the head's rules (a machine line
    of its tail, a crash before NCCL's first line under NCCL variables only: a
    :class:`tuner.errors.MachineFault`; else ``crashed``), its cause or last line said."""
    kind = _kind(launch)
    cause = find_cause(tail, kind)
    said = cause.text if cause is not None else (tail[-1].strip() if tail else "no output")
    text = f"node {rank} ({name}) ended ({status}) before the server was ready: {said}"
    if cause is not None and cause.kind is CauseKind.ADDRESS_IN_USE:
        port = cause.port or launch.server.nodes.dist_port
        return MachineFault(f"address already in use at start-up on node {rank} (port {port}): {text}", port=port)
    seen = machine_line(tail, launch.launcher.machine_lines)
    if seen is not None:
        return MachineFault(f"{seen[0]}: {text}", timed=True)
    nccl_seen = any(NCCL_MARK.search(line) for line in tail) or launch.nccl_seen()
    if before_nccl(launch.set_env, launch.flags, nccl_logging=launch.nccl_logging(), nccl_seen=nccl_seen):
        return MachineFault(f"a crash before NCCL's first line (the set's NCCL variables cannot act yet): {text}")
    return TrialFailed(Status.CRASHED, text)


def request_failure(launch: Launch, exc: Exception, context: str) -> TrialFailed:
    """The TrialFailed for a failed request (``context`` says when, e.g. "during warmup").

    A dropped or refused connection gives the server a second to exit. Then: ``crashed``
    (or :class:`tuner.errors.MachineFault`) when the process died, with the log's root
    cause; ``hung`` for :class:`tuner.errors.ProbeStalled`; else ``unhealthy``. When the
    log shows a line proving the engine died (an HTTP 500 from vLLM's EngineDeadError, an
    out-of-memory), that line is the cause and the request's error follows it; after an error
    the server itself reported (an HTTP 5xx, an error body or event in place of tokens) a CUDA
    error, a Python exception or an ``NCCL WARN`` of the tail leads it as well.
    """
    if isinstance(exc, ProbeDisconnected | ProbeConnectError | httpx.TransportError):
        launch.exited_within(1.0)  # a dropped stream is often a dying server: let it finish
    else:
        time.sleep(0.25)  # lines printed with the error response: let the log pump read them
    if not launch.alive():
        return crash_failure(launch, context)
    cause = log_cause(launch)
    said = f"{exc} {context}"
    if cause is not None and (cause.kind.dead or (_server_side(exc) and cause.kind <= CauseKind.NCCL_WARN)):
        said = f"{cause.text} ({said})"
    if isinstance(exc, ProbeStalled | httpx.TimeoutException):
        return TrialFailed(Status.HUNG, f"no token for the stall timeout: {said}")
    return TrialFailed(Status.UNHEALTHY, said)


def _server_side(exc: Exception) -> bool:
    """True for an error the server reported itself: an HTTP 5xx, or an error body or event
    (a plain ProbeError from the stream)."""
    return (isinstance(exc, ProbeHTTPError) and exc.status >= 500) or type(exc) is ProbeError


class LaunchWatch:
    """What the log said while the server starts: another port announced, a line proving the
    engine died. :meth:`watch` is the log pump's watcher (it runs on the pump's thread);
    :meth:`check` raises as soon as the launch cannot become ready."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._elsewhere: tuple[int, str, float] | None = None  # (port, line, when announced)
        self._announced_own = False
        self._death_seen = False
        #: True once NCCL printed a line in the server log
        self.nccl_seen = False

    def watch(self, line: str) -> None:
        """Take one log line: notes another port, NCCL's first line, death."""
        if not self.nccl_seen and NCCL_MARK.search(line):
            self.nccl_seen = True
        port = announced_port(line)
        if port == self.port:
            self._announced_own = True
        elif port is not None and self._elsewhere is None:
            self._elsewhere = (port, line, time.monotonic())
        kind = line_kind(line)
        if kind is not None and kind.dead:
            self._death_seen = True

    def check(self, launch: Launch) -> None:
        """Raise when the launch cannot become ready: :class:`tuner.errors.ServerListensElsewhere`
        once another port was announced and, within :data:`ELSEWHERE_GRACE_S` s, neither
        ``server.port`` was nor anything listens on it; :func:`crash_failure` when the process
        exited or its log proved the engine dead (after :data:`DEATH_GRACE_S` s to print the root
        cause)."""
        if (self._elsewhere is not None and not self._announced_own
                and time.monotonic() - self._elsewhere[2] >= ELSEWHERE_GRACE_S
                and not port_in_use(launch.server.host, launch.server.port)):
            raise ServerListensElsewhere(self._elsewhere[0], launch.server.port, self._elsewhere[1])
        if not launch.alive():
            raise crash_failure(launch)
        if self._death_seen:
            launch.exited_within(DEATH_GRACE_S)  # let it finish printing the root cause
            raise crash_failure(launch)
