"""The simulated server's TP worker processes, as vLLM's executor manages them."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time

WORKER_STOP_GRACE_S = 5.0  # SIGTERM -> SIGKILL delay for workers at teardown
WORKER_LOG_WAIT_S = 3.0  # how long a start waits for the workers to print their lines (s)


class Workers:
    """The N-1 simulated TP worker processes (worker.py), started in the server's group; each
    gets its rank's payload on stdin (its lines and where its NCCL lines go, see worker.py) and
    acknowledges on a pipe of its own once it printed them. ``environs`` (one per worker) and
    ``logs`` (a file per worker that takes its stdout and stderr, as Ray's worker-*.out) default
    to ``environ`` and the server's own streams."""

    def __init__(self, count: int, sim_id: str, ignore_sigterm: bool, environ: dict,
                 payloads: list[dict] | None = None, environs: list[dict] | None = None,
                 logs: list[str] | None = None):
        self.sim_id = sim_id
        self.procs: list[subprocess.Popen] = []
        self.acks: list[int] = []
        self.stopping = False
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
        for rank in range(1, count + 1):
            ack_r, ack_w = os.pipe()
            argv = [sys.executable, "-S", script, "--sim-worker", "--sim-id", sim_id,
                    "--rank", str(rank), "--log-stdin", "--ack-fd", str(ack_w)]
            if ignore_sigterm:
                argv.append("--ignore-sigterm")
            env = environs[rank - 1] if environs and rank - 1 < len(environs) else environ
            out = open(logs[rank - 1], "ab") if logs and rank - 1 < len(logs) else None  # noqa: SIM115
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=out,
                                        env=env, close_fds=True, pass_fds=(ack_w,))
            finally:
                os.close(ack_w)
                if out is not None:
                    out.close()
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                payload = payloads[rank - 1] if payloads and rank - 1 < len(payloads) else {}
                proc.stdin.write(json.dumps(payload).encode())
                proc.stdin.close()
            self.procs.append(proc)
            self.acks.append(ack_r)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def wait_logged(self, timeout: float = WORKER_LOG_WAIT_S) -> None:
        """Wait until every worker printed its lines (its acknowledgement byte or its exit)."""
        deadline = time.monotonic() + timeout
        for fd in self.acks:
            left = deadline - time.monotonic()
            if left > 0:
                with contextlib.suppress(OSError, ValueError):
                    select.select([fd], [], [], left)

    def dead(self) -> list[int]:
        """Ranks of workers that exited on their own."""
        return [i + 1 for i, p in enumerate(self.procs) if p.poll() is not None]

    def terminate(self, wait: bool = True) -> None:
        """SIGTERM every worker; with ``wait``, SIGKILL those still alive after the grace."""
        self.stopping = True
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        if not wait:
            return
        deadline = time.monotonic() + WORKER_STOP_GRACE_S
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                p.wait()
        self._close_acks()

    def _close_acks(self) -> None:
        for fd in self.acks:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.acks = []

    def kill_now(self) -> None:
        """SIGKILL every worker (crash path: no time for manners)."""
        self.stopping = True
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.wait(timeout=2)
        self._close_acks()
