"""NCCL's model of the machine from real-format GRAPH and transport lines (tuner/nccl/machine.py).

Lines follow NCCL's format strings: src/graph/topo.cc ncclTopoPrint/ncclTopoPrintRec,
src/graph/paths.cc printNodePaths, src/graph/search.cc ncclTopoCompute/ncclTopoPrintGraph,
src/transport/p2p.cc, shm.cc, src/init.cc (the comm line), src/debug.cc (the prefix).
"""

import pytest

from tuner.nccl import (
    NcclVersion,
    Topology,
    canonical_set,
    default_p2p_level,
    machine_from_log,
    parse_log,
    risky_reason,
    topology_from_log,
)
from tuner.nccl.safety import p2p_default_note

V222, V226, V227, V230 = (NcclVersion.parse(v) for v in ("2.22.3", "2.26.6", "2.27.3", "2.30.7"))


def _amd_topology() -> list[str]:
    """Dual-socket AMD, 8 GPUs, two per PCIe switch, 2.23+ label format ("%s/%lx-%lx")."""
    out = ["=== System : maxBw 24.0 totalBw 24.0 ==="]
    for cpu in (0, 1):
        out.append(f"CPU/0-{cpu} (1/2/-1)")
        for sw in (0, 1):
            bus = 0x10000 + cpu * 0x80000 + sw * 0x20000
            out.append(f"+ PCI[24.0] - PCI/0-{bus:x} (1000c0101000a000)")
            for g in (0, 1):
                rank = cpu * 4 + sw * 2 + g
                out.append(f"              + PCI[24.0] - GPU/0-{bus + 0x1000 * (g + 1):x} ({rank})")
        out.append(f"+ SYS[16.0] - CPU/0-{1 - cpu}")
    out.append("==========================================")
    out.append("GPU/0-11000 :GPU/0-11000 (0/5000.0/LOC) GPU/0-12000 (2/24.0/PIX) GPU/0-31000 (4/24.0/PHB) "
               "GPU/0-91000 (5/16.0/SYS) CPU/0-0 (2/24.0/PHB) CPU/0-1 (3/16.0/SYS) ")
    return out


def _amd_rank_lines(rank: int, fallback_level: str) -> list[tuple[str, str]]:
    lines = [("INFO", t) for t in _amd_topology()]
    for pattern in (4, 1):
        lines.append((fallback_level, f"Could not find a path for pattern {pattern}, falling back to simple order"))
        lines.append(("INFO", f"Pattern {pattern}, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, "
                              "sameChannels 1"))
        lines.append(("INFO", " 0 : " + " ".join(f"GPU/{r}" for r in range(8))))
    lines.append(("INFO", f"comm 0x55d1c0{rank:02x} rank {rank} nRanks 8 nNodes 1 localRanks 8 localRank {rank} MNNVL 0"))
    peer = (rank + 1) % 8
    if rank % 2 == 0:
        lines.append(("INFO", f"Channel 00/0 : {rank}[{rank}] -> {peer}[{peer}] via P2P/CUMEM"))
        lines.append(("INFO", f"Channel 01/0 : {rank}[{rank}] -> {peer}[{peer}] via P2P/CUMEM/read"))
    else:
        lines.append(("INFO", f"Channel 00 : {rank}[{rank}] -> {peer}[{peer}] via SHM/direct/direct"))
        lines.append(("INFO", f"Channel 01 : {rank}[{rank}] -> {peer}[{peer}] via SHM/direct/direct"))
    lines.append(("INFO", "Connected all rings, use ring PXN 0 GDR 0"))
    return lines


def _render(rank: int, lines: list[tuple[str, str]], wrapper: str = "") -> list[str]:
    """NCCL's prefix ("%s:%d:%d [%d] NCCL INFO %s", src/debug.cc); a WARN carries "file.cc:line"."""
    out = []
    for level, msg in lines:
        where = " search.cc:1127" if level == "WARN" else ""
        out.append(f"{wrapper}amd-host:{4100 + rank}:{4100 + rank} [{rank}]{where} NCCL {level} {msg}")
    return out


def _amd_log(version: str, fallback_level: str, *, extra: dict[int, list[str]] | None = None) -> list[str]:
    out = [f"NCCL version {version}+cuda12.8"]
    for rank in (3, 0, 5, 1, 2, 4, 6, 7):  # interleaved ranks, some behind Ray's worker prefix
        wrapper = f"(RayWorkerWrapper pid={4100 + rank}) " if rank in (5, 6) else ""
        body = _amd_rank_lines(rank, fallback_level)
        if extra and rank in extra:
            body = [("INFO", e) for e in extra[rank]] + body
        out += _render(rank, body, wrapper)
    return out


@pytest.mark.parametrize(("version", "level"), [("2.26.6", "WARN"), ("2.27.3", "INFO")])
def test_dual_socket_amd_fallback(version, level):
    parsed = parse_log(_amd_log(version, level))
    m = machine_from_log(parsed)
    assert m is not None and m.has_topology and m.rank == 0 and m.process == "amd-host:4100"
    assert [c.label for c in m.cpus] == ["CPU/0-0", "CPU/0-1"] and m.sockets == 2
    assert m.cpus[0].arch == "x86" and m.cpus[0].vendor == "AMD" and m.cpus[0].model == -1
    assert m.cpu_vendor == "AMD" and m.local_gpus == 8 and len(m.gpus) == 8
    assert m.gpu_ranks == tuple(range(8))
    assert m.gpu_cpus == ("CPU/0-0",) * 4 + ("CPU/0-1",) * 4
    assert m.inter_cpu_bw_GBps == 16.0 and m.gpu_pcie_bw_GBps == 24.0
    sys_link = next(lk for lk in m.links if lk.kind == "SYS")
    assert (sys_link.src, sys_link.dst) == ("CPU/0-0", "CPU/0-1")
    assert m.fell_back and [(f.pattern, f.level) for f in m.fallbacks] == [(4, level), (1, level)]
    assert m.fallbacks[0].line == "Could not find a path for pattern 4, falling back to simple order"
    ring = m.ring_graph
    assert ring is not None and ring.nchannels == 1 and ring.bw_intra_GBps == 0.1 and ring.type_intra == "SYS"
    assert ring.same_channels == 1 and ring.orders == (tuple(f"GPU/{r}" for r in range(8)),)
    assert m.path("GPU/0-11000", "GPU/0-91000").kind == "SYS"
    assert m.path("GPU/0-11000", "GPU/0-12000").kind == "PIX"
    assert m.system_line == "=== System : maxBw 24.0 totalBw 24.0 ==="
    # every rank's transports, once each
    assert m.p2p_pairs == {(r, r + 1) for r in (0, 2, 4, 6)}
    assert m.shm_pairs == {(r, (r + 1) % 8) for r in (1, 3, 5, 7)}
    assert not m.net_pairs
    assert {p.via for p in m.peers} == {"P2P/CUMEM", "P2P/CUMEM/read", "SHM/direct/direct"}
    # NCCL 2.23+: PXB on every CPU, SYS on AMD only with at most 2 GPUs
    assert m.p2p_level.level == "PXB" and m.p2p_level.source == "default"
    assert "paths.cc" in m.p2p_level.reason
    # the 2.26 WARN is still in the warnings, as before
    assert any("falling back to simple order" in w for w in parsed.warnings) == (level == "WARN")
    topo = topology_from_log(parsed)
    assert topo is not None and topo.cpu_vendor == "AMD" and topo.link == "pcie"


def test_the_echo_wins_over_the_default():
    log = _amd_log("2.27.3", "INFO", extra={r: ["NCCL_P2P_LEVEL set by environment to SYS"] for r in range(8)})
    m = machine_from_log(parse_log(log))
    assert m.p2p_level.level == "SYS" and m.p2p_level.source == "echo"
    log = _amd_log("2.27.3", "INFO", extra={r: ["NCCL_P2P_DISABLE set by environment to 1"] for r in range(8)})
    m = machine_from_log(parse_log(log))
    assert m.p2p_level.level is None and m.p2p_level.source == "echo" and "DISABLE" in m.p2p_level.reason


def test_unknown_version_amd_eight_gpus_default_not_known():
    lines = [ln for ln in _amd_log("2.27.3", "INFO") if "NCCL version" not in ln]
    m = machine_from_log(parse_log(lines))
    assert m.p2p_level.level is None and m.p2p_level.source == "unknown"
    assert machine_from_log(parse_log(lines), V222).p2p_level.level == "SYS"


# Intel, one socket, 4 GPUs behind one switch; NCCL 2.22 prints link ends as the whole id ("%lX").
INTEL_222 = """\
NCCL version 2.22.3+cuda12.6
intel:900:900 [0] NCCL INFO === System : maxBw 24.0 totalBw 24.0 ===
intel:900:900 [0] NCCL INFO CPU/0-0 (1/1/2)
intel:900:900 [0] NCCL INFO + PCI[24.0] - PCI/0-16000 (1000c0101000a000)
intel:900:900 [0] NCCL INFO               + PCI[24.0] - GPU/0-1b000 (0)
intel:900:900 [0] NCCL INFO               + PCI[24.0] - GPU/0-1c000 (1)
intel:900:900 [0] NCCL INFO               + PCI[24.0] - GPU/0-1d000 (2)
intel:900:900 [0] NCCL INFO               + PCI[24.0] - GPU/0-1e000 (3)
intel:900:900 [0] NCCL INFO ==========================================
intel:900:900 [0] NCCL INFO GPU/1B000 :GPU/0-1b000 (0/5000.0/LOC) GPU/0-1c000 (2/24.0/PIX) CPU/0-0 (2/24.0/PHB)
intel:900:900 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 24.000000/24.000000, type PIX/PIX, sameChannels 1
intel:900:900 [0] NCCL INFO  0 : GPU/0 GPU/1 GPU/2 GPU/3
intel:900:900 [0] NCCL INFO  1 : GPU/0 GPU/1 GPU/2 GPU/3
intel:900:900 [0] NCCL INFO comm 0x1 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0
intel:900:900 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
intel:901:901 [1] NCCL INFO comm 0x2 rank 1 nRanks 4 nNodes 1 localRanks 4 localRank 1 MNNVL 0
intel:901:901 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/direct pointer
""".splitlines()


def test_intel_single_socket():
    parsed = parse_log(INTEL_222)
    m = machine_from_log(parsed)
    assert m.cpu_vendor == "Intel" and m.sockets == 1 and m.inter_cpu_bw_GBps is None and m.local_gpus == 4
    assert not m.fell_back and m.ring_graph.nchannels == 2 and m.ring_graph.type_intra == "PIX"
    assert len(m.ring_graph.orders) == 2
    assert m.paths[0].src == "GPU/0-1b000"  # "%lX" whole id read as the same label
    assert m.p2p_pairs == {(0, 1), (1, 2)} and {p.via for p in m.peers} == {"P2P/IPC", "P2P/direct pointer"}
    assert m.p2p_level.level == "PXB" and "2.22.3" in m.p2p_level.reason
    assert topology_from_log(parsed).cpu_vendor == "Intel"


# NVLink pairs, NCCL 2.27 (node and link ends "%lx-%lx").
NVLINK_227 = """\
nv:77:77 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
nv:77:77 [0] NCCL INFO === System : maxBw 40.0 totalBw 80.0 ===
nv:77:77 [0] NCCL INFO CPU/0-0 (1/1/4)
nv:77:77 [0] NCCL INFO + PCI[48.0] - GPU/0-19000 (0)
nv:77:77 [0] NCCL INFO               + NVL[80.0] - GPU/0-2d000
nv:77:77 [0] NCCL INFO + PCI[48.0] - GPU/0-2d000 (1)
nv:77:77 [0] NCCL INFO               + NVL[80.0] - GPU/0-19000
nv:77:77 [0] NCCL INFO ==========================================
nv:77:77 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 4, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1
nv:77:77 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
nv:77:77 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
""".splitlines()


def test_nvlink_box():
    m = machine_from_log(parse_log(NVLINK_227))
    nvl = [lk for lk in m.links if lk.kind == "NVL"]
    assert [(lk.src, lk.dst, lk.bw_GBps) for lk in nvl] == [("GPU/0-19000", "GPU/0-2d000", 80.0),
                                                            ("GPU/0-2d000", "GPU/0-19000", 80.0)]
    assert m.ring_graph.type_intra == "NVL" and m.gpu_pcie_bw_GBps == 48.0
    assert m.p2p_level.level == "PXB"  # Intel, 2.27
    assert topology_from_log(parse_log(NVLINK_227)).link == "nvlink"


def test_no_graph_or_transport_lines_gives_none():
    assert machine_from_log(parse_log(["x:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL"])) is None


def test_transports_only_without_graph():
    m = machine_from_log(parse_log(["h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct"]))
    assert m is not None and not m.has_topology and m.shm_pairs == {(0, 1)} and m.local_gpus is None


def test_net_send_receive_lines():
    m = machine_from_log(parse_log([
        "a:1:1 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0(1)/GDRDMA/Shared",
    ]))
    assert m.net_pairs == {(8, 0), (0, 8)}


@pytest.mark.parametrize(("version", "cpu", "gpus", "want"), [
    (V222, "AMD", 8, "SYS"), (V222, "Intel", 8, "PXB"), (V222, "ARM", 4, "PXB"), (V222, "Zhaoxin", 2, "PXB"),
    (V222, "POWER", 4, "SYS"), (V222, None, 8, None),
    (V227, "AMD", 8, "PXB"), (V227, "AMD", 2, "SYS"), (V227, "Intel", 2, "PXB"), (V227, None, 8, "PXB"),
    (V227, None, 2, None), (V227, "AMD", None, None), (V230, "AMD", 1, "SYS"),
    (None, "Intel", 8, "PXB"), (None, "AMD", 2, "SYS"), (None, "AMD", 8, None), (None, "POWER", 4, None),
])
def test_default_p2p_level_table(version, cpu, gpus, want):
    assert default_p2p_level(version, cpu, gpus) == want


AMD8 = Topology(nranks=8, link="pcie", cpu_vendor="AMD")


def test_canonical_set_drops_a_level_equal_to_the_known_default():
    assert canonical_set({"NCCL_P2P_LEVEL": "SYS"}, V222, AMD8) == {}
    assert canonical_set({"NCCL_P2P_LEVEL": "4"}, V222, AMD8) == {}
    assert canonical_set({"NCCL_P2P_LEVEL": "PXB"}, V227, AMD8) == {}
    assert canonical_set({"NCCL_P2P_LEVEL": "SYS"}, V227, AMD8) == {"NCCL_P2P_LEVEL": "SYS"}
    # the CPU unknown: kept where the default depends on it
    assert canonical_set({"NCCL_P2P_LEVEL": "SYS"}, V222, Topology(8, link="pcie")) == {"NCCL_P2P_LEVEL": "SYS"}
    assert canonical_set({"NCCL_P2P_LEVEL": "SYS"}, V227, Topology(2, link="pcie")) == {"NCCL_P2P_LEVEL": "SYS"}
    assert canonical_set({"NCCL_P2P_LEVEL": "PXB"}, None, AMD8) == {"NCCL_P2P_LEVEL": "PXB"}
    assert canonical_set({"NCCL_P2P_LEVEL": "SYS"}, V222, None) == {"NCCL_P2P_LEVEL": "SYS"}


def test_risky_relative_to_the_default():
    assert risky_reason("NCCL_P2P_LEVEL", "SYS", V222, AMD8) is None
    assert "SYS is NCCL's own default here" in p2p_default_note("SYS", V222, AMD8)
    assert risky_reason("NCCL_P2P_LEVEL", "SYS", V227, AMD8) is not None
    assert p2p_default_note("SYS", V227, AMD8) is None
    assert risky_reason("NCCL_P2P_LEVEL", "SYS", V222) is not None  # no topology: as before
    assert "below NCCL's own default SYS" in p2p_default_note("PHB", V222, AMD8)
