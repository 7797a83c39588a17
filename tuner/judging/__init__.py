"""Statistics and verdicts: trial records to judgements against the baseline.

:mod:`~tuner.judging.stats` (two levels of noise: launch-to-launch and run-to-run, the
comparison of a set with the baseline, the headline about the best of K sets, confirmations,
the runs a launch needs), :mod:`~tuner.judging.judge` (a study's records to sets, each judged
against its host type's baseline on the study's metric) and :mod:`~tuner.judging.levels` (every
set judged at each concurrency level, the headline at the one the config names).
"""

from tuner.judging.judge import (
    UNKNOWN_TYPE,
    Judgement,
    SetJudgement,
    host_type_groups,
    judge,
    judge_by_host_type,
    pending,
    runs_of,
)
from tuner.judging.levels import (
    SINGLE_STREAM,
    Flip,
    LevelJudgement,
    LevelVerdict,
    judge_levels,
    level_records,
    measured_levels,
)
from tuner.judging.stats import (
    DEFAULT_MIN_EFFECT,
    MIN_RUNS,
    PRIOR_LAUNCH_DF,
    PRIOR_LAUNCH_SIGMA,
    Comparison,
    Headline,
    Launches,
    LaunchNoise,
    best_of,
    compare,
    confirmed,
    drift,
    launch_noise,
    level,
    median_ci_halfwidth,
    min_detectable_effect,
    run_noise,
    runs_for_precision,
    verdict_words,
)

__all__ = [
    "DEFAULT_MIN_EFFECT",
    "MIN_RUNS",
    "PRIOR_LAUNCH_DF",
    "PRIOR_LAUNCH_SIGMA",
    "SINGLE_STREAM",
    "UNKNOWN_TYPE",
    "Comparison",
    "Flip",
    "Headline",
    "Judgement",
    "LaunchNoise",
    "Launches",
    "LevelJudgement",
    "LevelVerdict",
    "SetJudgement",
    "best_of",
    "compare",
    "confirmed",
    "drift",
    "host_type_groups",
    "judge",
    "judge_by_host_type",
    "judge_levels",
    "launch_noise",
    "level",
    "level_records",
    "measured_levels",
    "median_ci_halfwidth",
    "min_detectable_effect",
    "pending",
    "run_noise",
    "runs_for_precision",
    "runs_of",
    "verdict_words",
]
