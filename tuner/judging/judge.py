"""From trial records to verdicts: sets of launches, the launch noise, every set against the
baseline, the headline about the best of K sets, and confirmations.

A *set* is every ok relaunch of one set key (environment and flags): its first measurement, a
retry after an interruption, and confirmation relaunches; each relaunch is one *launch* (its
recorded runs). The baseline is every ok baseline launch. Sets are judged on the study's metric
(:class:`tuner.record.Metric`: output tok/s, the figure users quote, or decode tok/s, 1 / TPOT) by
:func:`tuner.judging.stats.compare`, whose interval includes the launch-to-launch noise estimated from
the baseline's launches and from every set with two or more (:func:`tuner.judging.stats.launch_noise`).
The headline (:func:`tuner.judging.stats.best_of`) corrects for the K sets judged (Bonferroni), and
"use it" needs a confirmation: the winner relaunched once more (kind ``confirm``) with a
baseline launch after it, the gain holding on those new launches alone
(:func:`tuner.judging.stats.confirmed`).

Trials are judged within their host type (``TrialRecord.host_type``: GPU model and count and
the server command, tuner.study.host): :func:`judge_by_host_type` judges each type's sets against
that type's own baseline launches, never against another type's.

Sets with a variable NCCL did not apply (``nccl_not_applied``) get no speed verdict and are
left out of the headline: what was measured is not the set that was asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tuner.judging import stats
from tuner.record import Kind, Metric, Status, TrialRecord, Verdict

__all__ = [
    "UNKNOWN_TYPE",
    "Judgement",
    "SetJudgement",
    "host_type_groups",
    "judge",
    "judge_by_host_type",
    "pending",
    "runs_of",
]


def runs_of(record: TrialRecord, metric: Metric) -> list[float]:
    """The recorded per-run values of ``metric`` (tok/s) of one relaunch, finite ones above 0 only."""
    return [float(v) for v in record.runs(metric) if v is not None and math.isfinite(v) and v > 0]


@dataclass
class SetJudgement:
    """One tuned set: its ok launches (trial numbers and runs), the comparison on all of them,
    and, when it was relaunched to confirm, the confirmation on the new launches alone."""

    key: str
    env: dict[str, str]
    flags: list[str]
    trials: list[int]
    launches: list[list[float]]
    comparison: stats.Comparison | None = None
    confirm_trials: list[int] = field(default_factory=list)
    confirmation: stats.Comparison | None = None
    not_applied: dict[str, str] = field(default_factory=dict)

    @property
    def first_trial(self) -> int:
        """The set's first measured relaunch."""
        return self.trials[0]

    @property
    def verdict(self) -> Verdict:
        """The set's verdict: not applied, failed confirmation, or its comparison's."""
        if self.not_applied:
            return Verdict.NOT_APPLIED
        if self.confirmation is not None and self.confirmation.verdict is Verdict.FAILED_CONFIRMATION:
            return Verdict.FAILED_CONFIRMATION
        return self.comparison.verdict if self.comparison is not None else Verdict.NOT_ENOUGH_RUNS


@dataclass
class Judgement:
    """Every set of a study judged against the baseline (see the module docstring).

    ``baseline_launches``/``baseline_trials``: the ok baseline launches, oldest first;
    ``noise``: the launch-noise estimate (None without a baseline); ``drift``: max/min - 1 of
    the baseline launches' medians; ``sets`` by set key; ``headline``: the best of the judged
    sets at the Bonferroni level; ``winner``: the key of the set the headline may call faster.
    """

    metric: Metric
    min_effect: float
    baseline_launches: list[list[float]]
    baseline_trials: list[int]
    noise: stats.LaunchNoise | None
    drift: float
    sets: dict[str, SetJudgement]
    headline: stats.Headline | None = None
    winner: str | None = None
    winner_comparison: stats.Comparison | None = None

    @property
    def confirmed(self) -> bool | None:
        """True/False once the winner's confirmation is judged, None before (or no winner)."""
        if self.winner is None:
            return None
        conf = self.sets[self.winner].confirmation
        if conf is None or conf.verdict is Verdict.NOT_ENOUGH_RUNS:
            return None
        return conf.verdict is Verdict.FASTER

    def runs_per_launch(self) -> int:
        """The median number of runs in a baseline launch (0 without one)."""
        counts = sorted(len(launch) for launch in self.baseline_launches)
        return counts[len(counts) // 2] if counts else 0

    def min_detectable_effect(self, sets: int = 1) -> float:
        """Smallest gain (fraction) this sweep's design detects with 80 % power: the runs per
        launch, baseline launches, launch noise and min effect actually used
        (:func:`tuner.judging.stats.min_detectable_effect`); inf without two baseline runs."""
        runs = self.runs_per_launch()
        if self.noise is None or runs < 2:
            return math.inf
        run_sigma, _ = stats.run_noise(self.baseline_launches)
        return stats.min_detectable_effect(run_sigma=run_sigma, noise=self.noise, runs_per_launch=runs,
                                           baseline_launches=len(self.baseline_launches),
                                           min_effect=self.min_effect, sets=sets)


def _ok_time_order(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    return sorted((r for r in records if r.ok and r.kind.relaunched),
                  key=lambda r: (r.started_at if r.started_at is not None else math.inf, r.trial))


def judge(records: Sequence[TrialRecord], *, metric: Metric,
          min_effect: float = stats.DEFAULT_MIN_EFFECT) -> Judgement:
    """Judge every tuned set of ``records`` against the baseline on ``metric`` (the study's,
    :attr:`tuner.record.StudyInfo.metric`). Raises ValueError for a metric that is not a
    :class:`tuner.record.Metric` (a bare string included: the study's metric is never assumed).
    """
    if not isinstance(metric, Metric):
        raise ValueError(f"metric must be a Metric ({', '.join(m.value for m in Metric)}), not {metric!r}")
    ordered = _ok_time_order(records)
    bases = [r for r in ordered if r.kind is Kind.BASELINE and len(runs_of(r, metric)) >= 1]
    baseline_launches = [runs_of(r, metric) for r in bases]
    sets: dict[str, SetJudgement] = {}
    for r in ordered:
        if r.kind is Kind.BASELINE:
            continue
        launch = runs_of(r, metric)
        if not launch:
            continue
        s = sets.setdefault(r.set_key, SetJudgement(r.set_key, dict(r.env), list(r.flags), [], []))
        s.trials.append(r.trial)
        s.launches.append(launch)
        if r.kind is Kind.CONFIRM:
            s.confirm_trials.append(r.trial)
        s.not_applied.update(r.nccl_not_applied)
    drift = stats.drift([stats.level([b]) for b in baseline_launches])
    out = Judgement(metric, min_effect, baseline_launches, [b.trial for b in bases], None, drift, sets)
    if not baseline_launches:
        return out
    out.noise = stats.launch_noise(baseline_launches, [s.launches for s in sets.values() if len(s.launches) > 1])
    for s in sets.values():
        s.comparison = stats.compare(s.launches, baseline_launches, noise=out.noise, min_effect=min_effect,
                                     drift=drift)
        if s.confirm_trials:
            s.confirmation = _confirmation(s, ordered, metric, out.noise)
    judged = [s for s in sets.values() if not s.not_applied]
    if judged:
        out.headline = stats.best_of([s.launches for s in judged], baseline_launches, noise=out.noise,
                                     min_effect=min_effect, drift=drift)
        if out.headline.winner is not None:
            out.winner = judged[out.headline.winner].key
        # A set that passed its confirmation (fresh launches of it and of the baseline, the gain
        # holding on them alone) and is still faster on all its launches stays the winner, even
        # if another set's point estimate has since crept above it: the claim made is about it.
        held = [s for s in judged if s.confirmation is not None and s.confirmation.verdict is Verdict.FASTER
                and s.comparison is not None and s.comparison.verdict is Verdict.FASTER]
        if held:
            out.winner = max(held, key=lambda s: s.comparison.ratio if s.comparison else 0.0).key
        if out.winner is not None:
            out.winner_comparison = stats.compare(out.sets[out.winner].launches, baseline_launches, noise=out.noise,
                                                  min_effect=min_effect, drift=drift,
                                                  confidence=out.headline.confidence)
    return out


#: The host type of records written before host types were recorded (one host, one type).
UNKNOWN_TYPE = ""


def host_type_groups(records: Sequence[TrialRecord]) -> dict[str, list[TrialRecord]]:
    """``records`` by host type, in order of each type's first record. Records without a host
    type (written before host types) join the one type when the study has exactly one, else
    form a group of their own under :data:`UNKNOWN_TYPE`."""
    groups: dict[str, list[TrialRecord]] = {}
    for r in records:
        groups.setdefault(r.host_type, []).append(r)
    typed = [t for t in groups if t != UNKNOWN_TYPE]
    if UNKNOWN_TYPE in groups and len(typed) == 1:
        merged = groups.pop(UNKNOWN_TYPE) + groups[typed[0]]
        groups[typed[0]] = sorted(merged, key=lambda r: r.trial)
    return groups


def judge_by_host_type(records: Sequence[TrialRecord], *, metric: Metric,
                       min_effect: float = stats.DEFAULT_MIN_EFFECT) -> dict[str, Judgement]:
    """:func:`judge` of each host type's records (:func:`host_type_groups`) on their own: each
    type's sets against its own baseline launches. With no record, ``{"": judge([])}``.
    Raises ValueError for an unknown metric."""
    groups = host_type_groups(records) or {UNKNOWN_TYPE: []}
    return {t: judge(group, metric=metric, min_effect=min_effect) for t, group in groups.items()}


def _confirmation(s: SetJudgement, ordered: list[TrialRecord], metric: Metric,
                  noise: stats.LaunchNoise) -> stats.Comparison:
    """The set's confirmation launches against the baseline launches made after the first of
    them (alternating relaunches), on those new launches alone."""
    first = next(r for r in ordered if r.trial == s.confirm_trials[0])
    start = first.started_at if first.started_at is not None else math.inf
    new_base = [runs_of(r, metric) for r in ordered if r.kind is Kind.BASELINE
                and r.started_at is not None and r.started_at > start]
    new_set = [runs_of(r, metric) for r in ordered if r.trial in s.confirm_trials]
    if not new_base:
        return stats.Comparison(math.nan, math.nan, math.nan, Verdict.NOT_ENOUGH_RUNS,
                                "no baseline launch after the confirmation yet")
    return stats.confirmed(new_set, new_base[:len(new_set)], noise=noise)


def pending(record: TrialRecord) -> bool:
    """True for a relaunch that is running or was interrupted (no result to judge)."""
    return record.status in (Status.RUNNING, Status.INTERRUPTED)
