"""Comparing what a trial launched with what NCCL echoed on every rank."""

from pathlib import Path

from tuner.nccl import NcclVersion, ParsedLog, confirmations, parse_log
from tuner.nccl.proof import _why_unverifiable

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_logs"


def parse_log_file(path: Path) -> ParsedLog:
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_log(f)


def test_a_fold_is_never_proof_for_the_ranks_it_hides():
    # every line of this real excerpt is folded: rank 6 is shown, 7 ranks are behind "[repeated 15x]"
    p = parse_log_file(LOGS / "nccl-ray-folded-echoes.log")
    confirmed, not_applied, unverifiable, rows = confirmations(
        {"NCCL_P2P_LEVEL": "NVL", "NCCL_CUMEM_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}, p)
    assert confirmed == {} and not_applied == {}
    assert unverifiable == ["NCCL_P2P_LEVEL", "NCCL_CUMEM_ENABLE", "CUDA_DEVICE_MAX_CONNECTIONS"]
    level = rows[0]
    assert level.echoed == (6,) and level.ranks_text() == "6 (1/8)" and level.echo == "NVL"
    assert "ranks 0-5, 7 are hidden in Ray-folded lines" in level.why and "RAY_DEDUP_LOGS=0" in level.why
    assert "never echoes" in _why_unverifiable("CUDA_DEVICE_MAX_CONNECTIONS", "1", p)


def test_another_value_or_no_echo_is_not_applied():
    p = parse_log_file(LOGS / "nccl-ray-folded-echoes.log")
    _confirmed, not_applied, _unverifiable, _rows = confirmations(
        {"NCCL_P2P_LEVEL": "PXB", "NCCL_PROTO": "LL", "NCCL_CUMEM_ENABLE": "1"}, p)
    assert "echoed NCCL_P2P_LEVEL=NVL" in not_applied["NCCL_P2P_LEVEL"] and "rank 6" in not_applied["NCCL_P2P_LEVEL"]
    assert "NCCL_CUMEM_ENABLE=0" in not_applied["NCCL_CUMEM_ENABLE"]
    # the excerpt stops before Init COMPLETE: silence there proves nothing
    assert "NCCL_PROTO" not in not_applied


def test_spellings_are_compared_canonically():
    p = parse_log_file(LOGS / "nccl-2.25.1-ctas.log")
    confirmed, not_applied, _, _rows = confirmations({"NCCL_MAX_CTAS": "0x10", "NCCL_MIN_CTAS": "16"}, p)
    assert confirmed == {"NCCL_MAX_CTAS": "16", "NCCL_MIN_CTAS": "16"} and not_applied == {}
    p = parse_log_file(LOGS / "nccl-ray-folded-echoes.log")
    # a legacy integer level is echoed as its name: 1 -> PIX, which is not NVL
    assert "NCCL_P2P_LEVEL" in confirmations({"NCCL_P2P_LEVEL": "1"}, p).not_applied


def test_p2p_disable_echo_from_2_23():
    p = parse_log_file(LOGS / "nccl-2.29.7-tuning.log")
    assert confirmations({"NCCL_P2P_DISABLE": "1"}, p).confirmed == {"NCCL_P2P_DISABLE": "1"}


# Lines below are written in NCCL's own format (src/debug.cc; src/misc/param.cc ncclLoadParam;
# src/graph/paths.cc ncclGetLevel) to pin rules the public excerpts do not show.
TWO_RANKS = [
    "h:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "h:100:100 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
    "h:200:200 [1] NCCL INFO comm 0x2 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0",
    "h:100:100 [0] NCCL INFO NCCL_PROTO set by environment to LL",
    "h:100:100 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC",
    "h:200:200 [1] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC",
    "h:100:100 [0] NCCL INFO Invalid value 99999999999999999999 for NCCL_BUFFSIZE, using default -2.",
    "h:100:100 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 - Init COMPLETE",
    "h:200:200 [1] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 19000 - Init COMPLETE",
]


def test_a_rank_that_logged_but_did_not_echo_is_named():
    _c, not_applied, _u, _rows = confirmations({"NCCL_PROTO": "LL"}, parse_log(TWO_RANKS))
    assert not_applied["NCCL_PROTO"].startswith(
        "rank 1 logged communicator init through Init COMPLETE but never echoed NCCL_PROTO: 1 echo for 2 ranks. ")
    assert "never got the variable" in not_applied["NCCL_PROTO"]


def test_p2p_disable_before_2_23_is_echoed_as_level_loc():
    confirmed, _n, _u, _rows = confirmations({"NCCL_P2P_DISABLE": "1"}, parse_log(TWO_RANKS))
    assert confirmed == {"NCCL_P2P_DISABLE": "1"}
    _c, not_applied, _unverifiable, _rows = confirmations({"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS"},
                                                  parse_log(TWO_RANKS))
    assert "NCCL_P2P_LEVEL" in not_applied  # echoed LOC: the disable won
    assert confirmations({"NCCL_P2P_DISABLE": "0"}, parse_log(TWO_RANKS)).unverifiable == ["NCCL_P2P_DISABLE"]


def test_refused_values_are_not_applied():
    _c, not_applied, _u, _rows = confirmations({"NCCL_BUFFSIZE": "99999999999999999999"}, parse_log(TWO_RANKS))
    assert "Invalid value" in not_applied["NCCL_BUFFSIZE"]


def test_shm_disable_depends_on_whether_nccl_used_shm():
    p2p_only = parse_log_file(LOGS / "nccl-2.27.5-sglang-init.log")
    assert confirmations({"NCCL_SHM_DISABLE": "1"}, p2p_only).unverifiable == ["NCCL_SHM_DISABLE"]
    shm = parse_log_file(LOGS / "nccl-2.20-pcie-shm.log")
    assert "SHM" in confirmations({"NCCL_SHM_DISABLE": "1"}, shm).not_applied["NCCL_SHM_DISABLE"]


def test_no_nccl_lines_means_nccl_debug_never_arrived():
    p = parse_log(["INFO 07-09 09:39:34 [pynccl.py:70] vLLM is using nccl==2.26.2"])
    confirmed, not_applied, unverifiable, _rows = confirmations({"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL"}, p)
    assert confirmed == {} and "NCCL_DEBUG" in not_applied and unverifiable == ["NCCL_PROTO"]
    assert "no NCCL INFO line" in _why_unverifiable("NCCL_PROTO", "LL", p)
    p = parse_log_file(LOGS / "nccl-2.27.5-sglang-init.log")
    assert confirmations({"NCCL_DEBUG": "INFO"}, p).confirmed == {"NCCL_DEBUG": "INFO"}


def test_version_comes_from_the_log_first():
    p = parse_log(TWO_RANKS)
    assert p.nccl_version == NcclVersion(2, 21, 5)
    # on 2.21 "Ring, Tree" is read as Ring: an echo of that spelling confirms a launched "ring"
    lines = [*TWO_RANKS[:3], "h:100:100 [0] NCCL INFO NCCL_ALGO set by environment to Ring, Tree", "h:200:200 [1] NCCL INFO NCCL_ALGO set by environment to Ring, Tree"]
    assert confirmations({"NCCL_ALGO": "ring"}, parse_log(lines)).confirmed == {"NCCL_ALGO": "Ring, Tree"}


def test_processes_without_a_communicator_are_not_expected_to_echo():
    lines = [*TWO_RANKS, "h:300:300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
             "h:200:200 [1] NCCL INFO NCCL_PROTO set by environment to LL"]
    assert confirmations({"NCCL_PROTO": "LL"}, parse_log(lines)).confirmed == {"NCCL_PROTO": "LL"}
