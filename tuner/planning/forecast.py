"""The night's plan before the night: the same planner, run against an imagined study.

:func:`forecast` drives :class:`tuner.planning.order.Planner` the way the sweep's loop does,
with every launch imagined to succeed: the baseline, re-measures when due, the screen's best
(unknown sets, ``up to k``), the presets with the skips the rules decide (invalid, unsafe,
infeasible, the same set as an earlier one by canonical form or at the decode size), then the
sampler's share of the budget (``up to k proposals``) and the reserved checks. What only the
night can decide is bounded, not guessed: the screen's ranking, the sampler's proposals, a
doubt the baseline's NCCL version and topology settle (a second run with every such set
skipped and no screened set gives the bounds). The triage's fix sets
(:meth:`tuner.planning.order.Planner.fixes_first`) are decided by the baseline's log, so the
plan says only that they may come first (:func:`tuner.sweep.dryrun.plan_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tuner.inputs.config import ExperimentConfig
from tuner.inputs.space import UNSET, SearchSpace
from tuner.planning.entry import PlanEntry, ScreenedSet, Step, earlier_label
from tuner.planning.identity import Facts, load_decode_context
from tuner.planning.order import Planner
from tuner.planning.rules import Rules
from tuner.planning.sets import COUNT_LIMIT, point_count, point_sets
from tuner.record import Kind, Status, TrialRecord

__all__ = ["Plan", "SamplerView", "forecast", "rules_before_the_night"]

#: The variable that stands for an unknown screened set in the imagined study (no NCCL name has a space).
_SLOT = "screened set"


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
    """The forecast: ``entries`` in the night's order (the fixed part; a SCREENED and a
    PROPOSAL entry carry their bound in ``up_to``; the reserved checks last), the ``budget``
    (relaunches, baseline included), ``rules`` it was judged with (``rules.decode`` names the
    diagnose.json that gave the NCCL version and topology, if one did), ``sampler`` (search mode)."""

    entries: list[PlanEntry]
    budget: int
    rules: Rules
    sampler: SamplerView | None = None

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


def _imagine(space: SearchSpace, rules: Rules, mode: str, budget: int, baseline_every: int, *, screened: int,
             skip_doubtful: bool) -> _Run:
    """One imagined night: the planner's steps with every launch a success."""
    ledger: list[TrialRecord] = []

    def add(rec: TrialRecord) -> TrialRecord:
        rec.trial = len(ledger)
        ledger.append(rec)
        return rec

    def key_of(env: dict[str, str], flags: list[str]) -> str:
        return f"{_SLOT}:{env[_SLOT]}" if _SLOT in env else rules.key_of(env, flags)

    def problems(env: dict[str, str]) -> list[str]:
        if _SLOT in env:
            return []
        return [*rules.problems(env), *(rules.doubts(env) if skip_doubtful else [])]

    planner = Planner(space, mode, records=lambda: ledger, busy_keys=set, problems=problems, key_of=key_of,
                      decode_bytes=rules.decode.nbytes if rules.decode else None, baseline_every=baseline_every,
                      judged_at=rules.decode.sizes_text() if rules.decode else None)
    planner.screened_first([ScreenedSet(f"screen-{i + 1}", {_SLOT: str(i + 1)}) for i in range(screened)])
    baseline = add(TrialRecord(trial=-1, kind=Kind.BASELINE, status=Status.OK))
    entries = [PlanEntry(Step.BASELINE, kind=Kind.BASELINE)]
    spent, since, sampler = 1, 0, False
    while True:
        within = spent < budget
        if within and planner.remeasure_due(since):
            add(TrialRecord(trial=-1, kind=Kind.BASELINE, status=Status.OK, recheck=True))
            entries.append(PlanEntry(Step.REMEASURE, kind=Kind.BASELINE))
            since = 0
            continue
        step = planner.next_launch()
        if step.step is Step.PROPOSAL:
            sampler = within
            break
        if step.step is Step.DONE:
            break
        decision = planner.judge(step.env, step.flags, baseline=baseline)
        rec = TrialRecord(trial=-1, kind=step.kind, preset=step.name, env=dict(step.env), flags=list(step.flags))
        if decision.launch:
            rec.status = Status.OK
            doubts = rules.doubts(step.env) if _SLOT not in step.env else []
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
    return _Run(entries, spent, sampler)


def forecast(space: SearchSpace, rules: Rules, *, mode: str, budget: int, baseline_every: int = 0,
             screen_top_k: int | None = None, confirm: bool = True, final_baseline: bool = True) -> Plan:
    """The plan of a night of ``budget`` relaunches (baseline included) over ``space`` in
    ``mode`` (``search`` or ``presets``), judged by ``rules``; ``screen_top_k``: the screen's
    ``top_k`` with a ``[screen]`` (None without); the other options are the sweep's."""
    k = screen_top_k or 0
    main = _imagine(space, rules, mode, budget, baseline_every, screened=k, skip_doubtful=False)
    most = _imagine(space, rules, mode, budget, baseline_every, screened=0, skip_doubtful=True)
    # what the most favourable night reaches (a set skipped there for its doubt is reached, and may run)
    reached_at_most = {e.name for e in most.entries if e.step in (Step.SET, Step.SKIP) and not e.reach}
    doubtful = any(e.doubt for e in main.entries)
    entries: list[PlanEntry] = []
    last_slot = max((i for i, e in enumerate(main.entries) if _SLOT in e.env and not e.reach), default=-1)
    for i, e in enumerate(main.entries):
        if _SLOT in e.env:
            if e.reach:
                continue
            if entries and entries[-1].step is Step.SCREENED:
                entries[-1] = replace(entries[-1], up_to=(entries[-1].up_to or 0) + 1)
            else:
                entries.append(PlanEntry(Step.SCREENED, up_to=1))
            continue
        if e.step is Step.REMEASURE and i < last_slot:
            # a re-measure among the screened sets: where it falls depends on how many the screen hands
            entries[-1] = replace(entries[-1], reason=f"a baseline re-measure every {baseline_every} relaunches")
            continue
        if e.step in (Step.SET, Step.SKIP) and e.reach:  # the night judges nothing once its budget is spent
            if e.name in reached_at_most:
                why = [w for w, on in ((f"the screen hands fewer than {k} sets", bool(k)),
                                       ("a set marked 'may not be launched' is not launched", doubtful)) if on]
                e = replace(e, reach="reached only if " + " or ".join(why))
            else:
                e = replace(e, reach=f"not reached: the budget of {budget} relaunches is spent before it")
        entries.append(e)
    if mode != "presets":
        entries.append(PlanEntry(Step.PROPOSAL, kind=Kind.SEARCH, up_to=max(0, budget - most.spent) if most.sampler_reached else 0))
    tuned = any(e.step is Step.SCREENED or (e.step is Step.SET and not e.reach.startswith("not reached"))
                or (e.step is Step.PROPOSAL and (e.up_to or 0) > 0) for e in entries)
    if confirm and tuned:
        entries.append(PlanEntry(Step.CONFIRM, "confirm", kind=Kind.CONFIRM))
    if final_baseline and tuned:
        entries.append(PlanEntry(Step.FINAL_BASELINE, kind=Kind.BASELINE))
    planned = {rules.key_of(e.env, e.flags) for e in entries if e.step in (Step.BASELINE, Step.SET)}
    sampler = _sampler_view(space, rules, planned) if mode != "presets" else None
    return Plan(entries, budget, rules, sampler)


def _sampler_view(space: SearchSpace, rules: Rules, planned: set[str]) -> SamplerView:
    choices = space.choices()
    points = point_count(choices)
    values = {n: len(v) - (UNSET in v) for n, v in choices.items()}
    widened = [n for n, v in choices.items() if set(v) - {UNSET} - set(space.variables.get(n, ()))]
    if points > COUNT_LIMIT:
        return SamplerView(points, values, None, None, widened)
    keys = {rules.key_of(env, flags) for env, flags in point_sets(choices)}
    return SamplerView(points, values, len(keys), len(keys - planned), widened)
