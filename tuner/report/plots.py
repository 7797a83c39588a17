"""The report's figures, each drawn by one function into a matplotlib ``Axes`` you give it.

``report.md``, ``nccl-tune report`` and ``notebooks/analysis.ipynb`` draw the same figures with
the same functions: each ``*_figure`` function builds one sized ``Figure`` (never registered
with pyplot) from a :func:`tuner.report.frame.trials_frame`, :func:`report_figures` lists them
all and :func:`save_figures` writes a PNG and an SVG of each. The ``plot_*`` functions draw
into an ``Axes`` for your own layouts and return what they drew:
:func:`~tuner.report.forest.plot_trials_vs_baseline` (the forest plot, its own module's),
:func:`plot_history` (:mod:`tuner.report.history`), :func:`plot_baselines`,
:func:`plot_concurrency` and, one panel per variable, :func:`plot_variable_effect` over
:func:`variable_names` (:mod:`tuner.report.effects`); this module offers all but the first.

Every number a figure shows that the judgement computed (the baseline's levels, level and
drift, each set's ratio and interval, the order, the best set) is the story's it is given
(:class:`tuner.report.story.Story`, made once beside the frame by
:func:`tuner.report.frame.judged_trials`), the same the verdict paragraph words. tok/s is output
tokens per second of one stream; failed relaunches have none and are marked with their status,
never drawn at 0. Sets are labelled in short form and verdicts coloured as
:mod:`tuner.report.style` says, the same in every figure.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tuner.record import Kind
from tuner.report.effects import plot_variable_effect, variable_effects_figure, variable_names
from tuner.report.forest import trials_vs_baseline_figure
from tuner.report.frame import baseline_name as _base
from tuner.report.frame import concurrency_columns, ok_baselines
from tuner.report.history import history_figure, plot_history
from tuner.report.marks import FAILED_COLOR, ok_rows
from tuner.report.story import Story
from tuner.report.style import plural, set_label
from tuner.report.svg import figure_svg

__all__ = [
    "FAILED_COLOR",
    "BaselinePlot",
    "baselines_figure",
    "concurrency_figure",
    "history_figure",
    "plot_baselines",
    "plot_concurrency",
    "plot_history",
    "plot_variable_effect",
    "report_figures",
    "save_figures",
    "trials_vs_baseline_figure",
    "variable_effects_figure",
    "variable_names",
]

#: Line colours of tuned sets in the concurrency plot (Okabe-Ito without black and grey),
#: cycled with line styles when there are more sets.
SET_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999933")
_SET_STYLES = ("-", "-.", ":")
_DPI = 110


def _integer_x(ax: Axes, xs: list[int]) -> None:
    """Whole-number ticks over ``xs`` with room each side (one point included)."""
    if xs:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


# -- baselines and concurrency ---------------------------------------------------------------

@dataclass(frozen=True)
class BaselinePlot:
    """What :func:`plot_baselines` drew: the baseline launches' ``trials`` and robust ``levels``
    (tok/s), their ``drift`` (fraction) and the baseline's ``level`` (tok/s), all the story's."""

    trials: tuple[int, ...]
    levels: tuple[float, ...]
    drift: float
    level: float


def plot_baselines(ax: Axes, df: pd.DataFrame, story: Story) -> BaselinePlot:
    """Every ok baseline launch at its trial number: runs as grey dots, the robust levels the
    verdicts use joined by a line (the baseline each set is compared with, interpolated at its
    place), the drift (max/min of the levels - 1) as a band and the baseline's level (their
    geometric mean, the verdict's "Baseline:") as a dashed line; every number the story's.
    Returns what was drawn."""
    base = ok_baselines(df)
    runs = dict(zip(base["trial"].astype(int), base[f"{story.metric.value}_runs"], strict=True))  # the judged metric's
    trials, levels = list(story.baseline_trials), list(story.baseline_levels)
    drift = story.drift
    if not trials:
        ax.text(0.5, 0.5, "no successful baseline measurement", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("The baseline over the sweep")
    else:
        for k, trial in enumerate(trials):
            values = runs.get(trial) or []
            ax.scatter([trial] * len(values), values, s=14, color="gray", alpha=0.6,
                       label="individual runs" if k == 0 else None)
        ax.plot(trials, levels, "s-", color="black", label="robust level of each launch")
        ax.axhline(story.baseline_level, color="#332288", ls="--", lw=1,
                   label=f"the baseline's level, {story.baseline_level:.1f} tok/s (geometric mean)")
        if len(trials) > 1:
            ax.axhspan(min(levels), max(levels), color="tab:orange", alpha=0.15,
                       label=f"drift {drift * 100:.1f} % (max / min of the levels - 1)")
            ax.set_title(f"The baseline over the sweep ({plural(len(trials), 'launch')}, drift {drift * 100:.1f} %)")
        else:  # one launch measures no drift: say so rather than print 0 %
            ax.set_title("The baseline over the sweep (1 launch: drift not measured)")
        ax.legend(fontsize=8)
    _integer_x(ax, trials)
    ax.set_xlabel("trial number at which the baseline was launched")
    ax.set_ylabel(story.metric.described)
    ax.grid(alpha=0.3)
    return BaselinePlot(tuple(trials), tuple(levels), drift, story.baseline_level)


def baselines_figure(df: pd.DataFrame, story: Story) -> Figure:
    """A figure of :func:`plot_baselines`."""
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    plot_baselines(fig.subplots(), df, story)
    return fig


def _baselines_first(ok: pd.DataFrame) -> pd.DataFrame:
    """``ok`` with its baseline rows first (each group in trial order), as the legend lists them."""
    return ok.assign(_tuned=ok["kind"] != Kind.BASELINE).sort_values(["_tuned", "trial"]).drop(columns="_tuned")


def _concurrency_labels(ok: pd.DataFrame) -> list[str]:
    labels, n_base = [], 0
    for _, row in ok.iterrows():
        trial = int(row["trial"])
        if row["kind"] == Kind.BASELINE:
            labels.append(f"{_base(row)}{'' if n_base == 0 else ' re-measure'}, trial {trial}")
            n_base += 1
        else:
            labels.append(f"{set_label(row['env'], row['flags'] or ())} (trial {trial})")
    return labels


def plot_concurrency(ax: Axes, df: pd.DataFrame, *, relative: bool = False, legend: bool = True) -> bool:
    """Aggregate output tok/s against concurrent streams C (``tok_s_c<C>`` columns), one line per
    ok relaunch labelled with its set in short form: the first baseline launch thick black with
    squares, its re-measures dark grey dashed with diamonds, tuned sets in :data:`SET_COLORS`
    with circles. ``relative``: each line divided by the first baseline launch's tok/s at the
    same C (1.0 marked), so small differences show at every C. ``legend``: right of the axes
    (whole labels, never cut). Returns False, drawing nothing, when no ok relaunch measured
    concurrency."""
    cols = concurrency_columns(df)
    ok = df[ok_rows(df)]
    if not cols or ok[cols].isna().all().all():
        return False
    levels = [int(c[len("tok_s_c"):]) for c in cols]
    ok = _baselines_first(ok)
    first_base = ok[ok["kind"] == Kind.BASELINE]
    if relative and first_base.empty:
        return False
    ref = first_base.iloc[0][cols].to_numpy(float) if relative else np.ones(len(cols))
    n_base = n_set = 0
    for (_, row), label in zip(ok.iterrows(), _concurrency_labels(ok), strict=True):
        ys = row[cols].to_numpy(float) / ref
        if row["kind"] == Kind.BASELINE:
            if n_base == 0:
                ax.plot(levels, ys, "s-", lw=2.8, ms=7, color="black", label=label, zorder=4)
            else:
                ax.plot(levels, ys, "D--", lw=1.8, ms=5, color="#5F5F5F", label=label, zorder=4)
            n_base += 1
        else:
            color = SET_COLORS[n_set % len(SET_COLORS)]
            style = _SET_STYLES[(n_set // len(SET_COLORS)) % len(_SET_STYLES)]
            ax.plot(levels, ys, marker="o", ls=style, lw=1.3, ms=4, color=color, label=label)
            n_set += 1
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(v) for v in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent streams C")
    if relative:
        ax.set_ylabel("ratio to the baseline\n(first launch, same C)")
        ax.set_title("The same, relative to the baseline at each C", fontsize=10)
    else:
        ax.set_ylabel("aggregate output tok/s")
        ax.set_title("Aggregate throughput vs concurrency, per set")
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return True


def concurrency_figure(df: pd.DataFrame) -> Figure | None:
    """Two panels of :func:`plot_concurrency` (aggregate tok/s, then relative to the baseline at
    each C), widened for the longest legend label and heightened for its entries, or None when
    nothing measured concurrency."""
    labels = _concurrency_labels(_baselines_first(df[ok_rows(df)]))
    width = min(max(7.0 + 0.055 * max((len(s) for s in labels), default=0), 10.0), 24.0)
    fig = Figure(figsize=(width, max(7.5, 1.2 + 0.17 * len(labels))), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    if not plot_concurrency(top, df):
        return None
    top.set_xlabel("")
    if not plot_concurrency(bottom, df, relative=True, legend=False):
        bottom.remove()  # no baseline measured concurrency: nothing to be relative to
    return fig


# -- all of them -----------------------------------------------------------------------------

def report_figures(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> list[tuple[str, Figure]]:
    """Every figure of ``df`` with its file stem, in report order: trials_vs_baseline (the
    forest plot), variable_effects, history, baselines, and concurrency when measured.
    ``min_effect`` (fraction): named in the ``below the minimum effect`` verdicts when given."""
    figures = [("trials_vs_baseline", trials_vs_baseline_figure(df, story, min_effect=min_effect)),
               ("variable_effects", variable_effects_figure(df, story, min_effect=min_effect)),
               ("history", history_figure(df, story, min_effect=min_effect)),
               ("baselines", baselines_figure(df, story))]
    conc = concurrency_figure(df)
    if conc is not None:
        figures.append(("concurrency", conc))
    return figures


def save_figures(df: pd.DataFrame, story: Story, out_dir: Path, *, min_effect: float | None = None,
                 svgs: dict[str, str] | None = None) -> list[Path]:
    """Write ``<name>.png`` (110 dpi) and ``<name>.svg`` of every :func:`report_figures` figure
    into ``out_dir`` (created if needed). Returns the PNG paths in report order. ``svgs``: when
    given, each figure's SVG text (what its file holds, :func:`tuner.report.svg.figure_svg`) is
    put there under its stem, for report.html. Nothing is left open in pyplot. Raises OSError
    when a file cannot be written."""
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fig in report_figures(df, story, min_effect=min_effect):
        png = out_dir / f"{name}.png"
        with warnings.catch_warnings():  # a figure with almost no data: matplotlib's layout notice is not the user's
            warnings.filterwarnings("ignore", message="constrained_layout not applied")
            fig.savefig(png, dpi=_DPI)
        svg = figure_svg(fig, f"{out_dir.name}/{name}")  # no date, fixed ids: the same data gives the same file
        png.with_suffix(".svg").write_text(svg)
        if svgs is not None:
            svgs[name] = svg
        written.append(png)
    return written
