"""The night's limits: whether another relaunch may start, within its budget and before its deadline.

One rule for the sweep, ``--dry-run``, the clock and the screen. The budget
(:class:`tuner.planning.budget.Budget`) gives the first stage its share and keeps the reserved
checks' slots; the deadline (``--timeout``/``--until``, :func:`tuner.planning.clock.deadline_at`)
lets a relaunch start only when it, and the reserved checks' time it must keep after it, fit
(:func:`tuner.planning.clock.fits`, :func:`tuner.planning.clock.kept_after`, each relaunch at
:attr:`tuner.planning.clock.RelaunchTime.guard_s`). :class:`NightLimits` holds both and words
every refusal; the clock it lays (:meth:`NightLimits.clock`) applies the same rule ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tuner.planning.budget import Budget, check_words
from tuner.planning.clock import NightClock, RelaunchTime, deadline_at, deadline_name, fits, kept_after, span
from tuner.planning.entry import Step

__all__ = ["NightLimits"]


@dataclass(frozen=True)
class NightLimits:
    """The night's ``budget`` (relaunches, the reserved checks' slots inside it) and its
    ``deadline`` (Unix s; None: none), named by ``deadline_words`` (``--until 07:00``).

    Every method takes ``spent`` (relaunches the budget counts so far,
    :func:`tuner.planning.budget.counts_in_budget`) and, in the second stage, ``made``: the index
    in :attr:`Budget.steps` of the reserved check being made."""

    budget: Budget
    deadline: float | None = None
    deadline_words: str = ""

    @classmethod
    def of(cls, budget: Budget, now: float, timeout_s: float | None, until: datetime | None) -> NightLimits:
        """The limits of a night started at ``now`` (Unix s) under ``--timeout`` (s) and ``--until``."""
        return cls(budget, deadline_at(now, timeout_s, until), deadline_name(timeout_s, until, now))

    def checks_left(self, spent: int, made: int = 0) -> tuple[Step, ...]:
        """The reserved checks the night still has slots for, in order (the last ones of
        :attr:`Budget.steps` when the budget left holds fewer, none before ``made``)."""
        steps = self.budget.steps
        left = max(0, self.budget.trials - max(spent, self.budget.screening))
        return steps[max(made, len(steps) - min(left, len(steps))):]

    def allows(self, spent: int, now: float, guard_s: float, *, step: Step | None = None, made: int = 0,
               count_budget: bool = True, what: str = "another relaunch", soak_s: float = 0.0) -> tuple[bool, str]:
        """``(True, "")`` when a relaunch may start at ``now`` (Unix s), else ``(False, why)``.

        ``step`` None: a first-stage relaunch, within the first stage's share, keeping every
        reserved check still owed after it; a reserved ``step`` (or the retry of a silent
        runner's trial, :attr:`Step.RETRY`): within the whole budget, keeping what
        :func:`kept_after` says. ``count_budget`` False: time only (a trial whose slot its failure
        frees). Each relaunch is counted at ``guard_s`` (s) before the deadline, a confirmation
        with its soak (``soak_s``, s) after it, and a first-stage one keeps each confirmation's
        soak too (the final baseline's soak is made only where time is left)."""
        stage1 = step is None
        if count_budget and spent >= (self.budget.screening if stage1 else self.budget.trials):
            return False, self.budget.spent_words() if stage1 else f"relaunch budget of {self.budget.trials} spent"
        if self.deadline is None:
            return True, ""
        checks = self.checks_left(spent, made)
        then = kept_after(step, checks if stage1 else self.budget.steps[made + 1:])
        soaks = soak_s * sum(1 for s in checks if s is Step.CONFIRM) if stage1 else (
            soak_s if step is Step.CONFIRM else 0.0)
        if fits(now + soaks, self.deadline, guard_s, then):
            return True, ""
        kept = (f" and the {then} reserved check{'s' if then != 1 else ''} after it (~{span(then * guard_s)}: "
                f"{', '.join(check_words(checks[-then:]))})" if then else "")
        soaked = f" and {span(soaks)} of soak" if soaks else ""
        return False, f"{self.deadline_words}: {what} (~{span(guard_s)}){kept}{soaked} would not fit"

    def kept_deadline(self, guard_s: float, spent: int) -> float | None:
        """The Unix time (s) work outside the budget (the screen's runs) must end by: the deadline
        less the reserved checks' time, each at ``guard_s`` (s); None without a deadline."""
        if self.deadline is None:
            return None
        return self.deadline - guard_s * len(self.checks_left(spent))

    def clock(self, per: RelaunchTime, now: float, spent: int, *, stage2: bool = False, made: int = 0,
              first_free: bool = False) -> NightClock:
        """The rest of the night from ``now`` (Unix s) at ``per`` a relaunch: the first stage's
        share left (none in ``stage2``), then the checks left; ``first_free``: the next relaunch is
        the night's first baseline."""
        stage1 = 0 if stage2 else max(0, self.budget.screening - spent)
        return NightClock(per, now, stage1, self.checks_left(spent, made), done=spent, deadline=self.deadline,
                          first_free=first_free)

    def next_run(self, spent: int, *, confirm_owed: bool, each_s: float | None) -> str:
        """What the next run of the same command makes first when a reserved check owed was not
        made: the confirmation and the final baseline (``confirm_owed``), else the final baseline;
        the first stage's relaunches left before them, or the checks first with their time
        (``each_s``: one relaunch, s), or, the budget spent, the ``--trials`` it needs."""
        owed = "the confirmation and the final baseline after it" if confirm_owed else "the final baseline re-measure"
        n = 2 if confirm_owed and self.budget.final_baseline else 1
        trials = self.budget.trials
        if spent + n > trials:
            return (f"the budget of {trials} relaunches is spent: run the same command with --trials "
                    f"{spent + n} to make {owed}")
        left = self.budget.screening - spent
        if left > 0:
            return (f"the next run of the same command first relaunches up to {left} more set{'s' if left != 1 else ''} "
                    f"(the first stage's slots left), then makes {owed}")
        about = f", about {span(n * each_s)}" if each_s else ""
        return f"the next run of the same command makes {owed} first ({n} relaunch{'es' if n != 1 else ''}{about})"
