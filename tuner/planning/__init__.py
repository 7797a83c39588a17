"""What to relaunch next: one set of planning rules for the sweep, ``--dry-run`` and the screen.

:mod:`~tuner.planning.order` (the :class:`Planner`: order, skips, the reserved checks),
:mod:`~tuner.planning.budget` (the one budget rule: every relaunch counts, the checks' slots
reserved inside it), :mod:`~tuner.planning.entry` (typed plan entries, :class:`ScreenedSet`),
:mod:`~tuner.planning.identity` (a set's identity, NCCL's pick at the night's sizes from
``diagnose.json``), :mod:`~tuner.planning.sizes` (the allreduce sizes a night measures),
:mod:`~tuner.planning.feasibility` (what must not or may not launch), :mod:`~tuner.planning.rules`
(both for one night), :mod:`~tuner.planning.sets` (counting a space's sets),
:mod:`~tuner.planning.params` (a set as Optuna parameters), :mod:`~tuner.planning.forecast`
(the whole plan before the night, for ``--dry-run``), :mod:`~tuner.planning.clock` (how long
the night takes, what fits before a deadline, the reserved checks' time kept),
:mod:`~tuner.planning.limits` (the one budget-and-deadline rule: whether another relaunch may start).
"""

from tuner.planning.budget import RUNNER_UP_FROM, Budget, check_words, counts_in_budget
from tuner.planning.clock import (
    ESTIMATE_MARGIN,
    Fit,
    NightClock,
    Phase,
    RelaunchTime,
    clock_time,
    deadline_at,
    deadline_name,
    fits,
    kept_after,
    probe_tokens,
    relaunch_time,
    span,
)
from tuner.planning.entry import Decision, PlanEntry, ScreenedSet, Step, earlier_label
from tuner.planning.feasibility import doubts, problems
from tuner.planning.forecast import Plan, SamplerView, forecast, rules_before_the_night
from tuner.planning.identity import (
    DecodeContext,
    Facts,
    SizePick,
    StudyFacts,
    load_decode_context,
    night_inert,
    set_identity,
)
from tuner.planning.limits import NightLimits
from tuner.planning.order import (
    EXHAUSTED,
    MAX_SKIPPED_PROPOSALS,
    RESERVED,
    Planner,
    final_baseline_owed,
    outlier_baseline,
    target_met,
)
from tuner.planning.params import FLAG_ON, Launch, flag_params, split_params
from tuner.planning.rules import Rules
from tuner.planning.sets import COUNT_LIMIT, ENUMERABLE_POINTS, open_keys, point_count, point_sets
from tuner.planning.sizes import CHUNK_FLAGS, NightSize, NightSizes, chunk_tokens, night_sizes

__all__ = [
    "CHUNK_FLAGS",
    "COUNT_LIMIT",
    "ENUMERABLE_POINTS",
    "ESTIMATE_MARGIN",
    "EXHAUSTED",
    "FLAG_ON",
    "MAX_SKIPPED_PROPOSALS",
    "RESERVED",
    "RUNNER_UP_FROM",
    "Budget",
    "Decision",
    "DecodeContext",
    "Facts",
    "Fit",
    "Launch",
    "NightClock",
    "NightLimits",
    "NightSize",
    "NightSizes",
    "Phase",
    "Plan",
    "PlanEntry",
    "Planner",
    "RelaunchTime",
    "Rules",
    "SamplerView",
    "ScreenedSet",
    "SizePick",
    "Step",
    "StudyFacts",
    "check_words",
    "chunk_tokens",
    "clock_time",
    "counts_in_budget",
    "deadline_at",
    "deadline_name",
    "doubts",
    "earlier_label",
    "final_baseline_owed",
    "fits",
    "flag_params",
    "forecast",
    "kept_after",
    "load_decode_context",
    "night_inert",
    "night_sizes",
    "open_keys",
    "outlier_baseline",
    "point_count",
    "point_sets",
    "probe_tokens",
    "problems",
    "relaunch_time",
    "rules_before_the_night",
    "set_identity",
    "span",
    "split_params",
    "target_met",
]
