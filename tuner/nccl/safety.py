"""Which values are unsafe (refused without --allow-unsafe) and which are risky but reversible.

*Unsafe* values bypass a guard NCCL keeps for correctness (LL128 where it "may cause silent data
corruption") or force NVLS where a hang was reported: :func:`unsafe_reason`,
:func:`unsafe_set_reason`. *Risky* values are allowed but can hang a launch on some machines
(P2P beyond a PCIe switch, when that is more than NCCL's own default there): :func:`risky_reason`;
a hang is recovered by relaunching. :func:`p2p_default_note` says when a level is NCCL's own default.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.nccl.choice import allreduce_choices, ll128_auto
from tuner.nccl.lists import FUNCS, read_list
from tuner.nccl.p2p import default_p2p_reason, p2p_levels, read_p2p_level
from tuner.nccl.sets import local_gpus, topology_p2p_default
from tuner.nccl.types import NcclVersion, Topology, judged_version
from tuner.nccl.values import canonical_value, value_since

__all__ = ["p2p_default_note", "risky_reason", "unsafe_reason", "unsafe_set_reason"]


def unsafe_reason(name: str, value: str, topology: Topology | None = None, *,
                  version: NcclVersion | None = None) -> str | None:
    """Why ``name=value`` enables what NCCL's automatic choice would disable here, or None.

    After NCCL's own parsing, any NCCL_PROTO value that leaves LL128 at 1 (listed, or not
    excluded by a ``^`` list: ``^LL``, ``^Simple``, ``LL,LL128``, ``allreduce:LL128``) bypasses
    NCCL's LL128 guard (:func:`ll128_auto`), which exists because LL128 "may cause silent data
    corruption" elsewhere (src/graph/tuning.cc). Unsafe unless the topology is known to pass the
    guard. NCCL_NVLS_ENABLE forcing NVLS is unsafe while the topology is unknown (an NVLS=1 hang
    was reported, NVIDIA/nccl#1197); with a topology, forcing it where it is missing is
    infeasible instead (:func:`infeasible_reason`).
    A value only a newer NCCL reads (``allreduce:LL128``) is judged, while ``version`` is unknown,
    by the oldest release reading it (:func:`tuner.nccl.values.value_since`).
    """
    v = judged_version(version) if version is not None else (value_since(name, value) or judged_version(None))
    if name == "NCCL_PROTO":
        reading = read_list(name, value, v)
        if reading.fails_init:
            return None
        forced = [f for f in FUNCS if reading.matrix[f].get("LL128") == 1]
        if not forced or ll128_auto(topology, v):
            return None
        where = "this topology" if topology is not None else "an unknown topology"
        if topology is not None and topology.nvlink is False:
            where = "PCIe"
        rows = "every collective" if len(forced) == len(FUNCS) else ", ".join(forced)
        return (f"NCCL_PROTO={value!r} turns LL128 on for {rows}, bypassing NCCL's own LL128 guard on {where}: "
                "silent data corruption is possible (src/graph/tuning.cc, ncclTopoTuneModel)")
    if name == "NCCL_NVLS_ENABLE" and topology is None and canonical_value(name, value, v) == "1":
        return "forces NVLS, which needs NVSwitch multicast (Hopper or later); a hang was reported (NVIDIA/nccl#1197)"
    return None


def unsafe_set_reason(env: Mapping[str, str], topology: Topology | None = None,
                      version: NcclVersion | None = None) -> str | None:
    """Why the whole set is unsafe though each value alone may not be, or None.

    NCCL 2.19-2.21 fall back to Ring with every protocol, LL128 included, when NCCL_ALGO and
    NCCL_PROTO leave a collective nothing (the Ring bandwidth backup in src/graph/tuning.cc,
    fixed in 2.22: NVIDIA/nccl#1304): LL128 then runs where NCCL's guard disabled it.
    """
    for name, value in env.items():
        reason = unsafe_reason(name, value, topology, version=version)
        if reason:
            return reason
    v = judged_version(version)
    if topology is None or not NcclVersion(2, 19, 0) <= v < NcclVersion(2, 22, 0) or ll128_auto(topology, v):
        return None
    for func in FUNCS:
        if allreduce_choices(env, topology, v, func).fallback == "ring-backup-all":
            return (f"NCCL {v} finds nothing for {func} under this set and falls back to Ring with every protocol, "
                    "LL128 included, bypassing its LL128 guard (src/graph/tuning.cc; NVIDIA/nccl#1304)")
    return None


def risky_reason(name: str, value: str, version: NcclVersion | None = None,
                 topology: Topology | None = None) -> str | None:
    """Why a reversible value can still hang a server, or None.

    NCCL_P2P_LEVEL beyond PXB lets P2P cross the CPU's PCIe root complex or the inter-socket
    link, where ACS or an IOMMU may reroute or block peer traffic and hang the first
    collective (NCCL troubleshooting guide, "PCI Access Control Services"). Not risky when the
    level is at or below NCCL's own default on ``topology`` (its CPU and GPUs per node,
    :func:`tuner.nccl.sets.topology_p2p_default`): NCCL already goes that far unasked
    (:func:`p2p_default_note` says so).
    """
    if name != "NCCL_P2P_LEVEL":
        return None
    level, _problem, _warning = read_p2p_level(value, judged_version(version))
    levels = p2p_levels(version)
    if level is None or levels.index(level) <= levels.index("PXB"):
        return None
    default = topology_p2p_default(version, topology)
    if default in levels and levels.index(level) <= levels.index(default):
        return None
    return (f"NCCL_P2P_LEVEL={level} allows P2P beyond a PCIe switch: where ACS or an IOMMU reroutes "
            "peer traffic the first collective can hang (NCCL troubleshooting guide)")


def p2p_default_note(value: str, version: NcclVersion | None = None, topology: Topology | None = None) -> str | None:
    """``"SYS is NCCL's own default here (...)"`` when an NCCL_P2P_LEVEL value is the level NCCL
    uses unset on ``topology``, ``"... below NCCL's own default SYS here ..."`` when it narrows it;
    None when the default is not known or the value is above it or ignored."""
    level, _problem, _warning = read_p2p_level(value, judged_version(version))
    default = topology_p2p_default(version, topology)
    levels = p2p_levels(version)
    if level is None or default is None or topology is None or default not in levels:
        return None
    why = default_p2p_reason(version, topology.cpu_vendor, local_gpus(topology))
    if level == default:
        return f"{level} is NCCL's own default here ({why})"
    if levels.index(level) < levels.index(default):
        return f"{level} is below NCCL's own default {default} here: it only narrows P2P ({why})"
    return None
