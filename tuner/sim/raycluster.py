"""A vLLM 0.8.2 server on Ray (``--distributed-executor-backend ray``, V0 executor): which
environment its workers get, and how their output reaches the server's log.

* Environment (vllm/executor/ray_distributed_executor.py ``_init_workers_ray``, 0.8.x): rank 0,
  the driver worker, runs in the engine process and sees the launch environment. Ranks 1..N-1
  are Ray actors started by the raylet: their environment is the one ``ray start`` had
  (vllm-project/vllm #6803), updated only with the variables vLLM copies, the names of its own
  registry ``vllm.envs.environment_variables`` (the ``VLLM_*`` ones and a few others, below)
  minus the worker-specific ones (vLLM PR #14099; the log line "Copying the following
  environment variables to workers: [...]", vllm-project/vllm #15769). No ``NCCL_*``: a set
  given to ``vllm serve`` reaches rank 0 only. (vLLM PR #34383, 2026, copies every ``NCCL_*``;
  not simulated.) The registry is taken as every ``VLLM_*`` name plus ``OTHER_REGISTERED``
  (vllm/envs.py of that era), an approximation: an unknown ``VLLM_FOO`` is copied here.
* Output: each actor's stdout and stderr go to its own file (Ray's ``worker-*.out``); the log
  monitor reads them with ``readline`` (a line still being written comes out cut) and the
  driver prints each line after ``(RayWorkerWrapper pid=N)``, with ``, ip=X`` for a worker on
  another node (ray/_private/worker.py ``print_worker_logs``). Repeated lines are folded (ray
  PR #33403, ray/_private/ray_logging ``LogDeduplicator``): a line whose words without digits
  (``_canonicalise_log_line``) match one already seen from another source is held back and
  counted; when the aggregation window ends the last copy is printed with
  ``[repeated Nx across cluster]`` (N = copies held back; a single one is printed as is). The
  window (``RAY_DEDUP_LOGS_AGG_WINDOW_S``, 5 s) is taken to end with the start and at
  shutdown, so the output does not depend on timing; ``RAY_DEDUP_LOGS=0`` turns folding off.
  Ray's colour codes are left out.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field

__all__ = ["DEFAULT_START_ENV", "OTHER_REGISTERED", "RAY_VLLM_VERSION", "WORKER_SPECIFIC", "LogDeduplicator",
           "RayLogMonitor", "canonical", "copied_vars", "executor_lines", "node_ip", "worker_environ"]

RAY_VLLM_VERSION = "0.8.2"
#: Names of vllm/envs.py ``environment_variables`` (0.8.x) that do not start with ``VLLM_``.
OTHER_REGISTERED = ("MAX_JOBS", "NVCC_THREADS", "CMAKE_BUILD_TYPE", "VERBOSE", "CUDA_HOME",
                    "LD_LIBRARY_PATH", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES", "S3_ACCESS_KEY_ID",
                    "S3_SECRET_ACCESS_KEY", "S3_ENDPOINT_URL")
#: ``RayDistributedExecutor.WORKER_SPECIFIC_ENV_VARS``: set per worker, never copied.
WORKER_SPECIFIC = frozenset({"VLLM_HOST_IP", "VLLM_HOST_PORT", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES"})
#: What ``ray start`` had when the simulator is not told (``--ray-start-env``): NCCL's log on,
#: nothing tuned (the case of tests/cases/20-ray-dedup-silent-ranks).
DEFAULT_START_ENV = {"NCCL_DEBUG": "INFO"}
ACTOR = "RayWorkerWrapper"
# ray/_private/ray_logging: words holding digits or hex differ between workers
_NUMBERS = re.compile(r"(\d+|0x[0-9a-fA-F]+)")
_WARN_ONCE = (" (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
              "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
              "for more options.)")


def copied_vars(environ: dict) -> list[str]:
    """Names of ``environ`` that vLLM 0.8.2 copies to its Ray workers, sorted (vLLM logs them
    in its registry's order)."""
    return sorted(k for k in environ
                  if (k.startswith("VLLM_") or k in OTHER_REGISTERED) and k not in WORKER_SPECIFIC)


def worker_environ(launch: dict, start_env: dict) -> dict:
    """The environment of a Ray worker: the launch environment without what the launcher may
    have added for this run (every ``NCCL_*``, ``CUDA_DEVICE_MAX_CONNECTIONS``, ``VLLM_*``),
    plus ``start_env`` (what ``ray start`` had), plus what vLLM copies from the launch."""
    env = {k: v for k, v in launch.items()
           if not k.startswith(("NCCL_", "VLLM_")) and k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(start_env)
    env.update({k: launch[k] for k in copied_vars(launch)})
    return env


def node_ip(node: int) -> str:
    """The simulated address of node ``node`` (the driver's is node 0)."""
    return f"10.0.0.{node + 1}"


def executor_lines(launch: dict, config_root: str | None = None) -> list[tuple[str, str, str]]:
    """(level, file:line, message) of what the 0.8.2 executor logs when it starts its workers."""
    root = config_root or launch.get("VLLM_CONFIG_ROOT") or os.path.expanduser("~/.config/vllm")
    return [("INFO", "ray_distributed_executor.py:176", "use_ray_spmd_worker: False"),
            ("INFO", "ray_distributed_executor.py:352", "non_carry_over_env_vars from config: set()"),
            ("INFO", "ray_distributed_executor.py:354",
             f"Copying the following environment variables to workers: {copied_vars(launch)}"),
            ("INFO", "ray_distributed_executor.py:357", "If certain env vars should NOT be copied to workers, "
             f"add them to {os.path.join(root, 'ray_non_carry_over_env_vars.json')} file")]


def canonical(line: str) -> str:
    """Ray's ``_canonicalise_log_line``: the words of ``line`` that hold no digit or hex."""
    return " ".join(w for w in line.split() if not _NUMBERS.search(w))


@dataclass
class _Held:
    count: int  # copies held back
    line: str  # the latest copy
    source: tuple[str, int]  # (ip, pid) of the latest copy
    sources: set = field(default_factory=set)


class LogDeduplicator:
    """Ray's ``LogDeduplicator`` without the clock: ``deduplicate`` returns the lines of one
    batch to print now, ``flush`` the folded ones (the end of the aggregation window). Lines
    come back as ``((ip, pid), text)``. ``enabled`` False (``RAY_DEDUP_LOGS=0``) passes all."""

    def __init__(self, enabled: bool = True, allow: str | None = None, skip: str | None = None):
        self.enabled = enabled
        self.allow = re.compile(allow) if allow else None
        self.skip = re.compile(skip) if skip else None
        self.recent: dict[str, _Held] = {}
        self.warned = False

    def deduplicate(self, source: tuple[str, int], lines: list[str]) -> list[tuple[tuple[str, int], str]]:
        """The lines of a batch from ``source`` to print at once (first copies, lines from a
        source already seen with that pattern, lines that are all digits)."""
        if not self.enabled:
            return [(source, ln) for ln in lines]
        out = []
        for line in lines:
            if self.allow and self.allow.search(line):
                out.append((source, line))
                continue
            if self.skip and self.skip.search(line):
                continue
            key = canonical(line)
            if not key:
                out.append((source, line))
            elif key not in self.recent:
                self.recent[key] = _Held(0, line, source, {source})
                out.append((source, line))
            else:
                held = self.recent[key]
                held.sources.add(source)
                if len(held.sources) > 1:
                    held.count, held.line, held.source = held.count + 1, line, source
                else:  # Ray does not fold a source's own repeats
                    out.append((source, line))
        return out

    def flush(self) -> list[tuple[tuple[str, int], str]]:
        """The end of the window: each pattern held back more than once as its last copy with
        ``[repeated Nx across cluster]`` (the first such line also says how to turn it off),
        once as that copy."""
        out = []
        for held in self.recent.values():
            if held.count > 1:
                note = "" if self.warned else _WARN_ONCE
                self.warned = True
                out.append((held.source, f"{held.line} [repeated {held.count}x across cluster]{note}"))
            elif held.count == 1:
                out.append((held.source, held.line))
        self.recent.clear()
        return out


class RayLogMonitor:
    """The worker log files of one simulated cluster, read as Ray's log monitor reads them and
    printed as its driver prints them. ``workers`` holds ``(path, node)`` per worker rank 1..,
    in the folder ``session``; pids are learnt with ``started``."""

    def __init__(self, session: str, workers: list[tuple[str, int]], environ: dict):
        self.session = session
        self.files = [path for path, _ in workers]
        self.ips = [node_ip(node) for _, node in workers]
        self.pids = [0] * len(workers)
        self.offsets = [0] * len(workers)
        self.dedup = LogDeduplicator(environ.get("RAY_DEDUP_LOGS", "1").lower() not in ("0", "false"),
                                     environ.get("RAY_DEDUP_LOGS_ALLOW_REGEX"),
                                     environ.get("RAY_DEDUP_LOGS_SKIP_REGEX"))

    def started(self, pids: list[int]) -> None:
        """The pids of the worker processes, in rank order."""
        self.pids = list(pids) + [0] * (len(self.files) - len(pids))

    def prefix(self, source: tuple[str, int]) -> str:
        """``(RayWorkerWrapper pid=N)`` or ``(RayWorkerWrapper pid=N, ip=X)`` off the driver's node."""
        ip, pid = source
        return f"({ACTOR} pid={pid})" if ip == node_ip(0) else f"({ACTOR} pid={pid}, ip={ip})"

    def poll(self) -> list[str]:
        """New lines of every worker file, in rank order, prefixed and folded; a last line
        without its newline yet comes out as it is (``readline`` at the end of the file)."""
        out = []
        for i, path in enumerate(self.files):
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[i])
                    data = fh.read()
            except OSError:
                continue
            if not data:
                continue
            self.offsets[i] += len(data)
            lines = [ln.decode("utf-8", "replace").rstrip("\r") for ln in data.split(b"\n")]
            if lines and lines[-1] == "":
                lines.pop()
            out += [f"{self.prefix(src)} {text}"
                    for src, text in self.dedup.deduplicate((self.ips[i], self.pids[i]), lines)]
        return out

    def flush(self) -> list[str]:
        """The folded lines held back so far (the aggregation window ends)."""
        return [f"{self.prefix(src)} {text}" for src, text in self.dedup.flush()]

    def remove_files(self) -> None:
        """Delete the worker files and their folder (a normal shutdown; a SIGKILLed server
        leaves its ``sim-ray-session-*`` folder in the temp dir, as Ray leaves /tmp/ray)."""
        for path in self.files:
            with contextlib.suppress(OSError):
                os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(self.session)
