"""Marks every figure draws the same way: which rows are ok, failed or pending, the empty axis,
the failed relaunches on the bottom edge with their status, a verdict's legend entry.

Used by :mod:`tuner.report.plots`, :mod:`tuner.report.history` and :mod:`tuner.report.effects`
so that a failed relaunch looks the same in each (a mark and its status, never a point at 0).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from tuner.record import Status, Verdict
from tuner.report.style import verdict_color, verdict_marker, verdict_words

__all__ = [
    "FAILED_COLOR",
    "PENDING_COLOR",
    "bottom_room",
    "edge_marks",
    "failed_rows",
    "no_measurement",
    "ok_rows",
    "pending_rows",
    "verdict_handle",
]

FAILED_COLOR = verdict_color(Verdict.FAILED)
PENDING_COLOR = verdict_color(Verdict.PENDING)


def ok_rows(df: pd.DataFrame) -> pd.Series:
    """True for the rows of ``df`` (a trials frame) measured ok with a tok/s."""
    return (df["status"] == Status.OK) & df["output_tok_s"].notna()


def failed_rows(df: pd.DataFrame) -> pd.Series:
    """True for the failed rows (interrupted ones are pending, not failed)."""
    return df["status"].map(lambda s: Status(s).failed and Status(s) is not Status.INTERRUPTED).astype(bool)


def pending_rows(df: pd.DataFrame) -> pd.Series:
    """True for the running and interrupted rows."""
    return df["status"].isin([Status.RUNNING, Status.INTERRUPTED])


def no_measurement(ax: Axes) -> None:
    """An empty axis that says so (no scale for values that do not exist)."""
    ax.set_yticks([])
    ax.text(0.5, 0.5, "no successful measurement yet", ha="center", va="center", transform=ax.transAxes,
            color="gray")


def bottom_room(ax: Axes, fraction: float = 0.18) -> None:
    """Room under the data for the marks on the bottom edge (failed relaunches and their status)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - fraction * (hi - lo), hi)


def edge_marks(ax: Axes, xs: list[float], texts: list[str], color: str, marker: str, label: str) -> None:
    """Marks on the bottom edge at ``xs`` (relaunches with no tok/s), each with its text above it."""
    on_edge = ax.get_xaxis_transform()
    ax.scatter(xs, [0.0] * len(xs), marker=marker, color=color, s=60, zorder=5, clip_on=False, transform=on_edge,
               label=label)
    for x, text in zip(xs, texts, strict=True):
        ax.annotate(text, (x, 0.0), xycoords=on_edge, textcoords="offset points", xytext=(0, 7), ha="center",
                    va="bottom", fontsize=7, color=color, rotation=90)


def verdict_handle(verdict: Verdict, min_effect: float | None) -> Line2D:
    """A legend entry for ``verdict``: its marker and colour, its words."""
    return Line2D([], [], ls="none", color=verdict_color(verdict), marker=verdict_marker(verdict),
                  label=verdict_words(verdict, min_effect))
