"""The empirical null of the sets measured once (stats.null_spread): which sets it keeps, and
what the baseline's own offset adds."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.judging import stats


def test_too_few_sets_say_nothing() -> None:
    assert stats.null_spread([0.01, -0.02, 0.0, 0.01, 0.02]) is None


def test_no_effect_sets_are_all_kept_and_measure_the_noise() -> None:
    rng = np.random.default_rng(3)
    estimates, kept = [], []
    for _ in range(400):
        sigma, _df, n = stats.null_spread(list(rng.normal(0.0, 0.02, 8)))  # type: ignore[misc]
        estimates.append(sigma**2)
        kept.append(n)
    # A fixed 3-SD cut on the trimmed spread dropped a no-effect set in 30-50 % of such nights.
    assert np.mean([k == 8 for k in kept]) > 0.8
    assert np.mean(estimates) / 0.02**2 == pytest.approx(1.0, abs=0.2)


def test_sets_with_a_real_effect_are_left_out() -> None:
    ratios = [0.004, -0.006, 0.01, -0.012, 0.0, 0.007, 0.10, -0.15]
    sigma, df, kept = stats.null_spread(ratios)  # type: ignore[misc]
    assert kept == 6
    assert df == 5.0
    assert sigma == pytest.approx(float(np.std(ratios[:6], ddof=1)), rel=1e-9)


def test_a_baseline_apart_from_every_set_raises_the_estimate() -> None:
    # Seven sets close together, all about 6 % above the baseline they were taken against: either
    # all share a gain or the baseline's launches were low; the noise estimate must say the latter
    # is possible instead of reading only the sets' tight spread.
    ratios = [0.058, 0.062, 0.060, 0.055, 0.064, 0.061, 0.059]
    alone = stats.null_spread(ratios)
    weights = [[1.0, 0.0]] * 4 + [[0.0, 1.0]] * 3
    with_base = stats.null_spread(ratios, baseline_weights=weights, baseline_runs=[4, 4])
    assert alone is not None and with_base is not None
    assert with_base[1] == alone[1] + 1
    assert with_base[0] > 3 * alone[0]
