"""Safety, feasibility and equivalence of whole sets on a topology, by NCCL version."""

import pytest

from tuner.nccl import (
    NcclVersion,
    Topology,
    canonical_set,
    cross_problems,
    cross_warnings,
    infeasible_reason,
    unsafe_reason,
    unsafe_set_reason,
)
from tuner.nccl.choice import allreduce_choices, ll128_auto, no_algorithm_warn

V218, V221, V222, V223, V224, V225, V227, V2307 = (NcclVersion.parse(v) for v in
                                                   ("2.18.1", "2.21.5", "2.22.3", "2.23.4", "2.24.3", "2.25.1",
                                                    "2.27.3", "2.30.7"))
PCIE = Topology(nranks=8, nnodes=1, link="pcie", has_nvls=False, gpu_arch=120)  # 8x RTX PRO 6000, PCIe only
HGX = Topology(nranks=8, nnodes=1, link="nvswitch", has_nvls=True, gpu_arch=90)  # 8x H100 SXM
NVL_BLACKWELL_WS = Topology(nranks=2, nnodes=1, link="nvlink", has_nvls=False, gpu_arch=120)


def test_ll128_automatic_rule():
    assert ll128_auto(PCIE, V227) is False
    assert ll128_auto(HGX, V221) is True
    assert ll128_auto(NVL_BLACKWELL_WS, V224) is False  # 2.24 enables it only on 7.0/8.0/9.0
    assert ll128_auto(NVL_BLACKWELL_WS, V225) is True
    assert ll128_auto(Topology(2, 1, "nvlink", gpu_arch=89), V224) is False
    assert ll128_auto(Topology(2, 1, "nvlink", gpu_arch=89), V227) is True
    assert ll128_auto(None) is None and ll128_auto(Topology(8)) is None
    assert ll128_auto(Topology(2, 1, "nvlink")) is None  # GPU unknown


@pytest.mark.parametrize("version", [V221, V224, V227], ids=str)
@pytest.mark.parametrize("value", ["LL128", "ll128", "^LL", "^Simple", "LL,LL128", "LL128,Simple", "^LL,Simple"])
def test_ll128_on_pcie_is_unsafe_by_any_spelling(version, value):
    reason = unsafe_reason("NCCL_PROTO", value, PCIE, version=version)
    assert reason is not None and "LL128" in reason and "PCIe" in reason


@pytest.mark.parametrize("value", ["allreduce:LL128", "^LL128;allreduce:LL128", "Simple;AllGather:^LL"])
def test_ll128_per_collective_spellings_are_unsafe(value):
    assert unsafe_reason("NCCL_PROTO", value, PCIE, version=V227) is not None


@pytest.mark.parametrize("value", ["^LL128", "LL", "Simple", "LL,Simple", "allreduce:^LL128", "allreduce:LL"])
def test_values_keeping_ll128_off_are_safe(value):
    version = V227 if ":" in value else V221
    assert unsafe_reason("NCCL_PROTO", value, PCIE, version=version) is None


def test_forced_ll128_is_safe_where_nccl_enables_it_itself():
    assert unsafe_reason("NCCL_PROTO", "LL128", HGX, version=V221) is None
    assert unsafe_reason("NCCL_PROTO", "LL128", NVL_BLACKWELL_WS, version=V224) is not None
    assert unsafe_reason("NCCL_PROTO", "^LL") is not None  # unknown topology


def test_forced_nvls_safety_and_feasibility():
    assert unsafe_reason("NCCL_NVLS_ENABLE", "1") is not None
    assert unsafe_reason("NCCL_NVLS_ENABLE", "1", PCIE) is None
    assert "cuMulticastCreate" in infeasible_reason({"NCCL_NVLS_ENABLE": "1"}, PCIE)
    assert infeasible_reason({"NCCL_NVLS_ENABLE": "1"}, HGX) is None
    assert infeasible_reason({"NCCL_NVLS_ENABLE": "0"}, PCIE) is None


@pytest.mark.parametrize("algo", ["NVLS", "NVLSTree", "CollNetDirect", "CollNetChain", "PAT", "NVLS,PAT"])
def test_exotic_algorithms_cannot_run_allreduce_on_one_pcie_node_from_224(algo):
    reason = infeasible_reason({"NCCL_ALGO": algo}, PCIE, V224)
    assert reason is not None and "AllReduce" in reason
    assert '"Error : no algorithm/protocol available for function AllReduce"' in reason  # enqueue.cc v2.24.3-1


def test_no_algorithm_warn_text_by_version():
    # src/enqueue.cc: getAlgoInfo (v2.18.6-1), topoGetAlgoInfo (v2.22.3-1, v2.24.3-1, v2.29.7-1, v2.30.7-1)
    assert no_algorithm_warn(V218, "AllReduce").startswith('"Error : no algorithm/protocol available" at')
    assert "getAlgoInfo)" in no_algorithm_warn(V218, "AllReduce")
    assert "topoGetAlgoInfo" in no_algorithm_warn(V222, "AllReduce")
    assert "Error : no algorithm/protocol available for function AllGather" in no_algorithm_warn(V227, "AllGather")
    assert '"No algorithm/protocol available for function AllGather"' in no_algorithm_warn(V2307, "AllGather")


def test_older_versions_fall_back_instead():
    # 2.18: no fallback for NVLS; CollNet-only is reset to Ring,Tree ("If user has hard set NCCL_ALGO=COLLNET")
    assert infeasible_reason({"NCCL_ALGO": "NVLS"}, PCIE, V218) is not None
    assert infeasible_reason({"NCCL_ALGO": "CollNetDirect"}, PCIE, V218) is None
    # 2.19-2.23: Ring bandwidth backup
    for version in (V221, V222, V223):
        assert infeasible_reason({"NCCL_ALGO": "NVLS"}, PCIE, version) is None
    # 2.19-2.21 re-enable every Ring protocol, LL128 included (NVIDIA/nccl#1304): unsafe on PCIe
    assert "LL128" in unsafe_set_reason({"NCCL_ALGO": "NVLS"}, PCIE, V221)
    assert unsafe_set_reason({"NCCL_ALGO": "NVLS"}, PCIE, V222) is None
    choice = allreduce_choices({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, PCIE, V221)
    assert choice.fallback == "ring-backup-all" and ("Ring", "LL128") in choice.pairs
    choice = allreduce_choices({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, PCIE, V223)
    assert choice.fallback == "ring-backup" and choice.pairs == {("Ring", "LL")}


def test_nvls_runs_on_nvswitch_with_simple_only():
    assert infeasible_reason({"NCCL_ALGO": "NVLS"}, HGX, V224) is None
    assert infeasible_reason({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, HGX, V224) is not None
    assert infeasible_reason({"NCCL_ALGO": "NVLS", "NCCL_NVLS_ENABLE": "0"}, HGX, V224) is not None


def test_tree_alone_starves_allgather_where_nccl_does_not_fall_back():
    env = {"NCCL_ALGO": "Tree"}
    assert "AllGather" in infeasible_reason(env, PCIE, V224)
    assert infeasible_reason(env, PCIE, V224, collectives=("AllReduce",)) is None
    assert infeasible_reason({"NCCL_ALGO": "AllReduce:Tree"}, PCIE, V224) is None
    assert infeasible_reason(env, PCIE, V223) is None
    # 2.18 never disables Ring for collectives other than AllReduce (src/graph/tuning.cc,
    # ncclTopoTuneModel at v2.18.1-1 and v2.18.6-1: "That allows to run real apps with NCCL_ALGO=TREE")
    assert infeasible_reason(env, PCIE, V218) is None
    assert infeasible_reason({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, PCIE, V218) is None
    assert allreduce_choices(env, PCIE, V218, "AllGather").pairs == {("Ring", "LL"), ("Ring", "Simple")}
    assert allreduce_choices(env, PCIE, V218, "AllReduce").pairs == {("Tree", "LL"), ("Tree", "Simple")}
    # AllReduce itself still has no fallback on 2.18
    assert "AllReduce" in infeasible_reason({"NCCL_ALGO": "NVLS"}, PCIE, V218)


def test_unknown_version_judges_starvation_by_the_strictest_release():
    reason = infeasible_reason({"NCCL_ALGO": "Tree"}, PCIE)
    assert reason is not None and "AllGather" in reason and "2.24 and later" in reason
    assert "2.18 keeps Ring" in reason and "2.19-2.23 fall back" in reason
    assert infeasible_reason({"NCCL_ALGO": "Ring"}, PCIE) is None
    # AllReduce left nothing: 2.24+ fail and so does 2.18
    both = infeasible_reason({"NCCL_ALGO": "NVLS"}, PCIE)
    assert "AllReduce" in both and "NCCL 2.18 and 2.24 and later" in both and "keeps Ring" not in both
    assert "NCCL 2.18 and 2.24 and later" in cross_problems({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"})[0][1]


def test_nvlstree_alone_on_one_node_is_reset_before_224():
    # tuning.cc (v2.18.6-1 .. v2.23.4-1): NVLSTree is dropped on one node before the COLLNET reset check
    assert infeasible_reason({"NCCL_ALGO": "NVLSTree"}, PCIE, V218) is None
    assert allreduce_choices({"NCCL_ALGO": "NVLSTree"}, PCIE, V223).fallback == ""


def test_refused_lists_are_infeasible():
    assert "ncclInvalidUsage" in infeasible_reason({"NCCL_PROTO": "LL, Simple"}, PCIE, V224)


def test_cross_problems_only_for_sets_that_fail_everywhere():
    assert cross_problems({"NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "8"}) == []
    assert cross_problems({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, V224)
    assert cross_problems({"NCCL_ALGO": "PAT"}, V224)
    assert cross_problems({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, V221) == []  # Ring backup
    assert cross_problems({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}, V224) == []


def test_cross_warnings():
    def keys(env, version=None):
        return {k: r for k, r in cross_warnings(env, version)}

    assert "max, then min" in keys({"NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "8"})["NCCL_MIN_NCHANNELS"]
    assert "sets both" in keys({"NCCL_MIN_CTAS": "16", "NCCL_MAX_CTAS": "8"})["NCCL_MIN_CTAS"]
    assert "precedence" in keys({"NCCL_P2P_LEVEL": "SYS", "NCCL_P2P_DISABLE": "1"})["NCCL_P2P_LEVEL"]
    assert "overrides" in keys({"NCCL_MAX_NRINGS": "4", "NCCL_MAX_NCHANNELS": "8"})["NCCL_MAX_NRINGS"]
    assert "AllGather" in keys({"NCCL_ALGO": "Tree"}, V224)["NCCL_ALGO"]
    assert "NCCL_ALGO" not in keys({"NCCL_ALGO": "Tree"}, V223)
    assert "NCCL_ALGO" not in keys({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, V218)
    unknown = keys({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"})["NCCL_ALGO"]
    assert "2.24 and later" in unknown and "2.18 keeps Ring" in unknown and "2.18.1" not in unknown
    assert "NCCL_ALGO" not in keys({"NCCL_ALGO": "AllReduce:Tree"}, V224)


def test_canonical_set_drops_defaults_and_merges_spellings():
    assert canonical_set({"NCCL_BUFFSIZE": "4194304", "CUDA_DEVICE_MAX_CONNECTIONS": "8",
                                   "NCCL_P2P_DISABLE": "0", "NCCL_NVLS_ENABLE": "2"}) == {}
    a = canonical_set({"NCCL_ALGO": "ring", "NCCL_BUFFSIZE": "0x1000000", "NCCL_PROTO": "^LL"})
    b = canonical_set({"NCCL_PROTO": "LL128,Simple", "NCCL_BUFFSIZE": "16777216", "NCCL_ALGO": "RING"})
    assert a == b == {"NCCL_ALGO": "Ring", "NCCL_BUFFSIZE": "16777216", "NCCL_PROTO": "LL128,Simple"}
    assert canonical_set({"NCCL_MAX_NCHANNELS": "64"}, V224) == {}
    assert canonical_set({"NCCL_MAX_NCHANNELS": "32"}, V225) == {"NCCL_MAX_NCHANNELS": "32"}
    assert canonical_set({"UNRELATED": " x "}) == {"UNRELATED": " x "}


def test_canonical_set_with_a_topology():
    assert canonical_set({"NCCL_ALGO": "Ring,Tree"}, V224) == {"NCCL_ALGO": "Tree,Ring"}
    assert canonical_set({"NCCL_ALGO": "Ring,Tree"}, V224, PCIE) == {}  # no NVLS/CollNet there anyway
    assert canonical_set({"NCCL_ALGO": "Ring,Tree"}, V224, HGX) == {"NCCL_ALGO": "Tree,Ring"}
    assert canonical_set({"NCCL_PROTO": "LL,LL128,Simple"}, V221, HGX) == {}
    assert canonical_set({"NCCL_PROTO": "LL,LL128,Simple"}, V221, PCIE) == {"NCCL_PROTO": "LL,LL128,Simple"}
    assert canonical_set({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 64 -1 -1"}, topology=PCIE) == {}
    sixteen = Topology(16, 2, "nvswitch", True, 90)
    assert canonical_set({"NCCL_THREAD_THRESHOLDS": "-1 -1 -1 64 -1 -1"}, topology=sixteen) != {}
    assert canonical_set({"NCCL_NVLS_ENABLE": "0"}, topology=PCIE) == {}
    assert canonical_set({"NCCL_NVLS_ENABLE": "0"}, topology=HGX) == {"NCCL_NVLS_ENABLE": "0"}
