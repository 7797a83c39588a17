"""The screen's ranking of sets, and how well it predicted the relaunches.

Ranking (:func:`rank_sets`): every set screened ok, by its out-of-place time (us) at the decode
size (the median over its runs), fastest first. Decode times within ``tie_pct`` percent of a
group's fastest are tied; within a tie the prefill size's time decides, then the set with fewer
variables (a simpler set to deploy). The untuned set is never ranked: it is the baseline.

Agreement (:func:`spearman`): Spearman's rank correlation between the gain the screen predicts
and the gain the relaunches measured, over the relaunched sets, with a confidence interval
from Fisher's z with the Bonett-Wright standard error ``sqrt((1 + rho^2 / 2) / (n - 3))``
(D. G. Bonett and T. A. Wright, "Sample size requirements for estimating Pearson, Kendall and
Spearman correlations", Psychometrika 65(1), 2000, 23-28); it needs four sets or more.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import special

from tuner.record import Status, set_key
from tuner.screen.bound import allreduce_bound
from tuner.screen.run import screenable
from tuner.screen.store import FIRST, LAST, SCREENED, ScreenRecord

__all__ = [
    "RankedSet",
    "Spearman",
    "bad_sets",
    "predicted_gain_pct",
    "rank_sets",
    "screen_key",
    "spearman",
    "untuned_drift",
    "untuned_time",
]


def screen_key(env: Mapping[str, str]) -> str:
    """The identity of ``env`` as the screen sees it: its screened variables only
    (:func:`tuner.screen.run.screenable`), so ``{NCCL_PROTO: LL, CUDA_DEVICE_MAX_CONNECTIONS: 1}``
    and ``{NCCL_PROTO: LL}`` are one screened set."""
    return set_key({k: v for k, v in env.items() if screenable(k)})


@dataclass(frozen=True)
class RankedSet:
    """One screened set: ``env``, ``key``, ``decode_us`` and ``prefill_us`` (median
    out-of-place times in us; prefill None when not screened), ``runs`` (screen trial numbers)."""

    env: dict[str, str]
    key: str
    decode_us: float
    prefill_us: float | None
    runs: tuple[int, ...]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def untuned_time(records: Sequence[ScreenRecord], size: int) -> float | None:
    """The untuned set's time (us) at ``size``: the median of its ok runs (first and last)."""
    return _median([t for r in records if r.role in (FIRST, LAST) and (t := r.time_at(size)) is not None])


def untuned_drift(records: Sequence[ScreenRecord], size: int) -> float | None:
    """How far the untuned time at ``size`` moved from the first to the last run (fraction,
    last / first - 1), None without both."""
    first = [t for r in records if r.role == FIRST and (t := r.time_at(size)) is not None]
    last = [t for r in records if r.role == LAST and (t := r.time_at(size)) is not None]
    return last[-1] / first[0] - 1.0 if first and last else None


def rank_sets(records: Sequence[ScreenRecord], decode: int, prefill: int | None, tie_pct: float) -> list[RankedSet]:
    """Every set screened ok at ``decode`` bytes, best first (see the module docstring)."""
    by_key: dict[str, list[ScreenRecord]] = {}
    for r in records:
        if r.role in SCREENED and r.status is Status.OK and r.env and r.time_at(decode) is not None:
            by_key.setdefault(r.key, []).append(r)
    ranked = []
    for key, runs in by_key.items():
        dec = _median([t for r in runs if (t := r.time_at(decode)) is not None])
        pre = _median([t for r in runs if (t := r.time_at(prefill)) is not None]) if prefill else None
        assert dec is not None
        ranked.append(RankedSet(dict(runs[0].env), key, dec, pre, tuple(r.number for r in runs)))
    ranked.sort(key=lambda s: s.decode_us)
    out: list[RankedSet] = []
    i = 0
    while i < len(ranked):
        limit = ranked[i].decode_us * (1.0 + tie_pct / 100.0)
        j = i
        while j < len(ranked) and ranked[j].decode_us <= limit:
            j += 1
        out += sorted(ranked[i:j], key=lambda s: (s.prefill_us if s.prefill_us is not None else math.inf,
                                                  len(s.env), s.decode_us))
        i = j
    return out


def bad_sets(records: Sequence[ScreenRecord]) -> dict[str, str]:
    """``{screen key: cause}`` of the sets whose screen reported wrong values."""
    return {r.key: r.cause for r in records if r.ran and r.status is Status.INVALID_OUTPUT}


def predicted_gain_pct(set_us: float, untuned_us: float, per_token: int, tpot_s: float) -> float | None:
    """The decode gain (%) the screen predicts for a set whose decode allreduce takes ``set_us``
    (us) where the untuned one takes ``untuned_us``: :func:`tuner.screen.bound.allreduce_bound`'s
    ``best_gain_pct`` with this set as the best. None when the bound is not reliable."""
    return allreduce_bound(untuned_us, per_token, tpot_s, best_screen_time_us=set_us).best_gain_pct


@dataclass(frozen=True)
class Spearman:
    """Spearman's rho over ``n`` pairs, its ``confidence`` interval ``low``..``high`` (NaN
    below four pairs or when rho is undefined) and the two-sided ``p`` value."""

    rho: float
    low: float
    high: float
    n: int
    p: float
    confidence: float = 0.95

    def describe(self) -> str:
        """``rho = 0.80 (95 % CI 0.12 to 0.97, 6 sets)``, or why there is none."""
        if math.isnan(self.rho):
            return f"no rank correlation ({self.n} sets with both numbers; at least 3 needed)"
        ci = (f"{self.confidence:.0%} CI {self.low:.2f} to {self.high:.2f}" if not math.isnan(self.low)
              else "no CI below 4 sets")
        return f"Spearman rho = {self.rho:.2f} ({ci.replace('%', ' %')}, {self.n} sets)"


def spearman(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> Spearman:
    """Spearman's rank correlation of ``x`` and ``y`` (same length) with a Fisher-z interval
    using the Bonett-Wright standard error (module docstring). Raises ValueError for lengths
    that differ or ``confidence`` outside (0, 1)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} and {len(y)} values")
    if not 0 < confidence < 1:
        raise ValueError(f"spearman: confidence must be in (0, 1), got {confidence}")
    n = len(x)
    nan = math.nan
    if n < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return Spearman(nan, nan, nan, n, nan, confidence)
    from scipy import stats as sps  # a second to import: only a screen's ranking needs it

    res = sps.spearmanr(x, y)
    rho, p = float(res.statistic), float(res.pvalue)
    if n < 4 or math.isnan(rho):
        return Spearman(rho, nan, nan, n, p, confidence)
    z = math.atanh(max(-0.999999, min(0.999999, rho)))
    se = math.sqrt((1.0 + rho * rho / 2.0) / (n - 3))
    q = float(special.ndtri(0.5 + confidence / 2.0))  # the normal quantile
    return Spearman(rho, math.tanh(z - q * se), math.tanh(z + q * se), n, p, confidence)
