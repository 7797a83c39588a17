"""The soak in the night's clock (tuner.planning.clock, limits): each confirmation's soak is
counted in its time and kept by the first stage before a deadline; the final baseline's soak only
where the time is left; a launch's measured probe and wall time are read without its soak."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from tests.helpers import trial_record
from tests.unit.planning.test_clock import _cfg, _per
from tuner.planning import Budget, NightClock, NightLimits, Step, relaunch_time

CHECKS = (Step.CONFIRM, Step.CONFIRM, Step.FINAL_BASELINE)
NOON = datetime(2026, 3, 2, 12, 0).timestamp()


def _soaked(seconds: float, soak_s: float):
    return replace(_per(seconds), soak_s=soak_s)


def test_the_soak_comes_from_the_config_and_is_taken_out_of_a_launchs_measured_phases(tmp_path):
    cfg = _cfg(tmp_path, "expected_load_s = 5", "expected_tok_s = 1000")
    soaked = replace(cfg, sweep=cfg.sweep.model_copy(update={"soak_minutes": 10.0}))
    night = [trial_record(0, "baseline", [70.0], load_s=30.0, probe_s=8.0, teardown_s=1.0, wall_s=40.0),
             trial_record(1, "confirm", [70.0], load_s=30.0, probe_s=608.0, teardown_s=1.0, wall_s=640.0, soak_s=600.0)]
    per = relaunch_time(soaked, night)
    assert per.soak_s == 600.0
    assert per.probe.seconds == pytest.approx(8.0) and per.longest_s == pytest.approx(40.0)
    assert "A confirmation adds its soak, 10.0 min" in per.words()
    assert relaunch_time(cfg, night).soak_s == 0.0 and "soak" not in relaunch_time(cfg, night).words()


def test_without_a_deadline_every_check_carries_its_soak():
    clock = NightClock(_soaked(100.0, 600.0), NOON, stage1=9, checks=CHECKS, first_free=True)
    assert clock.fit() == (9, CHECKS, ()) and clock.soak_s == 1800.0
    assert clock.duration_s == 12 * 100.0 + 1800.0
    assert "2 confirmations, the final baseline with up to 3 soaks of 10.0 min (30.0 min)" in clock.lines()[1]


def test_a_deadline_keeps_the_confirmations_soaks_and_drops_the_baselines_first():
    per = _soaked(100.0, 600.0)  # each relaunch guarded at 120 s
    # 9 relaunches and 3 checks without soaks end by 1200 s; the 2 confirmations' soaks need 1200 s more
    clock = NightClock(per, NOON, stage1=9, checks=CHECKS, deadline=NOON + 2050.0, first_free=True)
    fit = clock.fit()
    assert fit.checks == CHECKS and not fit.dropped
    assert fit.stage1 < 9  # the first stage stops early for the confirmations' soaks
    assert clock.soak_s == 1200.0  # the final baseline's soak did not fit: it is made without
    roomy = NightClock(per, NOON, stage1=2, checks=CHECKS, deadline=NOON + 5000.0, first_free=True)
    assert roomy.fit() == (2, CHECKS, ()) and roomy.soak_s == 1800.0


def test_a_confirmation_that_cannot_keep_its_soak_does_not_start():
    limits = NightLimits(Budget(6), deadline=NOON + 1000.0, deadline_words="--until 12:16")
    spent = Budget(6).screening  # the first stage is over
    assert limits.allows(spent, NOON, 120.0, step=Step.CONFIRM)[0]
    ok, why = limits.allows(spent, NOON, 120.0, step=Step.CONFIRM, soak_s=900.0)
    assert not ok and "15.0 min of soak would not fit" in why
    assert limits.allows(spent, NOON, 120.0, step=Step.FINAL_BASELINE, made=len(Budget(6).steps) - 1, soak_s=900.0)[0]
