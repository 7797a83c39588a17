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
* with ``--log-stdin`` it reads one JSON payload from stdin (the server writes it, then closes
  it): ``{"lines": [[kind, text], ...], "nccl_output": plan}``, kind ``"nccl"`` or ``"log"``
  (a plain list of strings is taken as ``"log"`` lines). It prints them with its own pid and
  thread id in place of ``@@PID@@`` / ``@@TID@@``, as a real rank process logs its own: vLLM's
  lines on stderr, whole; NCCL's where NCCL would write them (ncclstdio: the file named by
  NCCL_DEBUG_FILE, or stdout in 4096-byte blocks when the plan says ``"stdout": "block"``,
  else with the vLLM lines), then writes one byte on ``--ack-fd``;
* a normal end (SIGTERM unless ignored, the max lifetime) writes out NCCL's buffered output
  first, as ``exit()`` flushes C stdio; SIGKILL loses it.
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

if __package__:
    from . import ncclstdio
else:  # run as a plain script (python -S .../worker.py): its own folder is sys.path[0]
    import ncclstdio  # type: ignore[no-redef]

DEFAULT_MAX_LIFETIME_S = 3600.0


def _set_comm_name(name: str) -> None:
    """Best effort: rename the process (``/proc/PID/comm``, 15 bytes) like vLLM's setproctitle."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _print_lines(ack_fd: int | None) -> ncclstdio.Sink | None:
    """Print the lines the server wrote on stdin (see the module docstring); returns the NCCL
    sink, whose buffer a normal exit must write out."""
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except (OSError, ValueError):
        return None
    if isinstance(payload, list):
        payload = {"lines": [["log", line] for line in payload]}
    pid, tid = str(os.getpid()), str(threading.get_native_id())
    sink = ncclstdio.open_sink(payload.get("nccl_output"), os.getpid())
    out = []
    for kind, line in payload.get("lines", []):
        text = str(line).replace("@@PID@@", pid).replace("@@TID@@", tid)
        if kind == "nccl" and sink is not None:
            sink.write(text)
        elif sink is not None:  # vLLM's logging flushes each line as it comes, between NCCL's
            _write_err(text + "\n")
        else:  # the tidy default: the rank's lines in one write
            out.append(text + "\n")
    _write_err("".join(out))
    try:
        if ack_fd is not None:
            os.write(ack_fd, b"1")  # tells the server the lines are out
    except (OSError, ValueError):
        pass
    return sink


def _write_err(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _exit_cleanly(sink: ncclstdio.Sink | None, sig: int | None = None) -> None:
    """A normal exit: C stdio buffers are written out; then die of ``sig`` (keeps the status
    a SIGTERM gives) or return."""
    if sink is not None:
        sink.flush()
    if sig is not None:
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)


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
                    help="print the log lines given as a JSON payload on stdin")
    ap.add_argument("--ack-fd", type=int, default=None,
                    help="file descriptor to write one byte on once the lines are out")
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
    sink = _print_lines(args.ack_fd) if args.log_stdin else None
    if sink is not None and not args.ignore_sigterm:
        signal.signal(signal.SIGTERM, lambda sig, _frame: _exit_cleanly(sink, sig))
    deadline = time.monotonic() + max(0.0, lifetime)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _exit_cleanly(sink)
            return 0
        time.sleep(min(left, 30.0))


if __name__ == "__main__":
    sys.exit(main())
