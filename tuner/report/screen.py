"""The screen's part of the report: the bound, the screen's ranking against the relaunches', the
predicted-vs-measured plot, and the two export paths side by side.

Read from :attr:`tuner.record.StudyInfo.screen` (a :class:`tuner.record.ScreenSummary`: what
the stage concluded) and
``results/<study>/screen.csv`` (every screen run, :mod:`tuner.screen.table`); the measured
gains come from the :class:`tuner.judging.judge.Judgement` the report already made. A set's predicted
gain is what its decode-size screen time would give if every allreduce of a token took that
long instead of the untuned time (:func:`tuner.screen.rank.predicted_gain_pct`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tuner.judging import Judgement, gain_pct
from tuner.record import ScreenSummary, StudyInfo
from tuner.report.frame import env_text
from tuner.report.model import Block, Section
from tuner.report.style import set_label

if TYPE_CHECKING:  # matplotlib is imported where the figure is drawn (the section's words need none)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
from tuner.report.svg import figure_svg
from tuner.report.text import export_lines, note_lines
from tuner.screen import SCREEN_CSV, Spearman, predicted_gain_pct, read_screen_csv, screen_key, spearman

__all__ = ["GainPoint", "gain_points", "label_places", "save_screen_figure", "screen_figure", "screen_section"]

#: File stem of the predicted-vs-measured figure.
FIGURE = "screen_gain"
#: Screened sets listed in report.md.
LISTED = 12
_DPI = 110
_LABEL_PT = 7.5


@dataclass(frozen=True)
class GainPoint:
    """One relaunched set: ``label``, ``key`` (its screened variables,
    :func:`tuner.screen.rank.screen_key`), ``predicted`` and ``measured`` gain (%, measured with
    its 95 % CI ``low``..``high``), ``trial`` (its first relaunch; -1 for the baseline),
    ``best``: True for the set the verdict names; ``short``: the set in short form
    (:func:`tuner.report.style.set_label`)."""

    label: str
    key: str
    predicted: float
    measured: float
    low: float
    high: float
    trial: int
    best: bool = False
    short: str = ""


@dataclass(frozen=True)
class ScreenPlot:
    """What :func:`plot_predicted_vs_measured` drew: the ``points``, each one's label text and
    height (``labels``, ``label_y``: points above the axes' bottom, in the column right of them) and the
    rank correlation printed under the title (``rho``, the one report.md states)."""

    points: tuple[GainPoint, ...]
    labels: tuple[str, ...]
    label_y: tuple[float, ...]
    rho: Spearman


def _decode_times(screen: pd.DataFrame, decode: int) -> dict[str, float]:
    """Median out-of-place time (us) per screened set at the decode size, untuned included."""
    ok = screen[(screen["status"] == "ok") & screen["size"].notna()]
    if ok.empty:
        return {}
    sizes = sorted(set(ok["size"].astype(int)))
    nearest = min(sizes, key=lambda s: abs(math.log(s / decode)))
    at = ok[ok["size"].astype(int) == nearest]
    return {str(k): float(v) for k, v in at.groupby("set")["time_us_oop"].median().items()}


def gain_points(summary: ScreenSummary, screen: pd.DataFrame, judgement: Judgement | None) -> list[GainPoint]:
    """Predicted and measured gain of every relaunched set with a screen time at the decode size
    (the baseline as the untuned set, 0 and 0), or [] without a bound to predict from."""
    bound = summary.bound
    untuned, per_token = summary.untuned_us, summary.allreduces_per_token
    tpot = bound.baseline_tpot_s if bound is not None else None
    if judgement is None or not untuned or not per_token or not tpot or bound is None or not bound.reliable:
        return []
    times = _decode_times(screen, summary.decode_bytes)
    points = [GainPoint("baseline", "{}", 0.0, 0.0, math.nan, math.nan, -1)] if judgement.baseline_launches else []
    for s in judgement.sets.values():
        t = times.get(screen_key(s.env))
        c = s.comparison
        if t is None or c is None or s.not_applied:
            continue
        predicted = predicted_gain_pct(t, untuned, per_token, tpot)
        if predicted is None:
            continue
        points.append(GainPoint(env_text(s.env) + (" " + " ".join(s.flags) if s.flags else ""), screen_key(s.env),
                                predicted,
                                c.gain_pct, gain_pct(c.ci_low), gain_pct(c.ci_high), s.first_trial,
                                s.key == judgement.winner, set_label(s.env, s.flags)))
    return points


def label_places(heights: Sequence[float], gap: float, low: float = 0.0, high: float = 1.0) -> list[float]:
    """Heights for labels wanted at ``heights`` (any order) that keep their order and at least
    ``gap`` apart, each as near its own as that allows, inside ``low``..``high`` when they fit
    (else from ``low`` up). Returned in the order given."""
    order = sorted(range(len(heights)), key=lambda i: heights[i])
    placed = [min(max(heights[i], low), high) for i in order]
    for k in range(1, len(placed)):  # push up what is too close to the one below
        placed[k] = max(placed[k], placed[k - 1] + gap)
    over = placed[-1] - high if placed else 0.0
    if over > 0:  # then down from the top, never below low
        placed[-1] -= over
        for k in range(len(placed) - 2, -1, -1):
            placed[k] = min(placed[k], placed[k + 1] - gap)
        shift = low - placed[0]
        if shift > 0:
            placed = [v + shift for v in placed]
    out = [0.0] * len(heights)
    for i, v in zip(order, placed, strict=True):
        out[i] = v
    return out


def _point_label(p: GainPoint) -> str:
    if p.trial < 0:
        return "baseline (untuned)"
    return f"t{p.trial} {p.short or p.label}" + ("  ◀ the verdict's best" if p.best else "")


def plot_predicted_vs_measured(ax: Axes, points: Sequence[GainPoint]) -> ScreenPlot:
    """Draw measured gain (%, with its 95 % CI) against the screen's predicted gain (%), one
    point per relaunched set (the one the verdict names ringed), the line where they agree, and
    the rank correlation under the title (:func:`tuner.screen.rank.spearman`, as report.md
    states it). Each point is labelled in a column right of the axes (trial and set in short
    form), joined to it by a thin line, the labels kept in the points' order and apart
    (:func:`label_places`). Returns what was drawn."""
    from matplotlib.transforms import ScaledTranslation

    xs = [p.predicted for p in points]
    ys = [p.measured for p in points]
    rho = spearman(xs, ys)
    if not points:
        ax.text(0.5, 0.5, "no relaunched set with a screen time", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return ScreenPlot((), (), (), rho)
    lo = [p.measured - p.low if not math.isnan(p.low) else 0.0 for p in points]
    hi = [p.high - p.measured if not math.isnan(p.high) else 0.0 for p in points]
    ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", color="#0072B2", ecolor="#56B4E9", capsize=3,
                label="relaunched set (95 % CI)", zorder=3)
    best = [p for p in points if p.best]
    if best:
        ax.scatter([p.predicted for p in best], [p.measured for p in best], s=190, facecolors="none",
                   edgecolors="#332288", linewidths=1.6, zorder=4, label="the set the verdict names")
    span = [min([*xs, *ys, 0.0]) - 1.0, max([*xs, *ys, 0.0]) + 1.0]
    ax.plot(span, span, ls="--", color="#999999", lw=1, label="measured = predicted")
    ax.axhline(0, color="#666666", lw=0.6)
    ax.axvline(0, color="#666666", lw=0.6)
    bottom = min([*(p.low for p in points if not math.isnan(p.low)), *ys, 0.0])
    top = max([*(p.high for p in points if not math.isnan(p.high)), *ys, 0.0])
    pad = 0.06 * max(top - bottom, 1.0)
    ax.set_ylim(bottom - pad, top + pad)
    ylo, yhi = ax.get_ylim()
    fig = ax.get_figure(root=True)
    assert fig is not None
    # Labels are placed in points above the axes' bottom, so a later layout cannot squeeze them
    # together; the axes' height is the laid-out one (the labels, right of the axes, move only
    # their width).
    ax.set_xlabel("gain the screen predicts (%)")
    ax.set_ylabel("gain the relaunches measured (%)")
    ax.set_title(f"Screen prediction vs relaunch measurement\n{rho.describe()}", fontsize=10)
    fig.draw_without_rendering()
    height_pt = max(ax.get_window_extent().height * 72 / fig.dpi, 1.0)
    wanted = [(p.measured - ylo) / (yhi - ylo) * height_pt for p in points]
    places = label_places(wanted, _LABEL_PT * 1.4, 0.0, height_pt)
    labels = [_point_label(p) for p in points]
    for p, text, y in zip(points, labels, places, strict=True):
        at = ax.transAxes + ScaledTranslation(0, y / 72, fig.dpi_scale_trans)
        ax.annotate(text, (p.predicted, p.measured), xytext=(1.03, 0.0), textcoords=at, va="center",
                    fontsize=_LABEL_PT, color="#332288" if p.best else "#333333",
                    fontweight="bold" if p.best else "normal", annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": "#BBBBBB", "lw": 0.6, "shrinkA": 0, "shrinkB": 3})
    ax.legend(loc="upper left", fontsize=8)
    return ScreenPlot(tuple(points), tuple(labels), tuple(places), rho)


def screen_figure(points: Sequence[GainPoint]) -> Figure:
    """The predicted-vs-measured figure (not registered with pyplot), wide enough for the labels."""
    from matplotlib.figure import Figure

    longest = max((len(_point_label(p)) for p in points), default=20)
    fig = Figure(figsize=(6.4 + 0.065 * longest, 4.8), layout="constrained")
    plot_predicted_vs_measured(fig.add_subplot(), points)
    return fig


def _ranking_table(summary: ScreenSummary, points: Sequence[GainPoint]) -> Block:
    """The stage's ranking (best first, ties by the prefill size) with predictions and what
    the relaunches measured."""
    decode, prefill = summary.decode_bytes, summary.prefill_bytes
    untuned, per_token = summary.untuned_us, summary.allreduces_per_token
    bound = summary.bound
    measured: dict[str, GainPoint] = {}
    for p in points:
        if p.trial >= 0:
            measured.setdefault(p.key, p)
    header = ("rank", "set", f"{decode} B (us)", "vs untuned", *((f"{prefill} B (us)",) if prefill else ()),
              "predicts", "relaunch measured")
    rows = []
    for i, entry in enumerate(summary.ranking[:LISTED], 1):
        t = float(entry.decode_us)
        vs = f"{(t / untuned - 1) * 100:+.1f} %" if untuned else ""
        pred = ""
        if untuned and per_token and bound is not None and bound.reliable and bound.baseline_tpot_s is not None:
            g = predicted_gain_pct(t, untuned, per_token, bound.baseline_tpot_s)
            pred = f"{g:+.1f} %" if g is not None else ""
        m = measured.get(entry.key)
        meas = f"{m.measured:+.1f} % (trial {m.trial}, CI {m.low:+.1f}..{m.high:+.1f} %)" if m is not None else ""
        cells = [str(i), env_text(entry.env), f"{t:.2f}", vs]
        if prefill:
            cells.append(f"{entry.prefill_us:.1f}" if entry.prefill_us is not None else "")
        rows.append((*cells, pred, meas))
    return Block("table", header=header, rows=tuple(rows))


def _json_env(key: str) -> dict[str, str]:
    value = json.loads(key)
    return value.get("env", value) if isinstance(value, dict) else {}


def _exports(summary: ScreenSummary, global_lines: Sequence[str], global_title: str) -> list[Block]:
    exp = summary.export
    conf = exp.conf
    plugin = ([f"NCCL_TUNER_PLUGIN=/path/to/libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE={conf}",
               "# unset NCCL_ALGO and NCCL_PROTO", "# " + conf, *exp.lines] if conf
              else ["# no tuner config: " + "; ".join(exp.notes or ["nothing screened"])])
    cell = "<td><pre>{}</pre></td>"
    out = [Block("heading", "Export: global variables and the per-size tuner plugin, side by side", level=3),
           Block("html", "<table><tr><th>" + html.escape(global_title) + "</th><th>Tuner plugin: per message size "
                 "(from the screen)</th></tr><tr>" + cell.format(html.escape("\n".join(global_lines)))
                 + cell.format(html.escape("\n".join(plugin))) + "</tr></table>")]
    out += [Block("paragraph", "Global variables apply to every message size: what wins at the decode size is forced on prefill's "
            "large allreduces too. The tuner plugin chooses per size. It must be built from the NCCL sources "
            "(`make` in `plugins/tuner/example`, giving `libnccl-tuner-example.so`) and loaded with "
            "`NCCL_TUNER_PLUGIN` (its path) and `NCCL_TUNER_CONFIG_FILE` (the file above)."
            + (f" {exp.compatibility}" if exp.compatibility else
               " Which tuner API versions your NCCL accepts is unknown (no NCCL version was logged)."))]
    if exp.csv:
        out.append(Block("paragraph", f"Measurements for NCCL's `scripts/optimize_config.py`: `{exp.csv}`."))
    notes = exp.notes
    if notes:
        out += [Block("paragraph", "What the example plugin will do that you may not expect:"),
                Block("list", items=tuple(notes))]
    return out


def global_export(info: StudyInfo, use: pd.Series | None) -> tuple[str, list[str]]:
    """(title, lines) of the global-variable export shown beside the plugin's: the set the
    relaunches confirmed (``use``, a trials-frame row), else the best screened set, said to be
    unconfirmed."""
    if use is not None:
        return (f"Global variables: the set relaunches confirmed (trial {int(use['trial'])})",
                export_lines(dict(use["env"]), info.server_command, list(use["flags"] or ()))
                + note_lines(dict(use["env"]), info.space_notes))
    best = info.screen.best_set if info.screen is not None else None
    if best:
        return ("Global variables: the best screened set (no relaunch confirmed it)",
                export_lines(dict(best), info.server_command) + note_lines(dict(best), info.space_notes))
    return "Global variables", ["# no set to export: keep the defaults"]


def _listed(items: Sequence[str]) -> list[Block]:
    """A list block of ``items``, none when there is none."""
    return [Block("list", items=tuple(items))] if items else []


def screen_section(info: StudyInfo, out_dir: Path, judgement: Judgement | None, *,
                   use: pd.Series | None = None, figure: str | None = None) -> Section | None:
    """The screen's section of the report, None when the study had no screen. ``use``: the
    trials-frame row of the set the report recommends (None: the best screened set is exported,
    said to be unconfirmed); ``figure``: the PNG name of the predicted-vs-measured figure when
    one was written."""
    s = info.screen
    if s is None:
        return None
    screen = read_screen_csv(out_dir / SCREEN_CSV)
    points = gain_points(s, screen, judgement)
    blocks = [Block("paragraph", f"{s.runs} nccl-tests runs before the tuned relaunches ({s.ended}); every run is "
                    f"in `{SCREEN_CSV}` and its output in `screen/`."),
              *_listed(s.size_reasons)]
    bound = s.bound
    if bound is not None:
        blocks += [Block("paragraph", f"**Bound.** {bound.sentence}" + (
                   f" A relaunch tells about {s.noise_pct:.1f} % from noise." if s.noise_pct else "")),
                   *_listed(bound.notes)]
    elif s.bound_note:
        blocks.append(Block("paragraph", f"**Bound.** Not given: {s.bound_note}."))
    if s.untuned_drift is not None:
        blocks.append(Block("paragraph", f"The untuned set's screen time moved {s.untuned_drift * 100:+.1f} % from "
                            "the first run to the last."))
    blocks += [Block("heading", "The screen's ranking against the relaunches", level=3), _ranking_table(s, points)]
    rho = spearman([p.predicted for p in points], [p.measured for p in points])
    blocks.append(Block("paragraph", "Agreement over the relaunched sets (the baseline counted as the untuned set): "
                        f"{rho.describe()}."))
    if figure:
        blocks.append(Block("figure", "predicted vs measured gain", stem=FIGURE, src=figure))
    bad = s.bad_sets
    if bad:
        blocks += [Block("paragraph", "Sets whose screen reported wrong values (never relaunched, never recommended):"),
                   Block("list", items=tuple(f"{env_text(_json_env(k))}: {v}" for k, v in bad.items()))]
    title, global_lines = global_export(info, use)
    blocks += _exports(s, global_lines, title)
    return Section("screen", "Screen", tuple(blocks))


def save_screen_figure(info: StudyInfo, out_dir: Path, judgement: Judgement | None, *,
                       svgs: dict[str, str] | None = None) -> str | None:
    """Write ``screen_gain.png``/``.svg`` when the study has a screen and a bound; returns the
    PNG's name, or None. ``svgs``: when given, the SVG text is put there under :data:`FIGURE`."""
    if info.screen is None:
        return None
    points = gain_points(info.screen, read_screen_csv(out_dir / SCREEN_CSV), judgement)
    if not points:
        return None
    fig = screen_figure(points)
    png = out_dir / f"{FIGURE}.png"
    fig.savefig(png, dpi=_DPI)
    svg = figure_svg(fig, f"{out_dir.name}/{FIGURE}")
    png.with_suffix(".svg").write_text(svg)
    if svgs is not None:
        svgs[FIGURE] = svg
    return png.name
