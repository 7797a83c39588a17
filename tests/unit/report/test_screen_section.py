"""The screen's section of report.md and its figure, from a screen.csv, the stage's summary and
real trial records: the bound, the ranking against the relaunches, Spearman, the exports."""

from __future__ import annotations

from tests.helpers import trial_record
from tuner.judging.judge import judge
from tuner.record import Metric, ScreenSummary, Status, StudyInfo
from tuner.report.screen import gain_points, save_screen_figure, screen_markdown
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
    text = "\n".join(screen_markdown(info, tmp_path, j, figure=png))
    assert "**Bound.** Allreduce takes about 40% of decode time" in text and "1.8 % from noise" in text
    assert "| 1 | NCCL_PROTO=LL | 30.00 | -25.0 % | +11.1 % | +" in text
    assert "Spearman rho = 1.00" in text and "3 sets" in text
    assert "NCCL_ALGO=Tree: nccl-tests reported wrong values" in text
    assert "Global variables: the best screened set (no relaunch confirmed it)" in text
    assert "export NCCL_PROTO=LL" in text and "NCCL_TUNER_CONFIG_FILE=r/nccl_tuner.conf" in text
    assert "NCCL 2.27.5 loads tuner API v4" in text and "has channels -1: one channel" in text


def test_no_section_without_a_screen(tmp_path):
    assert screen_markdown(StudyInfo(), tmp_path, None) == []
    assert save_screen_figure(StudyInfo(), tmp_path, None) is None
