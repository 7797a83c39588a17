"""Claims only where the night can make them: on one GPU, or with NCCL off the decode path
(--force), every set gets its measured ratio and no speed verdict, and the report says why."""

from __future__ import annotations

from tests.helpers import trial_record
from tuner.judging import cannot_act_on, judge
from tuner.record import Metric, StudyInfo, TopologyRecord, Verdict


def _night() -> list:
    return [trial_record(0, "baseline", [80.0, 80.5, 79.8, 80.2]),
            trial_record(1, "preset", [62.0, 62.4, 61.9, 62.2], env={"NCCL_PROTO": "Simple"}),
            trial_record(2, "preset", [90.0, 90.3, 89.8, 90.1], env={"NCCL_PROTO": "LL"}, flags=["--x"]),
            trial_record(3, "baseline", [80.1, 80.3, 79.9, 80.0], recheck=True)]


def test_no_nccl_on_the_decode_path_leaves_only_flag_sets_judged():
    records = _night()
    info = StudyInfo(allreduce_nccl_on_decode_path=False, allreduce_backend="custom_allreduce",
                     allreduce_backend_reason="vLLM custom allreduce")
    why = cannot_act_on(info, records)
    assert set(why) == {records[1].set_key}  # the set with a server flag may move the allreduce to NCCL
    j = judge(records, metric=Metric.OUTPUT, cannot_act=why)
    assert j.sets[records[1].set_key].verdict is Verdict.CANNOT_ACT  # -22 %, yet no "slower"
    assert j.sets[records[2].set_key].verdict is not Verdict.CANNOT_ACT
    assert records[1].set_key not in j.finalists


def test_one_gpu_means_no_set_can_act_and_an_ordinary_night_none_is_marked():
    records = _night()
    one = StudyInfo(topology=TopologyRecord(nranks=1, nnodes=1))
    assert set(cannot_act_on(one, records)) == {records[1].set_key, records[2].set_key}
    assert all("TP 1" in v for v in cannot_act_on(one, records).values())
    assert cannot_act_on(StudyInfo(allreduce_nccl_on_decode_path=True), records) == {}


def test_a_backend_set_is_judged_on_its_own_speed_and_nccl_sets_cannot_act_at_decode():
    records = [trial_record(0, "baseline", [80.0, 80.5, 79.8, 80.2]),
               trial_record(1, "preset", [62.0, 62.4, 61.9, 62.2], flags=["--disable-custom-all-reduce"]),
               trial_record(2, "preset", [90.0, 90.3, 89.8, 90.1], env={"NCCL_PROTO": "LL"}),
               trial_record(3, "preset", [81.0, 81.3, 80.8, 81.1], env={"NCCL_PROTO": "LL"},
                            flags=["--disable-custom-all-reduce"])]
    info = StudyInfo(allreduce_nccl_on_decode_path=False, allreduce_backend="custom_allreduce",
                     allreduce_server="vllm")
    why = cannot_act_on(info, records)
    assert set(why) == {records[2].set_key}  # NCCL carries decode in 1 and 3 (custom allreduce off)
    assert "cannot act at decode" in why[records[2].set_key]
