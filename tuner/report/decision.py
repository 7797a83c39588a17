"""The night's decision, said once: what to do, in one line, and why, in a few.

:func:`decide` reads a :class:`tuner.judging.Judgement` (the level "use it" rests on) and the
study's :class:`tuner.record.StudyInfo` and returns a :class:`Decision`: its kind (:data:`KINDS`),
one line of about 25 words at most that says what to do, the set it recommends (only a set whose
gain held on fresh launches: the judgement's :attr:`~tuner.judging.Judgement.winner` when
:attr:`~tuner.judging.Judgement.confirmed`, never a row's position) and short reasons. The
terminal, report.md, report.html, ``--json``, ``studies`` and ``status`` all show this value,
so they cannot name different sets.

"Nothing to gain" is said when the intervals rule out a gain worth having: every judged set's
95 % interval (:func:`tuner.judging.stats.compare`, on all its launches) ends below
``1 + min_effect``. A set that looked best but was not confirmed leaves the night not decided,
with the check that could confirm it (:func:`confirm_command`: ``nccl-tune check`` with the
relaunches the bracketed design needs to see that gain at 80 % power).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tuner.judging import CONFIRM_ALPHA, REFERENCE_PRESET, Judgement, LevelJudgement, SetJudgement, gain_pct, stats
from tuner.record import Kind, Status, StudyInfo, TrialRecord, Verdict
from tuner.report.frame import set_text

__all__ = [
    "CHECK_KINDS",
    "CHECK_PREFIX",
    "KEEP_DEFAULTS",
    "KINDS",
    "NOTHING_TO_GAIN",
    "NOT_DECIDED",
    "NO_GAIN_FOUND",
    "NO_SPEED_VERDICT",
    "USE",
    "Decision",
    "confirm_command",
    "decide",
    "scope_lines",
]

USE = "use"
NOTHING_TO_GAIN = "nothing-to-gain"
NOT_DECIDED = "not-decided"
NO_GAIN_FOUND = "no-gain-found"
NO_SPEED_VERDICT = "no-speed-verdict"
KEEP_DEFAULTS = "keep-defaults"
#: The three answers of ``nccl-tune check`` (its study's report says the check's own verdict).
CHECK_KINDS: dict[str, str] = {"holds": "holds", "no longer holds": "no-longer-holds",
                               "cannot be judged": "not-judged"}
#: What a check study's stored stop reason starts with (``tuner.cli.check``).
CHECK_PREFIX = "nccl-tune check: "
#: Every kind of decision: use a set; nothing to gain (intervals rule a gain out); no gain found
#: (no set beat the baseline beyond the noise on all its launches, a small gain not ruled out);
#: not decided (a set beat it but is not confirmed, or nothing measured yet); no speed verdict (NCCL
#: variables cannot act on this night); keep the defaults (the untuned server meets the target);
#: and a check's three answers (:data:`CHECK_KINDS`).
KINDS: tuple[str, ...] = (USE, NOTHING_TO_GAIN, NO_GAIN_FOUND, NOT_DECIDED, NO_SPEED_VERDICT, KEEP_DEFAULTS,
                          *CHECK_KINDS.values())
#: The most relaunches :func:`confirm_command` proposes.
MAX_CHECK_TRIALS = 40


@dataclass(frozen=True)
class Decision:
    """What the night says to do: ``kind`` (one of :data:`KINDS`), ``line`` (the one line, said
    first everywhere), ``reasons`` (short sentences after it), the recommended set (``key``,
    ``env``, ``flags``; None/empty unless ``kind`` is :data:`USE`), and the set the line is
    about (``about``: the recommended one, or the one that looked best) with its ``ratio`` and
    95 % interval ``low``..``high`` on all its launches (NaN when none); ``gates``: each check
    the recommendation must pass and its outcome, ``(name, outcome)``: ``confirmation`` (held,
    failed, owed, none), ``launch noise`` (as assumed, or the warning), ``space notes`` (the
    space file's note on each of the set's variables)."""

    kind: str
    line: str
    reasons: tuple[str, ...] = ()
    key: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    about: str | None = None
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    gates: tuple[tuple[str, str], ...] = ()

    @property
    def recommends(self) -> bool:
        """True when the night recommends a set (``kind`` :data:`USE`, or a check that holds)."""
        return self.kind in (USE, CHECK_KINDS["holds"]) and self.key is not None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: kind, line, reasons and the recommended set (null when none)."""
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None
        rec = ({"key": self.key, "env": dict(self.env), "flags": list(self.flags), "ratio": num(self.ratio),
                "low": num(self.low), "high": num(self.high)} if self.recommends else None)
        return {"kind": self.kind, "line": self.line, "reasons": list(self.reasons), "recommended": rec,
                "gates": [{"gate": name, "outcome": outcome} for name, outcome in self.gates]}


def _pct(ratio: float) -> str:
    return f"{gain_pct(ratio):+.1f} %"


def _interval(low: float, high: float) -> str:
    return f"{gain_pct(low):+.1f}..{gain_pct(high):+.1f}" if math.isfinite(low) and math.isfinite(high) else "no CI"


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def decide(j: Judgement | None, info: StudyInfo, *, records: Sequence[TrialRecord] = (),
           min_effect: float | None = None, study: str = "") -> Decision:
    """The :class:`Decision` of judgement ``j`` (None: nothing judged) for the study ``info``,
    with its gates (:func:`_gates`); see :func:`_decide`."""
    d = _soak_failures(_answers_gate(_decide(j, info, records=records, min_effect=min_effect, study=study), records),
                       records)
    return replace(d, gates=_gates(j, info, d) + _answers_outcome(d, records)) if j is not None else d


def _answers_gate(d: Decision, records: Sequence[TrialRecord]) -> Decision:
    """``d`` with the correctness gate's findings among its reasons: the machine's problem first
    (the baseline's answers beyond tolerance of the reference configuration's), then each set that
    gave wrong output, with the prompt and the first tokens that differ. A recommended set with a
    launch of wrong output is never recommended (not decided instead)."""
    said: list[str] = []
    for r in records:
        if r.preset == REFERENCE_PRESET and r.answers_diverge:
            said.append(f"The untuned baseline's answers part from the reference configuration's (trial {r.trial}: "
                        f"the server's own allreduce off, NCCL_P2P_DISABLE=1): {r.answers_diverge}. The machine's "
                        "default allreduce path may be corrupting answers; sets were compared with the reference "
                        "configuration's answers.")
    wrong: dict[str, list[TrialRecord]] = {}
    for r in records:
        if r.status is Status.WRONG_OUTPUT:
            wrong.setdefault(set_text(r.env, r.flags), []).append(r)
    for text, rs in wrong.items():
        speed = f", at {rs[0].output_tok_s:.1f} tok/s" if rs[0].output_tok_s else ""
        said.append(f"{text} gave wrong output (trial {rs[0].trial}{speed}): {rs[0].answers_diverge}; never recommended.")
    if d.recommends and set_text(dict(d.env), list(d.flags)) not in wrong:
        mine = [r for r in records if r.answers_checked and r.kind is not Kind.BASELINE
                and set_text(r.env, r.flags) == set_text(dict(d.env), list(d.flags))]
        if mine:
            said.insert(0, f"Its answers matched the baseline's on its {_n(len(mine), 'launch', 'launches')} "
                           "(the correctness gate: greedy answers compared token by token).")
    if not said:
        return d
    if d.recommends and set_text(dict(d.env), list(d.flags)) in wrong:
        return Decision(NOT_DECIDED, "Not decided: the fastest set gave wrong output on one of its launches",
                        (*said, "Keep the defaults."), about=d.about, ratio=d.ratio, low=d.low, high=d.high)
    return replace(d, reasons=(*d.reasons, *said))


def _soak_failures(d: Decision, records: Sequence[TrialRecord]) -> Decision:
    """``d`` with each set that failed its soak (``failed_soak``) among its reasons, unless ``d``
    is about that set (its own reasons say it already): the report says why a fast set that hangs
    under load is not recommended."""
    said: dict[str, str] = {}
    mine = set_text(dict(d.env), list(d.flags)) if d.about is not None else None
    for r in records:
        text = set_text(r.env, r.flags)
        hung = r.status is Status.FAILED_SOAK or (r.ok and r.soak_failure and r.kind is not Kind.BASELINE)  # or stored before
        if hung and text != mine and text not in said:
            said[text] = (f"{text} hung under load (trial {r.trial}, its soak: {r.soak_failure}); "
                          "never recommended.")
    return replace(d, reasons=(*d.reasons, *said.values())) if said else d


def _answers_outcome(d: Decision, records: Sequence[TrialRecord]) -> tuple[tuple[str, str], ...]:
    """The correctness gate's outcome for the set ``d`` is about (a gate of :attr:`Decision.gates`),
    none when no launch was checked."""
    if not any(r.answers_checked for r in records):
        return ()
    mine = [r for r in records if r.kind is not Kind.BASELINE and r.answers_checked and d.about is not None
            and set_text(r.env, r.flags) == set_text(dict(d.env), list(d.flags))] if d.env or d.flags else []
    if not mine:
        return (("correctness", "the sets' answers were compared with the baseline's (no set recommended)"),)
    bad = next((r for r in mine if r.status is Status.WRONG_OUTPUT), None)
    if bad is not None:
        return (("correctness", f"wrong output: {bad.answers_diverge}"),)
    forks = [r.answers_diverge for r in mine if r.answers_diverge]
    return (("correctness", f"answers matched the baseline's on {len(mine)} launch{'es' if len(mine) != 1 else ''}"
             + (f" (within tolerance: {forks[0]})" if forks else "")),)


def _gates(j: Judgement, info: StudyInfo, d: Decision) -> tuple[tuple[str, str], ...]:
    """The gates of ``d`` (:attr:`Decision.gates`)."""
    s = j.sets.get(d.about) if d.about is not None else None
    if s is None:
        conf = "no set to confirm"
    elif s.confirmation is None:
        conf = f"owed: {set_text(s.env, s.flags)} not relaunched to confirm yet"
    elif s.confirmation.verdict is Verdict.FASTER and s.key == j.winner:
        conf = f"held: {_pct(s.confirmation.ratio)} on fresh launches of {set_text(s.env, s.flags)}"
    else:
        conf = f"failed: {_pct(s.confirmation.ratio)} on fresh launches, {s.confirmation.note}"
    out = [("confirmation", conf)]
    soak = _soak_gate(j, s)
    if soak:
        out.append(("soak", soak))
    out.append(("launch noise", j.noise_warning or "as assumed"))
    notes = [f"{k}: {info.space_notes[k]}" for k in d.env if info.space_notes.get(k)]
    if notes:
        out.append(("space notes", "; ".join(notes)))
    return tuple(out)


def _soak_gate(j: Judgement, s: SetJudgement | None) -> str:
    """The soak gate in words: the set's confirmation soak, and the baseline's when it failed too
    (the machine hangs, not the set); ``""`` when no soak was made."""
    said = s.soak if s is not None else ""
    if not said:
        return f"baseline: {j.baseline_soak}" if j.baseline_soak_failed else ""
    if s is not None and s.soak_failed and j.baseline_soak_failed:
        return (f"{said}; the untuned baseline failed the same soak ({j.baseline_soak}): the machine hangs under "
                "load, not the set")
    return said


def _soak_reason(j: Judgement, s: SetJudgement) -> str:
    """Why a set that failed its soak is not recommended, one sentence (``""``: it did not fail one)."""
    if not s.soak_failed:
        return ""
    if j.baseline_soak_failed:
        return (f"The machine hangs under load: the untuned baseline failed the same soak as the set did "
                f"({j.baseline_soak}), so the set is not to blame; fix the machine (its P2P path, NCCL build, "
                "driver) before choosing a set.")
    return (f"It hangs under load: its soak {s.soak}; the untuned baseline "
            + ("passed the same soak" if j.baseline_soak else "was not soaked") + ". Do not deploy it.")


def _decide(j: Judgement | None, info: StudyInfo, *, records: Sequence[TrialRecord] = (),
            min_effect: float | None = None, study: str = "") -> Decision:
    """The :class:`Decision` of judgement ``j`` (None: nothing judged) for the study ``info``.

    ``records``: the group's relaunches (to count failures and time a proposed check);
    ``min_effect`` (fraction): the judging threshold (default ``j.min_effect``); ``study``: its
    name, for the check a not-decided night proposes."""
    if info.stop_reason.startswith(CHECK_PREFIX) and j is not None:
        return _checked(j, info.stop_reason[len(CHECK_PREFIX):])
    if j is None or not j.baseline_launches:
        return Decision(NOT_DECIDED, "Not decided: the untuned baseline has no successful measurement yet")
    effect = j.min_effect if min_effect is None else min_effect
    if info.target_met_untuned and info.target is not None:
        return Decision(KEEP_DEFAULTS, f"Keep the defaults: the untuned server already meets the target of "
                                       f"{info.target:g} tok/s", ("No tuned relaunch was spent.",))
    if j.forced:
        return Decision(NO_SPEED_VERDICT, "No speed verdict: NCCL variables cannot change the speed on this night",
                        (f"Why: {j.forced}.",))
    if j.inconclusive:
        return Decision(NOT_DECIDED, "Not decided: the baseline moved up and down more than the noise explains",
                        (f"{j.inconclusive[0].upper()}{j.inconclusive[1:]}.",))
    judged = [s for s in j.sets.values() if s.comparison is not None and not s.not_applied and not s.cannot_act]
    if not judged:
        return _nothing_judged(j, records)
    if j.winner is not None and j.sets[j.winner].soak_failed:
        return _hangs(j)
    if j.winner is not None and j.confirmed is True:
        return _use(j)
    if all(math.isfinite(s.comparison.ci_high) and s.comparison.ci_high < 1.0 + effect
           for s in judged if s.comparison is not None):
        best = max(judged, key=lambda s: s.comparison.ratio if s.comparison else 0.0)
        c = best.comparison
        assert c is not None
        top = max(s.comparison.ci_high for s in judged if s.comparison is not None)
        return Decision(NOTHING_TO_GAIN, f"Nothing to gain among the {_n(len(judged), 'set')} measured: "
                                         f"no interval reaches +{effect * 100:g} % (best {_pct(c.ratio)}, "
                                         f"at most {_pct(top)})",
                        ("Keep the defaults: NCCL's choices are right for this load.",),
                        about=best.key, ratio=c.ratio, low=c.ci_low, high=c.ci_high)
    if not (j.winner is not None and j.confirmed is None) and not any(
            s.comparison is not None and s.comparison.ci_low > 1.0 for s in judged):
        return _no_gain_found(j, info, judged, records, effect, study)
    return _not_decided(j, info, judged, records, effect, study)


def _no_gain_found(j: Judgement, info: StudyInfo, judged: list, records: Sequence[TrialRecord],
                   effect: float, study: str) -> Decision:
    """No set is faster than the baseline beyond the noise on all its launches (every interval
    reaches down to 1 or below), and none awaits its confirmation: keep the defaults, plainly; a
    gain too small for this night to see is not ruled out, and the check that could see the best
    one's is proposed when it measured above ``effect``."""
    best = j.sets[j.winner] if j.winner is not None else max(
        judged, key=lambda s: s.comparison.ratio if s.comparison else 0.0)
    c = j.winner_comparison if j.winner is not None and j.winner_comparison is not None else best.comparison
    assert c is not None
    words = set_text(best.env, best.flags)
    line = (f"No gain found: the best set, {words}, measured {_pct(c.ratio)} ({_interval(c.ci_low, c.ci_high)}), "
            "within the noise; keep the defaults")
    can = j.recommendable_gain()
    reasons = [f"No set of the {_n(len(judged), 'set')} measured beat the baseline beyond the noise on all its "
               "launches" + (f"; this night can see a gain of {can * 100:.1f} % or more, so one of "
                             f"{effect * 100:g} % is not ruled out." if math.isfinite(can) else ".")]
    if best.soak_failed:
        reasons.append(_soak_reason(j, best))
    elif best.confirmation is not None and j.confirmed is False:
        reasons.append(f"Its confirmation on a fresh relaunch of the set and of the baseline measured "
                       f"{_pct(best.confirmation.ratio)}.")
    command = confirm_command(j, best.key, info, records, study) if c.ratio > 1.0 + effect else None
    if command is not None:
        reasons.append(f"To look for {_pct(c.ratio)} on its own: {command}.")
    return Decision(NO_GAIN_FOUND, line, tuple(reasons), about=best.key, ratio=c.ratio, low=c.ci_low, high=c.ci_high)


def _checked(j: Judgement, reason: str) -> Decision:
    """A ``nccl-tune check`` study: its own verdict (``reason``, as the check stored it), the
    checked set recommended only when it holds."""
    said = next((words for words in CHECK_KINDS if reason.startswith(words)), "cannot be judged")
    s = next(iter(j.sets.values()), None)
    words = set_text(s.env, s.flags) if s is not None else "the set"
    line = f"Check: {words} {said}" + ("" if said != "holds" or "but study" not in reason else
                                       " on this check (its study had not confirmed it)")
    if said != "holds" or s is None:
        return Decision(CHECK_KINDS[said], line, (f"{reason[0].upper()}{reason[1:]}.",), about=s.key if s else None)
    c = s.comparison
    nan = math.nan
    return Decision(CHECK_KINDS[said], line, (f"{reason[0].upper()}{reason[1:]}.",), key=s.key, env=dict(s.env),
                    flags=tuple(s.flags), about=s.key, ratio=c.ratio if c else nan, low=c.ci_low if c else nan,
                    high=c.ci_high if c else nan)


def _nothing_judged(j: Judgement, records: Sequence[TrialRecord]) -> Decision:
    """No set has a speed verdict: only the baseline, failures, sets NCCL did not apply, or sets
    that cannot act."""
    tuned = [r for r in records if r.kind.relaunched and r.kind is not Kind.BASELINE]
    failed = sum(1 for r in tuned if not r.ok)
    cannot = [s for s in j.sets.values() if s.cannot_act and not s.not_applied]
    if cannot:
        return Decision(NO_SPEED_VERDICT, "No speed verdict: NCCL variables cannot change the speed on this night",
                        (f"Why: {cannot[0].cannot_act}; each set shows its measured ratio only.",))
    if not j.sets and failed == 0:
        return Decision(NOT_DECIDED, "Not decided: only the baseline was measured, no tuned set yet",
                        ("Run the same command again with a budget that reaches a set (--trials).",))
    unapplied = sum(1 for s in j.sets.values() if s.not_applied)
    why = ", ".join(w for w in (f"{failed} failed" if failed else "",
                                f"{unapplied} not applied by NCCL" if unapplied else "") if w)
    return Decision(NOT_DECIDED, f"Not decided: no tuned set could be judged on speed ({why or 'none measured'})")


def _hangs(j: Judgement) -> Decision:
    """The set that looked best failed its soak: never recommended, with whose hang it is (the
    set's, or the machine's when the untuned baseline failed the same soak)."""
    assert j.winner is not None
    s = j.sets[j.winner]
    c = j.winner_comparison or s.comparison
    assert c is not None
    words = set_text(s.env, s.flags)
    if j.baseline_soak_failed:
        line = f"Not decided: the machine hangs under load, with or without {words}; keep the defaults and fix it"
    else:
        line = f"Not decided: {words} measured {_pct(c.ratio)} but hangs under load (failed soak); keep the defaults"
    return Decision(NOT_DECIDED, line, (_soak_reason(j, s),), about=s.key, ratio=c.ratio, low=c.ci_low,
                    high=c.ci_high)


def _use(j: Judgement) -> Decision:
    assert j.winner is not None
    s = j.sets[j.winner]
    c = j.winner_comparison or s.comparison
    assert c is not None and s.confirmation is not None
    words = set_text(s.env, s.flags)
    soak = (f"It lasted its soak: {s.soak}.",) if s.soak else ()
    return Decision(USE, f"Use {words}: {_pct(c.ratio)} ({_interval(c.ci_low, c.ci_high)}), confirmed on fresh "
                         "launches",
                    (f"It held on a fresh relaunch of the set and of the baseline ({_pct(s.confirmation.ratio)} on "
                     "those alone).", *soak),
                    key=s.key, env=dict(s.env), flags=tuple(s.flags), about=s.key, ratio=c.ratio, low=c.ci_low,
                    high=c.ci_high)


def _not_decided(j: Judgement, info: StudyInfo, judged: list, records: Sequence[TrialRecord],
                 effect: float, study: str) -> Decision:
    """A gain not ruled out and not confirmed: the set that looked best, what this night can
    confirm, and the command that would."""
    best = j.sets[j.winner] if j.winner is not None else max(
        judged, key=lambda s: s.comparison.ratio if s.comparison else 0.0)
    c = best.comparison
    assert c is not None
    words = set_text(best.env, best.flags)
    can = j.recommendable_gain()
    can_words = f"; this night can confirm {can * 100:.1f} % or more" if math.isfinite(can) else ""
    reasons = []
    command = confirm_command(j, best.key, info, records, study) if c.ratio > 1.0 + effect else None
    if j.winner is not None and j.confirmed is None:
        line = f"Not decided yet: {words} looked best at {_pct(c.ratio)}, its confirmation is owed{can_words}"
        why = info.confirm_skipped or ("the final baseline re-measure was not made" if info.final_baseline_skipped
                                       else "")
        reasons.append((f"Not confirmed on fresh launches yet ({why}); do not adopt it before it is: " if why else
                        "Not confirmed on fresh launches yet; do not adopt it before it is: ")
                       + (info.next_run or "run the same command again") + ".")
    else:
        failed = j.winner is not None and j.confirmed is False
        line = f"Not decided: {words} looked best at {_pct(c.ratio)}" + (", not confirmed" if failed else "") + can_words
        if failed and best.soak_failed:
            reasons.append(_soak_reason(j, best))
        elif failed and best.confirmation is not None:
            reasons.append(f"On a fresh relaunch of the set and of the baseline it measured "
                           f"{_pct(best.confirmation.ratio)}, not enough to tell from the noise.")
        elif not failed:
            reasons.append(f"No set beat the baseline by more than the noise; the best one's 95 % interval is "
                           f"{_interval(c.ci_low, c.ci_high)} %, so a gain of {effect * 100:g} % or more is not ruled out.")
    if command is not None:
        reasons.append(f"To confirm {_pct(c.ratio)} on its own: {command}.")
    if j.winner is None or j.confirmed is False:
        reasons.append("Keep the defaults until a check confirms it.")
    return Decision(NOT_DECIDED, line, tuple(reasons), about=best.key, ratio=c.ratio, low=c.ci_low, high=c.ci_high)


def _median(values: Sequence[float | None]) -> float:
    got = sorted(v for v in values if v is not None and math.isfinite(v) and v > 0)
    return got[len(got) // 2] if len(got) % 2 else (sum(got[len(got) // 2 - 1:len(got) // 2 + 1]) / 2 if got else math.nan)


def scope_lines(decision: Decision, records: Sequence[TrialRecord], *, levels: LevelJudgement | None = None,
                metric_words: str = "single-stream output tok/s") -> tuple[str, ...]:
    """What the recommendation was judged on and what it does elsewhere: the metric and
    concurrency level of the verdict, the set's median time to first token against the
    baseline's (``records``' medians of ``ttft_s``: no test, a direction), its change at each
    other concurrency level measured (``levels``; "loses" where it is slower there), and why
    TTFT/TPOT are empty when the server sent its tokens in bursts
    (``TrialRecord.timing_measurable``). Only the last for a decision that recommends no set."""
    ok = [r for r in records if r.ok and r.kind.relaunched]
    out = []
    key = decision.key if decision.recommends else None
    if key is not None:
        judged = levels.judged_level if levels is not None else 1
        on = metric_words if judged == 1 else f"aggregate output tok/s at {judged} concurrent streams"
        out.append(f"Judged on {on}" + (" (one stream, the probe's prompt)" if judged == 1 else "") + ".")
        base = _median([r.ttft_s for r in ok if r.kind is Kind.BASELINE])
        mine = _median([r.ttft_s for r in ok if r.kind is not Kind.BASELINE and r.set_key == key])
        if math.isfinite(base) and math.isfinite(mine):
            change = (mine / base - 1.0) * 100
            out.append(f"Time to first token: {mine * 1000:.0f} ms against {base * 1000:.0f} ms untuned "
                       f"({change:+.0f} %, medians{', it loses TTFT' if change > 5 else ''}).")
        for c in levels.levels if levels is not None else ():
            v = levels.verdicts[c].get(key) if levels is not None and c != judged else None
            if v is None:
                continue
            where = "one stream" if c == 1 else f"C={c}"
            what = ("it loses throughput there" if v.slower else "faster there too" if v.faster
                    else "no difference there")
            out.append(f"At {where}: {v.gain_pct:+.1f} % ({what}).")
    burst = [r for r in ok if not r.timing_measurable]
    if burst:
        out.append(f"TTFT and TPOT are left empty for {_n(len(burst), 'relaunch', 'relaunches')}: the server sent "
                   "its tokens in a burst, so the time of each token cannot be read (tok/s over the whole answer stays right).")
    return tuple(out)


def _check_launches(trials: int) -> tuple[int, int]:
    """(set launches, baseline launches) of ``nccl-tune check --trials trials``: baseline, set,
    set, baseline, then set, set, baseline (every third a baseline, the last one too)."""
    order = [i % 3 == 0 for i in range(trials)]
    order[-1] = True
    return order.count(False), order.count(True)


def confirm_command(j: Judgement, key: str, info: StudyInfo, records: Sequence[TrialRecord] = (),
                    study: str = "") -> str | None:
    """The ``nccl-tune check`` that sees set ``key``'s measured gain with 80 % power (its
    bracketed design, one-sided at :data:`tuner.judging.CONFIRM_ALPHA`, the launch noise of
    ``j``; :func:`tuner.judging.stats.min_detectable_effect`), with its relaunches and, when
    ``records`` time them, about how long it takes; None when no check of up to
    :data:`MAX_CHECK_TRIALS` relaunches would, or the noise is not known. ``study``: the
    study's name (``--against``, its launch noise; left out when empty)."""
    s = j.sets[key]
    c = s.comparison
    runs = j.runs_per_launch()
    if j.noise is None or c is None or runs < 2 or not c.ratio > 1.0:
        return None
    run_sigma, _ = stats.run_noise(j.baseline_launches, scale=j.run_scale if math.isfinite(j.run_scale) else None)
    gain = c.ratio - 1.0
    for trials in range(4, MAX_CHECK_TRIALS + 1):
        n_set, n_base = _check_launches(trials)
        need = stats.min_detectable_effect(run_sigma=run_sigma, noise=j.noise, runs_per_launch=runs,
                                           baseline_launches=n_base, trial_launches=n_set, min_effect=0.0,
                                           alpha=2.0 * CONFIRM_ALPHA)
        if need <= gain:
            break
    else:
        return None
    argv = ["nccl-tune", "check", info.config_path or "CONFIG", "--trials", str(trials), *_against(info, study),
            "--set", *(f"{k}={v}" for k, v in s.env.items()), *(["--", *s.flags] if s.flags else [])]
    walls = [r.wall_s for r in records if r.ok and r.wall_s]
    took = f", about {_duration(trials * sum(walls) / len(walls))}" if walls else ""
    return f"`{shlex.join(argv)}` ({trials} relaunches{took})"


def _against(info: StudyInfo, study: str) -> list[str]:
    """``--against STUDY`` and where it is stored: ``--results`` for the default SQLite file
    outside ``results/``, else ``--storage`` (the stored hint, password hidden)."""
    if not study:
        return []
    hint = info.storage_hint
    tail = f"/{study}/study.db"
    if hint.startswith("sqlite:///") and hint.endswith(tail):
        root = hint[len("sqlite:///"):-len(tail)]
        return ["--against", study] + (["--results", root] if root not in ("results", "./results") else [])
    return ["--against", study] + (["--storage", hint] if hint else [])


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
