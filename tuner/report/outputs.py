"""The files of a study's results folder, written in one call: trials.csv, the figures, report.md, report.html."""


from __future__ import annotations

from collections.abc import Sequence
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
from tuner.report.frame import (
    combine_frames,
    skipped_frame,
    trials_frame,
    write_trials_csv,
)
from tuner.report.page import HTML_FILE, PagePart, write_report_html
from tuner.report.plots import save_figures
from tuner.report.proof import proof_markdown
from tuner.report.screen import save_screen_figure, screen_markdown
from tuner.report.story import STORY_ATTR, story_of
from tuner.report.text import (
    USE_KEY,
    HostTypeSection,
    confirmed_row,
    levels_markdown,
    not_measured_markdown,
    report_markdown,
    report_markdown_by_host_type,
    verdict_paragraph,
)

__all__ = ["write_outputs"]


def write_outputs(records: Sequence[TrialRecord], info: StudyInfo, study_name: str, out_dir: Path, *,
                  min_effect: float) -> tuple[pd.DataFrame, str]:
    """Write ``trials.csv``, the figures (PNG and SVG, :func:`tuner.report.plots.save_figures`)
    ``report.md`` and ``report.html`` (the same report in one file, figures inlined,
    :mod:`tuner.report.page`) into ``out_dir`` (created if needed) from ``records`` (every trial with a
    record: relaunches, and the sets not launched), judging the relaunches alone with ``min_effect``
    (fraction) on the study's metric (``info.metric``, :func:`tuner.judging.judge.judge`).
    Returns the frame (:func:`trials_frame`, relaunches only) and the verdict paragraph.
    trials.csv holds that frame's rows and :func:`tuner.report.frame.skipped_frame`'s (one per
    set not measured, with why and the set it equals), report.md lists the latter under "Sets not
    measured". With no relaunch yet, trials.csv has only its header, report.md says so and no
    figure is drawn.

    A study measured on several host types (:func:`tuner.judging.judge.host_type_groups`) is judged per
    type, each against its own baseline: the frame holds every row (its ``host_type`` column
    says which), the verdict is one paragraph per type, each type's figures go to
    ``host-type-<k>/`` and report.md has a section per type (the screen's section, which ranks
    the screen against one type's relaunches, only with one type). Raises OSError when
    ``out_dir`` cannot be written.

    Every concurrency level the night measured is judged too (:func:`tuner.judging.levels.judge_levels`):
    report.md's "Per concurrency level" section, and the verdict says which sets flip. The
    headline, "Use it" and the frame's verdicts are those of ``info.judge_concurrency``'s level
    (1, the single-stream probe, unless the sweep's ``probe.judge_concurrency`` named another
    that its records measured).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    relaunches = [r for r in records if r.kind.relaunched]
    skipped = skipped_frame(records)
    not_launched = [*proof_markdown(relaunches), *not_measured_markdown(skipped)]
    metric = info.metric
    sections = []
    judgements = []
    for k, (host_type, group) in enumerate((host_type_groups(relaunches) or {UNKNOWN_TYPE: []}).items(), 1):
        levels = judge_levels(group, metric=metric, min_effect=min_effect,
                              judged_level=_judged_level(group, info.judge_concurrency),
                              cannot_act=cannot_act_on(info, group))
        judgement = levels.headline
        # the table, trials.csv and the figures are the single stream's; the verdict is the headline level's
        single = levels.judgements[SINGLE_STREAM]
        df = trials_frame(group, min_effect=min_effect, metric=metric, judgement=single)
        if levels.judged_level != SINGLE_STREAM:
            df.attrs[USE_KEY] = judgement.winner if judgement.confirmed else None
            df.attrs[STORY_ATTR] = story_of(single, headline=judgement)  # the best set: the headline level's
        df.attrs["metric"] = metric
        verdict = verdict_paragraph(df, info, min_effect=min_effect, judgement=judgement, levels=levels)
        sections.append(HostTypeSection(host_type, df, verdict, folder=f"host-type-{k}", levels=levels))
        judgements.append(single)
    if len(sections) == 1:
        first = judgements[0]
        df, verdict = sections[0].df, sections[0].verdict
        full = combine_frames([df, skipped])
        if STORY_ATTR in df.attrs:  # the sets not measured change no figure of the judgement
            full.attrs[STORY_ATTR] = df.attrs[STORY_ATTR]
        write_trials_csv(full, out_dir / "trials.csv")
        svgs: dict[str, str] = {}
        figures = [p.name for p in save_figures(df, out_dir, min_effect=min_effect, svgs=svgs)] if not df.empty else []
        screen_png = save_screen_figure(info, out_dir, first, svgs=svgs) if not df.empty else None
        extra = screen_markdown(info, out_dir, first, use=confirmed_row(df) if not df.empty else None,
                                figure=screen_png)
        per_level = levels_markdown(sections[0].levels, min_effect=min_effect) if sections[0].levels else []
        (out_dir / "report.md").write_text(report_markdown(df, verdict, info, study_name, figures, extra,
                                                           after=not_launched, levels=per_level))
        write_report_html(out_dir / HTML_FILE, [PagePart(df, verdict, svgs, per_level, extra)], info, study_name,
                          after=not_launched)
        return df, verdict
    parts = []
    for k, s in enumerate(sections, 1):
        svgs = {}
        s.figures = [p.name for p in save_figures(s.df, out_dir / s.folder, min_effect=min_effect, svgs=svgs)]
        # report.md's per-type tables are judged at the study's stored minimum effect: the same here
        per_level = levels_markdown(s.levels, min_effect=_stored_min_effect(info), level="###") if s.levels else []
        parts.append(PagePart(s.df, s.titled_verdict(k), svgs, per_level,
                              title=f"Host type {k}: `{s.host_type or 'not recorded'}`"))
    df = combine_frames([s.df for s in sections])
    write_trials_csv(combine_frames([df, skipped]), out_dir / "trials.csv")
    verdict = "\n\n".join(s.titled_verdict(k) for k, s in enumerate(sections, 1))
    (out_dir / "report.md").write_text(report_markdown_by_host_type(sections, info, study_name, not_launched))
    write_report_html(out_dir / HTML_FILE, parts, info, study_name, after=not_launched)
    return df, verdict


def _stored_min_effect(info: StudyInfo) -> float:
    return info.min_effect if info.min_effect is not None else DEFAULT_MIN_EFFECT


def _judged_level(records: Sequence[TrialRecord], wanted: int) -> int:
    """``wanted`` when some record measured it (or it is 1), else 1: a study whose records
    never held that level (stored before its sweep named it) is judged on the single stream."""
    return wanted if wanted in measured_levels(records) else SINGLE_STREAM
