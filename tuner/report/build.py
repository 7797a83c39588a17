"""The night's story, built once: a study's records judged and put in one :class:`tuner.report.model.NightReport`.

:func:`night_report` is the one place the report judges: each host type's relaunches on every
concurrency level (:func:`tuner.judging.levels.judge_levels`), the frame of their rows
(:func:`tuner.report.frame.trials_frame`), the :class:`tuner.report.story.Story` of that
judgement, the verdict paragraph and the sections (:mod:`tuner.report.text`,
:mod:`tuner.report.screen`, :mod:`tuner.report.proof`), and the figures (drawn and written as
they are made, :func:`tuner.report.plots.save_figures`). The renderers and the files of
:func:`tuner.report.outputs.write_outputs` read the value it returns.

A new section of the report: a function that words it as a :class:`tuner.report.model.Section`
(in the module of its subject), a field of :class:`tuner.report.model.NightReport` or
:class:`tuner.report.model.Part` filled here, and its place in :mod:`tuner.report.markdown` and
:mod:`tuner.report.page`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from tuner.judging import (
    DEFAULT_MIN_EFFECT,
    SINGLE_STREAM,
    UNKNOWN_TYPE,
    cannot_act_on,
    host_type_groups,
    judge_levels,
    measured_levels,
)
from tuner.record import StudyInfo, TrialRecord
from tuner.report.decision import decide, scope_lines
from tuner.report.frame import combine_frames, skipped_frame, trials_frame
from tuner.report.model import Block, Figure, NightReport, Part, table_block
from tuner.report.proof import proof_section
from tuner.report.screen import save_screen_figure, screen_section
from tuner.report.story import story_of
from tuner.report.text import (
    closing_blocks,
    confirmed_row,
    failed_section,
    levels_section,
    not_measured_section,
    p2p_section,
    summary_table,
    triage_section,
    use_lines,
    verdict_paragraph,
)

__all__ = ["night_report"]


def night_report(records: Sequence[TrialRecord], info: StudyInfo, study_name: str, out_dir: Path, *,
                 min_effect: float, figures: bool = True) -> NightReport:
    """The :class:`tuner.report.model.NightReport` of ``records`` (every trial with a record:
    relaunches, and the sets not launched), its figures written into ``out_dir`` (created if
    needed; a host type's under ``host-type-<k>/`` when there are several).

    The relaunches alone are judged, with ``min_effect`` (fraction) on the study's metric
    (``info.metric``), per host type (:func:`tuner.judging.judge.host_type_groups`), each
    against its own baseline, and at every concurrency level measured: the headline, "Use it"
    and the best set are those of ``info.judge_concurrency``'s level (1, the single-stream
    probe, unless the sweep's ``probe.judge_concurrency`` named another that the records
    measured); the trials table and the figures are the single stream's. The screen's section
    comes with one host type only (its screen.csv read from ``out_dir``). With no relaunch yet
    the one part is empty and no figure is drawn; ``figures=False`` draws none either (the words
    alone, as a script judging many nights wants them). Raises OSError when a figure cannot be
    written.
    """
    if figures:
        out_dir.mkdir(parents=True, exist_ok=True)
    relaunches = [r for r in records if r.kind.relaunched]
    groups = host_type_groups(relaunches) or {UNKNOWN_TYPE: []}
    several = len(groups) > 1
    parts = []
    for k, (host_type, group) in enumerate(groups.items(), 1):
        levels = judge_levels(group, metric=info.metric, min_effect=min_effect,
                              judged_level=_judged_level(group, info.judge_concurrency),
                              cannot_act=cannot_act_on(info, group))
        headline = levels.headline
        # the table, trials.csv and the figures are the single stream's; the verdict is the headline level's
        single = levels.judgements[SINGLE_STREAM]
        df = trials_frame(group, min_effect=min_effect, metric=info.metric, judgement=single)
        story = story_of(single, headline=headline)  # the best set: the headline level's
        paragraph = verdict_paragraph(df, info, min_effect=min_effect, judgement=headline, levels=levels)
        decision = decide(headline, info, records=group, min_effect=min_effect, study=study_name)
        decision = replace(decision, reasons=decision.reasons + scope_lines(
            decision, group, levels=levels, metric_words=info.metric.described))
        use = confirmed_row(df, headline)  # the judgement's winner, never a row's place
        said = pd.Series({"env": dict(decision.env), "flags": list(decision.flags)}) if decision.recommends else None
        verdict = f"{decision.line}.\n{' '.join(decision.reasons)}\n\n{paragraph}".replace("\n\n\n", "\n\n")
        folder = f"host-type-{k}" if several else ""
        svgs: dict[str, str] = {}
        draw = figures and not df.empty
        pngs = [p.name for p in _plots().save_figures(df, story, out_dir / folder, min_effect=min_effect,
                                                     svgs=svgs)] if draw else []
        screen = None
        if not several:
            screen_png = save_screen_figure(info, out_dir, single, svgs=svgs) if draw else None
            if screen_png is not None:
                pngs.append(screen_png)
            screen = screen_section(info, out_dir, single, use=use if not df.empty else None, figure=screen_png)
        drawn = tuple(Figure(Path(name).stem, f"{folder}/{name}" if folder else name, svgs[Path(name).stem])
                      for name in pngs)
        # a type's per-level table is judged at the study's stored minimum effect, as before types were split
        level_effect = _stored_min_effect(info) if several else min_effect
        title = f"Host type {k}: `{host_type or 'not recorded'}`" if several else ""
        parts.append(Part(
            host_type=host_type, title=title, folder=folder, trials=df, story=story, decision=decision,
            details=paragraph,
            verdict=f"Host type {k} ({host_type or 'not recorded'}): {verdict}" if several else verdict,
            use=tuple(use_lines(said, info)), table=table_block(summary_table(df, story)), figures=drawn,
            levels=levels_section(levels, min_effect=level_effect), screen=screen))
    trials = combine_frames([p.trials for p in parts])
    skipped = skipped_frame(records)
    return NightReport(
        study=study_name, parts=tuple(parts), verdict="\n\n".join(p.verdict for p in parts),
        trials=trials, skipped=skipped, closing=_not_drawn(study_name, figures, relaunches) + closing_blocks(info),
        intro=(f"This study was measured on {len(parts)} host types (GPU model and count, server command). Each is "
               "judged against its own baseline launches only; no verdict compares across types.") if several else "",
        triage=triage_section(info), p2p=p2p_section(info), proof=proof_section(relaunches), not_measured=not_measured_section(skipped),
        failed=failed_section(trials, host_type=several))


def _plots():
    """:mod:`tuner.report.plots`, imported when a figure is drawn: it brings matplotlib (about
    0.5 s of a command's start), which a ``--no-figures`` night, ``status`` and ``compare`` skip."""
    from tuner.report import plots

    return plots


def _not_drawn(study_name: str, figures: bool, relaunches: Sequence[TrialRecord]) -> tuple[Block, ...]:
    """The paragraph saying the figures were left out (``--no-figures``) and how to draw them;
    none when they were drawn or there was nothing to draw."""
    if figures or not relaunches:
        return ()
    return (Block("paragraph", "Figures not drawn (`--no-figures`): `nccl-tune report --study "
                               f"{study_name}` draws them from the study."),)


def _stored_min_effect(info: StudyInfo) -> float:
    return info.min_effect if info.min_effect is not None else DEFAULT_MIN_EFFECT


def _judged_level(records: Sequence[TrialRecord], wanted: int) -> int:
    """``wanted`` when some record measured it (or it is 1), else 1: a study whose records
    never held that level (stored before its sweep named it) is judged on the single stream."""
    return wanted if wanted in measured_levels(records) else SINGLE_STREAM
