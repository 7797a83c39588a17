"""One screen run: an nccl-tests command under one NCCL set, bounded, logged, torn down whole.

Environment: the server's rules (:func:`tuner.server.build_env`): every inherited ``NCCL_*``
and ``CUDA_DEVICE_MAX_CONNECTIONS`` removed, ``server.env`` applied, the set on top, plus the
launcher's marker variable so descendants that leave the process group are still found. The
command runs as an argv list in its own session; its stdout and stderr go to
``results/<study>/screen/NNNN.log`` (secrets scrubbed) and to an ``on_line`` callback as they
arrive. At ``timeout_s`` the whole tree is killed (SIGTERM to the group, SIGKILL after a short
grace, then every process carrying the marker): a hang is a result, status ``timeout``.

``-J`` JSON: nccl-tests 2.17.3+ writes a JSON file holding the run's whole environment (tokens
included), so it goes to a private temporary folder (mode 0700) that is deleted once read; it is
never kept under ``results/``. Whether the installed nccl-tests has ``-J`` is asked once with
``-h`` (:func:`supports_json`): nccl-tests handles ``-h`` while parsing arguments, before MPI or
any GPU is touched (``src/common.cu`` ``main``).

Why not subprocess-tee (listed for short finite commands): its 0.4 ``run`` has no timeout, no
session and no pid, and even ``-h`` can wait forever behind a wrapper (``mpirun``/``srun``
waiting for an allocation). The ``-h`` probe therefore uses :func:`run_command` with a short
timeout, the one bounded code path; nothing in nccl-tune uses subprocess-tee any more, so it
is no longer a dependency.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from tuner.errors import tolerated
from tuner.redaction import argv_secrets, redact_argv, scrub, secret_values
from tuner.screen import nccltests
from tuner.server import MARKER, ServerIdentity, build_env, kill_leftover

__all__ = ["private_json_path", "program_index", "run_command", "screen_env", "screenable", "supports_json"]

#: Seconds a ``-h`` probe may take.
PROBE_TIMEOUT_S = 30.0
#: SIGTERM-to-SIGKILL grace for a screen run's tree (s): a benchmark holds no state worth saving.
KILL_GRACE_S = 2.0
#: Output kept in memory for parsing (characters); the log file keeps everything.
MAX_TEXT_CHARS = 20_000_000
#: Variables an allreduce microbenchmark cannot see: they vary only in relaunches.
NOT_SCREENED = frozenset({"CUDA_DEVICE_MAX_CONNECTIONS"})
_PROGRAM = re.compile(r"[_-]perf(?:_mpi)?$")


def screenable(name: str) -> bool:
    """True for a searched name the screen varies: not a server flag (``-...``) and not a
    variable nccl-tests cannot see (:data:`NOT_SCREENED`; CUDA_DEVICE_MAX_CONNECTIONS changes
    how a server's streams share hardware queues, not one benchmark stream)."""
    return not name.startswith("-") and name not in NOT_SCREENED


@dataclass
class Finished:
    """How a command ended: ``text`` (stdout and stderr, scrubbed), ``exit_code`` (None when it
    could not start; negative: killed by that signal), ``killed_at_timeout``, ``wall_s`` (s),
    ``start_error`` (why it could not start, else ``""``), ``survivors`` (pids left after the
    teardown; should be empty)."""

    text: str
    exit_code: int | None
    killed_at_timeout: bool
    wall_s: float
    start_error: str = ""
    survivors: tuple[int, ...] = ()


def screen_env(inherited: Mapping[str, str], server_env: Mapping[str, str],
               set_env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The environment of a screen run and the inherited tuning names removed (the server's
    rules, :func:`tuner.server.build_env`)."""
    return build_env(inherited, server_env, set_env)


def _pump(pipe: IO[bytes], log: IO[bytes], secrets: list[str], sink: list[str],
          on_line: Callable[[str], None] | None) -> None:
    size = 0
    for raw in iter(pipe.readline, b""):
        text = scrub(raw.decode("utf-8", "replace"), secrets)
        log.write(text.encode())
        if size < MAX_TEXT_CHARS:
            sink.append(text)
            size += len(text)
        if on_line is not None:
            with tolerated():  # a display problem must not lose output
                on_line(text.rstrip("\n"))


def _exited_unreaped(proc: subprocess.Popen[bytes], timeout_s: float, poll_s: float = 0.05) -> bool:
    """Wait up to ``timeout_s`` for the command to exit without reaping it (``waitid`` with
    ``WNOWAIT``): while it is a zombie its pid, and so its process group id, cannot be reused,
    so the group can still be signalled safely. True when it exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped (by Popen): nothing left to wait for
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def _teardown(proc: subprocess.Popen[bytes], marker: str, create_time: float) -> tuple[int, ...]:
    """Kill what is left of the run: the group (its leader not yet reaped, so the group id is
    still this run's; members may outlive the leader), then every process with the marker.
    Returns the pids that survived SIGKILL."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    _exited_unreaped(proc, KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)  # reaped only now
    kill_leftover(ServerIdentity(marker, pgid=proc.pid, create_time=create_time), grace_s=KILL_GRACE_S)
    left = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.environ().get(MARKER) == marker and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
    return tuple(left)


def run_command(argv: list[str], env: Mapping[str, str], log_path: Path, timeout_s: float, *,
                on_line: Callable[[str], None] | None = None, header: tuple[str, ...] = (),
                held: Callable[[], contextlib.AbstractContextManager[None]] | None = None) -> Finished:
    """Run ``argv`` under ``env`` in a new session, output to ``log_path`` and ``on_line``.

    ``header``: ``[nccl-tune]`` lines written first (already redacted). The run is killed, tree
    and all, after ``timeout_s`` seconds; whatever happens (a signal included) nothing of it is
    left running when this returns or raises. ``held``: a context manager factory that holds
    signals during the teardown (:meth:`tuner.server.signals.SignalGuard.held`).
    """
    marker = uuid.uuid4().hex
    full = {**env, MARKER: marker}
    secrets = secret_values(full) + argv_secrets(argv)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        shown = scrub(" ".join(redact_argv(argv)), secrets)
        log.write("".join(f"[nccl-tune] {h}\n" for h in (f"argv: {shown}", *header)).encode())
        log.flush()
        try:
            proc = subprocess.Popen(argv, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            why = f"could not start {argv[0]}: {exc.strerror or exc}"
            log.write(f"[nccl-tune] {why}\n".encode())
            return Finished("", None, False, time.monotonic() - t0, start_error=why)
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            create_time = time.time()
        sink: list[str] = []
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, log, secrets, sink, on_line),
                                  name=f"screen {log_path.name}", daemon=True)
        reader.start()
        killed = False
        survivors: tuple[int, ...] = ()
        try:
            killed = not _exited_unreaped(proc, timeout_s)
        finally:
            with held() if held is not None else contextlib.nullcontext():
                survivors = _teardown(proc, marker, create_time)
                reader.join(5.0)
                note = (f"killed at the timeout of {timeout_s:g} s" if killed
                        else f"exit status {proc.returncode}")
                log.write(f"[nccl-tune] {note}; {len(survivors)} process(es) survived the teardown\n".encode())
    return Finished("".join(sink), proc.returncode, killed, time.monotonic() - t0, survivors=survivors)


def program_index(argv: list[str]) -> int | None:
    """Index of the nccl-tests program in ``argv`` (``all_reduce_perf``, ``.../all_reduce_perf_mpi``,
    ``all-reduce-perf``), skipping wrappers such as ``mpirun -np 8``; None when none is named so."""
    for i, arg in enumerate(argv):
        if _PROGRAM.search(arg.rsplit("/", 1)[-1]):
            return i
    return None


def supports_json(argv: list[str], env: Mapping[str, str], log_path: Path) -> tuple[bool, str]:
    """Whether the nccl-tests of ``argv`` accepts ``-J``, asked once with ``-h`` appended to the
    whole command (bounded by :data:`PROBE_TIMEOUT_S`). Returns ``(supported, why)``: False
    when ``-h`` does not list it, times out, or the command cannot start."""
    done = run_command([*argv, "-h"], env, log_path, PROBE_TIMEOUT_S, header=("probe: does -J exist?",))
    if done.start_error:
        return False, done.start_error
    if done.killed_at_timeout:
        return False, f"'-h' did not finish within {PROBE_TIMEOUT_S:g} s"
    answer = nccltests.command_supports_json(done.text)
    if answer:
        return True, "-h lists -J (nccl-tests 2.17.3 or later)"
    return False, "-h does not list -J (nccl-tests before 2.17.3)" if answer is False else "-h said nothing usable"


@contextlib.contextmanager
def private_json_path() -> Iterator[Path]:
    """A path for ``-J`` in a fresh folder only this user can read, removed with everything in
    it on exit (nccl-tests writes the whole environment into that file)."""
    folder = tempfile.mkdtemp(prefix="nccl-tune-screen-")
    try:
        yield Path(folder) / "run.json"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
