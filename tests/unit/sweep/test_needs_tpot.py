"""Which launches make a bursty run again: those whose per-token times the night uses (the
decode metric, or the baseline's TPOT for the screen's bound). A burst under load on a busy host
once left a screened night without its bound."""

from __future__ import annotations

from types import SimpleNamespace

from tuner.record import Kind, Metric, TrialRecord
from tuner.sweep.trial import _needs_tpot


def _ctx(metric: Metric, screen: object | None) -> SimpleNamespace:
    return SimpleNamespace(cfg=SimpleNamespace(probe=SimpleNamespace(metric=metric), screen=screen))


def test_a_screened_nights_baseline_and_a_decode_nights_every_launch_redo_bursts():
    base, tuned = TrialRecord(trial=0, kind=Kind.BASELINE), TrialRecord(trial=1, kind=Kind.PRESET)
    screened = _ctx(Metric.OUTPUT, object())
    assert _needs_tpot(screened, base) and not _needs_tpot(screened, tuned)  # the bound needs the baseline's TPOT
    assert not _needs_tpot(_ctx(Metric.OUTPUT, None), base)  # output tok/s needs no per-token time
    assert _needs_tpot(_ctx(Metric.DECODE, None), tuned) and _needs_tpot(_ctx(Metric.DECODE, None), base)
