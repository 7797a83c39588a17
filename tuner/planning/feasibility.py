"""Whether a set may be launched: what NCCL rejects, what cannot run or is unsafe on the topology.

Each set is checked together with ``server.env`` (every launch gets it). Before the topology is
known (a dry run, or the night before its first baseline) only what fails on every machine
counts; what the baseline's NCCL version and topology will decide is a doubt, said but not
acted on.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.nccl import (
    cross_problems,
    cross_warnings,
    infeasible_reason,
    unsafe_set_reason,
    version_doubts,
    version_problems,
)
from tuner.planning.identity import Facts

__all__ = ["doubts", "problems"]


def problems(env: Mapping[str, str], server_env: Mapping[str, str], facts: Facts, *,
             allow_unsafe: bool = False) -> list[str]:
    """Why the set must not be launched, empty when it may: NCCL rejects it with ``server_env``
    (:func:`tuner.nccl.cross_problems`), it cannot run on ``facts.topology``
    (:func:`tuner.nccl.infeasible_reason`), or it is unsafe there
    (:func:`tuner.nccl.unsafe_set_reason`, unless ``allow_unsafe``), or a value needs a newer
    NCCL than the known version (:func:`tuner.nccl.version_problems`)."""
    version, topo = facts.version, facts.topology
    full = {**server_env, **env}
    found = [reason for _, reason in [*version_problems(full, version), *cross_problems(full, version)]]
    if topo is not None:
        found.append(infeasible_reason(full, topo, version) or "")
        if not allow_unsafe:
            found.append(unsafe_set_reason(full, topo, version) or "")
    return [f for f in found if f]


def doubts(env: Mapping[str, str], server_env: Mapping[str, str], facts: Facts) -> list[str]:
    """Why a set NCCL accepts may still not be launched: a value only a newer NCCL reads while
    the version is unknown (:func:`tuner.nccl.version_doubts`, first), and
    :func:`tuner.nccl.cross_warnings` with ``server_env`` while the topology is unknown; each
    is gone once its fact is known, since :func:`problems` then decides."""
    full = {**server_env, **env}
    needs = [reason for _, reason in version_doubts(full, facts.version)]
    if facts.topology is not None:
        return needs
    return [*needs, *(reason for _, reason in cross_warnings(full, facts.version))]
