"""The report's figures, each drawn by one function into a matplotlib ``Axes`` you give it.

``report.md``, ``nccl-tune report`` and ``notebooks/analysis.ipynb`` draw the same figures with
the same functions: each ``*_figure`` function below builds one sized ``Figure`` (never
registered with pyplot) from a :func:`tuner.report.frame.trials_frame`, :func:`report_figures`
lists them all and :func:`save_figures` writes a PNG and an SVG of each. The ``plot_*``
functions under them draw into an ``Axes`` for your own layouts:
:func:`plot_trials_vs_baseline` (the forest plot, :mod:`tuner.report.forest`),
:func:`plot_history`, :func:`plot_baselines`, :func:`plot_concurrency` and, one panel per
variable, :func:`plot_variable_effect` over :func:`variable_names`.

tok/s is output tokens per second of one stream; failed relaunches have none and are marked
with their status, never drawn at 0. Sets are labelled in short form and verdicts coloured as
:mod:`tuner.report.style` says, the same in every figure.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from tuner.record import Kind, Status, Verdict
from tuner.report.forest import (
    trials_vs_baseline_figure,
)
from tuner.report.frame import baseline_levels, baseline_runs, concurrency_columns, ok_baselines
from tuner.report.style import (
    VERDICT_STYLE,
    plural,
    set_label,
    short_name,
    value_text,
    verdict_color,
    verdict_marker,
    verdict_words,
)

__all__ = [
    "FAILED_COLOR",
    "baselines_figure",
    "concurrency_figure",
    "history_figure",
    "plot_baselines",
    "plot_concurrency",
    "plot_history",
    "plot_variable_effect",
    "report_figures",
    "save_figures",
    "variable_effects_figure",
    "variable_names",
]

FAILED_COLOR = verdict_color(Verdict.FAILED)
PENDING_COLOR = verdict_color(Verdict.PENDING)
#: Line colours of tuned sets in the concurrency plot (Okabe-Ito without black and grey),
#: cycled with line styles when there are more sets.
SET_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999933")
_SET_STYLES = ("-", "-.", ":")
_DPI = 110


def _ok(df: pd.DataFrame) -> pd.Series:
    return (df["status"] == Status.OK) & df["output_tok_s"].notna()


def _failed(df: pd.DataFrame) -> pd.Series:
    return df["status"].map(lambda s: Status(s).failed and Status(s) is not Status.INTERRUPTED).astype(bool)


def _pending(df: pd.DataFrame) -> pd.Series:
    return df["status"].isin([Status.RUNNING, Status.INTERRUPTED])


def _no_measurement(ax: Axes) -> None:
    """An empty tok/s axis that says so (no scale for values that do not exist)."""
    ax.set_yticks([])
    ax.text(0.5, 0.5, "no successful measurement yet", ha="center", va="center", transform=ax.transAxes,
            color="gray")


def _integer_x(ax: Axes, xs: list[int]) -> None:
    """Whole-number ticks over ``xs`` with room each side (one point included)."""
    if xs:
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def _bottom_room(ax: Axes, fraction: float = 0.18) -> None:
    """Room under the data for the marks on the bottom edge (failed relaunches and their status)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - fraction * (hi - lo), hi)


def _edge_marks(ax: Axes, xs: list[float], texts: list[str], color: str, marker: str, label: str) -> None:
    """Marks on the bottom edge at ``xs`` (relaunches with no tok/s), each with its text above it."""
    on_edge = ax.get_xaxis_transform()
    ax.scatter(xs, [0.0] * len(xs), marker=marker, color=color, s=60, zorder=5, clip_on=False, transform=on_edge,
               label=label)
    for x, text in zip(xs, texts, strict=True):
        ax.annotate(text, (x, 0.0), xycoords=on_edge, textcoords="offset points", xytext=(0, 7), ha="center",
                    va="bottom", fontsize=7, color=color, rotation=90)


def _verdict_handle(verdict: Verdict, min_effect: float | None) -> Line2D:
    return Line2D([], [], ls="none", color=verdict_color(verdict), marker=verdict_marker(verdict),
                  label=verdict_words(verdict, min_effect))


# -- history ---------------------------------------------------------------------------------

def plot_history(ax: Axes, df: pd.DataFrame, *, min_effect: float | None = None) -> Axes:
    """The sweep in trial order (x: trial numbers as the study numbers them, whole ticks): each
    tuned relaunch's median tok/s coloured by its verdict, the best tuned tok/s so far (steps),
    the baseline launches as black squares joined by a line (drift), each re-measure marked by a
    dotted vertical line, failed and pending relaunches on the bottom edge with their status,
    and the cumulative wall time on a second y axis, which is returned (the legend is outside
    the axes on the right)."""
    d = df.sort_values("trial").reset_index(drop=True)
    x = d["trial"].to_numpy(int)
    ok, failed, pending = _ok(d).to_numpy(), _failed(d).to_numpy(), _pending(d).to_numpy()
    base = (d["kind"] == Kind.BASELINE).to_numpy()
    tok = d["output_tok_s"].to_numpy(float)
    tuned = ok & ~base
    handles: list[Artist] = []
    if tuned.any():
        best = d["output_tok_s"].where(tuned).cummax().ffill()  # held across baselines and failures
        (step,) = ax.step(x, best, where="post", color="#332288", lw=1.2, alpha=0.7, label="best tuned so far")
        handles.append(step)
        for verdict in VERDICT_STYLE:  # legend order: from faster to slower
            sel = tuned & (d["verdict"] == verdict).to_numpy()
            if sel.any():
                ax.scatter(x[sel], tok[sel], s=40, color=verdict_color(verdict), marker=verdict_marker(verdict),
                           zorder=4, edgecolors="white", linewidths=0.5)
                handles.append(_verdict_handle(verdict, min_effect))
    if (ok & base).any():
        (line,) = ax.plot(x[ok & base], tok[ok & base], "s-", color="black", lw=0.8, ms=6, zorder=4,
                          label="baseline launch" + (" (joined: drift)" if (ok & base).sum() > 1 else ""))
        handles.append(line)
    first_base = ok_baselines(d)["trial"].min() if (ok & base).any() else None
    re_measures = [int(t) for t in d.loc[base, "trial"] if first_base is not None and t > first_base]
    for t in re_measures:
        ax.axvline(t, color="black", ls=":", lw=0.8, zorder=1)
    if re_measures:
        handles.append(Line2D([], [], color="black", ls=":", lw=0.8, label="baseline re-measure"))
    if not ok.any():
        _no_measurement(ax)
    elif failed.any() or pending.any():
        _bottom_room(ax)
    if failed.any():  # on the bottom edge, below every measurement: a failure has no tok/s
        _edge_marks(ax, list(x[failed]), [str(s) for s in d.loc[failed, "status"]], FAILED_COLOR, "x",
                    "failed (status written)")
        handles.append(ax.collections[-1])
    if pending.any():
        _edge_marks(ax, list(x[pending]), [str(s) for s in d.loc[pending, "status"]], PENDING_COLOR, "o",
                    "running or interrupted")
        handles.append(ax.collections[-1])
    ax.set_xlabel("trial number (relaunch order)")
    ax.set_ylabel("single-stream output tok/s")
    _integer_x(ax, list(x))
    wall = d["wall_s"].fillna(0).cumsum()
    total = float(wall.iloc[-1]) if len(wall) else 0.0
    unit, scale = ("h", 3600.0) if total >= 7200 else ("min", 60.0) if total >= 600 else ("s", 1.0)
    ax2 = ax.twinx()
    (wall_line,) = ax2.plot(x, wall / scale, color="tab:gray", ls="--", marker=".", lw=1,
                            label=f"cumulative wall time ({unit}, right axis)")
    handles.append(wall_line)
    ax2.set_ylabel(f"cumulative wall time ({unit})")
    ax2.set_ylim(bottom=0)
    ax2.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.1, 1.0), borderaxespad=0)
    ax.set_title(f"The sweep in trial order: {plural(len(d), 'relaunch')}, {total / scale:.1f} {unit} of wall time")
    ax.grid(alpha=0.3)
    return ax2


def history_figure(df: pd.DataFrame, *, min_effect: float | None = None) -> Figure:
    """A figure of :func:`plot_history`, wide enough for its legend."""
    fig = Figure(figsize=(12, 5), layout="constrained")
    plot_history(fig.subplots(), df, min_effect=min_effect)
    return fig


# -- variable effects ------------------------------------------------------------------------

def variable_names(df: pd.DataFrame) -> list[str]:
    """Every variable any relaunch of ``df`` set, sorted: one :func:`plot_variable_effect` panel each."""
    return sorted({name for env in df["env"] for name in env})


def _category_order(value: str) -> tuple[int, float, str]:
    if value == "unset":
        return (0, 0.0, "")
    try:
        return (1, float(int(value, 0)), value)
    except ValueError:
        return (2, 0.0, value)


def plot_variable_effect(ax: Axes, df: pd.DataFrame, name: str, *, min_effect: float | None = None) -> None:
    """tok/s of the ok relaunches by the value they gave variable ``name`` (``unset`` = NCCL's
    default, every baseline; byte sizes as :func:`tuner.report.style.value_text`): a dot per
    relaunch coloured by its verdict, a black bar at the median per value, the baseline median
    as a dashed line, and, per value, a red cross on the bottom edge with the statuses of the
    relaunches that failed through their set (:attr:`tuner.record.trial.Status.blames_set`: the
    interrupted and machine-fault ones are not the set's doing)."""
    values = [env.get(name, "unset") for env in df["env"]]
    cats = sorted(set(values), key=_category_order)
    ok = _ok(df).to_numpy()
    blamed = df["status"].map(lambda s: Status(s).blames_set).to_numpy(bool)
    tok_s = df["output_tok_s"].to_numpy(float)
    verdicts = list(df["verdict"])
    statuses = [str(s) for s in df["status"]]
    tick_labels = [value_text(name, c, "\n") for c in cats]
    tick_pt = 8 + 9 * max(t.count("\n") + 1 for t in tick_labels)  # below the tick labels
    for i, cat in enumerate(cats):
        idx = [j for j, v in enumerate(values) if v == cat and ok[j]]
        offsets = np.linspace(-0.12, 0.12, len(idx)) if len(idx) > 1 else [0.0] * len(idx)
        for j, dx in zip(idx, offsets, strict=True):
            ax.scatter([i + dx], [tok_s[j]], s=26, color=verdict_color(verdicts[j]), marker=verdict_marker(verdicts[j]),
                       edgecolors="white", linewidths=0.5, zorder=4, label=f"_verdict {verdicts[j]}")
        if idx:
            ax.hlines(float(np.median(tok_s[idx])), i - 0.25, i + 0.25, color="black", lw=2, zorder=3,
                      label="median per value")
        bad = [statuses[j] for j, v in enumerate(values) if v == cat and blamed[j]]
        running = sum(1 for j, v in enumerate(values) if v == cat and statuses[j] == Status.RUNNING)
        if bad:  # a cross on the bottom edge
            ax.scatter([i], [0.0], marker="x", color=FAILED_COLOR, s=60, zorder=5, clip_on=False,
                       transform=ax.get_xaxis_transform(), label="failed (statuses under the value)")
        notes = [(f"{bad.count(s)} {s}", FAILED_COLOR) for s in dict.fromkeys(bad)]
        notes += [(f"{running} running", PENDING_COLOR)] if running else []
        for k, (text, color) in enumerate(notes):  # under the value's tick label, one line each
            ax.annotate(text, (i, 0.0), xycoords=ax.get_xaxis_transform(), textcoords="offset points",
                        xytext=(0, -tick_pt - 9 * k), ha="center", va="top", fontsize=7, color=color)
    base_runs, _ = baseline_runs(df)
    if base_runs:
        med = float(np.median(base_runs))
        ax.axhline(med, color="black", ls="--", lw=1, label="baseline median", zorder=2)
    if not ok.any():
        _no_measurement(ax)
    elif blamed.any():
        _bottom_room(ax, 0.08)
    ax.set_xticks(range(len(cats)), tick_labels, fontsize=7)
    ax.set_xlim(-0.6, len(cats) - 0.4)
    short = short_name(name)
    ax.set_title(name if short == name else f"{name} ({short})", fontsize=9)
    ax.set_ylabel("output tok/s")
    ax.grid(alpha=0.3)


def variable_effects_figure(df: pd.DataFrame, *, min_effect: float | None = None) -> Figure:
    """A grid of :func:`plot_variable_effect` panels, three per row (one per row, wider, when a
    variable took more than 10 values), one legend below them (a single note when no relaunch
    set a variable). Not registered with pyplot."""
    names = variable_names(df)
    if not names:
        fig = Figure(figsize=(6, 2.5), layout="constrained")
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no tuned variable measured (only the baseline ran)", ha="center", va="center",
                transform=ax.transAxes)
        ax.axis("off")
        return fig
    most = max(len({env.get(name, "unset") for env in df["env"]}) for name in names)
    ncols = min(3, len(names)) if most <= 10 else 1  # many values: one panel a row, as wide as they need
    panel_w = 4.8 if ncols > 1 else min(max(8.0, 0.32 * most), 18.0)
    nrows = math.ceil(len(names) / ncols)
    fig = Figure(figsize=(panel_w * ncols, 3.8 * nrows + 1.0), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    handles: dict[str, Artist] = {}
    shown: set[Verdict] = set()
    for ax, name in zip(axes.flat, names, strict=False):
        plot_variable_effect(ax, df, name, min_effect=min_effect)
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
        shown |= {Verdict(v) for _, v in _verdicts_drawn(ax)}
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    legend: list[Artist] = [_verdict_handle(v, min_effect) for v in VERDICT_STYLE if v in shown]
    legend += list(handles.values())
    base_runs, _ = baseline_runs(df)
    if base_runs:
        for h in legend:
            if h.get_label() == "baseline median":
                h.set_label(f"baseline median ({np.median(base_runs):.1f} tok/s)")
    fig.suptitle("Single-stream output tok/s by the value of each variable (every relaunch; other variables "
                 "may change at the same time)", fontsize=10)
    fig.legend(handles=legend, loc="outside lower center", ncol=min(len(legend), 5), fontsize=8)
    return fig


def _verdicts_drawn(ax: Axes) -> list[tuple[Artist, str]]:
    """(artist, verdict value) of the per-relaunch dots :func:`plot_variable_effect` drew."""
    return [(c, str(c.get_label()).removeprefix("_verdict ")) for c in ax.collections
            if str(c.get_label()).startswith("_verdict ")]


# -- baselines and concurrency ---------------------------------------------------------------

def plot_baselines(ax: Axes, df: pd.DataFrame) -> None:
    """Every ok baseline launch at its trial number: runs as grey dots, robust levels (the ones
    the verdicts use) joined by a line, the drift (max/min of the levels - 1) as a band."""
    base = ok_baselines(df)
    if base.empty:
        ax.text(0.5, 0.5, "no successful baseline measurement", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("The baseline over the sweep")
    else:
        for k, (trial, runs) in enumerate(zip(base["trial"], base["output_tok_s_runs"], strict=True)):
            ax.scatter([trial] * len(runs), runs, s=14, color="gray", alpha=0.6,
                       label="individual runs" if k == 0 else None)
        levels = baseline_levels(df)  # the level every verdict uses (tuner.judging.stats.launch_level)
        ax.plot(base["trial"], levels, "s-", color="black", label="robust level of each launch")
        _, drift = baseline_runs(df)
        if len(base) > 1:
            ax.axhspan(min(levels), max(levels), color="tab:orange", alpha=0.15,
                       label=f"drift {drift * 100:.1f} % (max / min of the levels - 1)")
            ax.set_title(f"The baseline over the sweep ({plural(len(base), 'launch')}, drift {drift * 100:.1f} %)")
        else:  # one launch measures no drift: say so rather than print 0 %
            ax.set_title("The baseline over the sweep (1 launch: drift not measured)")
        ax.legend(fontsize=8)
    _integer_x(ax, [int(t) for t in base["trial"]])
    ax.set_xlabel("trial number at which the baseline was launched")
    ax.set_ylabel("single-stream output tok/s")
    ax.grid(alpha=0.3)


def baselines_figure(df: pd.DataFrame) -> Figure:
    """A figure of :func:`plot_baselines`."""
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    plot_baselines(fig.subplots(), df)
    return fig


def _baselines_first(ok: pd.DataFrame) -> pd.DataFrame:
    """``ok`` with its baseline rows first (each group in trial order), as the legend lists them."""
    return ok.assign(_tuned=ok["kind"] != Kind.BASELINE).sort_values(["_tuned", "trial"]).drop(columns="_tuned")


def _concurrency_labels(ok: pd.DataFrame) -> list[str]:
    labels, n_base = [], 0
    for _, row in ok.iterrows():
        trial = int(row["trial"])
        if row["kind"] == Kind.BASELINE:
            labels.append(f"baseline (untuned){'' if n_base == 0 else ' re-measure'}, trial {trial}")
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
    ok = df[_ok(df)]
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
    labels = _concurrency_labels(_baselines_first(df[_ok(df)]))
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

def report_figures(df: pd.DataFrame, *, min_effect: float | None = None) -> list[tuple[str, Figure]]:
    """Every figure of ``df`` with its file stem, in report order: trials_vs_baseline (the
    forest plot), variable_effects, history, baselines, and concurrency when measured.
    ``min_effect`` (fraction): named in the ``below the minimum effect`` verdicts when given."""
    figures = [("trials_vs_baseline", trials_vs_baseline_figure(df, min_effect=min_effect)),
               ("variable_effects", variable_effects_figure(df, min_effect=min_effect)),
               ("history", history_figure(df, min_effect=min_effect)),
               ("baselines", baselines_figure(df))]
    conc = concurrency_figure(df)
    if conc is not None:
        figures.append(("concurrency", conc))
    return figures


def save_figures(df: pd.DataFrame, out_dir: Path, *, min_effect: float | None = None) -> list[Path]:
    """Write ``<name>.png`` (110 dpi) and ``<name>.svg`` of every :func:`report_figures` figure
    into ``out_dir`` (created if needed). Returns the PNG paths in report order. Nothing is left
    open in pyplot. Raises OSError when a file cannot be written."""
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fig in report_figures(df, min_effect=min_effect):
        png = out_dir / f"{name}.png"
        with warnings.catch_warnings():  # a figure with almost no data: matplotlib's layout notice is not the user's
            warnings.filterwarnings("ignore", message="constrained_layout not applied")
            fig.savefig(png, dpi=_DPI)
            fig.savefig(png.with_suffix(".svg"), metadata={"Date": None})  # no date: the same data gives the same file
        written.append(png)
    return written
