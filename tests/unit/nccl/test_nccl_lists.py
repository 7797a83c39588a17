"""NCCL_ALGO / NCCL_PROTO as NCCL reads them (src/graph/tuning.cc, parseList), before and after 2.24."""

import pytest

from tuner.nccl import NcclVersion, canonical_value, check_value

V218, V221, V222, V223, V224, V226 = (NcclVersion.parse(v) for v in
                                       ("2.18.1", "2.21.5", "2.22.3", "2.23.4", "2.24.3", "2.26.2"))
BOTH = pytest.mark.parametrize("version", [V218, V221, V224, V226], ids=str)


@BOTH
@pytest.mark.parametrize("value,canonical", [
    ("ring", "Ring"), ("RING", "Ring"), ("Ring,Tree", "Tree,Ring"), ("tree,ring,,", "Tree,Ring"),
    ("ring,ring", "Ring"),
])
def test_algo_tokens_are_case_insensitive_and_reordered(version, value, canonical):
    assert check_value("NCCL_ALGO", value, version) is None
    assert canonical_value("NCCL_ALGO", value, version) == canonical


@BOTH
@pytest.mark.parametrize("value,canonical", [
    ("^LL", "LL128,Simple"), ("LL128,Simple", "LL128,Simple"), ("^Simple", "LL,LL128"), ("ll,SIMPLE", "LL,Simple"),
])
def test_exclusion_lists_equal_their_positive_spelling(version, value, canonical):
    assert check_value("NCCL_PROTO", value, version) is None
    assert canonical_value("NCCL_PROTO", value, version) == canonical


def test_spaces_are_not_trimmed_old_versions_skip_silently():
    problem = check_value("NCCL_ALGO", "Ring, Tree", V221)
    assert "silently skips" in problem and "' Tree'" in problem and "spaces" in problem
    assert canonical_value("NCCL_ALGO", "Ring, Tree", V221) == "Ring"


def test_spaces_are_not_trimmed_new_versions_fail_init():
    problem = check_value("NCCL_ALGO", "Ring, Tree", V224)
    assert "Unrecognized element token" in problem and "ncclInvalidUsage" in problem and "spaces" in problem


@pytest.mark.parametrize("value", ["allreduce:tree", "Ring;allreduce:Tree", "broadcast:ring"])
def test_per_collective_syntax_is_not_understood_before_224(value):
    for version in (V218, V221, V223):
        assert "per-collective syntax" in check_value("NCCL_ALGO", value, version)
    assert check_value("NCCL_ALGO", value, V224) is None


@pytest.mark.parametrize("value,canonical", [
    ("allreduce:tree", "AllReduce:Tree"), ("AllReduce:TREE", "AllReduce:Tree"),
    ("Ring;allreduce:Tree", "Ring;AllReduce:Tree"), ("ring;ALLREDUCE:tree", "Ring;AllReduce:Tree"),
])
def test_per_collective_canonical_spelling(value, canonical):
    assert canonical_value("NCCL_ALGO", value, V226) == canonical


def test_per_collective_proto_rows():
    assert canonical_value("NCCL_PROTO", "^LL128;allreduce:LL128", V224) == "LL,Simple;AllReduce:LL128"
    assert canonical_value("NCCL_PROTO", "allreduce:^LL128", V224) == "AllReduce:LL,Simple"


@pytest.mark.parametrize("value,needle", [
    ("ring;tree", "All entries except the first must have a prefix"),
    ("sendrecv:ring", "Unrecognized prefix token \"sendrecv\""),
    ("allreduce :tree", "spaces"),
    ("Ring,Hypercube", "Unrecognized element token \"Hypercube\""),
])
def test_grammar_errors_fail_init_from_224(value, needle):
    problem = check_value("NCCL_ALGO", value, V224)
    assert needle in problem and "ncclInvalidUsage" in problem


def test_unknown_token_old_versions_is_skipped_silently():
    assert "silently skips 'Hypercube'" in check_value("NCCL_ALGO", "Ring,Hypercube", V221)


@pytest.mark.parametrize("algo,since", [("NVLS", "2.17.1"), ("NVLSTree", "2.18.1"), ("PAT", "2.23.4")])
def test_algorithm_names_by_version(algo, since):
    assert check_value("NCCL_ALGO", algo, NcclVersion.parse(since)) is None
    before = NcclVersion.parse(since)
    older = NcclVersion(before.major, before.minor - 1, 0)
    assert f"needs NCCL {since}" in check_value("NCCL_ALGO", algo, older)


def test_default_version_is_the_oldest_supported():
    assert check_value("NCCL_ALGO", "PAT") is not None
    assert check_value("NCCL_ALGO", "allreduce:tree") is not None
    assert check_value("NCCL_ALGO", "NVLSTree") is None


def test_listing_everything_is_the_default():
    assert canonical_value("NCCL_ALGO", "Tree,Ring,CollNetDirect,CollNetChain,NVLS,NVLSTree,PAT", V226) == ""
    # LL128 listed is forced on, which is not the default (automatic)
    assert canonical_value("NCCL_PROTO", "LL,LL128,Simple", V226) == "LL,LL128,Simple"


def test_empty_list_is_refused():
    assert check_value("NCCL_PROTO", "", V221) is not None
    assert check_value("NCCL_PROTO", "", V224) is not None
