"""Is a trial faster than the baseline, or is the difference noise?

Trials and baselines are compared by the ratio of their median output tok/s, with a 95 %
bootstrap confidence interval over the recorded runs (scipy.stats.bootstrap, percentile
method, two independent samples), widened to Welch's t interval on log tok/s where that is
wider (few runs: see :func:`ratio_ci`). A set is ``faster`` only when the whole interval lies above
1 and the point gain reaches the practical threshold ``min_effect`` (default 1 %: the field's
"81.9 vs 81.4 tok/s is noise", REFERENCE.md section 1); symmetrically ``slower``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

FASTER, SLOWER, NO_DIFF = "faster", "slower", "no significant difference"
NOT_ENOUGH = "not enough runs to judge"
DEFAULT_MIN_EFFECT = 0.01


@dataclass(frozen=True)
class Comparison:
    """A trial against the baseline: ``ratio`` of medians, its 95 % CI, and the ``verdict``."""

    ratio: float
    ci_low: float
    ci_high: float
    verdict: str

    @property
    def gain_pct(self) -> float:
        """(ratio - 1) in percent."""
        return (self.ratio - 1.0) * 100.0


def _median_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def ratio_ci(trial: Sequence[float], baseline: Sequence[float], *, confidence: float = 0.95,
             n_resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Ratio of medians ``median(trial)/median(baseline)`` and its confidence interval.

    The interval is the percentile bootstrap over runs (scipy.stats.bootstrap, two independent
    samples), widened where needed to Welch's t interval on log tok/s
    (scipy.stats.ttest_ind, equal_var=False): with the 3-5 runs a relaunch affords, the
    percentile bootstrap only resamples those few values and is known to under-cover
    (Efron & Tibshirani, An Introduction to the Bootstrap, 1993, ch. 13), which on a noisy
    machine turned noise into a "significant" +54 %. ``trial`` and ``baseline`` are per-run
    tok/s (at least 1 each); with a single run on either side the interval collapses to the
    point. Returns ``(ratio, low, high)``. Raises ValueError on empty input.
    """
    x = np.asarray(trial, dtype=float)
    y = np.asarray(baseline, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("ratio_ci needs at least one run on each side")
    ratio = float(np.median(x) / np.median(y))
    if x.size < 2 or y.size < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return ratio, ratio, ratio
    res = sps.bootstrap((x, y), _median_ratio, confidence_level=confidence, n_resamples=n_resamples,
                        method="percentile", vectorized=True, paired=False,
                        rng=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    welch = sps.ttest_ind(np.log(x), np.log(y), equal_var=False).confidence_interval(confidence)
    if np.isfinite(welch.low) and np.isfinite(welch.high):
        low, high = min(low, float(np.exp(welch.low))), max(high, float(np.exp(welch.high)))
    return ratio, min(low, ratio), max(high, ratio)


def compare(trial: Sequence[float], baseline: Sequence[float], *,
            min_effect: float = DEFAULT_MIN_EFFECT, drift: float = 0.0) -> Comparison:
    """Compare a trial's runs with the baseline's runs and name the verdict.

    ``faster``: CI low > 1 and ratio >= 1 + min_effect; ``slower``: CI high < 1 and
    ratio <= 1 - min_effect; otherwise ``no significant difference``. When the baseline's own
    measurements moved by ``drift`` (fraction) at least as much as the gain, the verdict is
    ``inconclusive (baseline drifted X %)``.
    """
    ratio, low, high = ratio_ci(trial, baseline)
    if len(trial) < 2 or len(baseline) < 2:
        return Comparison(ratio, low, high, NOT_ENOUGH)
    if low > 1.0 and ratio >= 1.0 + min_effect:
        verdict = FASTER
    elif high < 1.0 and ratio <= 1.0 - min_effect:
        verdict = SLOWER
    else:
        verdict = NO_DIFF
    if drift > 0 and verdict in (FASTER, SLOWER) and drift >= abs(ratio - 1.0):
        verdict = f"inconclusive (baseline drifted {drift * 100:.1f} %)"
    return Comparison(ratio, low, high, verdict)


def median_ci_halfwidth(runs: Sequence[float], *, confidence: float = 0.95, seed: int = 0) -> float:
    """Half-width of the 95 % CI of one set's tok/s, as a fraction of its median.

    The larger of the bootstrap CI of the median and the Student t interval of the mean
    (``t_{n-1} * s / sqrt(n)``), for the same few-runs reason as :func:`ratio_ci`. Used by
    ``repeats = "auto"`` and ``--target``; ``inf`` below 2 runs.
    """
    x = np.asarray(runs, dtype=float)
    if x.size < 2:
        return math.inf
    if np.ptp(x) == 0:
        return 0.0
    res = sps.bootstrap((x,), np.median, confidence_level=confidence, n_resamples=2000,
                        method="percentile", rng=np.random.default_rng(seed))
    med = float(np.median(x))
    boot = float(res.confidence_interval.high - res.confidence_interval.low) / 2.0 / med
    t_half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * np.std(x, ddof=1) / math.sqrt(x.size)) / med
    return max(boot, t_half)


def min_detectable_effect(baseline: Sequence[float], n_trial: int, *, alpha: float = 0.05,
                          power: float = 0.8) -> float:
    """Smallest relative gain (fraction) the current repeats can detect.

    Two-sample normal approximation: ``(z_{1-a/2} + z_{power}) * cv * sqrt(1/n_b + 1/n_t)``
    with ``cv`` the baseline runs' coefficient of variation (standard power analysis, e.g.
    Cohen 1988). ``inf`` with fewer than 2 baseline runs.
    """
    y = np.asarray(baseline, dtype=float)
    if y.size < 2 or n_trial < 1:
        return math.inf
    cv = float(np.std(y, ddof=1) / np.mean(y))
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return float(z * cv * math.sqrt(1.0 / y.size + 1.0 / n_trial))


def drift(baseline_medians: Sequence[float]) -> float:
    """How far the baseline moved across its measurements: max/min - 1 (fraction), 0 for one."""
    vals = [v for v in baseline_medians if v and not math.isnan(v)]
    if len(vals) < 2:
        return 0.0
    return max(vals) / min(vals) - 1.0
