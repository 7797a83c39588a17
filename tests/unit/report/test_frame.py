"""tuner.report.frame: the trials table from real TrialRecords, its judgement and its CSV file."""

from __future__ import annotations

import csv
import json
import math

import pandas as pd
import pytest
from tests.helpers import sample_records, trial_record

from tuner.record import CSV_COLUMNS, JSON_FIELDS, Kind, Status, Verdict
from tuner.report.frame import (
    baseline_runs,
    best_row,
    read_trials_csv,
    trials_frame,
    verdict_of,
    write_trials_csv,
)

CONC = ["tok_s_c1", "tok_s_c2", "tok_s_c4", "tok_s_c8"]


@pytest.fixture
def df() -> pd.DataFrame:
    return trials_frame(sample_records(), min_effect=0.01)


def by_trial(df: pd.DataFrame, trial: int) -> pd.Series:
    return df.set_index("trial").loc[trial]


def test_one_row_per_relaunch_with_the_record_columns(df):
    assert list(df.columns) == [*CSV_COLUMNS, *CONC]
    assert list(df["trial"]) == list(range(10))  # the sampler's duplicate (trial 10) was never relaunched
    assert by_trial(df, 3)["tok_s_c8"] == 402.0 and math.isnan(by_trial(df, 2)["tok_s_c1"])


def test_cells_hold_python_values_never_json_text(df):
    for name in JSON_FIELDS:
        assert all(isinstance(v, list | dict) for v in df[name]), name
    assert by_trial(df, 3)["env"] == {"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"}
    assert by_trial(df, 0)["output_tok_s_runs"] == [70.1, 71.3, 69.8, 70.6]
    assert all(isinstance(v, Kind) for v in df["kind"]) and all(isinstance(v, Status) for v in df["status"])
    assert all(isinstance(v, Verdict) for v in df["verdict"])
    assert by_trial(df, 6)["retry_of_trial"] == 5 and pd.isna(by_trial(df, 1)["retry_of_trial"])


def test_failed_relaunches_have_no_tok_s(df):
    for trial in (2, 5, 7, 9):
        assert math.isnan(by_trial(df, trial)["output_tok_s"])


def test_verdicts(df):
    verdicts = dict(zip(df["trial"], df["verdict"], strict=True))
    assert verdicts == {0: Verdict.BASELINE, 1: Verdict.NO_DIFFERENCE, 2: Verdict.FAILED, 3: Verdict.FASTER,
                        4: Verdict.SLOWER, 5: Verdict.PENDING, 6: Verdict.NO_DIFFERENCE, 7: Verdict.FAILED,
                        8: Verdict.BASELINE, 9: Verdict.PENDING}
    fast, slow = by_trial(df, 3), by_trial(df, 4)
    assert 1.0 < fast["vs_baseline_ci_low"] < fast["vs_baseline"] < fast["vs_baseline_ci_high"]
    assert fast["vs_baseline"] == pytest.approx(80.7 / 70.35)
    assert slow["vs_baseline_ci_high"] < 1.0 and slow["vs_baseline"] == pytest.approx(42.25 / 70.35)
    assert (df["verdict_note"] == "").all()


def test_each_trial_is_judged_against_the_last_baseline_before_it():
    records = [*sample_records()[:9], trial_record(11, "search", [72.0, 72.4, 71.8, 72.2], env={"NCCL_PROTO": "LL"})]
    df = trials_frame(records, min_effect=0.01)
    assert by_trial(df, 11)["vs_baseline"] == pytest.approx(72.1 / 71.25)  # the re-measure (trial 8)
    assert by_trial(df, 8)["vs_baseline"] == pytest.approx(71.25 / 70.35)  # baselines against the first
    # without start times the trial number orders them
    for r in records:
        r.started_at = None
    df = trials_frame(records, min_effect=0.01)
    assert by_trial(df, 11)["vs_baseline"] == pytest.approx(72.1 / 71.25)
    assert by_trial(df, 3)["vs_baseline"] == pytest.approx(80.7 / 70.35)


def test_a_gain_within_the_baselines_drift_is_inconclusive_with_a_note():
    records = [trial_record(0, "baseline", [70.0, 70.4, 69.8, 70.2]),
               trial_record(1, "preset", [77.0, 77.4, 76.8, 77.2], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "baseline", [80.0, 80.4, 79.8, 80.2], recheck=True)]
    row = by_trial(trials_frame(records, min_effect=0.01), 1)
    assert row["verdict"] is Verdict.INCONCLUSIVE
    assert row["verdict_note"] == "baseline drifted 14.3 %"


def test_min_effect_decides_a_small_gain():
    records = [trial_record(0, "baseline", [70.0, 70.1, 69.9, 70.0]),
               trial_record(1, "preset", [71.4, 71.5, 71.3, 71.4], env={"NCCL_PROTO": "LL"})]
    assert by_trial(trials_frame(records, min_effect=0.01), 1)["verdict"] is Verdict.FASTER
    assert by_trial(trials_frame(records, min_effect=0.05), 1)["verdict"] is Verdict.NO_DIFFERENCE


def test_trials_before_any_ok_baseline_are_pending():
    records = [trial_record(0, "baseline", status="crashed", cause="exit 1"),
               trial_record(1, "preset", [70.0, 70.4], env={"NCCL_PROTO": "LL"})]
    df = trials_frame(records, min_effect=0.01)
    assert list(df["verdict"]) == [Verdict.FAILED, Verdict.PENDING]
    assert by_trial(df, 1)["verdict_note"] == "no ok baseline to compare with"
    assert best_row(df)["trial"] == 1 and baseline_runs(df) == ([], 0.0)


def test_verdict_of_maps_the_text_form_and_verdict_values():
    assert verdict_of("inconclusive (baseline drifted 2.0 %)") == (Verdict.INCONCLUSIVE, "baseline drifted 2.0 %")
    assert verdict_of("no significant difference") == (Verdict.NO_DIFFERENCE, "")
    assert verdict_of(Verdict.SLOWER) == (Verdict.SLOWER, "")
    with pytest.raises(ValueError):
        verdict_of("better")


def test_csv_round_trip_gives_the_same_frame(df, tmp_path):
    path = tmp_path / "trials.csv"
    write_trials_csv(df, path)
    pd.testing.assert_frame_equal(read_trials_csv(path), df)
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*CSV_COLUMNS, *CONC]
    assert json.loads(rows[3]["env"]) == {"NCCL_MAX_NCHANNELS": "8", "NCCL_PROTO": "LL"}  # JSON in the file only
    assert rows[3]["verdict"] == "faster" and rows[2]["output_tok_s"] == ""


def test_empty_study(tmp_path):
    df = trials_frame([], min_effect=0.01)
    assert df.empty and list(df.columns) == list(CSV_COLUMNS)
    assert best_row(df) is None
    write_trials_csv(df, tmp_path / "t.csv")
    pd.testing.assert_frame_equal(read_trials_csv(tmp_path / "t.csv"), df, check_index_type=False)


def test_read_refuses_a_file_that_is_not_a_trials_csv(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("trial,kind\n0,baseline\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_trials_csv(path)


def test_baseline_runs_and_best_row(df):
    runs, drift = baseline_runs(df)
    assert runs == [70.1, 71.3, 69.8, 70.6, 71.0, 71.9, 70.8, 71.5]
    assert drift == pytest.approx(71.25 / 70.35 - 1)
    assert best_row(df)["trial"] == 3
