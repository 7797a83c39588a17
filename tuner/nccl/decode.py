"""Which variables of a set can change the decode allreduce, at its size, and which cannot.

A decode step's allreduce is small (hidden size x tokens x 2 bytes: 7168 x 1 x 2 = 14,336 B for
a DeepSeek-V3-sized model at batch 1). For one allreduce NCCL picks the cheapest enabled
(algorithm, protocol) pair from its cost model (src/enqueue.cc, topoGetAlgoInfo), then sizes
the launch: starting from the communicator's channel count and the pair's maximum threads, it
removes channels while ``nBytes < nc * nt * threadThreshold`` (down to one), then halves the
threads while the same holds and ``nt`` is a multiple of 128 (src/enqueue.cc, topoGetAlgoInfo /
getChannnelThreadInfo). For Ring/LL the threshold is 8 bytes x nRanks (src/graph/tuning.cc,
ncclTopoTuneModel), so 14,336 B on 8 ranks runs on one channel and 128 threads whatever
NCCL_MAX_NCHANNELS says. The cost model reads the search graph's channel count, not the
NCCL_MAX_NCHANNELS-clamped one (src/graph/connect.cc clamps only ``comm->nChannels``), so on one
node the channel variables do not move the choice either. NCCL_BUFFSIZE sizes only the Simple
protocol's buffer (src/init.cc, computeBuffSizes).

:func:`decode_effect` applies these rules to a set: it names each variable that cannot change
that allreduce and why, and returns the rest (canonicalised) as the key to deduplicate trials
by. A variable is only called inert when that holds for every pair NCCL might pick under the
set; transport variables (P2P, SHM, levels) and CUDA_DEVICE_MAX_CONNECTIONS are never called
inert, except NCCL_SHM_DISABLE where the baseline used no SHM connection at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tuner.nccl.choice import allreduce_choices
from tuner.nccl.sets import canonical_set
from tuner.nccl.thresholds import read_thread_thresholds
from tuner.nccl.types import OLDEST_SUPPORTED, NcclVersion, Topology
from tuner.nccl.values import DEFAULT_BUFFSIZE, NCCL_STEPS, canonical_value, max_channels
from tuner.nccl.variables import VARIABLES

__all__ = [
    "COPY_ENGINE",
    "SYMMETRIC",
    "DecodeChoice",
    "Launch",
    "comm_channels",
    "decode_effect",
    "launch",
    "nccl_name",
]

#: The ``algorithm`` of an operation NCCL ran (:class:`tuner.nccl.log.Operation`, :class:`DecodeChoice`) with a symmetric kernel (its ``protocol``
#: is the kernel's name, e.g. ``AllReduce_AGxLL_R``) or with the copy engine (``protocol``
#: ``cudaMemcpy``, or ``RMA proxy + CE`` for the hierarchical one). NCCL_ALGO/NCCL_PROTO select
#: neither directly (src/enqueue.cc, ncclPrepareTasks, v2.27.3-1: "For now just always use
#: symmetric if available"; CE only under the communicator's zero-CTA policy, taskAppend,
#: v2.29.7-1), though from 2.28 a symmetric LL kernel may fall back to the legacy cost model
#: (src/scheduler/symmetric_sched.cc, ncclMakeSymmetricTaskList).
SYMMETRIC = "Symmetric"
COPY_ENGINE = "CE"
WARP_SIZE = 32  # src/include/device.h
TREE_ALL_THREADS_FROM = NcclVersion(2, 22, 0)  # src/enqueue.cc: "Tree now uses all threads always"
_NAMES = {"RING": "Ring", "TREE": "Tree", "COLLNET_DIRECT": "CollNetDirect", "COLLNET_CHAIN": "CollNetChain",
          "NVLS": "NVLS", "NVLS_TREE": "NVLSTree", "PAT": "PAT", "LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}
_CHANNEL_VARS = tuple(v.name for v in VARIABLES.values() if v.rule == "channels")
#: Variables that change which paths and transports NCCL builds, hence its cost model's input.
_CHOICE_MOVERS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE")


def nccl_name(text: str) -> str:
    """NCCL's spelling of an algorithm or protocol from any log spelling (``RING`` -> ``Ring``)."""
    return _NAMES.get(text.upper().replace("-", "_"), text)


@dataclass(frozen=True)
class DecodeChoice:
    """The pair NCCL picks for the decode allreduce: ``algorithm`` (``"Ring"``), ``protocol``
    (``"LL"``), and where that was read (``source``: a per-operation line, the TUNING table...)."""

    algorithm: str
    protocol: str
    source: str = "given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "algorithm", nccl_name(self.algorithm))
        object.__setattr__(self, "protocol", nccl_name(self.protocol))


@dataclass(frozen=True)
class Launch:
    """What NCCL launches for one operation: ``nchannels`` blocks of ``nthreads`` threads."""

    nchannels: int
    nthreads: int


def max_threads(algorithm: str, protocol: str, env: Mapping[str, str], *, simple_ring_default: int = 512) -> int:
    """``comm->maxThreads`` for a pair (src/graph/tuning.cc, ncclTopoTuneModel and getNthreads).

    LL and Simple take NCCL_NTHREADS (clamped), LL128 NCCL_LL128_NTHREADS (default 640), NVLS
    and CollNet 640. Ring/Simple defaults to 256 on slow rings (ring bandwidth x channels at
    most PCI_BW) and 512 otherwise: ``simple_ring_default``.
    """
    if algorithm not in ("Ring", "Tree"):
        return 640
    if protocol == "LL128":
        text = canonical_value("NCCL_LL128_NTHREADS", env.get("NCCL_LL128_NTHREADS", ""))
        return int(text) if text.isdigit() else 640
    text = canonical_value("NCCL_NTHREADS", env["NCCL_NTHREADS"]) if "NCCL_NTHREADS" in env else ""
    if text.isdigit():
        return int(text)
    return simple_ring_default if (algorithm, protocol) == ("Ring", "Simple") else 512


def thread_threshold(algorithm: str, protocol: str, nranks: int, env: Mapping[str, str]) -> int:
    """``comm->threadThresholds`` for a pair, NCCL_THREAD_THRESHOLDS applied (tuning.cc)."""
    if algorithm in ("CollNetDirect", "CollNetChain") and protocol == "Simple":
        return 512
    slot = {"LL": 0, "LL128": 1, "Simple": 2}[protocol]
    default = (8, 8, 64)[slot] * (nranks if (algorithm, protocol) == ("Ring", "LL") else 1)
    if algorithm in ("Tree", "Ring") and "NCCL_THREAD_THRESHOLDS" in env:
        overrides, problem, _warnings = read_thread_thresholds(env["NCCL_THREAD_THRESHOLDS"])
        override = None if problem else overrides[(0 if algorithm == "Tree" else 3) + slot]
        if override is not None:
            return override
    return default


def comm_channels(env: Mapping[str, str], search_channels: int, version: NcclVersion | None = None) -> int:
    """``comm->nChannels`` after NCCL applies the channel variables (src/graph/connect.cc,
    ncclTopoPostset): min(search, MAX, MAX_CTAS), then raised to max(MIN, MIN_CTAS)."""
    def value(*names: str) -> int | None:
        for name in names:
            if name in env:
                text = canonical_value(name, env[name], version)
                if text.lstrip("-").isdigit():
                    return int(text)
        return None

    top = max_channels(version)
    hi = min(x for x in (search_channels, value("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS") or top,
                         value("NCCL_MAX_CTAS") or top) if x is not None)
    lo = max(value("NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS") or 0, value("NCCL_MIN_CTAS") or 0)
    return max(hi, min(lo, top))


def launch(nbytes: int, algorithm: str, protocol: str, nranks: int, nchannels: int, env: Mapping[str, str],
           *, version: NcclVersion | None = None, simple_ring_default: int = 512) -> Launch:
    """The channels and threads NCCL launches one Ring/Tree operation of ``nbytes`` with.

    Emulates src/enqueue.cc topoGetAlgoInfo: channels drop while ``nbytes < nc*nt*threshold``
    (not below 1), then threads halve while that holds and ``nt % 128 == 0``; Simple adds a warp
    (Ring) or four (Tree); at least 3 warps; Tree uses 640 threads from 2.22.
    """
    nt = max_threads(algorithm, protocol, env, simple_ring_default=simple_ring_default)
    thr = thread_threshold(algorithm, protocol, nranks, env)
    nc = nchannels
    while nbytes < nc * nt * thr and nc >= 2:
        nc -= 1
    while nbytes < nc * nt * thr and nt % 128 == 0:
        nt //= 2
    if protocol == "Simple":
        nt += WARP_SIZE if algorithm == "Ring" else (4 * WARP_SIZE if algorithm == "Tree" else 0)
    nt = max(nt, 3 * WARP_SIZE)
    if algorithm == "Tree" and (version or OLDEST_SUPPORTED) >= TREE_ALL_THREADS_FROM:
        nt = 640
    return Launch(nc, nt)


@dataclass(frozen=True)
class DecodeEffect:
    """``inert``: variable -> why it cannot change the decode allreduce; ``effective``: the
    canonical set without them (:func:`tuner.nccl.sets.canonical_set`), the key for deduplication."""

    inert: dict[str, str]
    effective: dict[str, str]


def _candidates(env: Mapping[str, str], choice: DecodeChoice, topology: Topology | None,
                version: NcclVersion) -> tuple[set[tuple[str, str]] | None, str | None]:
    """Pairs NCCL may pick under ``env`` and, if the list variables keep ``choice``, why they are inert."""
    lists = {k: env[k] for k in ("NCCL_ALGO", "NCCL_PROTO") if k in env}
    movers = [k for k in _CHOICE_MOVERS if k in env]
    pair = (choice.algorithm, choice.protocol)
    if topology is None:
        return ({pair} if not lists and not movers else None), None
    now = allreduce_choices(lists, topology, version)
    base = allreduce_choices({}, topology, version)
    now_all, base_all = now.pairs | now.maybe, base.pairs | base.maybe
    keeps = pair in now.pairs and now_all <= base_all and not now.fallback
    if keeps and not movers:
        why = None
        if lists:
            why = (f"NCCL picks {pair[0]}/{pair[1]} at this size and the set keeps it enabled while enabling "
                   "nothing new, so the cheapest pair stays the same (src/enqueue.cc, topoGetAlgoInfo)")
        return {pair}, why
    return set(now_all), None


def decode_effect(env: Mapping[str, str], nbytes: int, nranks: int, choice: DecodeChoice, *,
                  version: NcclVersion | None = None, topology: Topology | None = None,
                  search_channels: int | None = None, transports: Iterable[str] = (),
                  simple_ring_default: int = 512) -> DecodeEffect:
    """Which variables of ``env`` cannot change an allreduce of ``nbytes`` on ``nranks`` GPUs.

    ``choice`` is the pair NCCL picks there in the baseline (from ``nccl-tune diagnose``'s
    per-operation lines or TUNING table, :func:`tuner.nccl.log.decode_choice`). ``search_channels``
    is the baseline communicator's channel count ("N coll channels" line; None if unknown);
    ``transports`` the transports the baseline log shows (:attr:`tuner.nccl.log.ParsedLog.transports`:
    ``{"P2P/IPC", "SHM/direct/direct"}``). Assumes one
    node: across nodes the Ring/Simple cost depends on the channel count. A ``choice`` on a
    symmetric kernel or the copy engine (:data:`SYMMETRIC`, :data:`COPY_ENGINE`) calls nothing
    inert (those paths are not modelled).
    """
    v = version or OLDEST_SUPPORTED
    inert = _record_inert(env, topology)
    if choice.algorithm in (SYMMETRIC, COPY_ENGINE):
        # Not modelled, so nothing is called inert: from 2.28 a symmetric LL kernel on unregistered
        # buffers falls back to the legacy cost model, which NCCL_ALGO/NCCL_PROTO steer
        # (src/scheduler/symmetric_sched.cc, ncclMakeSymmetricTaskList, v2.29.7-1).
        return DecodeEffect(inert, canonical_set({k: x for k, x in env.items() if k not in inert}, v, topology))
    candidates, list_reason = _candidates(env, choice, topology, v)
    if list_reason:
        for name in ("NCCL_ALGO", "NCCL_PROTO"):
            if name in env:
                inert[name] = list_reason
    multi_node = topology is not None and topology.nnodes > 1
    if candidates:
        protos = {p for _a, p in candidates}
        algos = {a for a, _p in candidates}
        for name, proto in (("NCCL_BUFFSIZE", "Simple"), ("NCCL_LL_BUFFSIZE", "LL"), ("NCCL_LL128_BUFFSIZE", "LL128")):
            if name in env and proto not in protos:
                inert[name] = (f"{name} sizes only the {proto} protocol's buffer and NCCL runs this allreduce with "
                               f"{'/'.join(sorted(protos))} (src/init.cc, computeBuffSizes)")
            elif name == "NCCL_BUFFSIZE" and name in env and _fits_one_step(env[name], nbytes, v):
                inert[name] = (f"one {proto} step of either buffer size holds all {nbytes} bytes, so the transfer "
                               "is the same (src/enqueue.cc, calcCollChunking: step = buffer / NCCL_STEPS)")
        if not multi_node and algos <= {"Ring", "Tree", "NVLS", "NVLSTree"}:
            _launch_inert(env, nbytes, nranks, candidates, v, search_channels, simple_ring_default, inert)
        if "NCCL_NVLS_ENABLE" in env and not (algos & {"NVLS", "NVLSTree"}) and topology is not None \
                and not topology.has_nvls:
            inert["NCCL_NVLS_ENABLE"] = "this machine has no NVLS, so NCCL never considers it (src/transport/nvls.cc)"
    kinds = {t.split("/")[0] for t in transports}
    p2p_kept = "NCCL_P2P_DISABLE" not in env and "NCCL_P2P_LEVEL" not in env
    if "NCCL_SHM_DISABLE" in env and kinds and "SHM" not in kinds and p2p_kept:
        inert["NCCL_SHM_DISABLE"] = ("the baseline connected every peer without SHM and the set keeps P2P as it was "
                                     "(NCCL tries P2P first and reads NCCL_SHM_DISABLE only for pairs P2P cannot serve, "
                                     "src/transport.cc selectTransport)")
    remaining = {k: val for k, val in env.items() if k not in inert}
    return DecodeEffect(inert, canonical_set(remaining, v, topology))


def _record_inert(env: Mapping[str, str], topology: Topology | None) -> dict[str, str]:
    """Variables whose record (:attr:`tuner.nccl.variables.Variable.acts_on`) says they cannot act
    on the decode allreduce: nothing at all, or only the network while the communicator is one node."""
    inert = {}
    for name in env:
        var = VARIABLES.get(name)
        if var is None or var.acts_on is None or "decode" in var.acts_on:
            continue
        if not var.acts_on:
            inert[name] = f"{name} changes nothing NCCL runs (its record: {var.source})"
        elif var.acts_on == {"network"} and topology is not None and topology.nnodes == 1:
            inert[name] = f"{name} acts only on the network and this communicator is one node (its record: {var.source})"
    return inert


def _fits_one_step(value: str, nbytes: int, version: NcclVersion) -> bool:
    text = canonical_value("NCCL_BUFFSIZE", value, version)
    size = DEFAULT_BUFFSIZE if text == "" else (int(text) if text.isdigit() else 0)
    return min(size, DEFAULT_BUFFSIZE) // NCCL_STEPS >= nbytes


def _launch_inert(env: Mapping[str, str], nbytes: int, nranks: int, candidates: set[tuple[str, str]],
                  version: NcclVersion, search_channels: int | None, simple_ring_default: int,
                  inert: dict[str, str]) -> None:
    """Mark channel, thread and threshold variables that leave every candidate's launch unchanged."""
    top = max_channels(version)
    searches = [search_channels] if search_channels else list(range(1, top + 1))
    for names in (_CHANNEL_VARS, ("NCCL_NTHREADS", "NCCL_LL128_NTHREADS"), ("NCCL_THREAD_THRESHOLDS",)):
        present = [n for n in names if n in env]
        if not present:
            continue
        ruled = {k: val for k, val in env.items() if k in _CHANNEL_VARS or k in (
            "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_THREAD_THRESHOLDS")}
        without = {k: val for k, val in ruled.items() if k not in present}
        shapes = set()
        same = True
        for algo, proto in candidates:
            if algo in ("NVLS", "NVLSTree"):
                if any("CTAS" in n for n in present):
                    same = False  # CTAS bound comm->nvlsChannels (src/transport/nvls.cc, ncclNvlsInit)
                continue
            for search in searches:
                base = launch(nbytes, algo, proto, nranks, comm_channels(without, search, version), without,
                              version=version, simple_ring_default=simple_ring_default)
                mine = launch(nbytes, algo, proto, nranks, comm_channels(ruled, search, version), ruled,
                              version=version, simple_ring_default=simple_ring_default)
                same &= base == mine
                shapes.add((algo, proto, mine))
        if not same:
            continue
        shown = ", ".join(f"{a}/{p}: {s.nchannels} channel(s) x {s.nthreads} threads" for a, p, s in sorted(
            shapes, key=lambda x: (x[0], x[1], x[2].nchannels)))
        for name in present:
            inert[name] = (f"at {nbytes} B on {nranks} ranks NCCL launches the same with or without it ({shown}): "
                           "it cuts channels and threads while nBytes < channels x threads x threshold "
                           "(src/enqueue.cc, topoGetAlgoInfo)")
