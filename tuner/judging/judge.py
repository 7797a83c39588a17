"""From trial records to verdicts: sets of launches, the launch noise, every set against the
baseline at its own time, the finalists, and the claim on fresh launches.

A *set* is every ok relaunch of one set key (environment and flags): its first measurement, a
retry after an interruption, and confirmation relaunches; each relaunch is one *launch* (its
recorded runs). The baseline is every ok baseline launch. Sets are judged on the study's metric
(:class:`tuner.record.Metric`) by :func:`tuner.judging.stats.compare` against the baseline level
interpolated at the set's own launch positions (launch order: started_at, then trial), so a
drifting machine does not bias a set by when it ran; the interval includes the launch-to-launch
noise (:func:`tuner.judging.stats.launch_noise`: the baseline's launches, every set with two or
more, and the spread of the sets measured once, with a prior; the data's own estimate when it
is well above the prior, and then :attr:`Judgement.noise_warning` says so).

The claim is made in two stages. Stage 1 (every launch before the first confirmation) selects
the *finalists* (:attr:`Judgement.finalists`): the best set by ratio that is not slower, can act
and was applied, and the runner-up while it could be the best; no significance is needed. Stage
2 relaunches each finalist once (kind ``confirm``; the best set twice when the runner-up is not
one) and then the baseline; "use it" rests on those fresh launches alone
(:func:`tuner.judging.stats.confirmed`, one-sided at :data:`CONFIRM_ALPHA` / :data:`FINALISTS`), and
the set must still be faster, by the minimum effect, on all its launches.

Trials are judged within their host type (``TrialRecord.host_type``): :func:`judge_by_host_type`
judges each type's sets against that type's own baseline launches, never against another type's.

Sets with a variable NCCL did not apply (``nccl_not_applied``), or whose backend choice the
server did not apply (``backend_applied`` False: ignored, fallen back from, or no proving line
in the log; :func:`tuner.servers.backend.prove`), get no speed verdict; sets whose
variables cannot act (``cannot_act``: planning's one rule; ``forced``: the night ran with
--force where NCCL is not on the decode path) get :attr:`Verdict.CANNOT_ACT`, their measured
ratio only. Neither is ever a finalist.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tuner.judging import stats
from tuner.judging.answers import REFERENCE_PRESET
from tuner.record import Kind, Metric, StudyInfo, TrialRecord, Verdict
from tuner.servers import nccl_cannot_act_at_decode

__all__ = [
    "CONFIRM_ALPHA",
    "FINALISTS",
    "OUTLIER_PRIORS",
    "UNKNOWN_TYPE",
    "Judgement",
    "SetJudgement",
    "cannot_act_on",
    "host_type_groups",
    "judge",
    "judge_by_host_type",
    "runs_of",
]

#: The family error rate of "use it": the confirmation test runs at CONFIRM_ALPHA / finalists.
#: Below the 5 % the issue allows: at 0.05 the simulated nights said "Use it" for a no-effect
#: set in 5.0-5.5 % of them at tau 2-3 % (the estimate of the noise is itself noisy);
#: benchmarks/night_calibration.py --targets.
CONFIRM_ALPHA = 0.04
#: At most this many finalists are confirmed (the best and the runner-up).
FINALISTS = 2
#: A launch this many SDs (under the prior) off the rest of its set is named as an outlier: the
#: SD of a launch minus the median of m others is about ``prior * sqrt(1 + 1/m)``.
OUTLIER_PRIORS = 3.0


def runs_of(record: TrialRecord, metric: Metric) -> list[float]:
    """The recorded per-run values of ``metric`` (tok/s) of one relaunch, finite ones above 0 only."""
    return [float(v) for v in record.runs(metric) if v is not None and math.isfinite(v) and v > 0]


def runs_at(record: TrialRecord, metric: Metric, level: int = 1) -> list[float]:
    """The runs judged at concurrency ``level``: :func:`runs_of` for 1 (single stream), else the
    aggregate tok/s of that level's measurement (``record.concurrency``), one value a launch."""
    if level == 1:
        return runs_of(record, metric)
    return [float(lv.aggregate_tok_s) for lv in record.concurrency
            if lv.concurrency == level and math.isfinite(lv.aggregate_tok_s) and lv.aggregate_tok_s > 0]


@dataclass
class SetJudgement:
    """One tuned set: its ok launches (trial numbers, positions in launch order, runs), the
    comparison on all of them, and, when it was relaunched to confirm, the confirmation on the
    new launches alone. ``not_applied``: name -> why, each NCCL variable NCCL did not apply and
    the backend choice (``backend_choice``, its catalogue name) when the server did not apply it;
    ``cannot_act``: why its variables cannot change the speed ("" when they can); ``stage1``: its
    comparison on the stage-1 launches (what selected the finalists); ``soak``: its confirmation
    launch's soak in words (:meth:`tuner.record.TrialRecord.soak_words`, ``""``: none),
    ``soak_failed``: that soak failed (the set is never recommended)."""

    key: str
    env: dict[str, str]
    flags: list[str]
    trials: list[int]
    launches: list[list[float]]
    comparison: stats.Comparison | None = None
    confirm_trials: list[int] = field(default_factory=list)
    confirmation: stats.Comparison | None = None
    not_applied: dict[str, str] = field(default_factory=dict)
    positions: list[int] = field(default_factory=list)
    cannot_act: str = ""
    stage1: stats.Comparison | None = None
    backend_choice: str = ""
    soak: str = ""
    soak_failed: bool = False
    #: False when every launch of the set was the correctness gate's reference configuration
    #: (measured for its answers, never a candidate: tuner.judging.answers.REFERENCE_PRESET).
    candidate: bool = True

    @property
    def first_trial(self) -> int:
        """The set's first measured relaunch."""
        return self.trials[0]

    @property
    def verdict(self) -> Verdict:
        """The set's verdict: not applied, cannot act, failed confirmation, or its comparison's."""
        if self.not_applied:
            return Verdict.NOT_APPLIED
        if self.cannot_act:
            return Verdict.CANNOT_ACT
        if self.confirmation is not None and self.confirmation.verdict is Verdict.FAILED_CONFIRMATION:
            return Verdict.FAILED_CONFIRMATION
        return self.comparison.verdict if self.comparison is not None else Verdict.NOT_ENOUGH_RUNS


@dataclass
class Judgement:
    """Every set of a study judged against the baseline (see the module docstring).

    ``baseline_launches``/``baseline_trials``/``baseline_positions``: the ok baseline launches,
    oldest first, and their places in launch order; ``noise``: the launch noise the intervals use
    (None without a baseline); ``drift``: max/min - 1 of the baseline launches' robust levels;
    ``drift_trend``: the fitted change over the night (fraction, :func:`tuner.judging.stats.trend`);
    ``sets`` by set key; ``finalists``: keys, best first (stage 1 only, at most
    :data:`FINALISTS`); ``winner``: the set the headline is about (the confirmed finalist, else the
    first finalist); ``winner_comparison``: its comparison on all its launches; ``headline``: the
    claim's level (``sets``: finalists confirmed, ``confidence``: one-sided); ``noise_warning``:
    the sentence saying the launch noise is larger than assumed (None when silent);
    ``data_noise``: the data's own launch-noise estimate (fraction; None without data);
    ``inconclusive``: why the whole night cannot be judged (None when it can); ``low``: runs far
    below their launch, ``(trial, run number from 1, ratio to the launch's level)``;
    ``run_scale``: the night's robust run SD; ``forced``: the --force reason; ``level``: the
    concurrency judged; ``baseline_levels``: each ok baseline launch's robust level (tok/s,
    :func:`tuner.judging.stats.launch_level` at ``run_scale``, oldest first): the levels
    ``drift`` and ``drift_trend`` are computed from and every ratio is interpolated between;
    ``baseline_soak``: the last soaked baseline launch's soak in words (``""``: none),
    ``baseline_soak_failed``: it failed (the machine hangs under load, whatever the set).

    The report's text, figures and notebook take their numbers from here:
    :attr:`baseline_level`, ``drift``, :attr:`winner` (the set the verdict names) and
    :meth:`order` (the sets, best first).
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
    baseline_positions: list[int] = field(default_factory=list)
    drift_trend: float = 0.0
    finalists: list[str] = field(default_factory=list)
    #: The set each reserved confirmation slot relaunches, in order: the finalists, and the best
    #: set once more in a slot no runner-up that could be the best takes (:func:`_finalists`).
    confirm_slots: list[str] = field(default_factory=list)
    #: Every stage-1 set that could be a finalist, best first (:func:`_finalists`): a slot whose
    #: set failed its soak passes to the best of these that did not.
    ranked: list[str] = field(default_factory=list)
    noise_warning: str | None = None
    data_noise: float | None = None
    inconclusive: str | None = None
    low: list[tuple[int, int, float]] = field(default_factory=list)
    run_scale: float = math.nan
    forced: str | None = None
    level: int = 1
    baseline_levels: list[float] = field(default_factory=list)
    baseline_soak: str = ""
    baseline_soak_failed: bool = False

    @property
    def baseline_level(self) -> float:
        """The baseline's level (tok/s): the geometric mean of :attr:`baseline_levels`, the
        :func:`tuner.judging.stats.level` of the baseline launches at the night's run SD. NaN
        without an ok baseline launch."""
        if not self.baseline_levels:
            return math.nan
        return math.exp(float(np.mean(np.log(self.baseline_levels))))

    def order(self) -> list[str]:
        """Set keys, best first: the :attr:`winner` (the set the verdict names), then every
        other set by its ratio to the baseline (comparison on all its launches), highest first,
        ties by first trial; sets without a ratio last, by first trial."""
        def rank(s: SetJudgement) -> tuple[int, float, int]:
            c = s.comparison
            ratio = c.ratio if c is not None and math.isfinite(c.ratio) else None
            if s.key == self.winner:
                return (0, 0.0, s.first_trial)
            return (1, -ratio, s.first_trial) if ratio is not None else (2, 0.0, s.first_trial)
        return [s.key for s in sorted(self.sets.values(), key=rank)]

    @property
    def confirmed(self) -> bool | None:
        """True once the winner's claim held on its fresh launches (use it), False when its
        confirmation failed, None before (or no winner)."""
        if self.winner is None:
            return None
        conf = self.sets[self.winner].confirmation
        if conf is None or conf.verdict is Verdict.NOT_ENOUGH_RUNS:
            return None
        return conf.verdict is Verdict.FASTER

    @property
    def confirmed_sets(self) -> int:
        """How many sets were relaunched to confirm (the claim's Bonferroni count)."""
        return sum(1 for s in self.sets.values() if s.confirm_trials)

    def runs_per_launch(self) -> int:
        """The median number of runs in a baseline launch (0 without one)."""
        counts = sorted(len(launch) for launch in self.baseline_launches)
        return counts[len(counts) // 2] if counts else 0

    def min_detectable_effect(self, sets: int = 1) -> float:
        """Smallest gain (fraction) one set's own 95 % verdict calls faster with 80 % power
        (:func:`tuner.judging.stats.min_detectable_effect`); inf without two baseline runs."""
        runs = self.runs_per_launch()
        if self.noise is None or runs < 2:
            return math.inf
        run_sigma, _ = stats.run_noise(self.baseline_launches, scale=self._scale())
        return stats.min_detectable_effect(run_sigma=run_sigma, noise=self.noise, runs_per_launch=runs,
                                           baseline_launches=len(self.baseline_launches),
                                           min_effect=self.min_effect, sets=sets)

    def recommendable_gain(self) -> float:
        """The smallest true gain (fraction) this night's design recommends ("use it") with 80 %
        power: the confirmation test (the best set's fresh launches, :meth:`confirm_design`,
        against one fresh baseline launch, :func:`tuner.judging.stats.recommendable_gain`) at
        :data:`CONFIRM_ALPHA` / :data:`FINALISTS`, with the launch noise the intervals use. inf
        without two baseline runs."""
        runs = self.runs_per_launch()
        if self.noise is None or runs < 2:
            return math.inf
        run_sigma, _ = stats.run_noise(self.baseline_launches, scale=self._scale())
        finalists, launches = self.confirm_design()
        return stats.recommendable_gain(run_sigma=run_sigma, noise=self.noise, runs_per_launch=runs,
                                        finalists=finalists, set_launches=launches,
                                        min_effect=self.min_effect, alpha=CONFIRM_ALPHA)

    def confirm_design(self) -> tuple[int, int]:
        """``(sets, launches)``: the confirmation's Bonferroni count, always :data:`FINALISTS`
        (the most a night confirms, fixed before the night, also when the runner-up drops out and
        the best set takes both slots: the claim's level never depends on the night's data), and
        how many fresh launches the best set gets (:attr:`confirm_slots`; 1 before stage 1 chose
        them). benchmarks/results/night_calibration_slots.txt has what the second launch did to
        the false "use it" rate (1000 no-effect nights a cell: 2.6-3.8 %, 3.3-4.0 % before)."""
        if not self.confirm_slots:
            return FINALISTS, 1
        return FINALISTS, self.confirm_slots.count(self.confirm_slots[0])

    def _scale(self) -> float | None:
        return self.run_scale if math.isfinite(self.run_scale) else None


def _ok_time_order(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    return sorted((r for r in records if r.status.measured and r.kind.relaunched),
                  key=lambda r: (r.started_at if r.started_at is not None else math.inf, r.trial))


def judge(records: Sequence[TrialRecord], *, metric: Metric, min_effect: float = stats.DEFAULT_MIN_EFFECT,
          cannot_act: Mapping[str, str] | None = None, forced: str | None = None, level: int = 1) -> Judgement:
    """Judge every tuned set of ``records`` against the baseline on ``metric`` (the study's,
    :attr:`tuner.record.StudyInfo.metric`) at concurrency ``level`` (:func:`runs_at`), pick the
    finalists from the stage-1 launches and judge their confirmations (module docstring).

    ``cannot_act``: set key -> why its variables cannot change the speed (planning's
    ``Rules.cannot_act``); ``forced``: why none can (the night ran with --force where NCCL does
    not carry the decode allreduce, or TP 1). Those sets get ``Verdict.CANNOT_ACT``: a measured
    ratio, never "slower", never a finalist. Raises ValueError for a metric that is not a
    :class:`tuner.record.Metric` (a bare string included: the study's metric is never assumed).
    """
    if not isinstance(metric, Metric):
        raise ValueError(f"metric must be a Metric ({', '.join(m.value for m in Metric)}), not {metric!r}")
    ordered = _ok_time_order(records)
    cannot = dict(cannot_act or {})
    out = _judge_launches(ordered, metric, min_effect, cannot, forced, level)
    if not out.baseline_launches:
        return out
    first_confirm = next((i for i, r in enumerate(ordered) if r.kind is Kind.CONFIRM), None)
    stage1 = out if first_confirm is None else _judge_launches(ordered[:first_confirm], metric, min_effect, cannot,
                                                               forced, level)
    for key, s1 in stage1.sets.items():
        if key in out.sets:
            out.sets[key].stage1 = s1.comparison
    out.finalists, out.confirm_slots, out.ranked = _finalists(stage1)
    _confirm(out, ordered, metric, level)
    return out


def _judge_launches(ordered: list[TrialRecord], metric: Metric, min_effect: float, cannot: dict[str, str],
                    forced: str | None, level: int) -> Judgement:
    """Every set of ``ordered`` (ok relaunches in launch order) against the baseline at its own
    time, the launch noise, the drift and the warnings; no finalists, no confirmation."""
    bases = [(i, r) for i, r in enumerate(ordered) if r.kind is Kind.BASELINE and runs_at(r, metric, level)]
    baseline_launches = [runs_at(r, metric, level) for _, r in bases]
    base_pos = [i for i, _ in bases]
    sets: dict[str, SetJudgement] = {}
    for i, r in enumerate(ordered):
        if r.kind is Kind.BASELINE:
            continue
        launch = runs_at(r, metric, level)
        if not launch:
            continue
        s = sets.setdefault(r.set_key, SetJudgement(r.set_key, dict(r.env), list(r.flags), [], [], candidate=False))
        s.candidate = s.candidate or r.preset != REFERENCE_PRESET
        s.trials.append(r.trial)
        s.launches.append(launch)
        s.positions.append(i)
        if r.kind is Kind.CONFIRM:
            s.confirm_trials.append(r.trial)
        s.not_applied.update(r.nccl_not_applied)
        s.backend_choice = s.backend_choice or r.backend_choice
        if r.backend_applied is False:  # the same "not applied" as an NCCL variable not echoed
            s.not_applied[r.backend_choice or "backend"] = r.backend_reason or "the server did not apply it"
        s.cannot_act = forced or cannot.get(r.set_key, "")
    every = baseline_launches + [launch for s in sets.values() for launch in s.launches]
    scale = stats.robust_run_sigma(every) if every else math.nan
    sc = scale if math.isfinite(scale) else None
    levels = [stats.launch_level(b, scale=sc) for b in baseline_launches]
    out = Judgement(metric, min_effect, baseline_launches, [r.trial for _, r in bases], None, stats.drift(levels),
                    sets, baseline_positions=base_pos, drift_trend=stats.trend(base_pos, levels), run_scale=scale,
                    forced=forced, level=level, baseline_levels=levels)
    trials = [r.trial for _, r in bases] + [t for s in sets.values() for t in s.trials]
    out.low = [(trials[i], j + 1, ratio) for i, j, ratio in stats.low_runs(every, scale=sc)]
    if not baseline_launches:
        return out
    run_sigma, _ = stats.run_noise(every, scale=sc)
    log_levels = np.log(levels)
    once = [s for s in sets.values() if not s.not_applied]
    weights_at = [stats.interpolation_weights(base_pos, s.positions[0]) for s in once]
    ratios = [math.log(stats.launch_level(s.launches[0], scale=sc)) - float(np.dot(w, log_levels))
              for s, w in zip(once, weights_at, strict=True)]
    null = stats.null_spread(ratios, run_sigma=run_sigma if math.isfinite(run_sigma) else 0.0,
                             runs_per_launch=max(out.runs_per_launch(), 1),
                             baseline_weights=[list(map(float, w)) for w in weights_at],
                             baseline_runs=[len(b) for b in baseline_launches])
    # A confirmed set's first launch was picked as the best of K: its spread would overstate the noise.
    repeated = [s.launches for s in sets.values() if len(s.launches) > 1 and not s.confirm_trials]
    out.noise = stats.launch_noise(baseline_launches, repeated, null=null, scale=sc)
    out.data_noise = out.noise.data_sigma
    for s in sets.values():
        weights = np.mean([stats.interpolation_weights(base_pos, p) for p in s.positions], axis=0)
        s.comparison = stats.compare(s.launches, baseline_launches, noise=out.noise, min_effect=min_effect,
                                     baseline_weights=list(weights), scale=sc)
        if s.cannot_act:
            c = s.comparison
            s.comparison = stats.Comparison(c.ratio, c.ci_low, c.ci_high, Verdict.CANNOT_ACT,
                                            f"measured ratio only: {s.cannot_act}")
    outliers = _outliers(out, sets, sc)
    out.noise_warning = _noise_warning(out.noise, outliers)
    out.inconclusive = _inconclusive(out, levels, repeated, null, run_sigma)
    return out


def _outliers(j: Judgement, sets: dict[str, SetJudgement], scale: float | None) -> list[str]:
    """The launches more than :data:`OUTLIER_PRIORS` SDs under the prior off the rest of their
    set (the baseline, or a set relaunched other than to confirm), named."""
    assert j.noise is not None
    prior = OUTLIER_PRIORS * j.noise.prior_sigma
    groups = [("baseline", j.baseline_trials, j.baseline_launches)]
    groups += [(f"set {s.key}", s.trials, s.launches) for s in sets.values() if len(s.launches) > 1 and not s.confirm_trials]
    named = []
    for what, trials, launches in groups:
        if len(launches) < 2 or prior <= 0:
            continue
        lv = np.log([stats.launch_level(x, scale=scale) for x in launches])
        limit = prior * math.sqrt(1.0 + 1.0 / (len(lv) - 1))
        if len(lv) == 2:
            if abs(lv[1] - lv[0]) > limit:
                named.append(f"the {what} launches at trials {trials[0]} and {trials[1]} differ by "
                             f"{math.expm1(abs(lv[1] - lv[0])) * 100:.1f} %")
            continue
        for i, v in enumerate(lv):
            rest = float(np.median(np.delete(lv, i)))
            if abs(v - rest) > limit:
                named.append(f"the {what} launch at trial {trials[i]} is {math.expm1(v - rest) * 100:+.1f} % off its others")
    return named


def _noise_warning(noise: stats.LaunchNoise, outliers: list[str]) -> str | None:
    """The sentence that says the launch noise is larger than the prior assumes, or None."""
    if not noise.above_prior and not outliers:
        return None
    measured = noise.data_sigma if noise.data_sigma is not None else noise.sigma
    head = f"launch-to-launch noise measured ~{measured * 100:.1f} % (prior {noise.prior_sigma * 100:g} %)"
    if noise.above_prior:
        head += f", well above what the verdicts assume: every interval uses {noise.sigma * 100:.1f} %"
    if outliers:
        head += ("; " if noise.above_prior else ", but ") + "; ".join(outliers) + \
            f", more than {OUTLIER_PRIORS:g} SDs of the prior apart"
    return (head + ". Measure the baseline more often (--baseline-every 3); more runs per launch do not help, "
            "they shrink only the run noise")


def _inconclusive(j: Judgement, levels: list[float], repeated: list[list[list[float]]],
                  null: tuple[float, float, int] | None, run_sigma: float) -> str | None:
    """Why the baseline moved beyond what the night can judge (None when it did not): 3+
    baseline launches that go up and down (the interpolation cannot follow a zigzag) by more
    than the launch noise the rest of the night measures explains (chi-square, 99 %)."""
    k = len(levels)
    if k < 3:
        return None
    lv = np.log(levels)
    steps = np.sign(np.diff(lv))
    steps = steps[steps != 0]
    if not np.any(steps[1:] != steps[:-1]):
        return None  # monotone: a drift the interpolation follows
    ref = stats.launch_noise([], repeated, null=null)
    rs = run_sigma if math.isfinite(run_sigma) else 0.0
    var = ref.sigma**2 + rs**2 / max(j.runs_per_launch(), 1)
    if var <= 0 or float(((lv - lv.mean()) ** 2).sum()) / var <= stats.chi2_quantile(0.99, k - 1):
        return None
    return (f"the baseline moved {j.drift * 100:.1f} % up and down across its {k} launches, more than the launch "
            f"noise of the rest of the night (~{ref.sigma * 100:.1f} %) explains, so no set can be judged against "
            "it: find what changes the machine between launches (clocks, other jobs, temperature), then run the "
            "night again with --baseline-every 2")


def _finalists(stage1: Judgement) -> tuple[list[str], list[str], list[str]]:
    """The stage-1 sets to confirm, best first, and the set of each of the :data:`FINALISTS`
    confirmation slots. A finalist is not slower, able to act, applied and at least the minimum
    effect above the baseline by its point estimate (below it "use it" is never said). The
    runner-up is one only while it could be the best: its stage-1 interval reaches the best set's
    ratio; otherwise (or with no runner-up) its slot relaunches the best set once more, so the
    claim rests on two fresh launches of it (still at CONFIRM_ALPHA / FINALISTS:
    :meth:`Judgement.confirm_design`). Also every set that could be one, best first. None on an
    inconclusive night."""
    if stage1.inconclusive is not None:
        return [], [], []
    able = [s for s in stage1.sets.values() if s.candidate and not s.not_applied and not s.cannot_act
            and s.comparison is not None
            and s.comparison.verdict not in (Verdict.SLOWER, Verdict.SLOWER_BELOW_MIN, Verdict.NOT_ENOUGH_RUNS)
            and s.comparison.ratio >= 1.0 + stage1.min_effect]
    able.sort(key=lambda s: s.comparison.ratio if s.comparison else 0.0, reverse=True)
    if not able:
        return [], [], []
    best = able[0]
    assert best.comparison is not None
    chosen = [best.key] + [s.key for s in able[1:FINALISTS]
                           if s.comparison is not None and s.comparison.ci_high >= best.comparison.ratio]
    return chosen, chosen + [best.key] * (FINALISTS - len(chosen)), [s.key for s in able]


def _confirm(j: Judgement, ordered: list[TrialRecord], metric: Metric, level: int) -> None:
    """Judge each confirmed set on its fresh launches alone (the baseline launches after its
    first confirmation), at :data:`CONFIRM_ALPHA` / :data:`FINALISTS` (the most a night confirms,
    fixed in advance so that confirming the runner-up later never changes the first's verdict),
    then name the winner."""
    assert j.noise is not None
    confirming = [s for s in j.sets.values() if s.confirm_trials]
    _soaks(j, ordered, confirming)
    alpha = CONFIRM_ALPHA / FINALISTS  # fixed before the night: a later runner-up never moves a verdict given
    sc = j._scale()
    for s in confirming:
        start = s.positions[s.trials.index(s.confirm_trials[0])]
        new_base = [runs_at(r, metric, level) for i, r in enumerate(ordered)
                    if i > start and r.kind is Kind.BASELINE and runs_at(r, metric, level)]
        new_set = [launch for t, launch in zip(s.trials, s.launches, strict=True) if t in s.confirm_trials]
        if not new_base:
            s.confirmation = stats.Comparison(math.nan, math.nan, math.nan, Verdict.NOT_ENOUGH_RUNS,
                                              "no baseline launch after the confirmation yet")
            continue
        c = stats.confirmed(new_set, new_base, noise=j.noise, alpha=alpha, scale=sc)
        why = _cannot_use(j, s) if c.verdict is Verdict.FASTER else ""
        s.confirmation = c if not why else stats.Comparison(c.ratio, c.ci_low, c.ci_high,
                                                            Verdict.FAILED_CONFIRMATION, f"{c.note}, but {why}")
    held = [s for s in confirming if s.confirmation is not None and s.confirmation.verdict is Verdict.FASTER]
    if held:
        j.winner = max(held, key=lambda s: s.comparison.ratio if s.comparison else 0.0).key
    elif j.finalists:
        j.winner = j.finalists[0]
    if j.winner is not None:
        w = j.sets[j.winner]
        j.winner_comparison = w.comparison
        j.headline = stats.Headline(0, 0 if held else None, w.confirmation or w.comparison,
                                    max(len(confirming), 1), 1.0 - alpha)


def _soaks(j: Judgement, ordered: list[TrialRecord], confirming: list[SetJudgement]) -> None:
    """The soaks of the confirmation launches and of the last soaked baseline launch (tuner.sweep.soak)."""
    for s in confirming:
        soaked = [r for r in ordered if r.trial in s.confirm_trials and r.soak_s is not None]
        failed = next((r for r in soaked if r.soak_failure), None)
        if soaked:
            s.soak, s.soak_failed = (failed or soaked[-1]).soak_words(), failed is not None
    bases = [r for r in ordered if r.kind is Kind.BASELINE and r.soak_s is not None]
    if bases:
        j.baseline_soak, j.baseline_soak_failed = bases[-1].soak_words(), bool(bases[-1].soak_failure)


def _cannot_use(j: Judgement, s: SetJudgement) -> str:
    """Why a set confirmed on fresh launches still cannot be recommended ("" when it can)."""
    c = s.comparison
    if s.soak_failed and j.baseline_soak_failed:
        return (f"the machine hangs under load: the untuned baseline failed the same soak ({j.baseline_soak}), "
                "so the set's soak failure is not the set's; no set is recommended until the machine lasts a soak")
    if s.soak_failed:
        return f"it failed its soak ({s.soak})"
    if s.not_applied or s.cannot_act:
        return "its variables cannot change the speed"
    if j.inconclusive is not None:
        return "the night is inconclusive"
    if c is None or c.verdict in (Verdict.SLOWER, Verdict.SLOWER_BELOW_MIN):
        return "it is slower on all its launches"
    if c.ratio < 1.0 + j.min_effect:
        return f"on all its launches it is {c.gain_pct:+.1f} %, below the {j.min_effect * 100:g} % that matters"
    return ""


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


def cannot_act_on(info: StudyInfo, records: Sequence[TrialRecord]) -> dict[str, str]:
    """Set key -> why NCCL variables cannot change its speed on this night, from what the first
    baseline showed (``info``): one GPU (``topology.nranks == 1``: no allreduce at all), or NCCL
    variables in a set whose decode allreduce NCCL does not carry, by the set's backend choice
    or else the baseline's backend (:func:`tuner.servers.nccl_cannot_act_at_decode`: "cannot
    act at decode"; a set that sets a backend choice alone is judged on its own speed). Empty
    when every set can act."""
    topo = info.topology
    if topo is not None and topo.nranks == 1:
        why = "TP 1: one GPU, no allreduce for NCCL to carry"
        return {r.set_key: why for r in records if r.kind is not Kind.BASELINE}
    server = info.allreduce_server or None
    out: dict[str, str] = {}
    for r in records:
        if r.kind is Kind.BASELINE:
            continue
        at_decode = nccl_cannot_act_at_decode(server, r.env, r.flags, info.allreduce_backend)
        if at_decode is not None:
            out[r.set_key] = at_decode
    return out


def judge_by_host_type(records: Sequence[TrialRecord], *, metric: Metric,
                       min_effect: float = stats.DEFAULT_MIN_EFFECT, cannot_act: Mapping[str, str] | None = None,
                       forced: str | None = None, level: int = 1) -> dict[str, Judgement]:
    """:func:`judge` of each host type's records (:func:`host_type_groups`) on their own: each
    type's sets against its own baseline launches (``cannot_act``, ``forced``, ``level`` as
    there). With no record, ``{"": judge([])}``. Raises ValueError for an unknown metric."""
    groups = host_type_groups(records) or {UNKNOWN_TYPE: []}
    return {t: judge(group, metric=metric, min_effect=min_effect, cannot_act=cannot_act, forced=forced, level=level)
            for t, group in groups.items()}
