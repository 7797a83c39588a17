"""Calibration of the verdicts: how often they lie, and how often they find a real gain.

A Monte Carlo against the real statistics code (tuner.judging.stats), and, side by side, against the
statistics before issue 10 (``old_compare`` below, a verbatim copy). Every simulated tok/s is
lognormal with two levels of noise: per launch ``exp(N(0, launch_sigma))`` shared by the runs of
one relaunch, per run ``exp(N(0, run_sigma))``. No server is started.

Per-set table (one tuned set of one launch against a baseline of ``base`` launches):

- ``FP``: share of sets called "faster" or "slower" at a true ratio of 1.00 (the verdicts a
  user acts on; ``INCONCLUSIVE`` and "below the minimum effect" do not count);
- ``FP -drift``: the same without the drift guard (``after`` only);
- ``CI!=1``: share of intervals excluding 1 at 1.00 (the interval's own calibration, 5 % ideal);
- ``power``: share called "faster" at a true +5 % (``--gain``); ``-drift`` without the drift guard.
- ``MDE``: the smallest gain tuner.judging.stats.min_detectable_effect claims for that design.

``before`` compares the trial's runs with the first baseline launch's runs (what the old report
did for a trial between the first and the last baseline) with the old drift rule over all
baseline launches; ``after`` compares launches with launches (tuner.judging.stats.compare), the launch
noise estimated from the baseline's launches and the prior, and the same drift rule.

Headline table (``sets`` tuned sets, each one launch; the sweep's claim "X is faster, use it"):

- ``use-it FP``: share of sweeps of ``sets`` no-effect sets whose headline says "use it";
- ``power``: share of sweeps with one set truly +5 % (``--gain``) or +15 % (``--headline-gain``)
  among them whose headline names it.

``before``: the highest median, when its old verdict is "faster". ``after``: tuner.judging.stats.best_of
(Bonferroni over the sets), then with ``+confirm`` the winner and the baseline relaunched once
more and tuner.judging.stats.confirmed on those launches alone.

``auto`` rows: before, each launch adds runs until the old median CI half-width is under 1 %
(at most 15: optional stopping on the launch's own data); after, the first baseline launch makes
15 runs and every later launch the count tuner.judging.stats.runs_for_precision picks from it.

Run: ``python benchmarks/verdict_calibration.py`` (a few minutes on one core; ``--full`` for
the whole grid, much longer; ``--pairs`` to trade precision for time: the standard error of a
5 % rate over 2000 pairs is 0.5 %).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.judging import stats
from tuner.record import Verdict

CI_TARGET = 0.01   # probe.ci_target default
MAX_REPEATS = 15   # probe.max_repeats default


# ---------------------------------------------------------------------------------------------
# OLD statistics: a verbatim copy of tuner/judging/stats.py before issue 10 (runs treated as independent).
# Only for the "before" columns; nothing else uses it.
# ---------------------------------------------------------------------------------------------

OLD_FASTER, OLD_SLOWER, OLD_NO_DIFF = "faster", "slower", "no significant difference"
OLD_NOT_ENOUGH = "not enough runs to judge"


@dataclass(frozen=True)
class OldComparison:
    """OLD: a trial against the baseline: ``ratio`` of medians, its 95 % CI, and the ``verdict``."""

    ratio: float
    ci_low: float
    ci_high: float
    verdict: str


def _old_median_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def old_ratio_ci(trial: Sequence[float], baseline: Sequence[float], *, confidence: float = 0.95,
                 n_resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """OLD: percentile bootstrap of the ratio of medians, widened to Welch's t on log tok/s."""
    x = np.asarray(trial, dtype=float)
    y = np.asarray(baseline, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("ratio_ci needs at least one run on each side")
    ratio = float(np.median(x) / np.median(y))
    if x.size < 2 or y.size < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return ratio, ratio, ratio
    res = sps.bootstrap((x, y), _old_median_ratio, confidence_level=confidence, n_resamples=n_resamples,
                        method="percentile", vectorized=True, paired=False,
                        rng=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    welch = sps.ttest_ind(np.log(x), np.log(y), equal_var=False).confidence_interval(confidence)
    if np.isfinite(welch.low) and np.isfinite(welch.high):
        low, high = min(low, float(np.exp(welch.low))), max(high, float(np.exp(welch.high)))
    return ratio, min(low, ratio), max(high, ratio)


def old_compare(trial: Sequence[float], baseline: Sequence[float], *,
                min_effect: float = 0.01, drift: float = 0.0) -> OldComparison:
    """OLD: compare a trial's runs with the baseline's runs (every run independent)."""
    ratio, low, high = old_ratio_ci(trial, baseline)
    if len(trial) < 2 or len(baseline) < 2:
        return OldComparison(ratio, low, high, OLD_NOT_ENOUGH)
    if low > 1.0 and ratio >= 1.0 + min_effect:
        verdict = OLD_FASTER
    elif high < 1.0 and ratio <= 1.0 - min_effect:
        verdict = OLD_SLOWER
    else:
        verdict = OLD_NO_DIFF
    if drift > 0 and verdict in (OLD_FASTER, OLD_SLOWER) and drift >= abs(ratio - 1.0):
        verdict = f"inconclusive (baseline drifted {drift * 100:.1f} %)"
    return OldComparison(ratio, low, high, verdict)


def old_median_ci_halfwidth(runs: Sequence[float], *, confidence: float = 0.95, seed: int = 0) -> float:
    """OLD: half-width of the CI of one set's median (bootstrap or t, the larger), as a fraction."""
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

# --------------------------------------------------------------------------------- end of OLD


@dataclass(frozen=True)
class Cell:
    """One simulated design: noise (fractions, 1 sigma), runs per launch (``auto``: chosen by the
    rule), baseline launches, tuned sets (1: the per-set table)."""

    run_sigma: float
    launch_sigma: float
    runs: int | str
    base: int
    sets: int = 1

    def label(self) -> str:
        return (f"{self.run_sigma * 100:4.1f} | {self.launch_sigma * 100:4.1f} | {self.runs!s:>4} | "
                f"{self.base} | {self.sets:2d}")


LABEL_HEAD = "run % | launch % | runs | base | sets"


class Launcher:
    """Simulated relaunches of one server: ``launch(ratio, n)`` returns n runs (tok/s)."""

    def __init__(self, rng: np.random.Generator, cell: Cell, level: float = 80.0) -> None:
        self.rng, self.cell, self.level = rng, cell, level

    def launch(self, ratio: float, n: int) -> list[float]:
        factor = self.level * ratio * math.exp(self.cell.launch_sigma * self.rng.standard_normal())
        return list(factor * np.exp(self.cell.run_sigma * self.rng.standard_normal(n)))

    def launch_until(self, ratio: float, stop: Callable[[list[float]], bool]) -> list[float]:
        """OLD auto repeats: add runs (at least 3) until ``stop(runs)`` or MAX_REPEATS."""
        factor = self.level * ratio * math.exp(self.cell.launch_sigma * self.rng.standard_normal())
        runs: list[float] = []
        while len(runs) < MAX_REPEATS:
            runs.append(factor * math.exp(self.cell.run_sigma * self.rng.standard_normal()))
            if len(runs) >= 3 and stop(runs):
                break
        return runs


def _baseline(sim: Launcher, before: bool) -> tuple[list[list[float]], int]:
    """The baseline's launches and the runs per launch every later launch makes."""
    cell = sim.cell
    if cell.runs != "auto":
        n = int(cell.runs)
        return [sim.launch(1.0, n) for _ in range(cell.base)], n
    if before:
        return [sim.launch_until(1.0, _old_precise) for _ in range(cell.base)], -1
    first = sim.launch(1.0, MAX_REPEATS)
    n = stats.runs_for_precision([first], CI_TARGET, MAX_REPEATS)
    return [first] + [sim.launch(1.0, n) for _ in range(cell.base - 1)], n


def _old_precise(runs: list[float]) -> bool:
    return old_median_ci_halfwidth(runs) <= CI_TARGET


def _tuned(sim: Launcher, ratio: float, n: int) -> list[float]:
    return sim.launch_until(ratio, _old_precise) if n < 0 else sim.launch(ratio, n)


def _medians(launches: Iterable[Sequence[float]]) -> list[float]:
    return [float(np.median(r)) for r in launches]


@dataclass
class PerSet:
    """Rates (fractions) from the per-set Monte Carlo."""

    fp: float
    power: float
    ci_excludes_1: float = math.nan
    fp_no_drift: float = math.nan
    power_no_drift: float = math.nan
    mde: float = math.nan


def per_set(cell: Cell, pairs: int, *, before: bool, gain: float = 0.05, seed: int = 1,
            min_effect: float = stats.DEFAULT_MIN_EFFECT) -> PerSet:
    """One tuned launch against the baseline's launches, ``pairs`` times at 1.00 and at 1 + gain."""
    sim = Launcher(np.random.default_rng(seed), cell)
    fp = fp_nd = excl = hits = hits_nd = 0
    for ratio in (1.0, 1.0 + gain):
        for _ in range(pairs):
            base, n = _baseline(sim, before)
            trial = _tuned(sim, ratio, n)
            drift = stats.drift(_medians(base))
            if before:
                verdict = old_compare(trial, base[0], drift=drift).verdict
                directional = verdict in (OLD_FASTER, OLD_SLOWER)
                faster = verdict == OLD_FASTER
            else:
                c = stats.compare([trial], base, min_effect=min_effect, drift=drift)
                directional = c.verdict in (Verdict.FASTER, Verdict.SLOWER)
                faster = c.verdict is Verdict.FASTER
                nd = stats.compare([trial], base, min_effect=min_effect)
                if ratio == 1.0:
                    excl += c.ci_low > 1 or c.ci_high < 1
                    fp_nd += nd.verdict in (Verdict.FASTER, Verdict.SLOWER)
                else:
                    hits_nd += nd.verdict is Verdict.FASTER
            if ratio == 1.0:
                fp += directional
            else:
                hits += faster
    out = PerSet(fp / pairs, hits / pairs)
    if not before:
        out.ci_excludes_1, out.fp_no_drift, out.power_no_drift = excl / pairs, fp_nd / pairs, hits_nd / pairs
        runs = MAX_REPEATS if cell.runs == "auto" else int(cell.runs)
        prior = stats.launch_noise([])
        noise = replace(prior, df=prior.df + cell.base - 1)
        out.mde = stats.min_detectable_effect(run_sigma=cell.run_sigma, noise=noise, runs_per_launch=runs,
                                              baseline_launches=cell.base, min_effect=min_effect)
    return out


@dataclass
class HeadlineRates:
    """Share of simulated sweeps (fractions) whose headline says "use it" for a right set:
    ``use`` before confirmation, ``confirmed`` after it (``after`` only, else NaN)."""

    use: float
    confirmed: float = math.nan


def headline(cell: Cell, pairs: int, *, before: bool, gain: float = 0.0, seed: int = 2,
             min_effect: float = stats.DEFAULT_MIN_EFFECT) -> HeadlineRates:
    """``cell.sets`` tuned sets of one launch against the baseline, ``pairs`` sweeps. ``gain`` 0:
    every set at 1.00, any "use it" is false; else set 0 at 1 + gain and only a "use it" that
    names it counts."""
    sim = Launcher(np.random.default_rng(seed), cell)
    use = conf = 0
    ratios = [1.0 + gain] + [1.0] * (cell.sets - 1)
    for _ in range(pairs):
        base, n = _baseline(sim, before)
        sets = [_tuned(sim, r, n) for r in ratios]
        drift = stats.drift(_medians(base))
        if before:
            best = int(np.argmax(_medians(sets)))
            use += old_compare(sets[best], base[0], drift=drift).verdict == OLD_FASTER and (gain == 0 or best == 0)
            continue
        launches = [[s] for s in sets]
        h = stats.best_of(launches, base, noise=stats.launch_noise(base, launches), min_effect=min_effect,
                          drift=drift)
        if h.winner is None or not (gain == 0 or h.winner == 0):
            continue
        use += 1
        w_new, b_new = [sim.launch(ratios[h.winner], n)], [sim.launch(1.0, n)]
        others = [s for i, s in enumerate(launches) if i != h.winner]
        noise = stats.launch_noise([*base, *b_new], [launches[h.winner] + w_new, *others])
        conf += stats.confirmed(w_new, b_new, noise=noise).verdict is Verdict.FASTER
    return HeadlineRates(use / pairs, math.nan if before else conf / pairs)


def _pct(x: float) -> str:
    return "" if math.isnan(x) else f"{x * 100:5.1f}"


def per_set_cells(full: bool) -> list[Cell]:
    """The per-set grid: the default answers the issue's table; ``full`` is the whole product."""
    if full:
        cells = [Cell(r, lv, n, b) for r in (0.01, 0.02, 0.05) for lv in (0.0, 0.005, 0.01, 0.02)
                 for n in (3, 4, 8) for b in (1, 2, 3)]
        return cells + [Cell(r, lv, "auto", b) for r in (0.01, 0.02, 0.05) for lv in (0.0, 0.005, 0.01, 0.02)
                        for b in (1, 2, 3)]
    return ([Cell(0.02, lv, 4, 2) for lv in (0.0, 0.005, 0.01, 0.02)]
            + [Cell(0.01, 0.01, 4, 2), Cell(0.01, 0.01, 8, 2), Cell(0.02, 0.01, 4, 1), Cell(0.02, 0.01, 4, 3),
               Cell(0.02, 0.005, 4, 5), Cell(0.02, 0.02, 4, 5),
               Cell(0.05, 0.005, 4, 2), Cell(0.01, 0.0, "auto", 2), Cell(0.01, 0.01, "auto", 2)])


def headline_cells(full: bool) -> list[Cell]:
    """The headline grid."""
    if full:
        return [Cell(0.02, lv, 4, b, k) for lv in (0.0, 0.005, 0.01, 0.02) for b in (1, 2, 3) for k in (1, 20)]
    return [Cell(0.02, lv, 4, 2, k) for k in (1, 20) for lv in (0.0, 0.005, 0.02)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="verdict_calibration.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2000, help="simulated pairs per per-set cell (default 2000)")
    ap.add_argument("--headline-pairs", type=int, default=400,
                    help="simulated sweeps per headline cell (default 400; 'before' is slow: 20 bootstraps each)")
    ap.add_argument("--gain", type=float, default=0.05, help="true gain for the power columns (default 0.05)")
    ap.add_argument("--headline-gain", type=float, default=0.15,
                    help="second true gain for the headline power columns (default 0.15)")
    ap.add_argument("--full", action="store_true", help="the whole grid (slow: an hour or more)")
    ap.add_argument("--no-before", action="store_true", help="skip the old statistics (much faster)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    before = not args.no_before
    g = f"+{args.gain * 100:g} %"
    print(f"Per set: one tuned launch vs the baseline; rates in %, {args.pairs} pairs per cell and case.\n")
    print(f"| {LABEL_HEAD} | FP before | FP after | FP after -drift | CI!=1 after | power {g} before "
          f"| power {g} after | power after -drift | MDE after |")
    print("|" + "---|" * (LABEL_HEAD.count("|") + 9))
    for cell in per_set_cells(args.full):
        old = per_set(cell, args.pairs, before=True, gain=args.gain) if before else None
        new = per_set(cell, args.pairs, before=False, gain=args.gain)
        print(f"| {cell.label()} | {_pct(old.fp) if old else ''} | {_pct(new.fp)} | {_pct(new.fp_no_drift)} | "
              f"{_pct(new.ci_excludes_1)} | {_pct(old.power) if old else ''} | {_pct(new.power)} | "
              f"{_pct(new.power_no_drift)} | {_pct(new.mde)} |", flush=True)
    gains = (args.gain, args.headline_gain)
    print(f"\nHeadline: share of sweeps saying 'use it' for a wrong set (all sets no-effect: FP) and for the "
          f"right one (one set at {' or '.join(f'+{x * 100:g} %' for x in gains)}: power); rates in %, "
          f"{args.headline_pairs} sweeps per cell and case; 'conf' after the confirmation.\n")
    cols = ["use-it FP before", "after", "after conf"]
    for x in gains:
        cols += [f"power +{x * 100:g} % before", "after", "after conf"]
    print(f"| {LABEL_HEAD} | " + " | ".join(cols) + " |")
    print("|" + "---|" * (5 + len(cols)))
    for cell in headline_cells(args.full):
        row = []
        for x in (0.0, *gains):
            old_h = headline(cell, args.headline_pairs, before=True, gain=x) if before else None
            new_h = headline(cell, args.headline_pairs, before=False, gain=x)
            row += [_pct(old_h.use) if old_h else "", _pct(new_h.use), _pct(new_h.confirmed)]
        print(f"| {cell.label()} | " + " | ".join(row) + " |", flush=True)
    print(f"\n{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
