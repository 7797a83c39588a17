"""A set whose backend choice the server did not apply gets no speed verdict, through the same
judge() and "not applied" path as an NCCL variable NCCL did not echo."""

from __future__ import annotations

from tests.helpers import trial_record
from tuner.judging import cannot_act_on, judge
from tuner.record import Metric, StudyInfo, Verdict
from tuner.report.frame import trials_frame
from tuner.report.text import verdict_paragraph

FI = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}
WHY = 'vllm logged "FlashInfer All Reduce is disabled because flashinfer is not available"'
OFF = ["--disable-custom-all-reduce"]


def night(applied: bool | None) -> list:
    """A baseline, a backend set 14 % faster (its proof ``applied``), an NCCL set, the baseline again."""
    return [trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6]),
            trial_record(1, "preset", [80.2, 80.9, 81.4, 80.5], env=FI, preset="vllm-flashinfer",
                         backend_choice="vllm-flashinfer", backend_applied=applied,
                         backend_reason=WHY if applied is False else 'vllm logged "Using [\'FLASHINFER\']"'),
            trial_record(2, "preset", [70.4, 71.0, 70.1, 70.8], flags=OFF, preset="off",
                         backend_choice="vllm-custom-allreduce-off", backend_applied=True,
                         backend_reason='vllm logged "disable_custom_all_reduce=True,"'),
            trial_record(3, "baseline", [70.5, 71.0, 70.2, 70.9], recheck=True)]


def test_a_backend_choice_not_applied_gets_no_speed_verdict_and_is_never_a_finalist():
    j = judge(night(False), metric=Metric.OUTPUT)
    s = next(s for s in j.sets.values() if s.env == FI)
    assert s.verdict is Verdict.NOT_APPLIED and s.not_applied == {"vllm-flashinfer": WHY}
    assert s.backend_choice == "vllm-flashinfer" and s.key not in j.finalists and j.winner is None
    applied = judge(night(True), metric=Metric.OUTPUT)
    assert applied.finalists[0] == s.key  # the same launches, proven: judged on speed


def test_the_row_and_the_paragraph_say_why():
    records = night(False)
    j = judge(records, metric=Metric.OUTPUT)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=j)
    row = df[df["trial"] == 1].iloc[0]
    assert row["verdict"] is Verdict.NOT_APPLIED
    assert row["verdict_note"] == f"not applied: vllm-flashinfer: {WHY}"
    text = verdict_paragraph(df, StudyInfo(), judgement=j)
    assert (f"No speed verdict for trial 1 (VLLM_ALLREDUCE_USE_FLASHINFER=1): the server did not apply "
            f"vllm-flashinfer: {WHY}.") in text
    assert "NCCL did not apply" not in text


def test_an_nccl_variable_not_echoed_in_a_backend_set_is_named_beside_it():
    records = night(False)
    records[1].env = {**FI, "NCCL_PROTO": "LL"}
    records[1].nccl_not_applied = {"NCCL_PROTO": "echoed by no rank"}
    j = judge(records, metric=Metric.OUTPUT)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=j)
    text = verdict_paragraph(df, StudyInfo(), judgement=j)
    assert f"NCCL did not apply NCCL_PROTO; the server did not apply vllm-flashinfer: {WHY}" in text


def test_a_backend_set_is_not_marked_unable_to_act_where_nccl_is_off_the_decode_path():
    records = night(True)
    info = StudyInfo(allreduce_nccl_on_decode_path=False, allreduce_backend="custom_allreduce",
                     allreduce_backend_reason="vLLM custom allreduce")
    assert cannot_act_on(info, records) == {}  # the FlashInfer variable and the flag both move the allreduce
