"""Which variables can change a decode-sized allreduce (src/enqueue.cc topoGetAlgoInfo emulation)."""

import pytest

from tuner.nccl import NcclVersion, Topology
from tuner.nccl.decode import DecodeChoice, Launch, comm_channels, decode_effect, launch, nccl_name
from tuner.record import set_key

V221, V224, V227 = NcclVersion(2, 21, 5), NcclVersion(2, 24, 3), NcclVersion(2, 27, 3)
PCIE = Topology(nranks=8, nnodes=1, link="pcie", has_nvls=False, gpu_arch=120)
DECODE = 7168 * 2  # Kimi-K2.5 / DeepSeek-V3 hidden size x bf16, batch 1
TUNED = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216",
         "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@pytest.mark.parametrize("env,shape", [
    ({}, Launch(1, 128)),                                             # 14,336 B < 1 x 512 x 64: 1 channel, 128 threads
    ({"NCCL_MAX_NCHANNELS": "2"}, Launch(1, 128)),
    ({"NCCL_NTHREADS": "256"}, Launch(1, 128)),
    ({"NCCL_NTHREADS": "64"}, Launch(3, 96)),
    ({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 8 -1 -1"}, Launch(3, 512)),
    ({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 16 -1 -1"}, Launch(1, 512)),
    ({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 32 -1 -1"}, Launch(1, 256)),
])
def test_ring_ll_launch_at_decode_size(env, shape):
    assert launch(DECODE, "Ring", "LL", 8, comm_channels(env, 16), env) == shape


def test_other_pairs():
    assert launch(DECODE, "Ring", "Simple", 8, 16, {}) == Launch(1, 160)  # + the sync warp
    assert launch(DECODE, "Tree", "LL", 8, 16, {}, version=V221) == Launch(3, 512)
    assert launch(DECODE, "Tree", "LL", 8, 16, {}, version=V224) == Launch(3, 640)  # Tree uses all threads from 2.22
    assert launch(64 << 20, "Ring", "Simple", 8, 16, {}) == Launch(16, 544)


def test_channel_variables_follow_connect_cc():
    assert comm_channels({}, 16) == 16
    assert comm_channels({"NCCL_MAX_NCHANNELS": "4"}, 16) == 4
    assert comm_channels({"NCCL_MAX_NCHANNELS": "4", "NCCL_MIN_NCHANNELS": "8"}, 16) == 8  # max, then min
    assert comm_channels({"NCCL_MAX_NCHANNELS": "8", "NCCL_MAX_CTAS": "2"}, 16) == 2


def test_names_from_logs():
    assert nccl_name("RING") == "Ring" and nccl_name("SIMPLE") == "Simple" and nccl_name("NVLS_TREE") == "NVLSTree"
    assert DecodeChoice("TREE", "LL128").algorithm == "Tree"


def test_motivating_tuned_set_reduces_to_the_cuda_variable_on_pcie():
    effect = decode_effect(TUNED, DECODE, 8, DecodeChoice("Ring", "LL"), version=V227, topology=PCIE,
                           search_channels=16)
    assert set(effect.inert) == {"NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE"}
    assert "Simple" in effect.inert["NCCL_BUFFSIZE"] and "1 channel(s) x 128 threads" in effect.inert["NCCL_MAX_NCHANNELS"]
    assert effect.effective == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_lists_that_change_the_pick_are_not_inert():
    effect = decode_effect(TUNED, DECODE, 8, DecodeChoice("Ring", "Simple"), version=V227, topology=PCIE)
    assert "NCCL_PROTO" not in effect.inert and "NCCL_ALGO" not in effect.inert
    assert "NCCL_BUFFSIZE" in effect.inert  # LL is all NCCL may run under this set
    assert effect.effective == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_thresholds_make_channels_matter_again():
    env = {"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 8 -1 -1", "NCCL_MAX_NCHANNELS": "2"}
    effect = decode_effect(env, DECODE, 8, DecodeChoice("Ring", "LL"), version=V227, topology=PCIE)
    assert effect.inert == {}
    assert decode_effect({"NCCL_NTHREADS": "256"}, DECODE, 8, DecodeChoice("Ring", "LL")).inert
    assert not decode_effect({"NCCL_NTHREADS": "64"}, DECODE, 8, DecodeChoice("Ring", "LL")).inert


def test_transport_variables_are_never_called_inert_except_unused_shm():
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    effect = decode_effect(env, DECODE, 8, DecodeChoice("Ring", "LL"), version=V227, topology=PCIE,
                           transports={"P2P/IPC"})
    assert effect.inert == {}
    shm_only = {"NCCL_SHM_DISABLE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    effect = decode_effect(shm_only, DECODE, 8, DecodeChoice("Ring", "LL"), transports={"P2P/IPC"})
    assert set(effect.inert) == {"NCCL_SHM_DISABLE"}
    assert decode_effect(shm_only, DECODE, 8, DecodeChoice("Ring", "LL"), transports={"SHM/direct/direct"}).inert == {}
    # with P2P disabled NCCL needs SHM: the baseline's P2P-only transports say nothing
    both = {**shm_only, "NCCL_P2P_DISABLE": "1"}
    assert decode_effect(both, DECODE, 8, DecodeChoice("Ring", "LL"), transports={"P2P/IPC"}).inert == {}


def test_without_a_topology_lists_are_not_judged():
    effect = decode_effect({"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "262144"}, DECODE, 8, DecodeChoice("Ring", "LL"))
    assert effect.inert == {}
    effect = decode_effect({"NCCL_BUFFSIZE": "262144"}, DECODE, 8, DecodeChoice("Ring", "LL"))
    assert set(effect.inert) == {"NCCL_BUFFSIZE"}


def test_buffer_size_can_act_under_simple_for_large_messages():
    choice = DecodeChoice("Ring", "Simple")
    assert "NCCL_BUFFSIZE" in decode_effect({"NCCL_BUFFSIZE": "262144"}, DECODE, 8, choice).inert
    assert decode_effect({"NCCL_BUFFSIZE": "262144"}, 1 << 20, 8, choice).inert == {}


def test_sets_differing_only_by_inert_knobs_share_a_key():
    """The sweep's identity of a set (set_key of what can act, as tuner/sweep/runner.py keys
    it): sets differing only by knobs inert at the decode size are one set, a knob that acts
    keeps them apart."""
    choice = DecodeChoice("Ring", "LL")

    def key(env: dict[str, str]) -> str:
        return set_key(decode_effect(env, DECODE, 8, choice, version=V227, topology=PCIE).effective)

    a = key({**TUNED, "NCCL_MAX_NCHANNELS": "8"})
    b = key({**TUNED, "NCCL_BUFFSIZE": "0x400000"})
    assert a == b == set_key({"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    assert key({**TUNED, "CUDA_DEVICE_MAX_CONNECTIONS": "2"}) != a
    assert key({**TUNED, "NCCL_PROTO": "Simple"}) != a  # Simple is not what NCCL picks here: it acts
