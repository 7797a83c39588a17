"""The forest plot: every measured set against the untuned baseline, one row each.

Rows, top to bottom (:func:`forest_rows`), in the order of every table
(:func:`tuner.report.frame.judged_order`): each launch of the baseline in the order it was
measured (so drift shows), then the tuned sets in the judgement's order, best first (the set the
verdict names, then by ratio; several launches of one set, e.g. a confirmation, stay together in
trial order); then rows with no ratio to draw: measured but not judged, running, interrupted and
not yet retried; failed relaunches last, their status written where the point would be. The
rows of the set the verdict names are marked (a band behind them and why: "use it" once its gain
held on fresh launches, else that it is not confirmed). An interrupted relaunch that a later trial retried has no row of its own: the retry's
row says ``retry of N`` and a note under the plot says so.

Each row's point is the frame's ``vs_baseline`` (ratio of the set's level to the level of every
baseline launch; a baseline launch's row: against the other baseline launches, so drift shows)
and its bar the interval its verdict was judged on
(``vs_baseline_ci_low``/``_high``), both coloured by the verdict
(:data:`tuner.report.style.VERDICT_STYLE`). The shaded band is the launch-to-launch noise the
intervals include (:func:`baseline_band`); the title's tok/s is the baseline's level, the
verdict's "Baseline:" (:attr:`tuner.report.story.Story.baseline_level`). Beyond :data:`MAX_ROWS` rows only the first and
last :data:`KEEP_ROWS` are drawn, with a row saying how many are not shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import blended_transform_factory, offset_copy

from tuner.judging import gain_pct
from tuner.record import Kind, Status, Verdict, set_key
from tuner.report.frame import baseline_name as _base
from tuner.report.frame import judged_order, ok_baselines, unlaunched_words
from tuner.report.story import Story
from tuner.report.style import (
    VERDICT_STYLE,
    names_key,
    plural,
    set_label,
    verdict_color,
    verdict_marker,
    verdict_words,
)

__all__ = [
    "ForestRow",
    "baseline_band",
    "forest_rows",
    "plot_trials_vs_baseline",
    "trials_vs_baseline_figure",
    "truncate_rows",
]

#: More rows than this and only the first and last :data:`KEEP_ROWS` are drawn.
MAX_ROWS = 60
KEEP_ROWS = 25
#: Columns that may carry a launch-to-launch noise estimate, in percent
#: (SD of one launch's level); :func:`baseline_band` prefers them to the baseline's own spread.
LAUNCH_NOISE_KEYS = ("launch_noise_pct", "launch_sigma_pct")
BAND_COLOR = "#9E9E9E"
#: The band behind the rows of the set the verdict names (a pale yellow no verdict uses).
MARK_COLOR = "#FFF2B3"
_CAUSE_CHARS = 48
_ROW_IN = 0.3  # inches per row


@dataclass(frozen=True)
class ForestRow:
    """One row of the forest plot.

    ``section``: ``baseline``, ``tuned``, ``unmeasured`` (no ratio: running, interrupted, not
    judged), ``failed``, or ``gap`` (the note standing for rows not shown). ``ratio``, ``low``,
    ``high``: the point and its interval (NaN when there is none); ``text``: what is written
    instead of a point (the status, or the note); ``detail``: the right-hand column (tok/s, gain
    and CI in percent, verdict; or the cause); ``mark``: on the rows of the set the verdict
    names, what it says of it (``recommended: use it``, ``looked best, not confirmed``: the decision's words), else empty.
    """

    label: str
    section: str
    verdict: Verdict
    trial: int | None = None
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    text: str = ""
    detail: str = ""
    mark: str = ""

    @property
    def has_point(self) -> bool:
        """True when the row draws a point (its ratio is known)."""
        return math.isfinite(self.ratio)

    @property
    def color(self) -> str:
        """The verdict's colour (grey for the gap note)."""
        return BAND_COLOR if self.section == "gap" else verdict_color(self.verdict)


def _pct(r: float) -> str:
    pct = round(gain_pct(r), 1)
    return f"{pct + 0.0:+.1f} %"  # + 0.0: never "-0.0 %"


def _retried(df: pd.DataFrame) -> dict[int, int]:
    """Interrupted trial -> the trial that retried it."""
    out: dict[int, int] = {}
    for _, r in df.iterrows():
        if pd.notna(r["retry_of_trial"]):
            out[int(r["retry_of_trial"])] = int(r["trial"])
        if r["status"] == Status.INTERRUPTED and pd.notna(r["retried_by_trial"]):
            out.setdefault(int(r["trial"]), int(r["retried_by_trial"]))
    return out


def _row_label(r: pd.Series, base_order: dict[int, int]) -> str:
    trial = int(r["trial"])
    if r["kind"] == Kind.BASELINE:
        first = base_order.get(trial, 1) == 0
        return f"{_base(r)}{'' if first else ' re-measure'}, trial {trial}"
    extra = [f"trial {trial}"]
    if r["kind"] == Kind.CONFIRM:
        extra.append("confirm")
    if pd.notna(r["retry_of_trial"]):
        extra.append(f"retry of {int(r['retry_of_trial'])}")
    return f"{set_label(r['env'], r['flags'] or ())} ({', '.join(extra)})"


def _measured_detail(r: pd.Series, min_effect: float | None) -> str:
    tok = f"{r['output_tok_s']:.1f} tok/s"
    lo, hi = r["vs_baseline_ci_low"], r["vs_baseline_ci_high"]
    ci = f"[{_pct(lo)} .. {_pct(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "[no CI]"
    if r["kind"] == Kind.BASELINE and not math.isfinite(lo):
        return f"{tok}  the only baseline launch"
    if r["kind"] == Kind.BASELINE:
        return f"{tok}  {_pct(r['vs_baseline'])} {ci}  vs the other baseline launches"
    words = verdict_words(r["verdict"], min_effect)
    note = str(r.get("verdict_note") or "")
    if r["verdict"] == Verdict.FAILED_CONFIRMATION and note:  # why, or a bar above the noise reads as a contradiction
        words += ": " + note.removeprefix("not confirmed: ").replace("on the new launches", "on its fresh launches")
    return f"{tok}  {_pct(r['vs_baseline'])} {ci}  {words}"


def _mark(story: Story) -> str:
    """What the forest plot writes beside the set the verdict names."""
    if story.confirmed is None:
        return "looked best, not yet confirmed"
    return "recommended: use it" if story.confirmed else "looked best, not confirmed"


def forest_rows(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> tuple[list[ForestRow], list[str]]:
    """Every row of the forest plot of ``df`` (a :func:`tuner.report.frame.trials_frame`) in
    drawing order (module docstring), and the notes to print under it. ``min_effect``
    (fraction): names the threshold in the ``below the minimum effect`` verdicts when given."""
    notes: list[str] = []
    base = ok_baselines(df)
    base_order = {int(t): i for i, t in enumerate(base["trial"])}
    retried = _retried(df)
    if len(base) > 1:
        notes.append(f"Each set is compared with the {len(base)} baseline launches, interpolated at its own place in the night; each baseline row, with the others.")
    for lost, by in sorted(retried.items()):
        notes.append(f"Trial {lost} was interrupted and retried as trial {by}.")
    rows: list[ForestRow] = []
    for _, r in judged_order(df, story).iterrows():
        trial, status, verdict = int(r["trial"]), Status(r["status"]), Verdict(r["verdict"])
        if status is Status.INTERRUPTED and trial in retried:
            continue
        label = _row_label(r, base_order)
        if status.failed and status is not Status.INTERRUPTED:
            cause = r["cause"] if len(r["cause"]) <= _CAUSE_CHARS else r["cause"][: _CAUSE_CHARS - 1] + "…"
            rows.append(ForestRow(label, "failed", Verdict.FAILED, trial, text=status.value, detail=cause))
        elif math.isfinite(r["vs_baseline"]):
            section = "baseline" if r["kind"] == Kind.BASELINE else "tuned"
            best = section == "tuned" and story.best is not None and set_key(r["env"], r["flags"] or ()) == story.best
            rows.append(ForestRow(label, section, verdict, trial, float(r["vs_baseline"]), float(r["vs_baseline_ci_low"]),
                                  float(r["vs_baseline_ci_high"]), detail=_measured_detail(r, min_effect),
                                  mark=_mark(story) if best else ""))
        else:
            text = {Status.RUNNING: "running", Status.INTERRUPTED: "interrupted, not retried yet"}.get(
                status, verdict.value)
            detail = {Status.RUNNING: "in flight: no result yet", Status.INTERRUPTED: r["cause"]}.get(
                status, r["verdict_note"] or (f"{r['output_tok_s']:.1f} tok/s" if status is Status.OK else ""))
            rows.append(ForestRow(label, "unmeasured", verdict, trial, text=text, detail=detail))
    return rows, notes


def truncate_rows(rows: list[ForestRow], max_rows: int = MAX_ROWS, keep: int = KEEP_ROWS) -> list[ForestRow]:
    """``rows`` when there are at most ``max_rows``, else the first and last ``keep`` with a
    ``gap`` row between them saying how many are not shown and what they were."""
    if len(rows) <= max_rows:
        return rows
    hidden = rows[keep:-keep]
    measured = [r for r in hidden if r.has_point]
    parts = []
    if measured:
        lo, hi = min(r.ratio for r in measured), max(r.ratio for r in measured)
        parts.append(f"{len(measured)} measured, {_pct(lo)} .. {_pct(hi)}")
    if len(hidden) > len(measured):
        parts.append(f"{len(hidden) - len(measured)} not measured")
    text = f"… {plural(len(hidden), 'row')} not shown ({'; '.join(parts)}): see trials.csv …"
    return [*rows[:keep], ForestRow(text, "gap", Verdict.PENDING, text=text), *rows[-keep:]]


def baseline_band(df: pd.DataFrame, story: Story) -> tuple[float, float, str] | None:
    """The shaded band (ratio low, ratio high, legend text), or None when it cannot be drawn.

    With a launch-noise estimate, in percent SD ``s``: ``1 -/+ 1.96 s``, where 95 % of launches
    of an unchanged set land. The estimate is a :data:`LAUNCH_NOISE_KEYS` column's first finite
    value, else the one the judgement's intervals include
    (``story``'s :attr:`tuner.report.story.Story.launch_noise`). Without any: the ok baseline launches' medians relative to the first one (the
    reference), from the lowest to the highest; None with fewer than two.
    """
    found = [df[key].dropna() for key in LAUNCH_NOISE_KEYS if key in df.columns]
    found.append(pd.Series([story.launch_noise * 100 if not df.empty else None]).dropna())
    for values in found:
        if len(values) and math.isfinite(float(values.iloc[0])):
            sigma = float(values.iloc[0]) / 100
            return 1 - 1.96 * sigma, 1 + 1.96 * sigma, f"launch-to-launch noise (±1.96 σ, σ = {sigma * 100:.1f} %)"
    medians = ok_baselines(df)["output_tok_s"].dropna().to_numpy(float)
    if len(medians) < 2:
        return None
    rel = medians / medians[0]
    return (float(rel.min()), float(rel.max()),
            f"baseline launch-to-launch spread ({len(medians)} launches: {_pct(rel.min())} .. {_pct(rel.max())})")


def _to_pct(ratio: Any) -> Any:
    return (np.asarray(ratio, dtype=float) - 1) * 100


def _from_pct(pct: Any) -> Any:
    return 1 + np.asarray(pct, dtype=float) / 100


def _x_limits(rows: list[ForestRow], band: tuple[float, float, str] | None) -> tuple[float, float]:
    xs = [1.0] + [v for r in rows for v in (r.ratio, r.low, r.high) if math.isfinite(v)]
    if band:
        xs += [band[0], band[1]]
    lo, hi = min(xs), max(xs)
    pad = max(0.06 * (hi - lo), 0.01)
    return lo - pad, hi + pad


def _legend_handles(rows: list[ForestRow], band: tuple[float, float, str] | None,
                    min_effect: float | None) -> list[Any]:
    handles: list[Any] = []
    seen = []
    for r in rows:
        if r.section != "gap" and r.verdict not in seen:
            seen.append(r.verdict)
    for v in [v for v in VERDICT_STYLE if v in seen]:  # from faster to slower, the same in every figure
        if v in (Verdict.FAILED, Verdict.PENDING):  # drawn as their status in a box
            what = "failed (status in the box; no tok/s)" if v is Verdict.FAILED else "running or interrupted"
            handles.append(Patch(fc="white", ec=verdict_color(v), lw=1, label=what))
        else:
            handles.append(Line2D([], [], color=verdict_color(v), marker=verdict_marker(v), ms=6, lw=2,
                                  label=verdict_words(v, min_effect)))
    handles.append(Line2D([], [], color="black", lw=1, label="1.0 = the baseline"))
    if band:
        handles.append(Patch(color=BAND_COLOR, alpha=0.3, label=band[2]))
    marked = next((r.mark for r in rows if r.mark), "")
    if marked:
        handles.append(Patch(color=MARK_COLOR, label=f"the set the verdict names ({marked})"))
    return handles


def plot_trials_vs_baseline(ax: Axes, df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> list[ForestRow]:
    """Draw the forest plot of ``df`` into ``ax`` (module docstring) and return the rows drawn,
    top to bottom. x: ratio to the baseline (1.0 marked), percent gain on the top axis; y: one
    row per set (labels in short form, :func:`tuner.report.style.set_label`); the right column
    gives tok/s, gain with its 95 % CI in percent and the verdict. The legend (verdicts present,
    the 1.0 line, the band, the short names and notes) goes under the axes. Artists carry gids
    (``forest-point``, ``forest-ci``, ``forest-status``, ``forest-detail``, ``forest-band``,
    ``forest-one``, ``forest-gap``) for tests and for restyling."""
    all_rows, notes = forest_rows(df, story, min_effect=min_effect)
    rows = truncate_rows(all_rows)
    band = baseline_band(df, story)
    right = blended_transform_factory(ax.transAxes, ax.transData)
    if band:
        ax.axvspan(band[0], band[1], color=BAND_COLOR, alpha=0.3, lw=0, gid="forest-band", zorder=0)
    ax.axvline(1.0, color="black", lw=1, gid="forest-one", zorder=1)
    prev = None
    for y, r in enumerate(rows):
        if prev is not None and r.section != prev and "gap" not in (r.section, prev):
            ax.axhline(y - 0.5, color="#CCCCCC", lw=0.8, zorder=0)  # between baseline, tuned, unmeasured, failed
        prev = r.section
        if r.section == "gap":
            ax.text(0.5, y, r.text, transform=right, ha="center", va="center", color="#5F5F5F", fontsize=8,
                    fontstyle="italic", gid="forest-gap")
            continue
        if r.mark:
            ax.axhspan(y - 0.5, y + 0.5, color=MARK_COLOR, lw=0, zorder=0, gid="forest-mark")
        if r.has_point:
            if math.isfinite(r.low) and math.isfinite(r.high):
                ax.plot([r.low, r.high], [y, y], "-|", color=r.color, lw=2, ms=7, gid="forest-ci", zorder=3)
            ax.plot([r.ratio], [y], ls="none", marker=verdict_marker(r.verdict), color=r.color, ms=7,
                    mec="white", mew=0.6, gid="forest-point", zorder=4)
        else:
            ax.text(1.0, y, r.text, ha="center", va="center", color=r.color, fontsize=8, fontweight="bold",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": r.color, "lw": 0.8},
                    gid="forest-status", zorder=5)
        ax.text(1.01, y, r.detail + (f"  ◀ {r.mark}" if r.mark else ""), transform=right, ha="left", va="center",
                color=r.color, fontsize=8, gid="forest-detail", fontweight="bold" if r.mark else "normal")
    ax.set_yticks(range(len(rows)), [r.label if r.section != "gap" else "" for r in rows], fontsize=8)
    for tick, r in zip(ax.get_yticklabels(), rows, strict=True):
        if (r.verdict is Verdict.FASTER and r.section == "tuned") or r.mark:
            tick.set_fontweight("bold")  # the sets worth using stand out without the colour
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(*_x_limits(rows, band))
    ax.grid(axis="x", alpha=0.3)
    untuned = not any(unlaunched_words(r) for _, r in ok_baselines(df).iterrows())  # else NCCL read settings we did not set
    ax.set_xlabel(f"ratio to the baseline (1.0 = as fast as the {'untuned ' if untuned else ''}server; right = faster)")
    top = ax.secondary_xaxis("top", functions=(_to_pct, _from_pct))
    top.xaxis.set_major_formatter(FuncFormatter(lambda p, _: f"{round(p, 6) + 0.0:+g} %"))
    top.set_xlabel("gain vs the baseline (%)", fontsize=9)
    ax.text(1.01, -0.5, "tok/s   gain [95 % CI]   verdict", transform=right, ha="left", va="bottom",
            fontsize=8, fontweight="bold")
    base = ok_baselines(df)
    level = story.baseline_level  # the verdict's "Baseline:"
    ref = f" ({level:.1f} tok/s)" if math.isfinite(level) else ""
    metric = story.metric.described  # what the x axis compares
    which = "the untuned baseline" if untuned else "the baseline (not untuned)"
    ax.set_title(f"Every measured set vs {which}{ref}\n{metric}, ratio of launch levels; "
                 "bars: 95 % CI with launch noise; best first (as the tables)",
                 fontsize=11)
    if band is None and not base.empty:
        notes.append("One baseline launch: its launch-to-launch spread is not measured (no band).")
    key = names_key(n for env in df["env"] for n in env)
    title = "\n".join(filter(None, [key, *notes]))
    handles = _legend_handles(rows, band, min_effect)
    below = offset_copy(ax.transAxes, fig=ax.get_figure(root=True), y=-30, units="points")
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below,
              ncol=min(3, len(handles)), fontsize=8, title=title or None, title_fontsize=7.5, frameon=False)
    return rows


def forest_figure_size(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> tuple[float, float]:
    """(width, height) in inches that fit :func:`plot_trials_vs_baseline` of ``df``: the height
    grows with the rows drawn, the width with the longest label and right-hand text."""
    rows = truncate_rows(forest_rows(df, story, min_effect=min_effect)[0])
    label = max((len(r.label) for r in rows if r.section != "gap"), default=20)
    detail = max((len(r.detail) + (len(r.mark) + 3 if r.mark else 0) for r in rows), default=20)
    width = min(max(6.0 + 0.062 * (label + detail), 11.0), 24.0)
    n_names = len({n for env in df["env"] for n in env})
    return width, 3.3 + _ROW_IN * len(rows) + 0.15 * n_names


def trials_vs_baseline_figure(df: pd.DataFrame, story: Story, *, min_effect: float | None = None) -> Figure:
    """A figure sized for :func:`plot_trials_vs_baseline` of ``df``, drawn (not registered with
    pyplot)."""
    fig = Figure(figsize=forest_figure_size(df, story, min_effect=min_effect), layout="constrained")
    plot_trials_vs_baseline(fig.subplots(), df, story, min_effect=min_effect)
    return fig
