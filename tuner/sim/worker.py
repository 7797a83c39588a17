"""A simulated TP worker process: the stand-in for vLLM's ``VLLM::Worker_TP<r>`` processes.
It only prints its log lines and sleeps; what matters is its life cycle:

* started by the server as ``python -S .../tuner/sim/worker.py --sim-worker --sim-id ID --rank R``
  (a plain script, stdlib only, so it starts fast and imports nothing from ``tuner``); also
  runnable as ``python -m tuner.sim worker ...``;
* it stays in the server's process group and session, so a launcher that kills the group kills
  it; it does NOT watch its parent: if the server is SIGKILLed the worker lives on, as vLLM's
  EngineCore does;
* SIGTERM ends it (exit status -15), unless ``--ignore-sigterm`` (fault ``orphan-workers``);
  SIGKILL always does;
* safety net: it exits by itself after ``--max-lifetime`` seconds (default 3600, env
  ``SIM_WORKER_MAX_LIFETIME_S``) so a leaked worker does not live forever on a dev machine;
* with ``--log-stdin`` it reads one JSON list of log lines from stdin (the server writes the
  rank's NCCL and vLLM lines there, then closes it) and prints them on stderr with its own pid
  and thread id in place of ``@@PID@@`` / ``@@TID@@``, as a real rank process logs its own.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import signal
import sys
import threading
import time

DEFAULT_MAX_LIFETIME_S = 3600.0


def _set_comm_name(name: str) -> None:
    """Best effort: rename the process (``/proc/PID/comm``, 15 bytes) like vLLM's setproctitle."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _print_lines() -> None:
    """Print the lines the server wrote on stdin (see the module docstring)."""
    try:
        lines = json.loads(sys.stdin.read() or "[]")
    except (OSError, ValueError):
        return
    pid, tid = str(os.getpid()), str(threading.get_native_id())
    out = "".join(str(line).replace("@@PID@@", pid).replace("@@TID@@", tid) + "\n"
                  for line in lines)
    try:
        sys.stderr.write(out)
        sys.stderr.flush()
        sys.stdout.write("1")  # tells the server the lines are out
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Run one worker until SIGTERM/SIGKILL or the max lifetime; returns the exit status."""
    ap = argparse.ArgumentParser(prog="tuner.sim worker",
                                 description="One simulated tensor-parallel worker process.")
    ap.add_argument("--sim-worker", action="store_true", help="marker so tools can find workers")
    ap.add_argument("--sim-id", default="", help="id of the server that started this worker")
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--max-lifetime", type=float, default=None,
                    help="seconds before exiting on its own (default 3600 or "
                         "SIM_WORKER_MAX_LIFETIME_S)")
    ap.add_argument("--ignore-sigterm", action="store_true", help="fault orphan-workers")
    ap.add_argument("--log-stdin", action="store_true",
                    help="print the log lines given as a JSON list on stdin")
    args = ap.parse_args(argv)
    lifetime = args.max_lifetime
    if lifetime is None:
        try:
            lifetime = float(os.environ.get("SIM_WORKER_MAX_LIFETIME_S", DEFAULT_MAX_LIFETIME_S))
        except ValueError:
            lifetime = DEFAULT_MAX_LIFETIME_S
    _set_comm_name(f"SIM_Worker_TP{args.rank}")
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Ctrl-C in a terminal reaches the whole group: let the server orchestrate shutdown.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.log_stdin:
        _print_lines()
    deadline = time.monotonic() + max(0.0, lifetime)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return 0
        time.sleep(min(left, 30.0))


if __name__ == "__main__":
    sys.exit(main())
