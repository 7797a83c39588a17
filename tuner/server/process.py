"""One server launch and its lifetime: spawned under one environment, watched, torn down.

The server runs as an argv list (never a shell) in its own session, its output pumped into the
trial's log (:class:`tuner.server.logpump.LogPump`). The command's launcher
(:func:`tuner.launchers.launcher_of`: a plain process, a container, a Slurm step) gives the argv
that carries the set into the server and ends what it starts outside the launched tree. :class:`ServerProcess` is the launch; it
hands readiness to :mod:`tuner.server.readiness`, the judging of a failure to
:mod:`tuner.server.failure` and the teardown to :mod:`tuner.server.teardown`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import psutil

from tuner.errors import Interrupted, TrialFailed
from tuner.inputs import ServerConfig
from tuner.launchers import allocation_hosts, launcher_of, multiprog_text, srun_argv
from tuner.nccl import DEBUG_FILE_VAR, LoadedLibrary, find_debug_files, is_tuning_variable, line_pid
from tuner.record import Status
from tuner.redaction import argv_secrets, redact, redact_argv, scrub, secret_values
from tuner.server import failure, gpu, readiness
from tuner.server.env import build_env
from tuner.server.identity import MARKER, ServerIdentity
from tuner.server.library import mapped_nccl
from tuner.server.logpump import LogPump
from tuner.server.logtail import Cause, warn_keys
from tuner.server.lwsrun import LwsRun
from tuner.server.nodes import NODE_VAR, NodeSet, node_env
from tuner.server.ownership import ListenerCheck
from tuner.server.teardown import LaunchProcesses, TeardownReport, tear_down
from tuner.servers import GENERIC, KINDS, ServerKind, kind_of

__all__ = ["ServerProcess"]

_KEPT_LINES = 2000  # log lines kept with their time, for the warm-up rule
_KIND_LINES = 2000  # the first lines read for a kind's mark (kind_of reads as many)


class ServerProcess:
    """One launch of the server for one trial, as a context manager.

    ``env`` is the trial's tuned variables (``{}`` for the baseline); ``flags`` are extra argv
    items appended to ``server.command`` (a set may vary server flags, e.g. vLLM's
    ``--disable-custom-all-reduce``); ``inherited`` is the runner's environment (default
    ``os.environ``; its NCCL tuning variables are removed, see :func:`tuner.server.env.build_env`;
    ``varied``: the names the space varies, whose inherited hardware selectors are removed too;
    ``set_env``: the set's own variables when ``env`` adds nccl-tune's logging ones, default ``env``).
    Output goes to ``log_path`` (capped at ``server.log_max_bytes``, secrets scrubbed).

    ``with ServerProcess(...) as server:`` starts it (GPU memory recorded first) and always tears
    it down on leaving; ``__exit__`` never raises and leaves the
    :class:`tuner.server.teardown.TeardownReport` in ``server.teardown_report``. :meth:`start`,
    :meth:`wait_ready` and :meth:`teardown` may also be called directly.
    """

    def __init__(self, server: ServerConfig, env: Mapping[str, str], log_path: Path, *,
                 flags: Sequence[str] = (), inherited: Mapping[str, str] | None = None,
                 varied: Collection[str] = (), set_env: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.trial_env = dict(env)
        #: the set's own variables (``env`` less what nccl-tune adds for its logging)
        self.set_env = dict(env if set_env is None else set_env)
        self.flags = list(flags)
        self.log_path = log_path
        full, self.removed = build_env(os.environ if inherited is None else inherited, server.env, env, varied)
        self.marker = uuid.uuid4().hex
        full[MARKER] = self.marker
        self._env = full
        self.proc: subprocess.Popen[bytes] | None = None
        self.pump: LogPump | None = None
        self.create_time = 0.0
        self.teardown_report: TeardownReport | None = None
        #: Health's first 200 to ready (s), set by :meth:`wait_ready`; None before.
        self.warmup_s: float | None = None
        self._launched = 0.0
        self._ended: float | None = None  # when the main process was first seen exited (monotonic s)
        self._processes = LaunchProcesses(self.marker)
        self._gpu_before: list[int] | None = None
        self._watch = failure.LaunchWatch(server.port)
        self._nodes_problem = ""
        self._head = self._node_setup(full)
        if self.nodeset is not None and server.nodes.launch == "local":
            self._env = full = node_env(full, self.nodeset.names[0])
        self.launcher = launcher_of(self._multiprog_argv() or self.argv(), full)
        # what the server must get: the set, server.env, NCCL's logging, the inherited NCCL selectors kept
        forward = [k for k in full if k in self.trial_env or k in server.env or is_tuning_variable(k)]
        debug = full.get(DEBUG_FILE_VAR, "")
        mounts = [os.path.dirname(debug)] if os.path.isabs(debug) else []
        self._launch_argv = self.launcher.prepare(forward, mounts, self.marker[:12])
        # what the command itself passes (env HF_TOKEN=x, --api-key X) the server may print back
        self._secrets = secret_values(full) + argv_secrets(self._launch_argv)
        self._owner = ListenerCheck(server.host, server.port, self.launcher.listener_outside)
        self._served: frozenset[str] = frozenset()
        self._lines: deque[tuple[float, str]] = deque(maxlen=_KEPT_LINES)  # (s since launch, line)
        self._kind: ServerKind | None = None  # the first kind the log marks
        self._lines_lock = threading.Lock()

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
        except Interrupted:
            raise
        except Exception as err:  # leaving the block must never raise
            self.teardown_report = TeardownReport(error=f"teardown failed: {err!r}")

    # -- nodes ---------------------------------------------------------------------------
    def _node_setup(self, env: Mapping[str, str]) -> str:
        """With ``[server.nodes]`` spanning nodes: the nodes' names (srun mode without hosts: the
        allocation's) and each node's command in :attr:`nodeset`; returns ``{head}``."""
        nodes = self.server.nodes
        self.nodeset: NodeSet | None = None
        self._conf: Path | None = None
        self._lws: LwsRun | None = None
        self._lws_applied = False
        if not nodes.spans:
            return nodes.head(nodes.names())
        if nodes.launch == "lws":
            self._lws = lws = LwsRun.of(self.server, self.log_path, self.marker[:12])
            self.nodeset = NodeSet(lws.pods, [lws.log_argv(r) for r in range(nodes.count)], self.log_path,
                                   max_bytes=self.server.log_max_bytes, secrets=secret_values(env))
            return "127.0.0.1"
        allocation: list[str] = []
        if nodes.launch == "srun" and nodes.hosts is None:
            allocation, why = allocation_hosts(env)
            if len(allocation) < nodes.count:
                self._nodes_problem = (f"server.nodes.count = {nodes.count} but the allocation gives "
                                       f"{len(allocation)} node(s){f' ({why})' if why else ''}")
        names = nodes.names(allocation)
        head = nodes.head(names)
        commands = [self.server.node_argv(r, head) + self.flags for r in range(nodes.count)]
        if nodes.launch == "srun":
            self._conf = self.log_path.with_name(f"{self.log_path.stem}.multiprog.conf")
            commands = [["env", f"{NODE_VAR}={name}", *argv] for name, argv in zip(names, commands, strict=False)]
        self.nodeset = NodeSet(names, commands, self.log_path, max_bytes=self.server.log_max_bytes,
                               secrets=secret_values(env))
        self._commands = commands
        return head

    def _multiprog_argv(self) -> list[str] | None:
        """srun mode: the one step that runs every node (:func:`tuner.launchers.srun_argv`); lws
        mode: the port-forward to the leader pod."""
        if self._lws is not None:
            return self._lws.forward_argv(self.server.port)
        return None if self._conf is None else srun_argv("srun", self.server.nodes.count, self._conf)

    def node_names(self) -> list[str]:
        """The nodes' names, head first (one host: empty)."""
        return list(self.nodeset.names) if self.nodeset is not None else []

    # -- start ---------------------------------------------------------------------------
    def argv(self) -> list[str]:
        """The command as written: ``server.argv()`` (the head's, with ``[server.nodes]``)
        followed by ``flags`` (:meth:`launch_argv` is what runs)."""
        return self.server.node_argv(0, self._head) + self.flags

    def launch_argv(self) -> list[str]:
        """The command as launched: :meth:`argv` with what its launcher adds so the set reaches
        the server (:meth:`tuner.launchers.Launcher.prepare`: ``-e NAME`` for a container)."""
        return list(self._launch_argv)

    def start(self, gpu_before: list[int] | None = None) -> None:
        """Spawn the server in a new session; raises TrialFailed('crashed') if it cannot exec.

        ``gpu_before`` (bytes used per GPU, :func:`tuner.server.gpu.used_bytes`) is what teardown
        waits to get back to.
        """
        self._gpu_before = gpu_before
        argv = self.launch_argv()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:  # a retry of the trial appends: the first attempt stays readable
            f.write(f"[nccl-tune] argv: {scrub(shlex.join(redact_argv(argv)), self._secrets)}\n"
                    f"[nccl-tune] trial env: {redact(self.trial_env)}\n"
                    f"[nccl-tune] flags: {self.flags}\n"
                    f"[nccl-tune] removed inherited: {self.removed}\n")
        if self._nodes_problem:
            raise TrialFailed(Status.CRASHED, self._nodes_problem)
        if self._conf is not None:
            try:
                self._conf.write_text(multiprog_text(self._commands))
            except (OSError, ValueError) as exc:
                raise TrialFailed(Status.CRASHED, f"could not write {self._conf}: {exc}") from None
        self._owner.before_launch()
        self._launched = time.monotonic()
        out: int = subprocess.PIPE
        if self._lws is not None:
            out = self._apply_lws()
        try:
            self.proc = subprocess.Popen(argv, env=self._env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError as exc:
            if self._lws is not None:
                os.close(out)
            with open(self.log_path, "a") as f:
                f.write(f"[nccl-tune] could not start: {exc}\n")
            raise TrialFailed(Status.CRASHED, f"could not start {argv[0]}: {exc.strerror or exc}") from None
        self._processes.leader = self.proc
        try:
            self.create_time = psutil.Process(self.proc.pid).create_time()
        except psutil.Error:
            self.create_time = time.time()
        if self._lws is not None:
            head_out = self._follow_lws(out)
        else:
            assert self.proc.stdout is not None
            head_out = self.proc.stdout
            if self.nodeset is not None and self._conf is not None:
                head_out = self.nodeset.split(self.proc.stdout)
            elif self.nodeset is not None:
                self.nodeset.start_local(self._env)
        self.pump = LogPump(head_out, self.log_path, max_bytes=self.server.log_max_bytes,
                            secrets=self._secrets, watchers=[self._watch.watch, self._see])

    def _apply_lws(self) -> int:
        """lws mode: apply the trial's LWS and wait for its pods (raises TrialFailed crashed);
        returns the write end of the head log's pipe (the port-forward's and the leader's log)."""
        assert self._lws is not None
        self._lws_applied = True
        said, why = self._lws.apply({**self.server.env, **self.trial_env}, self.marker, self.server.ready_timeout_s)
        with open(self.log_path, "a") as f:
            f.write(f"[nccl-tune] LeaderWorkerSet {self._lws.name} ({self._lws.manifest.name}): "
                    f"{scrub(said, self._secrets) or 'not applied'}\n")
        if why:
            raise TrialFailed(Status.CRASHED, why)
        self._lws_pipe = os.pipe()
        return self._lws_pipe[1]

    def _follow_lws(self, write_fd: int) -> IO[bytes]:
        """lws mode: the leader's ``kubectl logs -f`` into the head's pipe, each worker's into
        its node log; returns the head's pipe."""
        assert self._lws is not None and self.nodeset is not None
        try:
            subprocess.Popen(self._lws.log_argv(0), env=self._env, stdin=subprocess.DEVNULL, stdout=write_fd,
                             stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            os.write(write_fd, f"[nccl-tune] could not follow the leader's log: {exc}\n".encode())
        finally:
            os.close(write_fd)
        self.nodeset.start_local(self._env)
        return os.fdopen(self._lws_pipe[0], "rb")

    def _see(self, line: str) -> None:
        """Keep the log line with when it came (s since the launch): the kind and its warm-up."""
        with self._lines_lock:
            self._lines.append((self.since_launch(), line))
        if self._kind is None and len(self._lines) <= _KIND_LINES:
            for kind in KINDS:
                if kind.marks(line):
                    self._kind = kind
                    break

    def kind(self) -> ServerKind:
        """The server kind of this launch (:func:`tuner.servers.kind_of`): ``server.kind`` when
        set, else the one the command names, else the first its log marks (so far), else the
        generic one."""
        named = kind_of(self.argv(), (), self.server.kind)
        return self._kind if named is GENERIC and self._kind is not None and not self.server.kind else named

    def warmup_line(self, since_s: float) -> str | None:
        """The last line printed after ``since_s`` (s since the launch) that the kind knows as a
        warm-up (:meth:`tuner.servers.ServerKind.is_warmup`: a kernel compile, a CUDA-graph
        capture), or None."""
        kind = self.kind()
        with self._lines_lock:
            lines = list(self._lines)
        for when, line in reversed(lines):
            if when < since_s:
                break
            if kind.is_warmup(kind.strip_prefix(line)):
                return line
        return None

    @property
    def pid(self) -> int:
        """The server's pid (also its process group and session id)."""
        assert self.proc is not None
        return self.proc.pid

    def identity(self) -> ServerIdentity:
        """What a later runner needs to find this server again: pid, pgid, start time, marker,
        port; only the marker before :meth:`start`."""
        if self.proc is None:  # an LWS is applied before its port-forward starts: its handle already
            return ServerIdentity(self.marker, launcher=tuple(self.launcher.handle()) if self._lws_applied else ())
        return ServerIdentity(self.marker, pid=self.pid, pgid=self.pid, create_time=self.create_time,
                              port=self.server.port, launcher=tuple(self.launcher.handle()))

    def alive(self) -> bool:
        """True while the server's main process has not exited."""
        if self.proc is None or self.proc.poll() is None:
            return self.proc is not None
        if self._ended is None:
            self._ended = time.monotonic()
        return False

    def lifetime_s(self) -> float:
        """Seconds from the spawn to the main process's exit (as first seen), or to now."""
        self.alive()
        return (self._ended or time.monotonic()) - self._launched

    def detached(self) -> list[tuple[int, str]]:
        """``(pid, command line)`` (its secrets as ``***``) of each process of this launch that still runs after the main
        process exited (found by the launch's marker, whatever its session); empty while the
        main process runs."""
        if self.proc is None or self.alive():
            return []
        found = []
        for p in self._processes.running():
            try:
                found.append((p.pid, shlex.join(redact_argv(p.cmdline())) or p.name()))
            except psutil.Error:
                continue
        return found

    def exited_within(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` s for the main process to exit; True if it has."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def since_launch(self) -> float:
        """Seconds since the process was spawned."""
        return time.monotonic() - self._launched

    def last_log_line(self) -> str | None:
        """The last line the server printed, None when it printed none."""
        tail = self.pump.tail(1) if self.pump else []
        return tail[0] if tail else None

    def quiet_s(self) -> float:
        """Seconds since the server last printed anything (since the launch when nothing)."""
        quiet = self.pump.quiet_s() if self.pump else None
        return self.since_launch() if quiet is None else quiet

    # -- readiness -----------------------------------------------------------------------
    def wait_ready(self, timeout_s: float, ready_check: Callable[[], None] | None = None,
                   poll_s: float = 0.25) -> float:
        """Wait until the server serves; return launch-to-ready seconds. The rules, and the
        TrialFailed raised (crashed, timeout, hung, unhealthy; MachineFault,
        ServerListensElsewhere): :func:`tuner.server.readiness.wait_ready`."""
        took = readiness.wait_ready(self, timeout_s, ready_check, poll_s)
        # WARNs printed before the launch served are not the cause of a later death
        self._served = warn_keys([*self.nccl_warnings(last=200), *(self.pump.tail() if self.pump else [])])
        return took

    def check_starting(self) -> None:
        """Remember the descendants seen so far and raise when the launch cannot become ready
        (:meth:`tuner.server.failure.LaunchWatch.check`)."""
        self._processes.track()
        ended = self.nodeset.exited() if self.nodeset is not None else None
        if ended is not None:
            if ended.pump is not None:
                ended.pump.drain(1.0)  # its last lines (the cause) may still be in the pipe
            raise failure.node_failure(self, ended.rank, ended.name, ended.status() or "", ended.tail())
        self._watch.check(self)

    def pids(self) -> set[int]:
        """The pids of this launch seen so far (the leader, its tree, marked processes)."""
        self._processes.track()
        return self._processes.pids()

    def loaded_nccl(self) -> tuple[bool | None, LoadedLibrary | None]:
        """While it runs: the NCCL library its processes mapped (:func:`tuner.server.library.mapped_nccl`
        of this launch's pids and the launcher's own, a container's main process)."""
        return mapped_nccl(self.pids() | set(self.launcher.root_pids()))

    def check_listener(self, when: str) -> None:
        """Answers count only now if the launched tree is alive and the listener on the port is
        ours (:class:`tuner.server.ownership.ListenerCheck`; how it was recognised is noted in
        the log). Raises :class:`tuner.errors.ForeignListener` for a listener that is not ours,
        the crash failure (:meth:`crash_failure`) when the server exited; ``when`` names the
        check ("at readiness", "before the recorded runs", ...)."""
        self._processes.track()
        if not self.alive():
            raise self.crash_failure(when)
        said = self._owner.check(self._processes.running(), self.proc.pid if self.proc else None, when)
        if said and self.pump:
            self.pump.note(f"{said} ({when})")

    def check_listener_gone(self) -> None:
        """After :meth:`teardown`: raise :class:`tuner.errors.ForeignListener` when a listener
        accepted without seeing its holder outlived the teardown (it was not ours)."""
        report = self.teardown_report
        self._owner.after_teardown(report.port_free if report else False, self.proc.pid if self.proc else None)

    # -- causes --------------------------------------------------------------------------
    def nccl_warnings(self, last: int = 40) -> list[str]:
        """The last ``last`` NCCL WARN lines of the NCCL_DEBUG_FILE files this launch wrote
        (NCCL's WARNs are there, not in the server log, when the launch names a file)."""
        pattern = self._env.get(DEBUG_FILE_VAR)
        if not pattern or self.proc is None:
            return []
        found: list[str] = []
        # a user's NCCL_DEBUG_FILE place may be shared with another server: only this launch's files
        pids = self.pids() if self.server.env.get(DEBUG_FILE_VAR) == pattern else set()
        for debug_file in find_debug_files(pattern, since=self.create_time - 1.0, pids=pids):
            try:
                with open(debug_file.path, errors="replace") as fh:
                    found += [line.rstrip("\n") for line in fh if " NCCL WARN " in line
                              and (not pids or debug_file.pid is not None or line_pid(line) in pids)]
            except OSError:
                continue
        return found[-last:]

    def served_warnings(self) -> frozenset[str]:
        """The NCCL WARN messages this launch printed before it served (:meth:`wait_ready`
        succeeded; empty before): never the cause of a later death."""
        return self._served
    def nccl_logging(self) -> bool:
        """True when the launch asked NCCL for its INFO lines (``NCCL_DEBUG`` INFO or TRACE)."""
        return self._env.get("NCCL_DEBUG", "").strip().upper() in ("INFO", "TRACE")

    def nccl_seen(self) -> bool:
        """True when NCCL printed a line, in the server log or this launch's NCCL_DEBUG_FILE files."""
        if self._watch.nccl_seen:
            return True
        pattern = self._env.get(DEBUG_FILE_VAR)
        if not pattern or self.proc is None:
            return False
        for debug_file in find_debug_files(pattern, since=self.create_time - 1.0):
            try:
                with open(debug_file.path, errors="replace") as fh:
                    if any(" NCCL " in line for line in fh):
                        return True
            except OSError:
                continue
        return False

    @property
    def gpu_before(self) -> list[int] | None:
        """Used memory per GPU (bytes) when the launch started; None without NVML."""
        return self._gpu_before

    def log_cause(self) -> Cause | None:
        """The cause found in the log tail so far (:func:`tuner.server.failure.log_cause`)."""
        return failure.log_cause(self)

    def crash_cause(self) -> str:
        """One line explaining an exit (:func:`tuner.server.failure.crash_cause`)."""
        return failure.crash_cause(self)

    def crash_failure(self, context: str = "") -> TrialFailed:
        """The error for a server that died (:func:`tuner.server.failure.crash_failure`)."""
        return failure.crash_failure(self, context)

    def request_failure(self, exc: Exception, context: str) -> TrialFailed:
        """The TrialFailed for a failed request, ``context`` saying when (e.g. "during warmup"):
        crashed, hung or unhealthy (:func:`tuner.server.failure.request_failure`)."""
        return failure.request_failure(self, exc, context)

    # -- teardown ------------------------------------------------------------------------
    def teardown(self, grace_s: float | None = None, kill_wait_s: float = 15.0,
                 gpu_timeout_s: float = 60.0) -> TeardownReport:
        """SIGTERM the group and every tracked or marked process, wait ``grace_s`` (default the
        server's ``teardown_grace_s``), SIGKILL what remains, and wait for all to be gone.

        Then checks that nothing listens on the port and (with NVML) that GPU memory is back to
        its pre-launch level (:func:`tuner.server.teardown.tear_down`). Never raises; idempotent
        (a second call returns the first report, also kept in ``teardown_report``).
        """
        if self.teardown_report is not None:
            return self.teardown_report
        grace = self.server.teardown_grace_s if grace_s is None else grace_s
        code = self.proc.poll() if self.proc is not None else None
        left = len(self.detached()) if code is not None else 0
        report = tear_down(self._processes, host=self.server.host, port=self.server.port, grace_s=grace,
                           kill_wait_s=kill_wait_s, gpu_before=self._gpu_before, gpu_timeout_s=gpu_timeout_s,
                           launcher=self.launcher if self.proc is not None else None)
        if self.proc is None and self._lws_applied:  # applied, never forwarded: the LWS still goes
            stopped = self.launcher.stop(grace)
            report.launcher, report.left = stopped.said, list(stopped.left)
        if self.pump:
            said = f", {report.launcher}" if report.launcher else ""
            self.pump.note(f"teardown: {_what_ended(code, left, report.killed)}, "
                           f"{len(report.survivors)} survivors{said}, port free {report.port_free}, "
                           f"{report.duration_s:.1f} s")
            self.pump.close()
        if self.nodeset is not None:
            self.nodeset.close(f"teardown: every node ended with the launch, {len(report.survivors)} survivors")
        self.teardown_report = report
        return report


def _what_ended(code: int | None, left: int, killed: bool) -> str:
    """The teardown line's first words: what was still running, and what it took to end it."""
    if code is None:
        return "SIGKILL needed" if killed else "exited on SIGTERM"
    status = f"{code}" if code >= 0 else f"signal {-code}"
    if not left:
        return f"the command had exited ({status}) before the teardown; nothing of it still ran"
    how = "SIGKILL needed" if killed else "ended on SIGTERM"
    return (f"the command had exited ({status}) before the teardown; {left} detached "
            f"process{'es' if left > 1 else ''} killed ({how})")
