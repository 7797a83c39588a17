"""What a budget leaves out and what it leaves unused: the presets not reached, the time not used.

A night's budget (``--trials``, ``sweep.trials``) and its deadline (``--until``/``--timeout``) are
two limits; whichever binds first leaves part of the other unused. :func:`reach` says which
presets the budget does not reach (the forecast's own "not reached" marks,
:func:`tuner.planning.forecast.forecast`) and the smallest ``--trials`` that reaches every preset
however many sets the triage and the screen hand (every slot full); :func:`budget_that_fits`
is the largest budget whose whole night fits before the deadline by the clock's one rule
(:meth:`tuner.planning.limits.NightLimits.clock`), the budget of a night given a deadline and no
trials. :func:`reach_lines` and :func:`unused_line` word both for the dry run and the night's start.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.inputs import SearchSpace
from tuner.planning.budget import Budget
from tuner.planning.clock import NightClock, RelaunchTime, clock_time, span
from tuner.planning.entry import Step
from tuner.planning.forecast import Plan, forecast
from tuner.planning.limits import NightLimits
from tuner.planning.rules import Rules

__all__ = ["MOST_TRIALS", "Reach", "budget_that_fits", "clock_budget", "reach", "reach_lines", "unused_line"]

#: The largest budget looked at (``sweep.trials``' own bound).
MOST_TRIALS = 10_000


@dataclass(frozen=True)
class Reach:
    """The presets a budget of ``budget`` relaunches does not reach (``missed``, in plan order),
    the smallest budget that reaches every preset with every slot full (``trials``, at most
    ``budget`` when ``missed`` is empty; None: none up to :data:`MOST_TRIALS`) and that budget's
    plan (``plan``)."""

    budget: int
    missed: tuple[str, ...]
    trials: int | None
    plan: Plan | None


def _missed(plan: Plan, certain: bool) -> list[str]:
    """The presets ``plan`` marks not reached (``certain``), or not surely reached (any mark)."""
    return [e.name for e in plan.entries if e.step in (Step.SET, Step.SKIP) and e.reach
            and (not certain or e.reach.startswith("not reached"))]


def reach(space: SearchSpace, rules: Rules, *, budget: int, baseline_every: int, screen_top_k: int | None,
          confirm: bool = True, final_baseline: bool = True) -> Reach:
    """What ``budget`` relaunches reach of ``space``'s presets, and the smallest ``--trials`` that
    reaches them all (at most ``budget`` when it does; found by bisection: more relaunches never
    reach fewer presets). Planned in presets
    mode: the sampler comes after every preset, so it moves none of them, and its share is not
    counted here."""
    def plan(n: int) -> Plan:
        return forecast(space, rules, mode="presets", budget=n, baseline_every=baseline_every,
                        screen_top_k=screen_top_k, confirm=confirm, final_baseline=final_baseline)

    here = plan(budget)
    missed = tuple(_missed(here, certain=True))
    minimum = Budget(1, confirm, final_baseline).minimum
    low, high = minimum - 1, budget  # low: taken to miss a preset (never planned), high: reaches every one
    if _missed(here, certain=False):
        low, high = budget, budget * 2
        while _missed(plan(high), certain=False):
            low, high = high, high * 2
            if high > MOST_TRIALS:
                return Reach(budget, missed, None, None)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if not _missed(plan(mid), certain=False) else (mid, high)
    return Reach(budget, missed, high, plan(high))


def budget_that_fits(per: RelaunchTime, now: float, deadline: float, *, confirm: bool = True,
                     final_baseline: bool = True, spent: int = 0, first_free: bool = True) -> int | None:
    """The largest budget (relaunches, the ``spent`` ones included) whose rest of the night, the
    first stage's share and every reserved check, fits before ``deadline`` (Unix s) from ``now``
    at ``per`` a relaunch; None while a relaunch's load or probe time is not known (nothing to
    count with).
    At least the smallest budget the checks allow (:attr:`Budget.minimum`; the deadline then
    stops the night itself)."""
    if not per.known or not per.guard_s:  # a lower bound of the time would overcount the budget
        return None
    minimum = Budget(1, confirm, final_baseline).minimum

    def whole(n: int) -> bool:
        clock = NightLimits(Budget(n, confirm, final_baseline), deadline).clock(per, now, spent, first_free=first_free)
        f = clock.fit()
        return f.stage1 == clock.stage1 and not f.dropped

    low = max(minimum, spent + 1)
    if not whole(low):
        return low
    high = low + 1
    while whole(high) and high < MOST_TRIALS:
        low, high = high, min(high * 2, MOST_TRIALS)
    if whole(high):
        return high
    while high - low > 1:  # low fits whole, high does not
        mid = (low + high) // 2
        low, high = (mid, high) if whole(mid) else (low, mid)
    return low


def clock_budget(space: SearchSpace, rules: Rules, per: RelaunchTime, now: float, deadline: float, *, mode: str,
                 baseline_every: int, screen_top_k: int | None, confirm: bool = True, final_baseline: bool = True,
                 spent: int = 0, first_free: bool = True) -> tuple[int | None, int | None]:
    """The budget of a night given a deadline and no trials: ``(budget, fits)``, ``fits`` what fits
    (:func:`budget_that_fits`; both None while a relaunch's time is not known) and ``budget`` that,
    or in presets mode the smaller budget that reaches every preset (the space ends first)."""
    fits = budget_that_fits(per, now, deadline, confirm=confirm, final_baseline=final_baseline, spent=spent,
                            first_free=first_free)
    if fits is None or mode != "presets":
        return fits, fits
    every = reach(space, rules, budget=fits, baseline_every=baseline_every, screen_top_k=screen_top_k,
                  confirm=confirm, final_baseline=final_baseline).trials
    return (min(fits, max(every, spent + 1)) if every is not None else fits), fits


def _end(plan: Plan, per: RelaunchTime, now: float, limits: NightLimits) -> str:
    """``about 25 min, expected end 13:50`` for ``plan``'s night from ``now``, with whether it
    passes ``limits``' deadline; what is not known when the relaunch time is not."""
    clock = NightClock(per, now, plan.stage1(), plan.checks, first_free=True)
    d, end = clock.duration_s, clock.end_at
    if d is None or end is None:
        return "its duration is not known before a launch is measured"
    about = "about" if per.known else "at least"
    past = (f": past {limits.deadline_words or 'the deadline'}, which would stop it first"
            if limits.deadline is not None and end > limits.deadline else "")
    return f"{about} {span(d)}, expected end {clock_time(end, now)}{past}"


def reach_lines(found: Reach, per: RelaunchTime, now: float, limits: NightLimits) -> list[str]:
    """``Not reached: ...`` with the ``--trials`` that reaches them and when that night would end;
    empty when every preset is reached."""
    if not found.missed:
        return []
    n = len(found.missed)
    head = (f"NOT REACHED: {n} preset{'s' if n != 1 else ''} of the space ({', '.join(found.missed)}): the budget of "
            f"{found.budget} relaunches is spent before {'them' if n != 1 else 'it'}")
    if found.trials is None or found.plan is None:
        return [head + "; no budget up to 10000 relaunches reaches them."]
    return [head + f"; --trials {found.trials} reaches every preset however many sets the triage and the screen "
            f"hand ({_end(found.plan, per, now, limits)})."]


def unused_line(clock: NightClock, limits: NightLimits, *, confirm: bool = True, final_baseline: bool = True) -> str:
    """``6 h 54 min of the time before --until 07:00 left unused: --trials 180 fills it ...``
    when the whole night fits before the deadline with at least one more relaunch's time left;
    ``""`` otherwise (no deadline, the time not known, or the time used)."""
    end, deadline = clock.end_at, limits.deadline
    f = clock.fit()
    if end is None or deadline is None or f.dropped or f.stage1 < clock.stage1:
        return ""
    unused = deadline - end
    if unused < clock.per.guard_s:
        return ""
    fills = budget_that_fits(clock.per, clock.now, deadline, confirm=confirm, final_baseline=final_baseline,
                             spent=clock.done, first_free=clock.first_free)
    more = (f": --trials {fills} fills it (leave --trials out and sweep.trials unset, and the budget is what "
            "fits)" if fills is not None and fills > limits.budget.trials else "")
    return f"{span(unused)} of the time before {limits.deadline_words or 'the deadline'} left unused{more}."
