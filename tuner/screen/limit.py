"""The bound after the screen (:mod:`tuner.screen.bound`), and whether relaunching is worth it.

The bound needs the untuned screen time at the decode size, the allreduces per token
(``[model]``) and the baseline's TPOT; it does not apply when NCCL does not carry the decode
allreduce (the baseline's backend). "Below the noise": even free allreduce would gain less than
:func:`noise_pct`, the smallest gain a relaunch can tell from noise; then the stage stops the
sweep (StoppedByCheck, exit 5) unless ``--force``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tuner.judging import Judgement, stats
from tuner.record import TrialRecord
from tuner.screen.bound import Bound, allreduce_bound
from tuner.screen.rank import RankedSet
from tuner.screen.sizes import ScreenSizes

__all__ = [
    "announce",
    "bound_for",
    "nccl_carries",
    "noise_pct",
]


def noise_pct(judgement: Judgement | None) -> float:
    """The smallest decode gain (%) a relaunch can tell from noise: the larger of the launch
    noise (:func:`tuner.judging.stats.launch_noise`, its prior before two launches of a set exist) and
    the judgement's minimum effect worth calling faster."""
    if judgement is None:
        return 100.0 * max(stats.PRIOR_LAUNCH_SIGMA, stats.DEFAULT_MIN_EFFECT)
    sigma = judgement.noise.sigma if judgement.noise is not None else stats.PRIOR_LAUNCH_SIGMA
    return 100.0 * max(sigma, judgement.min_effect)


def nccl_carries(baseline: TrialRecord) -> bool | None:
    """Whether NCCL carries the decode allreduce, from the baseline's ``allreduce_backend``:
    True for ``nccl``, False for another backend (custom allreduce, symmetric memory ...),
    None when unknown."""
    backend = baseline.allreduce_backend
    if not backend or backend == "unknown":
        return None
    return backend == "nccl"


def bound_for(sizes: ScreenSizes, untuned: float | None, ranked: Sequence[RankedSet], baseline: TrialRecord,
           carries: bool | None) -> tuple[Bound | None, str]:
    """The bound, or None with why it does not apply."""
    if carries is False:
        return None, (f"NCCL does not carry the decode allreduce ({baseline.allreduce_backend}): the screen's "
                      "times say nothing about decode, so no bound is given")
    if untuned is None:
        return None, "the untuned screen run measured nothing at the decode size: no bound"
    if sizes.per_token is None:
        return None, "no [model] table: the allreduces per token are unknown, so no bound is given"
    if not baseline.tpot_s or baseline.tpot_s <= 0:
        return None, "the baseline's TPOT was not measurable (bursty delivery): no bound"
    best = ranked[0].decode_us if ranked else None
    return allreduce_bound(untuned, sizes.per_token, baseline.tpot_s, best), ""


def announce(b: Bound | None, note: str, noise: float, log: Callable[[str], None], force: bool) -> str:
    """Print the bound ``b`` (or ``note``, why there is none); return the stop message when
    it is below ``noise`` (%) and not ``force``, else ``""``."""
    if b is None:
        log(f"screen: {note}")
        return ""
    if b.reliable and b.max_gain_pct is not None:
        best = (f"; the best screened set predicts {b.best_gain_pct:+.1f} % ({b.best_tok_s:.1f} tok/s)"
                if b.best_gain_pct is not None and b.best_tok_s is not None else "")
        log(f"bound: NCCL tuning can gain at most {b.max_gain_pct:.1f} %{best}. Allreduce takes about "
            f"{b.allreduce_share:.0%} of decode time ({b.baseline_tok_s:.1f} tok/s now, "
            f"{b.free_allreduce_tok_s:.1f} if allreduce were free).")
    else:
        log(f"bound: {b.sentence()}")
    for note in b.notes:
        log(f"bound: {note}")
    if b.best_gain_pct is not None and b.best_gain_pct < noise and not b.below_noise(noise):
        log(f"bound: the best screened set's predicted {b.best_gain_pct:+.1f} % is below the {noise:.1f} % "
            "a relaunch can tell from noise: its relaunches will likely show no significant difference")
    if not b.below_noise(noise):
        return ""
    msg = (f"NCCL tuning can gain at most {b.max_gain_pct:.1f} % of decode speed here (allreduce is "
           f"{b.allreduce_share:.0%} of TPOT), below the {noise:.1f} % a relaunch can tell from noise: "
           "relaunching tuned sets is pointless")
    if force:
        log(f"{msg}; --force: relaunching anyway")
        return ""
    return msg + ". Pass --force to relaunch anyway."
