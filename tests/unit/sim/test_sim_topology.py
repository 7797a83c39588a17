"""NCCL's GRAPH lines (src/graph/topo.cc ncclTopoPrint, src/graph/search.cc ncclTopoCompute and
ncclTopoPrintGraph), the P2P default of src/graph/paths.cc ncclTopoCheckP2p, and the headlines of
the profiles built on them, by the cost model (no timed server)."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from tests.helpers import ROOT
from tuner.sim.costmodel import CostModel, hop_transports, p2p_level, tune_model
from tuner.sim.ncclconst import default_p2p_level
from tuner.sim.ncclenv import settings_from
from tuner.sim.nccllog import DebugConfig, format_line, init_messages
from tuner.sim.profiles import BUILTIN, profile_from_mapping

FALLBACK, ACS, RIGHT, MLA = (BUILTIN[n] for n in ("pcie-8x-amd-fallback", "pcie-4x-acs", "pcie-8x-nccl-right",
                                                  "pcie-8x-mla"))


def printed(profile, environ, env=None, rank=3):
    s = settings_from(env or {}, profile.nccl_version)
    debug = DebugConfig(environ)
    lines = [format_line(m, debug, rank, profile.nccl_version, 1, 2, "h")
             for m in init_messages(profile, s, tune_model(profile, s), rank, 0x1000)]
    return [t for t in lines if t is not None]


def texts(lines):
    return [t.split(" NCCL INFO ", 1)[1] for t in lines if " NCCL INFO " in t]


def tok_s(profile, env=None, batch=1):
    return CostModel(profile, settings_from(env or {}, profile.nccl_version)).breakdown(batch).tok_s


# ---------------------------------------------------------------- GRAPH lines only when asked


@pytest.mark.parametrize("environ, shown", [
    ({"NCCL_DEBUG": "INFO"}, False),  # default subsystems INIT,BOOTSTRAP,ENV
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}, False),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH"}, True),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}, True),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^GRAPH"}, False),
    ({"NCCL_DEBUG": "WARN", "NCCL_DEBUG_SUBSYS": "GRAPH"}, False),
])
def test_graph_lines_only_when_asked(environ, shown):
    out = texts(printed(FALLBACK, environ))
    assert any(t.startswith("=== System : maxBw") for t in out) is shown
    assert any(t.startswith("Pattern 4, ") for t in out) is shown
    assert any("falling back to simple order" in t for t in out) is shown  # INFO(NCCL_GRAPH) on 2.27


def test_topology_tree_of_the_amd_box_in_ncclTopoPrintRec_format():
    out = texts(printed(FALLBACK, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "GRAPH,INIT"}))
    assert out[0] == "=== System : maxBw 48.0 totalBw 48.0 ==="
    assert out[1] == "CPU/0-0 (1/2/-1)"  # x86 / AMD / no model (topo.cc ncclTopoAddCpu)
    assert out[2] == "+ PCI[48.0] - PCI/0-12000 (1000c03015d91d25)"
    assert " " * 28 + "+ PCI[48.0] - GPU/0-18000 (0)" in out
    assert out.count("+ SYS[16.0] - CPU/0-1") == 1 and "+ SYS[16.0] - CPU/0-0" in out  # AMD_BW
    assert "CPU/0-1 (1/2/-1)" in out and "==========================================" in out
    at = out.index("==========================================")
    assert out[at + 1:at + 7] == [
        "Could not find a path for pattern 4, falling back to simple order",
        "Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, sameChannels 1",
        " 0 : GPU/0 GPU/1 GPU/2 GPU/3 GPU/4 GPU/5 GPU/6 GPU/7",
        "Could not find a path for pattern 1, falling back to simple order",
        "Pattern 1, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, sameChannels 1",
        " 0 : GPU/0 GPU/1 GPU/2 GPU/3 GPU/4 GPU/5 GPU/6 GPU/7"]
    assert out[at + 7].startswith("comm 0x")  # the GRAPH lines come before the comm line


def test_fallback_is_a_warn_up_to_2_26_whatever_the_subsystems():
    old = dataclasses.replace(FALLBACK, nccl_version="2.26.6")
    lines = printed(old, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"})
    warns = [t for t in lines if " NCCL WARN " in t]
    assert len(warns) == 2 and warns[0].startswith("\n[")  # 2.26: empty line and a time stamp
    assert warns[0].endswith("h:1:2 [3] graph/search.cc:1127 NCCL WARN Could not find a path for pattern 4, "
                             "falling back to simple order")
    assert not any("Pattern 4" in t for t in lines)  # the graph itself stays under GRAPH
    assert len([t for t in printed(old, {"NCCL_DEBUG": "WARN"}) if " NCCL WARN " in t]) == 2
    assert "graph/search.cc:1096" in printed(dataclasses.replace(FALLBACK, nccl_version="2.22.3"),
                                             {"NCCL_DEBUG": "WARN"})[0]


def test_node_ids_follow_the_version():
    graph = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "GRAPH"}
    nv = BUILTIN["nvlink-8x"]
    assert "                            + NVL[240.0] - NVS/0" in texts(printed(dataclasses.replace(
        nv, nccl_version="2.21.5"), graph))  # as the 2.21.5 fixture log prints it
    assert "                            + NVL[240.0] - NVS/0-0" in texts(printed(nv, graph))
    old = texts(printed(dataclasses.replace(FALLBACK, nccl_version="2.20.5"), graph))
    assert old[1] == "CPU/0 (1/2/-1)" and "+ SYS[16.0] - CPU/1" in old
    assert "GPU/18000 (0)" in "".join(old)


def test_graph_lines_of_searches_that_succeed():
    out = texts(printed(RIGHT, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "GRAPH"}))
    assert "Pattern 4, crossNic 0, nChannels 2, bw 24.000000/24.000000, type PXB/PIX, sameChannels 1" in out
    assert " 1 : GPU/0 GPU/1 GPU/2 GPU/3 GPU/4 GPU/5 GPU/6 GPU/7" in out
    assert out[1] == "CPU/0-0 (1/1/4)" and not any("SYS[" in t for t in out)  # one Intel socket
    assert not any("falling back" in t for t in out)
    acs = texts(printed(ACS, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "GRAPH"}))
    assert acs[:3] == ["=== System : maxBw 24.0 totalBw 24.0 ===", "CPU/0-0 (1/1/3)",
                       "+ PCI[24.0] - PCI/0-15000 (1000c03015d91d25)"]


# ---------------------------------------------------------------- P2P level and transports


@pytest.mark.parametrize("version, vendor, ngpus, level", [
    ("2.22.3", "AMD", 8, "SYS"), ("2.22.3", "Intel", 8, "PXB"), ("2.22.3", "ARM", 8, "PXB"),
    ("2.22.3", "Zhaoxin", 4, "PXB"), ("2.18.6", "POWER", 8, "SYS"),
    ("2.23.4", "AMD", 8, "PXB"), ("2.23.4", "AMD", 2, "SYS"), ("2.27.3", "Intel", 2, "PXB"),
    ("2.30.7", "AMD", 2, "SYS"), ("2.30.7", "ARM", 8, "PXB"),
])
def test_default_p2p_level_of_ncclTopoCheckP2p(version, vendor, ngpus, level):
    assert default_p2p_level(version, vendor, ngpus) == level


def channel_lines(profile, env, rank):
    return [t for t in texts(printed(profile, {"NCCL_DEBUG": "INFO"}, env, rank)) if " via " in t]


def test_transports_per_pair_follow_the_p2p_level():
    # 2.27 on AMD with 8 GPUs: PXB, so the two socket-crossing hops (3->4, 7->0) go SHM
    assert channel_lines(FALLBACK, {}, 3) == ["Channel 00 : 3[3] -> 4[4] via SHM/direct/direct",
                                              "Channel 01 : 3[3] -> 4[4] via SHM/direct/direct"]
    assert channel_lines(FALLBACK, {}, 2)[0] == "Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM"
    assert channel_lines(FALLBACK, {"NCCL_P2P_LEVEL": "SYS"}, 3)[0] == "Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM"
    assert channel_lines(FALLBACK, {"NCCL_P2P_DISABLE": "1"}, 2)[0] == "Channel 00 : 2[2] -> 3[3] via SHM/direct/direct"
    # the same box on NCCL 2.22: SYS is AMD's default, every hop P2P without any variable
    old = dataclasses.replace(FALLBACK, nccl_version="2.22.3")
    assert p2p_level(old, settings_from({}, "2.22.3")) == "SYS"
    assert channel_lines(old, {}, 3)[0] == "Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM"
    # an Intel box on 2.22 keeps PXB
    assert p2p_level(dataclasses.replace(old, cpu_vendor="Intel"), settings_from({}, "2.22.3")) == "PXB"
    # 2.30.7 spells SHM "via SHM/direct" (src/transport/shm.cc)
    new = dataclasses.replace(FALLBACK, nccl_version="2.30.7")
    assert channel_lines(new, {}, 3)[0] == "Channel 00 : 3[3] -> 4[4] via SHM/direct"
    # the right box: every pair P2P, and no level in the default space changes that
    for env in ({}, {"NCCL_P2P_LEVEL": "PXB"}, {"NCCL_P2P_LEVEL": "PHB"}, {"NCCL_P2P_LEVEL": "SYS"}):
        assert {t for _, t in hop_transports(RIGHT, settings_from(env, RIGHT.nccl_version))} == {"P2P"}


def test_existing_profiles_keep_their_level_and_numbers():
    for name in ("pcie-8x-mla", "nvlink-8x", "nvlink-8x-nccl", "fast-tiny"):
        p = BUILTIN[name]
        assert p.p2p_default_level == "auto" and p2p_level(p, settings_from({}, p.nccl_version)) == "PXB"
    assert tok_s(MLA) == pytest.approx(71.93, abs=0.01)
    assert tok_s(MLA, {"NCCL_P2P_LEVEL": "SYS"}) == pytest.approx(77.27, abs=0.01)


def test_a_toml_profile_may_omit_the_topology_keys_and_override_the_level():
    data = {k: getattr(MLA, k) for k in ("name", "model", "nccl_version")}
    p = profile_from_mapping({"extends": "pcie-8x-mla", **data, "p2p_default_level": "SYS"}, "x.toml")
    assert p2p_level(p, settings_from({}, p.nccl_version)) == "SYS"
    full = {f.name: getattr(MLA, f.name) for f in dataclasses.fields(MLA) if f.name not in (
        "cpu_vendor", "cpu_model", "sockets", "gpu_pcie_bw_GBps", "nvlink_bw_GBps", "graph_fallback")}
    assert profile_from_mapping(full, "full.toml").cpu_vendor == "Intel"


# ---------------------------------------------------------------- the new boxes' headlines


def test_fallback_box_nccl_picks_simple_and_ll_with_sys_gives_about_60_percent():
    s = settings_from({}, FALLBACK.nccl_version)
    cost = CostModel(FALLBACK, s).breakdown(1).allreduce
    assert (cost.algo, cost.proto) == ("Ring", "Simple")  # NCCL's own model at 7168 x 2 bytes
    base = tok_s(FALLBACK)
    assert base == pytest.approx(40, abs=1.5)
    both = tok_s(FALLBACK, {"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"})
    assert 1.5 < both / base < 1.7  # published 40 -> 65-68 tok/s
    ll, sys_ = tok_s(FALLBACK, {"NCCL_PROTO": "LL"}), tok_s(FALLBACK, {"NCCL_P2P_LEVEL": "SYS"})
    assert base < sys_ < ll < both  # each alone gives part of it
    assert tok_s(FALLBACK, {"NCCL_MIN_NCHANNELS": "8"}) == pytest.approx(base)  # decode: no change
    model = CostModel(FALLBACK, s)
    wide = CostModel(FALLBACK, settings_from({"NCCL_MIN_NCHANNELS": "8"}, FALLBACK.nccl_version))
    assert wide.prefill_ms(2000) < model.prefill_ms(2000)  # prefill-size allreduces: faster
    fixed = CostModel(FALLBACK, settings_from({"NCCL_MIN_NCHANNELS": "8", "NCCL_P2P_LEVEL": "SYS"},
                                              FALLBACK.nccl_version))
    busbw = [(256 << 20) / m.nccl(256 << 20).core_us / 1000 * 14 / 8 for m in (model, fixed)]
    assert busbw[0] == pytest.approx(22.2, abs=0.5) and busbw[1] == pytest.approx(37.6, abs=0.5)


def test_acs_box_p2p_disable_wins_at_one_stream_and_loses_with_many():
    base, shm = tok_s(ACS), tok_s(ACS, {"NCCL_P2P_DISABLE": "1"})
    assert 1.10 < shm / base < 1.20
    assert tok_s(ACS, {"NCCL_P2P_DISABLE": "1"}, 32) < tok_s(ACS, {}, 32)
    assert {t for _, t in hop_transports(ACS, settings_from({}, ACS.nccl_version))} == {"P2P"}


def test_right_box_no_default_space_set_gains_beyond_the_noise():
    base = tok_s(RIGHT)
    assert CostModel(RIGHT, settings_from({}, RIGHT.nccl_version)).breakdown(1).allreduce.proto == "LL"
    space = tomllib.loads((ROOT / "search_spaces" / "default.toml").read_text())
    presets = tomllib.loads((ROOT / "search_spaces" / space["include_presets"]).read_text())["presets"]
    sets = [{var: str(v)} for var, spec in space["variables"].items() for v in spec["values"]]
    sets += [p["env"] for p in presets]
    for env in sets:
        assert tok_s(RIGHT, env) < base * 1.02, env
    # the sets that keep NCCL's protocol and transports sit within 2 % both ways
    for p in presets:
        if p["name"] in ("deployment-tuned", "ll", "ring-ll", "max-connections-1", "channels-8"):
            assert tok_s(RIGHT, p["env"]) == pytest.approx(base, rel=0.02), p["name"]
    for level in ("PXB", "PHB", "SYS"):
        assert tok_s(RIGHT, {"NCCL_P2P_LEVEL": level}) == base
