"""What to relaunch next: a re-measure, a retry, a named set, the sampler's proposal, never a set twice.

Order of the night, in two stages inside one budget (:class:`tuner.planning.budget.Budget`:
``--trials`` counts every relaunch). Stage 1: the untuned baseline (first), then, between any
two steps below, a baseline re-measure once ``--baseline-every`` relaunches have passed since the
last one (and a set can still follow it in stage 1); the retry of a trial whose runner died
(once: a retry interrupted again is given up); the triage's fix sets
(:meth:`Planner.fixes_first`: where NCCL's model of the machine looks wrong, after the
baseline); the screen's best sets (:meth:`Planner.screened_first`, with a ``[screen]``); the
space's presets in order; then (search mode) the sampler's proposals, until
:attr:`Budget.screening` relaunches are spent. Stage 2, in the slots the budget reserved
(:attr:`Planner.reserved`): the finalists' confirmations (:meth:`Planner.confirmation`), then the
final baseline re-measure right after them (their fresh baseline, and the drift check).

A named set already handled (measured, or decided not to launch, under its name), in flight on
any worker, or given up is passed over. Every other set about to run is judged
(:meth:`Planner.judge`): one NCCL would reject, that cannot run or is unsafe on this topology,
or that the screen saw give wrong values is recorded invalid; one that is to NCCL the same as a
measured set (the untuned one included) is told the known result. Neither spends a relaunch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tuner.inputs import Preset, SearchSpace
from tuner.judging import Judgement, stats
from tuner.planning.budget import Budget, counts_in_budget
from tuner.planning.entry import Decision, PlanEntry, ScreenedSet, Step
from tuner.planning.params import split_params
from tuner.planning.rules import Rules
from tuner.planning.sets import open_keys
from tuner.record import Kind, Status, TrialRecord, set_key
from tuner.triage import FixSet

__all__ = ["EXHAUSTED", "MAX_SKIPPED_PROPOSALS", "RESERVED", "Planner", "counts_in_budget", "final_baseline_owed",
           "outlier_baseline", "target_met"]

#: The kinds of check the night reserves slots for inside its budget, in their order.
RESERVED = (Step.CONFIRM, Step.FINAL_BASELINE)
#: Proposals of measured or invalid sets in a row after which the space counts as exhausted.
MAX_SKIPPED_PROPOSALS = 50
#: Why a search ends when no set of the space is left.
EXHAUSTED = "search space exhausted (only measured or invalid sets proposed)"
#: Statuses of a trial whose set is not settled by it (still running, or not the set's doing).
_UNSETTLED = (Status.RUNNING, Status.INTERRUPTED, Status.MACHINE_FAULT)


def final_baseline_owed(baselines: Sequence[TrialRecord], finished: Sequence[TrialRecord], host_type: str) -> bool:
    """True when a tuned relaunch of ``host_type`` finished after the last ok baseline
    (``baselines``, oldest first): the drift check is owed (also on a resume whose budget was
    already spent: a killed runner still gets it)."""
    if not baselines:
        return False
    last = baselines[-1].started_at or 0.0
    return any(r.kind is not Kind.BASELINE and r.host_type in ("", host_type) and (r.started_at or 0.0) > last
               for r in finished)


def target_met(rec: TrialRecord, target: float | None) -> bool:
    """True when ``rec``'s lower bound of output tok/s (its median less the median's CI
    half-width over its runs, :func:`tuner.judging.stats.median_ci_halfwidth`) meets ``target``
    (tok/s, ``--target``; None: never)."""
    if target is None or not rec.ok or rec.output_tok_s is None:
        return False
    runs = rec.output_tok_s_runs
    low = rec.output_tok_s * (1 - stats.median_ci_halfwidth(runs)) if len(runs) > 1 else rec.output_tok_s
    return low >= target


def outlier_baseline(judgement: Judgement) -> int | None:
    """The baseline launch (its trial number) that ``judgement.noise_warning`` names as an
    outlier, as ``trial N``; None when the warning is silent (None or absent: a judgement
    without the attribute) or names no baseline launch."""
    warning = getattr(judgement, "noise_warning", None)
    if not warning:
        return None
    named = {int(n) for n in re.findall(r"\btrial (\d+)", str(warning))}
    return next((t for t in judgement.baseline_trials if t in named), None)


class Planner:
    """Plans relaunches for one sweep (and for its forecast, :func:`tuner.planning.forecast.forecast`).

    ``records`` (every trial with a record, invalid-set bookkeeping included) and ``busy_keys``
    (sets queued or running anywhere) are read fresh by the caller's callables, so several
    workers on one study see each other's work. ``problems(env)`` says why a set must not be
    launched, empty when it may; ``key_of(env, flags)`` is a set's identity (both usually from
    :class:`tuner.planning.rules.Rules`). ``decode_bytes``: the decode size identity is judged at
    (None without a diagnosis), for the words of a skip; ``judged_at``: those words when identity
    is judged at several sizes (:meth:`tuner.planning.identity.DecodeContext.sizes_text`). ``baseline_every`` (0: never),
    ``confirm`` and ``final_baseline`` are the sweep's options; ``trials`` its budget, which
    sets the reserved checks (:class:`tuner.planning.budget.Budget`; 0: one confirmation).
    """

    def __init__(self, space: SearchSpace, mode: str, *,
                 records: Callable[[], list[TrialRecord]],
                 busy_keys: Callable[[], set[str]],
                 problems: Callable[[dict[str, str]], list[str]],
                 key_of: Callable[[dict[str, str], list[str]], str] = set_key,
                 decode_bytes: int | None = None, judged_at: str | None = None, baseline_every: int = 0,
                 confirm: bool = True, final_baseline: bool = True, trials: int = 0, reference: bool = False,
                 refusal: Callable[[dict[str, str], list[str]], str | None] | None = None) -> None:
        self.space = space
        self.mode = mode
        self._records = records
        self._busy = busy_keys
        self._problems = problems
        self.key_of = key_of
        self.decode_bytes = decode_bytes
        self.judged_at = judged_at or (f"{decode_bytes} B" if decode_bytes is not None else None)
        self.baseline_every = baseline_every
        self.budget = Budget(trials, confirm, final_baseline, reference)
        #: the reserved checks in the night's order: each confirmation slot, then the final baseline
        self.reserved = self.budget.steps
        self.screened: list[ScreenedSet] = []
        self.fixes: list[ScreenedSet] = []
        self.screen_check: Callable[[dict[str, str]], str | None] | None = None
        self._refusal = refusal
        self.backends: list[Preset] = []
        self.backend_space: SearchSpace | None = None

    @classmethod
    def judging_by(cls, rules: Rules, space: SearchSpace, mode: str, *, records: Callable[[], list[TrialRecord]],
                   busy_keys: Callable[[], set[str]], baseline_every: int = 0, confirm: bool = True,
                   final_baseline: bool = True, trials: int = 0, reference: bool = False) -> Planner:
        """A night's planner judging by ``rules``: its problems, set identity, backend refusal and
        the decode sizes identity is judged at; the other arguments as for the constructor."""
        decode = rules.decode
        return cls(space, mode, records=records, busy_keys=busy_keys, problems=rules.problems, key_of=rules.key_of,
                   decode_bytes=decode.nbytes if decode is not None else None,
                   judged_at=decode.sizes_text() if decode is not None else None, baseline_every=baseline_every,
                   confirm=confirm, final_baseline=final_baseline, trials=trials, reference=reference,
                   refusal=rules.backend_problem)

    def screened_first(self, sets: Sequence[ScreenedSet],
                       check: Callable[[dict[str, str]], str | None] | None = None) -> None:
        """Plan the screen's best ``sets`` before the presets, and let ``check(env)`` forbid a
        set (why, else None; asked only for sets NCCL would accept)."""
        self.screened, self.screen_check = list(sets), check

    def fixes_first(self, sets: Sequence[FixSet]) -> list[str]:
        """Plan the triage's fix ``sets`` before the screen's best and the presets, each cut to
        the variables and values the space searches (a study's Optuna space cannot hold
        others); returns one line per fix cut or dropped, for the log. Sets equal after the cut
        are planned once."""
        choices = self.space.choices()
        kept: list[ScreenedSet] = []
        seen: set[tuple[tuple[str, str], ...]] = set()
        said: list[str] = []
        for fix in sets:
            env = {k: v for k, v in fix.env.items() if v in choices.get(k, ())}
            left = {k: v for k, v in fix.env.items() if k not in env}
            key = tuple(sorted(env.items()))
            if left:
                outside = ", ".join(f"{k}={v}" for k, v in left.items())
                said.append(f"{fix.name}: {outside} is not in the search space, so it is not relaunched "
                            f"(add it to the space to measure it)" + ("" if env else "; nothing of the fix is left"))
            if env and key not in seen:
                seen.add(key)
                kept.append(ScreenedSet(fix.name, env))
        self.fixes = kept
        return said

    def backends_first(self, space: SearchSpace) -> list[str]:
        """Plan the presets of the backend ``space`` (``search_spaces/<server>-backends.toml``)
        first, before the triage's fixes, the screen's best and the space's presets: the night
        measures who carries the decode allreduce where NCCL does not. A preset of the night's
        space that holds one of these sets under another name is then that set's duplicate, judged
        and recorded as any other (a skipped row of trials.csv); under the same name it is the same
        preset, measured once. Returns their names, in order."""
        self.backend_space = space
        self.backends = list(space.presets)
        return [p.name for p in self.backends]

    def named(self) -> list[PlanEntry]:
        """The named sets in plan order: the backend space's presets (:meth:`backends_first`),
        the triage's fixes, the screen's best, then the space's presets."""
        return [*(PlanEntry(Step.SET, p.name, *split_params(p.env)) for p in self.backends),
                *(PlanEntry(Step.SET, s.name, dict(s.env)) for s in self.fixes),
                *(PlanEntry(Step.SET, s.name, dict(s.env)) for s in self.screened),
                *(PlanEntry(Step.SET, p.name, *split_params(p.env)) for p in self.space.presets)]

    def _keyed(self, records: list[TrialRecord]) -> list[tuple[TrialRecord, str]]:
        """Each record with its set's key (computed once: with a diagnosis a key is not cheap)."""
        return [(r, self.key_of(r.env, r.flags)) for r in records]

    @staticmethod
    def _measured(keyed: list[tuple[TrialRecord, str]]) -> dict[str, TrialRecord]:
        """First settled record of each set, by key (sets NCCL treats as equal share one)."""
        out: dict[str, TrialRecord] = {}
        for r, key in keyed:
            if r.kind is not Kind.BASELINE and r.status not in _UNSETTLED:
                out.setdefault(key, r)
        return out

    def remeasure_due(self, since_baseline: int, left: int | None = None) -> bool:
        """True when ``since_baseline`` relaunches since the last baseline call for a re-measure
        and, with ``left`` (stage-1 relaunches left), a set can still follow it in stage 1 (the
        final baseline measures the last sets' time; a re-measure with no set after it would
        take a set's slot for nothing)."""
        due = bool(self.baseline_every) and since_baseline >= self.baseline_every
        return due and (left is None or left > 1)

    def next_planned(self) -> PlanEntry | None:
        """The next retry or named set that must run before the sampler proposes, or None."""
        keyed = self._keyed(self._records())
        busy = self._busy()
        owed, gave_up = self._owed_retries(keyed, busy)
        if owed:
            r = owed[0][0]
            return PlanEntry(Step.RETRY, r.preset, dict(r.env), list(r.flags), r.kind, retry_of=r.trial)
        handled = {(r.preset, key) for r, key in keyed if r.kind is not Kind.BASELINE and r.status not in _UNSETTLED}
        for entry in self.named():
            key = self.key_of(entry.env, entry.flags)
            if (entry.name, key) not in handled and key not in busy | gave_up:
                return entry
        return None

    def _owed_retries(self, keyed: list[tuple[TrialRecord, str]], busy: set[str],
                      ) -> tuple[list[tuple[TrialRecord, str]], set[str]]:
        """The interrupted tuned trials owed their one retry (oldest first, with their keys) and
        the keys whose retry was itself interrupted (given up). A set measured since, or in flight,
        owes nothing; baselines are re-measured by the loop itself when owed."""
        measured = set(self._measured(keyed))
        retried = {r.retry_of_trial for r, _ in keyed if r.retry_of_trial is not None}
        owed: list[tuple[TrialRecord, str]] = []
        gave_up: set[str] = set()
        for r, key in keyed:
            if r.status is not Status.INTERRUPTED or r.kind is Kind.BASELINE:
                continue
            if r.retry_of_trial is not None:
                gave_up.add(key)
            elif r.trial not in retried and key not in measured | busy:
                owed.append((r, key))
        return owed, gave_up

    def retry_owed_by(self, key: str) -> int | None:
        """The interrupted trial whose retry the set of ``key`` (:attr:`key_of`) is, when it is owed one
        (a sampler may propose the set a dead runner left before a runner plans its retry: that
        relaunch is the retry, so the set is measured once and the lost trial names it); else None."""
        owed, _ = self._owed_retries(self._keyed(self._records()), set())
        return next((r.trial for r, k in owed if k == key), None)

    def exhausted(self) -> bool:
        """True when the space (enumerable only) holds no set that is neither measured, in
        flight, nor unlaunchable here."""
        done = {self.key_of(r.env, r.flags) for r in self._records() if r.status not in _UNSETTLED} | self._busy()
        left = open_keys(self.space.choices(), self.key_of, self._problems, done)
        return left is not None and not left

    def next_launch(self) -> PlanEntry:
        """What the next tuned relaunch is: a RETRY or SET entry, a PROPOSAL (ask the sampler),
        or DONE with the reason nothing is left."""
        planned = self.next_planned()
        if planned is not None:
            return planned
        if self.mode == "presets":
            return PlanEntry(Step.DONE, reason=self.presets_done())
        if self.exhausted():
            return PlanEntry(Step.DONE, reason=EXHAUSTED)
        return PlanEntry(Step.PROPOSAL, kind=Kind.SEARCH)

    def presets_done(self) -> str:
        """Why a presets night ends, counting the space's presets by what became of each:
        ``all presets measured`` when every one was relaunched and measured, else e.g. ``8 presets:
        4 measured, 4 skipped (see report.md, Sets not measured)`` (``failed``: relaunched, no
        measurement; ``skipped``: recorded without a launch, as a duplicate or invalid set)."""
        fate: dict[str, str] = {}
        for r in self._records():
            if not r.preset or r.kind is Kind.BASELINE or r.status in _UNSETTLED:
                continue
            now = "skipped" if not r.kind.relaunched else "measured" if r.ok else "failed"
            if fate.get(r.preset) != "measured":  # a measurement of the set wins over anything else
                fate[r.preset] = now
        names = [p.name for p in [*self.backends, *self.space.presets]]
        counts = {word: sum(1 for n in names if fate.get(n) == word) for word in ("measured", "failed", "skipped")}
        if counts["measured"] == len(names):
            return "all presets measured"
        said = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
        return f"{len(names)} presets: {said}" + (" (see report.md, Sets not measured)" if counts["skipped"] else "")

    def judge(self, env: dict[str, str], flags: list[str], *, baseline: TrialRecord | None) -> Decision:
        """Whether a set about to run must be relaunched: not when NCCL would reject it, it
        cannot run or is unsafe here, or the screen forbids it (invalid), nor when it was
        measured before (the untuned set: the ``baseline``). The decision's ``cause`` is what
        the record of a set not launched stores (report.md's "Sets not measured")."""
        problems = self._problems(env)
        refused = self._refusal(env, flags) if self._refusal is not None else None
        problems = [*problems, refused] if refused else problems
        bad = self.screen_check(env) if self.screen_check is not None and not problems else None
        if problems or bad:
            why = problems[0] if problems else str(bad)
            return Decision(False, invalid_reason=why, reason=why, cause=why)
        key = self.key_of(env, flags)
        records = self._records()
        untuned = key == self.key_of({}, []) and baseline is not None  # the untuned set, or one NCCL treats as equal
        earlier = baseline if untuned else self._measured(self._keyed(records)).get(key)
        if earlier is not None and earlier.kind is Kind.DUPLICATE and earlier.duplicate_of is not None:
            earlier = next((r for r in records if r.trial == earlier.duplicate_of), earlier)  # the set measured
        if earlier is not None:
            at = f" at {self.judged_at}" if self.judged_at is not None else ""
            return Decision(False, duplicate_of=earlier,
                            reason=f"to NCCL{at} the same set as trial {earlier.trial} ({earlier.preset or earlier.kind})",
                            cause=f"the same set to NCCL{at}")
        return Decision(True)

    def finalists(self, judgement: Judgement) -> list[str]:
        """The set key of each reserved confirmation slot the budget holds, in order:
        ``judgement.confirm_slots`` (chosen from stage-1 launches: the finalists, the best set
        again in a slot no runner-up takes), or the winner where the judgement has no slots."""
        chosen = getattr(judgement, "confirm_slots", None)
        if chosen is None:
            chosen = [judgement.winner] if judgement.winner is not None else []
        return [k for k in chosen if k in judgement.sets][:self.budget.confirmations]

    def confirmation(self, judgement: Judgement) -> PlanEntry | None:
        """The next reserved confirmation: the set of the first slot (:meth:`finalists`) whose
        set has fewer ok confirm launches than the slots so far give it (a resumed night does not
        confirm twice; an interrupted one is retried) and is not in flight on any runner,
        relaunched once more (kind confirm); None when every slot is done or there is none. A
        set's second slot passes to the best stage-1 set that holds none, when the set failed its
        soak in its first (it can no longer be recommended: the slot would measure it for nothing)."""
        busy = self._busy()
        owed: dict[str, int] = {}
        slots = self.finalists(judgement)
        for index, key in enumerate(slots):
            if judgement.sets[key].soak_failed and key in slots[:index]:  # it hangs: its second slot to the next
                key = next((k for k in getattr(judgement, "ranked", []) if k in judgement.sets
                            and not judgement.sets[k].soak_failed and k not in slots), key)
            owed[key] = owed.get(key, 0) + 1
            s = judgement.sets[key]
            if len(s.confirm_trials) >= owed[key] or self.key_of(s.env, s.flags) in busy:
                continue
            return PlanEntry(Step.CONFIRM, "confirm", dict(s.env), list(s.flags), Kind.CONFIRM,
                             equals_trial=s.first_trial)
        return None
