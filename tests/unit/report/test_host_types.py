"""A study measured on two host types: every set judged against its own type's baseline, never
mixed in one verdict; report.md, trials.csv and the console say which type each row is."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tests.helpers import trial_record
from tuner import report
from tuner.judging.judge import host_type_groups, judge, judge_by_host_type
from tuner.record import Metric, StudyInfo, Verdict
from tuner.report.frame import read_trials_csv

H100 = "8 x NVIDIA H100 80GB HBM3 | vllm serve m --tensor-parallel-size 8"
L40 = "8 x NVIDIA L40S | vllm serve m --tensor-parallel-size 8"
LL = {"NCCL_PROTO": "LL"}
SIMPLE = {"NCCL_PROTO": "Simple"}
INFO = StudyInfo(server_command=["vllm", "serve", "m"], storage_hint="postgresql://u:***@db/s", min_effect=0.01)


def two_types() -> list:
    """H100 hosts: baseline ~100 tok/s, LL ~+5 %. L40S hosts: baseline ~50 tok/s, Simple ~+10 %
    there, which against the H100 baseline would read as half the speed."""
    return [
        trial_record(0, "baseline", [100.1, 99.8, 100.3, 99.9], host_type=H100),
        trial_record(1, "baseline", [50.2, 49.9, 50.1, 50.0], host_type=L40),
        trial_record(2, "search", [105.2, 104.9, 105.1, 105.3], env=LL, host_type=H100),
        trial_record(3, "search", [55.1, 54.9, 55.0, 55.2], env=SIMPLE, host_type=L40),
        trial_record(4, "baseline", [100.0, 100.2, 99.7, 100.1], recheck=True, host_type=H100),
        trial_record(5, "baseline", [50.0, 50.3, 49.8, 50.1], recheck=True, host_type=L40),
    ]


def test_each_type_is_judged_against_its_own_baseline():
    groups = judge_by_host_type(two_types(), metric=Metric.OUTPUT)
    assert list(groups) == [H100, L40]
    h100, l40 = groups[H100], groups[L40]
    assert h100.baseline_trials == [0, 4] and l40.baseline_trials == [1, 5]
    [ll] = h100.sets.values()
    [simple] = l40.sets.values()
    assert ll.comparison is not None and ll.comparison.verdict is Verdict.FASTER
    assert simple.comparison is not None and simple.comparison.verdict is Verdict.FASTER
    assert 1.09 < simple.comparison.ratio < 1.11
    # Mixed into one verdict, the L40S set would be judged against the H100 baselines too.
    mixed = judge(two_types(), metric=Metric.OUTPUT).sets[simple.key].comparison
    assert mixed is not None and mixed.verdict is not Verdict.FASTER


def test_records_without_a_host_type_join_the_only_type():
    old = trial_record(0, "baseline", [100.0, 100.2, 99.9])
    new = trial_record(1, "search", [104.0, 104.2, 103.9], env=LL, host_type=H100)
    assert host_type_groups([old, new]) == {H100: [old, new]}
    third = trial_record(2, "baseline", [50.0, 50.1, 49.9], host_type=L40)
    assert list(host_type_groups([old, new, third])) == ["", H100, L40]


def test_report_has_one_verdict_and_one_section_per_type(tmp_path: Path):
    night, verdict = report.write_outputs(two_types(), INFO, "multi", tmp_path, min_effect=0.01)
    paragraphs = [p.verdict for p in night.parts]
    assert len(paragraphs) == 2 and verdict == "\n\n".join(paragraphs)
    # each type's decision first, then its reasons and paragraph
    assert paragraphs[0].startswith(f"Host type 1 ({H100}): {night.parts[0].decision.line}.\n")
    assert paragraphs[1].startswith(f"Host type 2 ({L40}): {night.parts[1].decision.line}.\n")
    assert "\n\nBaseline: 100.0" in paragraphs[0] and "\n\nBaseline: 50.0" in paragraphs[1]
    assert "NCCL_PROTO=Simple" not in paragraphs[0] and "NCCL_PROTO=LL " not in paragraphs[1]
    md = (tmp_path / "report.md").read_text()
    assert f"## Host type 1: `{H100}`" in md and f"## Host type 2: `{L40}`" in md
    assert "no verdict compares across types" in md
    assert "(host-type-1/trials_vs_baseline.png)" in md and (tmp_path / "host-type-2" / "history.png").is_file()
    assert not (tmp_path / "trials_vs_baseline.png").exists()
    csv = read_trials_csv(tmp_path / "trials.csv")
    assert list(csv["trial"]) == [0, 1, 2, 3, 4, 5]
    assert list(csv["host_type"]) == [H100, L40, H100, L40, H100, L40]
    assert csv.loc[3, "vs_baseline"] > 1.09  # against the L40S baseline
    out = io.StringIO()
    report.print_results(night, verdict, INFO, Console(file=out, width=200))
    text = out.getvalue()
    assert f"Host type 1: {H100}" in text and f"Host type 2: {L40}" in text
    assert text.index("Host type 2") > text.index("NCCL_PROTO=LL")


def test_one_type_reports_as_before(tmp_path: Path):
    records = [r for r in two_types() if r.host_type == H100]
    _, verdict = report.write_outputs(records, INFO, "one", tmp_path, min_effect=0.01)
    assert verdict.split("\n\n")[1].startswith("Baseline: 100.0") and "Host type" not in verdict
    assert verdict.startswith("Not decided yet: NCCL_PROTO=LL looked best at +5.1 %")
    assert (tmp_path / "trials_vs_baseline.png").is_file() and "## Host type" not in (tmp_path / "report.md").read_text()
