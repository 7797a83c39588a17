"""The server's log: pumped from its pipe into a capped file, secrets scrubbed, tail kept.

A chatty server cannot fill the disk (the middle of an over-long log is dropped, the head and
the tail are kept), and the tail is where a failure's cause is read from.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from pathlib import Path
from typing import IO

from tuner.nccl_env import scrub

#: Failure shapes in priority order (REFERENCE.md section 3; vLLM/torch messages).
_CAUSES = [
    ("nccl", re.compile(r"NCCL WARN .*")),
    ("cuda", re.compile(r".*(Cuda failure|CUDA error|cudaError\w*).*", re.I)),
    ("oom", re.compile(r".*(out of memory|OutOfMemoryError|CUDA OOM).*", re.I)),
    ("nccl", re.compile(r".*(ncclInvalidUsage|ncclInternalError|ncclSystemError|unhandled system error).*")),
    ("python", re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b(?::.*)?$")),
    ("python", re.compile(r"\b[A-Z]\w*(?:Error|Exception): .*")),
    ("fatal", re.compile(r".*\b(FATAL|Fatal|Aborted|Segmentation fault|core dumped)\b.*")),
]


def extract_cause(lines: list[str]) -> str:
    """Best one-line cause from a log tail: the last NCCL WARN, CUDA error, out-of-memory,
    NCCL error code, Python exception or fatal line, in that priority; ``""`` if none."""
    for _kind, pattern in _CAUSES:
        for line in reversed(lines):
            m = pattern.search(line)
            if m:
                return m.group(0).strip()[:300]
    return ""


class LogPump:
    """Copy a child's output pipe to ``path`` on a thread, line by line.

    ``max_bytes`` caps the file: past it, lines are only kept in a ring of the last
    ``tail_lines`` lines, written at :meth:`close` after a ``[... N bytes dropped ...]`` marker.
    ``secrets`` are replaced by ``***`` before anything is written.
    """

    def __init__(self, pipe: IO[bytes], path: Path, *, max_bytes: int, secrets: list[str],
                 tail_lines: int = 400) -> None:
        self.path = path
        self._pipe = pipe
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._max = max_bytes
        self._secrets = secrets
        self._written = 0
        self._dropped = 0
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._overflow: deque[bytes] = deque(maxlen=tail_lines)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"log-pump {path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for raw in iter(self._pipe.readline, b""):
            text = scrub(raw.decode("utf-8", "replace"), self._secrets)
            data = text.encode()
            with self._lock:
                self._tail.append(text.rstrip("\n"))
                if self._written + len(data) <= self._max:
                    self._file.write(data)
                    self._written += len(data)
                else:
                    if len(self._overflow) == self._overflow.maxlen:
                        self._dropped += len(self._overflow[0])
                    self._overflow.append(data)

    def note(self, text: str) -> None:
        """Append a runner line (prefixed ``[nccl-tune]``) to the log, e.g. the teardown."""
        with self._lock:
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
            if self._overflow:
                self._file.write(f"[nccl-tune] [... {self._dropped} bytes dropped: log cap "
                                 f"{self._max} bytes reached; last lines follow ...]\n".encode())
                for data in self._overflow:
                    self._file.write(data)
                self._overflow.clear()
            self._file.close()
