"""A trial record's typed parts (concurrency levels, the host) are stored as the JSON objects of
their fields, so Optuna's user attributes and trials.csv hold what they held as dicts."""

from __future__ import annotations

import json

import pytest

from tuner.record import HostRecord, Kind, LevelResult, Metric, Status, TrialRecord, from_user_attrs, to_user_attrs
from tuner.record.trial import to_csv_row

LEVEL = LevelResult(concurrency=2, ok=2, total=2, wall_s=1.5, aggregate_tok_s=131.0, latency_avg_s=1.4,
                    latency_p50_s=1.4, latency_p99_s=1.5, completion_tokens=192, ttft_avg_s=0.05)
HOST = HostRecord(name="vm", gpu="no NVIDIA GPU (NVML not available)", gpu_count=0, nccl="2.27.3")


def _record(**fields) -> TrialRecord:
    return TrialRecord(trial=3, kind=Kind.PRESET, status=Status.OK, output_tok_s=70.0, output_tok_s_runs=[70.0, 71.0],
                       decode_tok_s=72.0, decode_tok_s_runs=[72.0, 73.0], **fields)


def test_typed_parts_round_trip_through_the_user_attributes():
    rec = _record(concurrency=[LEVEL], host=HOST)
    attrs = json.loads(json.dumps(to_user_attrs(rec)))
    assert attrs["concurrency"] == [LEVEL.to_json()] and attrs["host"] == HOST.to_json()
    assert from_user_attrs(3, attrs) == rec


def test_trials_csv_cells_are_the_json_of_the_fields():
    row = to_csv_row(_record(concurrency=[LEVEL], host=HOST))
    assert json.loads(row["concurrency"]) == [LEVEL.to_json()]
    assert row["host"] == ('{"name": "vm", "gpu": "no NVIDIA GPU (NVML not available)", "gpu_count": 0, '
                           '"driver": "", "nccl": "2.27.3", "server": ""}')
    assert to_csv_row(_record())["host"] == "{}" and to_csv_row(_record())["concurrency"] == "[]"


def test_a_record_before_hosts_has_none():
    attrs = to_user_attrs(_record())
    assert attrs["host"] == {} and from_user_attrs(3, attrs).host is None


def test_levels_read_with_unknown_and_missing_keys():
    lv = LevelResult.from_json({"concurrency": 4, "aggregate_tok_s": 236.0, "later_field": 1})
    assert lv == LevelResult(concurrency=4, ok=0, total=0, aggregate_tok_s=236.0)
    with pytest.raises(KeyError):
        LevelResult.from_json({"aggregate_tok_s": 1.0})
    assert _record(concurrency=[lv, LEVEL]).concurrency_tok_s() == {4: 236.0, 2: 131.0}


def test_median_and_runs_of_the_metric():
    rec = _record()
    assert rec.median(Metric.OUTPUT) == 70.0 and rec.runs(Metric.OUTPUT) == [70.0, 71.0]
    assert rec.median(Metric.DECODE) == 72.0 and rec.runs(Metric.DECODE) == [72.0, 73.0]
