"""tuner.report.text: the verdict paragraph, the console table (whole rows when piped), markdown."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from tests.helpers import sample_records, trial_record
from rich.console import Console

from tuner.record import StudyInfo
from tuner.report.frame import trials_frame
from tuner.report.text import (
    CONSOLE_COLUMNS,
    console_table,
    export_lines,
    markdown_table,
    plain_table,
    print_results,
    report_markdown,
    verdict_paragraph,
)

INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--port", "8000"], storage_hint="sqlite:///s.db")


@pytest.fixture
def df() -> pd.DataFrame:
    return trials_frame(sample_records(), min_effect=0.01)


def frame(*records) -> pd.DataFrame:
    return trials_frame(list(records), min_effect=0.01)


BASE = trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6])


def test_console_table_columns_and_order(df):
    table = console_table(df)
    assert tuple(c.header for c in table.columns) == CONSOLE_COLUMNS
    trials = [int(c.plain) for c in table.columns[0].cells]
    assert trials == [3, 8, 6, 0, 1, 4, 2, 5, 7, 9]  # by tok/s, failed and running last
    verdicts = [c.plain for c in table.columns[6].cells]
    assert verdicts[0] == "faster" and verdicts[1] == "baseline"
    assert verdicts[6].startswith("exited with code 1: NCCL WARN [LL128]")  # cause, markup left alone


def test_piped_rows_are_whole_lines_on_a_narrow_console(df):
    out = io.StringIO()
    console = Console(file=out, width=40)
    assert not console.is_terminal
    print_results(df, verdict_paragraph(df, INFO), INFO, console)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["trial", "kind", "status", "tok/s", "vs", "base", "95%", "CI", "verdict", "env"]
    rows = lines[1:11]
    assert [int(r.split()[0]) for r in rows] == [3, 8, 6, 0, 1, 4, 2, 5, 7, 9]
    deployment = next(r for r in rows if r.split()[0] == "1")
    assert deployment.endswith("CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_ALGO=Ring NCCL_BUFFSIZE=16777216 "
                               "NCCL_MAX_NCHANNELS=16 NCCL_PROTO=LL")
    assert "0.998" in deployment and "no significant difference" in deployment
    assert lines[11] == "" and lines[12].startswith("Baseline: 70.9 tok/s") and len(lines[12]) > 200
    assert lines[14] == "Use it:"
    assert lines[15] == "  export NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8"
    assert lines[-1] == "  env NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8 vllm serve /models/m --port 8000"
    assert all(line == line.rstrip() for line in lines)


def test_no_export_lines_without_a_significant_winner():
    df = frame(BASE, trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env={"NCCL_PROTO": "LL"}))
    out = io.StringIO()
    print_results(df, verdict_paragraph(df, INFO), INFO, Console(file=out, width=40))
    assert "Use it:" not in out.getvalue() and "No NCCL setting beat the baseline" in out.getvalue()


def test_verdict_column_shows_the_note():
    df = frame(trial_record(0, "baseline", [70.0, 70.4, 69.8, 70.2]),
               trial_record(1, "preset", [77.0, 77.4, 76.8, 77.2], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "baseline", [80.0, 80.4, 79.8, 80.2], recheck=True))
    text = plain_table(console_table(df))
    assert "inconclusive (baseline drifted 14.3 %)" in text
    paragraph = verdict_paragraph(df, INFO)
    assert "but the verdict is inconclusive (baseline drifted 14.3 %): the baseline moved" in paragraph


def test_verdict_paragraph_for_a_winner(df):
    text = verdict_paragraph(df, INFO)
    assert text.startswith("Baseline: 70.9 tok/s single stream (median of 8 runs over 2 launches, drift 1.3 %).")
    assert ("Best set: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL (trial 3) at 80.7 tok/s, +14.7 % (95 % CI "
            in text) and "significantly faster than the baseline. Use it." in text
    assert "2 of 6 tuned sets failed (see status and cause)." in text
    assert "interrupted" not in text  # trial 5 was retried by trial 6


def test_verdict_paragraph_when_every_set_is_slower():
    df = frame(BASE, trial_record(1, "preset", [42.1, 42.6, 41.9, 42.4], env={"NCCL_PROTO": "Simple"}))
    assert "Every tuned set was slower than the baseline (the best, NCCL_PROTO=Simple, -39.9 %" in verdict_paragraph(df, INFO)


def test_verdict_paragraph_edges():
    assert verdict_paragraph(frame(), INFO).startswith("The untuned baseline has no successful measurement")
    assert "Only the baseline was measured" in verdict_paragraph(frame(BASE), INFO)
    failed = frame(BASE, trial_record(1, "preset", status="crashed", env={"NCCL_PROTO": "LL128"}))
    assert "None of the 1 tuned sets ran successfully (1 failed)" in verdict_paragraph(failed, INFO)
    met = StudyInfo(target=60.0, target_met_untuned=True)
    assert "already met by the untuned server" in verdict_paragraph(frame(BASE), met)
    lost = frame(BASE, trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env={"NCCL_PROTO": "LL"}),
                 trial_record(2, "search", status="interrupted", env={"NCCL_ALGO": "Tree"}))
    text = verdict_paragraph(lost, StudyInfo(target=90.0))
    assert "1 interrupted set was not re-measured yet" in text
    assert text.endswith("Target 90 tok/s: not reached within the budget.")


def test_export_lines():
    lines = export_lines({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, ["vllm", "serve", "m"])
    assert lines[0] == "export NCCL_PROTO=LL NCCL_ALGO=Ring"
    assert lines[-1] == "env NCCL_PROTO=LL NCCL_ALGO=Ring vllm serve m"
    assert export_lines({}) == ["# the untuned baseline: unset every NCCL_* variable"]


def test_markdown(df):
    table = markdown_table(pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x|y", None]}))
    assert table == "| a | b |\n|---|---|\n| 1.235 | x\\|y |\n|  |  |\n"
    md = report_markdown(df, "VERDICT", INFO, "night", ["trials_vs_baseline.png", "history.png"])
    assert md.startswith("# nccl-tune report: night\n\n## Verdict\n\nVERDICT\n")
    assert "## Use the best set" in md and "export NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8" in md
    assert "![trials vs baseline](trials_vs_baseline.png)" in md and "![history](history.png)" in md
    assert "## Concurrency" not in md and "## Failed trials" in md
    assert "| 3 | preset | ok | 80.7 | 1.147 |" in md
    assert "| 7 | hung | no token for 120 s | NCCL_MAX_NCHANNELS=2 |" in md
    assert md.rstrip().endswith("`optuna-dashboard sqlite:///s.db`")
    assert report_markdown(frame(), "", INFO, "night") == "# nccl-tune report: night\n\nNo trial recorded yet.\n"


def test_a_narrow_terminal_folds_the_set_but_never_cuts_it(df):
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    print_results(df, verdict_paragraph(df, INFO), INFO, console)
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()[:20]) <= 100
    assert "NCCL_BUFFSIZE=167772" in text  # folded over two lines, every character kept
