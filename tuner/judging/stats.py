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
from scipy import special  # the distributions' own functions: scipy.stats costs a start-up second to import

from tuner.record import Verdict

__all__ = [
    "DEFAULT_MIN_EFFECT",
    "MIN_RUNS",
    "PRIOR_LAUNCH_DF",
    "PRIOR_LAUNCH_SIGMA",
    "Comparison",
    "Headline",
    "LaunchNoise",
    "best_of",
    "chi2_quantile",
    "compare",
    "confirmed",
    "drift",
    "gain_pct",
    "interpolation_weights",
    "launch_level",
    "launch_noise",
    "level",
    "low_runs",
    "median_ci_halfwidth",
    "min_detectable_effect",
    "normal_pdf",
    "null_spread",
    "recommendable_gain",
    "robust_run_sigma",
    "run_noise",
    "runs_for_precision",
    "t_quantile",
    "trend",
    "verdict_words",
]

def gain_pct(ratio: float) -> float:
    """A ratio to the baseline (set level / baseline level) as a change in percent:
    ``(ratio - 1) * 100`` (1.05 -> +5.0; NaN stays NaN). The one place every output turns a
    ratio or an interval bound into the ``+5.0 %`` it shows."""
    return (ratio - 1.0) * 100.0


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
#: Per step of :func:`null_spread`'s forward search, the chance that a no-effect set is taken for
#: one with an effect (simulated: about 3 % of nights of 7 normal sets lose one).
NULL_CUT_ALPHA = 0.05
#: Fewest runs per launch :func:`runs_for_precision` returns (two leave 1 degree of freedom).
MIN_RUNS = 3


@dataclass(frozen=True)
class LaunchNoise:
    """Launch-to-launch noise: ``sigma`` (SD of log tok/s between launches of one set, a
    fraction): the one every interval uses (see :func:`launch_noise`).

    ``df`` is its degrees of freedom. ``launches`` counts the launches it was estimated from (those
    of sets with 2+ launches), ``baseline_launches`` how many of them were the baseline's, ``sets``
    those sets. ``data_sigma`` is the data-only estimate (None without data) on ``data_df`` df,
    ``null_sets`` the sets measured once whose spread around the baseline entered it (0: none),
    ``prior_sigma``/``prior_df`` the prior, ``shrunk_sigma`` data and prior pooled. ``above_prior``
    when the data's estimate is significantly above the prior (chi-square, 95 %): ``sigma`` is
    then the data's. ``prior_dominates`` when the prior weighs at least as much as the data.
    """

    sigma: float
    df: float
    launches: int
    baseline_launches: int
    sets: int
    data_sigma: float | None
    prior_sigma: float
    prior_df: float
    shrunk_sigma: float | None = None
    data_df: float = 0.0
    null_sets: int = 0
    above_prior: bool = False

    @property
    def prior_dominates(self) -> bool:
        """True when the prior's pseudo-count is at least the data's degrees of freedom."""
        return self.prior_df >= self.data_df

    def describe(self) -> str:
        """One phrase for the report, e.g. ``launch-to-launch noise ~0.8 % (from 3 baseline
        launches and a prior of 1.75 %; the data alone: 0.6 %)``."""
        prior = f"a prior of {self.prior_sigma * 100:g} %"
        if self.data_sigma is None:
            return f"launch-to-launch noise ~{self.sigma * 100:.1f} % ({prior} alone: no set was measured over 2 launches)"
        others = self.launches - self.baseline_launches
        parts = []
        if self.baseline_launches:
            parts.append(f"{self.baseline_launches} baseline launch{_es(self.baseline_launches)}")
        if others:
            parts.append(f"{others} launch{_es(others)} of tuned sets")
        if self.null_sets:
            parts.append(f"the spread of {self.null_sets} sets measured once")
        source = ", ".join(parts)
        # A zero is the method-of-moments estimate truncated: the launches differ less than their runs do.
        data = f"{self.data_sigma * 100:.1f} %" if self.data_sigma >= 0.0005 else \
            "under 0.1 %, the launches differing no more than their runs explain"
        if self.above_prior:
            shrunk = self.shrunk_sigma if self.shrunk_sigma is not None else self.sigma
            return (f"launch-to-launch noise ~{self.sigma * 100:.1f} % (the data's own estimate, from {source}: "
                    f"well above {prior}; with the prior it would be {shrunk * 100:.1f} %)")
        weighs = ", which weighs most" if self.prior_dominates else ""
        return f"launch-to-launch noise ~{self.sigma * 100:.1f} % (from {source} and {prior}{weighs}; the data alone: {data})"


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
        """:func:`gain_pct` of :attr:`ratio`."""
        return gain_pct(self.ratio)


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


#: Variance of a launch's robust level relative to the mean's (``var * n / sigma_w^2``) for n
#: normal runs: the median for n <= 4, Huber (k = 1.345, its own MAD scale) from 5. Simulated,
#: 200 000 draws each (the Huber mean's asymptotic 1/0.95 is reached from about 8 runs).
_LEVEL_EFFICIENCY = (1.0, 1.0, 1.0, 1.341, 1.188, 1.115, 1.095, 1.089, 1.074)
#: The same for the Huber mean at a known scale (the night's robust run SD), from 3 runs.
_SCALED_EFFICIENCY = 1.04
#: Huber's tuning constant (95 % efficiency at the normal; Huber, Ann. Math. Statist. 35, 1964).
HUBER_K = 1.345
#: A run more than this many robust run SDs below its launch's level is flagged (a hiccup).
HICCUP_SDS = 4.0
#: MAD to SD at the normal, and the SD of a difference of two runs (sqrt 2) times it: the median
#: absolute difference of two runs of a launch is 0.6745 * sqrt(2) sigma_w = 0.9539 sigma_w.
_MAD_SD = 1.4826
_PAIR_MEDIAN = 0.9539


def _efficiency(n: int, scaled: bool = False) -> float:
    if n <= 2:
        return 1.0
    if scaled:
        return _SCALED_EFFICIENCY
    return _LEVEL_EFFICIENCY[n] if n < len(_LEVEL_EFFICIENCY) else 1.07


def _known(scale: float | None) -> bool:
    return scale is not None and math.isfinite(scale) and scale > 0


def _huber(y: np.ndarray, scale: float) -> float:
    """Huber M-estimate of location of ``y`` at a fixed ``scale`` (iteratively reweighted mean,
    started at the median); the median when the scale is 0."""
    m = float(np.median(y))
    if not scale > 0:
        return m
    for _ in range(50):
        r = np.abs(y - m) / scale
        w = np.minimum(1.0, HUBER_K / np.maximum(r, 1e-12))
        new = float((w * y).sum() / w.sum())
        if abs(new - m) < 1e-12:
            break
        m = new
    return m


def _robust_log_level(y: np.ndarray, scale: float | None = None) -> float:
    """One launch's level on the log scale. With the night's robust run SD ``scale`` known: the
    Huber mean at that scale from 3 runs (4 % above the mean's variance, where the median of 3-4
    costs 19-34 %; a hiccup moves either by about half a run SD). Without it: the median of up to
    4 runs, the Huber mean at the launch's own MAD from 5."""
    if y.size <= 2:
        return float(y.mean())
    if _known(scale):
        return _huber(y, float(scale))  # type: ignore[arg-type]
    if y.size <= 4:
        return float(np.median(y))
    return _huber(y, _MAD_SD * float(np.median(np.abs(y - np.median(y)))))


def _pair_sigma(logs: Sequence[np.ndarray]) -> float:
    """Robust run SD from the median absolute difference of two runs of one launch, pooled over
    every pair of runs of every launch (launch effects cancel in a difference; a hiccup spoils
    only its own pairs). NaN without a launch of 2 runs."""
    diffs = [np.abs(y[:, None] - y[None, :])[np.triu_indices(y.size, 1)] for y in logs if y.size >= 2]
    if not diffs:
        return math.nan
    return float(np.median(np.concatenate(diffs))) / _PAIR_MEDIAN


def _kept(y: np.ndarray, level: float, scale: float) -> np.ndarray:
    """The runs of one launch that are not far below its level (:data:`HICCUP_SDS`)."""
    if not (math.isfinite(scale) and scale > 0):
        return y
    return y[y >= level - HICCUP_SDS * scale]


@dataclass(frozen=True)
class _Side:
    """One side of a comparison on the log scale: its level (a weighted mean of launch levels)
    and the parts of its variance."""

    level: float
    launch_w2: float  # sum of squared launch weights: the launch-noise weight
    run_w: float      # sum_i w_i^2 eff(n_i) / n_i: the run-noise weight
    sw2: float        # pooled within-launch variance of log tok/s (flagged runs left out)
    df_w: int         # its degrees of freedom: kept runs - launches


def _side(logs: list[np.ndarray], weights: Sequence[float] | None = None, scale: float | None = None) -> _Side:
    k = len(logs)
    w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, dtype=float)
    if scale is None:
        scale = _pair_sigma(logs)
    levels = [_robust_log_level(y, scale) for y in logs]
    kept = [_kept(y, m, scale) for y, m in zip(logs, levels, strict=True)]
    ss = sum(float(((y - y.mean()) ** 2).sum()) for y in kept if y.size)
    df_w = sum(y.size for y in kept) - sum(1 for y in kept if y.size)
    return _Side(level=float(np.dot(w, levels)), launch_w2=float(np.dot(w, w)),
                 run_w=float(sum(wi * wi * _efficiency(y.size, _known(scale)) / y.size
                                 for wi, y in zip(w, logs, strict=True))),
                 sw2=ss / df_w if df_w > 0 else math.nan, df_w=df_w)


def run_noise(launches: Launches, *, scale: float | None = None) -> tuple[float, int]:
    """Within-launch run noise of a set: pooled SD of log tok/s around each launch's mean (a
    fraction), and its degrees of freedom (kept runs - launches), leaving out the runs far below
    their launch (:func:`low_runs`, judged at ``scale``: the night's robust run SD, default this
    set's own, :func:`robust_run_sigma`). ``(nan, 0)`` when no launch has 2 runs. Raises
    ValueError on tok/s <= 0 or NaN."""
    s = _side(_logs(launches, "run_noise"), scale=scale)
    return (math.sqrt(s.sw2), s.df_w) if s.df_w > 0 else (math.nan, 0)


def robust_run_sigma(launches: Launches) -> float:
    """A run SD of log tok/s (fraction) that a hiccup cannot move: the median absolute difference
    of two runs of one launch over every pair of every launch, / 0.9539 (its value at the normal:
    0.6745 * sqrt 2). NaN without a launch of 2 runs. Raises ValueError on tok/s <= 0 or NaN."""
    return _pair_sigma(_logs(launches, "robust_run_sigma"))


def launch_level(runs: Sequence[float], *, scale: float | None = None) -> float:
    """One launch's level in tok/s, which one hiccup cannot move: the Huber M-estimate
    (k = :data:`HUBER_K`; Huber, Ann. Math. Statist. 35, 1964) of log tok/s at ``scale`` (the
    night's robust run SD, :func:`robust_run_sigma`) from 3 runs; without a scale the median of
    up to 4 runs (on the log scale) and the Huber mean at the launch's own MAD from 5; the mean of
    1-2 runs. Raises ValueError on no run or tok/s <= 0 or NaN."""
    logs = _logs([runs], "launch_level")
    if not logs:
        raise ValueError("launch_level needs at least one run")
    return math.exp(_robust_log_level(logs[0], scale))


def low_runs(launches: Launches, *, scale: float | None = None) -> list[tuple[int, int, float]]:
    """The runs far below their launch: ``(launch index, run index, ratio to the launch's level)``
    for each run more than :data:`HICCUP_SDS` robust run SDs (``scale``, default
    :func:`robust_run_sigma` of ``launches``) below its launch's :func:`launch_level`. These are
    left out of the run noise; the level itself already resists them."""
    out: list[tuple[int, int, float]] = []
    logs = [np.log(np.asarray(r, dtype=float)) if len(r) else np.zeros(0) for r in launches]
    if scale is None:
        scale = _pair_sigma([y for y in logs if y.size])
    if not (scale is not None and math.isfinite(scale) and scale > 0):
        return out
    for i, y in enumerate(logs):
        if y.size < 3:
            continue
        m = _robust_log_level(y, scale)
        out += [(i, j, math.exp(v - m)) for j, v in enumerate(y) if v < m - HICCUP_SDS * scale]
    return out


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile: the ``t`` with ``P(T <= t) = q`` at ``df`` degrees of freedom
    (a float, as Welch-Satterthwaite gives; ``inf`` is the normal). ``scipy.special.stdtrit``,
    what ``scipy.stats.t.ppf`` calls."""
    return float(special.stdtrit(df, q))


def chi2_quantile(q: float, df: float) -> float:
    """The chi-square quantile: ``x`` with ``P(X <= x) = q`` at ``df`` degrees of freedom
    (``scipy.special.chdtri`` of the upper tail, as ``scipy.stats.chi2.ppf``)."""
    return float(special.chdtri(df, 1.0 - q))


def normal_pdf(z: float) -> float:
    """The standard normal density at ``z``: ``exp(-z^2 / 2) / sqrt(2 pi)``."""
    return math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _central_sd(fraction: float) -> float:
    """The SD of the central ``fraction`` of a standard normal (a normal truncated at +-z,
    ``z = Phi^-1((1 + fraction) / 2)``: ``sqrt(1 - 2 z phi(z) / fraction)``), 1 for all of it."""
    if fraction >= 1.0:
        return 1.0
    z = float(special.ndtri(0.5 + fraction / 2.0))
    return math.sqrt(1.0 - 2.0 * z * normal_pdf(z) / fraction)


def null_spread(log_ratios: Sequence[float], *, run_sigma: float = 0.0, runs_per_launch: int = 1,
                min_sets: int = 6, baseline_weights: Sequence[Sequence[float]] | None = None,
                baseline_runs: Sequence[int] | None = None) -> tuple[float, float, int] | None:
    """The launch noise the sets measured once say, most of them having no effect (the empirical
    null of Efron, JASA 99, 2004), from their log ratios to the baseline (``log_ratios``).

    Which sets have no effect is found by a forward search (Atkinson & Riani, *Robust Diagnostic
    Regression Analysis*, 2000, ch. 2): start from the shortest half (the shorth, which sets with
    real effects on either side cannot move while they are fewer than half), then add the set
    nearest the kept sets' mean while it lies inside their ``1 - NULL_CUT_ALPHA`` prediction
    interval (Student t on m - 1 df, ``s sqrt(1 + 1/m)``, ``s`` made consistent for the central
    ``m / n`` of a normal that the kept sets are under the null); the sets left outside are taken to have
    an effect. A fixed cut at 3 SDs of the iterated trimmed spread, tried first, cut a no-effect
    set in 30-50 % of simulated nights of 6-10 sets and halved the estimate when it did, so that
    the sets it cut were then called faster or slower (issue 21). The SD of the kept sets, minus
    the runs' part (the variance of one launch's robust level of ``runs_per_launch`` runs of SD
    ``run_sigma``), is the estimate, on kept - 1 degrees of freedom.

    With ``baseline_weights`` (one vector per log ratio: the weights of the baseline launches it
    was taken against, :func:`interpolation_weights`) and ``baseline_runs`` (runs of each baseline
    launch): sets taken against different baseline launches also spread by those launches' noise
    (``E[s^2] = sigma^2 (1 + sum_i |w_i - w|^2 / (m - 1))``, ``w`` the kept sets' mean weight
    vector), which is taken out; and the kept sets' mean distance from 0 adds one degree of
    freedom: under the null it has variance ``sigma^2 (1 / m + |w|^2)`` plus the runs' part. The
    baseline launches share that error with every set, so sets that sit together far from the
    baseline say the baseline's launches were off (which a spread around the sets' own centre
    cannot see).

    Returns ``(sigma, df, sets)`` (sigma: a fraction; sets: how many were kept as no-effect), or
    None with fewer than ``min_sets`` finite log ratios."""
    pairs = sorted((float(v), i) for i, v in enumerate(log_ratios) if math.isfinite(v))
    x = np.asarray([v for v, _ in pairs], dtype=float)
    n = x.size
    if n < min_sets:
        return None
    h = n // 2 + 1
    lo = int(np.argmin(x[h - 1:] - x[:n - h + 1]))
    hi = lo + h  # the kept sets are x[lo:hi]: in one dimension the search only ever grows its ends
    while lo > 0 or hi < n:
        seg = x[lo:hi]
        m, mu = seg.size, float(seg.mean())
        sd = float(seg.std(ddof=1)) / _central_sd(m / n)
        left = mu - x[lo - 1] if lo > 0 else math.inf
        right = x[hi] - mu if hi < n else math.inf
        if min(left, right) > t_quantile(1.0 - NULL_CUT_ALPHA / 2.0, m - 1) * sd * math.sqrt(1.0 + 1.0 / m):
            break
        lo, hi = (lo - 1, hi) if left <= right else (lo, hi + 1)
    kept = x[lo:hi]
    m = kept.size
    run_var = run_sigma**2 * _efficiency(runs_per_launch, True) / runs_per_launch if math.isfinite(run_sigma) else 0.0
    var = float(kept.var(ddof=1))
    df = float(m - 1)
    if baseline_weights is not None and baseline_runs is not None:
        ws = np.array([np.asarray(baseline_weights[pairs[k][1]], dtype=float) for k in range(lo, hi)])
        w = ws.mean(axis=0)
        var /= 1.0 + float(((ws - w) ** 2).sum()) / (m - 1)
        base_run = sum(float(wi) ** 2 * run_sigma**2 * _efficiency(max(r, 1), True) / max(r, 1)
                       for wi, r in zip(w, baseline_runs, strict=True)) if math.isfinite(run_sigma) else 0.0
        centre = (float(kept.mean()) ** 2 - run_var / m - base_run) / (1.0 / m + float(np.dot(w, w)))
        var = (df * (var - run_var) + max(centre, 0.0)) / (df + 1.0) + run_var
        df += 1.0
    return math.sqrt(max(var - run_var, 0.0)), df, m


def launch_noise(baseline: Launches, others: Sequence[Launches] = (), *,
                 null: tuple[float, float, int] | None = None, scale: float | None = None,
                 prior_sigma: float = PRIOR_LAUNCH_SIGMA, prior_df: float = PRIOR_LAUNCH_DF) -> LaunchNoise:
    """Estimate the launch-to-launch noise from the baseline's and other sets' launches.

    ``baseline`` and each of ``others`` are :data:`Launches` (per-run tok/s); only sets with 2+
    launches carry information. Method: the ANOVA (method-of-moments) estimator of the
    between-launch variance component (Searle, Casella & McCulloch, *Variance Components*, 1992,
    ch. 3) on the robust launch levels (:func:`launch_level`): per set of k launches,
    ``E[sum_i (m_i - mean m)^2] = (k - 1) sigma_L^2 + (1 - 1/k) sum_i c_i sigma_w^2`` with
    ``c_i = eff(n_i) / n_i`` the variance of a level from its runs, solved for ``sigma_L^2`` over
    the sets pooled and truncated at 0; ``sigma_w``: the pooled run noise (hiccups left out,
    judged at ``scale``). ``null``: ``(sigma, df, sets)`` of :func:`null_spread`, pooled with it by df.
    That is the data's own estimate (``data_sigma``, ``data_df``).

    It is then pooled with the prior as a scaled inverse-chi-square pseudo-sample (the moderated
    variance of Smyth, Stat. Appl. Genet. Mol. Biol. 3(1), article 3, 2004):
    ``shrunk^2 = (prior_df * prior_sigma^2 + d * data^2) / (prior_df + d)``, ``df = prior_df + d``.
    When the data's estimate is significantly above the prior (``d * data^2 / prior^2`` above the
    95 % chi-square quantile on ``d`` df), the prior is wrong for this night: ``sigma`` is then
    ``max(shrunk, data)`` on ``max(d, prior_df)`` df and ``above_prior`` is set (the report warns).

    Why not a fitted mixed model: with two or three launches REML/ML often lands on the boundary
    (statsmodels' MixedLM returned a zero launch variance in 3 of 20 simulated fits with two
    launches), and a zero makes every later interval too narrow.

    ``prior_sigma`` (fraction, >= 0) and ``prior_df`` (> 0) default to :data:`PRIOR_LAUNCH_SIGMA`
    and :data:`PRIOR_LAUNCH_DF`. Raises ValueError on tok/s <= 0 or NaN, or a bad prior.
    """
    if not (prior_sigma >= 0 and prior_df > 0 and math.isfinite(prior_sigma) and math.isfinite(prior_df)):
        raise ValueError(f"launch_noise: prior_sigma must be >= 0 and prior_df > 0, got {prior_sigma}, {prior_df}")
    ssb = ssw = run_coef = 0.0
    contrasts = df_w = launches = base_launches = sets = 0
    for index, launch_set in enumerate([baseline, *others]):
        logs = _logs(launch_set, "launch_noise")
        if len(logs) < 2:
            continue
        side_scale = scale if scale is not None else _pair_sigma(logs)
        m = np.array([_robust_log_level(y, side_scale) for y in logs])
        k = len(logs)
        ssb += float(((m - m.mean()) ** 2).sum())
        run_coef += (1.0 - 1.0 / k) * sum(_efficiency(y.size, _known(side_scale)) / y.size for y in logs)
        kept = [_kept(y, mi, side_scale) for y, mi in zip(logs, m, strict=True)]
        ssw += sum(float(((y - y.mean()) ** 2).sum()) for y in kept if y.size)
        df_w += sum(y.size for y in kept) - sum(1 for y in kept if y.size)
        contrasts += k - 1
        launches += k
        base_launches += k if index == 0 else 0
        sets += 1
    parts: list[tuple[float, float]] = []
    if contrasts:
        msw = ssw / df_w if df_w > 0 else 0.0  # one run per launch: all spread is counted as launch noise
        parts.append((max(0.0, (ssb - run_coef * msw) / contrasts), float(contrasts)))
    if null is not None and null[1] > 0:
        parts.append((null[0] ** 2, null[1]))
    if not parts:
        return LaunchNoise(prior_sigma, prior_df, 0, 0, 0, None, prior_sigma, prior_df, prior_sigma)
    d = sum(df for _, df in parts)
    data2 = sum(v * df for v, df in parts) / d
    shrunk = math.sqrt((prior_df * prior_sigma**2 + d * data2) / (prior_df + d))
    above = prior_sigma > 0 and d * data2 / prior_sigma**2 > chi2_quantile(0.95, d)
    # Above the prior the prior is wrong, so only the data's df say how well sigma is known; but
    # no fewer than the prior's: 1-3 df (two baseline launches) would make every interval useless.
    sigma = max(shrunk, math.sqrt(data2)) if above else shrunk
    df = max(d, prior_df) if above else prior_df + d
    return LaunchNoise(sigma, df, launches, base_launches, sets, math.sqrt(data2), prior_sigma, prior_df, shrunk,
                       d, null[2] if null is not None else 0, above)


def _log_ratio(trial: _Side, base: _Side, noise: LaunchNoise) -> tuple[float, float, float]:
    """Log ratio, its standard error and Satterthwaite degrees of freedom (both sides have runs)."""
    return (trial.level - base.level, *_se_df([
        (noise.sigma**2 * (trial.launch_w2 + base.launch_w2), noise.df),
        (trial.sw2 * trial.run_w, trial.df_w), (base.sw2 * base.run_w, base.df_w)]))


def _se_df(parts: list[tuple[float, float]]) -> tuple[float, float]:
    """Standard error of a sum of independent variance estimates ``(variance, df)`` and its
    Satterthwaite degrees of freedom ``V^2 / sum(v_i^2 / df_i)`` (Satterthwaite 1946)."""
    var = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if v > 0)
    return math.sqrt(var), (var * var / denom if denom > 0 else math.inf)


def interpolation_weights(baseline_positions: Sequence[float], position: float) -> np.ndarray:
    """Weights on the baseline launches (at ``baseline_positions``, increasing: their places in
    launch order) that give the baseline level at ``position`` by linear interpolation between
    the two adjacent ones; before the first or after the last, the nearest one alone. Shape
    ``(len(baseline_positions),)``, summing to 1. ValueError without a baseline position."""
    pos = np.asarray(baseline_positions, dtype=float)
    if pos.size == 0:
        raise ValueError("interpolation_weights needs a baseline launch")
    w = np.zeros(pos.size)
    if position <= pos[0]:
        w[0] = 1.0
    elif position >= pos[-1]:
        w[-1] = 1.0
    else:
        hi = int(np.searchsorted(pos, position, side="right"))
        lo = hi - 1
        frac = (position - pos[lo]) / (pos[hi] - pos[lo])
        w[lo], w[hi] = 1.0 - frac, frac
    return w


def compare(trial: Launches, baseline: Launches, *, noise: LaunchNoise | None = None,
            min_effect: float = DEFAULT_MIN_EFFECT, drift: float = 0.0, confidence: float = 0.95,
            baseline_weights: Sequence[float] | None = None, scale: float | None = None) -> Comparison:
    """Compare a tuned set's launches with the baseline's and name the verdict.

    ``trial``, ``baseline``: :data:`Launches` (per-run tok/s, grouped by launch). ``noise``: the
    launch-to-launch noise, normally :func:`launch_noise` over the whole study; None estimates it
    from these two sets alone (with the prior). ``baseline_weights``: one weight per baseline
    launch summing to 1 (default equal): the baseline level at the set's own time, the mean over
    its launches of :func:`interpolation_weights`. ``scale``: the night's robust run SD
    (:func:`robust_run_sigma`; default: of these two sides), which judges the runs far below
    their launch that the run noise leaves out.

    Level of a side: the weighted mean of its launches' robust levels (:func:`launch_level` on
    the log scale: the median of up to 4 runs, the Huber mean of 5+), so one hiccup cannot move
    it; ``ratio`` = exp(trial level - baseline level).

    Interval: ``log ratio +- t_{df, (1+confidence)/2} * se`` with
    ``se^2 = sigma_L^2 (sum w_t^2 + sum w_b^2) + sigma_wt^2 R_t + sigma_wb^2 R_b``,
    ``R = sum_i w_i^2 eff(n_i) / n_i`` for a side with launch weights ``w_i`` and ``n_i`` runs
    (``eff``: the robust level's variance relative to the mean's at the normal, 1.34 for the
    median of 3), ``sigma_w`` each side's pooled within-launch SD (Welch: not assumed equal) and
    ``df`` by Satterthwaite (Biometrics Bull. 2(6), 1946) over the three variance parts.

    Verdicts: ``FASTER`` when the whole interval is above 1 and ``ratio >= 1 + min_effect``;
    ``FASTER_BELOW_MIN`` when it is above 1 but the gain is smaller; ``SLOWER`` /
    ``SLOWER_BELOW_MIN`` symmetrically; ``NO_DIFFERENCE`` when it holds 1; ``NOT_ENOUGH_RUNS`` when
    a side has no launch with 2 runs (interval NaN). Extra guard: a directional verdict becomes
    ``INCONCLUSIVE`` when ``drift`` (fraction, :func:`drift`; judge() passes 0, as it compares
    each set with the baseline at its own time) is at least the gain.
    Raises ValueError on tok/s <= 0 or NaN, an empty side, ``confidence`` outside (0, 1), a
    negative ``min_effect`` or ``drift``, or weights that do not match the baseline's launches;
    TypeError on a flat list of runs instead of launches.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"compare: confidence must be in (0, 1), got {confidence}")
    if not (min_effect >= 0 and drift >= 0):
        raise ValueError(f"compare: min_effect and drift must be >= 0, got {min_effect}, {drift}")
    if baseline_weights is not None:
        if len(baseline_weights) != len(baseline):
            raise ValueError(f"compare: {len(baseline_weights)} baseline weights for {len(baseline)} launches")
        pairs = [(b, w) for b, w in zip(baseline, baseline_weights, strict=True) if len(b) and w > 0]
        baseline = [b for b, _ in pairs]
        total = sum(w for _, w in pairs)
        weights: list[float] | None = [w / total for _, w in pairs] if total > 0 else None
    else:
        weights = None
    t_logs, b_logs = _logs(trial, "compare trial"), _logs(baseline, "compare baseline")
    if not t_logs or not b_logs:
        raise ValueError("compare needs at least one run on each side")
    if weights is not None and len(weights) != len(b_logs):
        weights = None
    if scale is None:
        scale = _pair_sigma(t_logs + b_logs)
    t_side, b_side = _side(t_logs, scale=scale), _side(b_logs, weights, scale)
    ratio = math.exp(t_side.level - b_side.level)
    if t_side.df_w == 0 or b_side.df_w == 0:
        short = "trial" if t_side.df_w == 0 else "baseline"
        return Comparison(ratio, math.nan, math.nan, Verdict.NOT_ENOUGH_RUNS,
                          f"the {short} has no launch with 2 runs, so its run noise is unknown")
    if noise is None:
        noise = launch_noise(baseline, [trial])
    diff, se, df = _log_ratio(t_side, b_side, noise)
    half = t_quantile(0.5 + confidence / 2.0, df) * se if se > 0 else 0.0
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
    if len(b_logs) == 1 and noise.data_sigma is None:
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
              alpha: float = 0.05, scale: float | None = None) -> Comparison:
    """Does the winner's gain hold on its confirmation relaunches alone?

    ``winner_new`` / ``baseline_new``: only the launches made for the confirmation (normally one
    each, alternating), so the selection of the winner cannot bias them. Confirmed when the
    one-sided ``1 - alpha`` lower confidence bound of the ratio (the lower end of the two-sided
    ``1 - 2 alpha`` interval of :func:`compare`, launch noise included) is above 1: the winner is
    faster on fresh launches. How much faster was already judged (against ``min_effect``) on
    all launches. ``noise``: the study's :func:`launch_noise` (with one launch a side, the new
    launches alone cannot estimate it). Returns the comparison on the new launches with verdict
    ``FASTER`` (confirmed) or ``FAILED_CONFIRMATION`` (or ``NOT_ENOUGH_RUNS``) and a note.
    ``alpha``: judge() passes 0.05 / the number of finalists confirmed (Bonferroni over those
    only: the selection among the K sets does not enter the fresh launches). ``scale`` as in
    :func:`compare`.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"confirmed: alpha must be in (0, 0.5), got {alpha}")
    c = compare(winner_new, baseline_new, noise=noise, min_effect=0.0, confidence=1.0 - 2.0 * alpha, scale=scale)
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
        if n >= cap or t_quantile(0.975, n - 1) * sw / math.sqrt(n) <= ci_target:
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
    eff_t, eff_b = _efficiency(runs_per_launch, True), _efficiency(n_b, True)  # the robust levels compare() uses
    se, df = _se_df([(noise.sigma**2 * (1.0 / trial_launches + 1.0 / baseline_launches), noise.df),
                     (run_sigma**2 * eff_t / (trial_launches * runs_per_launch), df_wt),
                     (run_sigma**2 * eff_b / (baseline_launches * n_b), df_wb)])
    if se <= 0:
        return min_effect
    t_crit = t_quantile(1.0 - alpha / sets / 2.0, df)
    ncp = float(special.nctdtrinc(df, 1.0 - power, t_crit))  # the noncentrality whose P(T > t_crit) is power
    delta = max(ncp * se, math.log1p(min_effect) + float(special.ndtri(power)) * se)
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
    from scipy import stats as sps  # imported on first use: about a second of CPU, once per process

    res = sps.bootstrap((x,), np.median, confidence_level=confidence, n_resamples=2000,
                        method="percentile", rng=np.random.default_rng(seed))
    med = float(np.median(x))
    boot = float(res.confidence_interval.high - res.confidence_interval.low) / 2.0 / med
    t_half = t_quantile(0.5 + confidence / 2, x.size - 1) * float(np.std(x, ddof=1)) / math.sqrt(x.size) / med
    return max(boot, t_half)


def level(launches: Launches, *, scale: float | None = None) -> float:
    """A set's level in tok/s: the geometric mean of its launches' robust levels
    (:func:`launch_level`, as :func:`compare` uses). Raises ValueError on an empty set or tok/s
    <= 0 or NaN."""
    logs = _logs(launches, "level")
    if not logs:
        raise ValueError("level needs at least one run")
    return math.exp(_side(logs, scale=scale).level)


def drift(baseline_levels: Sequence[float]) -> float:
    """How far the baseline moved across its launches: max/min - 1 of their levels
    (:func:`launch_level`; fraction), 0 for fewer than two."""
    vals = [v for v in baseline_levels if v and not math.isnan(v)]
    if len(vals) < 2:
        return 0.0
    return max(vals) / min(vals) - 1.0


def trend(positions: Sequence[float], levels: Sequence[float]) -> float:
    """The baseline's fitted drift over the night: the least-squares line of log level against
    launch position, as the fraction it changes from the first position to the last (-0.03: 3 %
    slower at the end). 0 for fewer than two levels."""
    if len(levels) < 2 or len(positions) != len(levels):
        return 0.0
    x = np.asarray(positions, dtype=float)
    y = np.log(np.asarray(levels, dtype=float))
    if np.ptp(x) == 0:
        return 0.0
    slope = float(np.polyfit(x, y, 1)[0])
    return math.expm1(slope * float(np.ptp(x)))


def recommendable_gain(*, run_sigma: float, noise: LaunchNoise, runs_per_launch: int, finalists: int = 1,
                       set_launches: int = 1, min_effect: float = DEFAULT_MIN_EFFECT, alpha: float = 0.05,
                       power: float = 0.8) -> float:
    """Smallest true gain (fraction) the night recommends with probability ``power``: the test
    the claim rests on, ``set_launches`` fresh launches of the finalist against one fresh baseline
    launch of ``runs_per_launch`` runs each, one-sided at ``alpha / finalists`` with the launch noise
    ``noise`` (its sigma and df) and the run noise ``run_sigma`` (times the robust level's
    efficiency), by the noncentral t (:func:`min_detectable_effect`), and at least ``min_effect``
    (the set must be that much faster on all its launches). It assumes the set was selected as a
    finalist, which a gain this size among no-effect sets nearly always is. ``inf`` without run
    noise to go on."""
    if finalists < 1 or runs_per_launch < 1 or set_launches < 1:
        raise ValueError("recommendable_gain: finalists, launches and runs must be >= 1")
    if not math.isfinite(run_sigma):
        return math.inf
    g = min_detectable_effect(run_sigma=run_sigma, noise=noise, runs_per_launch=runs_per_launch,
                              baseline_launches=1, trial_launches=set_launches, min_effect=0.0,
                              alpha=2.0 * alpha / finalists, power=power)
    return max(g, min_effect)
