"""Statistics and verdicts: trial records to judgements against the baseline.

:mod:`~tuner.judging.stats` (two levels of noise: launch-to-launch and run-to-run, the
comparison of a set with the baseline, the headline about the best of K sets, confirmations,
the runs a launch needs), :mod:`~tuner.judging.judge` (a study's records to sets, each judged
against its host type's baseline on the study's metric) and :mod:`~tuner.judging.levels` (every
set judged at each concurrency level, the headline at the one the config names) and
:mod:`~tuner.judging.answers` (the correctness gate's rule: a launch's greedy answers against the
baseline's, forks told from corruption).
"""

from tuner.judging.answers import REFERENCE_PRESET, judge_answers, self_divergence
from tuner.judging.judge import (
    CONFIRM_ALPHA,
    OUTLIER_PRIORS,
    UNKNOWN_TYPE,
    Judgement,
    SetJudgement,
    cannot_act_on,
    host_type_groups,
    judge,
    judge_by_host_type,
    runs_of,
)
from tuner.judging.levels import SINGLE_STREAM, LevelJudgement, judge_levels, measured_levels
from tuner.judging.stats import (
    DEFAULT_MIN_EFFECT,
    MIN_RUNS,
    PRIOR_LAUNCH_SIGMA,
    Comparison,
    LaunchNoise,
    best_of,
    compare,
    confirmed,
    drift,
    gain_pct,
    launch_level,
    launch_noise,
    level,
    median_ci_halfwidth,
    min_detectable_effect,
    robust_run_sigma,
    runs_for_precision,
    verdict_words,
)

__all__ = [
    "CONFIRM_ALPHA",
    "DEFAULT_MIN_EFFECT",
    "MIN_RUNS",
    "OUTLIER_PRIORS",
    "PRIOR_LAUNCH_SIGMA",
    "REFERENCE_PRESET",
    "SINGLE_STREAM",
    "UNKNOWN_TYPE",
    "Comparison",
    "Judgement",
    "LaunchNoise",
    "LevelJudgement",
    "SetJudgement",
    "best_of",
    "cannot_act_on",
    "compare",
    "confirmed",
    "drift",
    "gain_pct",
    "host_type_groups",
    "judge",
    "judge_answers",
    "judge_by_host_type",
    "judge_levels",
    "launch_level",
    "launch_noise",
    "level",
    "measured_levels",
    "median_ci_halfwidth",
    "min_detectable_effect",
    "robust_run_sigma",
    "runs_for_precision",
    "runs_of",
    "self_divergence",
    "verdict_words",
]
