"""Where NCCL's model of the machine may be wrong, read from one launch's log.

:func:`triage` looks at NCCL's own view (:class:`tuner.nccl.machine.NcclMachine`: the topology
NCCL printed, the graphs it searched, the transport of every channel's peer pair, the P2P
level in force) and says, one plain sentence each, quoting NCCL's line and citing its source:

* ``fallback``: the ring search found no path and fell back to the simple order at bw 0.1 on
  one channel ("Could not find a path for pattern %d, falling back to simple order",
  src/graph/search.cc ncclTopoCompute), so NCCL's cost model (src/graph/tuning.cc) picks
  Simple at small sizes. Fixes: NCCL_PROTO=LL, with NCCL_P2P_LEVEL where pairs lost P2P to the
  level, and NCCL_MIN_NCHANNELS=8 where the night's prefill allreduce is large enough for
  channels to act (src/enqueue.cc topoGetAlgoInfo).
* ``inter-cpu``: the inter-CPU link NCCL assumes (``SYS[..]``; 16 GB/s for every AMD CPU,
  ``AMD_BW`` in src/graph/topo.h) is far below the GPUs' own PCIe links.
* ``simple-at-decode``: NCCL's model picks Simple at the decode size on the graphs it found.
  Fix: NCCL_PROTO=LL.
* ``shm-by-level``: pairs on SHM whose path lies beyond the P2P level in force (src/graph/
  paths.cc ncclTopoCheckP2p), not kept off by NCCL_P2P_DISABLE or by a level that already
  covers them (then the hardware or NVML did). Fix: NCCL_P2P_LEVEL at the lowest level covering
  their path (SYS across sockets, PHB under one CPU), with the hang note of
  :func:`tuner.nccl.safety.risky_reason`.
* ``few-channels``: 1-2 channels where each GPU has more NVLinks. Fix: NCCL_MIN_NCHANNELS, only
  where the night's prefill allreduce lets channels act.
* ``files`` (:data:`tuner.triage.model.FILES`): where the night's space offers NCCL_GRAPH_FILE or
  NCCL_TOPO_FILE values and the search fell back or the inter-CPU link is far below the PCIe
  links, one set per file, relaunched after the combined fix: with a graph file NCCL takes its
  graphs from the file and skips its own search (src/graph/search.cc, ncclTopoCompute:
  "NCCL_GRAPH_FILE set by environment to %s", then "Search %d : %d channels loaded from XML
  graph"); with a topology file it describes the machine from the file (src/graph/topo.cc,
  ncclTopoGetSystem).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tuner.nccl import (
    GRAPH_FILE_VAR,
    TOPO_FILE_VAR,
    CostTable,
    ModelGraph,
    NcclMachine,
    NcclVersion,
    Pick,
    allreduce_table,
    comm_channels,
    launch,
    nccl_pick,
    p2p_levels,
    risky_reason,
)
from tuner.triage.model import FILES, Finding, FixSet, Triage
from tuner.triage.network import NET_FIX_VALUES

__all__ = ["EXCLUSIVE", "FIX_VALUES", "NO_GRAPH", "triage"]

#: The channel floor proposed for prefill where the search left too few (the published fix for
#: the motivating box: ``NCCL_MIN_NCHANNELS=8``).
MIN_CHANNELS_FIX = 8
#: The one line said when the log holds no GRAPH lines.
NO_GRAPH = ("NCCL logged none of its GRAPH lines (topology, search graphs; NCCL_DEBUG_SUBSYS "
            "must include GRAPH): its model of this machine could not be judged")
#: Every value each finding kind's fix can set, by variable (what :func:`triage` below proposes:
#: the P2P level covering an SHM pair's path, SYS or PHB, from :func:`_level_fix`; the fallback's
#: channel floor; the few-channels floor, twice min(NVLinks per GPU, 8)). The dry run bounds the
#: triage's sets with it (:mod:`tuner.triage.bound`); tests/unit/triage checks every proposed fix.
FIX_VALUES: dict[str, dict[str, frozenset[str]]] = {
    "fallback": {"NCCL_PROTO": frozenset({"LL"}), "NCCL_P2P_LEVEL": frozenset({"SYS", "PHB"}),
                 "NCCL_MIN_NCHANNELS": frozenset({str(MIN_CHANNELS_FIX)})},
    "simple-at-decode": {"NCCL_PROTO": frozenset({"LL"})},
    "shm-by-level": {"NCCL_P2P_LEVEL": frozenset({"SYS", "PHB"})},
    "few-channels": {"NCCL_MIN_NCHANNELS": frozenset(str(2 * n) for n in range(1, MIN_CHANNELS_FIX + 1))},
    **NET_FIX_VALUES,
}
#: Finding kinds of which one triage holds at most one (``simple-at-decode`` is judged only where
#: the search did not fall back).
EXCLUSIVE = (("fallback", "simple-at-decode"),)
_FAR_BELOW = 0.75  # an inter-CPU link under 3/4 of a GPU's PCIe link bounds every ring crossing it
_SEARCH = "src/graph/search.cc, ncclTopoCompute"
_TUNING = "src/graph/tuning.cc, ncclTopoTuneModel"


def _us(t: float) -> str:
    return f"{t:.0f} us" if t >= 10 else f"{t:.1f} us"


def _sizes_text(sizes: Sequence[int]) -> str:
    return ", ".join(f"{s} B" for s in sizes)


def _ring(machine: NcclMachine) -> ModelGraph | None:
    g = machine.ring_graph
    if g is None:
        return None
    return ModelGraph(g.nchannels, g.bw_intra_GBps, g.type_intra, g.bw_inter_GBps, g.pattern)


def _table(graph: ModelGraph, nranks: int, version: NcclVersion | None, env: Mapping[str, str] | None = None,
           nnodes: int = 1) -> CostTable:
    return allreduce_table(graph, nranks, nnodes=nnodes, version=version, env=env)


def _picks(table: CostTable, sizes: Sequence[int]) -> list[Pick]:
    return [p for p in (nccl_pick(table, s) for s in sizes) if p is not None]


def _pick_text(picks: Sequence[Pick]) -> str:
    return "; ".join(f"{p.pair} {_us(p.time_us)} at {p.nbytes} B" for p in picks)


def _simple_from(table: CostTable) -> int | None:
    """The smallest power of two from 64 B to 1 GiB at which the model picks Simple."""
    for k in range(6, 31):
        pick = nccl_pick(table, 1 << k)
        if pick is not None and pick.proto == "Simple":
            return 1 << k
    return None


def _size_words(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _level_fix(machine: NcclMachine, version: NcclVersion | None, p2p_disabled: bool) -> tuple[str, list[tuple[int, int]], str] | None:
    """(level, pairs, path words) when SHM pairs are kept off P2P by the level in force."""
    shm = sorted(machine.shm_pairs)
    if not shm or p2p_disabled:
        return None
    levels = p2p_levels(version)
    current = machine.p2p_level.level
    chains = _chains(machine)
    paths = {pair: _pair_path(chains, *pair) for pair in shm}
    known = [p for p in paths.values() if p is not None]
    needed = "SYS" if not known or "SYS" in known else max(known, key=lambda x: levels.index(x) if x in levels else 0)
    if needed in ("PIX", "PXB"):
        return None  # within a switch: the level (PXB or wider) covers it; the hardware or NVML kept P2P off
    if current is not None and current in levels and needed in levels and levels.index(current) >= levels.index(needed):
        return None  # the level in force covers the path: not the level's doing
    where = "across the CPU sockets" if needed == "SYS" else "through the CPU's root complex"
    if not known:
        where = "on a path NCCL's topology lines did not name"
    return needed, shm, where


_GPU_RANK = re.compile(r"GPU/\S+ \((\d+)\)")


def _chains(machine: NcclMachine) -> dict[int, list[str]]:
    """Each rank's GPU and its PCI ancestors up to its CPU, from the topology tree NCCL printed
    (src/graph/topo.cc, ncclTopoPrintRec prints PCI links downward, the GPU's rank in brackets)."""
    parent: dict[str, str] = {}
    ranks: dict[int, str] = {}
    for lk in machine.links:
        if lk.kind != "PCI":
            continue
        parent.setdefault(lk.dst, lk.src)
        found = _GPU_RANK.search(lk.line)
        if found and lk.dst.startswith("GPU/"):
            ranks[int(found.group(1))] = lk.dst
    out = {}
    for rank, label in ranks.items():
        chain = [label]
        while chain[-1] in parent and len(chain) < 32:
            chain.append(parent[chain[-1]])
        out[rank] = chain
    return out


def _pair_path(chains: Mapping[int, list[str]], src: int, dst: int) -> str | None:
    """The path type between two ranks' GPUs (src/graph/paths.cc path types): SYS under
    different CPUs, PHB under one CPU without a shared switch, PXB behind one switch; None when
    the topology does not place both under a CPU."""
    a, b = chains.get(src), chains.get(dst)
    if not a or not b or not a[-1].startswith("CPU/") or not b[-1].startswith("CPU/"):
        return None
    if a[-1] != b[-1]:
        return "SYS"
    shared = next((x for x in a[1:] if x in b[1:]), None)
    return "PHB" if shared is None or shared.startswith("CPU/") else "PXB"


def triage(machine: NcclMachine | None, *, version: NcclVersion | None, nranks: int,
           decode_bytes: Sequence[int] = (), prefill_bytes: int | None = None, nnodes: int = 1,
           p2p_disabled: bool = False, files: Mapping[str, Sequence[str]] | None = None) -> Triage:
    """Judge NCCL's model of the machine from one launch's ``machine`` (None: no such lines).

    ``version``: the NCCL release the launch ran; ``nranks``/``nnodes``: the communicator;
    ``decode_bytes``: the decode allreduce size at each concurrency level the night measures
    (empty: not known, said once); ``prefill_bytes``: the prompt's prefill allreduce, None when
    the night has none; ``p2p_disabled``: NCCL_P2P_DISABLE was set for the launch (then SHM
    pairs are not the level's doing); ``files``: the night's space's values of NCCL_GRAPH_FILE and
    NCCL_TOPO_FILE (absolute paths, as the space holds them), proposed one set each where the
    search fell back or the inter-CPU link is far below the PCIe links. Never raises for a machine with missing parts: what was
    not logged is said, never guessed.
    """
    if machine is None or not machine.graphs:
        return Triage((), False, NO_GRAPH)
    decode = sorted(set(decode_bytes))
    findings: list[Finding] = []
    notes: list[str] = []
    if not decode:
        notes.append("No decode allreduce size is known (no [model] in the config, no diagnose of this study), "
                     "so the costs above are NCCL's model over all sizes, not at the decode size; "
                     "[model] config = \"<the model's config.json>\" gives it.")
    ring = _ring(machine)
    level = _level_fix(machine, version, p2p_disabled)
    level_fix = None
    if level is not None:
        name = level[0]
        hang = risky_reason("NCCL_P2P_LEVEL", name, version) or ""
        level_fix = FixSet("fix: p2p level", {"NCCL_P2P_LEVEL": name},
                           f"NCCL_P2P_LEVEL={name} lets the SHM pairs use P2P" + (f"; {hang}" if hang else ""))
    fallback = _fallback(machine, ring, nranks, version, decode, prefill_bytes, level_fix)
    if fallback is not None:
        findings.append(fallback)
    inter = _inter_cpu(machine, ring, nranks, version, decode)
    if inter is not None:
        findings.append(inter)
    if fallback is None and ring is not None:
        simple = _simple_at_decode(machine, ring, nranks, version, decode, nnodes)
        if simple is not None:
            findings.append(simple)
    if level is not None and level_fix is not None:
        findings.append(_shm_finding(machine, level, level_fix))
    few = _few_channels(machine, ring, nranks, version, prefill_bytes)
    if few is not None:
        findings.append(few)
    if not findings:
        return Triage((), True, _right_summary(machine, ring, nranks, version, decode), tuple(notes))
    count = len(findings)
    plural = "s" if count != 1 else ""
    given = _files(findings, files or {})
    if given is not None:
        findings.append(given)  # not counted: the user's files, not a place where NCCL's model is wrong
    summary = (f"NCCL's model of this machine may be wrong ({count} finding{plural}); "
               "the fixes are relaunched first")
    return Triage(tuple(findings), False, summary, tuple(notes))


def _fallback(machine: NcclMachine, ring: ModelGraph | None, nranks: int, version: NcclVersion | None,
              decode: Sequence[int], prefill: int | None, level_fix: FixSet | None) -> Finding | None:
    fell = machine.fallbacks
    fallen_graph = ring is not None and ring.nchannels == 1 and ring.bw_intra_GBps <= 0.1 + 1e-9
    if not fell and not fallen_graph:
        return None
    quote = fell[0].line if fell else (machine.ring_graph.line if machine.ring_graph is not None else "")
    graph = ring or ModelGraph(1, 0.1, "SYS", 0.1)
    table = _table(graph, nranks, version)
    ll = _table(graph, nranks, version, {"NCCL_PROTO": "LL"})
    if decode:
        model = _pick_text(_picks(table, decode))
        forced = _pick_text(_picks(ll, decode))
        cost = (f"on the fallen-back graph (1 channel at 0.1 GB/s) NCCL's model picks {model} (forced LL: "
                f"{forced}), pricing by a bandwidth the links do not have")
        pci = machine.gpu_pcie_bw_GBps
        if pci:
            sane = _pick_text(_picks(_table(ModelGraph(1, pci, "SYS", pci), nranks, version), decode))
            cost += f"; at the GPUs' {pci:g} GB/s links the same model gives {sane}"
    else:
        start = _simple_from(table)
        cost = ("NCCL's model on the fallen-back graph (1 channel at 0.1 GB/s) picks Simple from "
                f"{_size_words(start)} up" if start else "NCCL's model on the fallen-back graph picks no Simple")
    env: dict[str, str] = {"NCCL_PROTO": "LL"}
    if level_fix is not None:
        env = {**level_fix.env, **env}
    reasons = ["LL where the fallback makes NCCL's model pick Simple"]
    if level_fix is not None:
        reasons.append(level_fix.reason)
    channels = _channels_act(prefill, nranks, 1, version)
    if channels:
        env["NCCL_MIN_NCHANNELS"] = str(MIN_CHANNELS_FIX)
        reasons.append(f"NCCL_MIN_NCHANNELS={MIN_CHANNELS_FIX} for the {prefill} B prefill allreduce, which the "
                       "fallback's single channel serialises")
    fixes = (FixSet("fix: fallback", env, "; ".join(reasons)),)
    sentence = (f"NCCL's ring search fell back to the simple order (\"{quote.strip()}\", {_SEARCH}): "
                f"{cost} ({_TUNING}).")
    return Finding("fallback", sentence, quote, _SEARCH, cost, fixes)


_FILE_WORDS = {
    GRAPH_FILE_VAR: ("graph file", "NCCL takes its graphs from the file and skips its own search "
                     "(\"NCCL_GRAPH_FILE set by environment to %s\", src/graph/search.cc, ncclTopoCompute)"),
    TOPO_FILE_VAR: ("topology file", "NCCL describes the machine from the file, its links' bandwidths included, "
                    "before it searches (\"NCCL_TOPO_FILE set by environment to %s\", src/graph/topo.cc, "
                    "ncclTopoGetSystem)"),
}


def _files(findings: Sequence[Finding], files: Mapping[str, Sequence[str]]) -> Finding | None:
    """One set per graph or topology file the space offers, where the search fell back or the
    inter-CPU link is far below the PCIe links (the two a file given by the user can correct)."""
    why = next((f for f in findings if f.kind in ("fallback", "inter-cpu")), None)
    if why is None:
        return None
    fixes = []
    for var in (GRAPH_FILE_VAR, TOPO_FILE_VAR):
        words, does = _FILE_WORDS[var]
        for path in dict.fromkeys(files.get(var, ())):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            fixes.append(FixSet(f"fix: {words} {name}", {var: path}, f"{var}={path}: {does}"))
    if not fixes:
        return None
    shown = ", ".join(f"{var}={path}" for f in fixes for var, path in f.env.items())
    what = "the fallback" if why.kind == "fallback" else "the inter-CPU bandwidth NCCL assumes"
    sentence = (f"The space offers {shown}: with a file {what} need not hold, since "
                + "; ".join(_FILE_WORDS[v][1] for v in (GRAPH_FILE_VAR, TOPO_FILE_VAR) if files.get(v))
                + "; each file is relaunched after the combined fix.")
    return Finding(FILES, sentence, "", "src/graph/search.cc, ncclTopoCompute; src/graph/topo.cc, ncclTopoGetSystem",
                   "", tuple(fixes))


def _channels_act(prefill: int | None, nranks: int, search_channels: int, version: NcclVersion | None) -> bool:
    """Whether NCCL_MIN_NCHANNELS=8 changes the launch of the prefill allreduce (Ring/Simple,
    src/enqueue.cc topoGetAlgoInfo; tuner.nccl.decode.launch)."""
    if not prefill:
        return False
    floor = {"NCCL_MIN_NCHANNELS": str(MIN_CHANNELS_FIX)}
    before = launch(prefill, "Ring", "Simple", nranks, comm_channels({}, search_channels, version), {}, version=version)
    after = launch(prefill, "Ring", "Simple", nranks, comm_channels(floor, search_channels, version), floor,
                   version=version)
    return after.nchannels > before.nchannels


def _inter_cpu(machine: NcclMachine, ring: ModelGraph | None, nranks: int, version: NcclVersion | None,
               decode: Sequence[int]) -> Finding | None:
    sys_bw, pci_bw = machine.inter_cpu_bw_GBps, machine.gpu_pcie_bw_GBps
    if sys_bw is None or pci_bw is None or sys_bw >= _FAR_BELOW * pci_bw:
        return None
    link = next((lk for lk in machine.links if lk.kind == "SYS"), None)
    quote = link.line if link is not None else ""
    vendor = machine.cpu_vendor
    why = ("; AMD_BW, the same for every AMD CPU, src/graph/topo.h" if vendor == "AMD"
           else "; src/graph/topo.h, the inter-CPU bandwidths by CPU model")
    cost = ""
    if ring is not None and decode:
        at_links = ModelGraph(max(ring.nchannels, 1), pci_bw, ring.type_intra, pci_bw)
        cost = (f"; NCCL's model gives {_pick_text(_picks(_table(ring, nranks, version), decode))} on its graph, "
                f"{_pick_text(_picks(_table(at_links, nranks, version), decode))} at the GPUs' link bandwidth")
    sentence = (f"NCCL assumes {sys_bw:g} GB/s between the CPU sockets (\"{quote.strip()}\"{why}), far below the "
                f"GPUs' {pci_bw:g} GB/s PCIe links, so every ring that crosses sockets is bounded by it{cost}.")
    return Finding("inter-cpu", sentence, quote, "src/graph/topo.h, AMD_BW; src/graph/topo.cc, ncclTopoPrint",
                   cost.removeprefix("; "), ())


def _simple_at_decode(machine: NcclMachine, ring: ModelGraph, nranks: int, version: NcclVersion | None,
                      decode: Sequence[int], nnodes: int) -> Finding | None:
    if not decode:
        return None
    table = _table(ring, nranks, version, nnodes=nnodes)
    picks = _picks(table, decode)
    simple = [p for p in picks if p.proto == "Simple"]
    if not simple:
        return None
    ll = _picks(_table(ring, nranks, version, {"NCCL_PROTO": "LL"}, nnodes), [p.nbytes for p in simple])
    quote = machine.ring_graph.line if machine.ring_graph is not None else ""
    cost = f"NCCL's model picks {_pick_text(simple)} (forced LL: {_pick_text(ll)})"
    sentence = (f"NCCL's model picks Simple at the decode size on the graph it found (\"{quote.strip()}\", "
                f"{_TUNING} and src/enqueue.cc topoGetAlgoInfo): {cost}.")
    fix = FixSet("fix: LL at decode", {"NCCL_PROTO": "LL"}, "LL where NCCL's model picks Simple at the decode size")
    return Finding("simple-at-decode", sentence, quote, _TUNING, cost, (fix,))


def _shm_finding(machine: NcclMachine, level: tuple[str, list[tuple[int, int]], str], fix: FixSet) -> Finding:
    name, pairs, where = level
    shown = ", ".join(f"{a}->{b}" for a, b in pairs[:8]) + (f" and {len(pairs) - 8} more" if len(pairs) > 8 else "")
    peer = next((p for p in machine.peers if (p.src, p.dst) == pairs[0] and p.kind == "SHM"), None)
    quote = peer.line if peer is not None else ""
    lvl = machine.p2p_level
    in_force = (f"the P2P level in force, {lvl.level}, does not reach their path" if lvl.level
                else "the P2P level in force is not known")
    total = len({(p.src, p.dst) for p in machine.peers})
    cost = f"{len(pairs)} of {total} channel peer pairs go through host memory"
    sentence = (f"Ranks {shown} talk over SHM (\"{quote.strip()}\") {where}, because {in_force}: {lvl.reason}; "
                f"{cost}. NCCL_P2P_LEVEL={name} covers their path.")
    return Finding("shm-by-level", sentence, quote, "src/graph/paths.cc, ncclTopoCheckP2p", cost, (fix,))


def _few_channels(machine: NcclMachine, ring: ModelGraph | None, nranks: int, version: NcclVersion | None,
                  prefill: int | None) -> Finding | None:
    if ring is None or ring.nchannels > 2 or machine.fallbacks:
        return None
    per_gpu: dict[str, int] = {}
    for lk in machine.links:
        if lk.kind == "NVL" and lk.src.startswith("GPU"):
            per_gpu[lk.src] = per_gpu.get(lk.src, 0) + 1
    links = max(per_gpu.values(), default=0)
    if links <= ring.nchannels:
        return None
    quote = machine.ring_graph.line if machine.ring_graph is not None else ""
    act = _channels_act(prefill, nranks, ring.nchannels, version)
    cost = (f"the {prefill} B prefill allreduce runs on {ring.nchannels} channel{'s' if ring.nchannels != 1 else ''} where {links} links exist"
            if act else "channels do not act at the night's sizes")
    fixes = (FixSet("fix: channels", {"NCCL_MIN_NCHANNELS": str(min(links, MIN_CHANNELS_FIX) * 2)},
                    "more channels for the prefill allreduce"),) if act else ()
    sentence = (f"NCCL's search found {ring.nchannels} channel{'s' if ring.nchannels != 1 else ''} (\"{quote.strip()}\", {_SEARCH}) on GPUs with "
                f"{links} NVLinks each: {cost}.")
    return Finding("few-channels", sentence, quote, _SEARCH, cost, fixes)


def _right_summary(machine: NcclMachine, ring: ModelGraph | None, nranks: int, version: NcclVersion | None,
                   decode: Sequence[int]) -> str:
    parts = []
    if ring is not None:
        parts.append(f"the ring search found {ring.nchannels} channel{'s' if ring.nchannels != 1 else ''} at {ring.bw_intra_GBps:g} GB/s")
        if decode:
            parts.append(f"NCCL's model picks {_pick_text(_picks(_table(ring, nranks, version), decode))}")
    if machine.peers:
        parts.append("every channel peer pair on " + "/".join(sorted({p.kind for p in machine.peers})))
    body = "; ".join(parts) or "nothing NCCL logged contradicts it"
    return f"NCCL's model of this machine looks right: {body}; the night goes on as planned"
