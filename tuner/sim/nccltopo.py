"""NCCL's GRAPH lines of one rank's init: the topology it detected and the graphs it searched.

Printed under NCCL_DEBUG_SUBSYS=GRAPH (or ALL) at INFO, in init order (src/init.cc
``initTransportsRank``): ``ncclTopoPrint`` (src/graph/topo.cc: the system line, the
``ncclTopoPrintRec`` tree from every CPU, the closing line), then ``ncclTopoCompute`` and
``ncclTopoPrintGraph`` (src/graph/search.cc) for the ring (pattern 4), the tree (pattern 1) and,
with NVLS, pattern 5. A failed search logs "Could not find a path for pattern %d, falling back
to simple order": a WARN (printed whatever the subsystems) up to 2.26, INFO(NCCL_GRAPH) from
2.27. Formats and constants are in ``ncclconst``; the machine comes from the profile: CPU vendor
and model, sockets, the PCIe tree implied by ``gpu_path`` and the GPUs' link bandwidth.
"""

from __future__ import annotations

import dataclasses

from .ncclconst import (
    CPU_CODES,
    FALLBACK_FMT,
    GRAPH_CHANNEL_FMT,
    GRAPH_FMT,
    LOC_BW,
    PATTERN_BALANCED_TREE,
    PATTERN_NVLS,
    PATTERN_RING,
    TOPO_END_LINE,
    TOPO_LINK_FMT,
    TOPO_SYSTEM_FMT,
    fallback_is_warn,
    fallback_warn_src,
    inter_cpu_bw,
    version_tuple,
)
from .ncclenv import Message, info, warn
from .profiles import Profile

__all__ = ["graph_messages", "topology_messages"]

#: pci.device of a PCIe switch (vendor, device, subsystem ids), a Broadcom PEX89000 as printed in
#: tests/fixtures/nccl_logs/nccl-2.21.5-vllm-ray-nvswitch.log; chosen for every simulated switch.
SWITCH_DEVICE = 0x1000C03015D91D25


@dataclasses.dataclass
class _Node:
    kind: str  # GPU, PCI, CPU, NVS (topoNodeTypeStr)
    local_id: int
    extra: str  # the "(...)" after the id
    links: list = dataclasses.field(default_factory=list)  # (type, bw, node), PCI downwards only


def _gpu_bus(rank: int) -> int:
    """busIdToInt64 of a GPU's PCI bus id, as nccllog.bus_id prints it."""
    return (0x18 + 0x10 * rank) << 12


def _build(profile: Profile, n: int) -> tuple[list[_Node], float, float]:
    """(CPU nodes with their links, maxBw, totalBw) of the simulated machine (topo.cc, search.cc
    ``ncclTopoSearchInit``: maxBw = best GPU-to-GPU path bandwidth, totalBw = widest GPU link)."""
    gpu_bw, nvl = profile.gpu_pcie_bw_GBps, profile.nvlink_bw_GBps
    arch, vendor = CPU_CODES[profile.cpu_vendor]
    model = profile.cpu_model if profile.cpu_vendor in ("Intel", "Zhaoxin") else -1
    sockets = max(1, min(profile.sockets, n))
    per = -(-n // sockets)
    nvs = _Node("NVS", 0, "")
    cpus = [_Node("CPU", s, f"({arch}/{vendor}/{model})") for s in range(sockets)]
    for s, cpu in enumerate(cpus):
        ranks = list(range(s * per, min(n, (s + 1) * per)))
        gpus = [_Node("GPU", _gpu_bus(r), f"({r})") for r in ranks]
        for g in gpus:
            if nvl > 0:
                g.links.append(("NVL", nvl, nvs))
        if profile.gpu_path == "PIX":
            groups = [gpus]
        elif profile.gpu_path in ("PXB", "NVL", "NVB"):
            groups = [gpus[i:i + 2] for i in range(0, len(gpus), 2)]
        else:  # PHB and worse: each GPU on a root port of its CPU
            groups = []
            cpu.links += [("PCI", gpu_bw, g) for g in gpus]
        switches = [_Node("PCI", (0x18 + 0x10 * ranks[0] + 0x10 * 2 * i - 3) << 12,
                          f"({SWITCH_DEVICE:x})", [("PCI", gpu_bw, g) for g in grp])
                    for i, grp in enumerate(groups) if grp]
        if profile.gpu_path == "PXB" and switches:  # a switch of switches: several bridges
            top = _Node("PCI", (0x18 + 0x10 * ranks[0] - 6) << 12, f"({SWITCH_DEVICE:x})",
                        [("PCI", gpu_bw, sw) for sw in switches])
            cpu.links.append(("PCI", gpu_bw, top))
        else:
            cpu.links += [("PCI", gpu_bw, sw) for sw in switches]
    sys_bw = inter_cpu_bw(profile.cpu_vendor, profile.cpu_model)
    for cpu in cpus:  # ncclTopoConnectCpus, after the PCI tree; links kept sorted by bw
        cpu.links += [("SYS", sys_bw, other) for other in cpus if other is not cpu]
        cpu.links.sort(key=lambda link: -link[1])
    if n < 2:
        return cpus, LOC_BW, LOC_BW
    best = gpu_bw if per > 1 else min(gpu_bw, sys_bw)
    return cpus, max(best, nvl), max(gpu_bw, nvl)


def _node_id(version: str, node: _Node, remote: bool) -> str:
    """``%lX`` of the id before 2.21; ``%lx-%lx`` after, except the remote end of a non-PCI
    link until 2.22 (topo.cc ``ncclTopoPrintRec`` at v2.20.5-1, v2.22.3-1, v2.23.4-1)."""
    v = version_tuple(version)
    if v < (2, 21, 0) or (remote and v < (2, 23, 0)):
        return f"{node.kind}/{node.local_id:X}"
    return f"{node.kind}/0-{node.local_id:x}"


def _print_rec(node: _Node, offset: int, version: str, out: list[str]) -> None:
    """topo.cc ``ncclTopoPrintRec``: the node at ``offset``, then each link below it."""
    out.append(" " * offset + f"{_node_id(version, node, False)} {node.extra}".rstrip())
    for kind, bw, rem in node.links:
        prefix = " " * offset + TOPO_LINK_FMT.format(kind, bw)
        if kind == "PCI":
            sub: list[str] = []
            _print_rec(rem, len(prefix), version, sub)
            out.append(prefix + sub[0][len(prefix):])
            out.extend(sub[1:])
        else:
            out.append(prefix + _node_id(version, rem, True))


def topology_messages(profile: Profile, version: str, ngpus: int | None = None) -> list[Message]:
    """``ncclTopoPrint`` (src/graph/topo.cc) of a one-node system of ``ngpus`` (default TP)
    GPUs, INFO under GRAPH: the maxBw/totalBw line, each CPU's tree, the closing line."""
    n = ngpus or profile.tp
    cpus, max_bw, total_bw = _build(profile, n)
    lines = [TOPO_SYSTEM_FMT.format(max_bw, total_bw)]
    for cpu in cpus:
        _print_rec(cpu, 0, version, lines)
    lines.append(TOPO_END_LINE)
    return [info(t, "GRAPH") for t in lines]


def _graph(pattern: int, nch: int, bw: float, intra: str, inter: str, same: int,
           n: int) -> list[Message]:
    """``ncclTopoPrintGraph`` (src/graph/search.cc): the summary, then one line per channel."""
    out = [info(GRAPH_FMT.format(pattern, 0, nch, bw, bw, intra, inter, same), "GRAPH")]
    ring = "".join(f" GPU/{r}" for r in range(n))
    out += [info(GRAPH_CHANNEL_FMT.format(c) + ring, "GRAPH") for c in range(nch)]
    return out


def graph_messages(profile: Profile, version: str, ngpus: int | None = None) -> list[Message]:
    """Ring, tree (and NVLS) search results as src/init.cc prints them, each preceded by the
    fallback message where the search failed (WARN ``graph/search.cc:N`` up to 2.26, INFO GRAPH
    from 2.27; src/graph/search.cc ``ncclTopoCompute``). Without a NET the inter type stays
    PATH_PIX and bwInter = bwIntra; the fallback sets both types to SYS and both bws to 0.1."""
    n = ngpus or profile.tp
    nch, bw, intra = profile.ring_graph
    inter = "SYS" if profile.graph_fallback else "PIX"
    same = int(profile.graph_same_channels)
    out: list[Message] = []
    for pattern in (PATTERN_RING, PATTERN_BALANCED_TREE):
        if profile.graph_fallback:
            text = FALLBACK_FMT.format(pattern)
            out.append(warn(text, fallback_warn_src(version)) if fallback_is_warn(version)
                       else info(text, "GRAPH"))
        out += _graph(pattern, nch, bw, intra, inter, same, n)
    if profile.nvls_channels > 0:
        out += _graph(PATTERN_NVLS, profile.nvls_channels, bw, "NVL", "PIX", 0, n)
    return out
