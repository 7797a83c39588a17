"""tuner.report.plots: every plot draws into the Axes it is given; save_figures writes PNG + SVG.

Checked from the figure objects: titles, axis labels, legend entries, how many marks of each
kind were drawn and where.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from tests.helpers import sample_records, trial_record
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from tuner.report.frame import trials_frame
from tuner.report.plots import (
    FAILED_COLOR,
    plot_baselines,
    plot_concurrency,
    plot_history,
    plot_trials_vs_baseline,
    plot_variable_effect,
    save_figures,
    variable_effects_figure,
    variable_names,
)


@pytest.fixture
def df() -> pd.DataFrame:
    return trials_frame(sample_records(), min_effect=0.01)


def axes():
    """One Axes on a plain Figure (not pyplot's), as the report and a notebook pass them."""
    return Figure().subplots()


def legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_trials_vs_baseline(df):
    ax = axes()
    plot_trials_vs_baseline(ax, df)
    assert ax.get_title() == "Trials vs the untuned baseline"
    assert ax.get_xlabel().startswith("trial number") and "tok/s" in ax.get_ylabel()
    # one errorbar series per kind measured: baseline (0, 8), preset (1, 3, 4), search (6)
    series = {c.get_label(): list(c.lines[0].get_xdata()) for c in ax.containers}
    assert series == {"baseline (median, 95 % CI)": [0, 8], "preset (median, 95 % CI)": [1, 3, 4],
                      "search (median, 95 % CI)": [6]}
    failed = [c for c in ax.collections if c.get_label() == "failed trial (no tok/s)"]
    assert len(failed) == 1 and list(failed[0].get_offsets()[:, 0]) == [2, 5, 7]
    notes = [t.get_text() for t in ax.texts]
    assert {"crashed", "interrupted", "hung"} <= set(notes)
    assert any(n.startswith("best: trial 3, 80.7 tok/s (+14.7 %, faster)") for n in notes)
    assert legend_texts(ax)[:2] == ["baseline spread (all runs)", "baseline median 70.9 tok/s"]
    ticks = ax.get_xticks()
    assert np.allclose(ticks, np.round(ticks))  # whole trial numbers only


def test_history(df):
    ax = axes()
    twin = plot_history(ax, df)
    assert ax.get_xlabel() == "relaunch number" and twin.get_ylabel() == "cumulative wall time (h)"
    assert ax.get_title() == "Sweep history: 10 relaunches, 4.6 h of wall time"
    best = ax.lines[0]
    assert list(best.get_ydata()[1:]) == [70.2, 70.2, 80.7, 80.7, 80.7, 80.7, 80.7, 80.7, 80.7]  # held across gaps
    assert sorted(legend_texts(twin)) == sorted(["best tuned so far (tok/s)", "baseline median 70.9 tok/s",
                                  "tuned relaunch (tok/s)", "baseline measurement (tok/s)", "failed relaunch",
                                  "cumulative wall time (h)"])
    failed = next(c for c in ax.collections if c.get_label() == "failed relaunch")
    assert list(failed.get_offsets()[:, 0]) == [3, 6, 8]  # relaunch numbers of trials 2, 5, 7


def test_baselines(df):
    ax = axes()
    plot_baselines(ax, df)
    assert ax.get_title() == "Baseline over the sweep (2 measurements, drift 1.3 %)"
    (medians,) = ax.lines
    assert list(medians.get_xdata()) == [0, 8] and list(medians.get_ydata()) == [70.35, 71.25]
    runs = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in runs) == 8


def test_concurrency(df):
    ax = axes()
    assert plot_concurrency(ax, df) is True
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["trial 0: (untuned)", "trial 1: CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_ALGO=Ring NCC...",
                      "trial 3: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL", "trial 4: NCCL_PROTO=Simple",
                      "trial 6: NCCL_ALGO=Tree NCCL_PROTO=LL", "trial 8: (untuned) (re-measure)"]
    assert list(ax.lines[0].get_xdata()) == [1, 2, 4, 8] and ax.lines[5].get_linestyle() == "--"
    assert legend_texts(ax) == labels and ax.get_xscale() == "log"
    ax = axes()
    assert plot_concurrency(ax, trials_frame([trial_record(0, "baseline", [70.0, 71.0])], min_effect=0.01)) is False
    assert not ax.lines


def test_variable_effect_panels(df):
    assert variable_names(df) == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO", "NCCL_BUFFSIZE",
                                  "NCCL_MAX_NCHANNELS", "NCCL_PROTO"]
    ax = axes()
    plot_variable_effect(ax, df, "NCCL_PROTO")
    assert ax.get_title() == "NCCL_PROTO"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["unset", "LL", "LL128", "Simple"]
    # ok relaunches per value: unset = the baselines 0 and 8; LL: 1, 3, 6; Simple: 4 (blue dots)
    marks = [c for c in ax.collections if isinstance(c, PathCollection)]
    dots = [c for c in marks if np.allclose(c.get_facecolor()[0][:3], to_rgb("tab:blue"))]
    assert [len(c.get_offsets()) for c in dots] == [2, 3, 1]
    crosses = [c for c in marks if np.allclose(c.get_facecolor()[0][:3], to_rgb(FAILED_COLOR))]
    assert [c.get_offsets()[0][0] for c in crosses] == [0, 2]  # at "unset" (trial 7) and "LL128" (trial 2)
    # failures that are the set's: trial 2 (LL128) and 7 (unset PROTO); the interrupted trial 5 is not counted
    assert sorted(t.get_text() for t in ax.texts) == ["1 failed", "1 failed"]
    fig = variable_effects_figure(df)
    assert [a.get_title() for a in fig.axes if a.axison] == variable_names(df)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ok relaunch (tok/s)", "median per value",
                                                                  "failed relaunches", "baseline median"]


def test_save_figures_writes_png_and_svg(df, tmp_path):
    written = save_figures(df, tmp_path / "out")
    names = ["trials_vs_baseline", "variable_effects", "history", "baselines", "concurrency"]
    assert written == [tmp_path / "out" / f"{n}.png" for n in names]
    for png in written:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        svg = png.with_suffix(".svg").read_text()
        assert svg.startswith("<?xml") and "<svg" in svg
    assert plt.get_fignums() == []  # nothing left open in pyplot


@pytest.mark.parametrize("records", [
    [trial_record(0, "baseline", [70.0, 71.0, 70.5])],
    [trial_record(0, "baseline", status="crashed", cause="exit 1")],
    [trial_record(0, "baseline", status="running")],
], ids=["one-baseline", "baseline-failed", "in-flight"])
def test_small_studies_draw_without_error(records, tmp_path):
    df = trials_frame(records, min_effect=0.01)
    names = [p.stem for p in save_figures(df, tmp_path)]
    assert names == ["trials_vs_baseline", "variable_effects", "history", "baselines"]
