"""Where one process's NCCL log lines physically go: a file named by NCCL_DEBUG_FILE, or C stdout
with the buffering a real server gets.

NCCL (src/debug.cc ``ncclDebugInit`` / ``ncclDebugLog``) writes its log to ``stdout`` with
``fwrite`` (``vfprintf`` from 2.29) and never calls ``fflush``. Only a file named by
``NCCL_DEBUG_FILE`` is opened by NCCL itself (``fopen(name, "w")``, so it is truncated), one per
process when the name holds ``%p``; it is unbuffered up to 2.26 (``setbuf(file, NULL)``) and
line-buffered from 2.27 (``setlinebuf``), so its lines are whole and survive a SIGKILL. When
``fopen`` fails NCCL keeps ``stdout``. On a pipe (what a launcher gives a server) glibc buffers
``stdout`` in 4096-byte blocks: the reader gets full blocks cut wherever byte 4096 falls
(mid-line), mixed with what other processes write to the same pipe, and the rest only at a
normal ``exit()``; a SIGKILLed process loses it (NVIDIA/nccl #1841: "I typically see nccl's
output only upon process shutdown").

Stdlib only and no import from the package: ``worker.py`` runs as a plain script and loads it
from its own folder. The plan (which file, which buffering) is made by ``nccllog.output_plan``
in the process that knows the environment; this module only carries it out.
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["BLOCK_SIZE", "BlockSink", "FileSink", "Sink", "expand_debug_file", "open_sink"]

#: glibc's buffer for a stream that is not a terminal: ``st_blksize`` of a pipe (4096 on Linux).
BLOCK_SIZE = 4096


def expand_debug_file(pattern: str, host: str, pid: int) -> str:
    """NCCL_DEBUG_FILE expanded as ``ncclDebugInit`` does (src/debug.cc): ``%h`` the host name
    (up to its first dot), ``%p`` the pid, ``%%`` one ``%``; any other ``%x`` is kept as
    written, and so is a ``%`` at the very end (NCCL reads past it; kept here)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        i += 1
        if ch != "%" or i >= len(pattern):
            out.append(ch)
            continue
        code = pattern[i]
        i += 1
        out.append({"%": "%", "h": host, "p": str(pid)}.get(code, "%" + code))
    return "".join(out)


class Sink:
    """Where a process's NCCL messages go; ``write`` takes one message (newline added),
    ``flush`` is what a normal ``exit()`` does. Safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Write out what is buffered (nothing here)."""


class FileSink(Sink):
    """The NCCL_DEBUG_FILE of one process, opened as ``fopen(path, "w")``: truncated, one
    ``write`` per message. Unbuffered (before 2.27) and line-buffered (2.27+) differ in nothing
    a reader sees: each message ends with a newline, so either way it is written whole when
    NCCL logs it. ``line_buffered`` records which one NCCL would use. Raises OSError when the
    file cannot be opened (NCCL then keeps stdout)."""

    def __init__(self, path: str, line_buffered: bool):
        super().__init__()
        self.path = path
        self.line_buffered = line_buffered
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, text: str) -> None:
        with self._lock, contextlib.suppress(OSError):
            os.write(self.fd, (text + "\n").encode())


class BlockSink(Sink):
    """C stdout on a pipe: glibc's full buffering. Bytes pile up in a ``size``-byte buffer and
    reach ``fd`` only as full blocks, cut at every ``size`` bytes of the process's output
    whatever the line; ``flush`` (a normal exit) writes the rest; a killed process never
    does. One ``write`` of ``size`` bytes (at most PIPE_BUF) reaches a pipe in one piece."""

    def __init__(self, fd: int = 1, size: int = BLOCK_SIZE):
        super().__init__()
        self.fd = fd
        self.size = size
        self.buffer = bytearray()

    def write(self, text: str) -> None:
        with self._lock:
            self.buffer += (text + "\n").encode()
            while len(self.buffer) >= self.size:
                self._out(bytes(self.buffer[:self.size]))
                del self.buffer[:self.size]

    def flush(self) -> None:
        with self._lock:
            if self.buffer:
                self._out(bytes(self.buffer))
                self.buffer.clear()

    def _out(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.fd, data)


def open_sink(plan: dict | None, pid: int) -> Sink | None:
    """The sink of a process with ``pid`` following ``plan`` (``nccllog.output_plan``: keys
    ``debug_file`` (pattern or None), ``line_buffered``, ``host``, ``stdout`` = ``"line"`` or
    ``"block"``). None means NCCL's lines go to the caller's own tidy log stream, whole lines
    flushed as written (the simulator's default)."""
    plan = plan or {}
    pattern = plan.get("debug_file")
    if pattern:
        path = expand_debug_file(pattern, str(plan.get("host", "")), pid)
        if path:
            try:
                return FileSink(path, bool(plan.get("line_buffered")))
            except OSError:
                pass  # NCCL keeps stdout when fopen fails
    if plan.get("stdout") == "block":
        return BlockSink(1)
    return None
