"""Which NCCL library a running server's processes mapped, read from ``/proc/PID/maps``.

Each line of ``/proc/PID/maps`` is ``address perms offset dev inode pathname`` (proc(5)); a
file deleted after it was mapped ends `` (deleted)``. The file is opened through
``/proc/PID/root`` (proc(5): the process's root, a container's own file system), so a path
inside a container is read as that process sees it. Read while the server runs, before its
teardown (:func:`tuner.sweep.trial.relaunch` via ``ServerProcess.pids``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import psutil

from tuner.nccl import LoadedLibrary, build_id, is_nccl_library, library_version

__all__ = ["mapped_nccl", "maps_paths", "process_tree"]


def process_tree(pids: Iterable[int]) -> list[int]:
    """``pids`` and every live descendant of each, sorted; pids gone are left out."""
    out: set[int] = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            out.add(pid)
            out.update(c.pid for c in proc.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
            continue
    return sorted(out)


def maps_paths(pid: int) -> list[str] | None:
    """The file paths process ``pid`` maps (each once, in order; `` (deleted)`` dropped), or
    None when its maps cannot be read (gone, another user's)."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return None
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            seen.setdefault(parts[5].removesuffix(" (deleted)"), None)
    return list(seen)


def _readable(pid: int, path: str) -> Path:
    """``path`` as process ``pid`` sees it: through its ``/proc/PID/root`` when that can be read."""
    rooted = Path(f"/proc/{pid}/root{path}")
    try:
        rooted.stat()
        return rooted
    except OSError:
        return Path(path)


def mapped_nccl(pids: Iterable[int]) -> tuple[bool | None, LoadedLibrary | None]:
    """``(loaded, library)`` for the processes ``pids`` and their descendants: ``loaded`` None when
    no process's maps could be read (not known), False when none mapped an NCCL library, True
    when one did; ``library`` the one most processes mapped (:func:`tuner.nccl.is_nccl_library`),
    with its version and build ID read from the file."""
    by_path: dict[str, list[int]] = {}
    read_any = False
    for pid in process_tree(pids):
        paths = maps_paths(pid)
        if paths is None:
            continue
        read_any = True
        for path in paths:
            if is_nccl_library(path):
                by_path.setdefault(path, []).append(pid)
    if not by_path:
        return (False if read_any else None), None
    path, holders = max(by_path.items(), key=lambda kv: len(kv[1]))
    file = _readable(holders[0], path)
    return True, LoadedLibrary(path, library_version(file, path), build_id(file), tuple(holders))
