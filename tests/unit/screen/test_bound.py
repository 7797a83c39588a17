"""The bound on what faster allreduces can gain: decode = compute + n x t_allreduce."""

from __future__ import annotations

import pytest

from tuner.screen.bound import allreduce_bound


def test_pcie_box_numbers() -> None:
    # 81.4 tok/s single stream, 122 allreduces per token, 68 us each untuned, 40 us at best.
    tpot = 1 / 81.4
    b = allreduce_bound(68.0, 122, tpot, best_screen_time_us=40.0)
    ar = 122 * 68e-6
    assert b.allreduce_s_per_token == pytest.approx(ar)
    assert b.allreduce_share == pytest.approx(ar / tpot)
    assert b.free_allreduce_tok_s == pytest.approx(1 / (tpot - ar))
    assert b.max_gain_pct == pytest.approx((tpot / (tpot - ar) - 1) * 100)
    assert b.best_tok_s == pytest.approx(1 / (tpot - ar + 122 * 40e-6))
    assert b.best_gain_pct == pytest.approx((tpot / (tpot - ar + 122 * 40e-6) - 1) * 100)
    assert b.reliable and not b.below_noise(2.0)
    assert b.allreduce_share == pytest.approx(0.675, abs=0.001)
    assert b.sentence().startswith("Allreduce takes about 68% of decode time: NCCL tuning can gain at most 208.0 % (81.4 -> 250.7 tok/s")
    assert b.sentence().endswith("the best screened set predicts +38.5 % (112.8 tok/s).")


def test_nvlink_box_bound_below_noise() -> None:
    b = allreduce_bound(6.0, 122, 1 / 100.0)  # 0.73 ms of 10 ms
    assert b.max_gain_pct == pytest.approx((0.01 / (0.01 - 122 * 6e-6) - 1) * 100)
    assert b.max_gain_pct is not None and b.max_gain_pct < 8 and b.below_noise(10.0) and not b.below_noise(5.0)
    assert b.best_gain_pct is None and "best screened" not in b.sentence()


def test_screen_time_larger_than_tpot_is_unreliable() -> None:
    b = allreduce_bound(120.0, 122, 0.012)  # 14.6 ms of allreduce in a 12 ms step
    assert not b.reliable and b.max_gain_pct is None and b.free_allreduce_tok_s is None
    assert not b.below_noise(50.0)
    assert "exceeds the measured TPOT" in b.notes[0] and "no bound" in b.sentence()


def test_bad_inputs() -> None:
    for args in ((0.0, 122, 0.01), (10.0, 0, 0.01), (10.0, 122, 0.0)):
        with pytest.raises(ValueError):
            allreduce_bound(*args)
    with pytest.raises(ValueError):
        allreduce_bound(10.0, 122, 0.01, best_screen_time_us=-1.0)
