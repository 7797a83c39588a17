"""The release from which NCCL reads a value as meant, derived from the value rules themselves
(tuner.nccl.values.value_since), and what a set needing it becomes while the version is unknown,
once an older one is known, and once a newer one is."""

from __future__ import annotations

import pytest

from tuner.nccl import (
    OLDEST_SUPPORTED,
    NcclVersion,
    canonical_set,
    check_value,
    cross_problems,
    since_text,
    unsafe_reason,
    value_since,
    version_doubts,
    version_problems,
)
from tuner.nccl.sets import set_since

V224 = NcclVersion(2, 24, 0)


@pytest.mark.parametrize("name, value, since", [
    ("NCCL_PROTO", "AllReduce:LL", V224),
    ("NCCL_PROTO", "allreduce:ll", V224),  # strcasecmp, prefix and item alike
    ("NCCL_PROTO", "AllReduce:LL;Broadcast:Simple", V224),
    ("NCCL_PROTO", "AllReduce:^LL128", V224),  # the exclusion, per collective
    ("NCCL_ALGO", "AllReduce:Tree", V224),
    ("NCCL_ALGO", "PAT", NcclVersion(2, 23, 4)),  # a name that arrived at a patch release
    ("NCCL_PROTO", "LL", OLDEST_SUPPORTED),
    ("NCCL_PROTO", "^LL128", OLDEST_SUPPORTED),
    ("NCCL_MAX_NCHANNELS", "8", OLDEST_SUPPORTED),
    ("NCCL_SOCKET_IFNAME", "eth0", OLDEST_SUPPORTED),  # a name with no value rule
])
def test_the_release_a_value_needs(name, value, since):
    assert value_since(name, value) == since
    assert check_value(name, value, since) is None
    if since > OLDEST_SUPPORTED:
        assert check_value(name, value) is not None  # refused by the oldest supported


@pytest.mark.parametrize("name, value", [
    ("NCCL_PROTO", "Foo"),
    ("NCCL_PROTO", "AllReduce:LL;LL"),  # "All entries except the first must have a prefix"
    ("NCCL_PROTO", "Allreduc:LL"),  # an unknown prefix fails init on 2.24+, is skipped before
    ("NCCL_ALGO", "AllReduce:Rng"),
    ("NCCL_BUFFSIZE", "4M"),
])
def test_a_value_no_release_reads_needs_none(name, value):
    assert value_since(name, value) is None


def test_since_is_said_by_minor_or_patch():
    assert since_text(V224) == "2.24+" and since_text(NcclVersion(2, 23, 4)) == "2.23.4+"


def test_allreduce_ll_is_not_ll_to_an_unknown_nccl():
    """AllReduce:LL leaves the other collectives NCCL's own choice; LL forces it on all."""
    per, glob = canonical_set({"NCCL_PROTO": "AllReduce:LL"}), canonical_set({"NCCL_PROTO": "LL"})
    assert per == {"NCCL_PROTO": "AllReduce:LL"} and glob == {"NCCL_PROTO": "LL"}
    assert canonical_set({"NCCL_PROTO": "allreduce:ll"}) == per  # one spelling per behaviour
    assert canonical_set({"NCCL_PROTO": "AllReduce:LL"}, NcclVersion(2, 27, 3)) == per


def test_a_set_is_judged_by_the_release_it_needs_while_the_version_is_unknown():
    env = {"NCCL_ALGO": "AllReduce:Tree", "NCCL_PROTO": "AllReduce:LL"}
    assert set_since(env) == V224 and set_since({"NCCL_PROTO": "LL"}) == OLDEST_SUPPORTED
    assert cross_problems(env) == []  # not 2.18's reading: one unmatched item leaving AllReduce nothing
    assert version_doubts(env, None) == [("NCCL_ALGO", "needs NCCL 2.24+: launched once the baseline shows an NCCL that new")]
    assert version_doubts(env, NcclVersion(2, 27, 3)) == [] and version_doubts({"NCCL_PROTO": "LL"}, None) == []
    assert version_problems(env, None) == [] and version_problems(env, NcclVersion(2, 24, 3)) == []
    old = version_problems(env, NcclVersion(2, 21, 5))
    assert [k for k, _ in old] == ["NCCL_ALGO", "NCCL_PROTO"]
    assert "needs NCCL 2.24+ and the baseline's NCCL is 2.21.5" in old[0][1]
    assert cross_problems(env, NcclVersion(2, 21, 5)) == []  # said by version_problems alone


def test_a_per_collective_ll128_is_unsafe_while_the_version_is_unknown():
    assert unsafe_reason("NCCL_PROTO", "allreduce:LL128") is not None
    assert unsafe_reason("NCCL_PROTO", "AllReduce:LL") is None


def test_the_loader_keeps_a_newer_value_while_the_version_is_unknown():
    """check_nccl (every user value: a space, server.env, check --set): kept with a notice while
    the version is unknown, refused for a known older one, refused when no release reads it."""
    from tuner.inputs import LoadContext, check_nccl

    ctx = LoadContext()
    assert check_nccl("NCCL_PROTO", "allreduce:ll", ctx).wrong is None
    assert any("needs NCCL 2.24+: launched once the baseline shows an NCCL that new" in n for n in ctx.notices)
    old = check_nccl("NCCL_PROTO", "AllReduce:LL", LoadContext(version=NcclVersion(2, 21, 5))).wrong
    assert old is not None and "NCCL 2.21.5 does not understand the per-collective syntax" in old
    never = check_nccl("NCCL_PROTO", "AllReduce:LL;LL", LoadContext()).wrong
    assert never is not None and "All entries except the first must have a prefix" in never
    assert check_nccl("NCCL_PROTO", "allreduce:LL128", LoadContext()).unsafe is not None
