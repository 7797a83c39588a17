"""Issue 21's judging: robust launch levels, the data's launch noise and its warning, local drift,
finalists from stage 1 only, the claim at 0.05 / finalists on fresh launches, CANNOT_ACT."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import trial_record
from tuner.judging import CONFIRM_ALPHA, judge, stats
from tuner.judging.judge import FINALISTS
from tuner.record import Metric, Verdict


def night(rng: np.random.Generator, *, tau: float, sigma: float = 0.01, k: int = 10, gain: float = 0.0,
          drift: float = 0.0, confirm: list[int] | None = None) -> list:
    """A baseline, ``k`` presets (the last with ``gain``), the confirmations of the presets at
    the indices ``confirm``, then the final baseline; ``drift`` end to end, log-linear."""
    plan = [("baseline", {})] + [("preset", {"NCCL_SET": str(i)}) for i in range(k)]
    plan += [("confirm", {"NCCL_SET": str(i)}) for i in confirm or []] + [("baseline", {})]
    out = []
    for t, (kind, env) in enumerate(plan):
        effect = 1 + gain if env.get("NCCL_SET") == str(k - 1) else 1.0
        level = 80 * effect * math.exp(math.log1p(drift) * t / (len(plan) - 1) + tau * rng.standard_normal())
        runs = [float(v) for v in level * np.exp(sigma * rng.standard_normal(4))]
        out.append(trial_record(t, kind, runs, env=env, recheck=kind == "baseline" and t > 0))
    return out


def test_one_hiccup_does_not_move_a_launch_and_is_flagged():
    clean = [80.0, 80.4, 79.8, 80.2, 80.1]
    hiccup = [*clean[:4], 56.0]  # one run 30 % slow
    assert stats.launch_level(hiccup) == pytest.approx(stats.launch_level(clean), rel=0.003)
    assert stats.launch_level([*hiccup[:4], 80.1]) == pytest.approx(80.1, rel=0.005)  # 5 runs: Huber
    assert stats.launch_level([80.0, 56.0, 80.4]) == pytest.approx(80.0, rel=0.01)  # median-like at 3
    launches = [[80.0, 80.4, 79.8, 80.2], [81.0, 80.6, 81.2, 56.5], [79.5, 79.9, 80.1, 79.7]]
    assert stats.low_runs(launches) == [(1, 3, pytest.approx(0.70, abs=0.003))]
    sw, _ = stats.run_noise(launches)
    assert sw < 0.01  # the hiccup is left out of the run noise
    assert stats.runs_for_precision(launches, 0.01, 15) == stats.MIN_RUNS  # no jump to 15 runs


def test_the_warning_fires_at_5_percent_launch_noise_and_is_silent_at_1():
    fired = [judge(night(np.random.default_rng(s), tau=0.05), metric=Metric.OUTPUT).noise_warning is not None
             for s in range(20)]
    silent = [judge(night(np.random.default_rng(100 + s), tau=0.01), metric=Metric.OUTPUT).noise_warning is None
              for s in range(20)]
    assert sum(fired) >= 16 and sum(silent) >= 18, (sum(fired), sum(silent))
    j = judge(night(np.random.default_rng(3), tau=0.05), metric=Metric.OUTPUT)
    assert j.data_noise is not None and j.data_noise > 0.03
    if j.noise_warning:
        assert j.noise_warning.startswith("launch-to-launch noise measured ~") and "--baseline-every 3" in j.noise_warning


def test_each_set_is_compared_with_the_baseline_at_its_own_time():
    # -6 % drift, no effect anywhere: the last sets would read -5 % against the pooled baseline
    rng = np.random.default_rng(7)
    j = judge(night(rng, tau=0.0, sigma=0.002, drift=-0.06), metric=Metric.OUTPUT)
    ratios = [s.comparison.ratio for s in j.sets.values() if s.comparison is not None]
    assert max(abs(r - 1) for r in ratios) < 0.01, ratios
    assert j.drift == pytest.approx(0.06, abs=0.01) and j.drift_trend == pytest.approx(-0.06, abs=0.01)
    assert stats.interpolation_weights([0, 10], 4).tolist() == pytest.approx([0.6, 0.4])
    assert stats.interpolation_weights([0, 10], 12).tolist() == [0.0, 1.0]


def test_finalists_come_from_stage_1_only():
    rng = np.random.default_rng(11)
    records = night(rng, tau=0.005, gain=0.10, k=6, confirm=[5])
    j = judge(records, metric=Metric.OUTPUT)
    assert j.finalists[0] == records[6].set_key
    # a confirmation launch that would make another set look best changes nothing
    bump = trial_record(8, "confirm", [99.0, 99.2, 99.1, 98.9], env={"NCCL_SET": "0"})
    again = judge([*records[:8], bump, *records[8:]], metric=Metric.OUTPUT)
    assert again.finalists == j.finalists


def test_the_claim_is_at_alpha_over_the_sets_stage_1_chose_to_confirm():
    """Fixed before the night, at CONFIRM_ALPHA / FINALISTS: a runner-up that cannot be the best
    is no finalist and its slot relaunches the best set once more (two fresh launches, the same
    level); a runner-up that could be the best is confirmed too. A later confirmation of another
    set never changes the first's level."""
    rng = np.random.default_rng(12)
    one = judge(night(rng, tau=0.005, gain=0.10, k=6, confirm=[5, 5]), metric=Metric.OUTPUT)
    best = one.finalists[0]
    assert one.finalists == [best] and one.confirm_slots == [best] * FINALISTS
    assert one.confirmed is True and one.headline is not None and len(one.sets[best].confirm_trials) == 2
    assert one.headline.confidence == pytest.approx(1 - CONFIRM_ALPHA / FINALISTS)
    other = judge(night(np.random.default_rng(12), tau=0.005, gain=0.10, k=6, confirm=[5, 0]), metric=Metric.OUTPUT)
    assert other.headline is not None and other.headline.confidence == pytest.approx(1 - CONFIRM_ALPHA / FINALISTS)
    assert other.winner == best
    # two sets +10 % apart by noise only: both could be the best, both confirmed
    rng = np.random.default_rng(12)
    records = night(rng, tau=0.005, gain=0.10, k=6)
    twin = night(np.random.default_rng(99), tau=0.005, gain=0.10, k=6)[6]
    twin.env, twin.trial = {"NCCL_SET": "twin"}, 5
    records[5] = twin
    two = judge(records, metric=Metric.OUTPUT)
    assert len(two.finalists) == 2 and two.confirm_slots == two.finalists
    assert two.confirm_design() == (FINALISTS, 1) and one.confirm_design() == (FINALISTS, 2)


def test_a_set_that_cannot_act_gets_its_ratio_only():
    rng = np.random.default_rng(13)
    records = night(rng, tau=0.005, k=4)
    records[2].output_tok_s_runs = [60.0, 60.2, 59.9, 60.1]  # would be "slower"
    key = records[2].set_key
    j = judge(records, metric=Metric.OUTPUT, cannot_act={key: "TP 1: no NCCL collective on the decode path"})
    s = j.sets[key]
    assert s.verdict is Verdict.CANNOT_ACT and s.comparison is not None and s.comparison.ratio < 0.8
    assert "measured ratio only" in s.comparison.note and key not in j.finalists
    forced = judge(records, metric=Metric.OUTPUT, forced="--force: the decode allreduce is not NCCL's")
    assert {s.verdict for s in forced.sets.values()} == {Verdict.CANNOT_ACT} and forced.finalists == []


def test_the_recommendable_gain_is_the_confirmation_tests():
    j = judge(night(np.random.default_rng(14), tau=0.01, k=8), metric=Metric.OUTPUT)
    g = j.recommendable_gain()
    assert j.min_effect <= g < 0.15
    # more finalists, a stricter level: a larger gain needed
    assert stats.recommendable_gain(run_sigma=0.01, noise=j.noise, runs_per_launch=4, finalists=2) > \
        stats.recommendable_gain(run_sigma=0.01, noise=j.noise, runs_per_launch=4, finalists=1)


def test_the_correctness_gates_reference_launch_is_never_a_finalist():
    """The reference configuration (custom allreduce off, P2P off) is launched for its answers:
    faster or not, it is never confirmed nor recommended."""
    from tuner.judging import REFERENCE_PRESET

    records = night(np.random.default_rng(15), tau=0.005, gain=0.10, k=4)
    records[4].preset = REFERENCE_PRESET  # the +10 % set, launched as the reference
    j = judge(records, metric=Metric.OUTPUT)
    assert records[4].set_key not in j.finalists and not j.sets[records[4].set_key].candidate
