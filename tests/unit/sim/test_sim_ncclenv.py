"""The simulator reads NCCL variables as NCCL's source does (src/misc/param.cc, graph/tuning.cc
parseList, graph/paths.cc ncclGetLevel, graph/connect.cc, init.cc computeBuffSizes)."""

from __future__ import annotations

import pytest

from tuner.sim.ncclconst import DEFAULT_BUFFSIZES
from tuner.sim.ncclenv import NcclInitError, read_env, settings_from, strtoll, strtoll_checked


@pytest.mark.parametrize("text,value", [
    ("4M", 4), ("abc", 0), ("", 0), ("16777216", 16777216), ("0x10", 16), ("0X1f", 31),
    ("010", 8), ("08", 0), ("0x", 0), ("0xg", 0), ("  42", 42), ("\t-7z", -7), ("+3", 3),
    ("-0x10", -16), ("1e6", 1), ("12 34", 12), ("-", 0), ("0", 0),
])
def test_strtoll_matches_c(text, value):
    assert strtoll(text) == value


def test_strtoll_overflow_clamps_and_flags():
    assert strtoll_checked("99999999999999999999") == (2**63 - 1, True)
    assert strtoll_checked("-99999999999999999999") == (-(2**63), True)
    assert strtoll_checked("-9223372036854775808") == (-(2**63), False)


def test_read_env_echoes_and_values_like_nccl():
    rep = read_env({"NCCL_BUFFSIZE": "4M", "NCCL_MAX_NCHANNELS": "abc", "NCCL_PROTO": "LL",
                    "NCCL_MIN_NCHANNELS": "99999999999999999999", "NCCL_P2P_LEVEL": "sys",
                    "NCCL_P2P_DISABLE": "2", "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    s = rep.settings
    assert s.buffsize == 4 and s.buffsizes["LL"] == DEFAULT_BUFFSIZES["LL"]  # Simple's only
    assert "NCCL_BUFFSIZE set by environment to 4." in rep.info
    assert "NCCL_PROTO set by environment to LL" in rep.info
    assert "NCCL_MAX_NCHANNELS set by environment to 0." in rep.info
    assert s.max_nchannels == 1 and "User asked for a maximum of 0 channels, setting it to 1" in rep.info
    assert "Invalid value 99999999999999999999 for NCCL_MIN_NCHANNELS, using default -2." in rep.info
    assert s.min_nchannels == 0
    assert s.p2p_level is None  # strcmp: a lower-case name is silently ignored
    assert s.p2p_disable is False  # only 1 has an effect
    assert not [m for m in rep.info if "P2P" in m or "CUDA" in m]  # nothing echoed for them
    assert not rep.warn  # clamping and ignoring are INFO or silent, never WARN


@pytest.mark.parametrize("value,level,version", [
    ("SYS", "SYS", "2.27.3"), ("4", "SYS", "2.27.3"), ("9", "SYS", "2.27.3"), ("2", "PXB", "2.27.3"),
    ("C2C", "C2C", "2.26.2"), ("C2C", None, "2.25.1"), ("P2C", "P2C", "2.27.3"), ("P2C", None, "2.26.2"),
    ("pxb", None, "2.27.3"), ("PXN", "PXN", "2.21.5"),
])
def test_p2p_level_names_by_version(value, level, version):
    rep = read_env({"NCCL_P2P_LEVEL": value}, version)
    assert rep.settings.p2p_level == level
    assert (f"NCCL_P2P_LEVEL set by environment to {level}" in rep.info) == (level is not None)


def test_buffsize_is_a_c_int_and_min_above_max_is_allowed():
    assert settings_from({"NCCL_BUFFSIZE": "0x400000"}).buffsize == 4194304
    assert settings_from({"NCCL_BUFFSIZE": "3000000000"}).buffsize == 3000000000 - 2**32
    assert settings_from({"NCCL_BUFFSIZE": "4294967296"}).buffsize == 0
    assert settings_from({"NCCL_BUFFSIZE": "-2"}).buffsize == DEFAULT_BUFFSIZES["Simple"]
    s = settings_from({"NCCL_MAX_NCHANNELS": "2", "NCCL_MIN_NCHANNELS": "8"})
    assert (s.max_nchannels, s.min_nchannels) == (2, 8)
    assert settings_from({"NCCL_MAX_NCHANNELS": "100"}, "2.24.3").max_nchannels == 32
    assert settings_from({"NCCL_MAX_NCHANNELS": "100"}, "2.25.1").max_nchannels == 64


def test_conf_file_fills_unset_variables_without_trimming(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text("# comment\nNCCL_PROTO=Simple\nNCCL_BUFFSIZE=1048576  # not a comment\n"
                    "NCCL_ALGO= Ring\n")
    rep = read_env({"NCCL_CONF_FILE": str(conf), "NCCL_PROTO": "LL"}, "2.23.4")
    assert rep.settings.buffsize == 1048576  # strtoll stops at the space
    assert rep.settings.selection.proto["AllReduce"] == {"LL": 1, "LL128": 0, "Simple": 0}
    assert rep.settings.raw["NCCL_ALGO"] == " Ring"  # " Ring" is an unknown token for NCCL
    with pytest.raises(NcclInitError, match='Unrecognized element token " Ring"'):
        read_env({"NCCL_CONF_FILE": str(conf)}, "2.24.3")


@pytest.mark.parametrize("value,enabled", [
    ("Ring", {"Ring"}), ("^Tree", {"Ring"}), ("ring,TREE", {"Ring", "Tree"}),
    ("allreduce:tree;broadcast:ring", {"Tree"}), ("ring;allreduce:tree", {"Tree"}),
    ("broadcast:tree", {"Tree", "Ring"}),
])
def test_algo_grammar(value, enabled):
    sel = settings_from({"NCCL_ALGO": value}).selection
    assert {a for a in ("Tree", "Ring") if sel.algo_on(a)} == enabled


@pytest.mark.parametrize("value,message", [
    ("Rung", 'Unrecognized element token "Rung"'),
    ("Ring, Tree", 'Unrecognized element token " Tree"'),
    ("allreduce:ring;ring", "All entries except the first must have a prefix"),
    (";ring", "All entries except the first must have a prefix"),
    ("allreduc:ring", 'Unrecognized prefix token "allreduc"'),
])
def test_algo_grammar_errors_from_2_24(value, message):
    with pytest.raises(NcclInitError) as exc:
        settings_from({"NCCL_ALGO": value}, "2.24.3")
    assert message in exc.value.warn_lines[0]
    assert exc.value.result == "ncclInvalidUsage"
    assert exc.value.messages[0].text == f"NCCL_ALGO set by environment to {value}"
    settings_from({"NCCL_ALGO": value}, "2.23.4")  # before 2.24 unknown tokens are ignored


def test_per_collective_syntax_before_2_24_is_one_unknown_token():
    sel = settings_from({"NCCL_ALGO": "allreduce:tree"}, "2.23.4").selection
    assert not sel.algo_on("Tree") and not sel.algo_on("Ring")


@pytest.mark.parametrize("value,new,old", [
    ("LL128", True, True), ("LL,LL128", True, True), ("^Simple", True, True), ("^LL", True, True),
    ("LL", False, False), ("allreduce:^LL128", False, False), ("", False, False),
    ("^LL128;allreduce:LL128", True, True),  # 2.23: "^" then one unknown token
])
def test_ll128_forcing_by_any_spelling(value, new, old):
    # parseList sets every element to 1 under "^": an exclusion that does not name LL128 forces it
    assert settings_from({"NCCL_PROTO": value}, "2.24.3").selection.ll128_forced is new
    assert settings_from({"NCCL_PROTO": value}, "2.23.4").selection.ll128_forced is old


def test_thread_thresholds_parse_like_sscanf():
    s = settings_from({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 1 x 5"})
    assert s.thread_thresholds == (None, None, None, 1, None, None)
    rep = read_env({"NCCL_THREAD_THRESHOLDS": "8 8 64 16 8 64"})
    assert rep.settings.thread_thresholds == (8, 8, 64, 16, 8, 64)
    assert "NCCL_THREAD_THRESHOLDS set by environment to 8 8 64 16 8 64" in rep.info
