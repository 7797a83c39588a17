"""NCCL's network between simulated nodes (tuner/sim/ncclnet.py) and what it does to the cost
model of the roce-*-spark profiles: which plugin each set gets, NCCL's NET lines and echoes in
2.28.9's spellings, and the decode speeds the profiles were chosen to give (no server, no timing)."""

from __future__ import annotations

import dataclasses

import pytest

from tuner.sim.costmodel import CostModel, check_init
from tuner.sim.ncclenv import NcclInitError, read_env, settings_from
from tuner.sim.nccllog import DebugConfig, format_line, init_messages
from tuner.sim.ncclnet import net_choice, via
from tuner.sim.profiles import BUILTIN, ProfileError, profile_from_mapping

SPARK2, SPARK4 = BUILTIN["roce-2x-spark"], BUILTIN["roce-4x-spark"]
GID = {"NCCL_IB_GID_INDEX": "3"}


def tok_s(profile, env: dict, batch: int = 1) -> float:
    return CostModel(profile, settings_from(env, profile.nccl_version)).breakdown(batch).tok_s


def texts(env: dict, node: int = 0, profile=SPARK2) -> list[str]:
    return [m.text for m in net_choice(profile, env, node).messages]


def test_the_baseline_decodes_on_sockets_and_the_gid_set_on_ib_at_the_sources_speeds():
    base, fixed = tok_s(SPARK2, {}), tok_s(SPARK2, GID)
    assert base == pytest.approx(24, rel=0.02) and fixed == pytest.approx(40, rel=0.02)  # [gb10]
    assert fixed / base == pytest.approx(40 / 24, rel=0.03)
    assert tok_s(SPARK2, {**GID, "NCCL_IB_DISABLE": "1"}) == pytest.approx(base)  # sockets forced
    assert tok_s(SPARK2, {"NCCL_IB_DISABLE": "0"}) == pytest.approx(base)  # 0 is NCCL's default
    assert tok_s(SPARK4, GID) > 2 * tok_s(SPARK4, {})  # the 4-node ring pays 6 socket hops


@pytest.mark.parametrize("env", [
    {"NCCL_NET_GDR_LEVEL": "0"}, {"NCCL_NET_GDR_LEVEL": "LOC"}, {"NCCL_CROSS_NIC": "0"},
    {"NCCL_CROSS_NIC": "1"}, {"NCCL_IB_SUBNET_AWARE_ROUTING": "1"}, {"NCCL_IB_QPS_PER_CONNECTION": "4"},
])
def test_the_other_network_knobs_move_the_ib_launch_a_little_or_not_at_all(env):
    ib = tok_s(SPARK2, GID)
    assert tok_s(SPARK2, {**GID, **env}) == pytest.approx(ib, rel=0.02)
    assert tok_s(SPARK2, env) == pytest.approx(tok_s(SPARK2, {}), rel=0.02)  # none of them leaves sockets


def test_net_lines_of_each_path_in_nccl_2_28_9_spellings():
    base = texts({}, node=1)
    assert base == [
        "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
        "NET/IB: open failed in ncclIbRoceGetVersionNum: Permission denied",
        "Failed to initialize NET plugin IB",
        "NET/Socket : Using [0]enp1s0f1np1:192.168.100.16<0>",
        "Initialized NET plugin Socket", "Assigned NET plugin Socket to comm", "Using network Socket"]
    assert net_choice(SPARK2, {}).fallback == "gid"
    ib = texts(GID)
    assert ib[:2] == ["NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB "
                      "enp1s0f1np1:192.168.100.15<0>", "NCCL_IB_GID_INDEX set by environment to 3."]
    assert ib[2:] == ["Initialized NET plugin IB", "Assigned NET plugin IB to comm", "Using network IB"]
    disabled = net_choice(SPARK2, {**GID, "NCCL_IB_DISABLE": "1"})
    assert disabled.name == "Socket" and disabled.fallback == "disabled"
    assert not any("NET/IB" in t for t in texts({**GID, "NCCL_IB_DISABLE": "1"}))  # returns before printing


@pytest.mark.parametrize(("value", "name"), [("3", "IB"), ("0x3", "IB"), ("03", "IB"), ("-1", "Socket"),
                                              ("0", "Socket"), ("1", "Socket"), ("abc", "Socket")])
def test_the_gid_index_is_read_as_ncclloadparam_reads_it(value, name):
    choice = net_choice(SPARK2, {"NCCL_IB_GID_INDEX": value})
    assert choice.name == name
    echoed = [t for t in texts({"NCCL_IB_GID_INDEX": value}) if t.startswith("NCCL_IB_GID_INDEX")]
    assert len(echoed) == 1 and echoed[0].endswith(".")  # an integer parameter: a period


@pytest.mark.parametrize(("hca", "name", "listed"), [
    ("rocep1s0f1", "IB", 1),  # a prefix match, case-sensitive: roceP2p1s0f1 does not start with it
    ("=rocep1s0f1", "IB", 1), ("rocep1s0f1:1", "IB", 1), ("rocep1s0f1:2", "Socket", 0),
    ("mlx5_0", "Socket", 0), ("^rocep1s0f1", "IB", 1), ("^roce", "Socket", 0), ("roce", "IB", 2),
])
def test_ib_hca_keeps_the_ports_it_names(hca, name, listed):
    choice = net_choice(SPARK2, {**GID, "NCCL_IB_HCA": hca})
    lines = texts({**GID, "NCCL_IB_HCA": hca})
    assert lines[0] == f"NCCL_IB_HCA set to {hca}"
    assert choice.name == name
    using = next(t for t in lines if t.startswith("NET/IB : Using"))
    assert using.count("/RoCE") == (listed if name == "IB" else 0)
    if name == "Socket":
        assert "NET/IB : No device found." in lines and choice.fallback == "no-device"


def test_socket_ifname_is_echoed_twice_and_a_wrong_one_fails_init():
    lines = texts({**GID, "NCCL_SOCKET_IFNAME": "enp1s0f1np1"})
    assert lines[:2] == ["NCCL_SOCKET_IFNAME set by environment to enp1s0f1np1",
                         "NCCL_SOCKET_IFNAME set to enp1s0f1np1"]
    for good in ("enp", "=enp1s0f1np1", "^eth", "eth0,enp1"):
        check_init(SPARK2, read_env({"NCCL_SOCKET_IFNAME": good}, SPARK2.nccl_version).settings)
    for bad in ("eth0", "=enp1", "^enp"):
        with pytest.raises(NcclInitError) as err:
            check_init(SPARK2, read_env({"NCCL_SOCKET_IFNAME": bad}, SPARK2.nccl_version).settings)
        assert err.value.warn_lines == ["NET/Socket : No usable listening interface found"]
    check_init(BUILTIN["fast-tiny"], read_env({"NCCL_SOCKET_IFNAME": "eth0"}, "2.27.3").settings)  # one node


def test_gdr_level_echo_and_a_gdr_capable_profile():
    assert "NCCL_NET_GDR_LEVEL set by environment to LOC" in texts({**GID, "NCCL_NET_GDR_LEVEL": "0"})
    assert "NCCL_NET_GDR_LEVEL set by environment to SYS" in texts({**GID, "NCCL_NET_GDR_LEVEL": "SYS"})
    assert not net_choice(SPARK2, {**GID, "NCCL_NET_GDR_LEVEL": "SYS"}).gdr  # GB10 at 2.28.9: GDR 0 [log04]
    gdr = dataclasses.replace(SPARK2, net_gdr=True)
    assert via(net_choice(gdr, GID), 1) == "NET/IB/1/GDRDMA"
    assert via(net_choice(gdr, {**GID, "NCCL_NET_GDR_LEVEL": "LOC"}), 1) == "NET/IB/1"
    assert via(net_choice(gdr, {}), 3) == "NET/Socket/0"


def test_a_privileged_profile_gets_ib_untuned():
    privileged = profile_from_mapping({"extends": "roce-2x-spark", "ib_gid_auto": True}, "priv.toml")
    assert net_choice(privileged, {}).name == "IB"
    assert tok_s(privileged, {}) == pytest.approx(tok_s(SPARK2, GID))
    with pytest.raises(ProfileError, match="gpus_per_node must be 0"):
        profile_from_mapping({"extends": "roce-4x-spark", "gpus_per_node": 3}, "odd.toml")


def test_init_messages_of_a_four_node_ring_cross_at_every_rank():
    settings = settings_from({}, SPARK4.nccl_version)
    model = CostModel(SPARK4, settings)
    debug = DebugConfig({"NCCL_DEBUG": "INFO"})
    for rank in range(4):
        lines = [format_line(m, debug, 0, SPARK4.nccl_version, 1, 1, "h")
                 for m in init_messages(SPARK4, settings, model.tune(), rank, 0x100, nodes=4)]
        text = "\n".join(x for x in lines if x)
        assert f"rank {rank} nRanks 4 nNodes 4 localRanks 1 localRank 0" in text
        assert f"Channel 00/0 : {(rank - 1) % 4}[0] -> {rank}[0] [receive] via NET/Socket/0" in text
        assert f"Channel 00/0 : {rank}[0] -> {(rank + 1) % 4}[0] [send] via NET/Socket/0" in text
        assert "via P2P" not in text and "via SHM" not in text


def test_nccl_hostid_is_echoed_as_get_host_hash_does():
    report = read_env({"NCCL_HOSTID": "spark-b"}, SPARK2.nccl_version)
    assert report.info[0] == "NCCL_HOSTID set by environment to spark-b"
    assert not any("HOSTID" in t for t in read_env({}, SPARK2.nccl_version).info)
