"""tuner.planning.reach: the budget that fits before a deadline (by the clock's own rule), the
presets a budget does not reach with the smallest --trials that does, and the time it leaves unused."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tuner.inputs.space import load_space
from tuner.nccl.types import NcclVersion
from tuner.planning import Budget, Facts, NightLimits, RelaunchTime, Rules, forecast
from tuner.planning.clock import Phase
from tuner.planning.reach import budget_that_fits, reach, reach_lines, unused_line

NOON = datetime(2026, 3, 2, 12, 0).timestamp()
HOUR = 3600.0
PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
[[presets]]
name = "ring"
env = { NCCL_ALGO = "Ring" }
[[presets]]
name = "channels-8"
env = { NCCL_MAX_NCHANNELS = "8" }
"""


def _per(seconds: float) -> RelaunchTime:
    return RelaunchTime(Phase(seconds, "test"), Phase(0.0, "test"), Phase(0.0, "test"), Phase(0.0, "test"),
                        longest_s=seconds)


def _space(tmp_path: Path):
    (tmp_path / "space.toml").write_text(PRESETS)
    space = load_space(tmp_path / "space.toml")
    return space, Rules({}, lambda: Facts(NcclVersion(2, 21, 5), None, None))


def _fits_whole(n: int, per: RelaunchTime, deadline: float) -> bool:
    clock = NightLimits(Budget(n), deadline).clock(per, NOON, 0, first_free=True)
    f = clock.fit()
    return f.stage1 == clock.stage1 and not f.dropped


def test_the_budget_that_fits_is_the_largest_whole_night_before_the_deadline():
    per = _per(600.0)  # 10 min a relaunch, 12 min counted before a deadline
    for hours in (1, 3, 8):
        n = budget_that_fits(per, NOON, NOON + hours * HOUR)
        assert n is not None and _fits_whole(n, per, NOON + hours * HOUR)
        assert not _fits_whole(n + 1, per, NOON + hours * HOUR), (hours, n)
    assert budget_that_fits(per, NOON, NOON + 8 * HOUR) > budget_that_fits(per, NOON, NOON + HOUR)
    # nothing fits: the smallest budget the checks allow (the deadline stops the night itself)
    assert budget_that_fits(per, NOON, NOON + 60) == Budget(1).minimum
    # relaunches already spent count in the budget
    assert budget_that_fits(per, NOON, NOON + 3 * HOUR, spent=5, first_free=False) > 5


def test_no_budget_is_counted_from_a_time_not_known():
    unknown = RelaunchTime(Phase(None, "?"), Phase(7.0, "test"), Phase(None, "?"), Phase(None, "?"))
    assert unknown.guard_s > 0 and budget_that_fits(unknown, NOON, NOON + HOUR) is None


def test_the_presets_not_reached_and_the_smallest_trials_that_reaches_them(tmp_path):
    space, rules = _space(tmp_path)
    found = reach(space, rules, budget=4, baseline_every=0, screen_top_k=None)
    # 4 relaunches: 2 kept for the checks, the baseline, then the triage's slot (the space holds its fix
    # NCCL_PROTO=LL) and the presets: 1 + 1 + 4 + 2 = 8 reach every one whatever the triage hands
    assert found.missed == ("simple", "ring", "channels-8") and found.trials == 8
    plan = forecast(space, rules, mode="presets", budget=found.trials, baseline_every=0)
    assert not any(e.reach for e in plan.entries)
    assert any(e.reach for e in forecast(space, rules, mode="presets", budget=7, baseline_every=0).entries)
    every = reach(space, rules, budget=12, baseline_every=0, screen_top_k=None)
    assert every.missed == () and every.trials == 8  # the smallest that reaches every preset, below 12
    lines = reach_lines(found, _per(600.0), NOON, NightLimits(Budget(4), NOON + HOUR, "--until 13:00"))
    assert lines == ["NOT REACHED: 3 presets of the space (simple, ring, channels-8): the budget of 4 relaunches is "
                     "spent before them; --trials 8 reaches every preset however many sets the triage and the screen "
                     "hand (about 80.0 min, expected end 13:20: past --until 13:00, which would stop it first)."]
    assert reach_lines(every, _per(600.0), NOON, NightLimits(Budget(12))) == []


def test_the_time_left_unused_and_the_trials_that_fill_it():
    per, deadline = _per(600.0), NOON + 8 * HOUR
    limits = NightLimits(Budget(6), deadline, "--until 20:00")
    clock = limits.clock(per, NOON, 0, first_free=True)
    fills = budget_that_fits(per, NOON, deadline)
    assert unused_line(clock, limits) == (f"7 h 00 min of the time before --until 20:00 left unused: --trials {fills} "
                                          "fills it (leave --trials out and sweep.trials unset, and the budget is "
                                          "what fits).")
    # a budget that fills the time leaves none worth a word; no deadline, no line
    full = NightLimits(Budget(fills), deadline, "--until 20:00")
    assert unused_line(full.clock(per, NOON, 0, first_free=True), full) == ""
    none = NightLimits(Budget(6))
    assert unused_line(none.clock(per, NOON, 0, first_free=True), none) == ""
