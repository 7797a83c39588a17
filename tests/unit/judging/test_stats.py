"""tuner.judging.stats: launch noise, comparisons, the headline, run counts, power (statistics only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.judging import stats
from tuner.record.trial import Verdict


def launches(rng: np.random.Generator, level: float, k: int, n: int, *, run: float = 0.01,
             launch: float = 0.0) -> list[list[float]]:
    """k launches of n runs (tok/s), lognormal run and launch noise."""
    return [list(level * math.exp(launch * rng.standard_normal()) * np.exp(run * rng.standard_normal(n)))
            for _ in range(k)]


def quiet(sigma: float = 0.001, df: float = 1000.0) -> stats.LaunchNoise:
    """A launch noise known to be small (many launches measured)."""
    return stats.LaunchNoise(sigma, df, 100, 100, 1, sigma, stats.PRIOR_LAUNCH_SIGMA, stats.PRIOR_LAUNCH_DF)


# --- launch noise -----------------------------------------------------------------------------

def test_no_repeated_launches_gives_the_prior_alone():
    noise = stats.launch_noise([[80.0, 81.0, 80.5]], [[[90.0, 91.0]]])
    assert noise.sigma == stats.PRIOR_LAUNCH_SIGMA and noise.df == stats.PRIOR_LAUNCH_DF
    assert noise.data_sigma is None and noise.launches == 0 and noise.prior_dominates
    assert "prior of 1.75 % alone" in noise.describe()


def test_two_identical_launches_never_give_zero():
    noise = stats.launch_noise([[80.0, 80.4, 79.6], [80.0, 80.4, 79.6]])
    assert noise.data_sigma == 0.0
    assert noise.sigma > 0.01 and noise.df == stats.PRIOR_LAUNCH_DF + 1 and noise.prior_dominates
    assert noise.describe().startswith("launch-to-launch noise ~1.6 % (from 2 baseline launches and a prior")


def test_moment_estimator_is_the_spread_of_launch_means_when_runs_agree():
    # runs identical within each launch: MSW = 0, so the estimate is the variance of the launch means
    means = [80.0, 82.0, 79.0]
    noise = stats.launch_noise([[m] * 4 for m in means], prior_df=1e-9)
    assert noise.data_sigma == pytest.approx(float(np.std(np.log(means), ddof=1)), rel=1e-9)
    assert noise.sigma == pytest.approx(noise.data_sigma, rel=1e-6)


def test_many_launches_find_the_true_launch_noise_and_outweigh_the_prior():
    rng = np.random.default_rng(1)
    base = launches(rng, 80, 40, 4, run=0.01, launch=0.01)
    others = [launches(rng, 90, 10, 4, run=0.01, launch=0.01)]
    noise = stats.launch_noise(base, others)
    assert noise.launches == 50 and noise.baseline_launches == 40 and noise.sets == 2
    assert not noise.prior_dominates
    assert noise.data_sigma == pytest.approx(0.01, abs=0.003)
    assert "40 baseline launches, 10 launches of tuned sets and a prior" in noise.describe()
    assert "the data alone: " in noise.describe()


def test_launch_noise_refuses_bad_values():
    with pytest.raises(ValueError, match="tok/s must be finite and > 0"):
        stats.launch_noise([[80.0, 0.0], [80.0, 81.0]])
    with pytest.raises(ValueError, match="prior_df"):
        stats.launch_noise([[80.0]], prior_df=0)


def test_run_noise_pools_within_launches():
    sigma, df = stats.run_noise([[100.0, 100.0], [200.0, 200.0 * math.exp(0.02)]])
    assert df == 2 and sigma == pytest.approx(0.02 / 2, rel=1e-9)  # SS = 2 * (0.01)^2 over 2 df
    assert stats.run_noise([[80.0], [81.0]]) == (pytest.approx(math.nan, nan_ok=True), 0)


# --- compare ----------------------------------------------------------------------------------

def test_ratio_is_of_geometric_levels_with_launches_weighted_equally():
    c = stats.compare([[110.0, 110.0 * math.exp(0.01)]], [[100.0, 100.0], [100.0, 100.0, 100.0, 100.0]])
    assert c.ratio == pytest.approx(1.1 * math.exp(0.005))
    assert stats.level([[100.0, 400.0], [100.0]]) == pytest.approx(math.exp((math.log(200) + math.log(100)) / 2))


def test_noise_of_a_relaunch_is_not_a_gain():
    rng = np.random.default_rng(3)
    base = launches(rng, 81.4, 2, 5)
    c = stats.compare([[v * 1.006 for v in base[0]]], base)  # 81.9 vs 81.4
    assert c.verdict is Verdict.NO_DIFFERENCE and c.ci_low < 1 < c.ci_high


def test_a_clear_gain_is_faster_and_a_clear_loss_slower():
    rng = np.random.default_rng(4)
    base = launches(rng, 80, 2, 4)
    fast = stats.compare(launches(rng, 80 * 1.15, 1, 4), base)
    assert fast.verdict is Verdict.FASTER and fast.ci_low > 1 and fast.ci_low <= 1.15 <= fast.ci_high
    assert fast.gain_pct == pytest.approx((fast.ratio - 1) * 100)
    slow = stats.compare(launches(rng, 80 * 0.85, 1, 4), base)
    assert slow.verdict is Verdict.SLOWER and slow.ci_high < 1


def test_launch_noise_sets_a_floor_that_more_runs_do_not_lower():
    rng = np.random.default_rng(5)
    noise = stats.launch_noise([])
    widths = []
    for n in (4, 64, 1024):
        c = stats.compare(launches(rng, 80, 1, n, run=0.03), launches(rng, 80, 2, n, run=0.03), noise=noise)
        widths.append(math.log(c.ci_high / c.ci_low))
    floor = 2 * 1.96 * stats.PRIOR_LAUNCH_SIGMA * math.sqrt(1 + 1 / 2)  # the launch part alone, df infinite
    assert widths[0] > widths[1] and min(widths) > floor
    assert widths[2] == pytest.approx(widths[1], rel=0.03)  # 16x the runs: no narrower


def test_below_min_effect_is_named_as_such():
    rng = np.random.default_rng(6)
    base = launches(rng, 80, 4, 30, run=0.001)
    up = stats.compare(launches(rng, 80 * 1.005, 1, 30, run=0.001), base, noise=quiet())
    assert up.verdict is Verdict.FASTER_BELOW_MIN and up.ci_low > 1
    assert "below the 1 % that matters" in up.note
    down = stats.compare(launches(rng, 80 * 0.995, 1, 30, run=0.001), base, noise=quiet())
    assert down.verdict is Verdict.SLOWER_BELOW_MIN and down.ci_high < 1
    assert stats.compare(launches(rng, 80 * 1.005, 1, 30, run=0.001), base, noise=quiet(),
                         min_effect=0.002).verdict is Verdict.FASTER


def test_drift_as_large_as_the_gain_is_inconclusive():
    rng = np.random.default_rng(7)
    base = launches(rng, 80, 2, 8, run=0.002)
    trial = launches(rng, 80 * 1.03, 1, 8, run=0.002)
    assert stats.compare(trial, base, noise=quiet()).verdict is Verdict.FASTER
    c = stats.compare(trial, base, noise=quiet(), drift=0.05)
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "the baseline drifted 5.0 %" in c.note and "(was: faster)" in c.note


def test_one_baseline_launch_says_the_prior_is_used():
    rng = np.random.default_rng(8)
    c = stats.compare(launches(rng, 80, 1, 4), launches(rng, 80, 1, 4))
    assert "one baseline launch: the launch-to-launch noise is the prior alone (1.75 %)" in c.note


def test_launches_without_repeated_runs_are_not_enough():
    c = stats.compare([[81.0], [82.0]], [[80.0, 80.5], [79.0, 80.0]])
    assert c.verdict is Verdict.NOT_ENOUGH_RUNS and math.isnan(c.ci_low) and "trial" in c.note
    assert stats.compare([[81.0, 82.0]], [[80.0]]).verdict is Verdict.NOT_ENOUGH_RUNS


def test_compare_refuses_bad_input():
    with pytest.raises(ValueError, match="at least one run"):
        stats.compare([], [[80.0, 81.0]])
    with pytest.raises(ValueError, match="finite and > 0"):
        stats.compare([[80.0, math.nan]], [[80.0, 81.0]])
    with pytest.raises(ValueError, match="confidence"):
        stats.compare([[80.0, 81.0]], [[80.0, 81.0]], confidence=1.0)


# --- many sets, one headline; confirmation -----------------------------------------------------

def test_headline_widens_for_the_number_of_sets():
    rng = np.random.default_rng(9)
    base = launches(rng, 80, 3, 6, run=0.005)
    gain = launches(rng, 80 * 1.025, 1, 6, run=0.005)
    alone = stats.best_of([gain], base, noise=quiet(0.008, 20))
    assert alone.winner == 0 and alone.confidence == pytest.approx(0.95)
    many = stats.best_of([gain] + [launches(rng, 80, 1, 6, run=0.005) for _ in range(19)], base,
                         noise=quiet(0.008, 20))
    assert many.sets == 20 and many.confidence == pytest.approx(1 - 0.05 / 20)
    assert stats.compare(gain, base, noise=quiet(0.008, 20)).verdict is Verdict.FASTER  # per set, at 95 %
    assert many.winner is None and many.best == 0 and many.comparison is not None
    assert many.comparison.ci_low < 1  # the Bonferroni interval of the best holds 1


def test_headline_picks_the_fastest_of_the_significant_sets():
    rng = np.random.default_rng(10)
    base = launches(rng, 80, 3, 6, run=0.002)
    sets = [launches(rng, 80 * g, 1, 6, run=0.002) for g in (1.05, 1.10, 1.0)]
    h = stats.best_of(sets, base, noise=quiet())
    assert h.winner == 1 and h.best == 1 and h.comparison is not None and h.comparison.verdict is Verdict.FASTER
    assert stats.best_of([], base).best is None


def test_confirmation_on_new_launches_alone():
    rng = np.random.default_rng(11)
    noise = stats.launch_noise([])
    ok = stats.confirmed(launches(rng, 80 * 1.15, 1, 4), launches(rng, 80, 1, 4), noise=noise)
    assert ok.verdict is Verdict.FASTER and ok.ci_low > 1 and "confirmed" in ok.note
    gone = stats.confirmed(launches(rng, 80, 1, 4), launches(rng, 80, 1, 4), noise=noise)
    assert gone.verdict is Verdict.FAILED_CONFIRMATION and "not confirmed" in gone.note
    # the bound is one-sided 95 %: the lower end of the two-sided 90 % interval
    c90 = stats.compare(launches(np.random.default_rng(12), 80 * 1.15, 1, 4),
                        launches(np.random.default_rng(13), 80, 1, 4), noise=noise, confidence=0.90)
    again = stats.confirmed(launches(np.random.default_rng(12), 80 * 1.15, 1, 4),
                            launches(np.random.default_rng(13), 80, 1, 4), noise=noise)
    assert again.ci_low == pytest.approx(c90.ci_low)


# --- runs per launch, power -------------------------------------------------------------------

def test_runs_follow_the_baseline_noise_and_stop_where_launch_noise_dominates():
    rng = np.random.default_rng(14)
    small = stats.launch_noise([], prior_sigma=0.001)
    quiet_base = launches(rng, 80, 1, 8, run=0.002)
    z = rng.standard_normal(8)
    noisy_base = [list(80 * np.exp(0.02 * (z - z.mean()) / z.std(ddof=1)))]  # run noise exactly 2 %
    assert stats.runs_for_precision(quiet_base, 0.01, 15, noise=small) == stats.MIN_RUNS
    many = stats.runs_for_precision(noisy_base, 0.01, 30, noise=small)
    assert 15 < many <= 30
    # the same noisy baseline, but 2 % launch noise: past 4 * (2 %)^2 / (2 %)^2 = 4 runs nothing is won
    assert stats.runs_for_precision(noisy_base, 0.01, 30, noise=stats.launch_noise([], prior_sigma=0.02)) == 4
    assert stats.runs_for_precision([[80.0]], 0.01, 12) == 12  # nothing known: the most
    with pytest.raises(ValueError):
        stats.runs_for_precision(quiet_base, 0.0, 10)


def test_detectable_effect_grows_with_noise_and_shrinks_with_launches():
    noise = stats.launch_noise([])
    mde = stats.min_detectable_effect(run_sigma=0.02, noise=noise, runs_per_launch=4, baseline_launches=2)
    assert mde > 0.05
    assert stats.min_detectable_effect(run_sigma=0.05, noise=noise, runs_per_launch=4, baseline_launches=2) > mde
    assert stats.min_detectable_effect(run_sigma=0.02, noise=noise, runs_per_launch=4, baseline_launches=5) < mde
    assert stats.min_detectable_effect(run_sigma=0.02, noise=noise, runs_per_launch=4, baseline_launches=2,
                                       sets=20) > mde
    assert stats.min_detectable_effect(run_sigma=0.0, noise=quiet(1e-6), runs_per_launch=4, baseline_launches=2,
                                       min_effect=0.03) >= 0.03
    assert math.isinf(stats.min_detectable_effect(run_sigma=math.nan, noise=noise, runs_per_launch=4,
                                                  baseline_launches=2))


# --- small helpers kept for the callers -------------------------------------------------------

def test_helpers_kept():
    assert stats.drift([100, 105]) == pytest.approx(0.05)
    assert stats.drift([100]) == 0.0
    assert stats.median_ci_halfwidth([80.0]) == math.inf
    assert 0 < stats.median_ci_halfwidth([80.0, 81.0, 79.5, 80.2]) < 0.05
    assert stats.DEFAULT_MIN_EFFECT == 0.01


def test_verdict_words_say_below_what_matters():
    assert stats.verdict_words(Verdict.FASTER_BELOW_MIN) == "faster, below the 1 % that matters"
    assert stats.verdict_words(Verdict.SLOWER_BELOW_MIN, 0.005) == "slower, below the 0.5 % that matters"
    assert stats.verdict_words(Verdict.NO_DIFFERENCE) == "no significant difference"


def test_a_flat_list_of_runs_is_refused_not_misread():
    with pytest.raises(TypeError, match="expected launches"):
        stats.compare([81.0, 82.0, 81.5], [[80.0, 80.5]])  # type: ignore[list-item]
