"""The night's plan before the night: the same planner, run against an imagined study.

:func:`forecast` drives :class:`tuner.planning.order.Planner` the way the sweep's loop does,
with every launch imagined to succeed: the baseline, the triage's fix sets (unknown sets,
``up to F``: the baseline's NCCL log decides them, :func:`tuner.triage.fix_bound` bounds them by
the space), re-measures when due, the screen's best (unknown sets, ``up to k``), the presets
with the skips the rules decide (invalid, unsafe, infeasible, the same set as an earlier one by
canonical form or at the decode size), then the sampler's share of stage 1 (``up to k
proposals``, re-measures due among them counted) and the reserved checks, in the slots the budget
keeps for them (:class:`tuner.planning.budget.Budget`: every relaunch counts). What only the night
can decide is bounded, not guessed:
the triage's findings, the screen's ranking, the sampler's proposals, a doubt the baseline's
NCCL version and topology settle (the plan is numbered with every slot full; a second run with
no fix set, no screened set and every doubtful set skipped gives the bounds: a set reached only
there is marked so).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tuner.inputs import UNSET, ExperimentConfig, SearchSpace
from tuner.planning.budget import Budget
from tuner.planning.entry import PlanEntry, ScreenedSet, Step, earlier_label
from tuner.planning.identity import Facts, load_decode_context
from tuner.planning.order import Planner
from tuner.planning.rules import Rules
from tuner.planning.sets import COUNT_LIMIT, point_count, point_sets
from tuner.record import Kind, Status, TrialRecord
from tuner.triage import FixBound, fix_bound

__all__ = ["Plan", "SamplerView", "forecast", "rules_before_the_night"]

#: The variables that stand for an unknown screened set and an unknown fix set of the triage in the
#: imagined study (no NCCL name has a space), with the plan step their run of sets becomes.
_SLOT = "screened set"
_FIX = "triage fix set"
_SLOTS = {_FIX: Step.FIXES, _SLOT: Step.SCREENED}


def _slot(env: dict[str, str]) -> str | None:
    """The slot variable an imagined set stands for, None for a real set."""
    return next((v for v in _SLOTS if v in env), None)


@dataclass(frozen=True)
class SamplerView:
    """What the sampler draws from: ``points`` of the space, ``values`` per variable (unset
    not counted), ``distinct`` sets to NCCL and ``fresh`` ones not planned before it (None
    above :data:`tuner.planning.sets.COUNT_LIMIT` points), ``widened``: variables whose
    distribution also holds presets' values (one Optuna distribution per variable)."""

    points: int
    values: dict[str, int]
    distinct: int | None
    fresh: int | None
    widened: list[str]


@dataclass
class Plan:
    """The forecast: ``entries`` in the night's order (the fixed part; a FIXES, SCREENED and a
    PROPOSAL entry carry their bound in ``up_to``; the reserved checks last: a CONFIRM entry per
    confirmation slot, then FINAL_BASELINE), the ``budget`` (relaunches, every one counted),
    ``rules`` it was judged with (``rules.decode`` names the diagnose.json that gave the NCCL
    version and topology, if one did), ``sampler`` (search mode), ``fixes``: how many fix sets
    the triage can propose on this space and why (``most`` 0: no FIXES entry), ``slots``: the
    budget with its reserved checks, ``remeasures``: baseline re-measures stage 1 makes when every
    slot hands its most sets (those among the sampler's proposals included)."""

    entries: list[PlanEntry]
    budget: int
    rules: Rules
    sampler: SamplerView | None = None
    fixes: FixBound | None = None
    slots: Budget | None = None
    remeasures: int = 0

    def budget_words(self) -> str:
        """How the budget is spent (:meth:`tuner.planning.budget.Budget.words`), e.g. ``12
        relaunches: the baseline, up to 8 sets, 2 confirmations (...), the final baseline``."""
        return (self.slots or Budget(self.budget)).words(self.remeasures)

    def stage1(self) -> int:
        """First-stage relaunches with every slot full (the baseline, re-measures (:attr:`remeasures`),
        the sets and proposals within the budget; at most :attr:`tuner.planning.budget.Budget.screening`)."""
        n = sum(1 if e.step in (Step.BASELINE, Step.REFERENCE) else (e.up_to or 0)
                if e.step in (Step.FIXES, Step.SCREENED, Step.PROPOSAL) else 1 if e.step is Step.SET and not e.reach
                else 0 for e in self.entries)
        # every re-measure: those among the slots' sets and the proposals have no entry of their own
        return min(n + self.remeasures, (self.slots or Budget(self.budget)).screening)

    @property
    def checks(self) -> tuple[Step, ...]:
        """The reserved checks the plan makes, in order (none when no tuned set is planned)."""
        return tuple(e.step for e in self.entries if e.step in (Step.CONFIRM, Step.FINAL_BASELINE))

    @property
    def fixed(self) -> list[PlanEntry]:
        """The entries the night carries out as planned, in order: the baseline, re-measures,
        skips and the named sets reached within the budget with no doubt on them (no bounded or
        reserved entry)."""
        return [e for e in self.entries
                if e.step in (Step.BASELINE, Step.REMEASURE, Step.SET, Step.SKIP) and not e.reach and not e.doubt]


def rules_before_the_night(cfg: ExperimentConfig, study_dir: Path | None, *, allow_unsafe: bool = False) -> Rules:
    """The rules as known before the night: ``[nccl] version`` and ``cpu_vendor``, or with a
    ``diagnose.json`` in ``study_dir`` the NCCL version and topology it logged (the config's CPU
    where that log named none) and identity at the night's sizes."""
    decode = load_decode_context(study_dir, cfg) if study_dir is not None else None
    facts = Facts(cfg.nccl.nccl_version, None, cfg.nccl.cpu_vendor)
    if decode is not None:
        facts = Facts(decode.version or cfg.nccl.nccl_version, decode.topology, cfg.nccl.cpu_vendor)
    return Rules(cfg.server.env, lambda: facts, decode=decode, allow_unsafe=allow_unsafe)


@dataclass
class _Run:
    entries: list[PlanEntry]
    spent: int
    sampler_reached: bool
    proposals: int = 0
    remeasures: int = 0


def _imagine(space: SearchSpace, rules: Rules, mode: str, budget: int, baseline_every: int, *, fixes: int,
             screened: int, skip_doubtful: bool, reference: bool = False) -> _Run:
    """One imagined stage 1 of ``budget`` relaunches (the baseline, re-measures, sets): the
    planner's steps with every launch a success, then the sampler's proposals while it has room."""
    ledger: list[TrialRecord] = []

    def add(rec: TrialRecord) -> TrialRecord:
        rec.trial = len(ledger)
        ledger.append(rec)
        return rec

    def key_of(env: dict[str, str], flags: list[str]) -> str:
        slot = _slot(env)
        return f"{slot}:{env[slot]}" if slot is not None else rules.key_of(env, flags)

    def problems(env: dict[str, str]) -> list[str]:
        if _slot(env) is not None:
            return []
        return [*rules.problems(env), *(rules.doubts(env) if skip_doubtful else [])]

    planner = Planner(space, mode, records=lambda: ledger, busy_keys=set, problems=problems, key_of=key_of,
                      decode_bytes=rules.decode.nbytes if rules.decode else None, baseline_every=baseline_every,
                      judged_at=rules.decode.sizes_text() if rules.decode else None)
    planner.screened_first([ScreenedSet(f"screen-{i + 1}", {_SLOT: str(i + 1)}) for i in range(screened)])
    # set as the sweep's fixes_first leaves them: its cut to the space would drop an imagined set
    planner.fixes = [ScreenedSet(f"fix: {i + 1}", {_FIX: str(i + 1)}) for i in range(fixes)]
    baseline = add(TrialRecord(trial=-1, kind=Kind.BASELINE, status=Status.OK))
    entries = [PlanEntry(Step.BASELINE, kind=Kind.BASELINE)]
    if reference:  # the correctness gate's reference configuration, right after the baseline
        entries.append(PlanEntry(Step.REFERENCE, "answers reference"))
    spent, since, sampler, remeasures = 1 + int(reference), int(reference), False, 0
    while True:
        within = spent < budget
        if within and planner.remeasure_due(since, budget - spent):
            add(TrialRecord(trial=-1, kind=Kind.BASELINE, status=Status.OK, recheck=True))
            entries.append(PlanEntry(Step.REMEASURE, kind=Kind.BASELINE))
            spent, since, remeasures = spent + 1, 0, remeasures + 1
            continue
        step = planner.next_launch()
        if step.step is Step.PROPOSAL:
            sampler = within
            proposals = 0
            while spent < budget:  # the sampler's share, re-measures still due among its proposals
                if planner.remeasure_due(since, budget - spent):
                    since, remeasures = 0, remeasures + 1
                else:
                    proposals, since = proposals + 1, since + 1
                spent += 1
            return _Run(entries, spent, sampler, proposals, remeasures)
        if step.step is Step.DONE:
            break
        decision = planner.judge(step.env, step.flags, baseline=baseline)
        rec = TrialRecord(trial=-1, kind=step.kind, preset=step.name, env=dict(step.env), flags=list(step.flags))
        if decision.launch:
            rec.status = Status.OK
            doubts = rules.doubts(step.env) if _slot(step.env) is None else []
            entries.append(replace(step, doubt=doubts[0] if doubts else "", reach="" if within else "budget"))
            if within:
                spent, since = spent + 1, since + 1
        elif decision.duplicate_of is not None:
            rec.kind, rec.status, rec.duplicate_of = Kind.DUPLICATE, Status.SKIPPED, decision.duplicate_of.trial
            entries.append(replace(step, step=Step.SKIP, equals=earlier_label(decision.duplicate_of),
                                   reach="" if within else "budget"))
        else:
            rec.kind, rec.status, rec.cause = Kind.INVALID, Status.SKIPPED, decision.invalid_reason
            entries.append(replace(step, step=Step.SKIP, reason=decision.invalid_reason, reach="" if within else "budget"))
        add(rec)
    return _Run(entries, spent, sampler, 0, remeasures)


def forecast(space: SearchSpace, rules: Rules, *, mode: str, budget: int, baseline_every: int = 0,
             screen_top_k: int | None = None, confirm: bool = True, final_baseline: bool = True,
             reference: bool = False) -> Plan:
    """The plan of a night of ``budget`` relaunches (every one counted) over ``space`` in
    ``mode`` (``search`` or ``presets``), judged by ``rules``; ``screen_top_k``: the screen's
    ``top_k`` with a ``[screen]`` (None without); the other options are the sweep's. Stage 1
    spends what the reserved checks leave (:attr:`tuner.planning.budget.Budget.screening`). The
    triage's slot holds up to :func:`tuner.triage.fix_bound`'s ``most`` sets of this space."""
    k = screen_top_k or 0
    bound = fix_bound(space.choices())
    f = bound.most
    slots = Budget(budget, confirm, final_baseline, reference)
    stage1 = slots.screening
    main = _imagine(space, rules, mode, stage1, baseline_every, fixes=f, screened=k, skip_doubtful=False,
                    reference=reference)
    most = _imagine(space, rules, mode, stage1, baseline_every, fixes=0, screened=0, skip_doubtful=True,
                    reference=reference)
    # the screened sets reached when the triage proposes none (its slot comes first)
    screened_most = k if not f else sum(
        1 for e in _imagine(space, rules, mode, stage1, baseline_every, fixes=0, screened=k,
                            skip_doubtful=False, reference=reference).entries if _SLOT in e.env and not e.reach)
    # what the most favourable night reaches (a set skipped there for its doubt is reached, and may run)
    reached_at_most = {e.name for e in most.entries if e.step in (Step.SET, Step.SKIP) and not e.reach}
    doubtful = any(e.doubt for e in main.entries)
    entries: list[PlanEntry] = []
    last_slot = max((i for i, e in enumerate(main.entries) if _slot(e.env) is not None and not e.reach), default=-1)
    for i, e in enumerate(main.entries):
        slot = _slot(e.env)
        if slot is not None:
            if e.reach:
                continue
            if entries and entries[-1].step is _SLOTS[slot]:
                entries[-1] = replace(entries[-1], up_to=(entries[-1].up_to or 0) + 1)
            else:
                entries.append(PlanEntry(_SLOTS[slot], up_to=1))
            continue
        if e.step is Step.REMEASURE and i < last_slot:
            # a re-measure among the slots' sets: where it falls depends on how many they hand
            entries[-1] = replace(entries[-1], reason=f"a baseline re-measure every {baseline_every} relaunches")
            continue
        if e.step is Step.REMEASURE and last_slot >= 0:
            e = replace(e, reason="its place among the sets below moves with how many sets the slots above hand")
        if e.step in (Step.SET, Step.SKIP) and e.reach:  # the night judges nothing once its budget is spent
            if e.name in reached_at_most:
                why = [w for w, on in ((f"the triage relaunches fewer than {f} set{'s' if f != 1 else ''}", bool(f)),
                                       (f"the screen hands fewer than {k} sets", bool(k)),
                                       ("a set marked 'may not be launched' is not launched", doubtful)) if on]
                e = replace(e, reach="reached only if " + " or ".join(why))
            else:
                e = replace(e, reach=f"not reached: the budget of {budget} relaunches is spent before it"
                            + (f" ({slots.reserved} kept for the checks)" if slots.reserved else ""))
        entries.append(e)
    shown = next((j for j, e in enumerate(entries) if e.step is Step.SCREENED), None)
    if k and shown is None and screened_most:  # the triage's slot spends the budget the screen's would have
        at = next((j + 1 for j, e in enumerate(entries) if e.step is Step.FIXES), 1)
        entries.insert(at, PlanEntry(Step.SCREENED, up_to=0))
        shown = at
    if shown is not None and screened_most > (entries[shown].up_to or 0):
        extra = screened_most - (entries[shown].up_to or 0)
        e = entries[shown]
        entries[shown] = replace(e, up_to=screened_most, reason="; ".join(
            r for r in (e.reason, f"the last {'one' if extra == 1 else extra} only if the triage relaunches fewer than {f} set{'s' if f != 1 else ''}") if r))
    if mode != "presets":
        entries.append(PlanEntry(Step.PROPOSAL, kind=Kind.SEARCH, up_to=most.proposals if most.sampler_reached else 0))
    tuned = any(e.step in (Step.FIXES, Step.SCREENED) or (e.step is Step.SET and not e.reach.startswith("not reached"))
                or (e.step is Step.PROPOSAL and (e.up_to or 0) > 0) for e in entries)
    if tuned:  # a CONFIRM per slot (the best set, then the runner-up or it again), the final baseline right after
        entries += [PlanEntry(Step.CONFIRM, "confirm" if i == 0 else "confirm: runner-up or the best again",
                              kind=Kind.CONFIRM)
                    for i in range(slots.confirmations)]
        if final_baseline:
            entries.append(PlanEntry(Step.FINAL_BASELINE, kind=Kind.BASELINE))
    planned = {rules.key_of(e.env, e.flags) for e in entries if e.step in (Step.BASELINE, Step.SET)}
    sampler = _sampler_view(space, rules, planned) if mode != "presets" else None
    return Plan(entries, budget, rules, sampler, bound, slots, max(main.remeasures, most.remeasures))


def _sampler_view(space: SearchSpace, rules: Rules, planned: set[str]) -> SamplerView:
    choices = space.choices()
    points = point_count(choices)
    values = {n: len(v) - (UNSET in v) for n, v in choices.items()}
    widened = [n for n, v in choices.items() if set(v) - {UNSET} - set(space.variables.get(n, ()))]
    if points > COUNT_LIMIT:
        return SamplerView(points, values, None, None, widened)
    keys = {rules.key_of(env, flags) for env, flags in point_sets(choices)}
    return SamplerView(points, values, len(keys), len(keys - planned), widened)
