"""tuner.report.text: the verdict paragraph, the console table (whole rows when piped), markdown."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pandas as pd
from rich.console import Console

from tests.helpers import sample_records, trial_record
from tuner.judging.judge import judge
from tuner.plaintext import plain_table
from tuner.record import Metric, StudyInfo
from tuner.report.build import night_report
from tuner.report.frame import judged_trials, trials_frame
from tuner.report.markdown import report_markdown, section_lines, table_markdown
from tuner.report.model import NightReport, table_block
from tuner.report.text import (
    CONSOLE_COLUMNS,
    confirmed_row,
    console_table,
    export_lines,
    levels_section,
    print_results,
    verdict_paragraph,
)

INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--port", "8000"], storage_hint="sqlite:///s.db")


LL8 = {"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"}


def confirmed_night() -> list:
    """sample_records plus the winner (trial 3's set) relaunched to confirm, then the baseline."""
    return [*sample_records(), trial_record(11, "confirm", [80.4, 80.8, 81.0, 80.6], env=LL8),
            trial_record(12, "baseline", [70.8, 71.6, 70.5, 71.2], recheck=True)]


def report(records, info=INFO, min_effect=0.01) -> tuple[pd.DataFrame, str]:
    """The frame and the verdict paragraph, as write_outputs makes them."""
    relaunched = [r for r in records if r.kind.relaunched]
    j = judge(relaunched, metric=Metric.OUTPUT, min_effect=min_effect)
    df = trials_frame(relaunched, metric=Metric.OUTPUT, min_effect=min_effect, judgement=j)
    return df, verdict_paragraph(df, info, judgement=j)


def night(records, info=INFO, min_effect=0.01) -> NightReport:
    """The night's report as write_outputs builds it, its figures left undrawn."""
    return night_report(records, info, "night", Path("unused"), min_effect=min_effect, figures=False)


BASE = trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6])
BASE2 = trial_record(9, "baseline", [70.5, 71.0, 70.2, 70.9], recheck=True)


def test_console_table_columns_and_order():
    table = console_table(*judged_trials(confirmed_night(), metric=Metric.OUTPUT, min_effect=0.01), metric=Metric.OUTPUT)
    assert tuple(c.header for c in table.columns) == CONSOLE_COLUMNS
    trials = [int(c.plain) for c in table.columns[0].cells]
    # the judgement's order, as the forest plot: the baseline's launches, the sets best first (trial 6 measured
    # 70.5 tok/s but a lower ratio than trial 1's 70.2), then the rows with no ratio, failed last
    assert trials == [0, 8, 12, 3, 11, 1, 6, 4, 5, 9, 2, 7]
    verdicts = [c.plain for c in table.columns[6].cells]
    assert verdicts[3] == "faster (2 launches)" and verdicts[4] == "faster (confirmed on the new launches alone)"
    assert verdicts[10].startswith("exited with code 1: NCCL WARN [LL128]")  # cause, markup left alone


def test_piped_rows_are_whole_lines_on_a_narrow_console():
    out = io.StringIO()
    console = Console(file=out, width=40)
    assert not console.is_terminal
    n = night(confirmed_night())
    print_results(n, n.verdict, INFO, console)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["trial", "kind", "status", "tok/s", "vs", "base", "95%", "CI", "verdict", "env"]
    rows = lines[1:13]
    assert [int(r.split()[0]) for r in rows] == [0, 8, 12, 3, 11, 1, 6, 4, 5, 9, 2, 7]
    deployment = next(r for r in rows if r.split()[0] == "1")
    assert deployment.endswith("CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_ALGO=Ring NCCL_BUFFSIZE=16777216 "
                               "NCCL_MAX_NCHANNELS=16 NCCL_PROTO=LL")
    assert "no significant difference" in deployment
    # the decision first, its reasons, then the longer paragraph
    assert lines[13] == "" and lines[14] == ("Use NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL: +13.7 % (+10.1..+17.6), "
                                             "confirmed on fresh launches.")
    assert lines[15].startswith("It held on a fresh relaunch of the set and of the baseline (+13.6 % on those alone).")
    assert lines[16] == "" and lines[17].startswith("Baseline: 70.9 single-stream output tok/s") and len(lines[17]) > 200
    assert lines[19] == "Use it:"
    assert lines[20] == "  export NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8"
    assert lines[-1] == "  env NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8 vllm serve /models/m --port 8000"
    assert all(line == line.rstrip() for line in lines)


def test_no_export_lines_without_a_confirmed_winner():
    for records in (sample_records(), [BASE, trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env=LL8), BASE2]):
        n = night(records)
        out = io.StringIO()
        print_results(n, n.verdict, INFO, Console(file=out, width=40))
        assert "Use it" not in out.getvalue()
    _, paragraph = report([BASE, trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env=LL8), BASE2])
    assert "No set beat the baseline by more than the noise" in paragraph
    assert "bottleneck" not in paragraph  # a claim no measurement here supports


def test_verdict_paragraph_for_a_confirmed_winner():
    _, text = report(confirmed_night())
    assert text.startswith("Baseline: 70.9 single-stream output tok/s (robust level of 12 runs over 3 launches, drift ")
    assert "each set is compared with the baseline interpolated at its own launch" in text
    assert "launch-to-launch noise" in text
    assert "Best set: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL (trial 3), +13." in text
    assert "the best of the 4 sets tried" in text and "one-sided 98 % bound, corrected for up to 2 finalists" in text
    assert "the gain held on a fresh relaunch of the set and of the baseline" in text and text.count("Use it.") == 1
    assert "Slower: NCCL_PROTO=Simple (trial 4, -40." in text and "%, one launch)" in text
    assert "the smallest gain this night could recommend (80 % power) is about " in text
    assert "2 of 7 tuned relaunches failed (see status and cause)." in text
    assert "interrupted" not in text  # trial 5 was retried by trial 6


def test_a_winner_not_yet_confirmed_is_not_recommended():
    _, text = report(sample_records())
    assert "not yet confirmed by a fresh relaunch" in text and "Use it" not in text
    assert "; do not adopt it before it is (run the same command again)." in text  # a store with no reason


def test_a_confirmation_not_made_says_why_and_what_the_next_run_does_first():
    why = ("--until 07:00: the confirmation (~44 min) and the 1 reserved check after it (~44 min: the final "
           "baseline) would not fit")
    then = "the next run of the same command makes the confirmation and the final baseline after it first (2 relaunches, about 1 h 13 min)"
    _, text = report(sample_records(), StudyInfo(confirm_skipped=why, next_run=then))
    assert (f"not yet confirmed by a fresh relaunch of the set and of the baseline ({why}); do not adopt it before "
            f"it is: {then}.") in text
    _, failed = report(sample_records(), StudyInfo(final_baseline_skipped="--timeout: the final baseline (~40 s) would "
                                                                          "not fit"))
    assert "baseline (its fresh baseline, the final baseline re-measure, was not made); do not adopt" in failed


def test_a_winner_that_fails_confirmation():
    records = [*sample_records(), trial_record(11, "confirm", [70.4, 70.8, 71.0, 70.6], env=LL8),
               trial_record(12, "baseline", [70.8, 71.6, 70.5, 71.2], recheck=True)]
    df, text = report(records)
    assert "Best set: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL (trial 3" in text and "it failed confirmation" in text
    assert "Use it" not in text
    assert df.set_index("trial").loc[11, "verdict"] == "failed confirmation"
    assert df.set_index("trial").loc[3, "verdict"] == "failed confirmation"


def test_every_significant_set_is_named():
    fast_a = trial_record(1, "preset", [80.2, 80.9, 81.4, 80.5], env={"NCCL_PROTO": "LL"})
    fast_b = trial_record(2, "preset", [82.2, 82.9, 83.4, 82.5], env={"NCCL_ALGO": "Ring"})
    noisy = trial_record(3, "preset", [60.0, 95.0, 70.0, 99.0], env={"NCCL_ALGO": "Tree"})
    _, text = report([BASE, fast_a, fast_b, noisy, BASE2])
    assert "NCCL_PROTO=LL (trial 1" in text and "NCCL_ALGO=Ring (trial 2" in text


def test_verdict_paragraph_when_every_set_is_slower():
    _, text = report([BASE, trial_record(1, "preset", [42.1, 42.6, 41.9, 42.4], env={"NCCL_PROTO": "Simple"}), BASE2])
    assert "Every tuned set was slower than the baseline: NCCL_PROTO=Simple (trial 1, -40." in text
    _, text = report([BASE, trial_record(1, "preset", [42.1, 42.6, 41.9, 42.4], env={"NCCL_PROTO": "Simple"}),
                      trial_record(2, "preset", [70.0, 70.9, 69.5, 70.4], env=LL8), BASE2])
    assert "Every tuned set" not in text and "the largest loss was NCCL_PROTO=Simple (trial 1), -40." in text


def test_faster_below_the_minimum_effect_is_said_so():
    records = [trial_record(0, "baseline", [70.0, 70.1, 69.9, 70.0]),
               trial_record(1, "preset", [77.4, 77.5, 77.3, 77.4], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "baseline", [70.3, 70.1, 70.2, 70.0], recheck=True)]
    df, text = report(records, StudyInfo(min_effect=0.2), min_effect=0.2)
    story = judged_trials(records, metric=Metric.OUTPUT, min_effect=0.2)[1]
    assert "faster, below the 20 % that matters" in plain_table(console_table(df, story, metric=Metric.OUTPUT,
                                                                              min_effect=0.2))
    assert "by less than the 20 % that matters: NCCL_PROTO=LL (trial 1" in text


def test_verdict_paragraph_edges():
    assert report([])[1].startswith("The untuned baseline has no successful measurement")
    assert "Only the baseline was measured" in report([BASE])[1]
    _, failed = report([BASE, trial_record(1, "preset", status="crashed", env={"NCCL_PROTO": "LL128"})])
    assert "No tuned set could be judged on speed (1 of 1 failed): keep the defaults." in failed
    met = StudyInfo(target=60.0, target_met_untuned=True)
    assert "already met by the untuned server" in report([BASE], met)[1]
    _, text = report([BASE, trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env={"NCCL_PROTO": "LL"}),
                      trial_record(2, "search", status="interrupted", env={"NCCL_ALGO": "Tree"})],
                     StudyInfo(target=90.0))
    assert "1 interrupted relaunch not re-measured yet" in text and "1 relaunches" not in text
    assert text.endswith("Target 90 tok/s: not reached within the budget.")
    guessed = trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env={"NCCL_PROTO": "LL"}, tokens_counted=True)
    assert "lower bound" in report([BASE, guessed])[1]
    skipped = StudyInfo(final_baseline_skipped="--timeout: another trial (~40 s) would not fit")
    assert "final baseline re-measure (the drift check) was skipped: --timeout" in report([BASE, guessed], skipped)[1]


def test_export_lines():
    lines = export_lines({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, ["vllm", "serve", "m", "--tensor-parallel-size", "4"])
    assert lines[0] == "export NCCL_PROTO=LL NCCL_ALGO=Ring"
    assert "--tensor-parallel-size 4" in lines[1] and "--tp 4" in lines[2]
    assert lines[-1] == "env NCCL_PROTO=LL NCCL_ALGO=Ring vllm serve m --tensor-parallel-size 4"
    assert "--tensor-parallel-size TP" in export_lines({"NCCL_PROTO": "LL"}, ["python", "-m", "sglang.x"])[1]
    assert export_lines({}) == ["# the untuned baseline: unset every NCCL_* variable"]


def test_export_lines_give_a_per_collective_value_as_measured():
    """``AllReduce:LL`` pastes as it is; a ``;`` of a multi-entry value is quoted for the shell
    (the set measured, not NCCL's global ``LL``)."""
    lines = export_lines({"NCCL_PROTO": "AllReduce:LL"}, ["vllm", "serve", "m"])
    assert lines[0] == "export NCCL_PROTO=AllReduce:LL" and lines[-1] == "env NCCL_PROTO=AllReduce:LL vllm serve m"
    lines = export_lines({"NCCL_ALGO": "allreduce:ring", "NCCL_PROTO": "AllReduce:LL;Broadcast:Simple"}, ["vllm", "serve"])
    assert lines[0] == "export NCCL_ALGO=allreduce:ring NCCL_PROTO='AllReduce:LL;Broadcast:Simple'"
    assert all("NCCL_PROTO='AllReduce:LL;Broadcast:Simple'" in line for line in lines)


def test_export_lines_name_paths_here_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(tmp_path / ".venv" / "bin" / "python"), "-m", "tuner.sim", "--conf", str(tmp_path / "c.toml"),
            "/etc/hosts"]
    assert export_lines({"NCCL_PROTO": "LL"}, argv)[-1] == (
        "env NCCL_PROTO=LL .venv/bin/python -m tuner.sim --conf c.toml /etc/hosts")  # outside here: kept whole
    assert export_lines({"NCCL_PROTO": "LL"}, [str(tmp_path / "serve")])[-1] == "env NCCL_PROTO=LL ./serve"


def test_markdown(tmp_path):
    table = table_markdown(table_block(pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x|y", None]})))
    assert table == "| a | b |\n|---|---|\n| 1.235 | x\\|y |\n|  |  |\n"
    n = night_report(confirmed_night(), INFO, "night", tmp_path, min_effect=0.01)
    md = report_markdown(n)
    d = n.parts[0].decision
    assert md.startswith(f"# nccl-tune report: night\n\n## Verdict\n\n**{d.line}.**\n\n{' '.join(d.reasons)}\n\n"
                         f"{n.parts[0].details}\n")
    assert n.verdict == f"{d.line}.\n{' '.join(d.reasons)}\n\n{n.parts[0].details}"
    assert "## Use the best set" in md and "export NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8" in md
    assert "![trials vs baseline](trials_vs_baseline.png)" in md and "![history](history.png)" in md
    assert "[![concurrency](concurrency.png)](concurrency.svg)" in md and "## Failed trials" in md
    words = report_markdown(night(confirmed_night()))  # no figure drawn: no figure's section, the table still
    assert "## History" not in words and "## Trials vs baseline\n\n| trial |" in words
    assert "| 3 | preset | ok | 80.7 | 1.137 |" in md
    assert "| 7 | hung | no token for 120 s | NCCL_MAX_NCHANNELS=2 |" in md
    assert md.rstrip().endswith("`optuna-dashboard sqlite:///s.db`")
    assert report_markdown(night([])) == "# nccl-tune report: night\n\nNo trial recorded yet.\n"


def test_a_narrow_terminal_folds_the_set_but_never_cuts_it():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    n = night(confirmed_night())
    print_results(n, n.verdict, INFO, console)
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()[:20]) <= 100
    assert "NCCL_BUFFSIZE=167772" in text  # folded over two lines, every character kept


def test_the_confirmed_set_is_the_one_recommended_even_if_another_creeps_above_it():
    a, b = {"NCCL_PROTO": "LL"}, {"NCCL_ALGO": "Ring"}
    records = [trial_record(0, "baseline", [70.0, 70.2, 69.8, 70.1]),
               trial_record(1, "preset", [76.0, 76.3, 75.8, 76.1], env=a),
               trial_record(2, "preset", [76.2, 76.4, 76.0, 76.3], env=b),
               trial_record(3, "confirm", [75.4, 75.6, 75.2, 75.5], env=b),
               trial_record(4, "baseline", [70.3, 70.1, 70.2, 70.0], recheck=True)]
    n = night(records)
    text = n.verdict
    assert "Best set: NCCL_ALGO=Ring (trial 2)" in text and "Use it." in text
    assert "not confirmed: NCCL_PROTO=LL (trial 1" in text
    out = io.StringIO()
    print_results(n, text, INFO, Console(file=out, width=40))
    assert "  export NCCL_ALGO=Ring" in out.getvalue()


def test_the_space_files_note_stands_beside_the_set_to_use():
    info = dataclasses.replace(INFO, space_notes={"NCCL_PROTO": "RISKY on this box: read it first.",
                                                  "NCCL_ALGO": "not in the winner"})
    out = io.StringIO()
    n = night(confirmed_night(), info)
    print_results(n, n.verdict, info, Console(file=out, width=40))
    lines = out.getvalue().splitlines()
    assert lines[-1] == "  # NCCL_PROTO (search space note): RISKY on this box: read it first."
    assert "not in the winner" not in out.getvalue()
    md = report_markdown(n)
    assert "# NCCL_PROTO (search space note): RISKY on this box" in md.split("Use the best set")[1]


def test_a_dip_inside_the_noise_is_the_lowest_not_a_loss():
    _, paragraph = report([BASE, trial_record(1, "preset", [70.6, 70.9, 70.5, 70.8], env=LL8),
                           trial_record(2, "preset", [70.2, 70.5, 70.0, 70.4], env={"NCCL_PROTO": "LL"}), BASE2])
    assert "No set beat the baseline by more than the noise" in paragraph
    assert "the lowest, NCCL_PROTO=LL (trial 2), measured" in paragraph and "also within the noise" in paragraph
    assert "loss" not in paragraph


def test_an_interrupted_baseline_is_re_measured_by_a_later_baseline():
    from tuner.report.text import _not_retried

    df = pd.DataFrame({"trial": [0, 1, 2], "kind": ["baseline", "baseline", "preset"],
                       "status": ["interrupted", "ok", "interrupted"],
                       "retry_of_trial": [None, None, None], "retried_by_trial": [None, None, None]})
    assert _not_retried(df) == 1  # the preset still waits for its retry; the baseline was measured again


def test_per_level_section_and_the_flip_in_the_verdict():
    from tests.unit.judging.test_levels import night as levels_night
    from tuner.judging import judge_levels

    records = levels_night()
    lj = judge_levels(records, metric=Metric.OUTPUT)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=lj.headline)
    verdict = verdict_paragraph(df, INFO, judgement=lj.headline, levels=lj)
    flip = ("NCCL_P2P_DISABLE=1: faster at C=1 (+12.3 %), slower at C=8 (-15.1 %): it flips with concurrency, "
            "so judge it at the workload's own level (probe.judge_concurrency).")
    assert flip in verdict
    section = section_lines(levels_section(lj))
    assert section[0] == "## Per concurrency level"
    assert "verdicts at 97.5 % (95 % over the 2 levels, Bonferroni)" in section[2]
    assert '"Use it" rests on C=1 (probe.judge_concurrency).' in section[2]
    table = section[4].splitlines()
    assert table[0] == "| set | C=1 | C=8 |"
    assert table[2] == "| baseline (tok/s) | 70.5 | 400.5 |"
    assert table[3] == "| NCCL_P2P_DISABLE=1 | +12.3 % faster | -15.1 % slower |"
    assert table[4] == "| NCCL_PROTO=LL | -0.1 % no significant difference | -0.1 % no significant difference |"
    assert section[-2] == f"- {flip}"
    md = report_markdown(night(records))
    assert md.index("## Trials vs baseline") < md.index("## Per concurrency level")  # after the per-set table
    assert "\n".join(section) in md
    # a single-stream night: no section, no sentence
    single = judge_levels(records, metric=Metric.OUTPUT, levels=())
    assert levels_section(single) is None and "flips" not in verdict_paragraph(df, INFO, judgement=single.headline,
                                                                              levels=single)


def test_the_verdict_names_the_level_it_rests_on():
    from tests.unit.judging.test_levels import RING, night
    from tuner.judging import judge_levels

    records = night(confirm=RING)
    lj = judge_levels(records, metric=Metric.OUTPUT, judged_level=8)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=lj.judgements[1])
    assert confirmed_row(df, lj.judgements[1]) is None  # at one stream the confirmation did not hold
    verdict = verdict_paragraph(df, INFO, judgement=lj.headline, levels=lj)
    assert verdict.startswith("Baseline: 400.5 aggregate output tok/s at C=8 (robust level of 2 launches, one value "
                              "each, drift 0.3 %, fitted +0.2 % over the night")
    assert "a row's tok/s is its single-stream median)." in verdict
    assert "Best set: NCCL_ALGO=Ring (trial 3), +20.0 %" in verdict and "Use it." in verdict
    assert 'The headline and "Use it" rest on C=8 (probe.judge_concurrency)' in verdict
    assert "With one value per launch" in verdict
    assert confirmed_row(df, lj.headline)["env"] == RING  # the set "use it" rests on, at C=8
