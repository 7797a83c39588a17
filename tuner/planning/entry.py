"""Typed plan entries: what the night does next, what it skips and why, what only it can decide.

One :class:`PlanEntry` is one step of the plan. The sweep gets them one at a time from
:class:`tuner.planning.order.Planner` and carries them out; ``--dry-run`` gets the whole list from
:func:`tuner.planning.forecast.forecast` and prints it. The screen hands its best sets to the
planner as :class:`ScreenedSet` pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from tuner.record import Kind, TrialRecord

__all__ = ["Decision", "PlanEntry", "ScreenedSet", "Step", "earlier_label"]


class Step(StrEnum):
    """What a plan entry does."""

    BASELINE = "baseline"              #: the untuned set, first
    REMEASURE = "baseline re-measure"  #: the untuned set again, every ``--baseline-every`` relaunches
    RETRY = "retry"                    #: a trial whose runner died, once
    SET = "set"                        #: a named set: one of the screen's best, or a preset
    SKIP = "skip"                      #: a named set not launched: ``reason``, ``equals``
    FIXES = "triage fixes"             #: (forecast) the triage's fix sets, ``up_to`` of them
    SCREENED = "screened"              #: (forecast) the screen's best sets, ``up_to`` of them
    PROPOSAL = "proposal"              #: the sampler's next proposal (forecast: ``up_to`` of them)
    CONFIRM = "confirm"                #: reserved: the winner relaunched once more
    FINAL_BASELINE = "final baseline"  #: reserved: the drift check after the last tuned relaunch
    REFERENCE = "reference check"      #: the correctness gate's reference configuration, right after the baseline
    DONE = "done"                      #: nothing is left to relaunch: ``reason``


@dataclass(frozen=True)
class PlanEntry:
    """One step of the plan.

    ``name``: the preset's or screened set's name (``""`` for the sampler's, a baseline's);
    ``env``/``flags``: the set; ``kind``: the record kind a launch gets; ``reason``: why a
    SKIP is not launched or why DONE; ``equals``/``equals_trial``: the earlier set a SKIP is
    to NCCL the same as (a label such as ``preset ring``, and its trial number, None in a
    forecast); ``retry_of``: the trial a RETRY redoes; ``up_to``: the bound of a forecast's
    FIXES, SCREENED or PROPOSAL entry; ``doubt``: (forecast) why a SET may still not be launched
    (what the baseline's NCCL version and topology decide); ``reach``: (forecast) why a SET may
    not be reached within the budget, ``""`` when it is.
    """

    step: Step
    name: str = ""
    env: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    kind: Kind = Kind.PRESET
    reason: str = ""
    equals: str = ""
    equals_trial: int | None = None
    retry_of: int | None = None
    up_to: int | None = None
    doubt: str = ""
    reach: str = ""

    @property
    def launches(self) -> bool:
        """True for the entries that relaunch the server."""
        return self.step in (Step.BASELINE, Step.REMEASURE, Step.RETRY, Step.SET, Step.PROPOSAL, Step.CONFIRM,
                             Step.FINAL_BASELINE, Step.REFERENCE)


class ScreenedSet(NamedTuple):
    """One of the screen's best sets, as the screen hands it to the planner: ``name``
    (``screen-1``, ...) and ``env`` (screened variables only)."""

    name: str
    env: dict[str, str]


@dataclass
class Decision:
    """What to do with a set about to be launched: ``launch``, or not, with the earlier trial
    it is to NCCL the same as (``duplicate_of``) or why it must not run (``invalid_reason``);
    ``reason`` words either for the log; ``cause``: why, as the record of the set not launched
    stores it (its ``cause``; the earlier set is its ``duplicate_of``, so not named here)."""

    launch: bool
    duplicate_of: TrialRecord | None = None
    invalid_reason: str = ""
    reason: str = ""
    cause: str = ""


def earlier_label(rec: TrialRecord) -> str:
    """How a plan names an earlier set: ``the untuned baseline``, ``preset ll``, ``screen-1``,
    ``fix: p2p level`` (the triage's), or the record's kind (a sampler's set)."""
    if rec.kind is Kind.BASELINE:
        return "the untuned baseline"
    if rec.preset.startswith(("screen-", "fix: ")) or not rec.preset:
        return rec.preset or f"a {rec.kind.value} set"
    return f"preset {rec.preset}"
