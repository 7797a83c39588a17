"""tuner.report.plots, .forest and .style: every plot draws into the Axes it is given; the
figures are the same wherever they are drawn; save_figures writes PNG + SVG.

Checked from the figure objects: titles, axis labels, legend entries, how many marks of each
kind were drawn and where. The pictures of whole sweeps are checked in test_pictures.py.
"""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from tests.helpers import sample_records, trial_record
from tuner.judging import PRIOR_LAUNCH_SIGMA
from tuner.record import Metric, Verdict
from tuner.report.forest import ForestRow, baseline_band, forest_rows, plot_trials_vs_baseline, truncate_rows
from tuner.report.frame import judged_trials, trials_frame
from tuner.report.history import clock_text, relaunch_hours
from tuner.report.plots import (
    FAILED_COLOR,
    BaselinePlot,
    concurrency_figure,
    plot_baselines,
    plot_concurrency,
    plot_history,
    plot_variable_effect,
    report_figures,
    save_figures,
    variable_effects_figure,
    variable_names,
)
from tuner.report.story import Story
from tuner.report.style import (
    VERDICT_STYLE,
    names_key,
    plural,
    set_label,
    size_text,
    verdict_words,
)


@pytest.fixture
def judged() -> tuple[pd.DataFrame, Story]:
    return judged_trials(sample_records(), metric=Metric.OUTPUT, min_effect=0.01)


@pytest.fixture
def df(judged) -> pd.DataFrame:
    return judged[0]


@pytest.fixture
def story(judged) -> Story:
    return judged[1]


def axes():
    """One Axes on a plain Figure (not pyplot's), as the report and a notebook pass them."""
    return Figure().subplots()


def legend_texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()] if legend else []


# -- style -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "text"), [
    ("16777216", "16777216 (16 MiB)"), ("4194304", "4194304 (4 MiB)"), ("1572864", "1572864 (1.5 MiB)"),
    ("65536", "65536 (64 KiB)"), ("1073741824", "1073741824 (1 GiB)"), ("1000", "1000"), ("1000000", "1000000"),
    ("16M", "16M"), ("0x1000000", "0x1000000"), ("", ""),
])
def test_size_text_puts_the_value_nccl_reads_first(value, text):
    assert size_text(value) == text


def test_set_label_short_names_in_order_flags_as_written():
    env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_BUFFSIZE": "16777216", "NCCL_MAX_NCHANNELS": "16",
           "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_IB_TIMEOUT": "22", "NCCL_P2P_NET_CHUNKSIZE": "524288"}
    assert set_label(env, ["--disable-custom-all-reduce", "--max-num-seqs", "8"]) == (
        "PROTO=LL ALGO=Ring CH=16 BUF=16777216 (16 MiB) CDMC=1 IB_TIMEOUT=22 P2P_NET_CHUNKSIZE=524288 (512 KiB) "
        "--disable-custom-all-reduce --max-num-seqs 8")
    assert set_label({}) == "(untuned)"
    key = names_key(env)
    assert key.startswith("Short names: PROTO = NCCL_PROTO, ALGO = NCCL_ALGO, CH = NCCL_MAX_NCHANNELS, ")
    assert "BUF = NCCL_BUFFSIZE (bytes)" in key and "CDMC = CUDA_DEVICE_MAX_CONNECTIONS" in key
    assert names_key(["SOME_OTHER"]) == ""


def test_every_verdict_has_its_own_colour_and_words():
    assert set(VERDICT_STYLE) == set(Verdict)
    assert len({c for c, _ in VERDICT_STYLE.values()}) == len(Verdict)
    assert verdict_words(Verdict.FASTER_BELOW_MIN, 0.01) == "faster, below the 1 % that matters"
    assert verdict_words(Verdict.SLOWER_BELOW_MIN, 0.02) == "slower, below the 2 % that matters"
    assert verdict_words(Verdict.FASTER_BELOW_MIN) == "faster, below the minimum effect"
    assert verdict_words("faster", 0.01) == "faster"
    assert [plural(1, "relaunch"), plural(2, "relaunch"), plural(1, "row"), plural(0, "row")] == [
        "1 relaunch", "2 relaunches", "1 row", "0 rows"]


# -- the forest plot's rows and band ----------------------------------------------------------

def test_forest_rows_order_and_sections(df, story):
    rows, notes = forest_rows(df, story, min_effect=0.01)
    assert [(r.trial, r.section) for r in rows] == [
        (0, "baseline"), (8, "baseline"), (3, "tuned"), (1, "tuned"), (6, "tuned"), (4, "tuned"),
        (9, "unmeasured"), (2, "failed"), (7, "failed")]  # interrupted 5 was retried by 6: no row
    assert rows[4].label == "PROTO=LL ALGO=Tree (trial 6, retry of 5)"
    assert re.fullmatch(r"80\.7 tok/s  \+1\d\.\d % \[\+\d+\.\d % \.\. \+\d+\.\d %\]  faster", rows[2].detail)
    assert rows[0].detail.startswith("70.3 tok/s  -") and rows[0].detail.endswith("vs the other baseline launches")
    assert [(r.text, r.detail) for r in rows[-2:]] == [
        ("crashed", "exited with code 1: NCCL WARN [LL128] protocol …"), ("hung", "no token for 120 s")]
    assert rows[6].text == "running" and rows[6].verdict is Verdict.PENDING
    assert "Trial 5 was interrupted and retried as trial 6." in notes


def test_forest_rows_keep_the_launches_of_one_set_together():
    tuned = {"NCCL_PROTO": "LL"}
    df, story = judged_trials([trial_record(0, "baseline", [70.0, 70.4, 69.8]),
                       trial_record(1, "preset", [77.0, 77.5, 76.8], env=tuned),
                       trial_record(2, "preset", [78.5, 78.0, 78.2], env={"NCCL_ALGO": "Ring"}),
                       trial_record(3, "confirm", [76.0, 76.3, 75.9], env=tuned)],
                      metric=Metric.OUTPUT, min_effect=0.01)
    rows, _ = forest_rows(df, story)
    assert [r.label for r in rows] == ["baseline (untuned), trial 0", "ALGO=Ring (trial 2)",
                                       "PROTO=LL (trial 1)", "PROTO=LL (trial 3, confirm)"]


def test_truncate_rows_keeps_top_and_bottom_with_a_note():
    rows = [ForestRow(f"r{i}", "tuned", Verdict.NO_DIFFERENCE, i, ratio=1 + i / 1000) for i in range(70)]
    rows += [ForestRow("f", "failed", Verdict.FAILED, 70, text="hung")]
    out = truncate_rows(rows)
    assert len(out) == 51 and out[:25] == rows[:25] and out[-25:] == rows[-25:]
    assert out[25].section == "gap"
    assert out[25].text == "… 21 rows not shown (21 measured, +2.5 % .. +4.5 %): see trials.csv …"
    assert truncate_rows(rows[:60]) == rows[:60]


def test_baseline_band_from_the_judgement_or_a_noise_column(df, story):
    low, high, label = baseline_band(df, story)  # the launch noise the intervals include
    sigma = story.launch_noise
    assert (low, high) == (pytest.approx(1 - 1.96 * sigma), pytest.approx(1 + 1.96 * sigma))
    assert label == f"launch-to-launch noise (±1.96 σ, σ = {sigma * 100:.1f} %)"
    with_noise = df.assign(launch_noise_pct=0.8)
    low, high, label = baseline_band(with_noise, story)
    assert (low, high) == (pytest.approx(1 - 0.01568), pytest.approx(1 + 0.01568))
    assert label == "launch-to-launch noise (±1.96 σ, σ = 0.8 %)"
    one = judged_trials([trial_record(0, "baseline", [70.0, 71.0])], metric=Metric.OUTPUT, min_effect=0.01)
    assert baseline_band(*one)[0] == pytest.approx(1 - 1.96 * PRIOR_LAUNCH_SIGMA)  # one launch: the prior


def test_plot_trials_vs_baseline_on_a_given_axes(df, story):
    ax = axes()
    rows = plot_trials_vs_baseline(ax, df, story, min_effect=0.01)
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.label for r in rows]
    level = story.baseline_level  # the verdict's "Baseline:"
    assert ax.get_title().startswith(f"Every measured set vs the untuned baseline ({level:.1f} tok/s)\n"
                                     "single-stream output tok/s, ratio of launch levels")
    assert ax.get_xlabel().startswith("ratio to the baseline")
    (top,) = ax.child_axes
    assert top.get_xlabel() == "gain vs the baseline (%)"
    one = [line for line in ax.lines if line.get_gid() == "forest-one"]
    assert len(one) == 1 and list(one[0].get_xdata()) == [1.0, 1.0]
    labels = legend_texts(ax.get_legend())
    assert labels[:4] == ["baseline", "faster", "no significant difference", "slower"]
    assert "failed (status in the box; no tok/s)" in labels and "running or interrupted" in labels
    assert "Short names: PROTO = NCCL_PROTO" in ax.get_legend().get_title().get_text()
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["PROTO=LL CH=8 (trial 3)"]
    assert [(r.trial, r.mark) for r in rows if r.mark] == [(3, "looked best, not yet confirmed")]  # the verdict's best
    assert "the set the verdict names (looked best, not yet confirmed)" in labels
    assert [m.get_y() + m.get_height() / 2 for m in ax.patches if m.get_gid() == "forest-mark"] == [2.0]


# -- the other figures -----------------------------------------------------------------------

def test_history_is_against_the_clock_with_the_best_so_far(df, story):
    ax = axes()
    drawn = plot_history(ax, df, story, min_effect=0.01)
    story = story
    assert ax.get_xlabel() == "time since the first launch began (h:mm)"
    assert ax.get_ylabel() == "gain vs the baseline (%)"
    assert ax.get_title().startswith("The night against the clock: 10 relaunches in 6.0 h\n"
                                     "looked best at the end: PROTO=LL CH=8, +14.1 % (not confirmed yet)")
    # each relaunch at its end (start + wall time; trial 9 still running: its start), in hours from trial 0's start
    assert drawn.trials == tuple(range(10))
    assert drawn.hours == pytest.approx([(2400 * t + w) / 3600 for t, w in zip(range(10), [2290, 2290, 900, 2290, 2290,
                                                                                          900, 2290, 900, 2290, 0], strict=True)])
    ll8 = story.find(story.best)
    assert drawn.gains[3] == pytest.approx(ll8.gain_pct) and math.isnan(drawn.gains[2])  # crashed: no ratio
    # the best so far: the baseline (0 %) until trial 3's set, which the verdict names; held to the end
    assert drawn.best == story.best
    assert drawn.best_gains == pytest.approx([0.0, 0.0, ll8.gain_pct, ll8.gain_pct, ll8.gain_pct, ll8.gain_pct,
                                              ll8.gain_pct])
    assert drawn.best_hours[-1] == pytest.approx(max(drawn.hours))
    (best,) = [line for line in ax.lines if str(line.get_label()).startswith("best so far")]
    assert list(best.get_ydata()) == pytest.approx(list(drawn.best_gains))
    assert ax.xaxis.get_major_formatter()(1.5, 0) == "1:30"
    baseline = next(line for line in ax.lines if str(line.get_label()).startswith("baseline launch"))
    assert list(baseline.get_ydata()) == pytest.approx([(df["vs_baseline"][0] - 1) * 100,
                                                        (df["vs_baseline"][8] - 1) * 100])
    re_measures = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert [list(line.get_xdata()) for line in re_measures] == [[drawn.hours[8]] * 2]
    failed = next(c for c in ax.collections if c.get_label() == "failed (status written)")
    assert list(failed.get_offsets()[:, 0]) == pytest.approx([drawn.hours[2], drawn.hours[7]])
    pending = next(c for c in ax.collections if c.get_label() == "running or interrupted")
    assert list(pending.get_offsets()[:, 0]) == pytest.approx([drawn.hours[5], drawn.hours[9]])
    assert {"crashed", "hung", "interrupted", "running"} <= {t.get_text() for t in ax.texts}
    assert legend_texts(ax.get_legend()) == [
        "best so far (the judgement's order:\nthe set the verdict names first)", "faster", "no significant difference",
        "slower", "baseline launch, vs the others (joined: drift)", "baseline re-measure", "failed (status written)",
        "running or interrupted"]


def test_clock_text():
    assert [clock_text(0.0), clock_text(1.5), clock_text(10.25), clock_text(0.01, seconds=True)] == [
        "0:00", "1:30", "10:15", "0:00:36"]


def test_relaunch_hours_without_start_times_is_the_cumulative_wall_time(df):
    old = df.assign(started_at=float("nan"), finished_at=float("nan"))
    assert relaunch_hours(old) == pytest.approx(list(df["wall_s"].fillna(0).cumsum() / 3600))


def test_baselines_are_the_judgements(df, story):
    ax = axes()
    drawn = plot_baselines(ax, df, story)
    story = story
    assert drawn == BaselinePlot((0, 8), story.baseline_levels, story.drift, story.baseline_level)
    assert ax.get_title() == f"The baseline over the sweep (2 launches, drift {story.drift * 100:.1f} %)"
    levels, level = ax.lines  # the robust levels, within a few tenths of the medians 70.35 and 71.25
    assert list(levels.get_xdata()) == [0, 8] and list(levels.get_ydata()) == list(story.baseline_levels)
    assert list(levels.get_ydata()) == pytest.approx([70.35, 71.25], abs=0.15)
    assert list(level.get_ydata()) == [story.baseline_level] * 2
    assert f"the baseline's level, {story.baseline_level:.1f} tok/s (geometric mean)" in legend_texts(ax.get_legend())
    runs = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sum(len(c.get_offsets()) for c in runs) == 8
    ax = axes()
    plot_baselines(ax, *judged_trials([trial_record(0, "baseline", [70.0, 71.0])], metric=Metric.OUTPUT, min_effect=0.01))
    assert ax.get_title() == "The baseline over the sweep (1 launch: drift not measured)"


def test_concurrency_legend_whole_and_baselines_apart(df):
    ax = axes()
    assert plot_concurrency(ax, df) is True
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["baseline (untuned), trial 0", "baseline (untuned) re-measure, trial 8",
                      "PROTO=LL ALGO=Ring CH=16 BUF=16777216 (16 MiB) CDMC=1 (trial 1)", "PROTO=LL CH=8 (trial 3)",
                      "PROTO=Simple (trial 4)", "PROTO=LL ALGO=Tree (trial 6)"]
    styles = [(to_hex(line.get_color()), line.get_linestyle(), line.get_marker()) for line in ax.lines]
    assert styles[0] == ("#000000", "-", "s") and styles[1] == ("#5f5f5f", "--", "D")
    assert len(set(styles)) == len(styles)  # every line told apart
    assert list(ax.lines[0].get_xdata()) == [1, 2, 4, 8] and ax.get_xscale() == "log"
    assert legend_texts(ax.get_legend()) == labels
    fig = concurrency_figure(df)
    FigureCanvasAgg(fig).draw()
    legend = fig.axes[0].get_legend().get_window_extent()
    assert fig.bbox.x0 <= legend.x0 and legend.x1 <= fig.bbox.x1  # not cut by the figure's edge
    assert legend.x0 >= fig.axes[0].get_window_extent().x1  # outside the axes
    relative = fig.axes[1]  # each set over the first baseline launch at the same C
    assert list(relative.lines[0].get_ydata()) == [1.0, 1.0, 1.0, 1.0]
    assert relative.lines[3].get_ydata()[0] == pytest.approx(80.6 / 70.0)
    assert concurrency_figure(trials_frame([trial_record(0, "baseline", [70.0, 71.0])], metric=Metric.OUTPUT, min_effect=0.01)) is None


def test_variable_effect_panels(df, story):
    assert variable_names(df) == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO", "NCCL_BUFFSIZE",
                                  "NCCL_MAX_NCHANNELS", "NCCL_PROTO"]
    story = story
    ax = axes()
    panel = plot_variable_effect(ax, df, story, "NCCL_PROTO")
    assert ax.get_title() == "NCCL_PROTO (PROTO)" and ax.get_ylabel() == "gain vs the baseline (%)"
    # no "unset" column: only the sets that set NCCL_PROTO, each at its value
    assert panel.values == ("LL", "LL128", "Simple")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["LL", "LL128", "Simple"]
    assert [(p.value, p.trial, p.others) for p in panel.points] == [
        ("LL", 3, ("CH",)), ("LL", 1, ("ALGO", "CH", "BUF", "CDMC")), ("LL", 6, ("ALGO",)), ("Simple", 4, ())]
    for p in panel.points:  # the judgement's ratio and interval, in percent
        s = story.find(p.key)
        assert (p.gain, p.low, p.high, p.verdict) == (pytest.approx(s.gain_pct), pytest.approx((s.low - 1) * 100),
                                                      pytest.approx((s.high - 1) * 100), s.verdict)
    dots = [c for c in ax.collections if str(c.get_label()).startswith("_verdict ")]
    assert sorted(round(float(c.get_offsets()[0][0])) for c in dots) == [0, 0, 0, 2]
    filled = [c for c in dots if to_hex(c.get_facecolor()[0]) != "#ffffff"]
    assert [round(float(c.get_offsets()[0][0])) for c in filled] == [2]  # only PROTO=Simple changes PROTO alone
    assert [line.get_ydata()[0] for line in ax.lines if line.get_label() == "_baseline"] == [0.0]
    crosses = [c for c in ax.collections if c.get_label() == "failed (statuses under the value)"]
    assert [c.get_offsets()[0][0] for c in crosses] == [1]  # at LL128 (trial 2); trial 7 set no PROTO
    assert all(to_hex(c.get_facecolor()[0]) == FAILED_COLOR.lower() for c in crosses)
    assert panel.failed == (("LL128", "crashed"),)
    assert sorted(t.get_text() for t in ax.texts if not t.get_text().startswith("t")) == ["1 crashed"]
    ax = axes()
    panel = plot_variable_effect(ax, df, story, "NCCL_BUFFSIZE")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4194304\n(4 MiB)", "16777216\n(16 MiB)"]
    assert "1 running" in [t.get_text() for t in ax.texts]
    fig = variable_effects_figure(df, story, min_effect=0.01)
    assert [a.get_title() for a in fig.axes if a.axison] == [
        # a panel whose one point is one set that changes others too says so: not that variable's effect
        "CUDA_DEVICE_MAX_CONNECTIONS (CDMC)\none set only (t1, with 4 other changes: not its effect alone)",
        "NCCL_ALGO (ALGO)", "NCCL_BUFFSIZE (BUF)\none set only (t1, with 4 other changes: not its effect alone)",
        "NCCL_MAX_NCHANNELS (CH)", "NCCL_PROTO (PROTO)"]
    assert legend_texts(fig.legends[0]) == [
        "faster", "no significant difference", "slower", "filled: the set changes only this variable",
        "open: it changes others too (its trial's row in the forest plot names them)", "95 % CI, as judged",
        f"the baseline ({story.baseline_level:.1f} tok/s)",
        f"launch-to-launch noise (±1.96 σ, σ = {story.launch_noise * 100:.1f} %)", "failed (statuses under the value)"]


def test_save_figures_writes_png_and_svg(df, tmp_path, story):
    written = save_figures(df, story, tmp_path / "out", min_effect=0.01)
    names = ["trials_vs_baseline", "variable_effects", "history", "baselines", "concurrency"]
    assert written == [tmp_path / "out" / f"{n}.png" for n in names]
    assert [name for name, _ in report_figures(df, story)] == names  # what the notebook draws
    for png in written:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        svg = png.with_suffix(".svg").read_text()
        assert svg.startswith("<?xml") and "<svg" in svg
    assert plt.get_fignums() == []  # nothing left open in pyplot


@pytest.mark.parametrize("records", [
    [trial_record(0, "baseline", [70.0, 71.0, 70.5])],
    [trial_record(0, "baseline", status="crashed", cause="exit 1")],
    [trial_record(0, "baseline", status="running")],
    [trial_record(0, "baseline", status="crashed", cause="exit 1"),
     trial_record(1, "preset", [70.0, 71.0], env={"NCCL_PROTO": "LL"})],
], ids=["one-baseline", "baseline-failed", "in-flight", "no-ok-baseline"])
def test_small_studies_draw_without_error(records, tmp_path):
    df, story = judged_trials(records, metric=Metric.OUTPUT, min_effect=0.01)
    names = [p.stem for p in save_figures(df, story, tmp_path)]
    assert names == ["trials_vs_baseline", "variable_effects", "history", "baselines"]
    rows, _ = forest_rows(df, story)
    assert all(r.has_point or r.text for r in rows)
    assert not any(math.isnan(r.ratio) and r.section in ("baseline", "tuned") for r in rows)
