"""Sets not measured: one trials.csv row each (with why and the set it equals) and report.md's
"Sets not measured" table, from real TrialRecords as the sweep stores them; judging never sees them."""

from __future__ import annotations

import pandas as pd

from tests.helpers import sample_records, trial_record
from tuner import report
from tuner.record import CSV_COLUMNS, Kind, Metric, StudyInfo, Verdict
from tuner.report.frame import SAME_SET, read_trials_csv, skipped_frame, trials_frame
from tuner.report.markdown import section_lines
from tuner.report.text import not_measured_section


def night():
    """sample_records' night plus what a diagnosed night skips: a preset NCCL runs as the
    baseline, one as preset ll-8ch, one it rejects, a duplicate stored before causes were, the
    sampler's repeat of a measured set (bookkeeping) and its proposal of a set never launched."""
    return [*sample_records(),
            trial_record(11, "duplicate", status="skipped", env={"NCCL_BUFFSIZE": "4194304"}, preset="buffsize-default",
                         duplicate_of=0, cause="the same set to NCCL at 14336 B"),
            trial_record(12, "duplicate", status="skipped", env={"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16"},
                         preset="ll-16ch", duplicate_of=3, cause="the same set to NCCL at 14336 B"),
            trial_record(13, "invalid", status="skipped", env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, preset="tree-ll",
                         cause="no algorithm/protocol available for function AllGather"),
            trial_record(14, "duplicate", status="skipped", env={"NCCL_PROTO": "LL"}, preset="ll", duplicate_of=3),
            trial_record(15, "duplicate", status="skipped", env={"NCCL_MAX_NCHANNELS": "4"}, duplicate_of=0,
                         cause="the same set to NCCL"),
            trial_record(16, "duplicate", status="skipped", env={"NCCL_MAX_NCHANNELS": "4"}, duplicate_of=0,
                         cause="the same set to NCCL")]


def test_one_row_per_set_not_measured_with_why_and_what_it_equals():
    df = skipped_frame(night())
    assert list(df.columns) == list(CSV_COLUMNS)
    # trial 10 repeats trial 4's set as written (bookkeeping); trial 16 repeats trial 15's proposal
    assert list(df["trial"]) == [11, 12, 13, 14, 15]
    assert list(df["preset"]) == ["buffsize-default", "ll-16ch", "tree-ll", "ll", ""]
    assert set(df["status"]) == {"skipped"} and set(df["verdict"]) == {Verdict.NOT_MEASURED}
    assert list(df["verdict_note"]) == ["trial 0 (the untuned baseline)", "trial 3 (preset ll-8ch)", "",
                                        "trial 3 (preset ll-8ch)", "trial 0 (the untuned baseline)"]
    assert [None if pd.isna(v) else int(v) for v in df["duplicate_of"]] == [0, 3, None, 3, 0]
    assert df.loc[2, "cause"] == "no algorithm/protocol available for function AllGather"
    assert df.loc[3, "cause"] == SAME_SET  # stored before a duplicate's cause was
    assert df["output_tok_s"].isna().all() and df["vs_baseline"].isna().all()


def test_no_skipped_set_no_rows():
    assert skipped_frame(sample_records()).empty
    assert not_measured_section(skipped_frame(sample_records())) is None


def test_the_markdown_table_names_each_set_its_variables_why_and_equal_to():
    lines = section_lines(not_measured_section(skipped_frame(night())))
    assert lines[0] == "## Sets not measured"
    table = "\n".join(lines)
    assert "| trial | name | variables | why | equal to |" in table
    assert ("| 12 | ll-16ch | NCCL_MAX_NCHANNELS=16 NCCL_PROTO=LL | the same set to NCCL at 14336 B "
            "| trial 3 (preset ll-8ch) |") in table
    assert "| 13 | tree-ll | NCCL_ALGO=Tree NCCL_PROTO=LL | no algorithm/protocol available for function AllGather |  |" in table
    assert "| 15 | (sampler) | NCCL_MAX_NCHANNELS=4 | the same set to NCCL | trial 0 (the untuned baseline) |" in table


def test_trials_csv_and_report_md_list_every_set_and_judging_ignores_them(tmp_path):
    records = night()
    written, verdict = report.write_outputs(records, StudyInfo(), "s", tmp_path, min_effect=0.01, figures=False)
    written_alone, verdict_alone = report.write_outputs(sample_records(), StudyInfo(), "s", tmp_path / "alone",
                                                      min_effect=0.01, figures=False)
    df, alone = written.trials, written_alone.trials
    assert verdict == verdict_alone  # the sets not measured change no judgement
    assert list(df["trial"]) == list(alone["trial"]) == list(range(10))  # the returned frame: relaunches
    csv = read_trials_csv(tmp_path / "trials.csv")
    assert list(csv["trial"]) == [*range(10), 11, 12, 13, 14, 15]
    assert list(csv[csv["kind"] == Kind.INVALID]["cause"]) == ["no algorithm/protocol available for function AllGather"]
    assert csv.set_index("trial").loc[12, "verdict_note"] == "trial 3 (preset ll-8ch)"
    measured = csv[csv["trial"] < 10].reset_index(drop=True)
    pd.testing.assert_series_equal(measured["vs_baseline"], alone["vs_baseline"])
    assert list(measured["verdict"]) == list(alone["verdict"])
    md = (tmp_path / "report.md").read_text()
    assert "## Sets not measured" in md
    for name in ("buffsize-default", "ll-16ch", "tree-ll", "| 14 | ll |"):
        assert name in md, name
    assert "## Sets not measured" not in (tmp_path / "alone" / "report.md").read_text()


def test_frame_of_relaunches_is_unchanged_by_sets_not_measured():
    a = trials_frame(night(), metric=Metric.OUTPUT, min_effect=0.01)
    b = trials_frame(sample_records(), metric=Metric.OUTPUT, min_effect=0.01)
    assert list(a["trial"]) == list(b["trial"]) and list(a["verdict"]) == list(b["verdict"])
