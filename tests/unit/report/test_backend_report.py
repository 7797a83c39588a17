"""The report says which backend each row ran, and "Use it" gives a set's server flags as well
as its variables, a set of flags alone included."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from tests.helpers import trial_record
from tuner.judging import judge
from tuner.record import Metric, StudyInfo
from tuner.report.build import night_report
from tuner.report.frame import read_trials_csv, trials_frame, write_trials_csv
from tuner.report.markdown import report_markdown
from tuner.report.story import story_of
from tuner.report.text import export_lines, print_results, summary_table, verdict_paragraph

OFF = ["--disable-custom-all-reduce"]
PROOF = {"backend_choice": "vllm-custom-allreduce-off", "backend_applied": True,
         "backend_reason": 'vllm logged "disable_custom_all_reduce=True,"', "allreduce_backend": "nccl"}
INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--tensor-parallel-size", "8"],
                 storage_hint="sqlite:///s.db")


def confirmed_flag_night() -> list:
    """The baseline (custom allreduce), the flag-only set 14 % faster, its confirmation, the baseline again."""
    base = {"allreduce_backend": "custom_allreduce"}
    return [trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6], **base),
            trial_record(1, "preset", [80.2, 80.9, 81.4, 80.5], flags=OFF, preset="vllm-custom-allreduce-off", **PROOF),
            trial_record(2, "preset", [42.1, 42.6, 41.9, 42.4], env={"VLLM_ALLREDUCE_USE_FLASHINFER": "1"},
                         backend_choice="vllm-flashinfer", backend_applied=False, allreduce_backend="custom_allreduce",
                         backend_reason='vllm logged "FlashInfer All Reduce is disabled because flashinfer is not available"'),
            trial_record(3, "confirm", [80.4, 80.8, 81.0, 80.6], flags=OFF, **PROOF),
            trial_record(4, "baseline", [70.8, 71.6, 70.5, 71.2], recheck=True, **base)]


def frame_and_text(records):
    j = judge(records, metric=Metric.OUTPUT)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=j)
    return df, verdict_paragraph(df, INFO, judgement=j)


def test_the_table_names_the_backend_each_row_ran_and_the_flags_of_its_set():
    records = confirmed_flag_night()
    j = judge(records, metric=Metric.OUTPUT)
    table = summary_table(trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=j), story_of(j))
    assert list(table.columns)[-2:] == ["backend", "env"]
    by_trial = dict(zip(table["trial"], zip(table["backend"], table["env"], strict=True), strict=True))
    assert by_trial[0] == ("custom_allreduce", "(untuned)")
    assert by_trial[1] == ("nccl (vllm-custom-allreduce-off)", "--disable-custom-all-reduce")
    assert by_trial[2] == ("custom_allreduce (vllm-flashinfer not applied)", "VLLM_ALLREDUCE_USE_FLASHINFER=1")


def test_use_it_gives_the_server_flag_for_a_set_of_flags_alone(tmp_path):
    night = night_report(confirmed_flag_night(), INFO, "flag", tmp_path, min_effect=0.01)
    text = night.verdict
    assert "Best set: --disable-custom-all-reduce (trial 1)" in text and "Use it." in text
    out = io.StringIO()
    print_results(night, text, INFO, Console(file=out, width=200))
    printed = out.getvalue().split("Use it:\n", 1)[1].splitlines()
    assert printed == ["  vllm serve MODEL --tensor-parallel-size 8 --disable-custom-all-reduce",
                       "  vllm serve /models/m --tensor-parallel-size 8 --disable-custom-all-reduce"]
    md = report_markdown(night)
    block = md.split("## Use the best set\n\n```sh\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == [line.strip() for line in printed]


def test_export_lines_with_variables_and_flags():
    env = {"NCCL_PROTO": "LL"}
    assert export_lines(env, INFO.server_command, ["--disable-custom-all-reduce"]) == [
        "export NCCL_PROTO=LL",
        "NCCL_PROTO=LL vllm serve MODEL --tensor-parallel-size 8 --disable-custom-all-reduce",
        "env NCCL_PROTO=LL vllm serve /models/m --tensor-parallel-size 8 --disable-custom-all-reduce"]
    # a command that names neither server: both snippets, each with the flag
    lines = export_lines({}, ["./serve.sh", "--tp", "4"], ["--disable-custom-all-reduce"])
    assert lines == ["vllm serve MODEL --tensor-parallel-size 4 --disable-custom-all-reduce",
                     "python -m sglang.launch_server --model-path MODEL --tp 4 --disable-custom-all-reduce",
                     "./serve.sh --tp 4 --disable-custom-all-reduce"]
    assert export_lines(env, INFO.server_command)[0] == "export NCCL_PROTO=LL"  # no flags: as before
    assert export_lines({}, INFO.server_command) == ["# the untuned baseline: unset every NCCL_* variable"]
    # a command that passes a secret (a study stored before commands were redacted): *** on the line
    secret = ["env", "HF_TOKEN=hf_plain_secret", "./serve.sh", "--api-key", "sk-plain-secret"]
    assert export_lines(env, secret)[-1] == "env NCCL_PROTO=LL env 'HF_TOKEN=***' ./serve.sh --api-key '***'"


def test_trials_csv_keeps_the_proof(tmp_path):
    df, _ = frame_and_text(confirmed_flag_night())
    write_trials_csv(df, tmp_path / "trials.csv")
    back = read_trials_csv(tmp_path / "trials.csv")
    back = back[back["status"] != "skipped"]
    assert list(back["backend_choice"]) == ["", "vllm-custom-allreduce-off", "vllm-flashinfer",
                                            "vllm-custom-allreduce-off", ""]
    applied = back["backend_applied"].tolist()
    assert applied[1] is True and applied[2] is False and pd.isna(applied[0])
    assert back.loc[2, "backend_reason"].startswith('vllm logged "FlashInfer All Reduce is disabled')
