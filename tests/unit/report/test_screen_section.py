"""The screen's section of report.md and its figure, from a screen.csv, the stage's summary and
real trial records: the bound, the ranking against the relaunches, Spearman, the exports."""

from __future__ import annotations

import itertools
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from tests.helpers import trial_record
from tuner.judging.judge import judge
from tuner.record import Metric, ScreenSummary, Status, StudyInfo
from tuner.report.markdown import section_lines
from tuner.report.screen import GainPoint, gain_points, label_places, save_screen_figure, screen_figure, screen_section
from tuner.report.style import set_label
from tuner.screen.rank import spearman
from tuner.screen.store import FIRST, SEARCH, ScreenRecord
from tuner.screen.table import SCREEN_CSV, read_screen_csv, write_screen_csv

LL, SIMPLE = {"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}


def _screen(n: int, env: dict[str, str], us: float, role: str = SEARCH) -> ScreenRecord:
    return ScreenRecord(number=n, role=role, env=env, status=Status.OK, nranks=8,
                        rows=[{"size": 14336, "time_us_oop": us, "time_us_ip": us, "algbw_GBps": 0.3,
                               "busbw_GBps": 0.5, "wrong_oop": 0.0, "wrong_ip": 0.0}])


def _summary() -> dict:
    return {"decode_bytes": 14336, "prefill_bytes": None, "allreduces_per_token": 100, "runs": 3,
            "ended": "[screen] trials = 3 reached", "untuned_us": 40.0, "untuned_drift": 0.01,
            "size_reasons": ["Sizes from [screen] sizes: decode 14336 B (the first)."],
            "ranking": [{"key": '{"NCCL_PROTO":"LL"}', "env": LL, "decode_us": 30.0, "prefill_us": None},
                        {"key": '{"NCCL_PROTO":"Simple"}', "env": SIMPLE, "decode_us": 60.0, "prefill_us": None}],
            "best_set": LL, "noise_pct": 1.75,
            "bound": {"reliable": True, "baseline_tpot_s": 0.010, "max_gain_pct": 66.7, "best_gain_pct": 11.1,
                      "sentence": "Allreduce takes about 40% of decode time: NCCL tuning can gain at most 66.7 %.",
                      "notes": []},
            "bad_sets": {'{"NCCL_ALGO":"Tree"}': "nccl-tests reported wrong values at 14336 B"},
            "export": {"csv": "r/tuner_perf.csv", "conf": "r/nccl_tuner.conf",
                       "lines": ["allreduce,0,18446744073709551615,ring,ll,-1,-1,8,-1,-1"],
                       "notes": ["allreduce 0-18446744073709551615 B has channels -1: one channel"],
                       "compatibility": "NCCL 2.27.5 loads tuner API v4, v3, v2."}}


def test_section_figure_and_agreement(tmp_path):
    write_screen_csv([_screen(0, {}, 40.0, FIRST), _screen(1, LL, 30.0), _screen(2, SIMPLE, 60.0)],
                     tmp_path / SCREEN_CSV)
    records = [trial_record(0, "baseline", [100.0, 101.0, 99.0]),
               trial_record(1, "preset", [110.0, 111.0, 109.5], env=LL, preset="screen-1"),
               trial_record(2, "search", [80.0, 81.0, 79.0], env={**SIMPLE, "CUDA_DEVICE_MAX_CONNECTIONS": "1"})]
    j = judge(records, metric=Metric.OUTPUT)
    info = StudyInfo(screen=ScreenSummary.from_json(_summary()),
                     server_command=["vllm", "serve", "m", "--tensor-parallel-size", "8"])
    points = gain_points(info.screen, read_screen_csv(tmp_path / SCREEN_CSV), j)
    by_trial = {p.trial: p for p in points}
    assert set(by_trial) == {-1, 1, 2}
    assert round(by_trial[1].predicted, 1) == 11.1 and round(by_trial[2].predicted, 1) == -16.7  # 10 ms / (6 + 100 x 60 us) - 1
    assert 9 < by_trial[1].measured < 11 and by_trial[2].measured < -15
    png = save_screen_figure(info, tmp_path, j)
    assert png == "screen_gain.png" and (tmp_path / png).stat().st_size > 5_000
    text = "\n".join(section_lines(screen_section(info, tmp_path, j, figure=png)))
    assert "**Bound.** Allreduce takes about 40% of decode time" in text and "1.8 % from noise" in text
    assert "| 1 | NCCL_PROTO=LL | 30.00 | -25.0 % | +11.1 % | +" in text
    assert "Spearman rho = 1.00" in text and "3 sets" in text
    assert "NCCL_ALGO=Tree: nccl-tests reported wrong values" in text
    assert "Global variables: the best screened set (no relaunch confirmed it)" in text
    assert "export NCCL_PROTO=LL" in text and "NCCL_TUNER_CONFIG_FILE=r/nccl_tuner.conf" in text
    assert "NCCL 2.27.5 loads tuner API v4" in text and "has channels -1: one channel" in text


def test_no_section_without_a_screen(tmp_path):
    assert screen_section(StudyInfo(), tmp_path, None) is None
    assert save_screen_figure(StudyInfo(), tmp_path, None) is None


def test_label_places_keep_order_and_gap():
    assert label_places([0.5, 0.1, 0.9], 0.05) == [0.5, 0.1, 0.9]  # apart already: where they are
    placed = label_places([0.50, 0.51, 0.49, 0.98, 0.99], 0.05)
    order = sorted(range(5), key=[0.50, 0.51, 0.49, 0.98, 0.99].__getitem__)
    ys = [placed[i] for i in order]
    assert all(b - a >= 0.05 - 1e-12 for a, b in itertools.pairwise(ys))  # in order, a gap apart
    assert max(placed) <= 1.0 and min(placed) >= 0.0


def test_figure_labels_never_overlap_and_the_rho_is_printed():
    env = [{"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": str(n)} for n in (2, 4, 8, 16)]
    points = [GainPoint("baseline", "{}", 0.0, 0.0, math.nan, math.nan, -1),
              *[GainPoint("x", "{}", 9.3 + i * 0.01, 7.1 + i * 0.1, 2.0, 13.0, i + 1, i == 2, set_label(e))
                for i, e in enumerate(env)],
              GainPoint("y", "{}", -0.3, -0.1, -5.0, 5.0, 5, False, "PROTO=Simple")]
    fig = screen_figure(points)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    rho = spearman([p.predicted for p in points], [p.measured for p in points])
    assert ax.get_title().endswith(rho.describe()) and "Spearman rho = " in ax.get_title()
    labels = [t for t in ax.texts if t.get_text().startswith(("t", "baseline"))]
    assert len(labels) == len(points)
    boxes = [Text.get_window_extent(t) for t in labels]  # the words alone, not the leader line
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert [t.get_text() for t in labels if t.get_fontweight() == "bold"] == [
        "t3 PROTO=LL CH=8  ◀ the verdict's best"]
    assert all(fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 for b in boxes)  # inside the figure, not cut
