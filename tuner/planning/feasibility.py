"""Whether a set may be launched: what NCCL rejects, what cannot run or is unsafe on the topology.

Each set is checked together with ``server.env`` (every launch gets it). Before the topology is
known (a dry run, or the night before its first baseline) only what fails on every machine
counts; what the baseline's NCCL version and topology will decide is a doubt, said but not
acted on.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.nccl import cross_problems, cross_warnings, infeasible_reason, unsafe_set_reason
from tuner.planning.identity import Facts

__all__ = ["doubts", "problems"]


def problems(env: Mapping[str, str], server_env: Mapping[str, str], facts: Facts, *,
             allow_unsafe: bool = False) -> list[str]:
    """Why the set must not be launched, empty when it may: NCCL rejects it with ``server_env``
    (:func:`tuner.nccl.cross_problems`), it cannot run on ``facts.topology``
    (:func:`tuner.nccl.infeasible_reason`), or it is unsafe there
    (:func:`tuner.nccl.unsafe_set_reason`, unless ``allow_unsafe``)."""
    version, topo = facts.version, facts.topology
    full = {**server_env, **env}
    found = [reason for _, reason in cross_problems(full, version)]
    if topo is not None:
        found.append(infeasible_reason(full, topo, version) or "")
        if not allow_unsafe:
            found.append(unsafe_set_reason(full, topo, version) or "")
    return [f for f in found if f]


def doubts(env: Mapping[str, str], server_env: Mapping[str, str], facts: Facts) -> list[str]:
    """Why a set NCCL accepts may still not be launched (:func:`tuner.nccl.cross_warnings`
    with ``server_env``) while the topology is unknown; empty once it is known, since
    :func:`problems` then decides."""
    if facts.topology is not None:
        return []
    return [reason for _, reason in cross_warnings({**server_env, **env}, facts.version)]
