"""benchmarks/gate_nights.py on a few nights: the gates in the night's loop (the product's
check_answers on the simulator's greedy answers, the soak of a finalist's confirmation), the
outcome read from the printed paragraph. Only what holds in every night is asserted (the rates
are the benchmark's)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tuner.judging import judge_answers
from tuner.record import Kind, Status
from tuner.sim import greedy

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gn() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gate_nights", ROOT / "benchmarks" / "gate_nights.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)  # it imports benchmarks/night_calibration.py beside it
    return module


def test_the_broken_sets_are_never_recommended(gn):
    played = gn.play_nights(gn.Box(), 5, seed=3, gates=True)
    assert all(p.use not in (gn.CORRUPT, gn.HANG) for p in played)
    assert all(p.corrupt_flagged == p.corrupt_launches >= 1 for p in played)  # every launch of it caught
    assert all(p.relaunches <= gn.Box().trials and p.clean_flagged == 0 for p in played)
    f = gn.figures(played)
    assert f.use_corrupt == f.use_hang == 0.0 and f.nights == 5
    lines = gn.targets(f)
    assert len(lines) == 4 and lines[0].split(":")[0].strip() == "met"


def test_a_night_runs_the_gates_as_the_sweep_does(gn, tmp_path):
    """The corrupting set's launch is wrong_output with the finding in its cause; the hanging set,
    the best stage-1 set here, fails the soak of its first confirmation and gives its second slot
    to the +10 % set; the final baseline soaks after it; the report says "Use it." for the +10 % set."""
    import numpy as np

    box = gn.Box(tau=0.0)
    night = gn._GatedLauncher(box, np.random.default_rng(5), "t", 300.0, tmp_path)
    done = gn._play(box, night, gn._space([gn.CORRUPT, gn.HANG, gn.CLEAN, "null-01", "null-02", "null-03"]),
                    soak_s=600.0)
    recs = night.records
    corrupt = [r for r in recs if r.env.get(gn.nc.VARIABLE) == gn.CORRUPT]
    assert [r.status for r in corrupt] == [Status.WRONG_OUTPUT] and "wrong output: prompt" in corrupt[0].cause
    confirms = [r for r in recs if r.kind is Kind.CONFIRM]
    assert [r.env[gn.nc.VARIABLE] for r in confirms] == [gn.HANG, gn.CLEAN]
    assert confirms[0].soak_failure.startswith("no token for") and confirms[0].status is Status.OK
    assert confirms[1].soak_s == 600.0 and not confirms[1].soak_failure
    assert recs[-1].kind is Kind.BASELINE and recs[-1].soak_s == 600.0
    assert done.use == gn.CLEAN and done.outcome == "use_right" and done.soaks_failed == 1
    # without the gates the same draws: the same first launches, no answers judged, no soak
    bare = gn._GatedLauncher(box, np.random.default_rng(5), "t", 300.0, None)
    gn._play(box, bare, gn._space([gn.CORRUPT, gn.HANG, gn.CLEAN, "null-01", "null-02", "null-03"]), soak_s=0.0)
    assert [r.output_tok_s for r in bare.records[:9]] == [r.output_tok_s for r in recs[:9]]
    assert all(r.ok and r.soak_s is None and not r.answers_checked for r in bare.records)


def test_the_simulators_answers_as_the_probe_reads_them(gn):
    clean = gn.sim_answers(greedy.LaunchPaths(None, 0.03, 0.003, False, random.Random(1)), tokens=96, logprobs=True)
    assert len(clean) == 4 and all(len(a.tokens) == len(a.logprobs) == 96 for a in clean)
    assert all(a.text == "".join(lp.token for lp in a.logprobs) for a in clean)
    bad = gn.sim_answers(greedy.LaunchPaths("x", 0.03, 0.003, True, random.Random(2)), tokens=96, logprobs=False)
    assert not judge_answers(clean, bad).within and judge_answers(clean, clean).within
    assert bad[0].logprobs == ()
