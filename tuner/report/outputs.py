"""The files of a study's results folder, written in one call: trials.csv, judgement.json, the figures, report.md, report.html."""


from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tuner.record import StudyInfo, TrialRecord
from tuner.report.build import night_report
from tuner.report.frame import combine_frames, write_trials_csv
from tuner.report.markdown import report_markdown
from tuner.report.model import FIGURE_SECTIONS, NightReport
from tuner.report.page import HTML_FILE, write_report_html
from tuner.report.screen import FIGURE as SCREEN_FIGURE

__all__ = ["write_outputs"]


def write_outputs(records: Sequence[TrialRecord], info: StudyInfo, study_name: str, out_dir: Path, *,
                  min_effect: float, figures: bool = True) -> tuple[NightReport, str]:
    """Judge ``records`` once (:func:`tuner.report.build.night_report`: every trial with a
    record, relaunches and the sets not launched; the relaunches judged with ``min_effect``,
    a fraction, on the study's metric ``info.metric``, per host type and concurrency level) and
    write into ``out_dir`` (created if needed): the figures (PNG and SVG), ``trials.csv`` (the
    relaunches' rows and :func:`tuner.report.frame.skipped_frame`'s, one per set not measured),
    ``judgement.json`` beside it (the :class:`tuner.report.story.Story` of the judgement, for a
    study of one host type; a stale one is removed otherwise), ``report.md``
    (:func:`tuner.report.markdown.report_markdown`) and ``report.html``
    (:func:`tuner.report.page.report_html`). With no relaunch yet, trials.csv has only its
    header, report.md says so and no figure is drawn. ``figures=False`` (``--no-figures``)
    draws none and says so in the report: the words and numbers alone, in a fraction of the
    time (drawing is most of a report's CPU time); the figures an earlier report drew there are
    removed, so none is taken for this one's.

    Returns the :class:`tuner.report.model.NightReport` (for
    :func:`tuner.report.text.print_results`; its ``trials`` is the relaunches' frame) and the
    verdict text (one paragraph per host type). Raises OSError when ``out_dir`` cannot be
    written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)  # the words are written with or without the figures
    if not figures:
        _remove_figures(out_dir)
    night = night_report(records, info, study_name, out_dir, min_effect=min_effect, figures=figures)
    story = None if night.several else night.parts[0].story
    write_trials_csv(combine_frames([night.trials, night.skipped]), out_dir / "trials.csv", story)
    (out_dir / "report.md").write_text(report_markdown(night))
    write_report_html(out_dir / HTML_FILE, night)
    return night, night.verdict


def _remove_figures(out_dir: Path) -> None:
    """Remove the PNG and SVG of every report figure in ``out_dir`` and its host-type folders."""
    stems = [*FIGURE_SECTIONS, SCREEN_FIGURE]
    for folder in [out_dir, *sorted(out_dir.glob("host-type-*"))]:
        for stem in stems:
            for suffix in (".png", ".svg"):
                (folder / f"{stem}{suffix}").unlink(missing_ok=True)
