"""NCCL's cost model (tuner/nccl/costmodel.py) against numbers worked by hand from
src/graph/tuning.cc (v2.27.3-1, ncclTopoTuneModel, ncclTopoGetAlgoTime)."""

import pytest

from tuner.nccl.costmodel import ModelGraph, allreduce_table, nccl_pick
from tuner.nccl.types import NcclVersion, Topology

V227 = NcclVersion(2, 27, 3)
FALLBACK = ModelGraph(1, 0.1, "SYS", 0.1)  # search.cc: bw 0.1, one channel, PATH_SYS


def test_fallback_graph_picks_ring_simple_at_decode():
    t = allreduce_table(FALLBACK, 8, version=V227)
    # Ring/Simple: lat 8.4 + 14 x 5.7 (PCI row) = 88.2; bw 0.1 x 8/14 GB/s.
    assert t.time_us("Ring", "Simple", 14336) == pytest.approx(88.2 + 14336 / (1000 * 0.1 * 8 / 14))
    # Ring/LL: lat 6.6 + 14 x 1.0 = 20.6; bw min(282, 0.05) x 8/14.
    assert t.time_us("Ring", "LL", 14336) == pytest.approx(20.6 + 14336 / (1000 * 0.05 * 8 / 14))
    # Tree/Simple: lat 8.4 + 2 x 7 x 4.0 = 64.4; bw 0.1 x .92 x .5 x .8 (correction at 224 x 64 B).
    assert t.time_us("Tree", "Simple", 14336) == pytest.approx(64.4 + 14336 / (1000 * 0.092 * 0.5 * 0.8))
    # Tree/LL: lat 6.8 + 14 x 1.0; bw 0.092 / 3.8 x .5 x .7.
    assert t.time_us("Tree", "LL", 14336) == pytest.approx(20.8 + 14336 / (1000 * 0.092 / 3.8 * 0.5 * 0.7))
    assert t.time_us("Ring", "LL128", 14336) is None  # LL128 guard: SYS is not <= NVB
    pick = nccl_pick(t, 14336)
    assert pick is not None and pick.pair == "Ring/Simple"
    assert pick.time_us == pytest.approx(339.08, abs=0.01)


def test_sane_pcie_graph_picks_ring_ll_at_decode_and_simple_for_prefill():
    t = allreduce_table(ModelGraph(2, 24.0, "PHB", 24.0), 8, version=V227)
    pick = nccl_pick(t, 14336)
    assert pick is not None and pick.pair == "Ring/LL"
    assert pick.time_us == pytest.approx(20.6 + 14336 / (1000 * 24.0 * 8 / 14))
    big = nccl_pick(t, 64 << 20)
    assert big is not None and big.pair == "Ring/Simple"


def test_nvlink_row_and_ll128_guard():
    t = allreduce_table(ModelGraph(4, 20.0, "NVL"), 8, version=V227, compcap=90)
    # NVLink row: Ring/LL 6.6 + 14 x 0.6.
    assert t.latency[("Ring", "LL")] == pytest.approx(6.6 + 14 * 0.6)
    # LL128: min(80 x .92, 4 x 36.7) x 8/14.
    assert t.bandwidth[("Ring", "LL128")] == pytest.approx(min(80 * 0.92, 4 * 36.7) * 8 / 14)
    # NVB takes the PCI latency row (tuning.cc compares typeIntra with LINK_NVL).
    nvb = allreduce_table(ModelGraph(4, 20.0, "NVB"), 8, version=V227)
    assert nvb.latency[("Ring", "LL")] == pytest.approx(20.6)


def test_version_constants():
    old = allreduce_table(FALLBACK, 8, version=NcclVersion(2, 18, 6))
    assert old.latency[("Tree", "Simple")] == pytest.approx(0 + 14 * 6.0)
    assert old.bandwidth[("Ring", "LL")] == pytest.approx(0.1 * 0.25 * 8 / 14)
    mid = allreduce_table(FALLBACK, 8, version=NcclVersion(2, 22, 3))
    assert mid.latency[("Tree", "Simple")] == pytest.approx(14 * 28.0)


def test_proto_env_switches_pairs_off():
    topo = Topology(8, 1, "pcie", False, 120, False)
    t = allreduce_table(FALLBACK, 8, version=V227, env={"NCCL_PROTO": "LL"}, topology=topo)
    pick = nccl_pick(t, 14336)
    assert pick is not None and pick.proto == "LL"
    plain = allreduce_table(FALLBACK, 8, version=V227, env={"NCCL_ALGO": "Ring"})
    assert set(plain.times_us(14336)) == {("Ring", "LL"), ("Ring", "Simple")}


def test_model_needs_two_ranks():
    with pytest.raises(ValueError):
        allreduce_table(FALLBACK, 1)
