"""The report in words: the verdict paragraph, export lines, the tables, the sections, the terminal.

Everything here reads a :func:`tuner.report.frame.trials_frame`, the judgement it was judged by
(or its :class:`tuner.report.story.Story`) and a :class:`tuner.record.StudyInfo`; nothing is
measured or judged again. The ``*_section`` functions word one section of the report as
:class:`tuner.report.model.Section` blocks (report.md and report.html render them);
:func:`print_results` is the terminal's renderer of the :class:`tuner.report.model.NightReport`.
The console table is a ``rich.table.Table``; when the output is not a terminal (piped, CI, a
log file) its rows are written whole, one line each, so ``grep`` sees every row.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.judging import CONFIRM_ALPHA, Judgement, LevelJudgement, SetJudgement, gain_pct, stats
from tuner.plaintext import plain_table
from tuner.record import Kind, Metric, Status, StudyInfo, Verdict, set_key
from tuner.redaction import redact_argv
from tuner.report.frame import backend_text, judged_order, launched_text, set_text, unlaunched_words, verdict_text
from tuner.report.model import Block, NightReport, Section, table_block
from tuner.report.story import Story
from tuner.servers import BACKEND_SERVERS, KINDS, kind_named, kind_of
from tuner.triage import P2pHealth, Triage

__all__ = [
    "CONSOLE_COLUMNS",
    "closing_blocks",
    "confirmed_row",
    "console_table",
    "export_lines",
    "failed_section",
    "levels_section",
    "not_measured_section",
    "note_lines",
    "p2p_section",
    "print_results",
    "summary_table",
    "triage_section",
    "use_lines",
    "verdict_paragraph",
]

#: Columns of the console table, in order.
CONSOLE_COLUMNS: tuple[str, ...] = ("trial", "kind", "status", "tok/s", "vs base", "95% CI", "verdict", "env")
_RIGHT = frozenset({"trial", "tok/s", "vs base"})
_FOLDS = frozenset({"verdict", "env"})
_CAUSE_CHARS = 40


def tp_size(command: Sequence[str] | None) -> str | None:
    """The tensor-parallel size the server command passes (``--tensor-parallel-size 8``,
    ``--tp 8``, ``--tp=8``), read by the kind the command runs, else by any kind's option; None
    when it passes none."""
    argv = list(command or [])
    kinds = [kind_of(argv), *KINDS]
    return next((str(size) for kind in kinds if (size := kind.tp_size(argv)) is not None), None)


def _here_relative(argv: Sequence[str]) -> list[str]:
    """``argv`` with each absolute path inside the current directory written relative to it
    (``./x`` for a program in it), as the user would type it there."""
    here = Path.cwd()
    out = []
    for i, arg in enumerate(argv):
        path = Path(arg)
        if path.is_absolute() and path.is_relative_to(here) and path != here:
            rel = str(path.relative_to(here))
            arg = f"./{rel}" if i == 0 and "/" not in rel else rel  # a bare name would be looked up on PATH
        out.append(arg)
    return out


def export_lines(env: dict[str, str], command: Sequence[str] | None = None, flags: Sequence[str] = ()) -> list[str]:
    """Ready-to-paste lines for the set ``env`` with server ``flags``: a shell ``export`` (when
    the set has variables), launch snippets of the servers with backend switches (each kind's
    ``launch_line``) with the server command's own
    tensor-parallel size (``TP`` when it names none), and ``command`` (the study's server argv)
    under ``env`` when given, its paths inside the current directory relative to it. A set's
    ``flags`` (``--disable-custom-all-reduce``) are appended to every launch line, and with
    flags only the snippet of the server ``command`` names is given (a flag is one server's), as
    with a server's own variable (``VLLM_*``: only that server's snippet); a variable the server
    overwrites itself (its kind's ``nccl_overrides``) is noted on its line. A secret the command
    passes is ``***`` (:func:`tuner.redaction.redact_argv`, again: a study stored before may hold one)."""
    flags = list(flags)
    if not env and not flags:
        return ["# the untuned baseline: unset every NCCL_* variable"]
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    pre = f"{assigns} " if env else ""
    post = f" {shlex.join(flags)}" if flags else ""
    tp = tp_size(command) or "TP"
    kinds = [kind_named(name) for name in BACKEND_SERVERS]
    own = {kind.name for kind in kinds for k in env if kind.owns_variable(k)}
    named = kind_of(command or ()).name
    server = next(iter(own)) if len(own) == 1 else (named if flags and named in BACKEND_SERVERS else None)
    lines = [f"export {assigns}"] if env else []
    for kind in kinds:
        if server in (None, kind.name) and kind.launch_line:
            overridden = [k for k in env if k in kind.nccl_overrides]
            note = f"   # note: {kind.title} overrides {', '.join(overridden)}" if overridden else ""
            lines.append(kind.launch_line.format(env=pre, tp=tp, flags=post) + note)
    if command:
        lines.append(("env " + pre if env else "") + shlex.join(_here_relative(redact_argv(command))) + post)
    return lines


def note_lines(env: dict[str, str], notes: dict[str, str]) -> list[str]:
    """The space file's note on each variable of ``env`` that has one, as shell comments: what
    the file says about a set before it is adopted (a risk, say)."""
    return [f"# {name} (search space note): {notes[name]}" for name in env if notes.get(name)]


def _not_retried(df: pd.DataFrame) -> int:
    """Interrupted relaunches no later trial re-measured (a later measured baseline re-measures
    an interrupted baseline)."""
    retried = set(df["retry_of_trial"].dropna().astype(int))
    lost = df[(df["status"] == Status.INTERRUPTED) & df["retried_by_trial"].isna() & ~df["trial"].isin(retried)]
    # an interrupted baseline is re-measured by any later baseline that was measured
    later_base = df[(df["kind"] == Kind.BASELINE) & (df["status"] == Status.OK)]["trial"]
    last_base = int(later_base.max()) if not later_base.empty else -1
    lost = lost[~((lost["kind"] == Kind.BASELINE) & (lost["trial"] < last_base))]
    return len(lost)


def _n(count: int, word: str, plural: str | None = None) -> str:
    """``1 relaunch``, ``2 relaunches``: a count with its word in the right number."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _pct(c: stats.Comparison | None) -> str:
    return f"{c.gain_pct:+.1f} %" if c is not None else "?"


def _ci(c: stats.Comparison | None, level: str = "95 %") -> str:
    if c is None or math.isnan(c.ci_low):
        return f"{level} CI not available"
    return f"{level} CI {gain_pct(c.ci_low):+.1f}..{gain_pct(c.ci_high):+.1f} %"


def _named(sets: list[SetJudgement], j: Judgement) -> str:
    return ", ".join(f"{set_text(s.env, s.flags)} (trial {s.first_trial}, "
                     f"{_pct(s.comparison)})" for s in sets if s.comparison is not None)


def confirmed_row(df: pd.DataFrame, judgement: Judgement | None) -> pd.Series | None:
    """The last confirmation relaunch of the set the verdict recommends, or None: the
    ``judgement``'s winner when its gain held on fresh launches (:attr:`Judgement.confirmed`),
    at the level "use it" rests on (``probe.judge_concurrency``). Never a row picked by its
    place: two finalists can both hold, and the verdict names the one with the higher ratio."""
    if judgement is None or judgement.winner is None or judgement.confirmed is not True:
        return None
    key = judgement.winner
    rows = df[(df["kind"] == Kind.CONFIRM)
              & pd.Series([set_key(e, f) == key for e, f in zip(df["env"], df["flags"], strict=True)],
                          index=df.index, dtype=bool)]
    return None if rows.empty else rows.iloc[-1]


def use_lines(use: pd.Series | None, info: StudyInfo) -> list[str]:
    """The "Use the best set" lines of the set whose gain held (``use``, its
    :func:`confirmed_row`): its export lines with the study's server command, then the space
    file's notes on its variables; none when no set held."""
    if use is None:
        return []
    nodes = info.topology.nnodes if info.topology is not None else 1
    every = ([f"# a server across {nodes} nodes: the same set on every node (each node's command, the head's and "
              "the others')"] if nodes > 1 and (use["env"] or use["flags"]) else [])
    return [*export_lines(use["env"], info.server_command, use["flags"] or ()), *every,
            *note_lines(use["env"], info.space_notes)]


def verdict_paragraph(df: pd.DataFrame, info: StudyInfo, *, min_effect: float | None = None,
                      judgement: Judgement | None = None, levels: LevelJudgement | None = None) -> str:
    """One paragraph a person can act on, claiming only what was measured: the baseline and the
    launch-to-launch noise, the headline about the best of the K sets tried (Bonferroni) and
    its confirmation, every other set with a significant verdict, the smallest gain this design
    detects, failures, token counts that are guesses, the target.

    ``df``: a :func:`tuner.report.frame.trials_frame`; ``judgement``: the
    :func:`tuner.judging.judge.judge` it was built from (recomputed from ``df``'s rows when None is
    given is not possible, so pass it; without it only the baseline sentence is written); the
    metric named is the judgement's.
    ``min_effect`` (fraction): the judging threshold (default ``info.min_effect``, else
    :data:`tuner.judging.stats.DEFAULT_MIN_EFFECT`). ``levels``: the night judged per
    concurrency level (:func:`tuner.judging.levels.judge_levels`); ``judgement`` is then its
    headline (the level ``probe.judge_concurrency`` names), and its sentences (that level, the
    sets that flip with concurrency) follow the sets'.
    """
    if min_effect is None:
        min_effect = info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT
    target = info.target
    j = judgement
    if j is None or not j.baseline_launches:
        return "The untuned baseline has no successful measurement yet, so no trial can be judged."
    at_level = levels.judged_level if levels is not None else 1
    what = j.metric.described if at_level == 1 else f"aggregate output tok/s at C={at_level}"
    base_level = j.baseline_level
    k_base = len(j.baseline_launches)
    runs = sum(len(b) for b in j.baseline_launches)
    # The level every ratio uses (stats.level), not a row's median: said so, or they seem to disagree.
    over = (f"{_n(runs, 'run')} over {_n(k_base, 'launch', 'launches')}" if at_level == 1 else
            f"{_n(k_base, 'launch', 'launches')}, one value each")
    row = "its launch's median" if at_level == 1 else "its single-stream median"
    trend = (f", fitted {j.drift_trend * 100:+.1f} % over the night; each set is compared with the baseline "
             "interpolated at its own launch" if k_base > 1 else "")
    parts = [f"Baseline: {base_level:.1f} {what} (robust level of {over}"
             + (f", drift {j.drift * 100:.1f} %" if k_base > 1 else "") + trend + f"; a row's tok/s is {row})."]
    behind = sorted({unlaunched_words(r) for _, r in df[df["kind"] == "baseline"].iterrows()} - {""})
    if behind:  # every gain below is against this baseline, not NCCL's defaults
        parts.insert(0, f"Not untuned: the baseline ran with {'; '.join(behind)}, set behind nccl-tune's back "
                        "(see \"Proof that each set reached NCCL\"); every gain below is measured against that, not "
                        "against NCCL's defaults.")
    if j.noise is not None:
        parts.append(f"Every interval includes the {j.noise.describe()}.")
    if j.noise_warning:
        parts.append(f"Warning: {j.noise_warning}.")
    if j.inconclusive:
        parts.append(f"Inconclusive: {j.inconclusive}.")
    if j.forced:
        parts.append(f"NCCL variables cannot change the speed on this night ({j.forced}): every set shows its "
                     "measured ratio only.")
    if info.target_met_untuned and target is not None:
        parts.append(f"The target of {target:g} tok/s is already met by the untuned server (CI lower bound); "
                     "no tuned relaunch was spent. Keep the defaults.")
        return " ".join(parts)
    settled = df[~df["status"].isin([Status.INTERRUPTED, Status.RUNNING])]
    tuned = settled["kind"] != Kind.BASELINE
    machine = int((tuned & (settled["status"] == Status.MACHINE_FAULT)).sum())
    tried = int(tuned.sum()) - machine  # a machine's failure is no set's: not a tuned relaunch tried
    failed = int((tuned & ~settled["status"].isin([Status.OK, Status.MACHINE_FAULT])).sum())
    judged = [s for s in j.sets.values() if s.comparison is not None and not s.not_applied and not s.cannot_act]
    if machine:
        parts.append(f"The machine failed {_n(machine, 'tuned relaunch', 'tuned relaunches')} (machine_fault: a "
                     "failure that was not the set's, the untuned baseline failing too or not yet relaunched to "
                     "check): no verdict on those sets; run the same command again to resume them.")
    if not judged:
        unapplied = sum(1 for s in j.sets.values() if s.not_applied)
        if tried == 0:
            parts.append("Only the baseline was measured: no tuned set to judge yet.")
        else:
            parts.append(f"No tuned set could be judged on speed ({failed} of {tried} failed"
                         + (f", {unapplied} not applied by NCCL" if unapplied else "")
                         + ("): keep the defaults." if not machine else "): nothing to adopt yet."))
    elif not j.inconclusive:
        parts += _headline(j, judged, min_effect, _pending(info))
    if levels is not None:
        parts += levels.sentences()
    cannot = [s for s in j.sets.values() if s.cannot_act and not s.not_applied]
    if cannot and not j.forced:
        by_reason: dict[str, list] = {}
        for s in cannot:
            by_reason.setdefault(s.cannot_act, []).append(s)
        for why, sets in by_reason.items():
            parts.append(f"No speed verdict, measured ratio only ({why}): " + "; ".join(
                f"{set_text(s.env, s.flags)} (trial {s.first_trial}, {_pct(s.comparison)})" for s in sets) + ".")
    elif cannot:
        parts.append(f"Measured: {_named(cannot, j)}.")
    gain = j.recommendable_gain()
    per_launch = _n(j.runs_per_launch(), 'run') if at_level == 1 else "one value"
    if math.isfinite(gain) and j.noise is not None:
        parts.append(f"With {per_launch} per launch, the smallest gain this night could recommend "
                     f"(80 % power) is about {gain * 100:.1f} %, assuming launch noise {j.noise.sigma * 100:.1f} %.")
    if j.low:
        shown = ", ".join(f"trial {t} run {n} ({gain_pct(ratio):+.0f} %)" for t, n, ratio in j.low[:5])
        more = f" and {len(j.low) - 5} more" if len(j.low) > 5 else ""
        parts.append(f"Runs far below their launch (left out of the run noise; the launch levels resist them): "
                     f"{shown}{more}.")
    not_applied = [s for s in j.sets.values() if s.not_applied]
    if not_applied:
        parts.append("No speed verdict for " + "; ".join(
            f"trial {s.first_trial} ({set_text(s.env, s.flags)}): {_unapplied(s)}" for s in not_applied) + ".")
    if failed:
        parts.append(f"{failed} of {_n(tried, 'tuned relaunch', 'tuned relaunches')} failed (see status and cause).")
    guessed = df[(df["status"] == Status.OK) & df["tokens_counted"]]
    if not guessed.empty:
        trials = ", ".join(str(int(t)) for t in guessed["trial"])
        parts.append(f"The server sent no token count (usage) for trial{'s' if len(guessed) > 1 else ''} {trials}: "
                     "their tok/s counts chunks and is a lower bound.")
    notes = _probe_notes(df)
    if notes:
        parts.append("How the probe measured: " + " ".join(f"{n[0].upper()}{n[1:]}." for n in notes))
    lost = _not_retried(df)
    if lost > 0:
        parts.append(f"{_n(lost, 'interrupted relaunch', 'interrupted relaunches')} not re-measured yet: "
                     "run the same command again to finish.")
    if info.final_baseline_skipped:
        parts.append(f"The final baseline re-measure (the drift check) was skipped: {info.final_baseline_skipped}.")
    if target is not None:
        reached = info.target_reached_by
        parts.append(f"Target {target:g} tok/s: " + (f"reached by trial {reached}." if reached is not None
                     else "not reached within the budget."))
    return " ".join(parts)


def _probe_notes(df: pd.DataFrame) -> list[str]:
    """Each probe note of the night once, in the order first met (``TrialRecord.probe_notes``);
    a note that differs only in its numbers is said once."""
    if "probe_notes" not in df.columns:
        return []
    seen: dict[str, str] = {}
    for notes in df["probe_notes"]:
        for note in notes if isinstance(notes, list) else []:
            seen.setdefault(re.sub(r"\d+(?:\.\d+)?", "#", str(note)), str(note))
    return list(seen.values())


def _unapplied(s: SetJudgement) -> str:
    """What of ``s`` was not applied: the NCCL variables NCCL did not apply, and its backend
    choice with the server's words (``the server did not apply vllm-flashinfer: vllm logged
    "..."``)."""
    nccl = sorted(n for n in s.not_applied if n != s.backend_choice)
    parts = [f"NCCL did not apply {', '.join(nccl)}"] if nccl else []
    if s.backend_choice in s.not_applied:
        parts.append(f"the server did not apply {s.backend_choice}: {s.not_applied[s.backend_choice]}")
    return "; ".join(parts)


def _slower_named(sets: list[SetJudgement], j: Judgement) -> str:
    """The slower sets, each marked "one launch" when that is all it rests on."""
    return ", ".join(f"{set_text(s.env, s.flags)} (trial {s.first_trial}, "
                     f"{_pct(s.comparison)}{', one launch' if len(s.launches) < 2 else ''})"
                     for s in sets if s.comparison is not None)


def _pending(info: StudyInfo) -> str:
    """Why the best set is not confirmed yet and what the next run makes first, as the last
    sweep stored them (``(why); do not adopt it before it is: next``), or the plain advice."""
    why = info.confirm_skipped or ("its fresh baseline, the final baseline re-measure, was not made"
                                   if info.final_baseline_skipped else "")
    return ((f" ({why})" if why else "") + "; do not adopt it before it is"
            + (f": {info.next_run}" if info.next_run else " (run the same command again)"))


def _headline(j: Judgement, judged: list[SetJudgement], min_effect: float, pending: str = "") -> list[str]:
    """The sentences about the sets: the best finalist and the claim on its fresh launches
    (``pending``: why it is not confirmed yet and what the next run does, :func:`_pending`),
    then every set with a significant verdict of its own."""
    k = len(judged)
    parts: list[str] = []
    by = {v: [s for s in judged if s.verdict is v] for v in Verdict}
    if j.winner is not None and j.winner_comparison is not None:
        s = j.sets[j.winner]
        m = j.confirm_design()[0]  # the claim's level is fixed before the night (tuner.judging.judge._confirm)
        level = f"{(1 - CONFIRM_ALPHA / m) * 100:.2f}".rstrip("0").rstrip(".") + " %"
        claim = (f"Best set: {set_text(s.env, s.flags)} (trial {s.first_trial}), {_pct(j.winner_comparison)} "
                 f"({_ci(j.winner_comparison)} on its {_n(len(s.launches), 'launch', 'launches')}, "
                 f"the best of the {_n(k, 'set')} tried)")
        fresh = (f"{_pct(s.confirmation)} on those alone, one-sided {level} bound"
                 + (f", corrected for up to {m} finalists" if m > 1 else ""))
        if j.confirmed is True:
            parts.append(f"{claim}: the gain held on a fresh relaunch of the set and of the baseline ({fresh} above 1). "
                         "Use it.")
        elif j.confirmed is False:
            assert s.confirmation is not None
            why = s.confirmation.note.split(", but ", 1)
            if s.soak_failed and len(why) > 1:
                parts.append(f"{claim} looked best and its gain held on a fresh relaunch of the set and of the "
                             f"baseline ({fresh}), but {why[1]}: it is not recommended.")
            elif len(why) == 1 and s.confirmation.ratio > 1.0:
                parts.append(f"{claim} looked best, but it was not confirmed: on a fresh relaunch of the set and of "
                             f"the baseline it measured {fresh} not above 1, so this night cannot tell it from "
                             "noise.")
            else:
                parts.append(f"{claim} looked best, but it failed confirmation: on a fresh relaunch of the set and "
                             f"of the baseline the gain did not hold ({fresh} not above 1"
                             + (f"; {why[1]}" if len(why) > 1 else "") + ").")
        else:
            parts.append(f"{claim}: not yet confirmed by a fresh relaunch of the set and of the baseline"
                         + (pending or "; do not adopt it before it is (run the same command again)") + ".")
    faster = [s for s in by[Verdict.FASTER] if s.key != j.winner]
    if faster:
        parts.append(f"{'Also faster' if j.winner else 'Faster'} than the baseline (95 % interval, each on its own), "
                     f"not confirmed: {_named(faster, j)}.")
    below = by[Verdict.FASTER_BELOW_MIN] + by[Verdict.SLOWER_BELOW_MIN]
    if below:
        parts.append(f"Different from the baseline, but by less than the {min_effect * 100:g} % that matters: "
                     f"{_named(below, j)}.")
    if by[Verdict.INCONCLUSIVE]:
        parts.append(f"Inconclusive (the baseline drifted {j.drift * 100:.1f} %, as much as the gain): "
                     f"{_named(by[Verdict.INCONCLUSIVE], j)}.")
    failed_conf = [s for s in by[Verdict.FAILED_CONFIRMATION] if s.key != j.winner]
    if failed_conf:
        parts.append(f"Failed confirmation: {_named(failed_conf, j)}.")
    slower = by[Verdict.SLOWER]
    unjudged = [s for s in j.sets.values() if s.comparison is not None and s not in judged]
    if slower and len(slower) == k:
        every = ("Every tuned set" if not unjudged else
                 f"Every set with a speed verdict ({k} of {k + len(unjudged)}; the others were not applied or cannot "
                 "act here)")
        parts.append(f"{every} was slower than the baseline: {_slower_named(slower, j)}. Keep the defaults.")
    elif slower:
        parts.append(f"Slower: {_slower_named(slower, j)}.")
    if j.winner is None and not faster and len(slower) < k:
        best = max(judged, key=lambda s: s.comparison.ratio if s.comparison else 0.0)
        worst = min(judged, key=lambda s: s.comparison.ratio if s.comparison else 0.0)
        beyond = f"the noise and the {min_effect * 100:g} % that matters" if below else "the noise"
        sentence = (f"No set beat the baseline by more than {beyond}: the best, {set_text(best.env, best.flags)} "
                    f"(trial {best.first_trial}), measured {_pct(best.comparison)} ({_ci(best.comparison)})")
        if worst is not best and worst.comparison is not None and worst.comparison.ratio < 1:
            # "loss" only for a set judged slower; a dip inside the noise is named as the lowest.
            sentence += (f"; the largest loss was {set_text(worst.env, worst.flags)} (trial {worst.first_trial}), {_pct(worst.comparison)}"
                         if worst in slower else
                         f"; the lowest, {set_text(worst.env, worst.flags)} (trial {worst.first_trial}), measured "
                         f"{_pct(worst.comparison)}, "
                         + (f"below the {min_effect * 100:g} % that matters" if worst in by[Verdict.SLOWER_BELOW_MIN]
                            else "also within the noise"))
        parts.append(sentence + ". Keep the defaults.")
    return parts


def _level_cell(lj: LevelJudgement, level: int, key: str, min_effect: float) -> str:
    v = lj.verdicts[level].get(key)
    if v is None:
        return "-"
    return f"{v.gain_pct:+.1f} % {stats.verdict_words(v.verdict, min_effect)}"


def levels_section(lj: LevelJudgement, *, min_effect: float = stats.DEFAULT_MIN_EFFECT) -> Section | None:
    """The "Per concurrency level" section: one row per set, one column per level judged (C=1
    the single-stream probe, then ``probe.concurrency``), each cell the set's change against the
    baseline at that level and its verdict at the Bonferroni-over-levels confidence
    (:attr:`tuner.judging.levels.LevelJudgement.confidence`), the baseline's level (tok/s)
    first, then the sets that flip. None for a night that measured no level beyond the single
    stream."""
    if not lj.several:
        return None
    cols = [f"C={c}" for c in lj.levels]
    base = {"set": "baseline (tok/s)"}
    for c, col in zip(lj.levels, cols, strict=True):
        level_c = lj.judgements[c].baseline_level
        base[col] = f"{level_c:.1f}" if math.isfinite(level_c) else "-"
    rows = [base] + [{"set": label, **{col: _level_cell(lj, c, key, min_effect)
                                       for c, col in zip(lj.levels, cols, strict=True)}}
                     for key, label in lj.labels.items()]
    conf = f"{lj.confidence * 100:.2f}".rstrip("0").rstrip(".")
    blocks = [Block("paragraph", f"Each level judged with the same model as the single-stream probe; verdicts at "
                    f"{conf} % (95 % over the {len(lj.levels)} levels, Bonferroni). C=1 is the single-stream probe on "
                    f"{lj.metric.words}; above it a launch has one value, its aggregate output tok/s, so its noise is "
                    f"all launch noise. \"Use it\" rests on C={lj.judged_level} (probe.judge_concurrency)"
                    + ("; the trials table above is the single stream's." if lj.judged_level != 1 else ".")),
              table_block(pd.DataFrame(rows, columns=["set", *cols]))]
    flips = [f.sentence() for f in lj.flips()]
    if flips:
        blocks.append(Block("list", items=tuple(flips)))
    return Section("per-concurrency-level", "Per concurrency level", tuple(blocks))


def _console_row(r: pd.Series, min_effect: float, metric: Metric) -> list[str]:
    ok = r["status"] == Status.OK
    has_ratio = ok and not math.isnan(r["vs_baseline"])
    value = r[metric.value]
    kept = ok or Status(r["status"]).gated  # a gate failed it after its probe: its tok/s were measured
    return [str(int(r["trial"])), str(r["kind"]), str(r["status"]),
            f"{value:.1f}" if kept and not math.isnan(value) else "-",
            f"{r['vs_baseline']:.3f}" if has_ratio else "-",
            f"{r['vs_baseline_ci_low']:.3f}..{r['vs_baseline_ci_high']:.3f}" if has_ratio else "",
            verdict_text(r, min_effect) if ok else r["cause"][:_CAUSE_CHARS],
            launched_text(r)]


def console_table(df: pd.DataFrame, story: Story, *, metric: Metric,
                  min_effect: float = stats.DEFAULT_MIN_EFFECT) -> Table:
    """The end-of-sweep table: one row per relaunch in the order of ``story``, the judgement
    (the forest plot's, :func:`tuner.report.frame.judged_order`: the baseline's launches, then
    the sets best first, failed last), columns :data:`CONSOLE_COLUMNS`: ``metric`` (the study's tok/s), ratio to the
    baseline with its 95 % CI, the verdict (with its note) for measured rows and the cause for
    failed ones, the set."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for col in CONSOLE_COLUMNS:  # on a narrow terminal only the verdict and the set fold
        table.add_column(col, justify="right" if col in _RIGHT else "left", no_wrap=col not in _FOLDS,
                         overflow="fold")  # never an ellipsis: a cut value could be pasted
    for _, r in judged_order(df, story).iterrows():
        table.add_row(*(Text(cell) for cell in _console_row(r, min_effect, metric)))  # Text: no markup in causes or values
    return table


def print_results(night: NightReport, verdict: str, info: StudyInfo, console: Console | None = None) -> None:
    """Print ``night`` (:func:`tuner.report.build.night_report`) to the terminal: each part's
    console table (on the study's metric, ``info.metric``), the ``verdict`` text (as
    :func:`tuner.report.outputs.write_outputs` returned it) and, for each part whose best set's
    gain held, its ready-to-paste "Use it:" lines (:func:`export_lines`); then each gate that
    blocks P2P on the host (:func:`_p2p_gate_lines`).

    ``console``: where to print (default: stdout). On a terminal rich lays the table out to its
    width; elsewhere every row is written whole on one line.
    """
    console = console or Console()
    min_effect = info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT
    parts = [p for p in night.parts if not p.trials.empty]
    for k, part in enumerate(parts, 1):
        if len(parts) > 1:
            console.out(f"{chr(10) if k > 1 else ''}Host type {k}: {part.host_type or '(not recorded)'}",
                        highlight=False)
        table = console_table(part.trials, part.story, min_effect=min_effect, metric=info.metric)
        if console.is_terminal:
            console.print(table)
        else:
            console.out(plain_table(table), highlight=False)
    console.out("")
    console.out(verdict, highlight=False)
    for k, part in enumerate(parts, 1):
        if part.use:
            console.out(f"\nUse it{f' on host type {k}' if len(parts) > 1 else ''}:", highlight=False)
            for line in part.use:
                console.out(f"  {line}", highlight=False)
    gates = _p2p_gate_lines(info)
    if gates:  # what on the host blocks P2P, said where a user looks (report.md has the section whole)
        console.out("", highlight=False)
        for line in gates:
            console.out(line, highlight=False)


# -- tables and sections ---------------------------------------------------------------------

def summary_table(df: pd.DataFrame, story: Story, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The trials of ``df`` in the order of ``story``, the judgement (:func:`tuner.report.frame.judged_order`,
    as the console table and the forest plot), for report.md: ``columns`` (default:
    trial, kind, status, output_tok_s, the ratio and its CI, verdict with its note, load_s, then
    warmup_s when a launch warmed up 2 s or more behind a green health check, ``backend`` when a
    row's log named the allreduce backend or its set names a backend choice
    (:func:`tuner.report.frame.backend_text`: which backend the row ran), env as ``NAME=value``
    words and the set's server flags after them)."""
    cols = list(columns or ["trial", "kind", "status", "output_tok_s", "vs_baseline", "vs_baseline_ci_low",
                            "vs_baseline_ci_high", "verdict", "load_s", "env"])
    if columns is None and "warmup_s" in df and (pd.to_numeric(df["warmup_s"], errors="coerce") >= 2).any():
        cols.insert(cols.index("load_s") + 1, "warmup_s")  # a warm-up behind a green health check, part of load_s
    ordered = judged_order(df, story)
    backend = [backend_text(r) for _, r in ordered.iterrows()]
    if columns is None and any(backend):
        cols.insert(cols.index("env"), "backend")
    out = ordered[[c for c in cols if c != "backend"]].copy()
    if "verdict" in cols:
        out["verdict"] = [verdict_text(r) for _, r in ordered.iterrows()]
    if "env" in cols:
        out["env"] = [launched_text(r) for _, r in ordered.iterrows()]  # with what NCCL read behind our back
    if "backend" in cols:
        out["backend"] = backend
    return out[cols]


def triage_section(info: StudyInfo) -> Section | None:
    """The "NCCL's model of the machine" section: the stored triage's lines, across nodes each
    cross-node pair's transport among them (None for a study judged before the triage existed, so
    an older study's report is unchanged)."""
    if not info.triage:
        return None
    judged = Triage.from_dict(info.triage)
    title = "NCCL's model of the machine" + (" and its network across nodes" if judged.network else "")
    return Section("machine", title, (Block("list", items=tuple(judged.lines())),))


def p2p_section(info: StudyInfo) -> Section | None:
    """The "P2P health" section: each gate that blocks GPU P2P on the night's host, with its
    documented fix (or the clean line), NCCL's own P2P check and what was not readable
    (:class:`tuner.triage.P2pHealth`; None for a study judged before it was read)."""
    if not info.p2p_health:
        return None
    return Section("p2p", "P2P health", (Block("list", items=tuple(P2pHealth.from_dict(info.p2p_health).lines())),))


def _p2p_gate_lines(info: StudyInfo) -> list[str]:
    """The terminal's P2P lines: each gate that blocks P2P, one line each (empty when none was found)."""
    if not info.p2p_health:
        return []
    return [line for line in P2pHealth.from_dict(info.p2p_health).lines() if line.startswith("P2P gate")]


def failed_section(df: pd.DataFrame, *, host_type: bool = False) -> Section | None:
    """The "Failed trials" section: one row per failed relaunch of ``df`` (a trials frame, by
    trial) with its status, cause, set and log (and host type when ``host_type``); None when
    none failed."""
    failed = df[df["status"].map(lambda s: Status(s).failed)]
    if failed.empty:
        return None
    cols = ["trial", "status", "cause", "env", "log"] + (["host_type"] if host_type else [])
    return Section("failed", "Failed trials", (table_block(failed, cols),))


def closing_blocks(info: StudyInfo) -> tuple[Block, ...]:
    """The report's last words: why the sweep stopped (when stored) and how to open the study
    in optuna-dashboard."""
    stopped = [Block("paragraph", f"Sweep stopped: {info.stop_reason}.")] if info.stop_reason else []
    return (*stopped, Block("paragraph", "Open the study in optuna-dashboard: `optuna-dashboard "
                            + (info.storage_hint or "sqlite:///results/<study>/study.db") + "`"))


def not_measured_section(skipped: pd.DataFrame) -> Section | None:
    """The "Sets not measured" section from a :func:`tuner.report.frame.skipped_frame`:
    one row per set recorded without a launch, with its trial, its name (a preset's, a screened
    or triage set's; ``(sampler)`` for a proposal), its variables, why (to NCCL the same set as a
    measured one, or one NCCL would reject, that cannot run or is unsafe on this machine, or that
    the screen refused) and the set it equals; None when there is none."""
    if skipped.empty:
        return None
    table = pd.DataFrame({"trial": skipped["trial"], "name": [p or "(sampler)" for p in skipped["preset"]],
                          "variables": [set_text(e, f) for e, f in zip(skipped["env"], skipped["flags"], strict=True)],
                          "why": skipped["cause"], "equal to": skipped["verdict_note"]})
    return Section("not-measured", "Sets not measured", (
        Block("paragraph", "Recorded without a launch, so no relaunch of the budget was spent on them (every runner "
                           "of the study, a resume and `nccl-tune report` read them from the storage)."),
        table_block(table)))
