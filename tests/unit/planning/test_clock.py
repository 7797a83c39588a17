"""tuner.planning.clock: a relaunch's time from the config or from the measured phases, what fits
before a deadline with the reserved checks' time kept, and how the dry run words it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers import trial_record
from tuner.inputs.config import ExperimentConfig, load_config
from tuner.inputs.space import load_space
from tuner.nccl.types import NcclVersion
from tuner.planning import (
    ESTIMATE_MARGIN,
    Facts,
    NightClock,
    RelaunchTime,
    Rules,
    Step,
    clock_time,
    forecast,
    relaunch_time,
    span,
)
from tuner.planning.clock import Phase, deadline_at, deadline_name

CHECKS = (Step.CONFIRM, Step.CONFIRM, Step.FINAL_BASELINE)
NOON = datetime(2026, 3, 2, 12, 0).timestamp()


def _cfg(tmp_path: Path, server: str = "", probe: str = "", gates: str = "") -> ExperimentConfig:
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    path = tmp_path / "exp.toml"
    path.write_text(f'[server]\ncommand = ["srv", "--port", "{{port}}"]\n{server}\n'
                    f'[probe]\nmax_tokens = 100\nwarmup = 1\nrepeats = 4\n{probe}\n'
                    f'[sweep]\nspace = "{tmp_path / "space.toml"}"\n' + (f"[gates]\n{gates}\n" if gates else ""))
    return load_config(path, check_program=False)


def _per(seconds: float, between: float = 0.0) -> RelaunchTime:
    """A relaunch of ``seconds`` (all load), ``between`` after it, measured once at that length."""
    return RelaunchTime(Phase(seconds, "test"), Phase(0.0, "test"), Phase(0.0, "test"), Phase(between, "test"),
                        longest_s=seconds)


def test_from_the_config_load_hint_and_probe_tokens_at_the_expected_rate(tmp_path):
    per = relaunch_time(_cfg(tmp_path, "expected_load_s = 2160", "expected_tok_s = 50"))
    assert per.load == Phase(2160.0, "server.expected_load_s")
    assert per.probe.seconds == pytest.approx(5 * 100 / 50)  # warm-up + 4 recorded runs of 100 tokens
    assert per.known and per.seconds == pytest.approx(2170.0)
    assert per.teardown.seconds is None and "first launch" in per.teardown.source
    assert per.guard_s == pytest.approx(ESTIMATE_MARGIN * 2170.0)


def test_concurrency_levels_add_their_requests_to_the_probe(tmp_path):
    one = relaunch_time(_cfg(tmp_path, probe="expected_tok_s = 50")).probe.seconds
    three = relaunch_time(_cfg(tmp_path, probe="expected_tok_s = 50\nconcurrency = [1, 4, 16]")).probe.seconds
    assert one is not None and three is not None
    # a bench warm-up, then 3 levels x 4 requests a stream: (5 + 1 + 12) runs against 5
    assert three / one == pytest.approx(18 / 5)


def test_the_correctness_gates_answers_add_their_tokens_to_the_probe(tmp_path):
    off = relaunch_time(_cfg(tmp_path, probe="expected_tok_s = 50", gates="answers = false"))
    on = relaunch_time(_cfg(tmp_path, probe="expected_tok_s = 50", gates="answers = true\nmax_tokens = 64"))
    assert off.probe.seconds == pytest.approx(5 * 100 / 50) and "correctness gate" not in off.probe.source
    assert on.probe.seconds == pytest.approx((5 * 100 + 4 * 64) / 50)  # 4 default prompts x 64 tokens after the runs
    assert "+ the correctness gate's 4 answers x 64 = 756 tokens a stream" in on.probe.source
    three = relaunch_time(_cfg(tmp_path, probe="expected_tok_s = 50",
                               gates='answers = true\nmax_tokens = 10\nprompts = ["a", "b", "c"]'))
    assert three.probe.seconds == pytest.approx((500 + 30) / 50)


def test_unknown_phases_are_said_never_guessed(tmp_path):
    per = relaunch_time(_cfg(tmp_path))
    assert per.seconds is None and not per.known and per.guard_s == 0.0
    assert "set server.expected_load_s" in per.load.source and "set probe.expected_tok_s" in per.probe.source
    assert per.words().startswith("A relaunch's time is not known yet: load not known (set server.expected_load_s")
    partial = relaunch_time(_cfg(tmp_path, "expected_load_s = 600"))
    assert partial.seconds == 600.0 and not partial.known
    assert "at least 10.0 min (the known phases)" in partial.words()


def test_measured_phases_replace_the_config_and_sum_to_the_finished_part(tmp_path):
    cfg = _cfg(tmp_path, "expected_load_s = 5", "expected_tok_s = 1000")
    night = [trial_record(i, "baseline" if i == 0 else "preset", [70.0, 71.0], load_s=30.0 + i, probe_s=8.0 + i % 2,
                          teardown_s=1.0, wall_s=40.0 + i, started_at=1000.0 + 50 * i,
                          finished_at=1000.0 + 50 * i + 40.0 + i, runner="h:1") for i in range(4)]
    per = relaunch_time(cfg, night)
    assert per.load.source == "measured: mean of 4 launches" and per.load.seconds == pytest.approx(31.5)
    finished = sum((r.load_s or 0) + (r.probe_s or 0) + (r.teardown_s or 0) for r in night)
    assert per.work_s is not None and 4 * per.work_s == pytest.approx(finished)  # the estimate is their sum
    gaps = [night[i + 1].started_at - night[i].finished_at for i in range(3)]  # type: ignore[operator]
    assert per.between.seconds == pytest.approx(sorted(gaps)[1])  # the median gap, one runner's
    assert per.longest_s == 43.0
    # another runner's relaunches make no gap with these; a failed launch's load is not a load
    crashed = trial_record(4, "preset", status="crashed", load_s=1.0, probe_s=0.0, started_at=1001.0, runner="h:2")
    again = relaunch_time(cfg, [*night, crashed])
    assert again.load.seconds == per.load.seconds and again.between == per.between


def test_without_a_deadline_everything_fits_and_ends_on_the_clock():
    clock = NightClock(_per(100.0, 10.0), NOON, stage1=9, checks=CHECKS, first_free=True)
    assert clock.fit() == (9, CHECKS, ())
    assert clock.total == 12 and clock.duration_s == 12 * 110.0 and clock.end_at == NOON + 1320.0
    assert clock.lines()[1] == ("12 relaunches (relaunches 1-9: the baseline and the sets, relaunches 10-12 reserved: "
                                "2 confirmations, the final baseline); about 22.0 min, expected end 12:22.")


def test_a_deadline_stops_the_first_stage_early_enough_for_the_reserved_checks():
    per = _per(100.0)
    guard = per.guard_s  # 120 s
    clock = NightClock(per, NOON, stage1=9, checks=CHECKS, deadline=NOON + 1000.0, first_free=True)
    fit = clock.fit()
    # relaunch j of stage 1 starts at 100 j and needs 4 guards after its start: j <= (1000 - 480) / 100
    assert fit.stage1 == 6 and fit.checks == CHECKS and not fit.dropped
    assert clock.end_at is not None and clock.end_at + guard - per.seconds <= NOON + 1000.0  # the last check's margin
    line = clock.lines("--until 12:16")[1]
    assert line.startswith("Before --until 12:16 (in 16.7 min): 9 of the 12 relaunches fit: relaunches 1-6: the "
                           "baseline and the sets, relaunches 7-9 reserved: 2 confirmations, the final baseline "
                           "(the first stage stops 3 relaunches early")
    assert line.endswith("about 15.0 min, expected end 12:15.")


def test_a_confirmation_needs_its_final_baseline_and_the_first_baseline_is_always_made():
    per = _per(100.0)
    # 250 s: the free baseline (100 s), then one confirmation would need 240 s more: only the final baseline fits
    clock = NightClock(per, NOON, stage1=9, checks=CHECKS, deadline=NOON + 250.0, first_free=True)
    assert clock.fit() == (1, (Step.FINAL_BASELINE,), (Step.CONFIRM, Step.CONFIRM))
    assert "2 confirmations would not fit" in clock.lines("--timeout 4.2 min")[1]
    late = NightClock(per, NOON, stage1=3, checks=CHECKS, deadline=NOON - 1.0, first_free=False, done=5)
    assert late.fit() == (0, (), CHECKS) and late.total == 5


def test_a_deadline_with_no_known_time_is_decided_once_a_launch_is_measured(tmp_path):
    clock = NightClock(relaunch_time(_cfg(tmp_path)), NOON, stage1=9, checks=CHECKS, deadline=NOON + 3600,
                       first_free=True)
    assert clock.fit().stage1 == 9 and clock.end_at is None
    assert clock.lines("--until 13:00")[1] == (
        "Before --until 13:00 (in 60.0 min): how many of the 12 relaunches fit (relaunches 1-9: the baseline and the "
        "sets, relaunches 10-12 reserved: 2 confirmations, the final baseline) is decided once a launch is measured; "
        "the reserved checks keep their time then.")


def test_words_for_times_and_deadlines():
    assert [span(s) for s in (0.24, 45, 750, 7500)] == ["0.2 s", "45 s", "12.5 min", "2 h 05 min"]
    assert clock_time(NOON + 3600) == "13:00" and clock_time(NOON + 20 * 3600, NOON) == "08:00 (+1 d)"
    until = datetime(2026, 3, 2, 13, 0)
    assert deadline_at(NOON, None, None) is None
    assert deadline_at(NOON, 600.0, until) == NOON + 600 and deadline_at(NOON, 7200.0, until) == until.timestamp()
    assert deadline_name(600.0, until, NOON) == "--timeout 10.0 min"
    assert deadline_name(7200.0, until, NOON) == "--until 13:00" and deadline_name(None, None, NOON) == ""


def test_the_plan_counts_its_first_stage_within_the_budget_and_its_checks(tmp_path):
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n'
                                         '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n')
    space = load_space(tmp_path / "space.toml", version=NcclVersion.parse("2.24.3"))
    rules = Rules({}, lambda: Facts(NcclVersion.parse("2.24.3")))
    plan = forecast(space, rules, mode="search", budget=12)
    assert plan.stage1() == 9 and plan.checks == CHECKS
    presets = forecast(space, rules, mode="presets", budget=12)
    # the baseline, up to one triage fix set (NCCL_PROTO=LL is in the space) and the one preset
    assert presets.stage1() == 3 and presets.checks == CHECKS
