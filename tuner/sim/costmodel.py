"""Decode-speed cost model: NCCL's own algorithm choice, then the time the hardware really takes.

Two layers, both for the allreduce collective only:

1. **NCCL's model** (REFERENCE.md section 4; NCCL src/graph/tuning.cc, 2.23-2.30):
   ``time_us = latency_us + bytes / (1000 * algbw_GBps)`` per (algorithm, protocol), latency =
   base + 2(n-1) x per-hop hardware latency, bus bandwidth = channels x per-channel bandwidth
   (LL x 0.5, LL128 x 0.92, Simple x 1), algbw = busbw x n / (2(n-1)) for Ring, x 0.5 for Tree.
   NCCL runs the cheapest enabled pair; NCCL_ALGO / NCCL_PROTO only change what is enabled.
2. **Realised time** (the simulated hardware): the chosen pair's latency with the real transport
   of every ring hop (P2P, or SHM through host memory when P2P is disabled or the path is above
   the P2P level, or sockets when SHM is disabled too), the channels and threads NCCL actually
   launches for that size (src/enqueue.cc ``topoGetAlgoInfo``: ``while (nBytes < nc * nt *
   threadThreshold) nc--`` then halve nt), buffer-size effects, a CUDA_DEVICE_MAX_CONNECTIONS
   effect, plus a fixed per-allreduce framework overhead. NCCL's model does not see all of this,
   which is why its pick is not always the fastest: the landscape a tuner explores.

A decode step (one token for every running stream) costs compute + layers x allreduces per layer
x allreduce(hidden x 2 bytes x batch). Units: us for allreduces, ms for steps, bytes, GB/s.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .ncclenv import (ALGOS, DEFAULT_BUFFSIZE, MAXCHANNELS, NCCL_MAX_NTHREADS, PATH_TYPES, PROTOS,
                      NcclInitError, NcclSettings)
from .profiles import Profile

#: Base latency (us) per algorithm x protocol [LL, LL128, Simple]; REFERENCE.md section 4,
#: NCCL src/graph/tuning.cc ``baseLat``. NVLS from the same table (Simple only).
BASE_LAT_US = {
    "Tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "Ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "NVLS": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
}
#: Hardware latency (us) per hop; REFERENCE.md section 4, tuning.cc ``hwLat`` [NVLink, PCI, NET].
HW_LAT_US = {
    "nvlink": {"Tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
               "Ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "NVLS": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0}},
    "pcie": {"Tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
             "Ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
             "NVLS": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0}},
    "net": {"Tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
            "Ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
            "NVLS": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0}},
}
#: Share of bus bandwidth a protocol delivers (REFERENCE.md section 4: LL half, LL128 ~92 %).
PROTO_BW = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}
#: Bytes per thread before NCCL adds channels/threads (src/include/device.h; Ring+LL x nRanks).
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
NCCL_STEPS = 8  # slots per connection buffer (src/include/device.h)
LL128_MAX_NTHREADS = 640  # src/include/device.h
SHM_BW_CAP_GBPS = 10.0  # a ring through host memory (simulated hardware, not NCCL's model)
NET_BW_CAP_GBPS = 2.5  # TCP sockets on loopback-class links (simulated hardware)
NET_STEP_FACTOR = 2.0  # sockets without IB vs NCCL's NET row (simulated hardware)
SMALL_BUFFER_BYTES = 65536  # below this NCCL_BUFFSIZE starves the pipeline (simulated hardware)
#: Algorithms NCCL could run an allreduce with on one node, given the profile.
_SINGLE_NODE_ALGOS = ("Tree", "Ring")


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One row of NCCL's tuning table for an allreduce of ``nbytes`` (tuning.cc).

    ``latency_us`` in us, ``algbw_GBps`` in GB/s, ``time_us`` = latency + bytes/(1000 algbw).
    """

    algo: str
    proto: str
    latency_us: float
    algbw_GBps: float
    time_us: float


@dataclasses.dataclass(frozen=True)
class AllreduceCost:
    """Realised cost of one allreduce of ``nbytes`` bytes (all times in us).

    ``via`` is ``"nccl"`` or ``"custom"`` (vLLM custom allreduce, REFERENCE.md section 5);
    ``nchannels`` / ``nthreads`` are what NCCL launches for this size (src/enqueue.cc);
    ``model_us`` is NCCL's own estimate of the chosen pair; ``parts`` breaks ``time_us`` down.
    """

    nbytes: int
    via: str
    algo: str
    proto: str
    nchannels: int
    nthreads: int
    model_us: float
    time_us: float
    parts: dict


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Decode step at ``batch`` concurrent streams: times in ms, ``tok_s`` per stream (tok/s),
    ``share`` = allreduce time / step time (REFERENCE.md section 1: 65-70 % on the PCIe box)."""

    batch: int
    compute_ms: float
    allreduce_ms: float
    step_ms: float
    share: float
    tok_s: float
    allreduce: AllreduceCost


def comm_channels(profile: Profile, settings: NcclSettings) -> int:
    """Channels of the communicator (src/graph/connect.cc ``ncclTopoPostset``): the topology's
    count, cut to NCCL_MAX_NCHANNELS, then duplicated up to NCCL_MIN_NCHANNELS (max wins last),
    never above MAXCHANNELS."""
    n = profile.default_channels
    if settings.max_nchannels is not None:
        n = min(n, settings.max_nchannels)
    if settings.min_nchannels > n:
        n = settings.min_nchannels
    return max(1, min(n, MAXCHANNELS))


def max_threads(profile: Profile, settings: NcclSettings, algo: str, proto: str) -> int:
    """Threads per CTA for a pair (tuning.cc ``getNthreads``): NCCL_NTHREADS if set, else 512,
    except Ring/Simple on slow (PCIe) rings 256 and LL128 640."""
    if proto == "LL128":
        return LL128_MAX_NTHREADS
    if settings.nthreads is not None:
        return settings.nthreads
    if algo == "Ring" and proto == "Simple" and profile.link == "pcie":
        return 256
    return NCCL_MAX_NTHREADS


def launch_resources(profile: Profile, settings: NcclSettings, algo: str, proto: str,
                     nbytes: int) -> tuple[int, int]:
    """(channels, threads) NCCL launches for one op (src/enqueue.cc ``topoGetAlgoInfo``): drop
    channels while ``nBytes < nc * nt * threshold``, then halve threads while divisible by 128."""
    nc = comm_channels(profile, settings)
    nt = max_threads(profile, settings, algo, proto)
    thr = THREAD_THRESHOLD[proto] * (profile.tp if (algo == "Ring" and proto == "LL") else 1)
    while nbytes < nc * nt * thr and nc >= 2:
        nc -= 1
    while nbytes < nc * nt * thr and nt % 128 == 0:
        nt //= 2
    return nc, nt


def algo_supported(profile: Profile, settings: NcclSettings, algo: str) -> bool:
    """Whether NCCL can run an allreduce with ``algo`` here: Tree and Ring on one node; NVLS
    needs NVSwitch gen 3 (profile ``nvls``) and NCCL_NVLS_ENABLE != 0; CollNet needs a SHARP
    network; PAT only serves AllGather/ReduceScatter (REFERENCE.md section 2)."""
    if profile.tp < 2:
        return algo == "Ring"
    if algo in _SINGLE_NODE_ALGOS:
        return True
    if algo == "NVLS":
        return profile.nvls and settings.nvls_enable != 0
    return False


def proto_enabled(profile: Profile, settings: NcclSettings, proto: str) -> bool:
    """NCCL_PROTO enablement; LL128 in its automatic state only on NVLink (tuning.cc)."""
    state = settings.selection.proto.get(proto, 0)
    if state == 2:
        return profile.link == "nvlink"
    return state == 1


def nccl_model(profile: Profile, settings: NcclSettings, nbytes: int) -> list[ModelEntry]:
    """NCCL's tuning table for an allreduce of ``nbytes``: every enabled, supported pair.

    Source: REFERENCE.md section 4 / src/graph/tuning.cc. Uses the communicator's full channel
    count (NCCL's model does; the launch later uses fewer for small sizes).
    """
    n = profile.tp
    steps = 2 * (n - 1)
    nch = comm_channels(profile, settings)
    out = []
    for algo in ALGOS:
        if not settings.selection.algo.get(algo, 0) or not algo_supported(profile, settings, algo):
            continue
        for proto in PROTOS:
            if not proto_enabled(profile, settings, proto):
                continue
            if algo == "NVLS" and proto != "Simple":
                continue
            lat = BASE_LAT_US[algo][proto] + steps * HW_LAT_US[profile.link][algo][proto]
            bus = min(nch * profile.per_channel_bw_GBps, profile.link_bw_cap_GBps)
            bus *= PROTO_BW[proto]
            if algo == "Ring":
                algbw = bus * n / steps
            elif algo == "NVLS":
                algbw = profile.link_bw_cap_GBps * 0.5
            else:
                algbw = bus * 0.5
            out.append(ModelEntry(algo, proto, lat, algbw, lat + nbytes / (1000.0 * algbw)))
    return out


def select(profile: Profile, settings: NcclSettings, nbytes: int) -> ModelEntry | None:
    """The pair NCCL runs: minimum modelled time, first in (algo, proto) order on ties."""
    best = None
    for entry in nccl_model(profile, settings, nbytes):
        if best is None or entry.time_us < best.time_us:
            best = entry
    return best


def check_init(profile: Profile, settings: NcclSettings) -> None:
    """Raise NcclInitError for environments NCCL (or the simulator's stand-in for corruption)
    refuses at start: LL128 forced on a link where NCCL disables it (REFERENCE.md section 2:
    "can lead to data corruption"; the simulator fails loudly instead) and no algorithm/protocol
    left for AllReduce (NCCL: ``No algorithm/protocol available``)."""
    if settings.selection.ll128_forced and profile.link != "nvlink":
        raise NcclInitError([
            "NCCL_PROTO forces LL128 on a PCIe topology: LL128 is only enabled by NCCL on NVLink "
            "(forcing it here can silently corrupt data); refusing to initialise",
            "init.cc: ncclInvalidUsage"])
    if settings.buffsize <= 0:
        # NCCL allocates buffSizes[Simple] bytes per connection: 0 or negative cannot work.
        raise NcclInitError([
            f"Cuda failure 'invalid argument' allocating a {settings.buffsize}-byte buffer "
            "(NCCL_BUFFSIZE)", "transport.cc: ncclUnhandledCudaError"],
            result="ncclUnhandledCudaError")
    if select(profile, settings, profile.decode_bytes) is None:
        algo = settings.raw.get("NCCL_ALGO")
        proto = settings.raw.get("NCCL_PROTO")
        detail = "".join(f" {k} was set to {v}." for k, v in (("NCCL_ALGO", algo),
                                                                ("NCCL_PROTO", proto)) if v)
        raise NcclInitError([
            f"Error : no algorithm/protocol available for function AllReduce with datatype "
            f"ncclBfloat16.{detail}", "enqueue.cc: ncclInvalidUsage"])


def hop_transports(profile: Profile, settings: NcclSettings) -> list[tuple[float, str]]:
    """(fraction of ring hops, transport) pairs. P2P when allowed by NCCL_P2P_DISABLE and the P2P
    level (src/graph/paths.cc ``ncclTopoCheckP2p``), else SHM, else NET (NCCL_SHM_DISABLE=1)."""
    level = settings.p2p_level or profile.p2p_default_level

    def transport(path: str) -> str:
        if not settings.p2p_disable and PATH_TYPES.index(path) <= PATH_TYPES.index(level):
            return "P2P"
        return "NET" if settings.shm_disable else "SHM"

    mix = [(1.0 - profile.cross_fraction, transport(profile.gpu_path))]
    if profile.cross_fraction > 0:
        mix.append((profile.cross_fraction, transport(profile.cross_path)))
    return mix


def _hop_latency_us(profile: Profile, transport: str, algo: str, proto: str) -> float:
    """Per-hop latency (us) on the simulated hardware for one transport."""
    base = HW_LAT_US[profile.link][algo][proto]
    if transport == "SHM":
        return base * profile.shm_step_factor
    if transport == "NET":
        return HW_LAT_US["net"][algo][proto] * NET_STEP_FACTOR
    return base


def _buffer_us(settings: NcclSettings, proto: str, nbytes: int, nc: int, n: int,
               hop_us: float) -> float:
    """Cost (us) of NCCL_BUFFSIZE: Simple splits a slice into chunks of buffsize/NCCL_STEPS
    (extra pipeline rounds), any protocol stalls below 64 KiB; a tiny cost below the default."""
    buf = max(1, settings.buffsize)
    steps = 2 * (n - 1)
    extra = 0.0
    if proto == "Simple":
        chunk = max(1, buf // NCCL_STEPS)
        loops = math.ceil(nbytes / (nc * n) / chunk)
        extra += max(0, loops - 1) * steps * hop_us * 0.25
    if buf < SMALL_BUFFER_BYTES:
        extra += steps * hop_us * 0.5 * (math.sqrt(SMALL_BUFFER_BYTES / buf) - 1.0)
    elif buf < DEFAULT_BUFFSIZE:
        extra += 0.02 * math.log2(DEFAULT_BUFFSIZE / buf)
    return extra


def _connections_us(profile: Profile, settings: NcclSettings) -> float:
    """CUDA_DEVICE_MAX_CONNECTIONS effect per allreduce (us): 1 queue serialises kernels, which
    here shortens the allreduce's wait behind compute on PCIe; many queues cost a little."""
    c = settings.cuda_max_connections
    if c == 1:
        return profile.max_conn_one_us
    if c > 8:
        return profile.max_conn_per_doubling_us * math.log2(c / 8)
    return 0.0


def realized_allreduce(profile: Profile, settings: NcclSettings, nbytes: int) -> AllreduceCost:
    """Time (us) one allreduce of ``nbytes`` takes on the simulated box under ``settings``.

    Raises NcclInitError if no algorithm/protocol is enabled. See the module docstring.
    """
    if profile.custom_allreduce_max_bytes and nbytes <= profile.custom_allreduce_max_bytes:
        t = profile.custom_allreduce_us
        return AllreduceCost(nbytes, "custom", "-", "-", 0, 0, t, t, {"custom": t})
    choice = select(profile, settings, nbytes)
    if choice is None:
        check_init(profile, settings)
        raise NcclInitError(["no algorithm/protocol available for AllReduce"])
    algo, proto, n = choice.algo, choice.proto, profile.tp
    steps = 2 * (n - 1)
    nc, nt = launch_resources(profile, settings, algo, proto, nbytes)
    mix = hop_transports(profile, settings)
    hop = sum(f * _hop_latency_us(profile, t, algo, proto) for f, t in mix)
    if algo == "Tree":
        hop *= profile.tree_chain_penalty  # a single-node tree is a chain: slower than modelled
    latency = BASE_LAT_US[algo][proto] + steps * hop
    bus = min(nc * profile.per_channel_bw_GBps, profile.link_bw_cap_GBps) * PROTO_BW[proto]
    bus *= min(1.0, nt / 128.0)  # a CTA below 128 threads cannot keep the link busy
    transports = {t for f, t in mix if f > 0}
    if "SHM" in transports:
        bus = min(bus, SHM_BW_CAP_GBPS)
    if "NET" in transports:
        bus = min(bus, NET_BW_CAP_GBPS)
    algbw = bus * n / steps if algo == "Ring" else bus * 0.5
    parts = {
        "overhead": profile.op_overhead_us,
        "latency": latency,
        "bandwidth": nbytes / (1000.0 * algbw),
        "buffer": _buffer_us(settings, proto, nbytes, nc, n, hop),
        "connections": _connections_us(profile, settings),
    }
    total = max(1.0, sum(parts.values()))
    return AllreduceCost(nbytes, "nccl", algo, proto, nc, nt, choice.time_us, total, parts)


class CostModel:
    """Cached cost model of one (profile, settings) pair: what a running server uses.

    ``decode_step_ms(batch)``: ms per decode step with ``batch`` streams running (every stream
    gets one token per step); ``prefill_ms(prompt_tokens)``: TTFT in ms; ``breakdown(batch)``.
    """

    def __init__(self, profile: Profile, settings: NcclSettings):
        self.profile = profile
        self.settings = settings

    @functools.lru_cache(maxsize=4096)
    def allreduce(self, nbytes: int) -> AllreduceCost:
        """Realised allreduce of ``nbytes`` bytes (cached)."""
        return realized_allreduce(self.profile, self.settings, nbytes)

    @functools.lru_cache(maxsize=1024)
    def breakdown(self, batch: int = 1) -> Breakdown:
        """Decode step with ``batch`` running streams (ms, tok/s per stream, allreduce share)."""
        p = self.profile
        batch = max(1, batch)
        compute = p.compute_ms * (1.0 + p.batch_compute_slope * (batch - 1))
        cost = self.allreduce(p.decode_bytes * batch)
        comm = p.allreduces_per_token * cost.time_us / 1000.0
        step = compute + comm
        return Breakdown(batch, compute, comm, step, comm / step if step else 0.0,
                         1000.0 / step if step else float("inf"), cost)

    def decode_step_ms(self, batch: int = 1) -> float:
        """ms per decode step at ``batch`` concurrent streams."""
        return self.breakdown(batch).step_ms

    def prefill_ms(self, prompt_tokens: int) -> float:
        """TTFT (ms) for a prompt of ``prompt_tokens``: fixed + per-token compute + the prefill
        allreduces (hidden x 2 bytes x prompt tokens, bandwidth-bound: Simple wins there)."""
        p = self.profile
        tokens = max(1, prompt_tokens)
        cost = self.allreduce(p.decode_bytes * tokens)
        return (p.prefill_fixed_ms + p.prefill_ms_per_token * tokens
                + p.allreduces_per_token * cost.time_us / 1000.0)


def expected_tok_s(profile: Profile, settings: NcclSettings) -> float:
    """Single-stream decode rate (tok/s) without noise: 1000 / decode_step_ms(1)."""
    return CostModel(profile, settings).breakdown(1).tok_s


def landscape(profile: Profile, envs: dict[str, dict]) -> dict[str, Breakdown]:
    """Breakdown at batch 1 for several named environments (for benchmarks and docs)."""
    from .ncclenv import settings_from

    return {name: CostModel(profile, settings_from(env)).breakdown(1) for name, env in envs.items()}
