"""What to relaunch next: a retry, a preset, or the sampler's proposal, never a set twice.

Order: the retry of a trial whose runner died (once: a retry interrupted again is given up),
then the screen's best sets (``Planner.extra``, with a ``[screen]``), then the space's presets in
order, then (search mode) the sampler. A set already measured, in flight on any worker, or given
up is skipped; a proposal of a measured set is told the known
result, and a set NCCL would reject together with ``server.env`` is told infeasible, neither
spending a relaunch.

A set is its environment variables plus its server flags: a searched name that starts with
``-`` is a server flag (``on`` adds the flag alone, another value adds flag and value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tuner.inputs.space import UNSET, SearchSpace
from tuner.record import Kind, Status, TrialRecord, set_key

#: Value of a flag-type name that adds the flag alone (e.g. ``--disable-custom-all-reduce``).
FLAG_ON = "on"


@dataclass
class Planned:
    """A set to relaunch and why: ``kind``, ``preset`` name, ``retry_of`` (trial number)."""

    env: dict[str, str]
    flags: list[str] = field(default_factory=list)
    kind: Kind = Kind.SEARCH
    preset: str = ""
    retry_of: int | None = None

    @property
    def key(self) -> str:
        """The set's identity (:func:`tuner.record.trial.set_key`)."""
        return set_key(self.env, self.flags)


def split_params(params: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(env, flags)`` of a categorical point: unset names dropped, flag names to argv items."""
    env: dict[str, str] = {}
    flags: list[str] = []
    for name, value in params.items():
        if value == UNSET:
            continue
        if name.startswith("-"):
            flags += [name] if value == FLAG_ON else [name, value]
        else:
            env[name] = str(value)
    return env, flags


def flag_params(flags: list[str]) -> dict[str, str]:
    """Inverse of the flag part of :func:`split_params`: ``["--x", "--y", "3"]`` to params."""
    out: dict[str, str] = {}
    i = 0
    while i < len(flags):
        name = flags[i]
        if i + 1 < len(flags) and not flags[i + 1].startswith("-"):
            out[name] = flags[i + 1]
            i += 2
        else:
            out[name] = FLAG_ON
            i += 1
    return out


@dataclass
class Decision:
    """What to do with a proposed set: ``launch``, or not, with the earlier trial (duplicate)
    or the reason (invalid)."""

    launch: bool
    duplicate_of: TrialRecord | None = None
    invalid_reason: str = ""


class Planner:
    """Plans relaunches for one sweep.

    ``records`` (every trial with a record, invalid-set bookkeeping included) and ``busy_keys``
    (sets queued or running anywhere) are read fresh from the storage by the caller's
    callables, so several workers on one study see each other's work. ``problems(env)`` says
    why a set must not be launched (NCCL would reject it with ``server.env``, it cannot run or
    is unsafe on this topology), empty when it may. ``key_of(env, flags)``: a set's identity
    (:func:`tuner.record.trial.set_key` of its canonical form: sets NCCL treats as equal share one).
    ``extra``: sets planned before the presets (the screen's best).
    ``screen_check(env)``: why the screen forbids a set (wrong values; a set never screened is
    screened first, seconds), else None; asked only for sets NCCL would accept.
    """

    def __init__(self, space: SearchSpace, mode: str, *,
                 records: Callable[[], list[TrialRecord]],
                 busy_keys: Callable[[], set[str]],
                 problems: Callable[[dict[str, str]], list[str]],
                 key_of: Callable[[dict[str, str], list[str]], str] = set_key) -> None:
        self.space = space
        self.mode = mode
        self._records = records
        self._busy = busy_keys
        self._problems = problems
        self.key_of = key_of
        self.extra: list[Planned] = []
        self.on_skip: Callable[[Planned, str], None] = lambda planned, why: None
        self._said: set[str] = set()
        self.screen_check: Callable[[dict[str, str]], str | None] | None = None

    def _measured(self, records: list[TrialRecord]) -> dict[str, TrialRecord]:
        """First measurement of each set, by :attr:`key_of` (sets NCCL treats as equal share one)."""
        out: dict[str, TrialRecord] = {}
        for r in records:
            if (r.kind is not Kind.BASELINE and r.status not in (Status.RUNNING, Status.INTERRUPTED,
                                                                   Status.MACHINE_FAULT)):
                out.setdefault(self.key_of(r.env, r.flags), r)
        return out

    def next_planned(self) -> Planned | None:
        """The next set that must run before the sampler proposes, or None."""
        records = self._records()
        measured_by_key = self._measured(records)
        measured = set(measured_by_key)
        busy = self._busy()
        retried = {r.retry_of_trial for r in records if r.retry_of_trial is not None}
        gave_up: set[str] = set()
        for r in records:
            if r.status is not Status.INTERRUPTED or r.kind is Kind.BASELINE:
                continue  # baselines are re-measured by the loop itself when owed
            key = self.key_of(r.env, r.flags)
            if r.retry_of_trial is not None:
                gave_up.add(key)
            elif r.trial not in retried and key not in measured | busy:
                return Planned(dict(r.env), list(r.flags), r.kind, r.preset, retry_of=r.trial)
        decided = {self.key_of(r.env, r.flags): r for r in records if r.kind in (Kind.INVALID, Kind.DUPLICATE)}
        decided.update(measured_by_key)
        for planned in [*self.extra, *(Planned(dict(p.env), [], Kind.PRESET, p.name) for p in self.space.presets)]:
            key = self.key_of(planned.env, planned.flags)
            if key not in measured | busy | gave_up | set(decided):
                return planned
            earlier = decided.get(key)
            if earlier is not None and planned.preset not in self._said and earlier.preset != planned.preset:
                self._said.add(planned.preset)
                self.on_skip(planned, f"to NCCL the same set as trial {earlier.trial} ({earlier.preset or earlier.kind})")
        return None

    def judge(self, env: dict[str, str], flags: list[str], *, baseline: TrialRecord | None) -> Decision:
        """Whether a proposed set must be relaunched: not when NCCL would reject it (invalid),
        nor when it was measured before (the untuned set: the baseline)."""
        problems = self._problems(env)
        bad = self.screen_check(env) if self.screen_check is not None and not problems else None
        if problems or bad:
            return Decision(False, invalid_reason=problems[0] if problems else str(bad))
        key = self.key_of(env, flags)
        earlier = self._measured(self._records()).get(key)
        if earlier is None and key == self.key_of({}, []):
            earlier = baseline  # the untuned set, or one NCCL treats as equal to it
        if earlier is not None:
            return Decision(False, duplicate_of=earlier)
        return Decision(True)
