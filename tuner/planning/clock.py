"""The night's clock: how long one relaunch takes, how many fit before a deadline, when it ends.

Pure arithmetic: durations are seconds (s), times Unix times (s, :func:`time.time`). One
relaunch is its recorded phases (:class:`tuner.record.TrialRecord`): ``load_s`` (launch to
ready), ``probe_s`` (ready to the probe's end: the checks, the warm-up, the recorded runs and
the concurrency table), ``teardown_s``, and the time between two relaunches of one runner (the
NCCL log read, the storage, the judgement: a ``started_at`` minus the ``finished_at`` before it).
:func:`relaunch_time` takes each phase from what the study measured (the mean over its ok
launches; for the time between relaunches the median, which the triage and the screen lengthen
once), else from the config (``server.expected_load_s``; the probe's tokens a stream at
``probe.expected_tok_s``), else says it is not known: nothing is guessed.

:class:`NightClock` lays the rest of a night on that time: the first stage (the baseline,
re-measures, the sets), then the reserved checks (:class:`tuner.planning.budget.Budget`). Under
a deadline a first-stage relaunch starts only when it and every reserved check still owed fit,
each counted at :attr:`RelaunchTime.guard_s` (:data:`ESTIMATE_MARGIN` x the longest relaunch):
the checks keep their time as they keep their slots. A confirmation starts only when the final
baseline after it fits too (it is the confirmation's fresh baseline); the final baseline when
it fits. That rule is :func:`fits` with :func:`kept_after`, and nowhere else: the clock lays the
night on it, the sweep decides each relaunch by it (:class:`tuner.planning.limits.NightLimits`)
and the screen each of its runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import NamedTuple

from tuner.inputs import ExperimentConfig, ProbeConfig
from tuner.planning.budget import check_words
from tuner.planning.entry import Step
from tuner.record import Status, TrialRecord

__all__ = [
    "ESTIMATE_MARGIN",
    "NightClock",
    "Phase",
    "RelaunchTime",
    "clock_time",
    "deadline_at",
    "deadline_name",
    "fits",
    "kept_after",
    "relaunch_time",
    "span",
]

#: A relaunch (a screen run) is counted at this factor times the longest one (measured, or expected) before a
#: deadline: loads vary.
ESTIMATE_MARGIN = 1.2


def fits(now: float, deadline: float | None, each_s: float, then: int = 0) -> bool:
    """The night's one deadline rule: True when a run counted at ``each_s`` (s) started at
    ``now`` (Unix s), and ``then`` more of the same after it, end by ``deadline`` (Unix s; None:
    no deadline, everything fits)."""
    return deadline is None or now + each_s * (1 + then) <= deadline


def kept_after(step: Step | None, later: Sequence[Step]) -> int:
    """Relaunches whose time a relaunch must keep after it before a deadline: a first-stage one
    (``step`` None) every reserved check still owed (``later``); a confirmation the final baseline
    when it follows (``later``: the checks after it), its fresh baseline; any other none."""
    if step is None:
        return len(later)
    return 1 if step is Step.CONFIRM and Step.FINAL_BASELINE in later else 0


def span(seconds: float) -> str:
    """``seconds`` (s) in words: ``0.2 s``, ``45 s``, ``12.5 min``, ``2 h 05 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def clock_time(at: float, now: float | None = None) -> str:
    """Unix time ``at`` (s) as local ``HH:MM`` (to the nearest minute), with ``(+N d)`` when it
    falls N days after ``now``'s date."""
    when = datetime.fromtimestamp(at + 30)  # %H:%M truncates: 30 s rounds to the nearest minute
    days = (when.date() - datetime.fromtimestamp(now).date()).days if now is not None else 0
    return when.strftime("%H:%M") + (f" (+{days} d)" if days > 0 else "")


def deadline_at(started_at: float, timeout_s: float | None, until: datetime | None) -> float | None:
    """The Unix time (s) no relaunch may end after: ``started_at`` (Unix s) + ``timeout_s`` (s),
    or ``until`` (local wall clock), the earlier; None without either."""
    ends = [until.timestamp()] if until is not None else []
    if timeout_s is not None:
        ends.append(started_at + timeout_s)
    return min(ends) if ends else None


def deadline_name(timeout_s: float | None, until: datetime | None, started_at: float) -> str:
    """The option that sets the deadline, its value in words: ``--until 07:00`` or ``--timeout
    8 h 00 min`` (the earlier of the two when both are given; ``""`` without either)."""
    if until is not None and (timeout_s is None or until.timestamp() <= started_at + timeout_s):
        return f"--until {until:%H:%M}"
    return f"--timeout {span(timeout_s)}" if timeout_s is not None else ""


@dataclass(frozen=True)
class Phase:
    """One phase of a relaunch: ``seconds`` (s; None: not known yet) and ``source``, where the
    figure comes from (``measured: mean of 12 launches``, ``server.expected_load_s``) or, when
    not known, what would give it."""

    seconds: float | None
    source: str

    def text(self, name: str) -> str:
        """``load 1.7 s (measured: mean of 12 launches)`` or ``load not known (...)``."""
        figure = span(self.seconds) if self.seconds is not None else "not known"
        return f"{name} {figure} ({self.source})"


@dataclass(frozen=True)
class RelaunchTime:
    """The expected time of one relaunch by phase (:class:`Phase`, s): ``load``, ``probe``,
    ``teardown`` and ``between`` (two relaunches of one runner); ``longest_s``: the longest
    measured relaunch (``wall_s``, s; None before one); ``levels``: the measured mean time (s)
    of each concurrency level, part of ``probe``; ``soak_s``: the soak (s, ``sweep.soak_minutes``)
    a finalist's confirmation adds after its probe, and the final baseline where the deadline
    leaves it time (none of the measured phases holds it: :func:`relaunch_time` takes it out)."""

    load: Phase
    probe: Phase
    teardown: Phase
    between: Phase
    longest_s: float | None = None
    levels: tuple[tuple[int, float], ...] = ()
    soak_s: float = 0.0

    @property
    def known(self) -> bool:
        """True when the load and the probe are known (the teardown and the gap are small: not needed)."""
        return self.load.seconds is not None and self.probe.seconds is not None

    @property
    def work_s(self) -> float | None:
        """Load + probe + teardown (s), the known ones; None when neither load nor probe is known."""
        if self.load.seconds is None and self.probe.seconds is None:
            return None
        return sum(p.seconds or 0.0 for p in (self.load, self.probe, self.teardown))

    @property
    def seconds(self) -> float | None:
        """One relaunch and the time after it (s), the known phases (a lower bound unless :attr:`known`); None when nothing is."""
        work = self.work_s
        return None if work is None else work + (self.between.seconds or 0.0)

    @property
    def guard_s(self) -> float:
        """The time (s) a deadline must leave for one relaunch: :data:`ESTIMATE_MARGIN` x the
        longer of the longest measured relaunch and :attr:`work_s`, plus the time between
        relaunches; 0 when nothing is known (then no deadline stops a relaunch)."""
        base = max(self.longest_s or 0.0, self.work_s or 0.0)
        return ESTIMATE_MARGIN * base + (self.between.seconds or 0.0) if base else 0.0

    def words(self) -> str:
        """One line: ``A relaunch takes about 9.3 s: load 1.7 s (...), probe 7.1 s (...), ...``."""
        probe = self.probe.text("probe")
        if self.levels:
            probe = probe[:-1] + "; of it " + ", ".join(f"C={c} {span(s)}" for c, s in self.levels) + ")"
        phases = ", ".join([self.load.text("load"), probe, self.teardown.text("teardown"),
                            self.between.text("between relaunches")])
        soak = (f" A confirmation adds its soak, {span(self.soak_s)} (sweep.soak_minutes, --soak), and the final "
                "baseline the same where the time allows." if self.soak_s else "")
        if self.seconds is None:
            return f"A relaunch's time is not known yet: {phases}.{soak}"
        about = f"about {span(self.seconds)}" if self.known else f"at least {span(self.seconds)} (the known phases)"
        return f"A relaunch takes {about}: {phases}.{soak}"


def probe_tokens(pc: ProbeConfig) -> tuple[int, str]:
    """The tokens one stream generates in a launch's probe, and how they add up: the checks
    (``check.max_tokens``; the counting check's ``8 N + 16``, as tuner.sweep.trial asks), warm-up and recorded runs
    (``repeats = "auto"``: ``max_repeats``, the most) of ``max_tokens`` each, and with
    ``probe.concurrency`` the bench's warm-up request and ``concurrency_requests`` requests
    per level (C streams at a time: each stream's requests run one after another)."""
    runs = pc.warmup + (pc.repeats if isinstance(pc.repeats, int) else pc.max_repeats)
    tokens, parts = runs * pc.max_tokens, [f"{runs} runs x {pc.max_tokens} tokens"
                                           + (" (repeats auto: at most max_repeats)" if pc.repeats == "auto" else "")]
    if pc.check is not None:
        check = (pc.check.max_tokens if pc.check.prompt is not None else 0) + (
            8 * pc.check.count_to + 16 if pc.check.count_to is not None else 0)
        tokens += check
        parts.append(f"the checks' {check}")
    if pc.concurrency:
        per_level = pc.concurrency_requests * pc.max_tokens
        tokens += pc.max_tokens + len(pc.concurrency) * per_level
        parts.append(f"{len(pc.concurrency)} concurrency level{'s' if len(pc.concurrency) != 1 else ''} "
                     f"x {pc.concurrency_requests} requests x {pc.max_tokens} tokens a stream, and one warm-up")
    return tokens, " + ".join(parts)


def _mean(values: list[float], what: str) -> Phase | None:
    if not values:
        return None
    return Phase(statistics.fmean(values), f"measured: mean of {len(values)} {what}")


def _gaps(records: Sequence[TrialRecord]) -> list[float]:
    """Seconds between one relaunch's end and the next one's start, per runner."""
    by_runner: dict[str, list[TrialRecord]] = {}
    for r in records:
        if r.started_at is not None and r.finished_at is not None:
            by_runner.setdefault(r.runner, []).append(r)
    out = []
    for runs in by_runner.values():
        runs.sort(key=lambda r: r.started_at or 0.0)
        out += [b.started_at - a.finished_at for a, b in pairwise(runs)
                if b.started_at is not None and a.finished_at is not None and b.started_at >= a.finished_at]
    return out


def relaunch_time(cfg: ExperimentConfig, records: Sequence[TrialRecord] = ()) -> RelaunchTime:
    """One relaunch's expected time (:class:`RelaunchTime`) from the study's finished
    relaunches ``records`` (measured phases win) and ``cfg`` (``server.expected_load_s``, the
    probe's tokens, :func:`probe_tokens`, and with ``[gates] answers`` the gate's prompts x
    ``max_tokens``, at ``probe.expected_tok_s``)."""
    done = [r for r in records if r.kind.relaunched and r.status not in (Status.RUNNING, Status.INTERRUPTED)]
    ok = [r for r in done if r.status is Status.OK]
    load = _mean([r.load_s for r in ok if r.load_s is not None], "launches") or (
        Phase(cfg.server.expected_load_s, "server.expected_load_s") if cfg.server.expected_load_s is not None
        else Phase(None, "set server.expected_load_s, or the first launch measures it"))
    tokens, how = probe_tokens(cfg.probe)
    gates = cfg.gates
    if gates.answers:  # every launch answers the correctness gate's prompts after its probe (tuner.sweep.trial._measure)
        tokens += len(gates.prompts) * gates.max_tokens
        how += f" + the correctness gate's {len(gates.prompts)} answers x {gates.max_tokens}"
    rate = cfg.probe.expected_tok_s
    probe = _mean([r.probe_s - (r.soak_s or 0.0) for r in ok if r.probe_s], "probes") or (
        Phase(tokens / rate, f"{how} = {tokens} tokens a stream at probe.expected_tok_s {rate:g} tok/s")
        if rate is not None else Phase(None, f"{how} = {tokens} tokens a stream: set probe.expected_tok_s, "
                                             "or the baseline measures it"))
    teardown = _mean([r.teardown_s for r in done if r.teardown_s is not None], "teardowns") or Phase(
        None, "the first launch measures it")
    gaps = _gaps(done)
    between = (Phase(statistics.median(gaps), f"measured: median of {len(gaps)}") if gaps
               else Phase(None, "measured from the second launch"))
    walls = [r.wall_s - (r.soak_s or 0.0) for r in done if r.wall_s]  # a soak is counted apart
    per_level: dict[int, list[float]] = {}
    for r in ok:
        for level in r.concurrency:
            per_level.setdefault(level.concurrency, []).append(level.wall_s)
    levels = tuple((c, statistics.fmean(w)) for c, w in per_level.items())
    return RelaunchTime(load, probe, teardown, between, max(walls) if walls else None, levels, cfg.sweep.soak_s)


class Fit(NamedTuple):
    """What of a night fits before its deadline: ``stage1`` first-stage relaunches, then the
    reserved ``checks`` that fit (in order) and those that do not (``dropped``)."""

    stage1: int
    checks: tuple[Step, ...]
    dropped: tuple[Step, ...]


def _soaks_kept(per: RelaunchTime, checks: Sequence[Step]) -> float:
    """Seconds the soaks of the reserved ``checks`` take that a first-stage relaunch keeps before
    a deadline: each confirmation's (the final baseline's soak is made only where time is left)."""
    return per.soak_s * sum(1 for step in checks if step is Step.CONFIRM)


@dataclass(frozen=True)
class NightClock:
    """The rest of a night from ``now`` (Unix s): ``stage1`` first-stage relaunches still to make
    (the baseline, re-measures, the sets; a bound: the space may end first), then the reserved
    ``checks`` still owed (:attr:`tuner.planning.budget.Budget.steps`), after ``done`` relaunches
    already made (the budget counts them; relaunches are numbered on from them). ``deadline``:
    Unix s (:func:`deadline_at`; None: none); ``first_free``: the first relaunch is the night's
    first baseline, made whatever the deadline (nothing can be judged without it)."""

    per: RelaunchTime
    now: float
    stage1: int
    checks: tuple[Step, ...] = ()
    done: int = 0
    deadline: float | None = None
    first_free: bool = False

    def fit(self) -> Fit:
        """The relaunches that fit before the deadline by the rule of the module docstring."""
        return self._lay()[0]

    @property
    def soak_s(self) -> float:
        """Seconds of soak in the relaunches that fit: each confirmation's, and the final
        baseline's where the deadline leaves it time (:attr:`RelaunchTime.soak_s` each)."""
        return self._lay()[1]

    def _lay(self) -> tuple[Fit, float]:
        """:meth:`fit` and the soaks of the checks it keeps (s)."""
        soak = self.per.soak_s
        if self.deadline is None or not self.per.guard_s:
            return Fit(self.stage1, self.checks, ()), soak * len(self.checks)
        each, guard, t = self.per.seconds or 0.0, self.per.guard_s, self.now
        made = 0
        owed = _soaks_kept(self.per, self.checks)
        for j in range(self.stage1):
            if not (self.first_free and j == 0) and not fits(t + owed, self.deadline, guard,
                                                             kept_after(None, self.checks)):
                break
            t, made = t + each, made + 1
        kept: list[Step] = []
        dropped: list[Step] = []
        soaked = 0.0
        for i, step in enumerate(self.checks):
            extra = soak if step is Step.CONFIRM else 0.0
            if fits(t + extra, self.deadline, guard, kept_after(step, self.checks[i + 1:])):
                kept.append(step)
                t += each + extra
                if step is Step.FINAL_BASELINE and soak and fits(t - each + soak, self.deadline, guard):
                    extra = soak  # the baseline's soak, where the time allows
                    t += soak
                soaked += extra
            else:
                dropped.append(step)
        return Fit(made, tuple(kept), tuple(dropped)), soaked

    @property
    def total(self) -> int:
        """Relaunches of the whole night when the rest goes as fitted: ``done`` and what fits."""
        f = self.fit()
        return self.done + f.stage1 + len(f.checks)

    @property
    def duration_s(self) -> float | None:
        """Seconds the relaunches that fit take (a lower bound unless the relaunch time is
        :attr:`RelaunchTime.known`); None when nothing of it is known."""
        each = self.per.seconds
        f = self.fit()
        return None if each is None else (f.stage1 + len(f.checks)) * each + self.soak_s

    @property
    def end_at(self) -> float | None:
        """The expected end (Unix s) of the last relaunch that fits; None when not known."""
        d = self.duration_s
        return None if d is None else self.now + d

    def lines(self, deadline_words: str = "") -> list[str]:
        """The clock as printable lines (the dry run and the sweep's start print them): the
        relaunch time by phase, then the night: how many relaunches, numbered, which are
        reserved, how many fit before ``deadline_words`` (``--until 07:00``), the duration and
        the expected end as a local clock time."""
        f = self.fit()
        planned = self.stage1 + len(self.checks)
        fitting = f.stage1 + len(f.checks)
        ranges = self._ranges(f)
        out = [self.per.words()]
        if self.deadline is not None:
            left = max(0.0, self.deadline - self.now)
            head = f"Before {deadline_words or 'the deadline'} (in {span(left)})"
            if not self.per.guard_s:
                out.append(f"{head}: how many of the {planned} relaunches fit ({ranges}) is decided once a launch is "
                           "measured; the reserved checks keep their time then.")
                return out
            if fitting == planned:
                said = f"{head}: all {planned} relaunches fit ({ranges})"
            else:
                cut = self.stage1 - f.stage1
                said = (f"{head}: {fitting} of the {planned} relaunches fit: {ranges}"
                        + (f" (the first stage stops {cut} relaunch{'es' if cut != 1 else ''} early so that the "
                           "reserved checks keep their time)" if cut and f.checks else "")
                        + (f"; {', '.join(check_words(f.dropped))} would not fit" if f.dropped else ""))
        else:
            said = f"{planned} relaunch{'es' if planned != 1 else ''} ({ranges})"
        out.append(said + "; " + self._when() + ".")
        return out

    def _when(self) -> str:
        d, end = self.duration_s, self.end_at
        if d is None or end is None:
            return "their duration is not known before a launch is measured"
        about = "about" if self.per.known else "at least"
        return f"{about} {span(d)}, expected end {clock_time(end, self.now)}"

    def _ranges(self, f: Fit) -> str:
        first = self.done + 1
        parts = []
        if f.stage1:
            last = first + f.stage1 - 1
            what = "the baseline and the sets" if self.first_free else "the sets and re-measures"
            parts.append(f"{_numbers(first, last)}: {what}")
            first = last + 1
        if f.checks:
            soaks = ""
            soaked = self.soak_s
            if soaked:
                n = round(soaked / self.per.soak_s)
                soaks = f" with {'up to ' if n > 1 else ''}{n} soak{'s' if n != 1 else ''} of {span(self.per.soak_s)} ({span(soaked)})"
            parts.append(f"{_numbers(first, first + len(f.checks) - 1)} reserved: {', '.join(check_words(f.checks))}"
                         + soaks)
        return ", ".join(parts) or "none"


def _numbers(first: int, last: int) -> str:
    return f"relaunch {first}" if first == last else f"relaunches {first}-{last}"

