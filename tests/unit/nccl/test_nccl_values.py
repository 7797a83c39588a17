"""Integer, level, flag and threshold variables as NCCL reads them; names; versions."""

import pytest

from tuner.nccl import (
    OLDEST_SUPPORTED,
    NcclVersion,
    accepted,
    canonical_value,
    check_value,
    is_hardware_selector,
    is_tuning_variable,
    name_warning,
    p2p_levels,
    risky_reason,
    strtoll,
    value_warnings,
)
from tuner.nccl.names import name_problem
from tuner.nccl.thresholds import default_thread_thresholds
from tuner.nccl.values import max_channels, nthreads_level

V218, V221, V224, V225, V226, V227, V228 = (NcclVersion.parse(v) for v in
                                             ("2.18.1", "2.21.5", "2.24.3", "2.25.1", "2.26.2", "2.27.3", "2.28.3"))


def test_version_parsing():
    assert NcclVersion.parse("2.21.5+cuda12.4") == NcclVersion(2, 21, 5)
    assert NcclVersion.parse("v2.24.3-1") == NcclVersion(2, 24, 3)
    assert NcclVersion.parse("2.21") == NcclVersion(2, 21, 0)
    assert NcclVersion.from_code(22105) == NcclVersion(2, 21, 5)
    assert NcclVersion.from_code(2708) == NcclVersion(2, 7, 8)
    assert str(OLDEST_SUPPORTED) == "2.18.1" and V221 < V224
    with pytest.raises(ValueError, match="not an NCCL version"):
        NcclVersion.parse("latest")


@pytest.mark.parametrize("text,value,rest", [("4M", 4, "M"), ("abc", 0, "abc"), ("0x10", 16, ""),
                                             ("010", 8, ""), ("  -3", -3, ""), ("0xg", 0, "xg")])
def test_strtoll_matches_c(text, value, rest):
    assert strtoll(text) == (value, rest)


@pytest.mark.parametrize("value,needle", [
    ("4M", "strtoll as 4"), ("16MB", "strtoll as 16"), ("", "empty"),
    ("4294967296", "overflows the int"), ("2147483648", "overflows the int"),
    ("4", "step size of 0"), ("0", "step size of 0"), ("-2", "unset"),
    ("99999999999999999999", "int64 range"),
])
def test_buffsize_refused(value, needle):
    assert needle in check_value("NCCL_BUFFSIZE", value)


@pytest.mark.parametrize("value,canonical", [
    ("16777216", "16777216"), ("0x1000000", "16777216"), ("4194304", ""), ("0x400000", ""),
    ("2147483647", "2147483647"), (" 262144", "262144"), ("01000000", "262144"),
])
def test_buffsize_spellings(value, canonical):
    assert check_value("NCCL_BUFFSIZE", value) is None
    assert canonical_value("NCCL_BUFFSIZE", value) == canonical


def test_max_channels_clamp_by_version():
    assert max_channels(V224) == 32 and max_channels(V225) == 64
    assert check_value("NCCL_MAX_NCHANNELS", "64", V224) is None
    assert "MAXCHANNELS=32" in value_warnings("NCCL_MAX_NCHANNELS", "64", V224)[0]
    assert value_warnings("NCCL_MAX_NCHANNELS", "64", V225) == []
    assert canonical_value("NCCL_MAX_NCHANNELS", "64", V224) == ""  # = MAXCHANNELS = unset
    assert canonical_value("NCCL_MAX_NCHANNELS", "32", V225) == "32"
    assert canonical_value("NCCL_MAX_NCHANNELS", "0x10", V225) == "16"
    assert canonical_value("NCCL_MAX_NCHANNELS", "0", V225) == "1"
    assert "below 1" in value_warnings("NCCL_MAX_NCHANNELS", "0", V225)[0]
    assert "-2" in check_value("NCCL_MAX_NCHANNELS", "-2")
    assert "overflows" in check_value("NCCL_MAX_NCHANNELS", "4294967297")


def test_min_channels():
    assert canonical_value("NCCL_MIN_NCHANNELS", "-1") == ""
    assert "below 0" in value_warnings("NCCL_MIN_NCHANNELS", "-1")[0]
    assert canonical_value("NCCL_MIN_NCHANNELS", "40", V224) == "32"
    assert canonical_value("NCCL_MIN_NCHANNELS", "40", V225) == "40"


def test_ctas():
    assert check_value("NCCL_MAX_CTAS", "0", V225) is not None
    assert check_value("NCCL_MIN_CTAS", "16", V225) is None
    assert canonical_value("NCCL_MAX_CTAS", "0x10", V225) == "16"


def test_nthreads():
    assert "multiple of 32" in check_value("NCCL_NTHREADS", "100")
    assert "<= 0" in check_value("NCCL_NTHREADS", "0")
    assert canonical_value("NCCL_NTHREADS", "1024") == "512"
    assert "above 512" in value_warnings("NCCL_NTHREADS", "1024")[0]
    assert canonical_value("NCCL_NTHREADS", "32") == "64"
    assert canonical_value("NCCL_NTHREADS", "0x100") == "256"


def test_nthreads_messages_are_warn_up_to_226_and_info_from_227():
    # src/graph/tuning.cc getNthreads: WARN("Invalid %s %d (maximum %d).") at v2.26.6-1,
    # INFO(NCCL_GRAPH|NCCL_ENV, ...) at v2.27.3-1 and v2.30.7-1
    assert nthreads_level(V226) == "WARN" and nthreads_level(V227) == "INFO" and nthreads_level(None) == "WARN"
    assert "NCCL WARNs \"Invalid NCCL_NTHREADS 1024 (maximum 512).\"" in value_warnings("NCCL_NTHREADS", "1024", V226)[0]
    late = value_warnings("NCCL_NTHREADS", "1024", V227)[0]
    assert "logs an INFO" in late and "WARN" not in late
    assert "(minimum 160)" in value_warnings("NCCL_LL128_NTHREADS", "64", V228)[0]
    assert "logs an INFO" in check_value("NCCL_NTHREADS", "100", V227)


@pytest.mark.parametrize("value,level,version", [
    ("PXB", "PXB", V218), ("NVB", "NVB", V218), ("PXN", "PXN", V218), ("2", "PXB", V218), ("1", "PIX", V221),
    ("0", "LOC", V221), ("4", "SYS", V221), ("5", "SYS", V221), ("010", "SYS", V221), ("C2C", "C2C", V226),
    ("P2C", "P2C", V227), ("P2C", "P2C", V228),
])
def test_p2p_levels_accepted(value, level, version):
    assert check_value("NCCL_P2P_LEVEL", value, version) is None
    assert canonical_value("NCCL_P2P_LEVEL", value, version) == level


@pytest.mark.parametrize("value,version,needle", [
    ("pxb", V228, "case-sensitive"), (" PXB", V228, "case-sensitive"), ("Sys", V221, "case-sensitive"),
    ("C2C", V225, "2.26"), ("P2C", V226, "2.27"), ("NET", V228, "silently ignores"),
    ("2x", V221, "strtol as 2"), ("99999999999999999999", V221, "out of bounds"),
])
def test_p2p_levels_refused(value, version, needle):
    assert needle in check_value("NCCL_P2P_LEVEL", value, version)


def test_p2p_level_legacy_clamp_and_order():
    assert "clamped to 5" in value_warnings("NCCL_P2P_LEVEL", "7")[0]
    assert canonical_value("NCCL_P2P_LEVEL", "7") == "SYS"
    assert p2p_levels(V227).index("P2C") > p2p_levels(V227).index("PXN")
    assert p2p_levels(V228).index("P2C") < p2p_levels(V228).index("PXN")


@pytest.mark.parametrize("value,risky", [("PIX", False), ("PXB", False), ("2", False), ("PHB", True),
                                         ("SYS", True), ("4", True), ("PXN", True)])
def test_p2p_level_risk(value, risky):
    assert (risky_reason("NCCL_P2P_LEVEL", value, V228) is not None) is risky


@pytest.mark.parametrize("name", ["NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"])
def test_disable_flags_act_only_on_one(name):
    assert canonical_value(name, "1") == "1"
    assert canonical_value(name, "0x1") == "1"
    assert canonical_value(name, "0") == ""
    assert "only on 1" in check_value(name, "2")
    assert "strtoll as 0" in check_value(name, "yes")


def test_cumem_enable_by_version():
    assert canonical_value("NCCL_CUMEM_ENABLE", "-2", V221) == ""
    assert canonical_value("NCCL_CUMEM_ENABLE", "-2", V218) == "1"  # 2.18: any non-zero is on
    assert canonical_value("NCCL_CUMEM_ENABLE", "0", V218) == ""
    assert canonical_value("NCCL_CUMEM_ENABLE", "0", V221) == "0"
    assert canonical_value("NCCL_CUMEM_ENABLE", "2", V221) == "1"
    assert value_warnings("NCCL_CUMEM_ENABLE", "2", V221)


def test_nvls_enable():
    assert canonical_value("NCCL_NVLS_ENABLE", "2") == ""
    assert canonical_value("NCCL_NVLS_ENABLE", "0") == "0"
    assert canonical_value("NCCL_NVLS_ENABLE", "3") == "1"
    assert "forced on" in value_warnings("NCCL_NVLS_ENABLE", "3")[0]


def test_thread_thresholds():
    assert canonical_value("NCCL_THREAD_THRESHOLDS", "-1 -1 -1 8 -1 -1") == "-1 -1 -1 8 -1 -1"
    assert canonical_value("NCCL_THREAD_THRESHOLDS", "  -1\t-1 -1 8 -5 -1") == "-1 -1 -1 8 -1 -1"
    assert canonical_value("NCCL_THREAD_THRESHOLDS", "8") == "8 -1 -1 -1 -1 -1"
    assert "only 1 of 6" in value_warnings("NCCL_THREAD_THRESHOLDS", "8")[0]
    assert "sscanf stops" in check_value("NCCL_THREAD_THRESHOLDS", "0x10 8")
    assert "reads no number" in check_value("NCCL_THREAD_THRESHOLDS", "fast")
    assert canonical_value("NCCL_THREAD_THRESHOLDS", "-1 -1 -1 -1 -1 -1") == ""
    assert default_thread_thresholds(8) == (8, 8, 64, 64, 8, 64)


def test_cuda_device_max_connections():
    assert canonical_value("CUDA_DEVICE_MAX_CONNECTIONS", "8") == ""
    assert canonical_value("CUDA_DEVICE_MAX_CONNECTIONS", "1") == "1"
    assert "1-32" in check_value("CUDA_DEVICE_MAX_CONNECTIONS", "64")
    assert check_value("CUDA_DEVICE_MAX_CONNECTIONS", "0x8") is not None


def test_debug_level():
    assert canonical_value("NCCL_DEBUG", "info") == "INFO"
    assert "silently" in check_value("NCCL_DEBUG", "verbose")


@pytest.mark.parametrize("name,intended", [("NCCL_ALGOS", "NCCL_ALGO"), ("nccl_proto", "NCCL_PROTO"),
                                           ("NCCL_BUFF_SIZE", "NCCL_BUFFSIZE"), ("NCCL_MAX_NCHANNEL", "NCCL_MAX_NCHANNELS"),
                                           ("NCCL_P2P_LVL", "NCCL_P2P_LEVEL"), ("NCCL_IB_HCA ", "NCCL_IB_HCA"),
                                           ("CUDA_DEVICE_MAX_CONECTIONS", "CUDA_DEVICE_MAX_CONNECTIONS")])
def test_typos_are_refused_with_the_intended_name(name, intended):
    problem = check_value(name, "1")
    assert problem is not None and intended in problem
    assert name_problem(name) == problem


def test_unknown_nccl_names_are_refused_unless_allowed():
    """An NCCL_* name the record does not hold is refused (NCCL would ignore it without a word);
    --allow-unknown lets one of a newer NCCL through with a note. Plugin and PyTorch names NCCL
    ships or users set are in the record, so they pass."""
    for name in ("NCCL_NCHANNELS_PER_PEER", "NCCL_MY_PLUGIN_KNOB", "NCCL_PROTOCOL"):
        assert "--allow-unknown" in check_value(name, "16")
        assert check_value(name, "16", allow_unknown=True) is None
        assert "--allow-unknown" in name_warning(name)
    assert "did you mean NCCL_PROTO?" in check_value("NCCL_PROTOCOL", "LL")
    for name in ("NCCL_TUNER_CONFIG_FILE", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_TUNE_HEARTBEAT_S"):
        assert check_value(name, "1") is None and name_warning(name) is None
    assert check_value("HF_TOKEN", "secret") is None and name_warning("HF_TOKEN") is None
    assert name_warning("NCCL_ALGO") is None


def test_names_read_by_version():
    assert "does not read NCCL_PAT_ENABLE" in name_warning("NCCL_PAT_ENABLE", V221)
    assert name_warning("NCCL_PAT_ENABLE", V228) is None


def test_hardware_selectors_are_kept_apart():
    assert is_hardware_selector("NCCL_SOCKET_IFNAME") and is_hardware_selector("NCCL_IB_HCA")
    assert not is_hardware_selector("NCCL_PROTO")
    assert is_tuning_variable("NCCL_SOCKET_IFNAME")
    assert not is_tuning_variable("NCCL_SOCKET_IFNAME", include_hardware_selectors=False)
    assert is_tuning_variable("CUDA_DEVICE_MAX_CONNECTIONS") and not is_tuning_variable("HOME")
    assert not is_tuning_variable("NCCL_TUNE_HEARTBEAT_S")


def test_accepted_names_the_version_rules():
    assert "64" in accepted("NCCL_MAX_NCHANNELS", V225) and "32" in accepted("NCCL_MAX_NCHANNELS")
    assert "P2C" in accepted("NCCL_P2P_LEVEL", V227) and "P2C" not in accepted("NCCL_P2P_LEVEL")
    assert "PAT" in accepted("NCCL_ALGO", V227) and "PAT" not in accepted("NCCL_ALGO")
    assert "variables.py" in accepted("NCCL_SOMETHING") and accepted("HF_HOME") == "any string"
