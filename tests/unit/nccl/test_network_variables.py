"""NCCL's network variables across nodes as NCCL reads them (contract of issue 36, section 5):
which are tunable, which stay the machine's, their value rules, and their echoes proven."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT
from tuner.nccl import (
    HARDWARE_SELECTORS,
    VARIABLES,
    NcclVersion,
    canonical_value,
    check_value,
    confirmations,
    is_tuning_variable,
    parse_log,
    unlaunched_echoes,
)
from tuner.nccl.names import name_problem
from tuner.server.env import split_inherited

TUNABLE = ("NCCL_IB_GID_INDEX", "NCCL_IB_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_IB_QPS_PER_CONNECTION",
           "NCCL_CROSS_NIC", "NCCL_IB_SUBNET_AWARE_ROUTING")
MACHINE = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")
REAL = ROOT / "tests" / "fixtures" / "reallogs"


def test_the_tunable_ones_are_not_the_machines_and_the_device_names_are():
    for name in TUNABLE:
        assert name not in HARDWARE_SELECTORS, name
        assert VARIABLES[name].acts_on == frozenset({"network"}), name
        assert VARIABLES[name].read_when, name
    for name in MACHINE:
        assert name in HARDWARE_SELECTORS, name


def test_an_inherited_tunable_one_is_stripped_and_a_device_name_kept_unless_the_space_varies_it():
    inherited = {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "enp1s0f1np1",
                 "NCCL_IB_HCA": "rocep1s0f1", "PATH": "/bin"}
    removed, kept = split_inherited(inherited)
    assert removed == ["NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX"]
    assert kept == ["NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"]
    removed, kept = split_inherited(inherited, varied=["NCCL_SOCKET_IFNAME"])
    assert "NCCL_SOCKET_IFNAME" in removed and kept == ["NCCL_IB_HCA"]
    assert is_tuning_variable("NCCL_IB_GID_INDEX", include_hardware_selectors=False)


def test_subnet_aware_routing_is_read_from_2_30_7_only():
    """NCCL_PARAM(IbSubnetAwareRouting, "IB_SUBNET_AWARE_ROUTING", 0): src/transport/net_ib/connect.cc at
    v2.30.7-1, absent from every earlier tag."""
    var = VARIABLES["NCCL_IB_SUBNET_AWARE_ROUTING"]
    assert var.first == "2.30.7" and var.read_by(NcclVersion(2, 30, 7))
    assert not var.read_by(NcclVersion(2, 30, 4)) and not var.read_by(NcclVersion(2, 28, 9))
    # the misspellings users write are refused with the name NCCL reads
    for wrong in ("NCCL_IB_SUBNET_AWARE_ROUTE", "NCCL_SUBNET_AWARE_ROUTING", "nccl_ib_subnet_aware_routing"):
        why = name_problem(wrong)
        assert why is not None and "NCCL_IB_SUBNET_AWARE_ROUTING" in why, (wrong, why)


@pytest.mark.parametrize(("name", "value", "canonical"), [
    ("NCCL_IB_DISABLE", "1", "1"), ("NCCL_IB_DISABLE", "0", ""), ("NCCL_IB_DISABLE", "0x1", "1"),
    ("NCCL_IB_DISABLE", "2", "1"), ("NCCL_IB_SUBNET_AWARE_ROUTING", "1", "1"),
    ("NCCL_IB_SUBNET_AWARE_ROUTING", "0", ""),
    ("NCCL_CROSS_NIC", "2", ""), ("NCCL_CROSS_NIC", "1", "1"), ("NCCL_CROSS_NIC", "0", "0"),
    ("NCCL_IB_QPS_PER_CONNECTION", "1", ""), ("NCCL_IB_QPS_PER_CONNECTION", "4", "4"),
    ("NCCL_IB_QPS_PER_CONNECTION", "0x10", "16"),
    ("NCCL_IB_GID_INDEX", "3", "3"), ("NCCL_IB_GID_INDEX", "0x3", "3"),
    ("NCCL_NET_GDR_LEVEL", "0", "LOC"), ("NCCL_NET_GDR_LEVEL", "LOC", "LOC"), ("NCCL_NET_GDR_LEVEL", "2", "PXB"),
])
def test_values_read_as_nccl_reads_them(name, value, canonical):
    assert check_value(name, value) is None
    assert canonical_value(name, value) == canonical


def test_a_negative_gid_is_nccls_own_pick_from_2_21_5_and_an_index_before():
    """NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", -1) from v2.21.5-1 (0 before): ncclIbGetGidIndex picks the
    GID itself unless the value is >= 0; 2.20 passes -1 to the verbs as the index."""
    new = NcclVersion(2, 28, 9)
    assert check_value("NCCL_IB_GID_INDEX", "-1", new) is None and canonical_value("NCCL_IB_GID_INDEX", "-1", new) == ""
    assert canonical_value("NCCL_IB_GID_INDEX", "-2", new) == ""
    why = check_value("NCCL_IB_GID_INDEX", "-1", NcclVersion(2, 20, 5))
    assert why is not None and "2.21.5" in why
    assert check_value("NCCL_IB_GID_INDEX", "0", NcclVersion(2, 20, 5)) is None


@pytest.mark.parametrize(("name", "value", "says"), [
    ("NCCL_IB_GID_INDEX", "auto", "as 0"),
    ("NCCL_IB_GID_INDEX", "3.0", "as 3"),
    ("NCCL_IB_DISABLE", "true", "IB stays ENABLED"),
    ("NCCL_IB_QPS_PER_CONNECTION", "0", "1 to 128"),
    ("NCCL_IB_QPS_PER_CONNECTION", "129", "1 to 128"),
    ("NCCL_IB_QPS_PER_CONNECTION", "four", "as 0"),
    ("NCCL_CROSS_NIC", "3", "only for 0, 1 and 2"),
    ("NCCL_CROSS_NIC", "-1", "only for 0, 1 and 2"),
    ("NCCL_NET_GDR_LEVEL", "loc", "case-sensitive"),
])
def test_bad_values_say_what_nccl_would_do(name, value, says):
    why = check_value(name, value)
    assert why is not None and says in why, why


def test_the_real_two_node_log_proves_socket_ifname_on_both_ranks():
    """04 (NCCL 2.28.9, 2x GB10 over RoCE, NCCL_DEBUG_SUBSYS=INIT,NET): the NET spelling 'NCCL_SOCKET_IFNAME
    set to enp1s0f1np1' (src/misc/socket.cc, ncclFindInterfaces) echoed by rank 0 on spark-fb97 and rank 1
    on spark-4440."""
    parsed = parse_log((REAL / "04-dgxspark-allgather-2.28.9.log").read_text().splitlines())
    proof = confirmations({"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}, parsed)
    assert proof.confirmed == {"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}
    row = proof.rows[0]
    assert row.echoed == (0, 1) and row.nranks == 2
    other = confirmations({"NCCL_SOCKET_IFNAME": "eth0"}, parsed)
    assert "NCCL_SOCKET_IFNAME" in other.not_applied and "enp1s0f1np1" in other.not_applied["NCCL_SOCKET_IFNAME"]


def test_a_network_value_given_but_not_echoed_is_not_proven_and_says_when_nccl_reads_it():
    """04 shows NET/IB connections but NCCL_DEBUG_SUBSYS=INIT,NET (no ENV echoes): NCCL_IB_GID_INDEX=3,
    launched, is not proven, and the reason says when NCCL reads it."""
    parsed = parse_log((REAL / "04-dgxspark-allgather-2.28.9.log").read_text().splitlines())
    proof = confirmations({"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "0"}, parsed)
    assert proof.unverifiable == ["NCCL_IB_GID_INDEX", "NCCL_NET_GDR_LEVEL"] and not proof.confirmed
    why = {r.name: r.why for r in proof.rows}
    assert "RoCE" in why["NCCL_IB_GID_INDEX"] and "NET/IB" in why["NCCL_IB_GID_INDEX"]
    assert "GPU Direct RDMA" in why["NCCL_NET_GDR_LEVEL"]


def test_net_echoes_in_nccls_own_spellings_confirm_the_set():
    """``NCCL_IB_GID_INDEX set by environment to 3.`` (src/misc/param.cc, ncclLoadParam: integers end with
    a period) and ``NCCL_NET_GDR_LEVEL set by environment to LOC`` (src/graph/paths.cc, ncclGetLevel: the
    level's name for a launched 0), on both nodes' ranks."""
    lines = []
    for rank, host in enumerate(("spark-a", "spark-b")):
        p = f"{host}:{100 + rank}:{100 + rank}"
        lines += [f"{p} [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
                  f"{p} [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
                  f"{p} [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC",
                  f"{p} [0] NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 4.",
                  f"{p} [0] NCCL INFO comm 0xab rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
                  f"{p} [0] NCCL INFO ncclCommInitRankConfig comm 0xab rank {rank} nranks 2 cudaDev 0 nvmlDev 0 "
                  "busId f01000 commId 0x1 - Init COMPLETE"]
    parsed = parse_log(lines)
    proof = confirmations({"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "0", "NCCL_IB_QPS_PER_CONNECTION": "4"},
                          parsed)
    assert proof.confirmed == {"NCCL_IB_GID_INDEX": "3", "NCCL_NET_GDR_LEVEL": "LOC",
                               "NCCL_IB_QPS_PER_CONNECTION": "4"}
    assert all(r.echoed == (0, 1) for r in proof.rows)
    wrong = confirmations({"NCCL_IB_GID_INDEX": "1"}, parsed)
    assert "echoed NCCL_IB_GID_INDEX=3" in wrong.not_applied["NCCL_IB_GID_INDEX"]


def test_ib_disable_given_while_ranks_connect_over_net_ib_is_not_applied():
    """02: ranks of node1 receive over NET/IB/11/GDRDMA; a launched NCCL_IB_DISABLE=1 cannot have reached
    them (src/transport/net_ib/init.cc, ncclIbInitDevices returns before any IB device when it is set)."""
    parsed = parse_log((REAL / "02-ncclt256-h200vm-amd-graph.log").read_text().splitlines())
    proof = confirmations({"NCCL_IB_DISABLE": "1"}, parsed)
    assert "NET/IB" in proof.not_applied["NCCL_IB_DISABLE"]
    assert confirmations({"NCCL_IB_DISABLE": "0"}, parsed).unverifiable == ["NCCL_IB_DISABLE"]


def test_a_rank_that_logged_its_init_without_the_socket_ifname_echo_did_not_get_it():
    """NCCL_SOCKET_IFNAME is read at every bootstrap (src/misc/socket.cc, ncclFindInterfaces): rank 1's
    lines through Init COMPLETE without its echo mean rank 1 never had it; a one-character value is
    never read (``strlen(env) > 1``), so its silence proves nothing."""
    lines = []
    for rank, host in enumerate(("spark-a", "spark-b")):
        p = f"{host}:{100 + rank}:{100 + rank} [0] NCCL INFO "
        if rank == 0:
            lines.append(p + "NCCL_SOCKET_IFNAME set by environment to enp1s0f1np1")
        lines += [p + f"comm 0xab rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
                  p + f"ncclCommInitRankConfig comm 0xab rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId f01000 "
                      "commId 0x1 - Init COMPLETE"]
    parsed = parse_log(lines)
    proof = confirmations({"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}, parsed)
    assert "rank 1" in proof.not_applied["NCCL_SOCKET_IFNAME"]
    assert confirmations({"NCCL_SOCKET_IFNAME": "e"}, parse_log(lines[1:])).unverifiable == ["NCCL_SOCKET_IFNAME"]


def test_the_machines_own_selectors_echoed_are_not_settings_behind_the_launch():
    """04 echoes NCCL_SOCKET_IFNAME, kept from the runner's environment (the machine's); NCCL_HOSTID
    (src/misc/utils.cc, getHostHash echoes it) likewise; an NCCL_IB_DISABLE nobody launched is counted."""
    parsed = parse_log([*(REAL / "04-dgxspark-allgather-2.28.9.log").read_text().splitlines(),
                        "spark-fb97:23491:23491 [0] NCCL INFO NCCL_HOSTID set by environment to spark-fb97",
                        "spark-fb97:23491:23491 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1."])
    assert list(unlaunched_echoes({}, parsed)) == ["NCCL_IB_DISABLE"]
