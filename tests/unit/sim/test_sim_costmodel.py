"""The cost model follows NCCL's rules (src/graph/tuning.cc ncclTopoTuneModel and
ncclTopoGetAlgoTime, src/enqueue.cc topoGetAlgoInfo and calcCollChunking) and the profiles
reproduce the boxes they stand for."""

from __future__ import annotations

import dataclasses

import pytest

from tuner.sim import textgen
from tuner.sim.costmodel import (
    CollectiveCrash,
    CostModel,
    algo_time,
    check_init,
    chunk_bytes,
    launch,
    select,
    tune_model,
)
from tuner.sim.faults import FaultError, parse_faults
from tuner.sim.ncclenv import NcclInitError, settings_from
from tuner.sim.profiles import BUILTIN, ProfileError, load_profile

PCIE = BUILTIN["pcie-8x-mla"]
NVLINK = BUILTIN["nvlink-8x"]
DECODE = PCIE.decode_bytes
TUNED = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16",
         "NCCL_BUFFSIZE": "16777216", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def tm_of(env=None, profile=PCIE, version=None):
    return tune_model(profile, settings_from(env or {}, version or profile.nccl_version))


def tok_s(profile, env=None, batch=1):
    return CostModel(profile, settings_from(env or {}, profile.nccl_version)).breakdown(batch).tok_s


# ---------------------------------------------------------------- NCCL's model


def test_tuning_table_follows_tuning_cc():
    tm = tm_of()
    lat, bw = tm.latency["AllReduce"], tm.bandwidth["AllReduce"]
    # 8 ranks, search graph 2 channels x 12 GB/s, PCI hwLat, Blackwell row (llMaxBw 282)
    assert lat["Ring"]["LL"] == pytest.approx(6.6 + 14 * 1.0)
    assert bw["Ring"]["LL"] == pytest.approx(min(282, 24 * .5) * 8 / 14)
    assert lat["Ring"]["Simple"] == pytest.approx(8.4 + 14 * 5.7)
    assert bw["Ring"]["Simple"] == pytest.approx(24 * 8 / 14)
    assert lat["Tree"]["LL"] == pytest.approx(6.8 + 2 * 7 * 1.0)
    assert bw["Tree"]["LL"] == pytest.approx(24 * .92 / 3.8 * .5)
    assert bw["Tree"]["Simple"] == pytest.approx(24 * .92 * .5)
    assert bw["Ring"]["LL128"] == 0 and bw["Tree"]["LL128"] == 0  # LL128 off on PCIe
    forced = tm_of({"NCCL_PROTO": "LL128"}).bandwidth["AllReduce"]
    assert forced["Ring"]["LL128"] == pytest.approx(min(24 * .92, 2 * 73.4) * 8 / 14)
    assert forced["Tree"]["LL128"] == pytest.approx(min(24 * .92 * 7 / 9, 2 * 73.4) * .5)
    assert tm.max_threads["Ring"]["Simple"] == 512  # 2 x 12 GB/s > PCI_BW
    assert tm.thresholds["Ring"]["LL"] == 64 and tm.thresholds["Tree"]["LL"] == 8
    # Tree time uses treeCorrectionFactor: 14336 >> 6 = 224 -> log2 7 -> LL factor .7
    assert algo_time(tm, "Tree", "LL", DECODE) == pytest.approx(
        lat["Tree"]["LL"] + DECODE / (1000 * bw["Tree"]["LL"] * .7))


def test_nccl_picks_ll_for_decode_and_simple_for_large():
    tm = tm_of()
    assert select(tm, DECODE)[:2] == ("Ring", "LL")
    assert select(tm, 64 << 20)[:2] == ("Ring", "Simple")
    assert select(tm_of({"NCCL_PROTO": "Simple"}), DECODE)[:2] == ("Tree", "Simple")


def test_max_nchannels_moves_the_launch_not_the_choice():
    base, one = tm_of(), tm_of({"NCCL_MAX_NCHANNELS": "1"})
    assert base.bandwidth == one.bandwidth and base.latency == one.latency  # search graph
    assert (base.nchannels, one.nchannels) == (4, 1)  # comm = 2 x graph channels, then capped
    assert tm_of({"NCCL_MAX_NCHANNELS": "32"}).nchannels == 4  # MAX only lowers
    assert tm_of({"NCCL_MAX_NCHANNELS": "2", "NCCL_MIN_NCHANNELS": "8"}).nchannels == 8


@pytest.mark.parametrize("env", [{}, {"NCCL_MAX_NCHANNELS": "16"}, {"NCCL_MAX_NCHANNELS": "1"},
                                 {"NCCL_MIN_NCHANNELS": "32"}, {"NCCL_MAX_NCHANNELS": "32"}])
def test_decode_allreduce_launches_one_channel_128_threads(env):
    """14,336 B on 8 ranks: nc drops while nBytes < nc*512*(8*8), then threads halve."""
    assert launch(tm_of(env), "Ring", "LL", DECODE) == (1, 128)


def test_thread_thresholds_change_the_launch():
    tm = tm_of({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 1 -1 -1"})
    assert tm.thresholds["Ring"]["LL"] == 1
    assert launch(tm, "Ring", "LL", DECODE) == (4, 512)
    assert launch(tm_of(), "Ring", "Simple", 64 << 20) == (4, 512 + 32)  # sync warp on Simple


def test_buffsize_acts_on_simple_only():
    small = settings_from({"NCCL_BUFFSIZE": "32768"})
    default = settings_from({})
    assert chunk_bytes(small, "Ring", "LL", DECODE, 1, 8) == chunk_bytes(default, "Ring", "LL", DECODE, 1, 8)
    assert chunk_bytes(small, "Ring", "Simple", 1 << 20, 4, 8) == 32768 // 8 * 4
    assert tok_s(PCIE, {"NCCL_BUFFSIZE": "32768"}) == tok_s(PCIE)
    assert tok_s(PCIE, {"NCCL_BUFFSIZE": "16777216"}) == tok_s(PCIE)
    big = [CostModel(PCIE, settings_from({"NCCL_BUFFSIZE": b})).nccl(64 << 20).core_us
           for b in ("65536", "4194304")]
    assert big[0] > 1.3 * big[1]


def test_zero_chunks_crash_at_the_first_collective_that_uses_them():
    tiny = CostModel(PCIE, settings_from({"NCCL_BUFFSIZE": "4M"}))  # 4 bytes
    assert tiny.breakdown(1).allreduce.proto == "LL"  # decode never touches Simple's buffer
    with pytest.raises(CollectiveCrash) as exc:
        tiny.nccl(64 << 20)
    assert exc.value.proto == "Simple"
    with pytest.raises(CollectiveCrash):
        CostModel(PCIE, settings_from({"NCCL_LL_BUFFSIZE": "16"})).breakdown(1)


def test_refusals_where_nccl_fails():
    with pytest.raises(NcclInitError, match="no algorithm/protocol available") as exc:
        CostModel(PCIE, settings_from({"NCCL_ALGO": "NVLS"})).nccl(DECODE)
    assert exc.value.result == "ncclInvalidUsage" and "NCCL_ALGO was set to NVLS." in exc.value.warn_lines[0]
    with pytest.raises(NcclInitError, match="no algorithm"):
        CostModel(PCIE, settings_from({"NCCL_ALGO": "CollNetDirect"})).nccl(DECODE)
    old = settings_from({"NCCL_ALGO": "CollNetDirect"}, "2.23.4")  # 2.23 falls back to Ring/Tree
    assert select(tune_model(PCIE, old), DECODE)[:2] == ("Ring", "LL")
    old_simple = settings_from({"NCCL_ALGO": "CollNetDirect", "NCCL_PROTO": "Simple"}, "2.23.4")
    assert select(tune_model(PCIE, old_simple), DECODE)[:2] == ("Tree", "Simple")
    with pytest.raises(NcclInitError, match="out of memory"):
        check_init(PCIE, settings_from({"NCCL_BUFFSIZE": "3000000000"}))  # wraps negative
    check_init(PCIE, settings_from({"NCCL_BUFFSIZE": "-2"}))  # -2 is NCCL's "unset"


def test_ll128_forced_on_pcie_corrupts_and_is_allowed_on_nvlink():
    forced = CostModel(PCIE, settings_from({"NCCL_PROTO": "LL128"}))
    assert forced.breakdown(1).allreduce.corrupt
    excl = CostModel(PCIE, settings_from({"NCCL_PROTO": "^Simple"}))
    assert not excl.breakdown(1).allreduce.corrupt  # LL still wins at the decode size
    assert excl.nccl(64 << 20).proto == "LL128" and excl.nccl(64 << 20).corrupt
    nccl_box = BUILTIN["nvlink-8x-nccl"]
    assert select(tune_model(nccl_box, settings_from({})), 64 << 20) is not None
    assert not CostModel(nccl_box, settings_from({"NCCL_PROTO": "LL128"})).nccl(64 << 20).corrupt


# ---------------------------------------------------------------- the boxes


def test_pcie_profile_matches_the_motivating_box():
    bd = CostModel(PCIE, settings_from({})).breakdown(1)
    assert 0.65 <= bd.share <= 0.70 and 70 <= bd.tok_s <= 82
    assert bd.allreduce.nbytes == 14336 and (bd.allreduce.algo, bd.allreduce.proto) == ("Ring", "LL")
    agg = [tok_s(PCIE, batch=b) * b for b in (1, 2, 4, 8)]  # deployment: 81, 133, 236, 413
    assert agg == sorted(agg) and 300 < agg[3] < 500


def test_pcie_landscape():
    base = tok_s(PCIE)

    def rel(env):
        return tok_s(PCIE, env) / base - 1

    assert 0 < rel(TUNED) < 0.01  # the deployment's tuned relaunch: inside the noise
    assert rel({"NCCL_PROTO": "Simple"}) < -0.20
    assert -0.10 < rel({"NCCL_ALGO": "Tree"}) < -0.01
    assert rel({"NCCL_MAX_NCHANNELS": "1"}) == 0  # the launch uses one channel anyway
    assert rel({"NCCL_P2P_DISABLE": "1"}) < -0.05
    assert rel({"NCCL_P2P_LEVEL": "SYS"}) > 0.03  # the one real win: P2P across the sockets
    assert 0 < rel({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) < 0.01
    assert 0 < rel({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 1 -1 -1"}) < 0.02


def test_bench_time_follows_the_served_landscape():
    def bench(env):
        return CostModel(PCIE, settings_from(env)).bench_us(DECODE)

    assert 35 < bench({}) < 55  # 8 ranks on PCIe: ~42 us at 8 B (NVIDIA/nccl#1530)
    assert bench({"NCCL_P2P_LEVEL": "SYS"}) < bench({}) < bench({"NCCL_PROTO": "Simple"})
    assert bench({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) == bench({})  # invisible to the benchmark


def test_nvlink_custom_allreduce_carries_decode():
    bd = CostModel(NVLINK, settings_from({})).breakdown(1)
    assert bd.share < 0.10 and bd.allreduce.via == "custom"
    assert tok_s(NVLINK, {"NCCL_PROTO": "Simple"}) == pytest.approx(tok_s(NVLINK))
    flag = dataclasses.replace(NVLINK, disable_custom_all_reduce=True)
    assert CostModel(flag, settings_from({})).breakdown(1).allreduce.via == "nccl"
    nccl = BUILTIN["nvlink-8x-nccl"]
    assert CostModel(nccl, settings_from({})).breakdown(1).share < 0.2
    assert abs(tok_s(nccl, TUNED) / tok_s(nccl) - 1) < 0.01
    prefill = CostModel(NVLINK, settings_from({})).allreduce(8192 * NVLINK.decode_bytes)
    assert prefill.via == "nccl"  # above the custom allreduce's 8 MiB


def test_fast_tiny_rate():
    assert 300 <= tok_s(BUILTIN["fast-tiny"]) <= 1000


def test_profile_toml(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text('extends = "pcie-8x-mla"\ncompute_ms = 9.0\nload_time_s = 0\n'
                    'nccl_version = "2.21.5"\n')
    p = load_profile(str(good))
    assert (p.name, p.compute_ms, p.layers, p.nccl_version) == ("mine", 9.0, 61, "2.21.5")
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "pcie-8x-mla"\ncompute_msec = 9.0\n')
    with pytest.raises(ProfileError, match="compute_msec"):
        load_profile(str(bad))
    path = tmp_path / "path.toml"
    path.write_text('extends = "pcie-8x-mla"\nnccl_version = "2.25.1"\ngpu_path = "C2C"\n')
    with pytest.raises(ProfileError, match="gpu_path"):  # C2C exists from 2.26
        load_profile(str(path))
    partial = tmp_path / "partial.toml"
    partial.write_text('name = "x"\n')
    with pytest.raises(ProfileError, match="missing"):
        load_profile(str(partial))
    with pytest.raises(ProfileError, match="unknown profile"):
        load_profile("no-such-profile")


# ---------------------------------------------------------------- text and faults


def test_textgen():
    toks, fin = textgen.plan_tokens("What is the capital of France?", max_tokens=50,
                                    ignore_eos=False)
    assert "Paris" in "".join(t for _, t in toks) and fin == "stop" and len(toks) == 7
    toks, fin = textgen.plan_tokens("Count from 1 to 5.", max_tokens=3, ignore_eos=False)
    assert "".join(t for _, t in toks) == "1, 2, 3" and fin == "length"
    toks, _ = textgen.plan_tokens("Count from 1 to 5.", max_tokens=7, ignore_eos=True)
    assert "".join(t for _, t in toks) == "1, 2, 3, 4, 5, 6, 7"
    toks, _ = textgen.plan_tokens("hello", max_tokens=100, ignore_eos=False)
    assert len(toks) == textgen.NATURAL_LENGTH
    toks, _ = textgen.plan_tokens("What is the capital of France?", max_tokens=20,
                                  ignore_eos=True, reasoning_tokens=4)
    assert [k for k, _ in toks[:5]] == ["reasoning"] * 4 + ["content"] and len(toks) == 20
    wrong, _ = textgen.plan_tokens("What is the capital of France? Count from 1 to 3",
                                   max_tokens=30, ignore_eos=True, wrong=True)
    text = "".join(t for _, t in wrong)
    assert "Paris" not in text and "1, 2" not in text


def test_fault_parsing_and_the_counting_rule():
    plan = parse_faults(None, environ={"SIM_FAULT": "hang-mid-stream,slow-teardown",
                                       "SIM_FAULT_AFTER": "3"})
    assert plan.has("hang-mid-stream") and plan.has("slow-teardown") and plan.after_tokens == 3
    assert plan.on_request is None and plan.target == 1
    assert not plan.counts(stream=True, max_tokens=8)  # the readiness request
    assert not plan.counts(stream=False, max_tokens=32)  # a smoke check
    assert plan.counts(stream=True, max_tokens=512)  # a probe run
    explicit = parse_faults("crash-mid-stream", on_request=3)
    assert explicit.counts(stream=True, max_tokens=8) and explicit.target == 3
    assert parse_faults("wrong-output", environ={"SIM_FAULT": "crash-start"}).modes == {
        "wrong-output"}
    with pytest.raises(FaultError, match="accepted"):
        parse_faults("explode")
