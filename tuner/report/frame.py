"""The trials table: one row per relaunch, judged against the baseline, the sets not measured, and its CSV file.

:func:`trials_frame` turns :class:`tuner.record.trial.TrialRecord` objects into a DataFrame whose
columns are :data:`tuner.record.trial.CSV_COLUMNS` plus ``tok_s_c<C>`` per measured concurrency
level; :func:`skipped_frame` has the same columns, one row per set not launched (trials.csv
holds both, in trial order; :func:`split_skipped` parts them again). List and mapping fields stay Python lists and dicts in the cells; only
:func:`write_trials_csv` writes them as JSON text, and :func:`read_trials_csv` decodes them back,
so the file is the one place JSON text appears.

Column types: ``kind``, ``status`` and ``verdict`` hold :class:`~tuner.record.trial.Kind`,
:class:`~tuner.record.trial.Status` and :class:`~tuner.record.trial.Verdict` members (str subclasses, so
``df["kind"] == "baseline"`` works); other text columns are pandas ``str``; optional trial
numbers are nullable ``Int64``; an optional yes/no (``backend_applied``) is nullable
``boolean``; optional measurements are ``float64`` with NaN for "none" (tok/s of a failed
relaunch is NaN, never 0).

The judgement the rows were judged by is no column of the frame: it travels beside it as a
:class:`tuner.report.story.Story` (:func:`judged_trials` returns both; :func:`write_trials_csv`
keeps it beside trials.csv as ``judgement.json``, :func:`tuner.report.story.read_story` reads it
back). The functions that need the baseline's levels and drift, the sets' order or the best set
take that story (:func:`baseline_runs`, :func:`best_row`, :func:`judged_order`); none judges again.
"""

from __future__ import annotations

import copy
import json
import math
import re
import types
import typing
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.judging import Judgement, SetJudgement, judge, runs_of, stats
from tuner.planning import earlier_label
from tuner.record import (
    CSV_COLUMNS,
    FIELDS,
    JSON_FIELDS,
    Kind,
    Metric,
    Status,
    TrialRecord,
    Verdict,
    field_json,
    set_key,
)
from tuner.report.story import STORY_FILE, Story, story_of, write_story

__all__ = [
    "SAME_SET",
    "backend_text",
    "baseline_name",
    "baseline_runs",
    "best_row",
    "combine_frames",
    "concurrency_columns",
    "env_text",
    "judged_order",
    "judged_trials",
    "launched_text",
    "ok_baselines",
    "read_trials_csv",
    "set_text",
    "skipped_frame",
    "split_skipped",
    "trials_frame",
    "unlaunched_words",
    "verdict_text",
    "write_trials_csv",
]

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
        elif args == {bool, type(None)}:
            out[name] = "boolean"  # pandas' nullable bool: None is <NA> (``backend_applied``)
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


#: Notes about the whole study that the verdict paragraph says once, not on every row.
_STUDY_NOTES = ("one baseline launch",)


def _unconfirmed(c: stats.Comparison, s: SetJudgement | None = None) -> str:
    """Why a confirmation did not confirm: the set failed its soak (``s``), a fresh gain the noise
    cannot tell from none, or none."""
    if s is not None and s.soak_failed:  # the row says what ran; why it failed is the reasons' and soak_failure's
        return f"failed soak: {s.soak.split(': failed', 1)[0]}"
    if math.isfinite(c.ratio) and c.ratio > 1.0:
        return f"not confirmed: {c.gain_pct:+.1f} % on the new launches, within their noise"
    return "the gain did not hold on the new launches alone"


def _cols(c: stats.Comparison | None, verdict: Verdict, note: str = "") -> dict[str, Any]:
    nan = math.nan
    note = note or (c.note if c else "")
    if note.startswith(_STUDY_NOTES):
        note = ""
    return {"vs_baseline": c.ratio if c else nan, "vs_baseline_ci_low": c.ci_low if c else nan,
            "vs_baseline_ci_high": c.ci_high if c else nan, "verdict": verdict, "verdict_note": note}


def _row_judgement(record: TrialRecord, j: Judgement) -> dict[str, Any]:
    """The judgement columns of one relaunch (see :func:`trials_frame`)."""
    if record.status in (Status.RUNNING, Status.INTERRUPTED):
        return _cols(None, Verdict.PENDING)
    if not record.ok:
        return _cols(None, Verdict.FAILED)
    if not j.baseline_launches:
        return _cols(None, Verdict.PENDING, "no ok baseline to compare with")
    launch = runs_of(record, j.metric)
    if record.kind is Kind.BASELINE:
        others = [b for t, b in zip(j.baseline_trials, j.baseline_launches, strict=True) if t != record.trial]
        if not launch:
            return _cols(None, Verdict.BASELINE)
        c = stats.compare([launch], others or j.baseline_launches, noise=j.noise)
        return _cols(c, Verdict.BASELINE)  # its interval: this launch against the other baseline launches
    s = j.sets.get(record.set_key)
    if s is None or s.comparison is None:
        return _cols(None, Verdict.NOT_ENOUGH_RUNS)
    if record.kind is Kind.CONFIRM and s.confirmation is not None:
        c = s.confirmation
        if c.verdict is Verdict.NOT_ENOUGH_RUNS:
            return _cols(None, Verdict.PENDING, c.note)
        verdict = Verdict.FASTER if c.verdict is Verdict.FASTER else Verdict.FAILED_CONFIRMATION
        return _cols(c, verdict, "confirmed on the new launches alone" if verdict is Verdict.FASTER
                     else _unconfirmed(c, s))
    if s.not_applied:
        return _cols(s.comparison, Verdict.NOT_APPLIED, "not applied: " + not_applied_text(s))
    if s.verdict is Verdict.FAILED_CONFIRMATION:
        return _cols(s.comparison, Verdict.FAILED_CONFIRMATION,
                     _unconfirmed(s.confirmation, s) if s.confirmation is not None else "not confirmed")
    note = s.comparison.note
    if s.comparison.verdict is Verdict.SLOWER and len(s.launches) < 2:
        note = "one launch" + (f"; {note}" if note else "")  # a slower set is never measured twice
    if len(s.launches) > 1:
        note = f"{len(s.launches)} launches" + (f"; {note}" if note else "")
    return _cols(s.comparison, s.comparison.verdict, note)


def trials_frame(records: Sequence[TrialRecord], *, min_effect: float, metric: Metric,
                 judgement: Judgement | None = None) -> pd.DataFrame:
    """One row per relaunch of ``records`` (duplicate/invalid bookkeeping entries are skipped),
    sorted by trial number.

    Columns: :data:`tuner.record.trial.CSV_COLUMNS` (the record's fields, then ``vs_baseline``, its
    95 % CI ``vs_baseline_ci_low``/``_high``, ``verdict``, ``verdict_note``) and ``tok_s_c<C>``
    (aggregate tok/s) per concurrency level any record measured; list, mapping and typed cells
    hold their plain JSON (:func:`tuner.record.trial.field_json`), as trials.csv does. The judgement is
    :func:`tuner.judging.judge.judge` on ``metric`` with ``min_effect`` (fraction), or ``judgement``
    when given: a tuned row carries its set's comparison on all of the set's launches against
    every baseline launch, the interval including the launch-to-launch noise; a confirmation
    row its confirmation on the new launches alone; a baseline row its launch against the other
    baseline launches (verdict ``baseline``). ``failed`` for failed relaunches, ``pending`` for
    running or interrupted ones (and ok ones with no ok baseline yet); ``verdict_note`` details
    it (e.g. ``baseline drifted 2.0 %``).
    """
    relaunches = [r for r in records if r.kind.relaunched]
    j = judgement or judge(relaunches, metric=metric, min_effect=min_effect)
    rows = []
    for r in relaunches:
        row: dict[str, Any] = {name: field_json(name, getattr(r, name)) for name in FIELDS}
        if not r.ok and not r.status.gated:
            row["output_tok_s"] = None  # a failed relaunch has no tok/s, never 0
            row["decode_tok_s"] = None
        for name in JSON_FIELDS:
            row[name] = copy.deepcopy(row[name])  # the frame never aliases a record
        row.update(_row_judgement(r, j))
        for level, tok_s in r.concurrency_tok_s().items():
            row[f"{CONCURRENCY_PREFIX}{level}"] = tok_s
        rows.append(row)
    return _typed(pd.DataFrame.from_records(rows)) if rows else _typed(pd.DataFrame(columns=list(CSV_COLUMNS)))


def judged_trials(records: Sequence[TrialRecord], *, min_effect: float, metric: Metric,
                  judgement: Judgement | None = None) -> tuple[pd.DataFrame, Story]:
    """:func:`trials_frame` of ``records`` and the :class:`tuner.report.story.Story` of the one
    judgement its rows were judged by (``judgement``, else :func:`tuner.judging.judge.judge` of
    the relaunches on ``metric`` with ``min_effect``): what the figures and tables take."""
    j = judgement or judge([r for r in records if r.kind.relaunched], metric=metric, min_effect=min_effect)
    return trials_frame(records, min_effect=min_effect, metric=metric, judgement=j), story_of(j)


#: The cause of a duplicate stored before its record held one.
SAME_SET = "the same set to NCCL"


def equal_to(record: TrialRecord, by_trial: dict[int, TrialRecord]) -> str:
    """The set a duplicate ``record`` is to NCCL the same as, as report.md and trials.csv name it
    (``trial 3 (preset ll)``, ``trial 0 (the untuned baseline)``; :func:`tuner.planning.earlier_label`
    of that trial in ``by_trial``, ``trial 3`` when it is not there); ``""`` for an invalid set."""
    if record.duplicate_of is None:
        return ""
    earlier = by_trial.get(record.duplicate_of)
    return f"trial {record.duplicate_of}" + (f" ({earlier_label(earlier)})" if earlier is not None else "")


def skipped_frame(records: Sequence[TrialRecord]) -> pd.DataFrame:
    """One row per set of ``records`` recorded without a launch (kind duplicate or invalid,
    status skipped), sorted by trial number, with :func:`trials_frame`'s columns: every named set
    (a preset, a screened or triage set), and every sampler proposal of a set no relaunch holds
    as written (the sampler's repeat of a measured set is bookkeeping, not a set of its own); of
    records of one name and set, the first.

    ``cause`` says why (a duplicate stored before causes were: :data:`SAME_SET`), ``duplicate_of``
    is the trial of the set it equals and ``verdict_note`` names it (:func:`equal_to`); ``verdict``
    is ``not measured``, and no tok/s, ratio or interval is filled in: judging never sees these.
    """
    relaunched = {r.set_key for r in records if r.kind.relaunched}
    by_trial = {r.trial: r for r in records}
    seen: set[tuple[str, str]] = set()
    rows = []
    for r in records:
        if r.kind.relaunched or (not r.preset and r.set_key in relaunched) or (r.preset, r.set_key) in seen:
            continue
        seen.add((r.preset, r.set_key))
        row: dict[str, Any] = {name: copy.deepcopy(field_json(name, getattr(r, name))) for name in FIELDS}
        row["output_tok_s"] = row["decode_tok_s"] = None
        row["cause"] = r.cause or (SAME_SET if r.kind is Kind.DUPLICATE else "")
        row.update(_cols(None, Verdict.NOT_MEASURED, equal_to(r, by_trial)))
        rows.append(row)
    return _typed(pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=list(CSV_COLUMNS)))


def split_skipped(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(relaunches, sets not measured)`` of a trials frame that holds both, as a trials.csv read
    back (:func:`read_trials_csv`) does: the rows of status skipped are the latter
    (:func:`skipped_frame`), the rest the former, each indexed from 0. The figures and the
    judged tables take the relaunches only."""
    skipped = df["status"] == Status.SKIPPED
    return df[~skipped].reset_index(drop=True), df[skipped].reset_index(drop=True)


def combine_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One frame of several :func:`trials_frame` frames (one per host type, or the relaunches
    and :func:`skipped_frame`), rows by trial number, columns and types as :func:`trials_frame`
    makes them."""
    return _typed(pd.concat([f for f in frames if not f.empty] or list(frames[:1]), ignore_index=True))


def write_trials_csv(df: pd.DataFrame, path: Path, story: Story | None = None) -> None:
    """Write ``df`` (a :func:`trials_frame`) to ``path``: list and mapping cells
    (:data:`tuner.record.trial.JSON_FIELDS`) as JSON text, enums as their values, None/NaN as
    empty; and ``story``, the judgement its rows were judged by, to ``judgement.json`` beside it
    (:data:`tuner.report.story.STORY_FILE`; None, e.g. for several host types each judged on its
    own, removes a stale one). Raises OSError."""
    beside = path.with_name(STORY_FILE)
    if story is not None:
        write_story(story, beside)
    else:
        beside.unlink(missing_ok=True)
    out = df.copy()
    for name in JSON_FIELDS & set(out.columns):
        out[name] = out[name].map(lambda v, n=name: json.dumps(v, sort_keys=n == "env"))
    for name in _ENUM_COLUMNS.keys() & set(out.columns):
        out[name] = out[name].map(lambda v: v.value if isinstance(v, StrEnum) else v)
    out.to_csv(path, index=False)


def read_trials_csv(path: Path | str) -> pd.DataFrame:
    """The frame :func:`write_trials_csv` wrote to ``path``, with the same columns and types
    (JSON text decoded back to lists and dicts, enums restored). The judgement is read apart,
    from the ``judgement.json`` beside it (:func:`tuner.report.story.read_story`).

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
        elif dtype == "boolean":
            df[name] = text.map({"True": True, "False": False, "": None}).astype("boolean")
        elif dtype in ("float64", "Int64", "int64"):
            df[name] = pd.to_numeric(text.where(text != "")).astype(dtype)
        else:
            df[name] = text
    return _typed(df)


def _section(row: pd.Series) -> int:
    """0 baseline launch with a ratio, 1 tuned with one, 2 no ratio (running, interrupted, not
    judged), 3 failed."""
    status = Status(row["status"])
    if status.failed and status is not Status.INTERRUPTED:
        return 3
    if not math.isfinite(row["vs_baseline"]):
        return 2
    return 0 if row["kind"] == Kind.BASELINE else 1


def judged_order(df: pd.DataFrame, story: Story) -> pd.DataFrame:
    """``df``'s rows in the order every table and the forest plot show them: the baseline's
    launches in launch order, then the tuned sets in the judgement's order (best first,
    :meth:`tuner.report.story.Story.order`; a set's launches together, by trial), then rows with
    no ratio (running, interrupted, not judged) and the failed ones last, each by trial.
    ``story``: the judgement ``df``'s rows were judged by."""
    if df.empty:
        return df
    launch = {t: i for i, t in enumerate(ok_baselines(df)["trial"])}
    def key(row: pd.Series) -> tuple[int, int, int]:
        section = _section(row)
        trial = int(row["trial"])
        if section == 0:
            return (0, launch.get(trial, trial), trial)
        if section == 1:
            return (1, story.rank(set_key(row["env"], row["flags"] or ())), trial)
        return (section, 0, trial)
    keys = [key(r) for _, r in df.iterrows()]
    return df.iloc[sorted(range(len(df)), key=keys.__getitem__)]


def ok_baselines(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ok baseline measurements, in the order they were measured."""
    base = df[(df["kind"] == Kind.BASELINE) & (df["status"] == Status.OK)]
    return base.sort_values(["started_at", "trial"], na_position="last")


def baseline_runs(df: pd.DataFrame, story: Story) -> tuple[list[float], float]:
    """Pooled runs (tok/s) of every ok baseline measurement in ``df``, and the baseline's drift
    as ``story``, the judgement, measured it (fraction, :attr:`tuner.report.story.Story.drift`:
    max/min - 1 of the launches' robust levels; 0 for one launch)."""
    base = ok_baselines(df)
    runs = [float(v) for runs in base["output_tok_s_runs"] for v in runs]
    return runs, story.drift if not df.empty else 0.0


def best_row(df: pd.DataFrame, story: Story) -> pd.Series | None:
    """The first relaunch of the best set of ``story``, the one the verdict names (else the
    first set in the judgement's order), or None when no tuned set was judged."""
    if df.empty or not story.sets:
        return None
    best = story.find(story.best) if story.best is not None else story.sets[0]
    rows = df[df["trial"].isin(best.trials if best is not None else ())]
    return None if rows.empty else rows.sort_values("trial").iloc[0]


def not_applied_text(s: SetJudgement) -> str:
    """What of set ``s`` was not applied, in words: the NCCL variables NCCL did not apply, by
    name, then its backend choice with the server's reason (``vllm-flashinfer: vllm logged
    "FlashInfer All Reduce is disabled because flashinfer is not available"``)."""
    names = [n for n in sorted(s.not_applied) if n != s.backend_choice]
    if s.backend_choice in s.not_applied:
        names.append(f"{s.backend_choice}: {s.not_applied[s.backend_choice]}")
    return ", ".join(names)


def _applied(value: object) -> bool | None:
    """A ``backend_applied`` cell as True, False or None (``<NA>``, None, NaN)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


def backend_text(row: pd.Series) -> str:
    """Which backend a row ran, as report.md's ``backend`` column says it: what the launch's log
    shows carried the decode allreduce (``allreduce_backend``), with the set's backend choice in
    parentheses, ``not applied`` when its launch did not prove it (``nccl (vllm-custom-allreduce-off)``,
    ``custom_allreduce (vllm-flashinfer not applied)``); ``""`` when neither is known."""
    ran = str(row.get("allreduce_backend") or "")
    choice = str(row.get("backend_choice") or "")
    if not choice:
        return ran
    applied = _applied(row.get("backend_applied"))
    inner = choice + (" not applied" if applied is False else "")
    return f"{ran} ({inner})" if ran else f"({inner})"


def baseline_name(row: Any) -> str:
    """``"baseline (untuned)"``, or ``"baseline (not untuned: NCCL_P2P_DISABLE set behind nccl-tune's
    back)"`` when the row's trial (a record or a trials frame row) echoed NCCL variables its launch
    did not set (``nccl_unlaunched``, a mapping or its JSON text)."""
    names = [k for k, _ in _unlaunched(row)]
    if not names:
        return "baseline (untuned)"
    return f"baseline (not untuned: {', '.join(names)} set behind nccl-tune's back)"


def _unlaunched(row: Any) -> list[tuple[str, str]]:
    """(name, value) of each variable the row's trial echoed that its launch did not set
    (``nccl_unlaunched``: name -> ``VALUE on ranks 1-7`` / ``on rank 0``, a mapping or its JSON
    text), sorted by name; empty when none or not stored."""
    stray = row.get("nccl_unlaunched") if isinstance(row, (pd.Series, dict)) else getattr(row, "nccl_unlaunched", {})
    if isinstance(stray, str):
        try:
            stray = json.loads(stray) if stray else {}
        except ValueError:
            stray = {}
    if not isinstance(stray, dict):
        return []
    return [(k, re.split(r" on ranks? ", str(v), maxsplit=1)[0]) for k, v in sorted(stray.items())]


def unlaunched_words(row: Any) -> str:
    """``"NCCL_ALGO=Ring NCCL_PROTO=Simple"``: the variables the row's trial (a record, a trials
    frame row or a dict) echoed that its launch did not set, ``""`` when none."""
    return " ".join(f"{k}={v}" for k, v in _unlaunched(row))


def launched_text(row: Any) -> str:
    """The row's set as launched and as NCCL ran it: :func:`set_text`, and the variables set
    behind nccl-tune's back after it (``(not untuned: NCCL_PROTO=Simple set behind nccl-tune's
    back)`` for a baseline)."""
    env = row["env"] if isinstance(row["env"], dict) else json.loads(row["env"] or "{}")
    flags = row.get("flags") if isinstance(row, (pd.Series, dict)) else ()
    flags = json.loads(flags) if isinstance(flags, str) and flags else (flags if isinstance(flags, (list, tuple)) else ())
    said, extra = set_text(env, flags), unlaunched_words(row)
    if not extra:
        return said
    if not env and not flags:
        return f"(not untuned: {extra} set behind nccl-tune's back)"
    return f"{said} (+ {extra} set behind nccl-tune's back)"


def set_text(env: dict[str, str], flags: Sequence[str] | None = ()) -> str:
    """A set as ``NAME=value`` words (:func:`env_text`) then its server flags; only the flags for
    a set of flags alone (``--disable-custom-all-reduce``, never ``(untuned)``)."""
    flags = list(flags or ())
    if not flags:
        return env_text(env)
    return " ".join(([env_text(env)] if env else []) + flags)


def env_text(env: dict[str, str]) -> str:
    """A set as ``NAME=value`` words sorted by name, or ``(untuned)`` for the empty set."""
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(untuned)"


def verdict_text(row: pd.Series, min_effect: float = stats.DEFAULT_MIN_EFFECT) -> str:
    """A row's verdict in words with its note in parentheses, e.g. ``inconclusive (baseline
    drifted 2.0 %)`` or ``faster, below the 1 % that matters``."""
    verdict = row["verdict"]
    text = stats.verdict_words(verdict, min_effect) if isinstance(verdict, Verdict) else str(verdict)
    note = str(row["verdict_note"] or "")
    if note.startswith(f"{text}: "):  # a note that opens with the verdict's own words says them once
        note = note[len(text) + 2:]
    return f"{text} ({note})" if note else text
