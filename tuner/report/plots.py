"""The report's figures, each drawn by one function into a matplotlib ``Axes`` you give it.

``report.md``, ``nccl-tune report`` and ``notebooks/analysis.ipynb`` draw with the same
functions: :func:`plot_trials_vs_baseline`, :func:`plot_history`, :func:`plot_baselines`,
:func:`plot_concurrency` and, one panel per variable, :func:`plot_variable_effect` over
:func:`variable_names`. :func:`save_figures` lays them out and writes a PNG and an SVG of each.
Every function reads a :func:`tuner.report.frame.trials_frame` (tok/s is output tokens per
second of one stream; failed relaunches have none and are marked, never drawn at 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tuner.record import Kind, Status
from tuner.report.frame import baseline_runs, best_row, concurrency_columns, env_text, ok_baselines, verdict_text

#: Colour of each kind of relaunch.
KIND_COLORS: dict[str, str] = {Kind.BASELINE: "black", Kind.PRESET: "tab:blue", Kind.SEARCH: "tab:green",
                               Kind.CONFIRM: "tab:purple"}
FAILED_COLOR = "tab:red"
_LABEL_CHARS = 60
_DPI = 110


def _ok(df: pd.DataFrame) -> pd.Series:
    return (df["status"] == Status.OK) & df["output_tok_s"].notna()


def _failed(df: pd.DataFrame) -> pd.Series:
    return df["status"].map(lambda s: Status(s).failed).astype(bool)


def _short(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "..."


def _bottom_margin(ax: Axes, fraction: float = 0.15) -> None:
    """Room under the data for marks on the bottom edge (failed relaunches and their labels)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - fraction * (hi - lo), hi)


def _no_measurement(ax: Axes) -> None:
    """An empty tok/s axis that says so (no scale for values that do not exist)."""
    ax.set_yticks([])
    ax.text(0.5, 0.5, "no successful measurement yet", ha="center", va="center", transform=ax.transAxes,
            color="gray")


def _integer_x(ax: Axes, xs: Sequence[float]) -> None:
    """Whole-number ticks over ``xs`` with half a step of room each side (one point included)."""
    if len(xs):
        ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def plot_trials_vs_baseline(ax: Axes, df: pd.DataFrame) -> None:
    """Each relaunch's median tok/s at its trial number, with whiskers for the 95 % CI of its
    ratio to the baseline converted to tok/s (CI bounds x the baseline median it was compared
    with) and its runs as faint dots; the baseline's runs as a band with their median as a line;
    failed relaunches as red crosses on the bottom edge labelled with their status; the best
    tuned set annotated with its gain and verdict."""
    base_runs, _ = baseline_runs(df)
    if base_runs:
        med = float(np.median(base_runs))
        ax.axhspan(min(base_runs), max(base_runs), color="tab:gray", alpha=0.25, label="baseline spread (all runs)")
        ax.axhline(med, color="black", lw=1.2, label=f"baseline median {med:.1f} tok/s")
    ok = df[_ok(df)]
    for kind, color in KIND_COLORS.items():
        sub = ok[ok["kind"] == kind]
        if sub.empty:
            continue
        y = sub["output_tok_s"].to_numpy(float)
        ref = y / sub["vs_baseline"].to_numpy(float)  # the baseline median each row was compared with
        yerr = np.nan_to_num(np.vstack([y - sub["vs_baseline_ci_low"].to_numpy(float) * ref,
                                        sub["vs_baseline_ci_high"].to_numpy(float) * ref - y])).clip(min=0)
        ax.errorbar(sub["trial"], y, yerr=yerr, fmt="o", color=color, capsize=4, label=f"{kind} (median, 95 % CI)")
        for trial, runs in zip(sub["trial"], sub["output_tok_s_runs"], strict=True):
            ax.scatter([trial] * len(runs), runs, s=8, color=color, alpha=0.35)
    if not ok.empty:
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo - 0.08 * (hi - lo), hi + 0.25 * (hi - lo))  # room for failures and the best-set note
    else:
        _no_measurement(ax)
    bad = df[_failed(df)]
    if not bad.empty:  # on the bottom edge: a failure has no tok/s
        on_edge = ax.get_xaxis_transform()
        ax.scatter(bad["trial"], [0.0] * len(bad), marker="x", color=FAILED_COLOR, s=70, zorder=5, clip_on=False,
                   transform=on_edge, label="failed trial (no tok/s)")
        for trial, status in zip(bad["trial"], bad["status"], strict=True):
            ax.annotate(str(status), (trial, 0.0), xycoords=on_edge, textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=7, color=FAILED_COLOR, rotation=90)
    _integer_x(ax, list(df["trial"]))
    best = best_row(df)
    if best is not None:
        lo_x, hi_x = ax.get_xlim()
        right = best["trial"] > (lo_x + hi_x) / 2  # the note goes inwards, never past the edge
        ax.annotate(f"best: trial {int(best['trial'])}, {best['output_tok_s']:.1f} tok/s "
                    f"({(best['vs_baseline'] - 1) * 100:+.1f} %, {verdict_text(best)})\n{env_text(best['env'])}",
                    (best["trial"], best["output_tok_s"]), textcoords="offset points", xytext=(-12 if right else 12, 22),
                    ha="right" if right else "left", fontsize=8, arrowprops={"arrowstyle": "->", "color": "tab:orange"},
                    bbox={"boxstyle": "round", "fc": "lightyellow", "alpha": 0.9})
    ax.set_xlabel("trial number (relaunch order; 0 = untuned baseline)")
    ax.set_ylabel("single-stream output tok/s (median of runs)")
    ax.set_title("Trials vs the untuned baseline")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left")


def variable_names(df: pd.DataFrame) -> list[str]:
    """Every variable any relaunch of ``df`` set, sorted: one :func:`plot_variable_effect` panel each."""
    return sorted({name for env in df["env"] for name in env})


def plot_variable_effect(ax: Axes, df: pd.DataFrame, name: str) -> None:
    """tok/s of the ok relaunches by the value they gave variable ``name`` (``unset`` = NCCL's
    default, every baseline): a dot per relaunch, a black bar at the median per value, the
    baseline median dashed, and a red cross on the bottom edge counting the relaunches that
    failed through their set (:attr:`tuner.record.Status.blames_set`: not the interrupted or
    machine-fault ones) per value."""
    values = [env.get(name, "unset") for env in df["env"]]
    cats = sorted(set(values), key=lambda v: (v != "unset", len(v), v))
    ok = _ok(df).to_numpy()
    failed = df["status"].map(lambda s: Status(s).blames_set).to_numpy(bool)
    tok_s = df["output_tok_s"].to_numpy(float)
    labelled: set[str] = set()

    def label(text: str) -> str:
        if text in labelled:
            return "_nolegend_"  # one legend entry per kind of mark
        labelled.add(text)
        return text

    for i, cat in enumerate(cats):
        idx = [j for j, v in enumerate(values) if v == cat]
        ys = [tok_s[j] for j in idx if ok[j]]
        if ys:
            ax.scatter(np.full(len(ys), i) + np.linspace(-0.12, 0.12, len(ys)), ys, s=18, color="tab:blue",
                       alpha=0.8, label=label("ok relaunch (tok/s)"))
            ax.hlines(float(np.median(ys)), i - 0.25, i + 0.25, color="black", lw=2, label=label("median per value"))
        n_bad = sum(1 for j in idx if failed[j])
        if n_bad:
            ax.scatter([i], [0], marker="x", color=FAILED_COLOR, s=50, transform=ax.get_xaxis_transform(),
                       clip_on=False, zorder=5, label=label("failed relaunches"))
            ax.annotate(f"{n_bad} failed", (i, 0), xycoords=ax.get_xaxis_transform(), textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=7, color=FAILED_COLOR)
    base_runs, _ = baseline_runs(df)
    if base_runs:
        ax.axhline(float(np.median(base_runs)), color="gray", ls="--", lw=1, label="baseline median")
    if failed.any():
        _bottom_margin(ax)
    ax.set_xticks(range(len(cats)), cats, rotation=30, fontsize=7)
    ax.set_xlim(-0.6, len(cats) - 0.4)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("value")
    ax.set_ylabel("output tok/s")
    ax.grid(alpha=0.3)


def plot_history(ax: Axes, df: pd.DataFrame) -> Axes:
    """The sweep in relaunch order (1 = the first relaunch): best tuned tok/s so far (steps),
    every tuned relaunch (dots), baseline measurements (black squares), failed relaunches (red
    crosses), and the cumulative wall time on a second y axis, which is returned (it holds the
    legend of both)."""
    d = df.sort_values("trial").reset_index(drop=True)
    x = np.arange(1, len(d) + 1)
    ok, failed = _ok(d).to_numpy(), _failed(d).to_numpy()
    base = (d["kind"] == Kind.BASELINE).to_numpy()
    tok = d["output_tok_s"].to_numpy(float)
    best = d["output_tok_s"].where(ok & ~base).cummax().ffill()  # held across baselines and failures
    if (ok & ~base).any():  # a legend entry only for what is drawn
        ax.step(x, best, where="post", color="tab:blue", lw=2, label="best tuned so far (tok/s)")
        ax.scatter(x[ok & ~base], tok[ok & ~base], s=18, color="tab:blue", alpha=0.6, label="tuned relaunch (tok/s)")
    if (ok & base).any():
        ax.scatter(x[ok & base], tok[ok & base], s=24, color="black", marker="s",
                   label="baseline measurement (tok/s)")
    base_runs, _ = baseline_runs(d)
    if base_runs:
        med = float(np.median(base_runs))
        ax.axhline(med, color="black", lw=0.8, ls=":", label=f"baseline median {med:.1f} tok/s")
    if not ok.any():
        _no_measurement(ax)
    elif failed.any():
        _bottom_margin(ax)
    if failed.any():  # on the bottom edge, below every measurement: a failure has no tok/s
        ax.scatter(x[failed], np.zeros(int(failed.sum())), marker="x", color=FAILED_COLOR, s=60, clip_on=False,
                   zorder=5, transform=ax.get_xaxis_transform(), label="failed relaunch")
    ax.set_xlabel("relaunch number")
    ax.set_ylabel("single-stream output tok/s")
    _integer_x(ax, list(x))
    wall = d["wall_s"].fillna(0).cumsum()
    total = float(wall.iloc[-1]) if len(wall) else 0.0
    unit, scale = ("h", 3600.0) if total >= 7200 else ("min", 60.0) if total >= 600 else ("s", 1.0)
    ax2 = ax.twinx()
    ax2.plot(x, wall / scale, color="tab:gray", ls="--", marker=".", label=f"cumulative wall time ({unit})")
    ax2.set_ylabel(f"cumulative wall time ({unit})")
    ax2.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=8, loc="best")  # on the twin, drawn above both
    ax.set_title(f"Sweep history: {len(d)} relaunch{'es' if len(d) != 1 else ''}, {total / scale:.1f} {unit} of wall time")
    ax.grid(alpha=0.3)
    return ax2


def plot_baselines(ax: Axes, df: pd.DataFrame) -> None:
    """Every ok baseline measurement at its trial number: runs as gray dots, medians joined by
    a line, the drift (max/min of the medians - 1) as a band."""
    base = ok_baselines(df)
    if base.empty:
        ax.text(0.5, 0.5, "no successful baseline measurement", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("Baseline over the sweep")
    else:
        for k, (trial, runs) in enumerate(zip(base["trial"], base["output_tok_s_runs"], strict=True)):
            ax.scatter([trial] * len(runs), runs, s=14, color="gray", alpha=0.6,
                       label="individual runs" if k == 0 else None)
        ax.plot(base["trial"], base["output_tok_s"], "o-", color="black", label="baseline median per launch")
        _, drift = baseline_runs(df)
        meds = base["output_tok_s"]
        ax.axhspan(float(meds.min()), float(meds.max()), color="tab:orange", alpha=0.15,
                   label=f"drift {drift * 100:.1f} %")
        n = len(base)
        ax.set_title(f"Baseline over the sweep ({n} measurement{'s' if n != 1 else ''}, drift {drift * 100:.1f} %)")
        ax.legend(fontsize=8)
    _integer_x(ax, list(base["trial"]))
    ax.set_xlabel("trial number at which the baseline was measured")
    ax.set_ylabel("single-stream output tok/s")
    ax.grid(alpha=0.3)


def plot_concurrency(ax: Axes, df: pd.DataFrame) -> bool:
    """Aggregate output tok/s against concurrent streams C (``tok_s_c<C>`` columns), one line per
    ok relaunch, the baseline in bold black (re-measures dashed), the legend right of the axes.
    Returns False, drawing nothing, when no ok relaunch measured concurrency."""
    cols = concurrency_columns(df)
    ok = df[_ok(df)]
    if not cols or ok[cols].isna().all().all():
        return False
    levels = [int(c[len("tok_s_c"):]) for c in cols]
    n_base = 0
    for _, row in ok.iterrows():
        label = _short(f"trial {int(row['trial'])}: {env_text(row['env'])}")
        ys = [row[c] for c in cols]
        if row["kind"] == Kind.BASELINE:  # the first measurement solid, re-measures dashed
            first = n_base == 0
            ax.plot(levels, ys, "o-" if first else "s--", lw=2.5 if first else 1.5, color="black",
                    label=label if first else f"{label} (re-measure)")
            n_base += 1
        else:
            ax.plot(levels, ys, "o-", lw=1, alpha=0.8, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(v) for v in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent streams C")
    ax.set_ylabel("aggregate output tok/s")
    ax.set_title("Throughput vs concurrency per set")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return True


def variable_effects_figure(df: pd.DataFrame) -> Figure:
    """A grid of :func:`plot_variable_effect` panels, three per row, one legend below them (a
    single note when no relaunch set a variable). Not registered with pyplot."""
    names = variable_names(df)
    if not names:
        fig = Figure(figsize=(6, 2.5), layout="constrained")
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no tuned variable measured (only the baseline ran)", ha="center", va="center",
                transform=ax.transAxes)
        ax.axis("off")
        return fig
    ncols = min(3, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = Figure(figsize=(4.6 * ncols, 3.6 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    handles: dict[str, Artist] = {}
    for ax, name in zip(axes.flat, names, strict=False):
        plot_variable_effect(ax, df, name)
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle("Single-stream tok/s by value of each variable (all relaunches)")
    if handles:
        fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center", ncol=len(handles),
                   fontsize=8)
    return fig


def _figure(size: tuple[float, float]) -> tuple[Figure, Axes]:
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.subplots()


def save_figures(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Draw every figure of ``df`` and write ``<name>.png`` (110 dpi) and ``<name>.svg`` into
    ``out_dir``: trials_vs_baseline, variable_effects, history, baselines, and concurrency when
    measured. Returns the PNG paths in that order. The figures are plain ``Figure`` objects,
    never registered with pyplot, so nothing stays open. Raises OSError when a file cannot be
    written."""
    figures: list[tuple[str, Figure]] = []
    fig, ax = _figure((11, 5.5))
    plot_trials_vs_baseline(ax, df)
    figures.append(("trials_vs_baseline", fig))
    figures.append(("variable_effects", variable_effects_figure(df)))
    fig, ax = _figure((10, 4.8))
    plot_history(ax, df)
    figures.append(("history", fig))
    fig, ax = _figure((8, 4.2))
    plot_baselines(ax, df)
    figures.append(("baselines", fig))
    fig, ax = _figure((10, 4.8))
    if plot_concurrency(ax, df):
        figures.append(("concurrency", fig))
    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, fig in figures:
        png = out_dir / f"{name}.png"
        fig.savefig(png, dpi=_DPI)
        fig.savefig(png.with_suffix(".svg"), metadata={"Date": None})  # no date: the same data gives the same file
        written.append(png)
    return written
