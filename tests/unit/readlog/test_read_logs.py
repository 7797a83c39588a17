"""read_logs on logs written here in spellings the real eight do not show."""

from __future__ import annotations

import json

from tests.helpers import ROOT
from tuner.readlog import read_logs
from tuner.readlog.summary import render


def test_torchrun_log_with_diag_lines_and_a_server_version(tmp_path):
    log = tmp_path / "torchrun.log"
    log.write_text("\n".join([
        "[rank0]:INFO 06-07 10:19:28 pynccl.py:63] vLLM is using nccl==2.31.2",
        "[rank0]:gpu-a:100:110 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        "busId 1000 commId 0x9 - Init START",
        "[rank1]:gpu-a:101:111 [1] NCCL INFO Init timings - ncclCommInitRankConfig: rank 1 nranks 2 total 0.5",
        "[rank0]:gpu-a:100:110 [0] NCCL DIAG P2P 0 -> 1 read 250.1 GB/s",
        "[rank1]:gpu-a:101:111 [1] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PIX",
    ]) + "\n")
    d = read_logs([log]).to_dict()
    assert d["nccl_version"] == "2.31.2"
    assert d["ranks"] == [0, 1] and d["processes"] == ["gpu-a:100:110", "gpu-a:101:111"]
    assert d["echoes"] == {"NCCL_NET_GDR_LEVEL": {"value": "PIX", "ranks": [1]}}
    assert d["diag"] == ["P2P 0 -> 1 read 250.1 GB/s"]


def test_ranks_named_only_as_peers_or_in_a_topology_are_not_ranks(tmp_path):
    log = tmp_path / "peers.log"
    log.write_text("\n".join([
        "h:1:2 [0] NCCL INFO + PCI[48.0] - GPU/0-68000 (8)",
        "h:1:3 [0] NCCL INFO Channel 00/0 : 3[0] -> 4[1] [send] via NET/IB/0",
        "h:1:4 [0] NCCL INFO Channel 00/0 : 5[0] -> 6[1] [receive] via NET/IB/0",
    ]) + "\n")
    d = read_logs([log]).to_dict()
    assert d["ranks"] == [3, 6]
    assert d["peers"] == [{"from": 3, "to": 4, "via": "NET/IB/0"}, {"from": 5, "to": 6, "via": "NET/IB/0"}]


def test_files_that_disagree_say_so_and_a_file_with_nothing_is_empty(tmp_path):
    a, b, junk = tmp_path / "h0.log", tmp_path / "h1.log", tmp_path / "junk.log"
    a.write_text("node:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                 "node:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE\n"
                 "node:1:2 [0] NCCL INFO NCCL_PROTO set by environment to LL\n")
    b.write_text("node2:5:5 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
                 "node2:5:6 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 - Init COMPLETE\n"
                 "node2:5:6 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n")
    junk.write_bytes(bytes(range(256)) * 40)
    both = read_logs([a, b])
    assert both.nccl_versions == ["2.21.5", "2.23.4"] and both.ranks == [0, 1] and not both.empty
    assert both.echoes["NCCL_PROTO"]["value"] in ("LL", "Simple") and len(both.echoes["NCCL_PROTO"]["others"]) == 1
    assert read_logs([junk]).empty and read_logs([junk]).to_dict()["empty"] is True


def test_a_line_of_megabytes_is_cut_as_a_night_cuts_it(tmp_path):
    log = tmp_path / "long.log"
    log.write_text("node:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 - Init COMPLETE\n"
                   + "x" * 5_000_000 + "\n")
    summary = read_logs([log])
    assert summary.ranks == [0] and len(json.dumps(summary.to_dict())) < 100_000


def test_a_two_node_socket_fallback_is_said_with_each_pairs_transport(capsys):
    """The real two-host log on sockets: read-log's triage says the fallback, its cause and each pair."""
    summary = read_logs([ROOT / "tests" / "fixtures" / "nccl_logs" / "nccl-2.11.4-two-node-socket.log"])
    d = summary.to_dict()
    assert [f["kind"] for f in d["triage"]] == ["net-sockets"]
    assert d["network"][0].startswith("network: ip-10-0-139-244 -> ip-10-0-142-242 via NET/Socket")
    render(summary)
    out = capsys.readouterr().out
    assert "- Network fallback to sockets" in out and "- network: ip-10-0-142-242 -> ip-10-0-139-244 via NET/Socket" in out
