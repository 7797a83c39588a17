"""What a study stores about itself: the format version, the judged metric, the typed parts,
each written as plain JSON and read back as it was; a study stored without a version reads as
version 1 judged on output tok/s."""

from __future__ import annotations

import json

import pytest

from tuner.record import (
    FORMAT_VERSION,
    UNVERSIONED,
    Metric,
    RankedEntry,
    ScreenBound,
    ScreenExport,
    ScreenSummary,
    StudyInfo,
    TopologyRecord,
    TopSet,
    newer_than_known,
    stored_version,
    study_from_user_attrs,
    study_to_user_attrs,
)

SUMMARY = ScreenSummary(
    decode_bytes=14336, prefill_bytes=29360128, allreduces_per_token=122, size_reasons=["decode from [model]"],
    runs=6, ended="[screen] trials = 6 reached", untuned_us=41.2, untuned_drift=0.01, best_us=30.5,
    best_set={"NCCL_PROTO": "LL"}, top_sets=[TopSet({"NCCL_PROTO": "LL"}, "screen-1")],
    ranking=[RankedEntry('{"NCCL_PROTO":"LL"}', {"NCCL_PROTO": "LL"}, 30.5, 900.0)],
    bad_sets={'{"NCCL_ALGO":"Tree"}': "wrong values"}, noise_pct=1.75,
    bound=ScreenBound(share=0.66, max_gain_pct=190.0, best_gain_pct=20.1, baseline_tpot_s=0.0137,
                      baseline_tok_s=73.0, free_allreduce_tok_s=212.0, best_tok_s=87.7, reliable=True,
                      notes=["a note"], sentence="NCCL tuning can gain at most 190 %."),
    bound_note="", export=ScreenExport(csv="r/tuner_perf.csv", conf="r/nccl_tuner.conf", lines=["allreduce,..."],
                                       notes=[], compatibility="NCCL 2.27.3 loads tuner API v4."),
    notes=["only 1 set was as fast"])


def _stored(info: StudyInfo) -> dict:
    """The user attributes as a storage gives them back: through JSON."""
    return json.loads(json.dumps(study_to_user_attrs(info)))


def test_every_field_round_trips_through_json():
    info = StudyInfo(metric=Metric.DECODE, server_command=["vllm", "serve", "m"], min_effect=0.02,
                     nccl_learned=True, nccl_version="2.27.3",
                     topology=TopologyRecord(nranks=8, link="pcie", gpu_arch=90, cpu_vendor="AMD"), screen=SUMMARY)
    attrs = _stored(info)
    assert attrs["format_version"] == FORMAT_VERSION and attrs["metric"] == "decode_tok_s"
    assert attrs["topology"] == {"nranks": 8, "nnodes": 1, "link": "pcie", "has_nvls": False, "gpu_arch": 90,
                                 "collnet": False, "cpu_vendor": "AMD"}
    assert study_from_user_attrs(attrs) == info


def test_none_is_stored_as_version_1_stored_it():
    attrs = _stored(StudyInfo())
    assert attrs["topology"] == {} and attrs["screen"] == {}
    back = study_from_user_attrs(attrs)
    assert back.topology is None and back.screen is None


def test_a_study_without_a_version_is_version_1_judged_on_output():
    old = {"min_effect": 0.01, "topology": {"nranks": 8, "nnodes": 1, "link": "pcie", "has_nvls": False,
                                            "gpu_arch": None, "collnet": False}, "screen": {}, "gone": 1}
    info = study_from_user_attrs(old)
    assert info.format_version == UNVERSIONED == 1 and info.metric is Metric.OUTPUT
    assert info.topology == TopologyRecord(nranks=8, link="pcie") and info.screen is None


def test_a_screen_summary_of_any_age_reads():
    assert ScreenSummary.from_json(json.loads(json.dumps(SUMMARY.to_json()))) == SUMMARY
    partial = ScreenSummary.from_json({"decode_bytes": 14336, "runs": 3, "bound": {"reliable": True, "later": 1},
                                       "ranking": [{"key": "{}", "env": {}, "decode_us": 40.0}]})
    assert partial.bound == ScreenBound(reliable=True) and partial.ranking == [RankedEntry("{}", {}, 40.0)]
    assert partial.export == ScreenExport() and partial.top_sets == []


def test_stored_version_and_what_is_too_new():
    assert stored_version({}) == 1 and stored_version({"format_version": FORMAT_VERSION}) == FORMAT_VERSION
    assert not newer_than_known(FORMAT_VERSION) and newer_than_known(FORMAT_VERSION + 1)
    for bad in ("2", 0, True, 1.5):
        with pytest.raises(ValueError, match="format_version"):
            stored_version({"format_version": bad})


def test_an_unknown_metric_is_refused():
    with pytest.raises(ValueError):
        study_from_user_attrs({"format_version": FORMAT_VERSION, "metric": "ttft_s"})


def test_metric_words():
    assert (Metric.OUTPUT.words, Metric.DECODE.words) == ("output tok/s", "decode tok/s")
    assert Metric("decode_tok_s") is Metric.DECODE and Metric.DECODE.described.startswith("single-stream decode")
