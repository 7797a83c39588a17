"""What to relaunch next: one set of planning rules for the sweep, ``--dry-run`` and the screen.

:mod:`~tuner.planning.order` (the :class:`Planner`: order, skips, the reserved checks, the
budget's count), :mod:`~tuner.planning.entry` (typed plan entries, :class:`ScreenedSet`),
:mod:`~tuner.planning.identity` (a set's identity, the decode size from ``diagnose.json``),
:mod:`~tuner.planning.feasibility` (what must not or may not launch), :mod:`~tuner.planning.rules`
(both for one night), :mod:`~tuner.planning.sets` (counting a space's sets),
:mod:`~tuner.planning.params` (a set as Optuna parameters), :mod:`~tuner.planning.forecast`
(the whole plan before the night, for ``--dry-run``).
"""

from tuner.planning.entry import Decision, PlanEntry, ScreenedSet, Step, earlier_label
from tuner.planning.feasibility import doubts, problems
from tuner.planning.forecast import Plan, SamplerView, forecast, rules_before_the_night
from tuner.planning.identity import DecodeContext, Facts, load_decode_context, set_identity
from tuner.planning.order import (
    BUDGETED,
    EXHAUSTED,
    MAX_SKIPPED_PROPOSALS,
    RESERVED,
    Planner,
    counts_in_budget,
    final_baseline_owed,
)
from tuner.planning.params import FLAG_ON, flag_params, split_params
from tuner.planning.rules import Rules
from tuner.planning.sets import COUNT_LIMIT, ENUMERABLE_POINTS, open_keys, point_count, point_sets

__all__ = [
    "BUDGETED",
    "COUNT_LIMIT",
    "ENUMERABLE_POINTS",
    "EXHAUSTED",
    "FLAG_ON",
    "MAX_SKIPPED_PROPOSALS",
    "RESERVED",
    "Decision",
    "DecodeContext",
    "Facts",
    "Plan",
    "PlanEntry",
    "Planner",
    "Rules",
    "SamplerView",
    "ScreenedSet",
    "Step",
    "counts_in_budget",
    "doubts",
    "earlier_label",
    "final_baseline_owed",
    "flag_params",
    "forecast",
    "load_decode_context",
    "open_keys",
    "point_count",
    "point_sets",
    "problems",
    "rules_before_the_night",
    "set_identity",
    "split_params",
]
