"""benchmarks/night_calibration.py on tiny cells: whole nights through the planner, judge and the
report's paragraph. Checks the table's shape and the outcomes that hold in every night (no rate
is asserted: those are the benchmark's, not a timed test's)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tuner.record import Kind

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def nc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("night_calibration", ROOT / "benchmarks" / "night_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_noiseless_50_percent_set_is_recommended_every_night(nc):
    row = nc.run_cell(nc.Cell(0.0, 0.001, 4, 6, 0.50, "middle"), 5, seed=3, at_mde=False)
    assert row.use_right == 1.0 and row.use_wrong == 0.0 and row.power == 1.0
    # baseline, the 7 sets, two confirmations of the best set (no runner-up could be the best), the final baseline
    assert row.relaunches == 1 + 7 + 3


def test_the_night_follows_the_sweeps_order(nc):
    cell = nc.Cell(0.0, 0.001, 3, 4, 0.50, "first", baseline_every=2)
    space, true_env = nc._space(cell)
    assert space.presets[0].name == nc.TRUE_NAME and true_env == {nc.VARIABLE: nc.TRUE_NAME}
    night = nc.play_night(cell, np.random.default_rng(0))
    kinds = [(r.kind, r.recheck) for r in night.records]
    base, recheck, preset = (Kind.BASELINE, False), (Kind.BASELINE, True), (Kind.PRESET, False)
    # Sweep._first_stage: the smallest budget that reaches the 5 sets (9: stage 1 gets 7, 2 slots kept for the
    # checks) holds a re-measure after every 2 tuned relaunches, but none in the last stage-1 slot;
    # then the confirmation of the winner (the true set) and the final baseline.
    assert cell.budget == 9
    assert kinds == [base, preset, preset, recheck, preset, preset, preset, (Kind.CONFIRM, False), recheck]
    assert night.records[1].env == night.records[7].env == {nc.VARIABLE: nc.TRUE_NAME}
    assert all(len(r.output_tok_s_runs) == 3 for r in night.records) and night.outcome == "use_right"


def test_table_and_csv_have_one_line_per_cell(nc, tmp_path):
    cells = [nc.Cell(0.01, 0.01, 4, 6), nc.Cell(0.01, 0.01, 3, 6, 0.10, "last", drift=-0.03, hiccup=0.05)]
    rows = nc.run_cells(cells, 5, seed=4)
    assert all(abs(sum(getattr(r, o) for o in nc.OUTCOMES) - 1.0) < 1e-9 for r in rows)
    assert rows[0].use_right == 0.0 and rows[0].power != rows[0].power  # no true set: NaN power
    lines = nc.table_text(rows).splitlines()
    assert len(lines) == 3 and lines[0].split()[:2] == ["tau", "sigma"]
    assert len(lines[0].split("  ")) >= len(nc.COLUMNS)
    nc.write_csv(rows, tmp_path / "t.csv")
    assert len((tmp_path / "t.csv").read_text().splitlines()) == 3


def test_outcome_words(nc):
    env = {nc.VARIABLE: nc.TRUE_NAME}
    assert nc.outcome_of("Best set: x ... Use it.", env, env) == "use_right"
    assert nc.outcome_of("Best set: x ... Use it.", {nc.VARIABLE: "null-01"}, env) == "use_wrong"
    assert nc.outcome_of("Best set: x: faster, not yet confirmed by", None, env) == "not_yet"
    assert nc.outcome_of("Best set: x looked faster, but it failed confirmation", None, env) == "failed"
    assert nc.outcome_of("No set beat the baseline. Keep the defaults.", None, env) == "keep"
    assert nc.outcome_of("Best set: x, reworded", None, env) == "other"


def test_every_relaunch_counts_in_the_budget(nc):
    """Budget 12, a re-measure every 3: stage 1 holds 9 (the baseline, one re-measure, 7 sets), then
    the reserved checks; never more relaunches than the budget."""
    cell = nc.Cell(0.0, 0.001, 3, 10, 0.50, "first", baseline_every=3, trials=12)
    night = nc.play_night(cell, np.random.default_rng(1))
    kinds = [(r.kind, r.recheck) for r in night.records]
    assert len(night.records) <= 12 and kinds[:9].count((Kind.BASELINE, True)) == 1
    assert sum(1 for r in night.records[:9] if r.kind is Kind.PRESET) == 7
    assert kinds[9] == (Kind.CONFIRM, False) and kinds[-1] == (Kind.BASELINE, True)
