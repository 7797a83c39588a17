"""The night against the clock: every relaunch at the hour it ended, and the best set so far.

x is the time since the night's first launch began (``started_at``; ``finished_at``, else
``started_at + wall_s``, places a relaunch at its end; a study recorded without start times
falls back to the cumulative wall time), ticked as ``h:mm``. y is the gain against the
baseline in percent, the judgement's own figure (the frame's ``vs_baseline``: a tuned row its
set's ratio on all its launches, a confirmation its confirmation, a baseline launch against the
other baseline launches), with the study's tok/s at the baseline's level on the right axis.
"Best so far" follows the judgement's order (:meth:`tuner.report.story.Story.order`), the
untuned baseline placed at 0 %: it ends at the set the verdict names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MultipleLocator

from tuner.record import Kind, Status, set_key
from tuner.report.frame import ok_baselines
from tuner.report.marks import (
    FAILED_COLOR,
    PENDING_COLOR,
    bottom_room,
    edge_marks,
    failed_rows,
    no_measurement,
    ok_rows,
    pending_rows,
    verdict_handle,
)
from tuner.report.story import Story
from tuner.report.style import VERDICT_STYLE, plural, set_label, verdict_color, verdict_marker

__all__ = ["clock_text", "history_figure", "plot_history", "relaunch_hours"]

#: The best-so-far line's colour (Tol's indigo: no verdict uses it).
BEST_COLOR = "#332288"
#: Tick steps of the clock axis, in minutes: the first that gives at most 8 ticks.
_STEPS_MIN = (0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 180, 240, 360, 720)
#: More relaunches than this and their trial numbers are not written beside the points.
_LABELLED = 40


@dataclass(frozen=True)
class HistoryPlot:
    """What :func:`plot_history` drew: each row's ``trials``, ``hours`` (its end, since the first
    launch began) and ``gains`` (% against the baseline, NaN for a row with no ratio); the
    best-so-far steps ``best_hours``/``best_gains`` (% ; 0 = the untuned baseline) and the set
    they end at, ``best`` (set key, None: the baseline)."""

    trials: tuple[int, ...]
    hours: tuple[float, ...]
    gains: tuple[float, ...]
    best_hours: tuple[float, ...]
    best_gains: tuple[float, ...]
    best: str | None


def relaunch_hours(df: pd.DataFrame) -> list[float]:
    """Hours from the first launch's start to each row's end, in ``df``'s row order (module
    docstring); rows with no time of their own take the previous row's."""
    started = df["started_at"].to_numpy(float)
    if not np.isfinite(started).any():  # recorded without start times: the cumulative wall time
        return list(df["wall_s"].fillna(0).cumsum().to_numpy(float) / 3600.0)
    t0 = float(np.nanmin(started))
    ends = df["finished_at"].to_numpy(float)
    walls = df["wall_s"].to_numpy(float)
    out: list[float] = []
    for start, end, wall in zip(started, ends, walls, strict=True):
        t = end if math.isfinite(end) else start + wall if math.isfinite(start) and math.isfinite(wall) else start
        out.append((t - t0) / 3600.0 if math.isfinite(t) else (out[-1] if out else 0.0))
    return out


def clock_text(hours: float, seconds: bool = False) -> str:
    """``hours`` as ``h:mm`` (``h:mm:ss`` with ``seconds``), e.g. ``1:30`` for 1.5."""
    total = round(hours * 3600)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if seconds else f"{h}:{m:02d}"


def _clock_axis(ax: Axes, span_h: float) -> None:
    step = next((s for s in _STEPS_MIN if span_h * 60 / s <= 8), _STEPS_MIN[-1])
    ax.xaxis.set_major_locator(MultipleLocator(step / 60))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda h, _: clock_text(max(h, 0.0), seconds=step < 1)))
    ax.set_xlim(-0.04 * span_h, 1.04 * span_h)
    ax.set_xlabel("time since the first launch began (h:mm" + (":ss)" if step < 1 else ")"))


def _duration(hours: float) -> str:
    return f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.1f} min"


def _best_steps(d: pd.DataFrame, hours: list[float], story_order: dict[str, tuple[int, float]],
                ) -> tuple[list[float], list[float], str | None]:
    """The best-so-far steps over the rows of ``d`` (time order): the untuned baseline (0 %) until
    a set ranked above it has been measured (``story_order``: set key -> (rank, gain %))."""
    xs: list[float] = []
    ys: list[float] = []
    best_rank, best_key, best_gain = math.inf, None, 0.0
    baseline_rank = next((rank for rank, gain in sorted(story_order.values()) if gain < 0.0), len(story_order))
    best_rank = baseline_rank - 0.5  # the baseline sits between the last set above 0 % and the first below
    started = False
    for (_, r), t in zip(d.iterrows(), hours, strict=True):
        if r["status"] != Status.OK:
            continue
        if r["kind"] == Kind.BASELINE:
            started = True
        else:
            key = set_key(r["env"], r["flags"] or ())
            if key in story_order and story_order[key][0] < best_rank:
                best_rank, best_key, best_gain = story_order[key][0], key, story_order[key][1]
                started = True
        if started:
            xs.append(t)
            ys.append(best_gain)
    if xs and hours:
        xs.append(max(hours))
        ys.append(ys[-1])
    return xs, ys, best_key


def _best_words(story: Story, best_key: str | None, what: str, gain: float) -> str:
    """The title's line on the set the step line ends at, as the decision has it: "use it" only
    for a set whose gain held on fresh launches; else it "looked best", not confirmed."""
    if best_key is None:
        return "no set above the baseline at the end"
    if best_key == story.best and story.confirmed:
        return f"confirmed, use it: {what}, {gain:+.1f} %"
    why = ("its confirmation failed" if best_key == story.best and story.confirmed is False
           else "not confirmed yet" if best_key == story.best else "not confirmed")
    return f"looked best at the end: {what}, {gain:+.1f} % ({why})"


def plot_history(ax: Axes, df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> HistoryPlot:
    """The night against the clock (module docstring) into ``ax``: each tuned relaunch's gain
    coloured by its verdict (its trial number beside it, up to 40 relaunches), the best set so far
    as a thick step line that ends at the set the verdict names (named in the title), the
    baseline launches as black squares joined by a line (drift), each re-measure marked by a
    dotted vertical line, failed and pending relaunches on the bottom edge with their status; the
    right axis in the study's tok/s at the baseline's level. The legend goes right of the axes.
    Returns what was drawn (:class:`HistoryPlot`)."""
    hours_all = relaunch_hours(df.sort_values("trial"))
    d = df.sort_values("trial").assign(_h=hours_all).sort_values(["_h", "trial"]).reset_index(drop=True)
    hours = list(d["_h"].to_numpy(float))
    x = np.asarray(hours)
    ok, failed, pending = ok_rows(d).to_numpy(), failed_rows(d).to_numpy(), pending_rows(d).to_numpy()
    base = (d["kind"] == Kind.BASELINE).to_numpy()
    ratio = d["vs_baseline"].to_numpy(float)
    gain = (ratio - 1.0) * 100.0  # gain_pct, over the array
    judged = ok & np.isfinite(gain)
    tuned = judged & ~base
    handles: list[Artist] = []
    order = {s.key: (i, s.gain_pct) for i, s in enumerate(story.sets) if math.isfinite(s.ratio)}
    best_x, best_y, best_key = _best_steps(d, hours, order)
    best_line = ""
    if best_x:
        best_set = story.find(best_key) if best_key is not None else None
        what = set_label(best_set.env, best_set.flags) if best_set is not None else "the untuned baseline"
        (step,) = ax.step(best_x, best_y, where="post", color=BEST_COLOR, lw=2.4, alpha=0.85, zorder=3,
                          label="best so far (the judgement's order:\nthe set the verdict names first)")
        handles.append(step)
        best_line = "\n" + _best_words(story, best_key, what, best_y[-1])
    for verdict in VERDICT_STYLE:  # legend order: from faster to slower
        sel = tuned & (d["verdict"] == verdict).to_numpy()
        if sel.any():
            ax.scatter(x[sel], gain[sel], s=40, color=verdict_color(verdict), marker=verdict_marker(verdict),
                       zorder=4, edgecolors="white", linewidths=0.5)
            handles.append(verdict_handle(verdict, min_effect))
    if (judged & base).any():
        (line,) = ax.plot(x[judged & base], gain[judged & base], "s-", color="black", lw=0.8, ms=6, zorder=4,
                          label="baseline launch, vs the others" + (" (joined: drift)" if (judged & base).sum() > 1 else ""))
        handles.append(line)
    if len(d) <= _LABELLED:
        for xi, yi, t in zip(x[judged], gain[judged], d.loc[judged, "trial"], strict=True):
            ax.annotate(str(int(t)), (xi, yi), textcoords="offset points", xytext=(4, -9), fontsize=7, color="#444444")
    first_base = ok_baselines(d)["trial"].min() if (ok & base).any() else None
    re_measures = [float(h) for h, t, b in zip(x, d["trial"], base, strict=True)
                   if b and first_base is not None and t > first_base]
    for h in re_measures:
        ax.axvline(h, color="black", ls=":", lw=0.8, zorder=1)
    if re_measures:
        handles.append(Line2D([], [], color="black", ls=":", lw=0.8, label="baseline re-measure"))
    if not judged.any():
        no_measurement(ax)
    else:
        ax.axhline(0.0, color="black", lw=0.6, zorder=1)
        if failed.any() or pending.any():
            bottom_room(ax)
    if failed.any():  # on the bottom edge, below every measurement: a failure has no tok/s
        edge_marks(ax, list(x[failed]), [str(s) for s in d.loc[failed, "status"]], FAILED_COLOR, "x",
                   "failed (status written)")
        handles.append(ax.collections[-1])
    if pending.any():
        edge_marks(ax, list(x[pending]), [str(s) for s in d.loc[pending, "status"]], PENDING_COLOR, "o",
                   "running or interrupted")
        handles.append(ax.collections[-1])
    span = max(hours) if hours else 0.0
    _clock_axis(ax, span if span > 0 else 1 / 60)
    ax.set_ylabel("gain vs the baseline (%)")
    level = story.baseline_level
    if math.isfinite(level) and judged.any():
        right = ax.secondary_yaxis("right", functions=(lambda g: level * (1 + np.asarray(g) / 100.0),
                                                       lambda t: (np.asarray(t) / level - 1.0) * 100.0))
        right.set_ylabel(f"{story.metric.described}\n(0 % = the baseline's {level:.1f})")
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.12, 1.0), borderaxespad=0)
    ax.set_title(f"The night against the clock: {plural(len(d), 'relaunch')} in {_duration(span)}{best_line}",
                 fontsize=11)
    ax.grid(alpha=0.3)
    return HistoryPlot(tuple(int(t) for t in d["trial"]), tuple(hours), tuple(float(g) if j else math.nan
                                                                            for g, j in zip(gain, judged, strict=True)),
                       tuple(best_x), tuple(best_y), best_key)


def history_figure(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> Figure:
    """A figure of :func:`plot_history`, wide enough for its legend."""
    fig = Figure(figsize=(12, 5), layout="constrained")
    plot_history(fig.subplots(), df, story, min_effect=min_effect)
    return fig
