"""``results/<study>/screen.csv``: every screen run, one line per measured size.

Columns (:data:`SCREEN_COLUMNS`): ``run`` (screen trial number), ``role`` (untuned-first,
search, untuned-last, or check: screened just before its relaunch), ``set`` (the set as canonical JSON, :func:`tuner.record.trial.set_key`;
``{}`` is untuned), ``size`` (bytes, as nccl-tests measured it), ``time_us_oop`` and
``time_us_ip`` (out-of-place and in-place time, us), ``algbw_GBps`` and ``busbw_GBps``
(out-of-place, GB/s), ``wrong`` (wrong elements nccl-tests counted, the larger half; before
nccl-tests 2.13 the largest deviation), ``status`` and ``cause`` (of the run), ``wall_s`` (s),
``nranks``, ``nccl_version``, ``log``. A run that measured nothing has one line with the size
empty. Rewritten whole from the screen study after every run, so it never disagrees with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tuner.screen.store import ScreenRecord

__all__ = ["SCREEN_CSV", "read_screen_csv", "write_screen_csv"]

SCREEN_CSV = "screen.csv"
SCREEN_COLUMNS = ("run", "role", "set", "size", "time_us_oop", "time_us_ip", "algbw_GBps", "busbw_GBps", "wrong",
                  "status", "cause", "wall_s", "nranks", "nccl_version", "log")


def _wrong(row: dict[str, object]) -> float | None:
    values = [float(v) for v in (row.get("wrong_oop"), row.get("wrong_ip")) if isinstance(v, int | float)]
    return max(values) if values else None


def screen_frame(records: Sequence[ScreenRecord]) -> pd.DataFrame:
    """The runs of ``records`` (bookkeeping left out) as the rows of screen.csv."""
    lines = []
    for r in records:
        if not r.ran:
            continue
        common = {"run": r.number, "role": r.role, "set": r.key, "status": r.status.value, "cause": r.cause,
                  "wall_s": r.wall_s, "nranks": r.nranks, "nccl_version": r.nccl_version, "log": r.log}
        if not r.rows:
            lines.append(common)
        for row in r.rows:
            lines.append({**common, "size": row["size"], "time_us_oop": row.get("time_us_oop"),
                          "time_us_ip": row.get("time_us_ip"), "algbw_GBps": row.get("algbw_GBps"),
                          "busbw_GBps": row.get("busbw_GBps"), "wrong": _wrong(row)})
    return pd.DataFrame(lines, columns=list(SCREEN_COLUMNS))


def write_screen_csv(records: Sequence[ScreenRecord], path: Path) -> None:
    """Write screen.csv (replaced through a temporary file, never half written)."""
    tmp = path.with_name(f".{path.name}.tmp")
    screen_frame(records).to_csv(tmp, index=False)
    tmp.replace(path)


def read_screen_csv(path: Path) -> pd.DataFrame:
    """screen.csv as written, ``set`` decoded to a dict in a new ``env`` column; an empty frame
    with the columns when the file does not exist."""
    if not path.exists():
        return pd.DataFrame(columns=[*SCREEN_COLUMNS, "env"])
    df = pd.read_csv(path)
    df["env"] = [json.loads(s) if isinstance(s, str) else {} for s in df["set"]]
    return df
