"""The effect of each variable: one panel per variable, each set that gave it a value at that
value with its gain and 95 % interval as the judgement has them.

A set is drawn only under the variables it sets: the untuned baseline is the 0 % line (the
verdict's baseline level), never an "unset" column that would hold every other set too. A set
that changes only that variable is drawn filled, one that changes others too open, with their
trial number above it (its forest-plot row names the others), so a value's effect is read from
the filled points and the open ones are said to be mixed. Points and intervals are the story's (:class:`tuner.report.story.SetFigures`:
the set's ratio on all its launches against the baseline at its own place in the night).
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
from matplotlib.patches import Patch

from tuner.judging import gain_pct
from tuner.record import Status, Verdict
from tuner.report.marks import FAILED_COLOR, PENDING_COLOR, bottom_room, verdict_handle
from tuner.report.story import Story
from tuner.report.style import SHORT_NAMES, VERDICT_STYLE, short_name, value_text, verdict_color, verdict_marker

__all__ = ["plot_variable_effect", "variable_effects_figure", "variable_names"]

#: The launch-noise band's colour (as the forest plot's).
NOISE_COLOR = "#9E9E9E"
#: More sets than this under one value and their trial numbers are not written.
_LABELLED = 8


@dataclass(frozen=True)
class EffectPoint:
    """One set under one value of the panel's variable: its ``key``, first ``trial``, ``gain``
    and interval ``low``..``high`` (% against the baseline), ``verdict``, and ``others``: the
    short names of the other variables (and flags) it changes, empty when it changes only this one."""

    value: str
    key: str
    trial: int
    gain: float
    low: float
    high: float
    verdict: Verdict
    others: tuple[str, ...]

    @property
    def alone(self) -> bool:
        """True when the set changes only this variable."""
        return not self.others


@dataclass(frozen=True)
class EffectPanel:
    """What :func:`plot_variable_effect` drew: the variable ``name``, its ``values`` left to
    right, the ``points`` (sets, best first within a value) and ``failed``: (value, status) of
    each relaunch that failed through its set there."""

    name: str
    values: tuple[str, ...]
    points: tuple[EffectPoint, ...]
    failed: tuple[tuple[str, str], ...]


def variable_names(df: pd.DataFrame) -> list[str]:
    """Every variable any relaunch of ``df`` set, sorted: one :func:`plot_variable_effect` panel each."""
    return sorted({name for env in df["env"] for name in env})


def _value_order(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(int(value, 0)), value)
    except ValueError:
        return (1, 0.0, value)


def _points(story: Story, name: str) -> list[EffectPoint]:
    out = []
    for s in story.sets:
        if name not in s.env or not math.isfinite(s.ratio):
            continue
        order = list(SHORT_NAMES)  # as set labels list them
        names = sorted((n for n in s.env if n != name), key=lambda n: (order.index(n) if n in order else len(order), n))
        others = tuple(short_name(n) for n in names) + tuple(s.flags)
        low = gain_pct(s.low) if math.isfinite(s.low) else math.nan
        high = gain_pct(s.high) if math.isfinite(s.high) else math.nan
        out.append(EffectPoint(s.env[name], s.key, s.trials[0], s.gain_pct, low, high, s.verdict, others))
    return out


def _noise_band(ax: Axes, story: Story) -> None:
    if math.isfinite(story.launch_noise):
        half = 1.96 * story.launch_noise * 100
        ax.axhspan(-half, half, color=NOISE_COLOR, alpha=0.25, lw=0, zorder=0, label="_noise")


def plot_variable_effect(ax: Axes, df: pd.DataFrame, story: Story, name: str, *, min_effect: float | None = None) -> EffectPanel:
    """The panel of variable ``name`` (module docstring) into ``ax``: x the values sets gave it
    (byte sizes as :func:`tuner.report.style.value_text`), y the gain against the baseline (%);
    each set a point with its 95 % interval, coloured and shaped by its verdict, filled when it
    changes only ``name`` and open otherwise (its trial number above its bar, up to 8 sets a
    value: the forest plot's row of that trial names the others); the baseline as the 0 % line in the launch-noise band; a red cross
    on the bottom edge, statuses under the value, for relaunches that failed through their set
    (:attr:`tuner.record.trial.Status.blames_set`) and a note for those still running.
    ``min_effect`` is accepted for the figures' common signature. Returns what was drawn."""
    points = _points(story, name)
    blamed = df["status"].map(lambda s: Status(s).blames_set).to_numpy(bool)
    failed = tuple((env[name], str(st)) for env, st, b in zip(df["env"], df["status"], blamed, strict=True)
                   if b and name in env)
    running = [env[name] for env, st in zip(df["env"], df["status"], strict=True)
               if st == Status.RUNNING and name in env]
    values = sorted({p.value for p in points} | {v for v, _ in failed} | set(running), key=_value_order)
    _noise_band(ax, story)
    ax.axhline(0.0, color="black", ls="--", lw=1, zorder=2, label="_baseline")
    for i, value in enumerate(values):
        here = [p for p in points if p.value == value]
        offsets = np.linspace(-0.3, 0.3, len(here)) if len(here) > 1 else [0.0] * len(here)
        for p, dx in zip(here, offsets, strict=True):
            color = verdict_color(p.verdict)
            if math.isfinite(p.low) and math.isfinite(p.high):
                ax.vlines(i + dx, p.low, p.high, color=color, lw=1.6, zorder=3)
            ax.scatter([i + dx], [p.gain], s=38, marker=verdict_marker(p.verdict), zorder=4,
                       facecolors=color if p.alone else "white", edgecolors=color if not p.alone else "white",
                       linewidths=1.4 if not p.alone else 0.5, label=f"_verdict {p.verdict.value}")
            if len(here) > _LABELLED:
                continue  # too many side by side to read their numbers
            top = p.high if math.isfinite(p.high) else p.gain  # its trial above its bar: one column each
            ax.annotate(f"t{p.trial}", (i + dx, top), textcoords="offset points", xytext=(0, 2), fontsize=6.5,
                        color="#444444", ha="center", va="bottom", zorder=5, annotation_clip=False)
    tick_labels = [value_text(name, v, "\n") for v in values]
    tick_pt = 8 + 9 * max((t.count("\n") + 1 for t in tick_labels), default=1)  # below the tick labels
    for i, value in enumerate(values):
        bad = [st for v, st in failed if v == value]
        if bad:
            ax.scatter([i], [0.0], marker="x", color=FAILED_COLOR, s=60, zorder=5, clip_on=False,
                       transform=ax.get_xaxis_transform(), label="failed (statuses under the value)")
        notes = [(f"{bad.count(st)} {st}", FAILED_COLOR) for st in dict.fromkeys(bad)]
        count = running.count(value)
        notes += [(f"{count} running", PENDING_COLOR)] if count else []
        for k, (text, color) in enumerate(notes):  # under the value's tick label, one line each
            ax.annotate(text, (i, 0.0), xycoords=ax.get_xaxis_transform(), textcoords="offset points",
                        xytext=(0, -tick_pt - 9 * k), ha="center", va="top", fontsize=7, color=color)
    ax.margins(y=0.12)  # room for the trial numbers above the bars
    if failed:
        bottom_room(ax, 0.08)
    ax.set_xticks(range(len(values)), tick_labels, fontsize=7)
    ax.set_xlim(-0.6, max(len(values), 1) - 0.4)
    short = short_name(name)
    title = name if short == name else f"{name} ({short})"
    sets = {p.key for p in points}
    if len(sets) == 1 and not failed:  # one set: a point, not this variable's effect
        p = points[0]
        mixed = f", with {len(p.others)} other change{'s' if len(p.others) > 1 else ''}: not its effect alone" \
            if p.others else ""
        title += f"\none set only (t{p.trial}{mixed})"
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("gain vs the baseline (%)")
    ax.grid(alpha=0.3)
    return EffectPanel(name, tuple(values), tuple(points), failed)


def _legend(fig: Figure, story: Story, shown: set[Verdict], crosses: bool, min_effect: float | None) -> None:
    legend: list[Artist] = [verdict_handle(v, min_effect) for v in VERDICT_STYLE if v in shown]
    legend += [Line2D([], [], ls="none", marker="o", color="#444444", label="filled: the set changes only this variable"),
               Line2D([], [], ls="none", marker="o", mfc="white", mec="#444444", mew=1.4,
                      label="open: it changes others too (its trial's row in the forest plot names them)"),
               Line2D([], [], color="#444444", lw=1.6, label="95 % CI, as judged")]
    level = story.baseline_level
    legend.append(Line2D([], [], color="black", ls="--", lw=1, label="the baseline" + (f" ({level:.1f} tok/s)"
                                                                                  if math.isfinite(level) else "")))
    if math.isfinite(story.launch_noise):
        legend.append(Patch(color=NOISE_COLOR, alpha=0.25,
                            label=f"launch-to-launch noise (±1.96 σ, σ = {story.launch_noise * 100:.1f} %)"))
    if crosses:
        legend.append(Line2D([], [], ls="none", marker="x", color=FAILED_COLOR, label="failed (statuses under the value)"))
    fig.legend(handles=legend, loc="outside lower center", ncol=min(len(legend), 3), fontsize=8)


def variable_effects_figure(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> Figure:
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
    most = max(len({env[name] for env in df["env"] if name in env}) for name in names)
    ncols = min(3, len(names)) if most <= 10 else 1  # many values: one panel a row, as wide as they need
    panel_w = 4.8 if ncols > 1 else min(max(8.0, 0.32 * most), 18.0)
    nrows = math.ceil(len(names) / ncols)
    fig = Figure(figsize=(panel_w * ncols, 3.8 * nrows + 1.3), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    shown: set[Verdict] = set()
    crosses = False
    for ax, name in zip(axes.flat, names, strict=False):
        panel = plot_variable_effect(ax, df, story, name, min_effect=min_effect)
        shown |= {p.verdict for p in panel.points}
        crosses = crosses or bool(panel.failed)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(f"Each set's gain vs the baseline with its 95 % CI, as judged ({story.metric.described}), under the "
                 "value it gave each variable", fontsize=10)
    _legend(fig, story, shown, crosses, min_effect)
    return fig
