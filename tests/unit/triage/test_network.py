"""The NET triage: each cross-node pair's transport and a socket fallback, no GDR or a RoCE GID
problem said with the likely cause, read from NCCL's own lines (real logs fed as they are, and lines
in the spellings of NCCL's sources)."""

from __future__ import annotations

from tests.helpers import ROOT
from tuner.nccl import parse_log, read_network
from tuner.triage import Triage, network_triage, with_network
from tuner.triage.findings import FIX_VALUES
from tuner.triage.network import NET_FIX_VALUES

REAL = ROOT / "tests" / "fixtures" / "reallogs"
LOGS = ROOT / "tests" / "fixtures" / "nccl_logs"


def _judge(lines: list[str]):
    parsed = parse_log(lines)
    return network_triage(read_network(parsed), parsed.echoes)


def _two_nodes(*per_host: str, via: str = "NET/Socket/0") -> list[str]:
    """Two hosts, one rank each, the ``per_host`` messages on both, then their channel lines
    (``[receive]`` logged by the receiver, src/transport/net.cc)."""
    lines = []
    for rank, host in enumerate(("spark-a", "spark-b")):
        p = f"{host}:{100 + rank}:{100 + rank} [0] NCCL INFO "
        lines += [p + "NCCL version 2.28.9+cuda13.0", *(p + m for m in per_host),
                  p + f"comm 0xab rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
                  p + f"Channel 00/0 : {1 - rank}[0] -> {rank}[0] [receive] via {via}",
                  p + f"Channel 00/0 : {rank}[0] -> {1 - rank}[0] [send] via {via}"]
    return lines


def test_the_real_socket_fallback_says_both_pairs_and_the_missing_verbs_library():
    """nccl-2.11.4-two-node-socket.log: two AWS hosts in containers, 'Failed to open libibverbs.so[.1]'
    (src/misc/ibvsymbols.cc), 'Using network Socket' and every channel via NET/Socket/0."""
    net = _judge((LOGS / "nccl-2.11.4-two-node-socket.log").read_text().splitlines())
    [finding] = net.findings
    assert finding.kind == "net-sockets" and not finding.fixes
    assert "ip-10-0-139-244 -> ip-10-0-142-242" in finding.sentence and "libibverbs" in finding.sentence
    assert "--device=/dev/infiniband" in finding.sentence and finding.quote == "Failed to open libibverbs.so[.1]"
    assert net.pairs == (
        "network: ip-10-0-139-244 -> ip-10-0-142-242 via NET/Socket (4 channel lines, e.g. "
        "'Channel 00 : 0[1e0] -> 1[1e0] [receive] via NET/Socket/0')",
        "network: ip-10-0-142-242 -> ip-10-0-139-244 via NET/Socket (4 channel lines, e.g. "
        "'Channel 00 : 1[1e0] -> 0[1e0] [send] via NET/Socket/0')")


def test_the_real_dgx_spark_pair_runs_over_roce_without_gdr():
    """04 (2x GB10, NCCL 2.28.9): 'NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; ...',
    channels via NET/IB/0 and NET/IB/1 (no /GDRDMA), 'NET/IB : GPU Direct RDMA Disabled for HCA 0
    'rocep1s0f1'' (src/graph/topo.cc)."""
    parsed = parse_log((REAL / "04-dgxspark-allgather-2.28.9.log").read_text().splitlines())
    view = read_network(parsed)
    fb97 = view.host("spark-fb97")
    assert fb97 is not None and fb97.ib_devices == ("rocep1s0f1:1/RoCE", "roceP2p1s0f1:1/RoCE")
    assert fb97.network == "IB" and len(fb97.gdr_off) == 2
    pairs = {(p.src, p.dst): p for p in view.pairs}
    assert set(pairs) == {("spark-fb97", "spark-4440"), ("spark-4440", "spark-fb97")}
    assert pairs["spark-fb97", "spark-4440"].via == ("NET/IB/0", "NET/IB/1")
    net = network_triage(view, parsed.echoes)
    assert [f.kind for f in net.findings] == ["net-no-gdr"]
    assert "nvidia-peermem" in net.findings[0].sentence and "GB10" in net.findings[0].sentence
    assert all("via NET/IB without GDRDMA" in line for line in net.pairs)


def test_a_peer_on_a_host_no_line_names_is_another_host():
    """02: node1's ranks receive from ranks 15 and 10, whose host logged no rank: 'another host'."""
    net = _judge((REAL / "02-ncclt256-h200vm-amd-graph.log").read_text().splitlines())
    assert net.findings == ()
    assert net.pairs == ("network: another host -> node1 via NET/IB with GDRDMA (2 channel lines, e.g. "
                         "'Channel 12/0 : 15[7] -> 7[7] [receive] via NET/IB/11/GDRDMA')",)


def test_a_plugins_transport_keeps_its_name():
    net = _judge((REAL / "05-ncclt321-h20vm-alltoall-2.26.5.log").read_text().splitlines())
    assert net.findings == ()
    assert any("via NET/NCCL RDMA Plugin v6 with GDRDMA" in line for line in net.pairs)


def test_no_device_found_is_the_container_cause():
    """'NET/IB : No device found.' (src/transport/net_ib/init.cc, ncclIbInitDevices) then sockets."""
    net = _judge(_two_nodes("NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.0.1<0>",
                            "Using network Socket"))
    [finding] = net.findings
    assert "no IB/RoCE device" in finding.sentence and "spark-a, spark-b" in finding.sentence
    assert "--device=/dev/infiniband" in finding.sentence and finding.quote == "NET/IB : No device found."


def test_devices_listed_yet_sockets_names_ib_disable_or_nccl_net():
    net = _judge(_two_nodes("NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.15<0>",
                            "Using network Socket"))
    [finding] = net.findings
    assert "NCCL_IB_DISABLE or NCCL_NET=Socket" in finding.sentence and not finding.fixes


def test_an_echoed_ib_disable_is_the_cause():
    """``NCCL_IB_DISABLE set by environment to 1.`` (src/misc/param.cc, ncclLoadParam)."""
    net = _judge(_two_nodes("NCCL_IB_DISABLE set by environment to 1.", "NET/Socket : Using [0]eth0:10.0.0.1<0>",
                            "Using network Socket"))
    [finding] = net.findings
    assert "NCCL_IB_DISABLE was set (spark-a:100=1, spark-b:101=1)" in finding.sentence
    assert finding.quote == "NCCL_IB_DISABLE set by environment to 1."


def test_sockets_with_no_net_line_say_the_lines_do_not_tell():
    net = _judge(_two_nodes())
    assert "do not say why" in net.findings[0].sentence


def test_a_roce_gid_warning_proposes_gid_3_first():
    """2.24.3+ ``Call to ibv_modify_qp failed with %d %s, on dev ..., local GID index %d, ...``
    (src/misc/ibvwrap.cc, ibvModifyQpLog) and before it ``Call to ibv_modify_qp failed with error %s errno
    %d`` (the IBV_INT_CHECK_RET_ERRNO macro): both a GID problem."""
    for warn in ("Call to ibv_modify_qp failed with 22 Invalid argument, on dev rocep1s0f1:1, curr state INIT, "
                 "next state RTR, local GID index 0, local GID fe80::1, remote GID fe80::2",
                 "Call to ibv_modify_qp failed with error Invalid argument errno 22",
                 "NET/IB : rocep1s0f1:1 GID table changed"):
        lines = _two_nodes("NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.15<0>",
                           "Using network IB", via="NET/IB/0/GDRDMA")
        lines.insert(2, f"spark-a:100:100 [0] NCCL WARN {warn}")
        net = _judge(lines)
        [finding] = net.findings
        assert finding.kind == "net-gid" and finding.quote == warn
        assert [dict(f.env) for f in finding.fixes] == [{"NCCL_IB_GID_INDEX": "3"}]
        for fix in finding.fixes:
            for var, value in fix.env.items():
                assert value in FIX_VALUES[finding.kind][var] and value in NET_FIX_VALUES[finding.kind][var]


def test_one_node_says_nothing_and_a_stored_triage_reads_back():
    one = ["h:1:1 [0] NCCL INFO comm 0xab rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
           "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"]
    assert _judge(one).findings == () and _judge(one).pairs == ()
    base = Triage((), True, "NCCL's model of this machine looks right: x; the night goes on as planned")
    assert with_network(base, _judge(one)) is base  # a one-node triage stores what it stored before
    joined = with_network(base, _judge(_two_nodes("NET/IB : No device found.", "Using network Socket")))
    assert not joined.model_right and joined.summary.startswith("The network across nodes may cost speed (1 finding)")
    assert joined.lines()[1].startswith("Network fallback to sockets") and joined.lines()[2].startswith("network: ")
    assert Triage.from_dict(joined.to_dict()) == joined
    assert "network" not in base.to_dict() and Triage.from_dict(base.to_dict()) == base


def _warned(warning: str) -> list[str]:
    """Two hosts that listed their RoCE devices, then warned from NCCL's IB transport and used sockets."""
    lines = []
    for line in _two_nodes("NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.15<0>",
                           "Using network Socket"):
        lines.append(line)
        if "NET/IB : Using" in line:
            host = line.split(":", 1)[0]
            lines.append(f"[2026-12-06 21:52:23] {host}:1:1 [0] transport/net_ib.cc:403 NCCL WARN {warning}")
    return lines


def test_a_warning_of_the_ib_transport_is_the_socket_fallbacks_cause_and_a_gid_one_proposes_the_gid():
    """The kind: NCCL left IB for sockets after a warning of its IB transport. The warning is quoted
    as the likely cause (not a guess about NCCL_IB_DISABLE); one about the RoCE GID (its index, type or
    RoCE version) is also the GID finding, whose fix set relaunches first."""
    for warning in ("NET/IB: open failed in ncclIbRoceGetVersionNum: Permission denied",
                    "NET/IB : ncclIbGetGidIndex failed for mlx5_0:1",
                    "NET/IB: Unable to read the RoCE v2 GID of rocep1s0f1:1"):
        net = _judge(_warned(warning))
        kinds = {f.kind: f for f in net.findings}
        assert set(kinds) == {"net-sockets", "net-gid"}, (warning, kinds)
        assert warning in kinds["net-sockets"].sentence and "NCCL_IB_DISABLE" not in kinds["net-sockets"].sentence
        assert kinds["net-gid"].fixes[0].env == {"NCCL_IB_GID_INDEX": "3"}
    net = _judge(_warned("NET/IB : Unable to open device rocep1s0f1: Operation not permitted"))
    [finding] = net.findings
    assert finding.kind == "net-sockets" and "Unable to open device rocep1s0f1" in finding.sentence
    assert finding.quote == "NET/IB : Unable to open device rocep1s0f1: Operation not permitted"
