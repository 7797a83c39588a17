"""One screen run of one set, from the command to a :class:`~tuner.screen.store.ScreenRecord`.

The command (``[screen] command`` with the sizes filled in) runs under the set
(:func:`tuner.screen.run.run_command`), with ``-J`` into a private file when the installed
nccl-tests has it; its output is parsed by :func:`tuner.screen.nccltests.parse_output` and judged by
:func:`tuner.screen.nccltests.screen_status` (wrong values: ``invalid_output``, the corruption guard).
Each measured size becomes one row: the last complete row of that size nccl-tests printed.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.record import Status
from tuner.redaction import redact
from tuner.screen import nccltests
from tuner.screen.run import private_json_path, run_command, screen_env
from tuner.screen.store import ScreenRecord

__all__ = ["RunContext", "json_refused", "measure"]

_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\S")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure|Test timeout|Out of bounds values\s*:\s*[1-9]")


@dataclass
class RunContext:
    """What every screen run of a stage shares: ``argv`` (sizes filled in), ``server_env``,
    ``timeout_s`` (s), ``json`` (use ``-J``), ``log_dir`` (``results/<study>/screen``),
    ``show(text)`` for progress lines (result rows at ``shown_sizes``, failure lines), ``held``
    (holds signals during a teardown)."""

    argv: list[str]
    server_env: Mapping[str, str]
    timeout_s: float
    json: bool
    log_dir: Path
    show: Callable[[str], None]
    shown_sizes: frozenset[int] = frozenset()
    held: Callable[[], AbstractContextManager[None]] | None = None


def log_path(log_dir: Path, number: int) -> Path:
    """``results/<study>/screen/NNNN.log``: one screen run's output."""
    return log_dir / f"{number:04d}.log"


def _half(half: nccltests.Half | None, key: str) -> dict[str, Any]:
    if half is None:
        return {}
    if key == "oop":
        return {"time_us_oop": half.time_us, "algbw_GBps": half.algbw_GBps, "busbw_GBps": half.busbw_GBps,
                "wrong_oop": half.wrong}
    return {"time_us_ip": half.time_us, "wrong_ip": half.wrong}


def rows_of(result: nccltests.PerfResult) -> list[dict[str, Any]]:
    """One dict per measured size (bytes, ascending): the halves of its last complete row."""
    out = []
    for size in sorted({r.size_bytes for r in result.rows}):
        row = result.row(size)
        if row is not None:
            out.append({"size": size, **_half(row.out_of_place, "oop"), **_half(row.in_place, "ip")})
    return out


def measure(ctx: RunContext, rec: ScreenRecord, env: Mapping[str, str]) -> ScreenRecord:
    """Run the screen command under ``env`` (the set's real values) and fill ``rec`` in
    (status, cause, rows, wall_s, exit code, ranks, NCCL version). Raises only what a signal
    raises (Interrupted), after the run's tree is gone."""
    full, removed = screen_env(os.environ, ctx.server_env, env)
    path = log_path(ctx.log_dir, rec.number)
    rec.log = str(path)
    header = (f"set: {redact(dict(env))}", f"removed inherited: {removed}")

    def on_line(line: str) -> None:
        m = _ROW.match(line)
        if (m and int(m.group(1)) in ctx.shown_sizes) or _FAILURE.search(line):
            ctx.show(f"  screen {rec.number:04d}| {line.strip()}")

    started = time.time()
    if ctx.json:
        with private_json_path() as jpath:
            done = run_command([*ctx.argv, "-J", str(jpath)], full, path, ctx.timeout_s, on_line=on_line,
                               header=header, held=ctx.held)
            json_text = jpath.read_text(errors="replace") if jpath.exists() else None
    else:
        done = run_command(ctx.argv, full, path, ctx.timeout_s, on_line=on_line, header=header, held=ctx.held)
        json_text = None
    result = nccltests.parse_output(done.text, json_text)
    status, cause = nccltests.screen_status(result, killed_at_timeout=done.killed_at_timeout,
                                            exit_code=done.exit_code)
    if done.start_error:
        status, cause = Status.CRASHED, done.start_error
    rec.status, rec.cause = status, cause
    rec.rows = rows_of(result)
    rec.wall_s, rec.exit_code, rec.started_at = done.wall_s, done.exit_code, started
    rec.nranks = result.nranks
    rec.nccl_version = result.nccl_version or ""
    return rec


def json_refused(rec: ScreenRecord) -> bool:
    """True when the run failed because this nccl-tests does not know ``-J`` after all (its
    getopt printed ``invalid option``): the stage turns JSON off and runs the set again."""
    return rec.status is not Status.OK and not rec.rows and "invalid option" in rec.cause
