"""The pictures of whole sweeps (picture_cases.py): a sweep with failures, one with a winner, one
of a single trial, ten sets with one faster, one slower and one failed, and more rows than the
forest plot draws. Each forest plot is read back from the figure object as a person reads the
image: the row labels and their order, how many rows, each row's colour against its verdict in
the trials table, the 1.0 line, the baseline band, the failed rows' status, the truncation note;
and no text of any figure falls outside its figure (nothing cut).

Set ``NCCL_TUNE_PLOTS_LOOK=/some/dir`` to also write every figure of every case to
``/some/dir/<case>/`` (PNG and SVG) for a person to look at.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from tests.unit.report.picture_cases import CASES, JUDGED, every_verdict
from tuner.judging import PRIOR_LAUNCH_SIGMA
from tuner.record import Metric, Status, Verdict
from tuner.report.forest import trials_vs_baseline_figure
from tuner.report.frame import judged_trials
from tuner.report.plots import report_figures, save_figures
from tuner.report.story import Story
from tuner.report.style import verdict_color

_TRIAL = re.compile(r"trial (\d+)")


@functools.cache
def frame(case: str) -> tuple[pd.DataFrame, Story]:
    """The judged trials of ``case``, judged once per module (the tests only read them)."""
    return judged_trials(CASES[case](), metric=Metric.OUTPUT, min_effect=0.01)


@functools.cache
def figures(case: str) -> dict[str, Figure]:
    """Every report figure of ``case`` by stem, each drawn once, as a PNG would be: the forest
    tests read its trials_vs_baseline figure, test_every_figure_renders_whole all of them."""
    df, story = frame(case)
    out = dict(report_figures(df, story, min_effect=0.01))
    for fig in out.values():
        FigureCanvasAgg(fig).draw()
    return out


def forest(case: str) -> tuple[pd.DataFrame, Figure]:
    """The forest plot of ``case``, the one report_figures makes (nothing cut: checked for
    every figure of every case in test_every_figure_renders_whole)."""
    return frame(case)[0], figures(case)["trials_vs_baseline"]


def labels(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def row_trial(label: str) -> int | None:
    m = _TRIAL.search(label)
    return int(m.group(1)) if m else None


def by_gid(fig: Figure, gid: str) -> list:
    return [a for a in fig.axes[0].get_children() if a.get_gid() == gid]


def at_row(artists: list, y: int) -> list:
    def ys(a) -> list[float]:
        return list(a.get_ydata()) if hasattr(a, "get_ydata") else [a.get_position()[1]]
    return [a for a in artists if all(v == y for v in ys(a))]


def check_rows_coloured_by_verdict(df: pd.DataFrame, fig: Figure) -> None:
    """Each drawn point, CI bar, status box and right-hand text has the colour of the verdict its
    trial has in the trials table (found from the row's label, not from the plot's own rows)."""
    verdict = dict(zip(df["trial"], df["verdict"], strict=True))
    points, bars = by_gid(fig, "forest-point"), by_gid(fig, "forest-ci")
    statuses, details = by_gid(fig, "forest-status"), by_gid(fig, "forest-detail")
    for y, label in enumerate(labels(fig)):
        trial = row_trial(label)
        if trial is None:  # the truncation note
            continue
        want = verdict_color(verdict[trial]).lower()
        drawn = at_row(points, y) + at_row(bars, y)
        boxes = at_row(statuses, y)
        assert len(drawn) + len(boxes) >= 1, label
        assert all(to_hex(a.get_color()) == want for a in drawn), label
        assert all(to_hex(t.get_color()) == want for t in boxes + at_row(details, y)), label


def check_nothing_cut(fig: Figure, *, drawn_already: bool = False) -> None:
    """Everything ``fig`` draws (tick labels, texts, legends, titles) lies inside the figure."""
    canvas = fig.canvas if drawn_already else FigureCanvasAgg(fig)
    if not drawn_already:
        canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches
    width, height = fig.get_size_inches()
    tol = 0.02
    assert drawn.x0 >= -tol and drawn.y0 >= -tol and drawn.x1 <= width + tol and drawn.y1 <= height + tol, (
        f"drawn {drawn} beyond the figure's {width:.2f} x {height:.2f} in")


def test_sweep_with_failures():
    df, fig = forest("failures")
    assert labels(fig) == [
        "baseline (untuned), trial 0", "baseline (untuned) re-measure, trial 8", "PROTO=LL CH=8 (trial 3)",
        "PROTO=LL ALGO=Ring CH=16 BUF=16777216 (16 MiB) CDMC=1 (trial 1)", "PROTO=LL ALGO=Tree (trial 6, retry of 5)",
        "PROTO=Simple (trial 4)", "BUF=4194304 (4 MiB) (trial 9)", "PROTO=LL128 (trial 2)", "CH=2 (trial 7)"]
    check_rows_coloured_by_verdict(df, fig)
    statuses = {row_trial(labels(fig)[int(t.get_position()[1])]): t.get_text() for t in by_gid(fig, "forest-status")}
    assert statuses == {2: "crashed", 7: "hung", 9: "running"}
    assert len(by_gid(fig, "forest-point")) == 6  # no point for a relaunch with no tok/s
    (band,) = by_gid(fig, "forest-band")  # the launch noise every interval includes: ±1.96 σ
    sigma = frame("failures")[1].launch_noise
    assert (band.get_x(), band.get_x() + band.get_width()) == (pytest.approx(1 - 1.96 * sigma),
                                                               pytest.approx(1 + 1.96 * sigma))
    (one,) = by_gid(fig, "forest-one")
    assert list(one.get_xdata()) == [1.0, 1.0]
    title = fig.axes[0].get_legend().get_title().get_text()
    assert "Trial 5 was interrupted and retried as trial 6." in title


def test_sweep_with_a_winner():
    df, fig = forest("winner")
    rows = labels(fig)
    assert rows[:4] == ["baseline (untuned), trial 0", "baseline (untuned) re-measure, trial 7",
                        "PROTO=LL CH=16 (trial 2)", "PROTO=LL CH=16 (trial 6, confirm)"]
    assert len(rows) == 8 and rows[-1] == "PROTO=Simple ALGO=Ring (trial 3)"
    check_rows_coloured_by_verdict(df, fig)
    winner = [t for t in by_gid(fig, "forest-detail") if t.get_position()[1] == 2]
    assert re.fullmatch(r"87\.2 tok/s  \+\d\.\d % \[\+\d\.\d % \.\. \+\d+\.\d %\]  faster  ◀ recommended: use it",
                        winner[0].get_text())
    marks = by_gid(fig, "forest-mark")  # the band behind the set the verdict names, both its launches
    assert sorted(round(m.get_y() + m.get_height() / 2) for m in marks) == [2, 3]
    assert not by_gid(fig, "forest-status")


def test_sweep_of_one_trial():
    df, fig = forest("one-trial")
    assert labels(fig) == ["baseline (untuned), trial 0"]
    check_rows_coloured_by_verdict(df, fig)
    (band,) = by_gid(fig, "forest-band")  # one launch: the band is the prior launch noise the intervals assume
    sigma = frame("one-trial")[1].launch_noise
    assert band.get_x() == pytest.approx(1 - 1.96 * sigma) and sigma == pytest.approx(PRIOR_LAUNCH_SIGMA)
    assert len(by_gid(fig, "forest-one")) == 1


def test_ten_sets_one_faster_one_slower_one_failed():
    df, fig = forest("ten-sets")
    rows = labels(fig)
    assert len(rows) == 12  # two baseline launches, nine measured sets, the crash
    assert rows[2] == "PROTO=LL CH=32 (trial 7)" and rows[-2] == "PROTO=Simple (trial 3)"
    assert rows[-1] == "PROTO=LL128 (trial 2)"
    verdicts = dict(zip(df["trial"], df["verdict"], strict=True))
    assert [verdicts[row_trial(r)] for r in rows[3:-2]] == [Verdict.NO_DIFFERENCE] * 7
    check_rows_coloured_by_verdict(df, fig)
    (status,) = by_gid(fig, "forest-status")
    assert status.get_text() == "crashed" and status.get_position()[1] == 11


def test_more_rows_than_drawn_keeps_top_and_bottom_with_a_note():
    df, fig = forest("many-sets")
    rows = labels(fig)
    assert len(df) == 72 and len(rows) == 51
    (gap,) = by_gid(fig, "forest-gap")
    assert gap.get_position()[1] == 25 and rows[25] == ""
    assert re.fullmatch(r"… 22 rows not shown \(22 measured, [-+]\d+\.\d % \.\. [-+]\d+\.\d %\): see trials.csv …",
                        gap.get_text())
    assert rows[:2] == ["baseline (untuned), trial 0", "baseline (untuned) re-measure, trial 71"]
    failed = df[df["status"] == Status.HUNG]["trial"].tolist()
    assert [row_trial(r) for r in rows[-2:]] == failed
    check_rows_coloured_by_verdict(df, fig)
    _, height = fig.get_size_inches()
    assert height > 15  # grows with the rows


@pytest.mark.parametrize("case", list(CASES))
def test_every_figure_renders_whole(case, tmp_path):
    df, story = frame(case)
    drawn = figures(case)
    assert drawn and all(drawn)
    for fig in drawn.values():
        check_nothing_cut(fig, drawn_already=True)  # also the forest plots the tests above read
    look = os.environ.get("NCCL_TUNE_PLOTS_LOOK")
    written = save_figures(df, story, Path(look) / case if look else tmp_path, min_effect=0.01)
    assert all(p.exists() and p.with_suffix(".svg").exists() for p in written)


def test_a_cut_legend_is_caught():
    fig = Figure(figsize=(4, 3))  # no layout engine: a legend right of the axes runs off the figure
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], label="a label much too long for the room left at the right of this figure")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    with pytest.raises(AssertionError, match="beyond the figure"):
        check_nothing_cut(fig)


def test_every_verdict_in_its_colour_and_in_the_legend(tmp_path):
    """The verdicts today's judging rarely gives (inconclusive, not applied, ...), set on a sweep's
    tuned rows as the report would, each drawn in its colour and named once in the legend."""
    df, story = judged_trials(every_verdict(), metric=Metric.OUTPUT, min_effect=0.01)
    tuned = df["kind"] != "baseline"
    df.loc[tuned, "verdict"] = pd.Series([Verdict(v) for v in JUDGED], index=df.index[tuned])
    fig = trials_vs_baseline_figure(df, story, min_effect=0.01)
    FigureCanvasAgg(fig).draw()
    check_rows_coloured_by_verdict(df, fig)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:11] == ["baseline", "faster", "faster, below the 1 % that matters", "no significant difference",
                           "slower, below the 1 % that matters", "slower", "inconclusive", "failed confirmation",
                           "not applied", "unverifiable", "not enough runs to judge"]
    check_nothing_cut(fig, drawn_already=True)
    look = os.environ.get("NCCL_TUNE_PLOTS_LOOK")
    save_figures(df, story, Path(look) / "every-verdict" if look else tmp_path, min_effect=0.01)
