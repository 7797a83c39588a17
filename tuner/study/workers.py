"""Which nccl-tune workers live on this host and which GPUs each one's server gets: a worker whose
GPUs overlap a live one's (any study, any storage, any port) is refused before it launches anything.

A worker's GPUs are the ``CUDA_VISIBLE_DEVICES`` its server gets (``server.env`` first, else the
worker's environment; unset: every GPU), as NVML's UUIDs where NVML is present (so ``0`` and
``GPU-5f3c...`` are one GPU), else as written. Each worker writes one JSON file,
``<host>-<pid>.json``, into the registry folder (:func:`workers_dir`) at its start and removes it
at its end; the check and the write happen under one ``flock`` of the folder's ``.lock``, so of
two workers starting in the same second the second sees the first. A file is live while its pid
runs with the start time the file records (psutil ``create_time``): the file a SIGKILLed worker
left is ignored and removed, and a reused pid is never taken for the worker. The files hold no
secret (the storage URL without its password, no environment, no command line).

Where NVML is present, a compute process already on this worker's GPUs that is not this
worker's (``nvmlDeviceGetComputeRunningProcesses``: another user's job, a worker of an older
nccl-tune, a server a dead worker of another study left) refuses the start too
(:func:`check_processes`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tuner.errors import GpusInUse
from tuner.inputs import ExperimentConfig
from tuner.redaction import scrub, secret_values
from tuner.server import describe_pid, gpu
from tuner.servers import simulated
from tuner.study.inflight import host_name
from tuner.study.storage import hide_password

__all__ = [
    "WORKERS_DIR_VAR",
    "Gpus",
    "Worker",
    "check_processes",
    "check_workers",
    "dry_run_lines",
    "gpus_of",
    "live_workers",
    "register",
    "this_worker",
    "workers_dir",
]

#: Overrides the registry folder (tests give each run its own; a box whose home is read-only).
WORKERS_DIR_VAR = "NCCL_TUNE_WORKERS_DIR"
#: A live file's recorded start time and psutil's may differ by rounding (s).
_START_SLACK_S = 1.0
#: A CUDA_VISIBLE_DEVICES name: an index, or a GPU/MIG UUID (or its prefix) with or without ``GPU-``.
_UUID = re.compile(r"(?:GPU-|MIG-)?[0-9a-f][0-9a-f-]*", re.IGNORECASE)


def workers_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The registry folder: ``$NCCL_TUNE_WORKERS_DIR``, else ``~/.cache/nccl-tune/workers``.
    Not ``$XDG_RUNTIME_DIR``: it is unset under cron and SLURM and removed at logout, so two
    workers started from different sessions would not see each other. Files name their host, so
    a home shared by several hosts (NFS) is fine."""
    env = os.environ if environ is None else environ
    if env.get(WORKERS_DIR_VAR):
        return Path(env[WORKERS_DIR_VAR])
    return Path.home() / ".cache" / "nccl-tune" / "workers"


@dataclass(frozen=True)
class Gpus:
    """The GPUs a worker's server gets: ``visible`` (``CUDA_VISIBLE_DEVICES``; None: unset, every
    GPU), ``source`` (``"server.env"``, ``"the environment"``, ``""`` when unset) and ``uuids``
    (NVML's UUIDs of those GPUs, :func:`tuner.server.gpu.selected_uuids`; None without NVML).
    ``simulated``: the bundled simulator, on a host without NVML and told no GPUs: it holds none,
    so no other worker shares one with it (``make demo`` beside a night elsewhere)."""

    visible: str | None
    source: str = ""
    uuids: tuple[str, ...] | None = None
    simulated: bool = False

    def names(self) -> list[str]:
        """The GPUs ``visible`` names as CUDA reads the list: indices (``"00"`` is ``"0"``) and
        UUIDs (lower case), up to the first name that is neither (CUDA ignores the rest)."""
        out: list[str] = []
        for item in (self.visible or "").split(","):
            name = item.strip()
            if name.isdigit():
                out.append(str(int(name)))
            elif _UUID.fullmatch(name):
                out.append(name.lower())
            else:
                break
        return list(dict.fromkeys(out))

    def overlaps(self, other: Gpus) -> bool:
        """True when the two share a GPU: by UUID where NVML gave both, else by name (unset
        shares every GPU; an index and a UUID cannot be told apart without NVML: shared); never
        when either is :attr:`simulated`."""
        if self.simulated or other.simulated:
            return False
        if self.uuids is not None and other.uuids is not None:
            return bool(set(self.uuids) & set(other.uuids))
        if self.visible is None or other.visible is None:  # every GPU: shared unless the other names none
            return (self.visible is None or bool(self.names())) and (other.visible is None or bool(other.names()))
        return any(_same(a, b) for a in self.names() for b in other.names())

    def text(self) -> str:
        """``CUDA_VISIBLE_DEVICES=0,1 from server.env``, ``every GPU (CUDA_VISIBLE_DEVICES unset)``,
        or ``no GPU (CUDA_VISIBLE_DEVICES="" from the environment)``."""
        if self.simulated:
            return "no GPU (the simulator, on a host without NVML)"
        if self.visible is None:
            return "every GPU (CUDA_VISIBLE_DEVICES unset)"
        said = f"CUDA_VISIBLE_DEVICES={self.visible or chr(34) * 2}" + (f" from {self.source}" if self.source else "")
        return said if self.names() else f"no GPU ({said})"

    def to_json(self) -> dict[str, Any]:
        """The registry file's ``gpus`` object."""
        return {"visible": self.visible, "source": self.source, "uuids": list(self.uuids) if self.uuids is not None
                else None, "simulated": self.simulated}

    @classmethod
    def from_json(cls, data: Any) -> Gpus:
        """What :meth:`to_json` wrote; a value of the wrong type reads as unset (every GPU)."""
        data = data if isinstance(data, dict) else {}
        visible = data.get("visible")
        uuids = data.get("uuids")
        return cls(visible if isinstance(visible, str) else None, str(data.get("source") or ""),
                   tuple(str(u) for u in uuids) if isinstance(uuids, list) else None, data.get("simulated") is True)


def _same(a: str, b: str) -> bool:
    if a.isdigit() and b.isdigit():
        return a == b
    if a.isdigit() or b.isdigit():
        return True  # an index and a UUID: without NVML there is no telling
    a, b = a.removeprefix("gpu-"), b.removeprefix("gpu-")
    return a.startswith(b) or b.startswith(a)


def gpus_of(cfg: ExperimentConfig, environ: Mapping[str, str] | None = None) -> Gpus:
    """The GPUs ``cfg``'s server gets: ``CUDA_VISIBLE_DEVICES`` of ``server.env``, else of
    ``environ`` (the worker's environment, which the server inherits), with NVML's UUIDs;
    :attr:`Gpus.simulated` for the bundled simulator with neither set where NVML is absent
    (a simulator given CUDA_VISIBLE_DEVICES stands in for a server on those GPUs)."""
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in cfg.server.env:
        visible, source = cfg.server.env["CUDA_VISIBLE_DEVICES"], "server.env"
    elif "CUDA_VISIBLE_DEVICES" in env:
        visible, source = env["CUDA_VISIBLE_DEVICES"], "the environment"
    else:
        visible, source = None, ""
    uuids = gpu.selected_uuids(visible)
    idle = visible is None and uuids is None and simulated(cfg.server.command)
    return Gpus(visible, source, tuple(uuids) if uuids is not None else None, idle)


@dataclass(frozen=True)
class Worker:
    """One worker's registry file: its ``pid`` and ``create_time`` (psutil's, s since the epoch),
    ``host``, ``command`` (``sweep``), ``study``, ``config`` and ``results`` (absolute paths),
    ``port`` (``server.port``), ``storage`` (the URL without its password), ``gpus`` and
    ``started`` (s since the epoch)."""

    pid: int
    create_time: float
    host: str
    command: str
    study: str
    config: str
    results: str
    port: int
    storage: str
    gpus: Gpus
    started: float

    def to_json(self) -> dict[str, Any]:
        """The file's object (the fields above; ``gpus`` as :meth:`Gpus.to_json`)."""
        return {"pid": self.pid, "create_time": self.create_time, "host": self.host, "command": self.command,
                "study": self.study, "config": self.config, "results": self.results, "port": self.port,
                "storage": self.storage, "gpus": self.gpus.to_json(), "started": self.started}

    @classmethod
    def from_json(cls, data: Any) -> Worker | None:
        """The worker a file describes; None for a file that does not read as one."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["pid"]), float(data["create_time"]), str(data["host"]), str(data.get("command", "")),
                       str(data.get("study", "")), str(data.get("config", "")), str(data.get("results", "")),
                       int(data.get("port") or 0), str(data.get("storage", "")), Gpus.from_json(data.get("gpus")),
                       float(data.get("started") or 0.0))
        except (KeyError, TypeError, ValueError):
            return None

    def alive(self) -> bool:
        """True while this host runs ``pid`` with the recorded start time (a zombie, killed but
        not yet reaped, is not running)."""
        if self.host != host_name():
            return False
        try:
            proc = psutil.Process(self.pid)
            return (abs(proc.create_time() - self.create_time) < _START_SLACK_S
                    and proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False

    def describe(self) -> str:
        """``pid 4242 (nccl-tune sweep, study 'sim', config examples/sim.toml, port 8477,
        CUDA_VISIBLE_DEVICES=0,1 from server.env, started 2025-06-01 01:58:03)``; the config path
        relative to the working folder when it lies below it."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return (f"pid {self.pid} (nccl-tune {self.command or 'sweep'}, study '{self.study}', config "
                f"{_shown(self.config)}, port {self.port}, {self.gpus.text()}, started {when})")


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def this_worker(cfg: ExperimentConfig, *, study: str, results: Path, storage: str | None,
                command: str = "sweep", environ: Mapping[str, str] | None = None) -> Worker:
    """This process as a registry entry for a ``command`` of ``cfg`` on ``study`` (``storage``:
    the ``--storage`` URL, None for the study's own SQLite file)."""
    env = os.environ if environ is None else environ
    url = scrub(hide_password(storage), secret_values({**env, **cfg.server.env})) if storage else ""
    return Worker(os.getpid(), psutil.Process().create_time(), host_name(), command, study,
                  str(Path(cfg.path).absolute()), str(results.absolute()), cfg.server.port,
                  url or str((results / study / "study.db").absolute()), gpus_of(cfg, env), time.time())


def live_workers(directory: Path, *, clean: bool = False) -> list[Worker]:
    """The live workers of this host in ``directory``, oldest first; with ``clean``, the files
    of this host's dead workers are removed (only under the folder's lock: :func:`register`).
    Files of other hosts (a shared home) and files that do not read are left alone."""
    found = []
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            worker = Worker.from_json(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        if worker is None or worker.host != host_name():
            continue
        if worker.alive():
            found.append(worker)
        elif clean:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda w: w.started)


class Registration:
    """This worker's registry file, held until :meth:`release` (``path`` None: none was written)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def release(self) -> None:
        """Remove the file (a clean exit); again is a no-op."""
        if self.path is not None:
            with contextlib.suppress(OSError):  # the folder went away: nothing left to remove
                self.path.unlink(missing_ok=True)
            self.path = None


def check_workers(gpus: Gpus, directory: Path) -> None:
    """What :func:`register` refuses, without writing anything (the dry run): raises
    :class:`tuner.errors.GpusInUse` (exit 3) when a live worker of this host in ``directory``
    (not this process) shares one of ``gpus``."""
    others = [w for w in live_workers(directory) if w.pid != os.getpid() and w.gpus.overlaps(gpus)]
    if others:
        raise GpusInUse(gpus.text(), "; ".join(w.describe() for w in others), [w.pid for w in others], worker=True)


def register(worker: Worker, directory: Path) -> Registration:
    """Refuse ``worker`` when a live worker of this host in ``directory`` shares a GPU with it
    (:class:`tuner.errors.GpusInUse`, exit 3, naming each such worker), else write its file
    atomically (a temporary file, then ``os.replace``) and return it. A file of this same process
    (an earlier command run in it) is replaced, never counted. OSError when the folder cannot
    be created or written."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        others = [w for w in live_workers(directory, clean=True)
                  if w.pid != worker.pid and w.gpus.overlaps(worker.gpus)]
        if others:
            raise GpusInUse(worker.gpus.text(), "; ".join(w.describe() for w in others), [w.pid for w in others],
                            worker=True)
        path = directory / f"{worker.host}-{worker.pid}.json"
        tmp = directory / f".{worker.host}-{worker.pid}.tmp"
        with open(tmp, "w") as fh:
            json.dump(worker.to_json(), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    return Registration(path)


def _strangers(gpus: Gpus, directory: Path) -> list[tuple[str, int]]:
    """``(words, pid)`` of each compute process NVML lists on ``gpus`` that is neither this
    process nor one of its children, naming the live worker whose tree it belongs to, if any (a
    worker's tree is never ours, even a worker this process started)."""
    procs = gpu.compute_processes(gpus.visible)
    if not procs:
        return []
    me = psutil.Process()
    ours = {me.pid} | {p.pid for p in me.children(recursive=True)}
    trees = {}
    for w in live_workers(directory):
        if w.pid == me.pid:
            continue
        try:
            trees[w] = {w.pid} | {p.pid for p in psutil.Process(w.pid).children(recursive=True)}
        except psutil.Error:
            continue
    out = []
    for p in procs:
        owner = next((w for w, pids in trees.items() if p.pid in pids), None)
        if owner is None and p.pid in ours:
            continue
        memory = f", {p.used_bytes / 2**20:.0f} MiB" if p.used_bytes is not None else ""
        whose = f", the server of nccl-tune worker {owner.describe()}" if owner is not None else ""
        who = describe_pid(p.pid) if psutil.pid_exists(p.pid) else f"pid {p.pid} (not visible here: another container's?)"
        out.append((f"GPU {p.index} ({p.uuid}) runs {who}{memory}{whose}", p.pid))
    return out


def check_processes(gpus: Gpus, directory: Path | None = None, settle_s: float = 5.0) -> None:
    """Where NVML is present, refuse (:class:`tuner.errors.GpusInUse`, exit 3) when ``gpus``
    already run a compute process that is not this worker's; ``directory``: the registry, to
    name the worker such a process belongs to (default :func:`workers_dir`). A listed pid that
    this host does not show is looked at again for up to ``settle_s`` seconds: a server just torn
    down may stay in NVML's list a moment, while one of another container stays."""
    where = directory if directory is not None else workers_dir()
    found = _strangers(gpus, where)
    deadline = time.monotonic() + settle_s
    while found and not all(psutil.pid_exists(pid) for _, pid in found) and time.monotonic() < deadline:
        time.sleep(0.5)
        found = _strangers(gpus, where)
    if found:
        raise GpusInUse(gpus.text(), "; ".join(words for words, _ in found), [pid for _, pid in found], worker=False)


def dry_run_lines(cfg: ExperimentConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """What ``--dry-run`` says about this worker's GPUs: which they are, and each live worker of
    this host and each compute process on them that would refuse the sweep (exit 3)."""
    env = os.environ if environ is None else environ
    mine = gpus_of(cfg, env)
    directory = workers_dir(env)
    others = [w for w in live_workers(directory) if w.pid != os.getpid()]
    sharing = [w for w in others if w.gpus.overlaps(mine)]
    strangers = _strangers(mine, directory)
    if sharing or strangers:
        return [f"GPUs: {mine.text()}; the sweep would be refused (exit 3) while they are in use:",
                *(f"  - by nccl-tune worker {w.describe()}: give this worker other GPUs (CUDA_VISIBLE_DEVICES) "
                  f"or stop that one (kill {w.pid})" for w in sharing),
                *(f"  - {words}" for words, _ in strangers)]
    if others:
        n = len(others)
        return [f"GPUs: {mine.text()}; {n} other live nccl-tune worker{'s' if n != 1 else ''} on this host, "
                "on other GPUs."]
    return [f"GPUs: {mine.text()}; no other live nccl-tune worker on this host."]
