"""Is a tuned set faster than the baseline across relaunches, or is the difference noise?

Two levels of noise (a one-way random-effects model on log tok/s; Searle, Casella & McCulloch,
*Variance Components*, Wiley 1992, ch. 3): a measured set is a list of launches (relaunches of
the server), each a list of per-run tok/s (:data:`Launches`). On the log scale a run is

    log x_ij = mu_set + a_i + e_ij,   a_i ~ N(0, sigma_L^2) per launch,  e_ij ~ N(0, sigma_w^2) per run.

Runs inside one launch share its ``a_i`` (clocks, memory placement, NCCL's init), so treating
them as independent (as the first version of this module did) under-covers once launches differ:
more runs shrink only the ``e`` part. Here:

- :func:`launch_noise` estimates ``sigma_L`` from every set measured over 2+ launches (ANOVA /
  method-of-moments, pooled) and combines it with a stated prior, so two or three launches never
  give zero;
- :func:`compare` takes the ratio of geometric levels (mean of the per-launch means of log tok/s)
  and a t interval whose variance holds both levels of noise on both sides;
- :func:`best_of` makes the headline claim about the best of K sets (Bonferroni), and
  :func:`confirmed` checks a winner on its confirmation relaunches alone;
- :func:`runs_for_precision` picks the runs per launch from the baseline's run noise before a
  trial (no optional stopping), and :func:`min_detectable_effect` gives the power of the very
  test :func:`compare` runs.

Verdicts are :class:`tuner.record.Verdict` values. Sigmas are standard deviations of log tok/s,
which read as fractions of the level (0.01 = 1 %).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

from tuner.record import Verdict

__all__ = [
    "DEFAULT_MIN_EFFECT",
    "MIN_RUNS",
    "PRIOR_LAUNCH_DF",
    "PRIOR_LAUNCH_SIGMA",
    "Comparison",
    "Headline",
    "LaunchNoise",
    "Launches",
    "best_of",
    "compare",
    "confirmed",
    "drift",
    "launch_noise",
    "level",
    "median_ci_halfwidth",
    "min_detectable_effect",
    "run_noise",
    "runs_for_precision",
    "verdict_words",
]

#: A measured set: launches (relaunches of the server), each a sequence of per-run tok/s.
Launches = Sequence[Sequence[float]]

#: Practical threshold for "faster"/"slower" (fraction): "81.9 vs 81.4 tok/s is noise" is 0.6 %.
DEFAULT_MIN_EFFECT = 0.01
#: Prior launch-to-launch sigma (fraction of tok/s). The simulator models 0.5 %, and the verdicts
#: must stay honest up to 2 %; two baseline launches cannot tell those apart, so the prior sits
#: near the top of that range: with it the false "faster/slower" rate stays at or under
#: 5 % up to 2 % true launch noise with 2-5 baseline launches, at the price of power when the
#: real noise is small (benchmarks/verdict_calibration.py prints both). More baseline launches
#: (``--baseline-every``) let the data take over.
PRIOR_LAUNCH_SIGMA = 0.0175
#: Weight of the prior in pseudo launch-contrasts (degrees of freedom), as much as a set measured
#: over 5 launches: smaller weights let one lucky pair of baseline launches talk the noise
#: down to nothing; larger ones stop real measurements from ever moving it.
PRIOR_LAUNCH_DF = 4.0
#: Fewest runs per launch :func:`runs_for_precision` returns (two leave 1 degree of freedom).
MIN_RUNS = 3


@dataclass(frozen=True)
class LaunchNoise:
    """Launch-to-launch noise: ``sigma`` (SD of log tok/s between launches of one set, a fraction).

    ``df`` is its degrees of freedom: the prior's pseudo-count plus one per launch contrast
    (launches minus sets). ``launches`` counts the launches it was estimated from (those of sets
    with 2+ launches), ``baseline_launches`` how many of them were the baseline's, ``sets`` those
    sets. ``data_sigma`` is the data-only estimate (None without a set of 2+ launches),
    ``prior_sigma``/``prior_df`` the prior. ``prior_dominates`` when the prior weighs at least as
    much as the data.
    """

    sigma: float
    df: float
    launches: int
    baseline_launches: int
    sets: int
    data_sigma: float | None
    prior_sigma: float
    prior_df: float

    @property
    def prior_dominates(self) -> bool:
        """True when the prior's pseudo-count is at least the data's launch contrasts."""
        return self.prior_df >= self.df - self.prior_df

    def describe(self) -> str:
        """One phrase for the report, e.g. ``launch-to-launch noise ~0.8 % (from 3 baseline
        launches and a prior of 1.75 %)``."""
        prior = f"a prior of {self.prior_sigma * 100:g} %"
        if self.data_sigma is None:
            source = f"{prior} alone: no set was measured over 2 launches"
        else:
            others = self.launches - self.baseline_launches
            parts = []
            if self.baseline_launches:
                parts.append(f"{self.baseline_launches} baseline launch{_es(self.baseline_launches)}")
            if others:
                parts.append(f"{others} launch{_es(others)} of tuned sets")
            source = f"from {' and '.join(parts)} and {prior}"
            if self.prior_dominates:
                source += ", which weighs most"
        return f"launch-to-launch noise ~{self.sigma * 100:.1f} % ({source})"


@dataclass(frozen=True)
class Comparison:
    """A trial against the baseline.

    ``ratio``: trial level / baseline level (geometric, see :func:`compare`); ``ci_low``,
    ``ci_high``: its confidence interval (NaN when there are not enough runs); ``verdict``;
    ``note``: one sentence on what the verdict rests on (empty when nothing needs saying).
    """

    ratio: float
    ci_low: float
    ci_high: float
    verdict: Verdict
    note: str = ""

    @property
    def gain_pct(self) -> float:
        """(ratio - 1) in percent."""
        return (self.ratio - 1.0) * 100.0


@dataclass(frozen=True)
class Headline:
    """The claim about the best of ``sets`` tuned sets (see :func:`best_of`).

    ``best``: index of the set with the highest ratio (None when there is none); ``winner``:
    index of the set the headline may call faster before confirmation, or None;
    ``comparison``: the winner's (else the best's) comparison at the corrected ``confidence``.
    """

    best: int | None
    winner: int | None
    comparison: Comparison | None
    sets: int
    confidence: float


def _es(n: int) -> str:
    return "" if n == 1 else "es"


def _logs(launches: Launches, what: str) -> list[np.ndarray]:
    """Per launch, log of its runs; empty launches dropped. ValueError on a value <= 0 or NaN,
    TypeError on a flat list of runs (the shape before launches were modelled)."""
    out = []
    for runs in launches:
        if isinstance(runs, int | float | np.number):
            raise TypeError(f"{what}: expected launches, a list of per-run lists such as [[81.2, 80.9]], "
                            f"got a bare number {runs!r}")
        x = np.asarray(runs, dtype=float).ravel()
        if x.size == 0:
            continue
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            raise ValueError(f"{what}: tok/s must be finite and > 0, got {list(map(float, x))}")
        out.append(np.log(x))
    return out


@dataclass(frozen=True)
class _Side:
    """One set on the log scale: level (mean of launch means) and its variance parts."""

    level: float
    launches: int
    inv_n: float  # sum over launches of 1/n_i, divided by launches^2: the run-noise weight
    sw2: float    # pooled within-launch variance of log tok/s
    df_w: int     # its degrees of freedom: runs - launches


def _side(logs: list[np.ndarray]) -> _Side:
    means = [float(y.mean()) for y in logs]
    ss = sum(float(((y - y.mean()) ** 2).sum()) for y in logs)
    df_w = sum(y.size for y in logs) - len(logs)
    k = len(logs)
    return _Side(level=float(np.mean(means)), launches=k, inv_n=sum(1.0 / y.size for y in logs) / k**2,
                 sw2=ss / df_w if df_w > 0 else math.nan, df_w=df_w)


def run_noise(launches: Launches) -> tuple[float, int]:
    """Within-launch run noise of a set: pooled SD of log tok/s around each launch's mean
    (a fraction), and its degrees of freedom (runs - launches). ``(nan, 0)`` when no launch has
    2 runs. Raises ValueError on tok/s <= 0 or NaN."""
    s = _side(_logs(launches, "run_noise"))
    return (math.sqrt(s.sw2), s.df_w) if s.df_w > 0 else (math.nan, 0)


def launch_noise(baseline: Launches, others: Sequence[Launches] = (), *,
                 prior_sigma: float = PRIOR_LAUNCH_SIGMA, prior_df: float = PRIOR_LAUNCH_DF) -> LaunchNoise:
    """Estimate the launch-to-launch noise from the baseline's and other sets' launches.

    ``baseline`` and each of ``others`` are :data:`Launches` (per-run tok/s); only sets with 2+
    launches carry information. Method: the ANOVA (method-of-moments) estimator of the
    between-launch variance component, pooled over sets with a fixed level per set (Searle,
    Casella & McCulloch, *Variance Components*, 1992, ch. 3, unbalanced one-way classification):
    with ``SSB_s = sum_i n_i (m_i - m_s)^2`` per set and the pooled within-launch mean square
    ``MSW``, ``E[sum SSB_s] = sum(k_s - 1) MSW + sigma_L^2 sum(N_s - sum_i n_i^2 / N_s)``, solved
    for ``sigma_L^2`` and truncated at 0. It is then pooled with the prior as a scaled
    inverse-chi-square pseudo-sample (the moderated variance of Smyth, Stat. Appl. Genet. Mol.
    Biol. 3(1), article 3, 2004): ``sigma^2 = (prior_df * prior_sigma^2 + d * est^2) / (prior_df + d)``
    with ``d = sum(k_s - 1)`` launch contrasts, ``df = prior_df + d``.

    Why not a fitted mixed model: with two or three launches REML/ML often lands on the boundary
    (statsmodels' MixedLM returned a zero launch variance in 3 of 20 simulated fits with two
    launches), and a zero makes every later interval too narrow; the moment estimator is closed
    form, unbiased before truncation, and the prior keeps few launches from ever giving zero.

    ``prior_sigma`` (fraction, >= 0) and ``prior_df`` (> 0) default to :data:`PRIOR_LAUNCH_SIGMA`
    and :data:`PRIOR_LAUNCH_DF`. Raises ValueError on tok/s <= 0 or NaN, or a bad prior.
    """
    if not (prior_sigma >= 0 and prior_df > 0 and math.isfinite(prior_sigma) and math.isfinite(prior_df)):
        raise ValueError(f"launch_noise: prior_sigma must be >= 0 and prior_df > 0, got {prior_sigma}, {prior_df}")
    ssb = ssw = coef = 0.0
    contrasts = df_w = launches = base_launches = sets = 0
    for index, launch_set in enumerate([baseline, *others]):
        logs = _logs(launch_set, "launch_noise")
        if len(logs) < 2:
            continue
        n = np.array([y.size for y in logs], dtype=float)
        m = np.array([y.mean() for y in logs])
        grand = float((n * m).sum() / n.sum())
        ssb += float((n * (m - grand) ** 2).sum())
        ssw += sum(float(((y - y.mean()) ** 2).sum()) for y in logs)
        df_w += int(n.sum()) - len(logs)
        coef += float(n.sum() - (n**2).sum() / n.sum())
        contrasts += len(logs) - 1
        launches += len(logs)
        base_launches += len(logs) if index == 0 else 0
        sets += 1
    if contrasts == 0:
        return LaunchNoise(prior_sigma, prior_df, 0, 0, 0, None, prior_sigma, prior_df)
    msw = ssw / df_w if df_w > 0 else 0.0  # one run per launch: all spread is counted as launch noise
    est2 = max(0.0, (ssb - contrasts * msw) / coef)
    var = (prior_df * prior_sigma**2 + contrasts * est2) / (prior_df + contrasts)
    return LaunchNoise(math.sqrt(var), prior_df + contrasts, launches, base_launches, sets, math.sqrt(est2),
                       prior_sigma, prior_df)


def _log_ratio(trial: _Side, base: _Side, noise: LaunchNoise) -> tuple[float, float, float]:
    """Log ratio, its standard error and Satterthwaite degrees of freedom (both sides have runs)."""
    return (trial.level - base.level, *_se_df([
        (noise.sigma**2 * (1.0 / trial.launches + 1.0 / base.launches), noise.df),
        (trial.sw2 * trial.inv_n, trial.df_w), (base.sw2 * base.inv_n, base.df_w)]))


def _se_df(parts: list[tuple[float, float]]) -> tuple[float, float]:
    """Standard error of a sum of independent variance estimates ``(variance, df)`` and its
    Satterthwaite degrees of freedom ``V^2 / sum(v_i^2 / df_i)`` (Satterthwaite 1946)."""
    var = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if v > 0)
    return math.sqrt(var), (var * var / denom if denom > 0 else math.inf)


def compare(trial: Launches, baseline: Launches, *, noise: LaunchNoise | None = None,
            min_effect: float = DEFAULT_MIN_EFFECT, drift: float = 0.0, confidence: float = 0.95) -> Comparison:
    """Compare a tuned set's launches with the baseline's and name the verdict.

    ``trial``, ``baseline``: :data:`Launches` (per-run tok/s, grouped by launch). ``noise``: the
    launch-to-launch noise, normally :func:`launch_noise` over the whole study; None estimates it
    from these two sets alone (with the prior).

    Level of a set: the geometric mean of its launches' geometric-mean tok/s (mean of per-launch
    means of log tok/s), each launch weighted equally: the launch is the unit that varies, and
    this estimator's variance under the model is the closed form below, where the median of
    launch medians has none with 3-8 runs (and is less efficient under lognormal noise). ``ratio`` =
    exp(trial level - baseline level).

    Interval: ``log ratio +- t_{df, (1+confidence)/2} * se`` with
    ``se^2 = sigma_L^2 (1/k_t + 1/k_b) + sigma_wt^2 S_t + sigma_wb^2 S_b``, ``S = sum_i (1/n_i) / k^2``
    for a side of k launches with n_i runs, ``sigma_w`` each side's pooled within-launch SD (Welch:
    not assumed equal) and ``df`` by Satterthwaite (Biometrics Bull. 2(6), 1946) / Welch
    (Biometrika 34, 1947) over the three variance parts (``sigma_L``'s df from :class:`LaunchNoise`).

    Verdicts: ``FASTER`` when the whole interval is above 1 and ``ratio >= 1 + min_effect``;
    ``FASTER_BELOW_MIN`` when it is above 1 but the gain is smaller; ``SLOWER`` /
    ``SLOWER_BELOW_MIN`` symmetrically; ``NO_DIFFERENCE`` when it holds 1; ``NOT_ENOUGH_RUNS`` when
    a side has no launch with 2 runs (interval NaN). Extra guard: a directional verdict becomes
    ``INCONCLUSIVE`` when the baseline's own ``drift`` (fraction, :func:`drift`) is at least the
    gain. The launch noise in the interval already covers a baseline that wanders at random; the
    guard is for a trend (a machine warming up over the night) that the model does not describe.
    Measured (benchmarks/verdict_calibration.py): with 2 baseline launches it changes neither the
    false-verdict rate nor the power; with 5 it removes about a fifth of the false verdicts at 2 %
    launch noise and costs 2-8 points of power at +5 %, as the range of more launches is wider.
    Raises ValueError on tok/s <= 0 or NaN, an empty side, ``confidence`` outside (0, 1), or a
    negative ``min_effect`` or ``drift``; TypeError on a flat list of runs instead of launches.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"compare: confidence must be in (0, 1), got {confidence}")
    if not (min_effect >= 0 and drift >= 0):
        raise ValueError(f"compare: min_effect and drift must be >= 0, got {min_effect}, {drift}")
    t_logs, b_logs = _logs(trial, "compare trial"), _logs(baseline, "compare baseline")
    if not t_logs or not b_logs:
        raise ValueError("compare needs at least one run on each side")
    t_side, b_side = _side(t_logs), _side(b_logs)
    ratio = math.exp(t_side.level - b_side.level)
    if t_side.df_w == 0 or b_side.df_w == 0:
        short = "trial" if t_side.df_w == 0 else "baseline"
        return Comparison(ratio, math.nan, math.nan, Verdict.NOT_ENOUGH_RUNS,
                          f"the {short} has no launch with 2 runs, so its run noise is unknown")
    if noise is None:
        noise = launch_noise(baseline, [trial])
    diff, se, df = _log_ratio(t_side, b_side, noise)
    half = float(sps.t.ppf(0.5 + confidence / 2.0, df)) * se if se > 0 else 0.0
    low, high = math.exp(diff - half), math.exp(diff + half)
    if low > 1.0:
        verdict = Verdict.FASTER if ratio >= 1.0 + min_effect else Verdict.FASTER_BELOW_MIN
    elif high < 1.0:
        verdict = Verdict.SLOWER if ratio <= 1.0 - min_effect else Verdict.SLOWER_BELOW_MIN
    else:
        verdict = Verdict.NO_DIFFERENCE
    notes = []
    if verdict in (Verdict.FASTER_BELOW_MIN, Verdict.SLOWER_BELOW_MIN):
        notes.append(f"the whole interval is {'above' if low > 1 else 'below'} 1, but the "
                     f"{'gain' if low > 1 else 'loss'} is below the {min_effect * 100:g} % that matters")
    if verdict is not Verdict.NO_DIFFERENCE and drift > 0 and drift >= abs(ratio - 1.0):
        notes.append(f"the baseline drifted {drift * 100:.1f} %, at least the {abs(ratio - 1) * 100:.1f} % "
                     f"{'gain' if ratio > 1 else 'loss'} (was: {verdict.value})")
        verdict = Verdict.INCONCLUSIVE
    if b_side.launches == 1 and noise.data_sigma is None:
        notes.append(f"one baseline launch: the launch-to-launch noise is the prior alone "
                     f"({noise.prior_sigma * 100:g} %)")
    return Comparison(ratio, low, high, verdict, "; ".join(notes))


def verdict_words(verdict: Verdict, min_effect: float = DEFAULT_MIN_EFFECT) -> str:
    """The verdict as a person reads it: ``faster, below the 1 % that matters`` for
    ``FASTER_BELOW_MIN`` (the whole interval above 1, the gain below ``min_effect``), likewise for
    ``SLOWER_BELOW_MIN``; every other verdict its own value."""
    if verdict in (Verdict.FASTER_BELOW_MIN, Verdict.SLOWER_BELOW_MIN):
        side = "faster" if verdict is Verdict.FASTER_BELOW_MIN else "slower"
        return f"{side}, below the {min_effect * 100:g} % that matters"
    return verdict.value


def best_of(sets: Sequence[Launches], baseline: Launches, *, noise: LaunchNoise | None = None,
            min_effect: float = DEFAULT_MIN_EFFECT, drift: float = 0.0, alpha: float = 0.05) -> Headline:
    """The headline claim about the best of K tuned sets, before confirmation.

    Every set is compared with :func:`compare` at the Bonferroni level ``1 - alpha / K``
    (K = ``len(sets)``, the sets judged; Dunn, JASA 56, 1961). Simultaneous Bonferroni intervals
    keep the chance that any of the K "faster" claims is false at most ``alpha`` whatever the
    dependence between them (all share the baseline), so it also covers the claim about
    whichever set is picked afterwards as the best; Holm's step-down gains nothing for the first
    (strongest) claim, which is the one the headline makes, and has no matching intervals.
    The winner is the set with the highest ratio among those ``FASTER`` at that level.
    ``noise`` as in :func:`compare` (None: estimated from the baseline and these sets).
    Returns a :class:`Headline`; ``best``/``winner`` index ``sets``.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"best_of: alpha must be in (0, 1), got {alpha}")
    k = len(sets)
    confidence = 1.0 - alpha / max(k, 1)
    if k == 0:
        return Headline(None, None, None, 0, confidence)
    if noise is None:
        noise = launch_noise(baseline, sets)
    comps = [compare(s, baseline, noise=noise, min_effect=min_effect, drift=drift, confidence=confidence)
             for s in sets]
    best = max(range(k), key=lambda i: comps[i].ratio)
    winners = [i for i in range(k) if comps[i].verdict is Verdict.FASTER]
    winner = max(winners, key=lambda i: comps[i].ratio) if winners else None
    return Headline(best, winner, comps[winner if winner is not None else best], k, confidence)


def confirmed(winner_new: Launches, baseline_new: Launches, *, noise: LaunchNoise,
              alpha: float = 0.05) -> Comparison:
    """Does the winner's gain hold on its confirmation relaunches alone?

    ``winner_new`` / ``baseline_new``: only the launches made for the confirmation (normally one
    each, alternating), so the selection of the winner cannot bias them. Confirmed when the
    one-sided ``1 - alpha`` lower confidence bound of the ratio (the lower end of the two-sided
    ``1 - 2 alpha`` interval of :func:`compare`, launch noise included) is above 1: the winner is
    faster on fresh launches. How much faster was already judged (against ``min_effect``) on
    all launches. ``noise``: the study's :func:`launch_noise` (with one launch a side, the new
    launches alone cannot estimate it). Returns the comparison on the new launches with verdict
    ``FASTER`` (confirmed) or ``FAILED_CONFIRMATION`` (or ``NOT_ENOUGH_RUNS``) and a note.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"confirmed: alpha must be in (0, 0.5), got {alpha}")
    c = compare(winner_new, baseline_new, noise=noise, min_effect=0.0, confidence=1.0 - 2.0 * alpha)
    if c.verdict is Verdict.NOT_ENOUGH_RUNS:
        return c
    bound = f"one-sided {(1 - alpha) * 100:g} % lower bound {c.ci_low:.3f}"
    if c.ci_low > 1.0:
        return Comparison(c.ratio, c.ci_low, c.ci_high, Verdict.FASTER,
                          f"confirmed on the new launches alone: {c.gain_pct:+.1f} %, {bound} > 1")
    return Comparison(c.ratio, c.ci_low, c.ci_high, Verdict.FAILED_CONFIRMATION,
                      f"not confirmed on the new launches: {c.gain_pct:+.1f} %, {bound} <= 1")


def runs_for_precision(baseline_runs: Launches, ci_target: float, max_runs: int, *,
                       noise: LaunchNoise | None = None, min_runs: int = MIN_RUNS) -> int:
    """Runs per launch for the next trial, fixed before it starts from the baseline's run noise.

    Rule: the smallest ``n`` in ``[min_runs, max_runs]`` with
    ``t_{n-1, 0.975} * sigma_w / sqrt(n) <= ci_target`` (``sigma_w``: the baseline's pooled
    within-launch SD of log tok/s, :func:`run_noise`; ``ci_target``: the wanted 95 % half-width
    of one launch's level, a fraction), but no more than ``ceil(4 sigma_w^2 / sigma_L^2)``: past
    that the runs' share of a launch's variance is under a fifth, so even infinitely many runs
    would narrow a comparison by less than 11 %, since more runs cannot shrink the launch noise.
    The trial's own runs never enter, so stopping cannot follow the trial's luck (the bias of
    stopping when its own interval looks narrow). ``max_runs`` when the baseline has no launch
    with 2 runs. Raises ValueError when ``max_runs < 1`` or ``ci_target <= 0``.
    """
    if max_runs < 1 or not ci_target > 0:
        raise ValueError(f"runs_for_precision: need max_runs >= 1 and ci_target > 0, got {max_runs}, {ci_target}")
    lo = min(min_runs, max_runs)
    sw, df = run_noise(baseline_runs)
    if df == 0:
        return max_runs
    sigma_l = (noise or launch_noise(baseline_runs)).sigma
    cap = max_runs if sigma_l <= 0 else max(lo, math.ceil(4.0 * sw * sw / (sigma_l * sigma_l)))
    for n in range(lo, max_runs + 1):
        if n >= cap or float(sps.t.ppf(0.975, n - 1)) * sw / math.sqrt(n) <= ci_target:
            return n
    return max_runs


def min_detectable_effect(*, run_sigma: float, noise: LaunchNoise, runs_per_launch: int,
                          baseline_launches: int, trial_launches: int = 1,
                          baseline_runs_per_launch: int | None = None, min_effect: float = DEFAULT_MIN_EFFECT,
                          alpha: float = 0.05, power: float = 0.8, sets: int = 1) -> float:
    """Smallest true gain (fraction) that :func:`compare` calls ``FASTER`` with probability ``power``.

    For the test actually run: log ratio over the same standard error as :func:`compare`
    (``run_sigma``: within-launch SD of log tok/s, e.g. from :func:`run_noise`; ``noise``: the
    launch noise; ``runs_per_launch`` for the trial, ``baseline_runs_per_launch`` (default the
    same) for the baseline; launches per side), the same Satterthwaite degrees of freedom, the
    two-sided level ``alpha / sets`` (``sets`` > 1 for the Bonferroni headline of
    :func:`best_of`). The gain must clear both rules of ``FASTER``: the interval above 1, solved
    with the noncentral t (power of the t test, e.g. Cohen, *Statistical Power Analysis*, 1988,
    ch. 2), and the point estimate at least ``min_effect``: ``log(1 + min_effect) + z_power * se``.
    The drift guard is not modelled. ``inf`` without run noise to go on. Checked by simulation in
    tests/unit/judging/test_power.py.
    """
    if runs_per_launch < 1 or baseline_launches < 1 or trial_launches < 1 or sets < 1:
        raise ValueError("min_detectable_effect: runs, launches and sets must be >= 1")
    if not math.isfinite(run_sigma) or run_sigma < 0:
        return math.inf
    n_b = baseline_runs_per_launch or runs_per_launch
    df_wt = trial_launches * (runs_per_launch - 1)
    df_wb = baseline_launches * (n_b - 1)
    if df_wt == 0 and df_wb == 0:
        return math.inf
    df_wt, df_wb = df_wt or df_wb, df_wb or df_wt
    se, df = _se_df([(noise.sigma**2 * (1.0 / trial_launches + 1.0 / baseline_launches), noise.df),
                     (run_sigma**2 / (trial_launches * runs_per_launch), df_wt),
                     (run_sigma**2 / (baseline_launches * n_b), df_wb)])
    if se <= 0:
        return min_effect
    t_crit = float(sps.t.ppf(1.0 - alpha / sets / 2.0, df))
    ncp = optimize.brentq(lambda d: float(sps.nct.sf(t_crit, df, d)) - power, 0.0, t_crit + 50.0)
    delta = max(ncp * se, math.log1p(min_effect) + float(sps.norm.ppf(power)) * se)
    return math.expm1(delta)


def median_ci_halfwidth(runs: Sequence[float], *, confidence: float = 0.95, seed: int = 0) -> float:
    """Half-width of the 95 % CI of one launch's tok/s, as a fraction of its median.

    The larger of the bootstrap CI of the median (scipy.stats.bootstrap, percentile) and the
    Student t interval of the mean (``t_{n-1} * s / sqrt(n)``): with the 3-5 runs a relaunch
    affords the percentile bootstrap under-covers (Efron & Tibshirani, *An Introduction to the
    Bootstrap*, 1993, ch. 13). Run noise only: it says nothing about launch-to-launch noise. Used
    by ``--target``; ``inf`` below 2 runs.
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


def level(launches: Launches) -> float:
    """A set's level in tok/s: geometric mean of its launches' geometric means (as
    :func:`compare` uses). Raises ValueError on an empty set or tok/s <= 0 or NaN."""
    logs = _logs(launches, "level")
    if not logs:
        raise ValueError("level needs at least one run")
    return math.exp(_side(logs).level)


def drift(baseline_medians: Sequence[float]) -> float:
    """How far the baseline moved across its launches: max/min - 1 of their medians (fraction),
    0 for fewer than two."""
    vals = [v for v in baseline_medians if v and not math.isnan(v)]
    if len(vals) < 2:
        return 0.0
    return max(vals) / min(vals) - 1.0
