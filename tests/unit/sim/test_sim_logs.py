"""NCCL's log lines only when NCCL_DEBUG asks (src/debug.cc), in NCCL's formats."""

from __future__ import annotations

import re

import pytest

from tuner.sim.costmodel import CostModel, tune_model
from tuner.sim.ncclenv import Message, info, read_env, settings_from, warn
from tuner.sim.nccllog import DebugConfig, format_line, init_messages, op_message, tuning_table, version_message
from tuner.sim.profiles import BUILTIN
from tuner.sim.startup import NCCL, rank_lines, run_startup

PCIE = BUILTIN["pcie-8x-mla"]
ENV_MSG = info("NCCL_PROTO set by environment to LL", "ENV")
TUNING_MSG = info("x", "TUNING")
INIT_MSG = info("comm 0x1 rank 0", "INIT")
ALL_MSG = info("NCCL version 2.27.3+cuda12.9")
WARN_MSG = warn("Error : no algorithm/protocol available", "enqueue.cc:1828")


@pytest.mark.parametrize("env,printed", [
    ({}, set()),
    ({"NCCL_DEBUG": ""}, set()),
    ({"NCCL_DEBUG": "bogus"}, set()),
    ({"NCCL_DEBUG": "VERSION"}, set()),
    ({"NCCL_DEBUG": "warn"}, {"warn"}),
    ({"NCCL_DEBUG": "INFO"}, {"env", "init", "all", "warn"}),  # default INIT,BOOTSTRAP,ENV
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}, {"env", "init", "all", "tuning", "warn"}),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}, {"all", "tuning", "warn"}),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^INIT"}, {"env", "all", "tuning", "warn"}),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}, {"env", "init", "all", "tuning", "warn"}),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^ALL"}, set()),
    ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "init, env"}, {"init", "all", "warn"}),  # " env": no trim
    ({"NCCL_DEBUG": "TRACE", "NCCL_DEBUG_SUBSYS": "tuning"}, {"all", "tuning", "warn"}),
])
def test_debug_levels_and_subsystems_as_debug_cc(env, printed):
    d = DebugConfig(env)
    kinds = {"env": ENV_MSG, "tuning": TUNING_MSG, "init": INIT_MSG, "all": ALL_MSG, "warn": WARN_MSG}
    assert {k for k, m in kinds.items() if d.wants(m)} == printed


def test_line_formats():
    d = DebugConfig({"NCCL_DEBUG": "INFO"})
    line = format_line(ENV_MSG, d, 3, "2.27.3", 1234, 1240, "box")
    assert line == "box:1234:1240 [3] NCCL INFO NCCL_PROTO set by environment to LL"
    w = format_line(WARN_MSG, d, 0, "2.27.3", 1, 2, "box")
    assert re.fullmatch(r"\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] box:1:2 \[0\] enqueue\.cc:1828 NCCL WARN "
                        r"Error : no algorithm/protocol available", w)
    assert format_line(WARN_MSG, d, 0, "2.24.3", 1, 2, "box").startswith("\nbox:1:2 [0] enqueue.cc")
    bare = Message("VERSION", ("ALL",), "NCCL version 2.27.3+cuda12.9")
    assert format_line(bare, DebugConfig({"NCCL_DEBUG": "WARN"}), 0, "2.27.3", 1, 2) == bare.text


def test_version_line_rules_of_show_version():
    info_cfg, warn_cfg = DebugConfig({"NCCL_DEBUG": "INFO"}), DebugConfig({"NCCL_DEBUG": "WARN"})
    assert version_message(PCIE, info_cfg, 5).text == "NCCL version 2.27.3+cuda12.9"
    assert version_message(PCIE, info_cfg, 5).level == "INFO"
    assert version_message(PCIE, warn_cfg, 0).level == "VERSION"
    assert version_message(PCIE, warn_cfg, 1) is None
    assert version_message(PCIE, DebugConfig({}), 0) is None


def test_init_lines_of_a_rank():
    s = settings_from({"NCCL_BUFFSIZE": "262144"})
    tm = tune_model(PCIE, s)
    texts = [m.text for m in init_messages(PCIE, s, tm, 0, 0x1000)]
    assert "comm 0x1000 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0" in texts
    assert "Channel 00/04 : 0 1 2 3 4 5 6 7" in texts and "Channel 03/04 : 0 1 2 3 4 5 6 7" in texts
    assert "P2P Chunksize set to 32768" in texts  # min(131072, NCCL_BUFFSIZE / NCCL_STEPS)
    assert "threadThresholds 8/8/64 | 64/8/64 | 512 | 512" in texts
    assert "4 coll channels, 4 collnet channels, 0 nvls channels, 4 p2p channels, 2 p2p channels per peer" in texts
    assert any(t.startswith("ncclCommInitRank comm 0x1000 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 "
                            "commId 0x") and t.endswith(" - Init COMPLETE") for t in texts)
    crossing = [m.text for m in init_messages(PCIE, s, tm, 3, 0x1000)]
    assert "Channel 00 : 3[3] -> 4[4] via SHM/direct/direct" in crossing  # across the sockets
    assert not any(t.startswith("Channel 00/04") for t in crossing)  # the ring is rank 0's
    p2p = [m.text for m in init_messages(PCIE, settings_from({"NCCL_P2P_LEVEL": "SYS"}), tm, 3, 1)]
    assert "Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM" in p2p


def test_tuning_table_layout_of_tuning_cc():
    lines = [m.text for m in tuning_table(tune_model(PCIE, settings_from({})))]
    assert len(lines) == 3 * (3 + 5)  # 7 algorithms in blocks of 3: header, protocol, threads, 5 functions
    assert lines[0] == "  Algorithm   |" + f" {'':>14s}   {'Tree':>14s}   {'':>14s} |" + \
        f" {'':>14s}   {'Ring':>14s}   {'':>14s} |" + f" {'':>14s}   {'CollNetDirect':>14s}   {'':>14s} |"
    assert lines[1].count("|") == 10  # three protocol groups even in a short block
    assert lines[2] == " Max NThreads |" + "".join(f" {n:14d} |" for n in (512, 640, 512, 512, 640, 512, 0, 0, 640))
    allreduce = next(t for t in lines if t.startswith("    AllReduce |"))
    assert allreduce.startswith("    AllReduce |    20.8/   2.9 |    40.6/   0.0 |    64.4/  11.0 |"
                                "    20.6/   6.9 |    49.0/   0.0 |    88.2/  13.7 |")


@pytest.mark.parametrize("version,text", [
    ("2.27.3", "AllReduce: 14336 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"),
    ("2.24.3", "AllReduce: 14336 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"),
    ("2.23.4", "AllReduce: 14336 Bytes -> Algo 1 proto 0 time 22.690667"),
    ("2.21.5", "14336 Bytes -> Algo 1 proto 0 time 22.690667"),
    ("2.19.3", None),
])
def test_per_operation_line_by_version(version, text):
    msg = op_message(tune_model(PCIE, settings_from({}, version)), version, 14336, 1)
    assert (msg.text if msg else None) == text


def test_tuning_variables_are_echoed_where_tuning_cc_reads_them():
    env = {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "1048576"}
    report = read_env(env, PCIE.nccl_version)
    model = CostModel(PCIE, report.settings)
    outcome = run_startup(PCIE, report, model, None)
    texts = [t.split(" NCCL INFO ", 1)[1] for kind, t in
             rank_lines(PCIE, "m", DebugConfig(env), report, model, outcome, 1, 0x1000) if kind == NCCL]
    at = {key: next(i for i, t in enumerate(texts) if t.startswith(key))
          for key in ("NCCL_BUFFSIZE", "comm ", "Connected all trees", "NCCL_PROTO", "NCCL_ALGO", "threadThresholds")}
    assert at["NCCL_BUFFSIZE"] < at["comm "] < at["Connected all trees"] < at["NCCL_PROTO"] < at["NCCL_ALGO"] \
        < at["threadThresholds"]
