"""The server's output: pumped from its pipe into a file bounded in bytes, secrets scrubbed, tail kept.

A chatty server cannot fill the disk: the trial log never grows past ``server.log_max_bytes``
bytes (:func:`file_bound`). A line longer than :func:`line_cap` bytes is cut, its head kept
(where a cause's words and NCCL's prefix are) with ``[... N bytes of this line dropped ...]``;
once the head budget is spent, only a tail of at most a quarter of the cap is kept, written at
the end after a marker that counts the lines and bytes left out. The tail is also where a
failure's cause is read from (:func:`tuner.server.logtail.find_cause`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from tuner.errors import Interrupted
from tuner.redaction import scrub

__all__ = ["LINE_CAP_BYTES", "LogPump", "file_bound", "line_cap"]

#: Longest line kept whole (bytes): NCCL's and the engines' lines are far shorter; a request
#: logger's whole prompt is not (vllm-project/vllm PR #991).
LINE_CAP_BYTES = 16 * 1024
_READ = 64 * 1024  # bytes asked of the pipe at a time
_RESERVE = 1024  # bytes kept for the drop marker and the runner's notes


def line_cap(max_bytes: int) -> int:
    """Bytes of a line kept before it is cut, for a log bounded at ``max_bytes``: at most
    :data:`LINE_CAP_BYTES`, at most a sixteenth of the bound."""
    return max(256, min(LINE_CAP_BYTES, max_bytes // 16))


def file_bound(max_bytes: int) -> int:
    """The most bytes a trial log holds with ``server.log_max_bytes = max_bytes``: the bound
    itself (what the disk check before the night counts, :func:`tuner.server.preflight.disk_problem`)."""
    return max_bytes


class LogPump:
    """Copy a child's output pipe to ``path`` on a thread, line by line, within ``max_bytes``.

    The file (what it held at open included: a retried launch appends) stays within
    ``max_bytes``: lines are written while they fit in the head (the bound less a quarter and
    :data:`_RESERVE`); later ones are kept in a tail of at most a quarter of the bound (and
    ``tail_lines`` lines), written at :meth:`close` after ``[... N bytes dropped: ... log cap ...]``.
    A line over :func:`line_cap` bytes is cut to its head with ``[... N bytes of this line
    dropped ...]``; the closing marker counts those bytes too. ``secrets`` are replaced by ``***``
    before anything is written (a cut never leaves a secret's first characters). Each of
    ``watchers`` is called with every line (scrubbed, cut, no newline) as it arrives, on the
    pump's thread; a watcher that raises is dropped, never the pump.
    """

    def __init__(self, pipe: IO[bytes], path: Path, *, max_bytes: int, secrets: list[str],
                 tail_lines: int = 400, watchers: Sequence[Callable[[str], None]] = ()) -> None:
        self.path = path
        self._pipe = pipe
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._max = file_bound(max_bytes)
        self._cap = line_cap(max_bytes)
        self._tail_max = max_bytes // 4
        self._head_max = max(0, max_bytes - self._tail_max - _RESERVE)
        self._secrets = secrets
        self._written = os.fstat(self._file.fileno()).st_size
        self._capped = False  # the head is spent: lines go to the tail
        self._dropped_lines = 0
        self._dropped_bytes = 0
        self._cut_lines = 0
        self._cut_bytes = 0
        self._last_output: float | None = None
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._overflow: deque[bytes] = deque()
        self._overflow_bytes = 0
        self._tail_lines = tail_lines
        self._watchers = list(watchers)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"log-pump {path.name}", daemon=True)
        self._thread.start()

    # -- reading -------------------------------------------------------------------------
    def _run(self) -> None:
        head, extra = b"", 0  # the current line's kept bytes, and the bytes past the cap
        read = getattr(self._pipe, "read1", self._pipe.read)
        while True:
            try:
                data = read(_READ)
            except (OSError, ValueError):
                data = b""
            if not data:
                break
            self._last_output = time.monotonic()
            start = 0
            while start < len(data):
                end = data.find(b"\n", start)
                piece = data[start:] if end < 0 else data[start:end]
                room = self._cap - len(head)
                head, extra = head + piece[:room], extra + max(0, len(piece) - room)
                if end < 0:
                    break
                self._line(head, extra)
                head, extra = b"", 0
                start = end + 1
        if head or extra:
            self._line(head, extra)

    def _line(self, raw: bytes, cut: int) -> None:
        text = scrub(raw.decode("utf-8", "ignore" if cut else "replace"), self._secrets)
        if cut:
            text = self._unsplit_secret(text) + f" [... {cut} bytes of this line dropped ...]"
        with self._lock:
            if cut:
                self._cut_lines += 1
                self._cut_bytes += cut
            self._tail.append(text)
            self._put(f"{text}\n".encode())
        for watcher in list(self._watchers):
            try:
                watcher(text)
            except Interrupted:
                raise
            except Exception:  # a faulty watcher must not stop the log
                self._watchers.remove(watcher)

    def _unsplit_secret(self, text: str) -> str:
        """``text`` without a trailing first part of a secret (a cut may fall inside one)."""
        for secret in self._secrets:
            for k in range(min(len(secret) - 1, len(text)), 0, -1):
                if text.endswith(secret[:k]):
                    return text[:-k]
        return text

    def _put(self, data: bytes) -> None:
        """Write one line (lock held): into the head while it fits, else into the tail."""
        if not self._capped and self._written + len(data) <= self._head_max:
            self._file.write(data)
            self._written += len(data)
            return
        self._capped = True
        self._overflow.append(data)
        self._overflow_bytes += len(data)
        while self._overflow and (self._overflow_bytes > self._tail_max or len(self._overflow) > self._tail_lines):
            old = self._overflow.popleft()
            self._overflow_bytes -= len(old)
            self._dropped_lines += 1
            self._dropped_bytes += len(old)

    # -- the caller's side ---------------------------------------------------------------
    def note(self, text: str) -> None:
        """Append a runner line (prefixed ``[nccl-tune]``) to the log, e.g. the teardown."""
        with self._lock:
            if not self._file.closed:
                self._put(f"[nccl-tune] {scrub(text, self._secrets)}\n".encode()[:self._cap])

    def drain(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until the pipe is read to its end: the child and its children exited."""
        self._thread.join(timeout_s)

    def tail(self, n: int = 60) -> list[str]:
        """The last ``n`` lines the server printed (scrubbed, over-long ones cut)."""
        with self._lock:
            return list(self._tail)[-n:]

    def quiet_s(self) -> float | None:
        """Seconds since the pipe last carried a byte (a partial line counts); None before any."""
        last = self._last_output
        return None if last is None else time.monotonic() - last

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait for the pipe to drain (the child is gone), write the tail after its marker, close."""
        self._thread.join(timeout_s)
        with self._lock:
            if self._file.closed:
                return
            if self._capped:
                self._file.write(f"[nccl-tune] [... {self._dropped_bytes + self._cut_bytes} bytes dropped: "
                                 f"{self._dropped_lines} whole lines ({self._dropped_bytes} bytes), {self._cut_bytes} "
                                 f"bytes cut from {self._cut_lines} over-long lines; log cap {self._max} bytes "
                                 "reached; last lines follow ...]\n".encode())
                for data in self._overflow:
                    self._file.write(data)
                self._overflow.clear()
            self._file.close()
