"""A small, fast run of benchmarks/verdict_calibration.py's Monte Carlo against the product's
statistics (tuner.judging.stats), with assertions: ``before=False`` throughout, since the
benchmark's frozen copy of the old statistics is not the product."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def vc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verdict_calibration", ROOT / "benchmarks" / "verdict_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("launch", "reps"), [(0.0, 400), (0.01, 400), (0.02, 800)])
def test_false_faster_or_slower_stays_near_5_percent(vc, launch, reps):
    # 400 sets where the rate is far below the bound (0 and 0.0025 today): a true rate at 0.06
    # gives 24 of 400 (SE 0.012), never <= 1; the launch noise that brings it near 0.05 (0.044 today)
    # keeps 800 (SE 0.0077, the bound 2 SE above it).
    rates = vc.per_set(vc.Cell(0.02, launch, 4, 2), reps, before=False, seed=21)
    assert rates.fp <= 0.06 and rates.ci_excludes_1 <= 0.06, rates


def test_more_runs_and_auto_repeats_do_not_inflate_false_verdicts(vc):
    # 300 and 200 sets (0 false verdicts in either today): a rate inflated to 0.09 passes the 0.06
    # bound with 300 sets at 4 % (z = 0.03 / 0.0165 = 1.8), at 200 sets at 7 %.
    assert vc.per_set(vc.Cell(0.01, 0.01, 8, 2), 300, before=False, seed=22).fp <= 0.06
    assert vc.per_set(vc.Cell(0.01, 0.01, "auto", 2), 200, before=False, seed=23).fp <= 0.06


def test_a_15_percent_gain_is_found(vc):
    rates = vc.per_set(vc.Cell(0.02, 0.02, 4, 2), 400, before=False, gain=0.15, seed=24)
    # 0.95 with the mean of log tok/s and the prior's df kept above it; the robust level (Huber at
    # the night's run SD, so a hiccup cannot move a launch) costs about a point here, at 2 % run
    # noise and 4 runs, and the draws whose two baseline launches test above the prior (12 %)
    # keep the data's df (the prior's 4, not 5): 0.925 at seed 24.
    assert rates.power >= 0.92, rates


def test_headline_of_20_no_effect_sets_says_use_it_rarely_and_confirmation_finds_15_percent(vc):
    # 100 nights of 20 sets: none says use it today; a true rate of 0.10 passes use <= 0.05 at 6 %.
    # The real gain is confirmed in 0.74 of them (SE 0.044): 0.6 is 3 SE below.
    null = vc.headline(vc.Cell(0.02, 0.02, 4, 2, 20), 100, before=False, seed=25)
    assert null.use <= 0.05 and null.confirmed <= 0.02, null
    real = vc.headline(vc.Cell(0.02, 0.02, 4, 2, 20), 100, before=False, gain=0.15, seed=26)
    assert real.confirmed >= 0.6, real
