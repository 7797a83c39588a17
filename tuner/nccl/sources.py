"""Where a launch's NCCL lines are read from: its NCCL_DEBUG_FILE files first, then the server
log with the lines a pipe cut rejoined (:func:`read_sources`).

A process that wrote to its own file (whole lines: :mod:`tuner.nccl.files`) is read there; a
process that never got the variable, a container whose path is elsewhere, or an ``fopen`` that
failed leaves NCCL on stdout, and its lines are read from the server log, cut lines rejoined
(:func:`tuner.nccl.rejoin.rejoin`) and fragments whose tails were lost kept apart, so a cut
echo is never read as another value.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from tuner.nccl.files import find_debug_files
from tuner.nccl.lines import line_pid, strip_ansi
from tuner.nccl.log import SERVER_LOG, LogSource, ParsedLog, parse_sources
from tuner.nccl.rejoin import rejoin

__all__ = ["read_sources", "server_log_source"]


def server_log_source(text: str) -> LogSource:
    """The server log as a :class:`LogSource`: cut lines rejoined, lost tails listed as cut."""
    joined = rejoin(strip_ansi(text) if "\x1b" in text else text)
    return LogSource(SERVER_LOG, joined.lines, tuple((c.process, c.text) for c in joined.cut), joined.joined,
                     frozenset(joined.rejoined))


def read_sources(server_log: str, pattern: str | None, *, since: float | None = None,
                 show_from: Path | None = None, pids: Collection[int] = ()) -> ParsedLog:
    """Parse the NCCL files of ``pattern`` (an NCCL_DEBUG_FILE value; None: none) written since
    ``since`` (Unix s), then the server log text, into one :class:`ParsedLog`. Each file is
    labelled by its path relative to ``show_from`` (the study folder) when it lies inside it.

    ``pids`` (the launch's processes, when known) keeps out another server's files and lines in
    a shared place: only files whose ``%p`` is one of them, and in a file named without ``%p``
    only the lines whose NCCL prefix carries one of them."""
    sources: list[LogSource] = []
    wanted = set(pids)
    for found in find_debug_files(pattern, since=since, pids=wanted) if pattern else []:
        try:
            text = found.path.read_text(errors="replace")
        except OSError:
            continue
        if wanted and found.pid is None:
            text = "".join(line for line in text.splitlines(keepends=True) if line_pid(line) in wanted)
        label = str(found.path)
        if show_from is not None:
            rel = os.path.relpath(found.path, show_from)
            label = rel if not rel.startswith("..") else label
        sources.append(LogSource(label, text.splitlines()))
    sources.append(server_log_source(server_log))
    return parse_sources(sources)
