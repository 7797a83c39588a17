"""The night's one budget rule: ``--trials N`` counts every relaunch, and the checks keep their slots in it.

Every relaunch of the night counts (:func:`counts_in_budget`): the first baseline, every
baseline re-measure (``--baseline-every``, one after an outlier baseline launch, the final one),
every tuned set and every confirmation, finished or in flight on any runner of the study, and
the baseline relaunched to check a machine-suspect failure (tuner/sweep/runner.py,
``Sweep._baseline_check``); an interrupted relaunch does not (its retry does), nor one left
``machine_fault`` (the machine's: a resume relaunches it), nor a machine-suspect first launch
its relaunch replaced (a trial counts once, however many launches it made). Inside N the plan reserves the second stage's
slots (:class:`Budget`): one confirmation of the best set, one more from
N >= :data:`RUNNER_UP_FROM` (the runner-up's when it could be the best, else the best set's
second), and the final baseline launch, which comes right after the last
confirmation and is its fresh baseline. ``--no-confirm`` and ``--no-final-baseline`` free their
slots. The correctness gate's reference check (``[gates] reference``: the baseline relaunched once
in the reference configuration, tuner/sweep/gate.py) is made right after the first baseline, so it
is the first stage's, counted like the baseline (:attr:`Budget.reference`). The first stage (the
baseline, the reference check, its re-measures, the tuned sets) spends what is left:
:attr:`Budget.screening`. A night that cannot hold the baseline and its reserved checks is refused
before anything starts (:meth:`Budget.problem`). The reserved checks are worded once,
:func:`check_words`, wherever the night names them (the budget, the clock, the sweep's stops).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.planning.entry import Step
from tuner.record import Status, TrialRecord

__all__ = ["Budget", "check_words", "counts_in_budget"]

#: The smallest budget (relaunches) that also reserves a second confirmation slot (the runner-up's,
#: or the best set's second fresh launch).
RUNNER_UP_FROM = 10


def check_words(checks: Sequence[Step], *, which: bool = False) -> list[str]:
    """The reserved checks ``checks`` in words, one item per kind: ``["2 confirmations", "the
    final baseline"]``; ``which``: say whose confirmations two are (the best set, then the runner-up or the best
    set again)."""
    confirms = sum(1 for step in checks if step is Step.CONFIRM)
    words = [f"{confirms} confirmation{'s' if confirms != 1 else ''}"] if confirms else []
    if which and confirms == 2:
        words[0] += " (the best set, then the runner-up or the best set again)"
    return words + (["the final baseline"] if Step.FINAL_BASELINE in checks else [])


def counts_in_budget(rec: TrialRecord) -> bool:
    """True for a relaunch the budget counts: any relaunched kind (baseline, re-measure, preset,
    search, confirm), finished or in flight; an interrupted one not (its retry counts), nor a
    ``machine_fault`` (the machine's, relaunched on resume), nor a set recorded without a
    launch (duplicate, invalid)."""
    return rec.kind.relaunched and rec.status not in (Status.INTERRUPTED, Status.MACHINE_FAULT)


@dataclass(frozen=True)
class Budget:
    """The night's ``trials`` (relaunches, everything included) and the reserved checks it holds:
    ``confirm`` (the best set relaunched once more; from :data:`RUNNER_UP_FROM` a second slot:
    the runner-up when it could be the best, else the best set again) and ``final_baseline`` (the baseline right after the confirmations)."""

    trials: int
    confirm: bool = True
    final_baseline: bool = True
    reference: bool = False

    @property
    def confirmations(self) -> int:
        """Confirmation slots reserved: 0 (``--no-confirm``), 1, or 2 from :data:`RUNNER_UP_FROM` relaunches."""
        if not self.confirm:
            return 0
        return 2 if self.trials >= RUNNER_UP_FROM else 1

    def spent_words(self) -> str:
        """Why the first stage stops at its share: ``relaunch budget of 12 spent: 8 for the
        baseline and the sets, 4 kept for the checks``."""
        kept = f", {self.reserved} kept for the checks" if self.reserved else ""
        return f"relaunch budget of {self.trials} spent: {self.screening} for the baseline and the sets{kept}"

    @property
    def steps(self) -> tuple[Step, ...]:
        """The reserved checks in the night's order: each confirmation, then the final baseline."""
        return (Step.CONFIRM,) * self.confirmations + ((Step.FINAL_BASELINE,) if self.final_baseline else ())

    @property
    def reserved(self) -> int:
        """Slots the reserved checks hold inside ``trials``."""
        return len(self.steps)

    @property
    def screening(self) -> int:
        """Relaunches the first stage may spend: the baseline, its re-measures and the tuned sets."""
        return self.trials - self.reserved

    @property
    def minimum(self) -> int:
        """The smallest ``trials`` this night's checks allow: the baseline and the reserved checks."""
        return 1 + int(self.reference) + Budget(max(self.trials, 0), self.confirm, self.final_baseline).reserved

    def problem(self) -> str | None:
        """Why the budget is too small (names the value, the minimum and what the slots hold), None when it fits."""
        if self.trials >= self.minimum:
            return None
        held = ["the baseline", *(["the reference check"] if self.reference else []), *check_words(self.steps)]
        return (f"{self.trials} relaunch{'es' if self.trials != 1 else ''} cannot hold {', '.join(held[:-1])} and "
                f"{held[-1]}: at least {self.minimum} are needed, more to leave room for sets (--no-confirm and "
                "--no-final-baseline free their slots)")

    def words(self, remeasures: int = 0, sets: int | None = None) -> str:
        """How the budget is spent, e.g. ``12 relaunches: the baseline, up to 8 sets, 2
        confirmations (the best set, then the runner-up or the best set again), the final baseline``; ``remeasures``:
        baseline re-measures planned in the first stage, ``sets``: the sets it leaves room for
        (default: what the first stage leaves after the baseline and the re-measures)."""
        left = max(0, self.screening - 1 - int(self.reference) - remeasures) if sets is None else sets
        parts = ["the baseline"] + (["the reference check (the baseline's answers against the reference "
                                     "configuration's)"] if self.reference else [])
        if remeasures:
            parts.append(f"{remeasures} baseline re-measure{'s' if remeasures != 1 else ''}")
        parts.append(f"up to {left} set{'s' if left != 1 else ''}" if left else "no tuned set")
        parts += check_words(self.steps, which=True)
        return f"{self.trials} relaunch{'es' if self.trials != 1 else ''}: " + ", ".join(parts)
