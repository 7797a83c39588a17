"""Which (algorithm, protocol) pairs NCCL may pick under a set, on a topology, by version.

NCCL's cost model (src/graph/tuning.cc, ncclTopoTuneModel) only picks among the pairs the
enable matrix of NCCL_ALGO/NCCL_PROTO leaves on and the topology supports; LL128 is enabled by
NCCL itself only where its guard allows (:func:`ll128_auto`). :func:`allreduce_choices` is that
model; :func:`infeasible_reason` says when a set cannot initialise or fails at the first call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tuner.nccl.lists import PER_COLLECTIVE_SINCE, PROTOS, Matrix, algos, default_matrix, read_list
from tuner.nccl.types import NEWEST_VERIFIED, OLDEST_SUPPORTED, NcclVersion, Topology, judged_version
from tuner.nccl.values import canonical_value

__all__ = [
    "allreduce_choices",
    "infeasible_reason",
    "ll128_auto",
    "no_algorithm_warn",
    "starvation_note",
    "starvation_versions",
]

#: Up to 2.18 NCCL_ALGO never disables Ring for a collective other than AllReduce ("Never disable
#: ring for non-allreduce operations. That allows to run real apps with NCCL_ALGO=TREE",
#: src/graph/tuning.cc, ncclTopoTuneModel, v2.18.1-1 to v2.18.6-1; the line is gone in v2.19.1-1).
RING_KEPT_BEFORE = NcclVersion(2, 19, 0)


def _matrix(name: str, value: str, version: NcclVersion | None) -> Matrix:
    return read_list(name, value, judged_version(version)).matrix


def ll128_auto(topology: Topology | None, version: NcclVersion | None = None) -> bool | None:
    """Whether NCCL would enable LL128 by itself on ``topology``; None when that is unknown.

    NCCL's own guard (src/graph/tuning.cc, ncclTopoTuneModel, the protocol enable loop) enables
    LL128 only when the intra-node path is NVLink (``typeIntra <= PATH_NVB``), the GPUs share
    one compute capability, and that capability is 7.0, 8.0 or 9.0 up to 2.24, also 10.0 and
    12.0 in 2.25-2.26, any >= 7.0 from 2.27. Across nodes it also depends on the NIC path,
    which is not known here.
    """
    if topology is None or topology.nvlink is None:
        return None
    if not topology.nvlink:
        return False
    if topology.nnodes > 1:
        return None
    v, arch = judged_version(version), topology.gpu_arch
    if arch is None:
        return None
    if v >= NcclVersion(2, 27, 0):
        return arch >= 70
    if v >= NcclVersion(2, 25, 0):
        return arch in (70, 80, 90, 100, 120)
    return arch in (70, 80, 90)


def _supported(algo: str, func: str, topo: Topology, version: NcclVersion) -> bool:
    """Whether ``algo`` can run ``func`` on ``topo`` (tuning.cc model loop; enqueue.cc cost table)."""
    if algo == "Ring":
        return True
    if algo == "Tree":
        return func == "AllReduce"
    if algo in ("CollNetDirect", "CollNetChain"):
        wanted = ("AllReduce", "AllGather", "ReduceScatter") if algo == "CollNetDirect" else ("AllReduce",)
        return topo.collnet and func in wanted and (algo != "CollNetDirect" or topo.link == "nvswitch")
    if algo == "NVLS":
        return topo.has_nvls and func in ("AllReduce", "AllGather", "ReduceScatter") and (
            topo.nnodes == 1 or topo.collnet)
    if algo == "NVLSTree":
        return topo.has_nvls and topo.nnodes > 1 and func == "AllReduce"
    if algo == "PAT":
        return func in ("AllGather", "ReduceScatter") and topo.nnodes == topo.nranks
    return False


def _protos_for(algo: str) -> tuple[str, ...]:
    return PROTOS if algo in ("Ring", "Tree") else ("Simple",)


@dataclass(frozen=True)
class Choices:
    """The (algorithm, protocol) pairs NCCL may pick for one collective under a set.

    ``pairs``: pairs NCCL's cost model considers; ``maybe``: pairs that depend on LL128's
    automatic rule where the topology does not settle it; ``fallback``: how NCCL got there
    when the set itself left nothing (``""``, ``"ring-backup"`` 2.22-2.23, ``"ring-backup-all"``
    2.19-2.21, which re-enables every Ring protocol); ``fails``: NCCL fails at the first call.
    """

    pairs: frozenset[tuple[str, str]]
    maybe: frozenset[tuple[str, str]]
    fallback: str
    fails: bool


def _old_algo_reset(row: dict[str, int], topo: Topology) -> dict[str, int]:
    """Up to 2.23, a set that disables Ring, Tree, NVLS and NVLSTree without CollNet gets Ring
    and Tree back ("If user has hard set NCCL_ALGO=COLLNET, ignore it", tuning.cc,
    ncclTopoTuneModel). NCCL has already dropped NVLSTree on one node and NVLS across nodes
    by then, so ``NCCL_ALGO=NVLSTree`` on one node is reset too."""
    if topo.collnet:
        return row
    left = {"Ring": row.get("Ring", 0), "Tree": row.get("Tree", 0),
            "NVLS": row.get("NVLS", 0) if topo.nnodes == 1 else 0,
            "NVLSTree": row.get("NVLSTree", 0) if topo.nnodes > 1 else 0}
    if any(left.values()):
        return row
    return {**row, "Ring": 1, "Tree": 1}


def allreduce_choices(env: Mapping[str, str], topology: Topology, version: NcclVersion | None = None,
                      func: str = "AllReduce") -> Choices:
    """Which (algorithm, protocol) pairs NCCL ``version`` may pick for ``func`` under ``env``.

    Follows src/graph/tuning.cc (ncclTopoTuneModel: enable matrix, CollNet/NVLS/NVLSTree
    disabling, LL128 guard, 2.18 keeping Ring for every collective but AllReduce
    (:data:`RING_KEPT_BEFORE`), the 2.19-2.23 Ring bandwidth backup) and src/enqueue.cc (no
    algorithm/protocol left: :func:`no_algorithm_warn`, 2.24+ and 2.18).
    """
    v = judged_version(version)
    algo_row = _matrix("NCCL_ALGO", env["NCCL_ALGO"], v)[func] if "NCCL_ALGO" in env \
        else default_matrix("NCCL_ALGO", v)[func]
    proto_row = _matrix("NCCL_PROTO", env["NCCL_PROTO"], v)[func] if "NCCL_PROTO" in env \
        else default_matrix("NCCL_PROTO", v)[func]
    if v < PER_COLLECTIVE_SINCE:
        algo_row = _old_algo_reset(algo_row, topology)
    if v < RING_KEPT_BEFORE and func != "AllReduce":
        algo_row = {**algo_row, "Ring": 1}
    topo = topology
    if "NCCL_NVLS_ENABLE" in env and canonical_value("NCCL_NVLS_ENABLE", env["NCCL_NVLS_ENABLE"], v) == "0":
        topo = Topology(topology.nranks, topology.nnodes, topology.link, False, topology.gpu_arch, topology.collnet)
    auto = ll128_auto(topology, v)
    pairs, maybe = set(), set()

    def proto_on(p: str) -> bool | None:
        state = proto_row[p]
        return bool(state) if state != 2 else auto

    for a in algos(v):
        if not algo_row.get(a) or not _supported(a, func, topo, v):
            continue
        for p in _protos_for(a):
            on = proto_on(p)
            if on:
                pairs.add((a, p))
            elif on is None:
                maybe.add((a, p))
    if pairs or maybe:
        return Choices(frozenset(pairs), frozenset(maybe), "", False)
    if NcclVersion(2, 19, 0) <= v < NcclVersion(2, 22, 0):
        return Choices(frozenset(("Ring", p) for p in PROTOS), frozenset(), "ring-backup-all", False)
    if NcclVersion(2, 22, 0) <= v < PER_COLLECTIVE_SINCE:
        ring = {("Ring", p) for p in PROTOS if proto_on(p)}
        ring_maybe = {("Ring", p) for p in PROTOS if proto_on(p) is None}
        return Choices(frozenset(ring), frozenset(ring_maybe), "ring-backup", not ring and not ring_maybe)
    return Choices(frozenset(), frozenset(), "", True)


#: Collectives a tensor-parallel server runs through NCCL every decode step: the allreduces and,
#: in vLLM's V1 engine, the logits all-gather (vllm/model_executor/layers/logits_processor.py,
#: _gather_logits: all-gather when Platform.use_all_gather(), true with V1).
SERVER_COLLECTIVES = ("AllReduce", "AllGather")


def no_algorithm_warn(version: NcclVersion, func: str) -> str:
    """What NCCL ``version`` prints and returns at the first ``func`` left no algorithm/protocol,
    as one phrase with its source.

    2.18: ``"Error : no algorithm/protocol available"``, ncclInternalError (src/enqueue.cc,
    getAlgoInfo); 2.19-2.23 the same text in topoGetAlgoInfo, reached only when the Ring backup
    is off too; 2.24-2.29: ``"Error : no algorithm/protocol available for function %s with
    datatype %s.%s%s"``; 2.30+: ``"No algorithm/protocol available for function %s ..."``
    (topoGetAlgoInfo), ncclInvalidUsage when NCCL_ALGO or NCCL_PROTO is set.
    """
    if version < PER_COLLECTIVE_SINCE:
        where = "getAlgoInfo" if version < RING_KEPT_BEFORE else "topoGetAlgoInfo"
        return f"\"Error : no algorithm/protocol available\" at the first {func} (src/enqueue.cc, {where})"
    text = "Error : no algorithm/protocol available" if version < NcclVersion(2, 30, 0) \
        else "No algorithm/protocol available"
    return f"\"{text} for function {func}\" and ncclInvalidUsage at the first {func} (src/enqueue.cc, topoGetAlgoInfo)"


def starvation_versions(version: NcclVersion | None) -> tuple[NcclVersion, ...]:
    """The releases the "no algorithm/protocol left" rule is judged by: ``version``, or when it
    is unknown the strictest supported ones for this rule, newest first: 2.24+ (judged as
    :data:`NEWEST_VERIFIED`: no fallback, and NCCL_ALGO disables Ring for every collective) and
    :data:`OLDEST_SUPPORTED` (2.18: no fallback for AllReduce). 2.19-2.23 fall back to Ring.
    """
    return (version,) if version is not None else (NEWEST_VERIFIED, OLDEST_SUPPORTED)


def starvation_note(failing: Iterable[NcclVersion], func: str) -> str:
    """Which releases fail ``func`` when the version is not known, in words, from the judged
    releases of :func:`starvation_versions` that fail (``failing``): e.g. ``"NCCL 2.24 and later
    (the version is not known yet; 2.18 keeps Ring for every collective but AllReduce and
    2.19-2.23 fall back to Ring)"``."""
    new = any(v >= PER_COLLECTIVE_SINCE for v in failing)
    old = any(v < PER_COLLECTIVE_SINCE for v in failing)
    if new and old:
        return "NCCL 2.18 and 2.24 and later (the version is not known yet; 2.19-2.23 fall back to Ring)"
    if old:
        return "NCCL 2.18 (the version is not known yet; 2.19-2.23 fall back to Ring, 2.24+ read it otherwise)"
    if func == "AllReduce":
        return ("NCCL 2.24 and later (the version is not known yet; earlier releases read this value otherwise or "
                "fall back to Ring)")
    return ("NCCL 2.24 and later (the version is not known yet; 2.18 keeps Ring for every collective but AllReduce "
            "and 2.19-2.23 fall back to Ring)")


def infeasible_reason(env: Mapping[str, str], topology: Topology, version: NcclVersion | None = None,
                      collectives: Iterable[str] = SERVER_COLLECTIVES) -> str | None:
    """Why ``env`` cannot initialise or fails at the first call of one of ``collectives``, or None.

    * NCCL_NVLS_ENABLE forced on without NVLS hardware: NCCL sets up NVLS buffers and
      ``cuMulticastCreate`` fails (src/transport/nvls.cc).
    * NCCL_ALGO/NCCL_PROTO leaving no pair the topology supports: NCCL WARNs
      (:func:`no_algorithm_warn`) and fails the first call from 2.24 and in 2.18 (2.19-2.23
      fall back to Ring, see :func:`allreduce_choices`). E.g. NVLS, NVLSTree, CollNet or PAT
      forced on one PCIe node, or ``NCCL_ALGO=Tree`` on 2.24+ only (no Tree AllGather; 2.18
      keeps Ring for it, :data:`RING_KEPT_BEFORE`): pass ``collectives=("AllReduce",)`` for a
      server that all-gathers elsewhere. An unknown version is judged by
      :func:`starvation_versions`, and the reason says which releases fail.
    * A list NCCL refuses at init (2.24+, :func:`check_value`).
    """
    v = judged_version(version)
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        if name in env:
            reading = read_list(name, env[name], v)
            if reading.fails_init:
                return f"{name}={env[name]!r}: {reading.problem}"
    nvls = env.get("NCCL_NVLS_ENABLE")
    if nvls is not None and canonical_value("NCCL_NVLS_ENABLE", nvls, v) == "1" and not topology.has_nvls:
        return ("NCCL_NVLS_ENABLE forces NVLS on a machine without NVLink SHARP multicast: NVLS setup fails "
                "at init (src/transport/nvls.cc, ncclNvlsInit and cuMulticastCreate)")
    shown = ", ".join(f"{k}={env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE") if k in env)
    for func in collectives:
        failing = [j for j in starvation_versions(version) if allreduce_choices(env, topology, j, func).fails]
        if failing:
            who = f"NCCL {failing[0]}" if version is not None else starvation_note(failing, func)
            return (f"{shown} leaves no algorithm/protocol {who} can run {func} with on {_describe(topology)}: "
                    + no_algorithm_warn(failing[0], func))
    return None


def _describe(topo: Topology) -> str:
    link = {"pcie": "PCIe", "nvlink": "NVLink", "nvswitch": "NVSwitch"}.get(topo.link or "", "an unknown link")
    node = "one node" if topo.nnodes == 1 else f"{topo.nnodes} nodes"
    nvls = ", NVLS" if topo.has_nvls else ""
    return f"{topo.nranks} GPUs on {node} over {link}{nvls}"
