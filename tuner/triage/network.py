"""The network across nodes, judged from NCCL's NET lines before trial 1.

:func:`network_triage` reads a :class:`tuner.nccl.NetworkView` (what each host's NCCL found, how
each pair of hosts is connected) and says, one plain sentence each, quoting NCCL's line:

* ``net-sockets``: cross-node pairs run over NCCL's socket transport (``via NET/Socket/0``), with
  the likely cause read from the lines: ``NET/IB : No device found.`` (no IB/RoCE device visible:
  in a container the device was not passed in), IB devices listed yet ``Using network Socket``
  (NCCL_IB_DISABLE or NCCL_NET=Socket set where the processes start), NCCL_IB_DISABLE echoed, a
  warning of NCCL's IB transport quoted as it is (a RoCE GID it could not read: the GID finding's
  fix), or no line that says why. The fix is the machine's (a container flag, a variable to remove), so no
  set is proposed: NCCL_IB_DISABLE=0 does what unset does, and the baseline already runs unset.
* ``net-no-gdr``: pairs over NET/IB without GPU Direct RDMA (no ``/GDRDMA`` in the transport), the
  cause from ``NET/IB : GPU Direct RDMA Disabled for HCA`` (src/graph/topo.cc: the NIC cannot reach
  GPU memory: nvidia-peermem not loaded, no DMA-BUF) or ``GPU Direct RDMA Disabled for GPU ...
  (distance X > Y)`` (src/graph/paths.cc, ncclTopoCheckGdr: NCCL_NET_GDR_LEVEL or the PCI distance).
  Said, not fixed by a set: on GB10 (DGX Spark) GDR is off by design (NCCL_NET_GDR_LEVEL=0,
  timothystewart6/vllm-gb10 PR #24).
* ``net-gid``: a RoCE GID warning (``Call to ibv_modify_qp failed ...``, ``Call to ibv_query_gid
  failed ...``, ``NET/IB : dev:port GID table changed``, any NET/IB warning about the GID or the RoCE
  version such as ``open failed in ncclIbRoceGetVersionNum``; src/misc/ibvwrap.cc, src/transport/net_ib).
  Fix: NCCL_IB_GID_INDEX=3 (:data:`NET_FIX_VALUES`).

The transport of every cross-node pair is said too (:attr:`NetTriage.pairs`), one line per pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tuner.nccl import CrossPair, NetworkView
from tuner.triage.model import Finding, FixSet, Triage

__all__ = ["NET_FIX_VALUES", "NetTriage", "network_triage", "with_network"]

#: The values each NET finding's fix sets (the dry run's bound counts them with the others').
NET_FIX_VALUES: dict[str, dict[str, frozenset[str]]] = {"net-gid": {"NCCL_IB_GID_INDEX": frozenset({"3"})}}
_GID_DOC = ("NCCL user guide, troubleshooting/networking_troubleshooting.rst, 'Troubleshooting NCCL errors' (the RoCE "
            "GID index); docs/NCCL.md, \"Network settings across nodes\" (GB10 over RoCE: NCCL_IB_GID_INDEX=3)")
#: The public figures for DGX Spark over RoCE, cited in full there (timothystewart6's GB10 notes, PR #24).
_SPARK = 'docs/NCCL.md, "Network settings across nodes"'
_GDR_DOC = "NCCL user guide, troubleshooting/gpu_troubleshooting.rst, 'GPU Direct RDMA' (nvidia-peermem, DMA-BUF)"
_CONTAINER = ("docker run --device=/dev/infiniband (or --privileged, plus --cap-add=IPC_LOCK and --ulimit memlock=-1); "
              "on Kubernetes an RDMA device plugin (Mellanox/k8s-rdma-shared-dev-plugin) and its resource in the pod")


@dataclass(frozen=True)
class NetTriage:
    """``findings`` (kinds ``net-sockets``, ``net-no-gdr``, ``net-gid``) and ``pairs``: one line per
    cross-node pair of hosts, its transport said plainly (empty on one node)."""

    findings: tuple[Finding, ...]
    pairs: tuple[str, ...]


def _pair_line(pair: CrossPair) -> str:
    ch = f"{pair.channels} channel line{'s' if pair.channels != 1 else ''}"
    return f"network: {pair.src} -> {pair.dst} via {pair.words} ({ch}, e.g. '{pair.line}')"


def network_triage(view: NetworkView, echoes: Mapping[str, Mapping[str, str]] | None = None) -> NetTriage:
    """Judge ``view``; ``echoes`` NCCL's echoes (``ParsedLog.echoes``: name -> process -> value) say
    whether NCCL_IB_DISABLE was set. Nothing to say on one node. Never raises."""
    if not view.across_nodes:
        return NetTriage((), ())
    echoes = echoes or {}
    findings = [f for f in (_sockets(view, echoes), _no_gdr(view), _gid(view)) if f is not None]
    return NetTriage(tuple(findings), tuple(_pair_line(p) for p in view.pairs))


def _hosts(names: list[str]) -> str:
    return ", ".join(sorted(set(names))) or "?"


def _sockets(view: NetworkView, echoes: Mapping[str, Mapping[str, str]]) -> Finding | None:
    pairs = [p for p in view.pairs if p.sockets]
    chose = [h for h in view.hosts if h.network == "Socket"]
    if not pairs and not chose:
        return None
    where = (f"{', '.join(f'{p.src} -> {p.dst}' for p in pairs)} run over NCCL's socket transport" if pairs
             else f"NCCL on {_hosts([h.host for h in chose])} used the socket network")
    quote = pairs[0].line if pairs else chose[0].network_line
    disabled = {p: v for p, v in echoes.get("NCCL_IB_DISABLE", {}).items() if v.strip() not in ("", "0")}
    none = [h for h in view.hosts if h.no_ib]
    listed = [h for h in view.hosts if h.ib_devices]
    if disabled:
        cause = (f"NCCL_IB_DISABLE was set ({', '.join(f'{p}={v}' for p, v in sorted(disabled.items()))}), so NCCL never "
                 "opened its IB devices (src/transport/net_ib/init.cc, ncclIbInitDevices). Fix: remove it where the "
                 "processes start (the image's ENV, the node's shell, /etc/nccl.conf), or set NCCL_IB_DISABLE=0 in server.env")
        quote = f"NCCL_IB_DISABLE set by environment to {next(iter(disabled.values()))}."
    elif verbs := [h for h in none if h.no_ib.startswith("Failed to open libibverbs")]:
        cause = (f"NCCL could not load libibverbs on {_hosts([h.host for h in verbs])} ('{verbs[0].no_ib}', "
                 "src/misc/ibvsymbols.cc), so it never looked for an IB/RoCE device. Fix: rdma-core (libibverbs) in "
                 f"the image or on the host, and the RDMA devices passed in: {_CONTAINER}")
        quote = verbs[0].no_ib
    elif none:
        cause = (f"NCCL sees no IB/RoCE device on {_hosts([h.host for h in none])} ('{none[0].no_ib}', "
                 "src/transport/net_ib/init.cc, ncclIbInitDevices): in a container the RDMA device was not passed in. "
                 f"Fix: {_CONTAINER}; on bare metal, the RDMA driver and rdma-core (ibv_devices lists the devices)")
        quote = none[0].no_ib
    elif warned := [h for h in view.hosts if h.gid or h.ib_warnings]:
        said = (warned[0].gid or warned[0].ib_warnings)[0]
        gid = any(h.gid for h in warned)
        cause = (f"NCCL's IB transport failed on {_hosts([h.host for h in warned])} ('{said}', src/transport/net_ib) and "
                 "NCCL fell back to sockets"
                 + (": it could not read or use the RoCE GID it picked (in an unprivileged container the port's "
                    "gid_attrs in sysfs may not be readable). Fix: NCCL_IB_GID_INDEX names the RoCE v2 GID (relaunched "
                    f"first, see the GID finding), or run the container with the RDMA device and its sysfs ({_CONTAINER})"
                    if gid else f". Fix: what the warning names; in a container, the RDMA device passed in ({_CONTAINER})"))
        quote = said
    elif listed:
        cause = (f"NCCL listed IB devices on {_hosts([h.host for h in listed])} ('{listed[0].ib_line}') yet used "
                 "sockets: NCCL_IB_DISABLE or NCCL_NET=Socket is set where the processes start (src/init.cc, "
                 "'Using network %s'). Fix: remove it there (the image's ENV, the node's shell, /etc/nccl.conf)")
    else:
        cause = ("NCCL's lines do not say why (no NET/IB line: NCCL_DEBUG_SUBSYS needs INIT or NET). Check "
                 "ibv_devices on each node and, in a container, that the RDMA device is passed in "
                 f"({_CONTAINER})")
    sentence = (f"Network fallback to sockets: {where}, not over IB/RoCE (on 2x DGX Spark over 200G RoCE the socket fallback "
                f"cut throughput about 4x, and an unprivileged container decoded ~24 against ~40 tok/s: {_SPARK}). Likely cause: {cause}.")
    return Finding("net-sockets", sentence, quote, "src/transport/net.cc, src/transport/net_socket.cc",
                   "every cross-node allreduce step over TCP sockets")


def _no_gdr(view: NetworkView) -> Finding | None:
    pairs = [p for p in view.pairs if p.ib_without_gdr]
    if not pairs:
        return None
    off = [line for h in view.hosts for line in h.gdr_off]
    if any(" for HCA " in line and line.startswith("NET/") for line in off):
        why = (f"the NIC cannot reach GPU memory ('{next(ln for ln in off if ln.startswith('NET/'))}', src/graph/topo.cc): "
               "the nvidia-peermem module is not loaded and DMA-BUF is not available. Fix: sudo modprobe nvidia-peermem, "
               f"or a kernel and open GPU driver with DMA-BUF ({_GDR_DOC}); on GB10 (DGX Spark) GDR is off by design "
               f"(NCCL_NET_GDR_LEVEL=0: {_SPARK})")
    elif off:
        why = (f"NCCL_NET_GDR_LEVEL or the GPU-NIC distance turned it off ('{off[0]}', src/graph/paths.cc, "
               "ncclTopoCheckGdr)")
    else:
        why = "NCCL's lines do not say why (its GPU Direct RDMA lines are INFO up to 2.29, TRACE from 2.30.7)"
    sentence = (f"No GPU Direct RDMA: {', '.join(f'{p.src} -> {p.dst}' for p in pairs)} run over {pairs[0].words}, "
                f"so every message is staged through host memory. Likely cause: {why}.")
    return Finding("net-no-gdr", sentence, pairs[0].line, "src/transport/net.cc; src/graph/paths.cc, ncclTopoCheckGdr",
                   "a host-memory copy on each cross-node step")


def _gid(view: NetworkView) -> Finding | None:
    hosts = [h for h in view.hosts if h.gid]
    if not hosts:
        return None
    quote = hosts[0].gid[0]
    fix = FixSet("fix: roce gid", {"NCCL_IB_GID_INDEX": "3"},
                 "NCCL_IB_GID_INDEX=3: RoCE v2 over IPv4 on a typical ConnectX port (show_gids lists the right one)")
    sentence = (f"RoCE GID problem on {_hosts([h.host for h in hosts])}: '{quote}' (src/misc/ibvwrap.cc; "
                "src/transport/net_ib, ncclIbGetGidIndex). NCCL 2.21+ picks the GID itself; where its pick fails, "
                f"NCCL_IB_GID_INDEX names the RoCE v2 GID ({_GID_DOC}). Relaunched first: NCCL_IB_GID_INDEX=3.")
    return Finding("net-gid", sentence, quote, "src/transport/net_ib/connect.cc, ncclIbGetGidIndex",
                   "connections fail or fall back", (fix,))


def with_network(judged: Triage, net: NetTriage) -> Triage:
    """``judged`` (NCCL's model of one node) with the network's findings after its own and the
    pairs' lines; its summary says the network's findings when there are any."""
    if not net.findings and not net.pairs:
        return judged
    summary = judged.summary
    if net.findings:
        n = len(net.findings)
        fixes = any(f.fixes for f in net.findings)
        if fixes:  # the network's fixes change the plan: not "as planned"
            summary = summary.replace("; the night goes on as planned", "")
        first = "; its fixes are relaunched first" if fixes else ""
        summary = (f"{summary}; the network across nodes: {n} finding{'s' if n != 1 else ''}{first}" if judged.findings
                   else f"The network across nodes may cost speed ({n} finding{'s' if n != 1 else ''}{first}); "
                        f"NCCL's model of one node: {summary}")
    return Triage((*judged.findings, *net.findings), judged.model_right and not net.findings, summary, judged.notes,
                  (*judged.network, *net.pairs))
