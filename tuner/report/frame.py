"""The trials table: one row per relaunch, judged against the baseline, and its CSV file.

:func:`trials_frame` turns :class:`tuner.record.TrialRecord` objects into a DataFrame whose
columns are :data:`tuner.record.CSV_COLUMNS` plus ``tok_s_c<C>`` per measured concurrency
level. List and mapping fields stay Python lists and dicts in the cells; only
:func:`write_trials_csv` writes them as JSON text, and :func:`read_trials_csv` decodes them back,
so the file is the one place JSON text appears.

Column types: ``kind``, ``status`` and ``verdict`` hold :class:`~tuner.record.Kind`,
:class:`~tuner.record.Status` and :class:`~tuner.record.Verdict` members (str subclasses, so
``df["kind"] == "baseline"`` works); other text columns are pandas ``str``; optional trial
numbers are nullable ``Int64``; optional measurements are ``float64`` with NaN for "none"
(tok/s of a failed relaunch is NaN, never 0).
"""

from __future__ import annotations

import copy
import json
import math
import types
import typing
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from tuner import stats
from tuner.record import (
    CSV_COLUMNS,
    FIELDS,
    JSON_FIELDS,
    Kind,
    Status,
    TrialRecord,
    Verdict,
)

#: Prefix of the aggregate tok/s columns, one per concurrency level C (``tok_s_c8``).
CONCURRENCY_PREFIX = "tok_s_c"

_ENUM_COLUMNS: dict[str, type[StrEnum]] = {"kind": Kind, "status": Status, "verdict": Verdict}
_JUDGEMENT_DTYPES = {"vs_baseline": "float64", "vs_baseline_ci_low": "float64",
                     "vs_baseline_ci_high": "float64", "verdict_note": "str"}


def _field_dtypes() -> dict[str, str]:
    """pandas dtype of each record field, derived from the dataclass's type hints."""
    hints = typing.get_type_hints(TrialRecord)
    out: dict[str, str] = {}
    for name in FIELDS:
        hint = hints[name]
        args = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
        if name in JSON_FIELDS or name in _ENUM_COLUMNS:
            out[name] = "object"
        elif args == {bool}:
            out[name] = "bool"
        elif args == {int}:
            out[name] = "int64"
        elif args == {int, type(None)}:
            out[name] = "Int64"
        elif args <= {float, int, type(None)}:
            out[name] = "float64"
        elif args == {str}:
            out[name] = "str"
        else:
            out[name] = "object"
    return out


_DTYPES: dict[str, str] = {**_field_dtypes(), **_JUDGEMENT_DTYPES, "verdict": "object"}


def concurrency_columns(df: pd.DataFrame) -> list[str]:
    """The ``tok_s_c<C>`` columns of ``df``, by increasing C."""
    cols = [c for c in df.columns if c.startswith(CONCURRENCY_PREFIX) and c[len(CONCURRENCY_PREFIX):].isdigit()]
    return sorted(cols, key=lambda c: int(c[len(CONCURRENCY_PREFIX):]))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the columns in order (CSV_COLUMNS, then tok_s_c* by C) and their dtypes."""
    for name in CSV_COLUMNS:
        if name not in df.columns:
            df[name] = pd.Series([None] * len(df), index=df.index, dtype="object")
    conc = concurrency_columns(df)
    df = df[list(CSV_COLUMNS) + conc].copy()
    for name, dtype in _DTYPES.items():
        if dtype == "object":
            df[name] = df[name].astype("object")
        elif dtype == "str":
            df[name] = df[name].fillna("").astype("str")
        else:
            df[name] = df[name].astype(dtype)
    for name in conc:
        df[name] = df[name].astype("float64")
    return df.sort_values("trial").reset_index(drop=True)


def verdict_of(text: str) -> tuple[Verdict, str]:
    """(verdict, note) of a :class:`tuner.stats.Comparison` verdict.

    Accepts a :class:`Verdict` as is, and the older text form ``"inconclusive (baseline drifted
    2.0 %)"`` as ``(Verdict.INCONCLUSIVE, "baseline drifted 2.0 %")``. Raises ValueError for
    text that names no verdict.
    """
    if isinstance(text, Verdict):
        return text, ""
    head, sep, rest = text.partition(" (")
    if sep and rest.endswith(")"):
        return Verdict(head), rest[:-1]
    return Verdict(text), ""


def _judge(comparison: stats.Comparison) -> tuple[Verdict, str]:
    """Verdict and note of ``comparison`` (a ``note`` attribute wins when stats gives one)."""
    verdict, note = verdict_of(comparison.verdict)
    return verdict, str(getattr(comparison, "note", "") or note)


def _reference(bases: list[TrialRecord], record: TrialRecord) -> TrialRecord | None:
    """The baseline ``record`` is compared with: the last ok one measured before it started
    (the machine as it was then; by ``started_at`` when every one has it, else by trial
    number), else the first. Baseline records compare with the first baseline."""
    if not bases:
        return None
    if record.kind is Kind.BASELINE:
        return bases[0]
    by_time = record.started_at is not None and all(b.started_at is not None for b in bases)

    def key(r: TrialRecord) -> float:
        return float(r.started_at) if by_time and r.started_at is not None else float(r.trial)

    before = [b for b in bases if key(b) < key(record)]
    return max(before, key=key) if before else bases[0]


def _judgement(record: TrialRecord, bases: list[TrialRecord], *, min_effect: float,
               drift: float) -> dict[str, Any]:
    """The judgement columns of one record."""
    out: dict[str, Any] = {"vs_baseline": math.nan, "vs_baseline_ci_low": math.nan,
                           "vs_baseline_ci_high": math.nan, "verdict_note": ""}
    if record.status in (Status.RUNNING, Status.INTERRUPTED):
        return {**out, "verdict": Verdict.PENDING}
    if not record.ok:
        return {**out, "verdict": Verdict.FAILED}
    ref = _reference(bases, record)
    if ref is None:
        return {**out, "verdict": Verdict.PENDING, "verdict_note": "no ok baseline to compare with"}
    if not record.output_tok_s_runs or not ref.output_tok_s_runs:
        return {**out, "verdict": Verdict.NOT_ENOUGH_RUNS}
    c = stats.compare(record.output_tok_s_runs, ref.output_tok_s_runs, min_effect=min_effect, drift=drift)
    verdict, note = _judge(c)
    if record.kind is Kind.BASELINE:
        verdict, note = Verdict.BASELINE, ""
    return {"vs_baseline": c.ratio, "vs_baseline_ci_low": c.ci_low, "vs_baseline_ci_high": c.ci_high,
            "verdict": verdict, "verdict_note": note}


def _ok_baselines(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Ok baseline measurements in the order they were measured (started_at, then trial)."""
    bases = [r for r in records if r.kind is Kind.BASELINE and r.ok]
    return sorted(bases, key=lambda r: (r.started_at if r.started_at is not None else math.inf, r.trial))


def trials_frame(records: Sequence[TrialRecord], *, min_effect: float) -> pd.DataFrame:
    """One row per relaunch of ``records`` (duplicate/invalid bookkeeping entries are skipped),
    sorted by trial number.

    Columns: :data:`tuner.record.CSV_COLUMNS` (the record's fields, then ``vs_baseline``, its
    95 % CI ``vs_baseline_ci_low``/``_high``, ``verdict``, ``verdict_note``) and ``tok_s_c<C>``
    (aggregate tok/s) per concurrency level any record measured. ``vs_baseline`` is the ratio of
    median output tok/s to the baseline measured last before the trial started (the first one
    for trials before any), from :func:`tuner.stats.compare` with ``min_effect`` (fraction) and
    the baseline's drift across its measurements (:func:`tuner.stats.drift`). ``verdict``:
    ``baseline`` for baseline rows, ``failed`` for failed relaunches, ``pending`` for running or
    interrupted ones (and ok ones with no ok baseline yet); ``verdict_note`` details it
    (e.g. ``baseline drifted 2.0 %``).
    """
    relaunches = [r for r in records if r.kind.relaunched]
    bases = _ok_baselines(relaunches)
    drift = stats.drift([b.output_tok_s for b in bases if b.output_tok_s is not None])
    rows = []
    for r in relaunches:
        row: dict[str, Any] = {name: getattr(r, name) for name in FIELDS}
        if not r.ok:
            row["output_tok_s"] = None  # a failed relaunch has no tok/s, never 0
        for name in JSON_FIELDS:
            row[name] = copy.deepcopy(row[name])  # the frame never aliases a record
        row.update(_judgement(r, bases, min_effect=min_effect, drift=drift))
        for level, tok_s in r.concurrency_tok_s().items():
            row[f"{CONCURRENCY_PREFIX}{level}"] = tok_s
        rows.append(row)
    if not rows:
        return _typed(pd.DataFrame(columns=list(CSV_COLUMNS)))
    return _typed(pd.DataFrame.from_records(rows))


def write_trials_csv(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` (a :func:`trials_frame`) to ``path``: list and mapping cells
    (:data:`tuner.record.JSON_FIELDS`) as JSON text, enums as their values, None/NaN as empty."""
    out = df.copy()
    for name in JSON_FIELDS & set(out.columns):
        out[name] = out[name].map(lambda v, n=name: json.dumps(v, sort_keys=n == "env"))
    for name in _ENUM_COLUMNS.keys() & set(out.columns):
        out[name] = out[name].map(lambda v: v.value if isinstance(v, StrEnum) else v)
    out.to_csv(path, index=False)


def read_trials_csv(path: Path | str) -> pd.DataFrame:
    """The frame :func:`write_trials_csv` wrote to ``path``, with the same columns and types
    (JSON text decoded back to lists and dicts, enums restored).

    Raises FileNotFoundError, and ValueError when the file lacks a trials.csv column or holds a
    value its column cannot take.
    """
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in CSV_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{path}: not a trials.csv of nccl-tune (missing columns {', '.join(missing)})")
    df = pd.DataFrame(index=raw.index)
    for name in raw.columns:
        text = raw[name]
        dtype = _DTYPES.get(name, "float64" if name.startswith(CONCURRENCY_PREFIX) else "str")
        if name in JSON_FIELDS:
            df[name] = text.map(lambda t: json.loads(t) if t else None).astype("object")
        elif name in _ENUM_COLUMNS:
            enum = _ENUM_COLUMNS[name]
            df[name] = text.map(enum).astype("object")
        elif dtype == "bool":
            df[name] = text.map({"True": True, "False": False}).astype("bool")
        elif dtype in ("float64", "Int64", "int64"):
            df[name] = pd.to_numeric(text.where(text != "")).astype(dtype)
        else:
            df[name] = text
    return _typed(df)


def ok_baselines(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ok baseline measurements, in the order they were measured."""
    base = df[(df["kind"] == Kind.BASELINE) & (df["status"] == Status.OK)]
    return base.sort_values(["started_at", "trial"], na_position="last")


def baseline_runs(df: pd.DataFrame) -> tuple[list[float], float]:
    """Pooled runs (tok/s) of every ok baseline measurement in ``df``, and the baseline's drift
    (fraction, :func:`tuner.stats.drift` of their medians; 0 for one measurement)."""
    base = ok_baselines(df)
    runs = [float(v) for runs in base["output_tok_s_runs"] for v in runs]
    return runs, stats.drift([float(v) for v in base["output_tok_s"]])


def best_row(df: pd.DataFrame) -> pd.Series | None:
    """The ok non-baseline row with the highest median output tok/s, or None when there is none."""
    ok = df[(df["status"] == Status.OK) & (df["kind"] != Kind.BASELINE) & df["output_tok_s"].notna()]
    if ok.empty:
        return None
    return ok.loc[ok["output_tok_s"].idxmax()]


def env_text(env: dict[str, str]) -> str:
    """A set as ``NAME=value`` words sorted by name, or ``(untuned)`` for the empty set."""
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(untuned)"


def verdict_text(row: pd.Series) -> str:
    """A row's verdict with its note in parentheses, e.g. ``inconclusive (baseline drifted 2.0 %)``."""
    verdict = row["verdict"]
    text = verdict.value if isinstance(verdict, StrEnum) else str(verdict)
    return f"{text} ({row['verdict_note']})" if row["verdict_note"] else text
