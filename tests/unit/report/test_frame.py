"""tuner.report.frame: the trials table from real TrialRecords, its judgement and its CSV file."""

from __future__ import annotations

import csv
import json
import math

import pandas as pd
import pytest

from tests.helpers import sample_records, trial_record
from tuner.judging import judge, stats
from tuner.record import CSV_COLUMNS, JSON_FIELDS, Kind, Metric, Status, Verdict
from tuner.report.frame import (
    baseline_runs,
    best_row,
    judged_trials,
    read_trials_csv,
    trials_frame,
    write_trials_csv,
)
from tuner.report.story import STORY_FILE, Story, read_story, story_of

CONC = ["tok_s_c1", "tok_s_c2", "tok_s_c4", "tok_s_c8"]


@pytest.fixture
def df() -> pd.DataFrame:
    return trials_frame(sample_records(), metric=Metric.OUTPUT, min_effect=0.01)


@pytest.fixture
def story() -> Story:
    return judged_trials(sample_records(), metric=Metric.OUTPUT, min_effect=0.01)[1]


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


BASE = [[70.1, 71.3, 69.8, 70.6], [71.0, 71.9, 70.8, 71.5]]  # sample_records' baseline launches


def test_verdicts(df):
    verdicts = dict(zip(df["trial"], df["verdict"], strict=True))
    assert verdicts == {0: Verdict.BASELINE, 1: Verdict.NO_DIFFERENCE, 2: Verdict.FAILED, 3: Verdict.FASTER,
                        4: Verdict.SLOWER, 5: Verdict.PENDING, 6: Verdict.NO_DIFFERENCE, 7: Verdict.FAILED,
                        8: Verdict.BASELINE, 9: Verdict.PENDING}
    fast, slow = by_trial(df, 3), by_trial(df, 4)
    assert 1.0 < fast["vs_baseline_ci_low"] < fast["vs_baseline"] < fast["vs_baseline_ci_high"]
    # each set against the baseline interpolated at its own launch: trials 3 and 4 are the 3rd and
    # 4th of the six ok relaunches, between the baseline launches at the 1st and the 6th
    b0, b8 = (stats.launch_level(b) for b in BASE)
    at = {3: 2 / 5, 4: 3 / 5}
    base_at = {t: b0 ** (1 - w) * b8**w for t, w in at.items()}
    assert fast["vs_baseline"] == pytest.approx(stats.launch_level([80.2, 80.9, 81.4, 80.5]) / base_at[3], rel=1e-3)
    assert slow["vs_baseline_ci_high"] < 1.0
    assert slow["vs_baseline"] == pytest.approx(stats.launch_level([42.1, 42.6, 41.9, 42.4]) / base_at[4], rel=1e-3)
    notes = df[df["kind"] != Kind.BASELINE].set_index("trial")["verdict_note"]
    assert notes[4] == "one launch" and (notes.drop(4) == "").all()  # slower on one launch, said so


def test_a_baseline_launch_is_shown_against_the_other_baseline_launches(df):
    first = by_trial(df, 0)
    assert first["vs_baseline"] == pytest.approx(stats.level([BASE[0]]) / stats.level([BASE[1]]))
    assert first["vs_baseline_ci_low"] < 1 < first["vs_baseline_ci_high"]


def test_a_baseline_that_drifts_as_much_as_the_gain_calls_nothing_faster():
    records = [trial_record(0, "baseline", [70.0, 70.4, 69.8, 70.2]),
               trial_record(1, "preset", [77.0, 77.4, 76.8, 77.2], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "baseline", [80.0, 80.4, 79.8, 80.2], recheck=True)]
    row = by_trial(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01), 1)
    assert row["verdict"] in (Verdict.NO_DIFFERENCE, Verdict.INCONCLUSIVE)
    assert row["vs_baseline_ci_low"] < 1 < row["vs_baseline_ci_high"]


def test_min_effect_decides_a_small_gain():
    records = [trial_record(0, "baseline", [70.0, 70.1, 69.9, 70.0]),
               trial_record(1, "preset", [77.4, 77.5, 77.3, 77.4], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "baseline", [70.3, 70.1, 70.2, 70.0], recheck=True)]
    assert by_trial(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01), 1)["verdict"] is Verdict.FASTER
    assert by_trial(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.2), 1)["verdict"] is Verdict.FASTER_BELOW_MIN


def test_decode_metric_judges_on_decode_tok_s():
    records = [trial_record(0, "baseline", [70.0, 70.1, 69.9, 70.0], decode_tok_s_runs=[80.0, 80.1, 79.9, 80.0]),
               trial_record(1, "preset", [70.0, 70.1, 69.9, 70.0], env={"NCCL_PROTO": "LL"},
                            decode_tok_s_runs=[96.0, 96.1, 95.9, 96.0]),
               trial_record(2, "baseline", [70.3, 70.1, 70.2, 70.0], recheck=True,
                            decode_tok_s_runs=[80.3, 80.1, 80.2, 80.0])]
    assert by_trial(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01), 1)["verdict"] is Verdict.NO_DIFFERENCE
    decode = by_trial(trials_frame(records, min_effect=0.01, metric=Metric.DECODE), 1)
    assert decode["verdict"] is Verdict.FASTER and decode["vs_baseline"] == pytest.approx(1.2, rel=0.01)


def test_a_set_whose_variable_nccl_did_not_apply_gets_no_speed_verdict():
    records = [trial_record(0, "baseline", [70.0, 70.1, 69.9, 70.0]),
               trial_record(1, "preset", [90.0, 90.1, 89.9, 90.0], env={"NCCL_PROTO": "LL"},
                            nccl_not_applied={"NCCL_PROTO": "echoed by no rank"}),
               trial_record(2, "baseline", [70.3, 70.1, 70.2, 70.0], recheck=True)]
    row = by_trial(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01), 1)
    assert row["verdict"] is Verdict.NOT_APPLIED and "NCCL_PROTO" in row["verdict_note"]


def test_trials_before_any_ok_baseline_are_pending():
    records = [trial_record(0, "baseline", status="crashed", cause="exit 1"),
               trial_record(1, "preset", [70.0, 70.4], env={"NCCL_PROTO": "LL"})]
    df, story = judged_trials(records, metric=Metric.OUTPUT, min_effect=0.01)
    assert list(df["verdict"]) == [Verdict.FAILED, Verdict.PENDING]
    assert by_trial(df, 1)["verdict_note"] == "no ok baseline to compare with"
    assert best_row(df, story)["trial"] == 1 and baseline_runs(df, story) == ([], 0.0)


def test_csv_round_trip_gives_the_same_frame(df, story, tmp_path):
    path = tmp_path / "trials.csv"
    write_trials_csv(df, path, story)
    pd.testing.assert_frame_equal(read_trials_csv(path), df)
    assert read_story(tmp_path / STORY_FILE) == story  # the judgement beside it, read back whole
    write_trials_csv(df, path)  # several host types: no one judgement, and none left stale
    assert not (tmp_path / STORY_FILE).exists()
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*CSV_COLUMNS, *CONC]
    assert json.loads(rows[3]["env"]) == {"NCCL_MAX_NCHANNELS": "8", "NCCL_PROTO": "LL"}  # JSON in the file only
    assert rows[3]["verdict"] == "faster" and rows[2]["output_tok_s"] == ""


def test_empty_study(tmp_path):
    df = trials_frame([], metric=Metric.OUTPUT, min_effect=0.01)
    assert df.empty and list(df.columns) == list(CSV_COLUMNS)
    assert best_row(df, story_of(judge([], metric=Metric.OUTPUT))) is None
    write_trials_csv(df, tmp_path / "t.csv")
    pd.testing.assert_frame_equal(read_trials_csv(tmp_path / "t.csv"), df, check_index_type=False)


def test_read_refuses_a_file_that_is_not_a_trials_csv(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("trial,kind\n0,baseline\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_trials_csv(path)


def test_baseline_runs_and_best_row(df, story):
    runs, drift = baseline_runs(df, story)
    assert runs == [70.1, 71.3, 69.8, 70.6, 71.0, 71.9, 70.8, 71.5]
    # the robust levels the verdicts use (Huber at the baseline's robust run SD), not the medians
    scale = stats.robust_run_sigma(BASE)
    b0, b8 = (stats.launch_level(b, scale=scale) for b in BASE)
    assert drift == pytest.approx(b8 / b0 - 1) and abs(drift - (71.25 / 70.35 - 1)) < 0.001
    assert best_row(df, story)["trial"] == 3
