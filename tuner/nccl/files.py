"""NCCL's own log files: the ``NCCL_DEBUG_FILE`` pattern a launch sets, and the files a run left.

NCCL writes its log to C ``stdout`` with ``fwrite`` (``vfprintf`` from 2.29) and never flushes it
(src/debug.cc, ``ncclDebugLog``): on the pipe a launcher gives a server, each process's lines
arrive in 4096-byte blocks cut mid-line, and what is still buffered is lost at SIGKILL. Only a
file named by ``NCCL_DEBUG_FILE`` is opened by NCCL itself (``ncclDebugInit``: ``%h`` the host
name up to its first dot, ``%p`` the pid, ``%%`` one ``%``, any other ``%x`` kept;
``fopen(name, "w")``, unbuffered up to 2.26, ``setlinebuf`` from 2.27), so its lines are whole
and survive a SIGKILL. NCCL opens it only when ``NCCL_DEBUG`` is above VERSION; a failed
``fopen`` leaves NCCL on stdout.
"""

from __future__ import annotations

import glob
import os
import re
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEBUG_FILE_VAR",
    "TRIAL_PATTERN",
    "DebugFile",
    "debug_file_warnings",
    "expand_debug_file",
    "find_debug_files",
    "has_pid",
]

DEBUG_FILE_VAR = "NCCL_DEBUG_FILE"
#: The file name nccl-tune gives each process's NCCL log inside a trial's folder: one per host and pid.
TRIAL_PATTERN = "%h.%p.log"


def host_name() -> str:
    """This host's name as NCCL writes it in a line prefix and in ``%h``: up to its first dot
    (src/misc/utils.cc ``getHostName`` with ``'.'``)."""
    return socket.gethostname().split(".")[0]


def _pieces(pattern: str) -> list[tuple[str, str]]:
    """``pattern`` as ``[(kind, text)]``: ``("lit", text)``, ``("h", "")``, ``("p", "")``, read as
    ``ncclDebugInit`` reads it (``%%`` is a literal ``%``, an unknown ``%x`` is kept as written)."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        i += 1
        if ch != "%" or i >= len(pattern):
            out.append(("lit", ch))
            continue
        code = pattern[i]
        i += 1
        out.append((code, "") if code in "hp" else ("lit", "%" if code == "%" else "%" + code))
    return out


def expand_debug_file(pattern: str, host: str, pid: int) -> str:
    """The file name NCCL opens for ``pattern`` in process ``pid`` on ``host`` (src/debug.cc)."""
    return "".join(text if kind == "lit" else (host if kind == "h" else str(pid)) for kind, text in _pieces(pattern))


def has_pid(pattern: str) -> bool:
    """Whether ``pattern`` gives each process its own file (``%p``). Without it every process
    opens the same file with ``fopen(..., "w")`` and overwrites the others' lines."""
    return any(kind == "p" for kind, _ in _pieces(pattern))


@dataclass(frozen=True)
class DebugFile:
    """One NCCL log file a run left: its path and the host and pid its name encodes (None when
    the pattern has no ``%h``/``%p``)."""

    path: Path
    host: str | None
    pid: int | None


def find_debug_files(pattern: str, *, since: float | None = None, pids: Collection[int] = (),
                     cwd: Path | None = None) -> list[DebugFile]:
    """The files NCCL wrote for ``pattern``, sorted by path: ``%h`` and ``%p`` globbed, a
    relative pattern read from ``cwd`` (the server's working directory, default this process's).

    ``since`` (a ``time.time()``, s) skips files not written since the launch (another run's);
    ``pids`` (the server's processes, when known) keeps only the files of those processes when
    the pattern holds ``%p``. Files on another host's disk are not seen: their ranks' proof comes
    from the server log or stays unverifiable.
    """
    pieces = _pieces(pattern)
    if not pieces:
        return []
    wild = "".join(glob.escape(text) if kind == "lit" else "*" for kind, text in pieces)
    seen: set[str] = set()
    parts = []
    for kind, text in pieces:
        if kind == "lit":
            parts.append(re.escape(text))
        else:  # a second %h or %p must repeat the first
            parts.append(f"(?P={kind})" if kind in seen else ("(?P<h>[^/]*?)" if kind == "h" else r"(?P<p>\d+)"))
            seen.add(kind)
    rx = re.compile("".join(parts) + "$")
    base = cwd or Path.cwd()
    wanted = set(pids)
    found: list[DebugFile] = []
    for name in sorted(glob.glob(wild if os.path.isabs(wild) else str(base / wild))):
        path = Path(name)
        rel = name if os.path.isabs(pattern) else os.path.relpath(name, base)
        m = rx.match(rel)
        if not m or not path.is_file():
            continue
        groups = m.groupdict()
        pid = int(groups["p"]) if groups.get("p") else None
        if wanted and pid is not None and pid not in wanted:
            continue
        try:
            if since is not None and path.stat().st_mtime < since:
                continue
        except OSError:
            continue
        found.append(DebugFile(path, groups.get("h"), pid))
    return found


def debug_file_warnings(pattern: str, cwd: Path | None = None) -> list[str]:
    """What a user's ``NCCL_DEBUG_FILE`` value will do that they may not expect, said before any
    launch: no ``%p`` (every process opens the same file with ``fopen(..., "w")`` and overwrites
    the others' lines), a relative path (relative to where nccl-tune runs: the server inherits its
    working directory), a folder that does not exist here (NCCL cannot open the file and keeps
    writing to stdout, fine when the path exists inside the server's container)."""
    out = []
    if not has_pid(pattern):
        out.append(f"NCCL_DEBUG_FILE={pattern} has no %p: every server process opens the same file with "
                   "fopen(..., \"w\") (src/debug.cc) and overwrites the others' lines, so most ranks' proof is lost; "
                   "add %p")
    base = cwd or Path.cwd()
    if not os.path.isabs(pattern):
        out.append(f"NCCL_DEBUG_FILE={pattern} is relative: the files land in {base} (where nccl-tune runs; the "
                   "server inherits it)")
    folder = (base / expand_debug_file(pattern, host_name(), 0)).parent
    if not folder.is_dir():
        out.append(f"NCCL_DEBUG_FILE={pattern}: the folder {folder} does not exist here, so NCCL cannot open the file "
                   "and writes to the server's stdout instead (block-buffered: lines cut and lost at SIGKILL); "
                   "fine only if that path exists inside the server's container")
    return out
