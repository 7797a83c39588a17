"""Stores an older nccl-tune wrote read, their metric included; a store of a newer format is
refused with a paragraph naming it; a sweep holds a study to its metric and upgrades an old one."""

from __future__ import annotations

import optuna
import pytest

from tests.helpers import old_store
from tuner.errors import ExitCode, NewerFormat, ResumeRefused
from tuner.record import FORMAT_VERSION, HostRecord, LevelResult, Metric, ScreenSummary, Status
from tuner.study.resume import check_metric
from tuner.study.storage import StudyStore, check_format, default_storage, open_study


def _open(results, study: str) -> tuple[StudyStore, str]:
    url = default_storage(old_store(study, results))
    return StudyStore(open_study(study, url, create=False), {}), url


def test_a_version_1_store_reads_typed(tmp_path):
    store, url = _open(tmp_path, "output")
    check_format(store, url, "output")
    info = store.info()
    assert info.format_version == 1 and info.metric is Metric.OUTPUT and info.min_effect == 0.01
    assert info.topology is not None and info.topology.nranks == 8 and info.topology.link == "pcie"
    records = store.records()
    assert [r.status for r in records] == [Status.OK] * len(records) and len(records) >= 4
    first = records[0]
    assert isinstance(first.host, HostRecord) and first.host.name and first.host.nccl == "2.27.3"
    assert [lv.concurrency for lv in first.concurrency] == [1, 2]
    assert all(isinstance(lv, LevelResult) and lv.aggregate_tok_s > 0 for lv in first.concurrency)


def test_a_version_1_decode_study_is_judged_on_decode(tmp_path):
    """Version 1 stored no metric; its sweep told the sampler its probe.metric's medians."""
    store, _ = _open(tmp_path, "decode")
    assert store.info().format_version == 1 and store.info().metric is Metric.DECODE


def test_a_version_1_screen_summary_reads(tmp_path):
    store, _ = _open(tmp_path, "screen")
    screen = store.info().screen
    assert isinstance(screen, ScreenSummary) and screen.decode_bytes == 14336 and screen.runs >= 6
    assert screen.bound is not None and screen.bound.sentence and screen.ranking and screen.export.conf


def test_a_newer_format_is_refused_naming_it(tmp_path):
    store, url = _open(tmp_path, "output")
    store.study.set_user_attr("format_version", FORMAT_VERSION + 1)
    with pytest.raises(NewerFormat) as err:
        check_format(store, url, "output")
    text = str(err.value)
    assert text.startswith(f"{url}, study 'output': key 'format_version' has value {FORMAT_VERSION + 1} (a newer ")
    assert f"this one writes version {FORMAT_VERSION}" in text and f"from 1 to {FORMAT_VERSION}, the ones" in text
    assert "\n" not in text and err.value.exit_code == ExitCode.BAD_INPUT


def test_a_resume_on_another_metric_is_refused(tmp_path):
    store, _ = _open(tmp_path, "decode")
    with pytest.raises(ResumeRefused) as err:
        check_metric(store, Metric.OUTPUT, "exp.toml", "decode")
    text = str(err.value)
    assert text.startswith("exp.toml: key 'probe.metric' has value 'output_tok_s'")
    assert '"decode_tok_s", the metric study \'decode\' is judged on' in text
    assert "format_version" not in store.study.user_attrs  # refused: nothing written


def test_a_resume_upgrades_a_version_1_study_in_place(tmp_path):
    store, url = _open(tmp_path, "decode")
    check_metric(store, Metric.DECODE, "exp.toml", "decode")
    again = StudyStore(open_study("decode", url, create=False), {})
    assert again.study.user_attrs["format_version"] == FORMAT_VERSION
    assert again.study.user_attrs["metric"] == "decode_tok_s" and again.info().metric is Metric.DECODE


def test_a_new_study_records_its_metric_and_version():
    store = StudyStore(optuna.create_study(direction="maximize"), {})
    check_metric(store, Metric.DECODE, "exp.toml", "s")
    assert store.study.user_attrs["format_version"] == FORMAT_VERSION and store.info().metric is Metric.DECODE
    # before the study holds any trial the metric may still change (nothing was judged or told yet)
    check_metric(store, Metric.OUTPUT, "exp.toml", "s")
    assert store.info().metric is Metric.OUTPUT
