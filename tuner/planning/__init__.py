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
:mod:`~tuner.planning.limits` (the one budget-and-deadline rule: whether another relaunch may start),
:mod:`~tuner.planning.reach` (the presets a budget does not reach, the time it leaves unused, the budget that fits).
"""

from tuner.planning.budget import Budget, counts_in_budget
from tuner.planning.clock import (
    ESTIMATE_MARGIN,
    NightClock,
    RelaunchTime,
    clock_time,
    deadline_at,
    deadline_name,
    fits,
    relaunch_time,
    span,
)
from tuner.planning.entry import Decision, PlanEntry, ScreenedSet, Step, earlier_label
from tuner.planning.forecast import Plan, SamplerView, forecast, rules_before_the_night
from tuner.planning.identity import DecodeContext, Facts, StudyFacts, load_decode_context
from tuner.planning.limits import NightLimits
from tuner.planning.order import (
    EXHAUSTED,
    MAX_SKIPPED_PROPOSALS,
    Planner,
    final_baseline_owed,
    outlier_baseline,
    target_met,
)
from tuner.planning.params import Launch, flag_params, split_params
from tuner.planning.reach import budget_that_fits, clock_budget, reach, reach_lines, unused_line
from tuner.planning.rules import Rules
from tuner.planning.sizes import night_sizes

__all__ = [
    "ESTIMATE_MARGIN",
    "EXHAUSTED",
    "MAX_SKIPPED_PROPOSALS",
    "Budget",
    "Decision",
    "DecodeContext",
    "Facts",
    "Launch",
    "NightClock",
    "NightLimits",
    "Plan",
    "PlanEntry",
    "Planner",
    "RelaunchTime",
    "Rules",
    "SamplerView",
    "ScreenedSet",
    "Step",
    "StudyFacts",
    "budget_that_fits",
    "clock_budget",
    "clock_time",
    "counts_in_budget",
    "deadline_at",
    "deadline_name",
    "earlier_label",
    "final_baseline_owed",
    "fits",
    "flag_params",
    "forecast",
    "load_decode_context",
    "night_sizes",
    "outlier_baseline",
    "reach",
    "reach_lines",
    "relaunch_time",
    "rules_before_the_night",
    "span",
    "split_params",
    "target_met",
    "unused_line",
]
