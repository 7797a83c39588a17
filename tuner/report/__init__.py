"""Results of a study: trials.csv, judgement.json, the figures, a verdict, report.md and report.html, from trial records.

Everything is rebuilt from :class:`tuner.record.TrialRecord` objects (read from the Optuna
storage) and judged on the study's stored metric (:attr:`tuner.record.StudyInfo.metric`), so
``nccl-tune report --study NAME`` works after the sweep, on another machine, or mid-sweep.
:mod:`tuner.report.build` judges the records once and builds the night's story, one
:class:`tuner.report.model.NightReport` (the parts with their trials table, their
:class:`tuner.report.story.Story` and verdict, the sections as blocks, the figures);
:mod:`tuner.report.frame` makes the trials table and reads/writes trials.csv,
:mod:`tuner.report.text` words it (verdict, tables, sections; the terminal's renderer),
:mod:`tuner.report.screen` and :mod:`tuner.report.proof` word their sections,
:mod:`tuner.report.plots` draws it (with :mod:`tuner.report.forest`, :mod:`tuner.report.history`,
:mod:`tuner.report.effects` and the shared :mod:`tuner.report.marks`). Two renderers read the
model: :mod:`tuner.report.markdown` (report.md) and :mod:`tuner.report.page` (report.html, one
file, figures inlined as SVG by :mod:`tuner.report.svg`); :mod:`tuner.report.outputs` writes the
files. The other views of stored nights (``status``, ``studies``, ``compare``) read
:mod:`tuner.report.nights`.
"""

from typing import TYPE_CHECKING

from tuner.report.compare import DISAGREE, agreement, compare_nights, library_change, print_comparison
from tuner.report.decision import CHECK_PREFIX
from tuner.report.frame import (
    combine_frames,
    env_text,
    judged_order,
    judged_trials,
    read_trials_csv,
    skipped_frame,
    split_skipped,
    trials_frame,
    verdict_text,
    write_trials_csv,
)
from tuner.report.nights import find_nights, open_night, study_listing
from tuner.report.outputs import write_outputs
from tuner.report.status import night_status, pick_running, print_status
from tuner.report.story import STORY_FILE, read_story
from tuner.report.studies import print_studies
from tuner.report.text import confirmed_row, export_lines, print_results, verdict_paragraph

__all__ = [
    "CHECK_PREFIX",
    "DISAGREE",
    "STORY_FILE",
    "agreement",
    "baselines_figure",
    "combine_frames",
    "compare_nights",
    "concurrency_figure",
    "confirmed_row",
    "env_text",
    "export_lines",
    "find_nights",
    "history_figure",
    "judged_order",
    "judged_trials",
    "library_change",
    "night_status",
    "open_night",
    "pick_running",
    "plot_baselines",
    "plot_history",
    "plot_trials_vs_baseline",
    "plot_variable_effect",
    "print_comparison",
    "print_results",
    "print_status",
    "print_studies",
    "read_story",
    "read_trials_csv",
    "skipped_frame",
    "split_skipped",
    "study_listing",
    "trials_frame",
    "trials_vs_baseline_figure",
    "variable_effects_figure",
    "variable_names",
    "verdict_paragraph",
    "verdict_text",
    "write_outputs",
    "write_trials_csv",
]

if TYPE_CHECKING:
    from tuner.report.effects import plot_variable_effect, variable_effects_figure, variable_names
    from tuner.report.forest import plot_trials_vs_baseline, trials_vs_baseline_figure
    from tuner.report.history import history_figure, plot_history
    from tuner.report.plots import baselines_figure, concurrency_figure, plot_baselines

# The figure functions load on first use (PEP 562): matplotlib costs about 0.5 s of a command's
# start, which a --no-figures night, ``status`` and ``compare`` never need.
_FIGURES = {
    "plot_variable_effect": "effects", "variable_effects_figure": "effects", "variable_names": "effects",
    "plot_trials_vs_baseline": "forest", "trials_vs_baseline_figure": "forest",
    "history_figure": "history", "plot_history": "history",
    "baselines_figure": "plots", "concurrency_figure": "plots", "plot_baselines": "plots",
}


def __getattr__(name: str) -> object:
    """The figure functions of :data:`__all__`, imported when first asked for; AttributeError else."""
    module = _FIGURES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the figure functions not yet imported included."""
    return sorted({*globals(), *_FIGURES})
