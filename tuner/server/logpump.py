"""The server's output: pumped from its pipe into a capped file, secrets scrubbed, tail kept.

A chatty server cannot fill the disk (the middle of an over-long log is dropped, the head and
the tail are kept), and the tail is where a failure's cause is read from
(:func:`tuner.server.logtail.find_cause`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from tuner.redaction import scrub

__all__ = ["LogPump"]


class LogPump:
    """Copy a child's output pipe to ``path`` on a thread, line by line.

    ``max_bytes`` caps the file: past it, lines are only kept in a ring of the last
    ``tail_lines`` lines, written at :meth:`close` after a ``[... N bytes dropped ...]`` marker.
    ``secrets`` are replaced by ``***`` before anything is written. Each of ``watchers`` is
    called with every line (scrubbed, no newline) as it arrives, on the pump's thread; a watcher
    that raises is dropped, never the pump.
    """

    def __init__(self, pipe: IO[bytes], path: Path, *, max_bytes: int, secrets: list[str],
                 tail_lines: int = 400, watchers: Sequence[Callable[[str], None]] = ()) -> None:
        self.path = path
        self._pipe = pipe
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._max = max_bytes
        self._secrets = secrets
        self._written = 0
        self._dropped = 0
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._overflow: deque[bytes] = deque(maxlen=tail_lines)
        self._watchers = list(watchers)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"log-pump {path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for raw in iter(self._pipe.readline, b""):
            text = scrub(raw.decode("utf-8", "replace"), self._secrets)
            data = text.encode()
            line = text.rstrip("\n")
            with self._lock:
                self._tail.append(line)
                if self._written + len(data) <= self._max:
                    self._file.write(data)
                    self._written += len(data)
                else:
                    if len(self._overflow) == self._overflow.maxlen:
                        self._dropped += len(self._overflow[0])
                    self._overflow.append(data)
            for watcher in list(self._watchers):
                try:
                    watcher(line)
                except Exception:  # a faulty watcher must not stop the log
                    self._watchers.remove(watcher)

    def note(self, text: str) -> None:
        """Append a runner line (prefixed ``[nccl-tune]``) to the log, e.g. the teardown."""
        with self._lock:
            if not self._file.closed:
                self._file.write(f"[nccl-tune] {scrub(text, self._secrets)}\n".encode())

    def drain(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until the pipe is read to its end: the child and its children exited."""
        self._thread.join(timeout_s)

    def tail(self, n: int = 60) -> list[str]:
        """The last ``n`` lines the server printed (scrubbed)."""
        with self._lock:
            return list(self._tail)[-n:]

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait for the pipe to drain (the child is gone), flush the overflow tail, close."""
        self._thread.join(timeout_s)
        with self._lock:
            if self._file.closed:
                return
            if self._overflow:
                self._file.write(f"[nccl-tune] [... {self._dropped} bytes dropped: log cap "
                                 f"{self._max} bytes reached; last lines follow ...]\n".encode())
                for data in self._overflow:
                    self._file.write(data)
                self._overflow.clear()
            self._file.close()
