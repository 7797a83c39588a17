"""Which runner is sweeping on this host and port, and what it has in flight.

Each runner holds ``results/<study>/runners/<host>-port<port>.json`` open under an exclusive
``flock`` for its whole life, and writes into it the trial it is running and the identity of
that trial's server (:class:`tuner.server.ServerIdentity`: pid, process group, start time,
marker, port). The kernel drops the lock when the process dies, however it dies, so:

* a second runner of the same study on the same host and port cannot take the lock and is
  refused, naming the live runner's pid;
* a file whose lock can be taken belongs to a dead runner: the next runner tears down the
  server it left and marks its trial interrupted (retried once), then removes the file.

Runners of other ports (two 4-GPU servers on one host) have their own files and never touch
each other's server.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

import psutil

from tuner.errors import MachineNotClean
from tuner.server import ServerIdentity

__all__ = ["RunnerFile", "host_name", "live_runners", "runner_alive", "runner_id"]


def host_name() -> str:
    """This host's name as runner records use it."""
    return socket.gethostname()


def runner_id() -> str:
    """``host:pid`` of this runner, written into every trial it starts."""
    return f"{host_name()}:{os.getpid()}"


def runner_alive(runner: str) -> bool:
    """True when ``host:pid`` names a live nccl-tune runner on this host (a reused pid of
    another program does not count); False for other hosts' runners or dead ones."""
    host, _, pid = runner.rpartition(":")
    if host != host_name() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        cmd = " ".join(psutil.Process(int(pid)).cmdline())
    except psutil.Error:
        return False
    return "tuner" in cmd or "nccl-tune" in cmd


class RunnerFile:
    """This runner's locked record under ``study_dir/runners/`` (see the module docstring)."""

    def __init__(self, study_dir: Path, port: int) -> None:
        self.dir = study_dir / "runners"
        self.path = self.dir / f"{host_name()}-port{port}.json"
        self.port = port
        self._fh: IO[str] | None = None
        self.left_behind: dict[str, Any] = {}

    def claim(self, study: str) -> None:
        """Take the lock; raises MachineNotClean when a live runner holds it. What a dead
        runner left in the file is kept in ``left_behind`` for recovery."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held open for the runner's life
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            other = _parse(fh.read())
            fh.close()
            raise self._held(study, other) from None
        fh.seek(0)
        self.left_behind = _parse(fh.read())
        self._fh = fh
        self._write({"pid": os.getpid(), "runner": runner_id(), "study": study, "port": self.port,
                     "since": time.time()})

    def held_by(self, study: str) -> MachineNotClean | None:
        """What :meth:`claim` would raise now, found without taking the lock or creating anything
        (``--dry-run``; a probe of the lock could make a runner starting at that moment refuse):
        the file's lock as the kernel lists it (:func:`_flocked`), or where that list cannot be
        read, whether the file names a live nccl-tune runner (:func:`runner_alive`). None when
        there is no file or nobody holds it."""
        try:
            other = _parse(self.path.read_text())
            locked = _flocked(self.path, other.get("pid"))
        except OSError:
            return None
        held = locked if locked is not None else runner_alive(str(other.get("runner", "")))
        return self._held(study, other) if held else None

    def _held(self, study: str, other: dict[str, Any]) -> MachineNotClean:
        return MachineNotClean(
            f"another nccl-tune runner (pid {other.get('pid', '?')}) is sweeping study '{study}' on this "
            f"host and port {self.port}; wait for it, stop it, or use another server.port")

    def _write(self, data: dict[str, Any]) -> None:
        assert self._fh is not None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(json.dumps(data))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def set_trial(self, trial: int, trial_id: int | None, server: ServerIdentity) -> None:
        """Record the trial in flight and its server's identity (before and after start), as
        ``"server": ServerIdentity.to_json()``."""
        self._write({"pid": os.getpid(), "runner": runner_id(), "port": self.port, "trial": trial,
                     "trial_id": trial_id, "server": server.to_json()})

    def clear_trial(self) -> None:
        """Nothing in flight any more."""
        self._write({"pid": os.getpid(), "runner": runner_id(), "port": self.port})

    def release(self) -> None:
        """Drop the lock and the file (a clean exit)."""
        if self._fh is not None:
            self.path.unlink(missing_ok=True)
            self._fh.close()
            self._fh = None

    def orphans(self) -> list[tuple[Path, dict[str, Any]]]:
        """Files of this host's dead runners on other ports (their locks are free)."""
        found = []
        for path in sorted(self.dir.glob(f"{host_name()}-port*.json")):
            if path == self.path:
                continue
            with open(path, "a+") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a live runner of another port
                fh.seek(0)
                found.append((path, _parse(fh.read())))
                fcntl.flock(fh, fcntl.LOCK_UN)
        return found


def live_runners(study_dir: Path) -> list[dict[str, Any]]:
    """What the live runners of this host wrote in ``study_dir/runners/`` (``pid``, ``runner``,
    ``port``, and ``trial`` while one is in flight), found without taking a lock (a probe of the
    lock could make a runner starting at that moment refuse): a file counts when the kernel lists
    its runner's ``flock`` on it, or where that list cannot be read, when it names a live
    nccl-tune runner (:func:`runner_alive`). Runners of other hosts are not seen here (their
    trials' heartbeats are). Empty without the folder."""
    found = []
    for path in sorted((study_dir / "runners").glob("*.json")):
        try:
            data = _parse(path.read_text())
            locked = _flocked(path, data.get("pid"))
        except OSError:
            continue
        if locked if locked is not None else runner_alive(str(data.get("runner", ""))):
            found.append(data)
    return found


def _flocked(path: Path, pid: object) -> bool | None:
    """Whether process ``pid`` (the file's runner) holds a ``flock`` on ``path``, from the
    kernel's list of locks (``/proc/locks``: ``1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode>
    0 EOF``: fs/locks.c, lock_get_status); matched by inode and pid, since some filesystems
    (btrfs subvolumes) show another device there than ``stat``. None where the list cannot be read."""
    inode = str(path.stat().st_ino)
    try:
        listed = Path("/proc/locks").read_text()
    except OSError:
        return None
    return any(f[1] == "FLOCK" and f[4] == str(pid) and f[5].rpartition(":")[2] == inode
               for f in (line.split() for line in listed.splitlines()) if len(f) > 5)


def _parse(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
