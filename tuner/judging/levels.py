"""Verdicts per workload: every set judged at each concurrency level the night measured.

With ``probe.concurrency`` every launch also records the concurrency table
(``TrialRecord.concurrency``, one :class:`tuner.record.LevelResult` per level C). Each level is
judged with the same model as the single-stream probe, by :func:`tuner.judging.judge.judge` itself,
once per level:

- C = 1 is the single-stream probe: ``judge(records)`` on the study's metric, its runs as
  recorded (a ``1`` in ``probe.concurrency`` is the bench's copy of it and is not judged twice).
- C > 1: each launch holds one value, the level's aggregate tok/s (completion tokens of the
  level's ok requests / its wall time, :mod:`tuner.measure.bench`); the record keeps no
  per-request values that would be runs of it (a request's tok/s is not a share of the
  aggregate). So at a level run noise and launch noise cannot be told apart: the launch is one
  run, and the launch-noise estimate carries all of it. In practice the level's value is given
  to ``judge`` as two equal runs of a copy of the record (:func:`level_records`): no spread
  inside the launch, so ``compare``'s interval is the launch-noise term alone, and the
  launch-noise ANOVA over the baseline's launches (and any set's 2+ launches) at that level is
  exactly the variance of their values, pooled with the prior
  (:data:`tuner.judging.stats.PRIOR_LAUNCH_SIGMA`) as everywhere. Judged as output tok/s.
  A launch whose level lost a request (``ok < total``) or measured nothing is left out at that
  level (its aggregate is not the throughput of the level asked for).

Error control: the per-set verdicts shown per level are at ``1 - alpha / m`` two-sided, m the
number of levels judged (Bonferroni over levels, Dunn 1961), so the chance that any of a set's
m verdicts is a false "faster"/"slower" stays at most ``alpha``. ``judge`` builds its intervals
at 95 %; each is widened on the log scale by ``t_{1 - alpha/2m, df} / t_{0.975, df}`` with
``df`` the launch noise's degrees of freedom: exact at C > 1 (the launch-noise term is the
whole variance), an approximation at C = 1, where the run-noise parts add Satterthwaite
degrees of freedom that ``judge`` does not expose (the t ratio falls as df grows, so using the
launch noise's, usually the smallest, errs wide).

"Use it" rests on one level, named before the night (``probe.judge_concurrency``, default 1):
the headline, its confirmation and the winner are that level's ``judge`` (``headline``), a
single pre-named claim, so not corrected over levels. A set faster at one level and slower at
another (both at the corrected level) is a flip (:meth:`LevelJudgement.flips`), said in one
sentence: P2P on vs off flips exactly this way on PCIe boxes (tuner/sim/profiles.py
``pcie-4x-acs``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tuner.judging import stats
from tuner.judging.judge import Judgement, judge
from tuner.record import Metric, TrialRecord, Verdict

__all__ = ["SINGLE_STREAM", "LevelJudgement", "judge_levels", "level_records", "measured_levels"]

#: The single-stream probe's level.
SINGLE_STREAM = 1

#: Verdicts a level's interval may turn into (the rest are kept as ``judge`` gave them).
_DIRECTIONAL = frozenset({Verdict.FASTER, Verdict.FASTER_BELOW_MIN, Verdict.SLOWER, Verdict.SLOWER_BELOW_MIN,
                          Verdict.NO_DIFFERENCE})


def measured_levels(records: Iterable[TrialRecord]) -> tuple[int, ...]:
    """The levels to judge: C = 1 (the single-stream probe) then every C > 1 any ok record's
    concurrency table holds, ascending."""
    found = {lv.concurrency for r in records if r.ok for lv in r.concurrency if lv.concurrency > SINGLE_STREAM}
    return (SINGLE_STREAM, *sorted(found))


def level_records(records: Sequence[TrialRecord], level: int) -> list[TrialRecord]:
    """Copies of ``records`` whose output tok/s runs are their aggregate tok/s at concurrency
    ``level`` (C > 1), as two equal runs (see the module docstring); the originals are not
    touched. A record whose table lacks the level, or whose level lost a request or measured
    no tokens, gets no runs (``judge`` skips it at this level). Raises ValueError for
    ``level`` < 2 (C = 1 is the probe's own runs)."""
    if level <= SINGLE_STREAM:
        raise ValueError(f"level_records: concurrency level must be > 1 (C=1 is the probe's runs), got {level}")
    out = []
    for r in records:
        lv = next((x for x in r.concurrency if x.concurrency == level), None)
        value = lv.aggregate_tok_s if lv is not None and lv.ok == lv.total and lv.ok > 0 else math.nan
        runs = [value, value] if math.isfinite(value) and value > 0 else []
        out.append(dataclasses.replace(r, output_tok_s=runs[0] if runs else None, output_tok_s_runs=runs))
    return out


@dataclass(frozen=True)
class LevelVerdict:
    """One set at one level: ``ratio`` (set / baseline, geometric), ``low``/``high`` its
    interval at the Bonferroni-over-levels confidence (NaN when not judged) and the ``verdict``
    on it."""

    key: str
    level: int
    ratio: float
    low: float
    high: float
    verdict: Verdict

    @property
    def gain_pct(self) -> float:
        """:func:`tuner.judging.stats.gain_pct` of :attr:`ratio`."""
        return stats.gain_pct(self.ratio)

    @property
    def faster(self) -> bool:
        """True for a faster verdict (above the min effect or not)."""
        return self.verdict in (Verdict.FASTER, Verdict.FASTER_BELOW_MIN)

    @property
    def slower(self) -> bool:
        """True for a slower verdict (above the min effect or not)."""
        return self.verdict in (Verdict.SLOWER, Verdict.SLOWER_BELOW_MIN)


@dataclass(frozen=True)
class Flip:
    """A set faster at some levels and slower at others: ``label`` (``NAME=value`` words),
    ``slower``/``faster``: the :class:`LevelVerdict` of each such level, lowest C first."""

    key: str
    label: str
    slower: tuple[LevelVerdict, ...]
    faster: tuple[LevelVerdict, ...]

    def sentence(self) -> str:
        """One sentence, the lower levels' side first, e.g. ``NCCL_P2P_DISABLE=1: slower at C=8
        (-9.0 %), faster at C=1 (+12.0 %): it flips with concurrency, so judge it at the
        workload's own level (probe.judge_concurrency).``"""
        def side(word: str, vs: tuple[LevelVerdict, ...]) -> str:
            return f"{word} at " + ", ".join(f"C={v.level} ({v.gain_pct:+.1f} %)" for v in vs)
        parts = [side("slower", self.slower), side("faster", self.faster)]
        if self.faster[0].level < self.slower[0].level:
            parts.reverse()
        return (f"{self.label}: {', '.join(parts)}: it flips with concurrency, so judge it at the "
                "workload's own level (probe.judge_concurrency).")


@dataclass
class LevelJudgement:
    """Every set judged at every level (see the module docstring).

    ``levels``: the levels judged, C = 1 first; ``judged_level``: the one "Use it" rests on;
    ``judgements``: ``judge``'s :class:`Judgement` per level (C = 1 on the study's ``metric``,
    C > 1 on aggregate output tok/s); ``confidence``: the per-level verdicts' two-sided level,
    ``1 - alpha / len(levels)``; ``verdicts``: per level, per set key, its :class:`LevelVerdict`;
    ``labels``: per set key, its ``NAME=value`` words.
    """

    metric: Metric
    levels: tuple[int, ...]
    judged_level: int
    judgements: dict[int, Judgement]
    confidence: float
    verdicts: dict[int, dict[str, LevelVerdict]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def headline(self) -> Judgement:
        """The judgement "Use it" rests on: that of ``judged_level``."""
        return self.judgements[self.judged_level]

    @property
    def winner(self) -> str | None:
        """The headline's winner (set key) at ``judged_level``, or None."""
        return self.headline.winner

    @property
    def several(self) -> bool:
        """True when the night measured a level beyond the single stream."""
        return len(self.levels) > 1

    def flips(self) -> list[Flip]:
        """Sets faster at one level and slower at another (both at :attr:`confidence`), in
        order of their first launch."""
        out = []
        for key, label in self.labels.items():
            at = [self.verdicts[c][key] for c in self.levels if key in self.verdicts[c]]
            slower = tuple(v for v in at if v.slower)
            faster = tuple(v for v in at if v.faster)
            if slower and faster:
                out.append(Flip(key, label, slower, faster))
        return out

    def sentences(self) -> list[str]:
        """What the verdict paragraph says about the levels: which level "Use it" rests on when
        it is not the single stream, and one sentence per flip. Empty for a single-stream night."""
        if not self.several:
            return []
        out = []
        if self.judged_level != SINGLE_STREAM:
            out.append(f"The headline and \"Use it\" rest on C={self.judged_level} (probe.judge_concurrency), "
                       f"aggregate output tok/s at {self.judged_level} streams.")
        return out + [f.sentence() for f in self.flips()]


def _t_ratio(confidence: float, df: float) -> float:
    """How much wider a ``confidence`` two-sided t interval is than the 95 % one at ``df``."""
    df = df if math.isfinite(df) and df > 0 else 1e9
    return stats.t_quantile(0.5 + confidence / 2.0, df) / stats.t_quantile(0.975, df)


def _widened(key: str, level: int, j: Judgement, confidence: float, min_effect: float) -> LevelVerdict | None:
    """The set's 95 % comparison at this level re-read at ``confidence`` (module docstring)."""
    s = j.sets[key]
    c = s.comparison
    if c is None:
        return None
    # the comparison on all launches; a confirmation is the headline's business, not a level's
    verdict = Verdict.NOT_APPLIED if s.not_applied else c.verdict
    if verdict not in _DIRECTIONAL or not (c.ci_low > 0 and c.ci_high > 0):
        return LevelVerdict(key, level, c.ratio, math.nan, math.nan, verdict)
    mid = (math.log(c.ci_low) + math.log(c.ci_high)) / 2.0
    half = (math.log(c.ci_high) - math.log(c.ci_low)) / 2.0
    half *= _t_ratio(confidence, j.noise.df if j.noise is not None else math.inf)
    low, high = math.exp(mid - half), math.exp(mid + half)
    if low > 1.0:
        verdict = Verdict.FASTER if c.ratio >= 1.0 + min_effect else Verdict.FASTER_BELOW_MIN
    elif high < 1.0:
        verdict = Verdict.SLOWER if c.ratio <= 1.0 - min_effect else Verdict.SLOWER_BELOW_MIN
    else:
        verdict = Verdict.NO_DIFFERENCE
    return LevelVerdict(key, level, c.ratio, low, high, verdict)


def _label(env: dict[str, str], flags: list[str]) -> str:
    words = " ".join(f"{k}={v}" for k, v in env.items()) or "(untuned)"
    return f"{words} {' '.join(flags)}" if flags else words


def judge_levels(records: Sequence[TrialRecord], *, metric: Metric, levels: Sequence[int] | None = None,
                 judged_level: int = SINGLE_STREAM, min_effect: float = stats.DEFAULT_MIN_EFFECT,
                 alpha: float = 0.05, cannot_act: Mapping[str, str] | None = None) -> LevelJudgement:
    """Judge every set of ``records`` at each concurrency level (module docstring).

    ``metric``: the study's (C = 1 only); ``levels``: the levels to judge (C values; default
    :func:`measured_levels`; C = 1 is always judged, duplicates and order do not matter);
    ``judged_level``: the level "Use it" rests on (``probe.judge_concurrency``); ``alpha``: the
    error rate over the levels judged (per-level verdicts at ``1 - alpha / m``); ``cannot_act``:
    set key -> why its variables cannot act (:func:`tuner.judging.judge.cannot_act_on`), at every
    level. ``records``
    are never modified. Raises ValueError when ``judged_level`` is not among the levels, for a
    level < 1, for ``alpha`` outside (0, 1), and as :func:`tuner.judging.judge.judge` does.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"judge_levels: alpha must be in (0, 1), got {alpha}")
    wanted = measured_levels(records) if levels is None else tuple(levels)
    if any(c < SINGLE_STREAM for c in wanted):
        raise ValueError(f"judge_levels: concurrency levels must be >= 1, got {list(wanted)}")
    judged = (SINGLE_STREAM, *sorted({c for c in wanted if c > SINGLE_STREAM}))
    if judged_level not in judged:
        raise ValueError(f"judge_levels: judged_level {judged_level} is not a level judged "
                         f"({', '.join(map(str, judged))})")
    judgements = {SINGLE_STREAM: judge(records, metric=metric, min_effect=min_effect, cannot_act=cannot_act)}
    for c in judged[1:]:
        judgements[c] = judge(level_records(records, c), metric=Metric.OUTPUT, min_effect=min_effect,
                              cannot_act=cannot_act)
    confidence = 1.0 - alpha / len(judged)
    out = LevelJudgement(metric, judged, judged_level, judgements, confidence)
    for c, j in judgements.items():
        out.verdicts[c] = {}
        for key, s in j.sets.items():
            out.labels.setdefault(key, _label(s.env, s.flags))
            v = _widened(key, c, j, confidence, min_effect)
            if v is not None:
                out.verdicts[c][key] = v
    return out
