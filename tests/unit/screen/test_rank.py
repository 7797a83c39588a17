"""The screen's ranking (decode time, ties by the prefill size, then the simpler set), the
untuned reference, the corruption list, and Spearman's rho with its interval."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as sps

from tuner.record.trial import Status
from tuner.screen.rank import (
    bad_sets,
    predicted_gain_pct,
    rank_sets,
    screen_key,
    spearman,
    untuned_drift,
    untuned_time,
)
from tuner.screen.store import DUPLICATE, FIRST, LAST, SEARCH, ScreenRecord

DECODE, PREFILL = 14336, 14680064


def rec(n: int, env: dict[str, str], decode_us: float | None, prefill_us: float | None = None, *,
        role: str = SEARCH, status: Status = Status.OK, size: int = DECODE) -> ScreenRecord:
    rows = []
    if decode_us is not None:
        rows.append({"size": size, "time_us_oop": decode_us, "time_us_ip": decode_us})
    if prefill_us is not None:
        rows.append({"size": PREFILL, "time_us_oop": prefill_us, "time_us_ip": prefill_us})
    return ScreenRecord(number=n, role=role, env=env, status=status, rows=rows)


def test_fastest_at_decode_first_and_ties_decided_by_the_prefill_size_then_simplicity():
    records = [
        rec(0, {}, 40.0, 900.0, role=FIRST),
        rec(1, {"NCCL_PROTO": "LL"}, 30.0, 2000.0),
        rec(2, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, 30.2, 1000.0),          # tied at decode, faster prefill
        rec(3, {"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"}, 30.1, 2000.0),   # tied, same prefill: more vars
        rec(4, {"NCCL_PROTO": "Simple"}, 60.0, 800.0),
        rec(5, {"NCCL_ALGO": "Tree"}, 20.0, status=Status.INVALID_OUTPUT, role=SEARCH),
        rec(6, {"NCCL_ALGO": "Ring"}, None, status=Status.TIMEOUT),
        rec(7, {"NCCL_PROTO": "LL"}, 34.0, 2000.0),                                # screened twice: median 32
        rec(8, {"NCCL_PROTO": "Simple"}, 10.0, role=DUPLICATE),
    ]
    ranked = rank_sets(records, DECODE, PREFILL, tie_pct=1.0)
    assert [r.env for r in ranked] == [{"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
                                       {"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "4194304"},
                                       {"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}]
    assert ranked[2].decode_us == 32.0 and ranked[2].runs == (1, 7)
    # without a tie tolerance the decode time alone decides
    strict = rank_sets(records, DECODE, PREFILL, tie_pct=0.0)
    assert [r.decode_us for r in strict] == [30.1, 30.2, 32.0, 60.0]
    assert bad_sets(records) == {screen_key({"NCCL_ALGO": "Tree"}): ""}


def test_rows_near_the_wanted_size_count_and_far_ones_do_not():
    near = rec(1, {"NCCL_PROTO": "LL"}, 30.0, size=16384)     # -f 2 from 8192 misses 14336
    far = rec(2, {"NCCL_PROTO": "Simple"}, 30.0, size=65536)
    assert near.time_at(DECODE) == 30.0 and far.time_at(DECODE) is None
    assert [r.key for r in rank_sets([near, far], DECODE, None, 1.0)] == [near.key]


def test_untuned_reference_and_its_drift():
    records = [rec(0, {}, 40.0, role=FIRST), rec(1, {"NCCL_PROTO": "LL"}, 30.0), rec(9, {}, 44.0, role=LAST)]
    assert untuned_time(records, DECODE) == 42.0
    assert untuned_drift(records, DECODE) == pytest.approx(0.1)
    assert untuned_drift(records[:2], DECODE) is None
    assert untuned_time(records[1:2], DECODE) is None


def test_screen_key_ignores_what_a_benchmark_cannot_see():
    assert screen_key({"NCCL_PROTO": "LL", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "--x": "on"}) == screen_key(
        {"NCCL_PROTO": "LL"})


def test_predicted_gain_follows_the_bound():
    # TPOT 10 ms, 100 allreduces of 40 us = 4 ms; at 20 us: 8 ms per token, +25 %
    assert predicted_gain_pct(20.0, 40.0, 100, 0.010) == pytest.approx(25.0)
    assert predicted_gain_pct(40.0, 40.0, 100, 0.010) == pytest.approx(0.0)
    assert predicted_gain_pct(20.0, 200.0, 100, 0.010) is None  # the screen overstates: no prediction


def test_spearman_matches_scipy_and_its_interval_holds_rho():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    y = [1.5, 1.0, 3.5, 3.0, 6.0, 5.5]
    s = spearman(x, y)
    assert s.rho == pytest.approx(sps.spearmanr(x, y).statistic)
    assert -1 <= s.low < s.rho < s.high <= 1 and s.n == 6
    z, se = math.atanh(s.rho), math.sqrt((1 + s.rho**2 / 2) / 3)
    assert s.low == pytest.approx(math.tanh(z - 1.959964 * se), abs=1e-5)
    assert s.describe() == "Spearman rho = 0.83 (95 % CI -0.13 to 0.99, 6 sets)"


def test_spearman_small_and_degenerate_inputs():
    assert math.isnan(spearman([1, 2], [1, 2]).rho)
    three = spearman([1, 2, 3], [1, 3, 2])
    assert three.rho == pytest.approx(0.5) and math.isnan(three.low) and "no CI below 4 sets" in three.describe()
    assert math.isnan(spearman([1, 1, 1, 1], [1, 2, 3, 4]).rho)
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_spearman_interval_covers_the_truth_about_as_often_as_it_says():
    # Bonett-Wright: close to nominal for bivariate normal data; n = 12, true rho_s from rho = 0.6.
    rng = random.Random(3)
    true_rho_s = 6 / math.pi * math.asin(0.6 / 2)
    hits, n_sims = 0, 400
    for _ in range(n_sims):
        xs, ys = [], []
        for _ in range(12):
            a, b = rng.gauss(0, 1), rng.gauss(0, 1)
            xs.append(a)
            ys.append(0.6 * a + math.sqrt(1 - 0.36) * b)
        s = spearman(xs, ys)
        hits += s.low <= true_rho_s <= s.high
    assert 0.90 <= hits / n_sims <= 0.99
