"""NCCL's network across nodes, read from its NET lines: what each host found, and how each pair
of hosts is connected.

:func:`read_network` turns a :class:`~tuner.nccl.log.ParsedLog` into a :class:`NetworkView`: per
host the IB/RoCE devices NCCL listed (``NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB ...``) or
not (``NET/IB : No device found.``), its socket devices, the network it used (``Using network IB``),
GPU Direct RDMA per HCA and the RoCE GID warnings (the spellings: :data:`tuner.nccl.log.NET_LINE`);
per pair of hosts the channel transports between them (``Channel 00/0 : 0[0] -> 1[0] [receive] via
NET/IB/0/GDRDMA``, src/transport/net.cc). A line's host is its prefix's (``host:pid:tid``); the other
end's host is the one whose process stated that rank (``comm ... rank R nRanks N``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.nccl.log import LINK, ParsedLog

__all__ = ["CrossPair", "HostNet", "NetworkView", "read_network", "transport_words"]

_IB_USING = re.compile(r"^NET/IB : Using(?P<devs>(?: \[\d+\]\S+)*)")
_IB_DEV = re.compile(r"\[\d+\](?P<dev>\S+)")
_SOCK_USING = re.compile(r"^NET/Socket : Using(?P<devs>(?: \[\d+\]\S+)*)")
_USING = re.compile(r"^(?:Using network|Assigned NET plugin) (?P<net>.+?)(?: to comm)?$")
_GDR_HCA = re.compile(r"^NET/\S+ : GPU Direct RDMA (?P<on>Enabled|Disabled) for HCA")
_GDR_GPU = re.compile(r"^GPU Direct RDMA (?P<on>Enabled|Disabled) for GPU")
_GID = re.compile(r"^(?:Call to ibv_(?:modify_qp|query_gid) failed|NET/IB : \S+:\d+ GID table changed)")
#: Words of a NET/IB warning about the RoCE GID (its index, type or RoCE version: ncclIbGetGidIndex,
#: ncclIbRoceGetVersionNum, ncclIbExtractLocalSubnet... in src/transport/net_ib*).
_GID_WORDS = re.compile(r"(?i)gid|roce ?v\d|roce ?version|rocegetversion")
#: Where a cross-node pair's peer is on a host no line of this log named.
ELSEWHERE = "another host"


@dataclass(frozen=True)
class HostNet:
    """What one host's processes said about the network (each tuple: NCCL's lines, quoted whole).

    ``ib_devices`` the IB/RoCE devices listed (``rocep1s0f1:1/RoCE``); ``ib_line`` that line;
    ``no_ib`` the ``NET/IB : No device found.`` line (or ``No IP interface found.``, or ``Failed to
    open libibverbs.so[.1]``: no verbs library, so no IB at all); ``sockets``
    the socket devices listed; ``network`` the network NCCL used (``IB``, ``Socket``, a plugin's
    name; "" not logged) with ``network_line``; ``gdr_off``/``gdr_on`` GPU Direct RDMA lines;
    ``gid`` the RoCE GID warnings; ``ib_warnings`` every other warning of NCCL's IB transport
    (why it may have left IB for sockets)."""

    host: str
    ib_devices: tuple[str, ...] = ()
    ib_line: str = ""
    no_ib: str = ""
    sockets: tuple[str, ...] = ()
    network: str = ""
    network_line: str = ""
    gdr_off: tuple[str, ...] = ()
    gdr_on: tuple[str, ...] = ()
    gid: tuple[str, ...] = ()
    ib_warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class CrossPair:
    """The connections from host ``src`` to host ``dst`` (``dst`` may be :data:`ELSEWHERE`):
    ``via`` every distinct transport (``NET/IB/0/GDRDMA``), ``channels`` how many channel lines,
    ``line`` one of them whole."""

    src: str
    dst: str
    via: tuple[str, ...]
    channels: int
    line: str

    @property
    def words(self) -> str:
        """``NET/IB with GDRDMA``, ``NET/Socket``, ... (:func:`transport_words`), joined by ``and``."""
        return " and ".join(dict.fromkeys(transport_words(v) for v in self.via))

    @property
    def sockets(self) -> bool:
        """Whether any of its channels runs over NCCL's socket transport."""
        return any(v.startswith("NET/Socket") for v in self.via)

    @property
    def ib_without_gdr(self) -> bool:
        """Whether a channel runs over NET/IB (or a plugin) without GPU Direct RDMA."""
        return any(v.startswith("NET/") and not v.startswith("NET/Socket") and "/GDRDMA" not in v for v in self.via)


def transport_words(via: str) -> str:
    """A channel's transport said plainly: ``NET/IB/0/GDRDMA`` -> ``NET/IB with GDRDMA``,
    ``NET/IB/1`` -> ``NET/IB without GDRDMA``, ``NET/Socket/0`` -> ``NET/Socket``,
    ``NET/NCCL RDMA Plugin v6/0/GDRDMA/Shared`` -> ``NET/NCCL RDMA Plugin v6 with GDRDMA``;
    another kind (``P2P/CUMEM``) as its first word. The format is src/transport/net.cc's
    ``"via NET/%s/%d%s%s"`` (name, device, ``/GDRDMA``, ``/Shared``)."""
    parts = via.split("/")
    if parts[0] != "NET" or len(parts) < 2:
        return parts[0]
    if parts[1] == "Socket":
        return "NET/Socket"
    return f"NET/{parts[1]} {'with' if 'GDRDMA' in parts[2:] else 'without'} GDRDMA"


@dataclass(frozen=True)
class NetworkView:
    """The network one log shows: ``hosts`` (every host that logged a NET line or a rank, sorted)
    and ``pairs`` (the cross-node host pairs, sorted), ``nnodes`` as NCCL logged it (None: not)."""

    hosts: tuple[HostNet, ...]
    pairs: tuple[CrossPair, ...]
    nnodes: int | None = None

    @property
    def across_nodes(self) -> bool:
        """Whether this log shows more than one node (NCCL's nNodes, or cross-node pairs)."""
        return bool(self.pairs) or (self.nnodes or 1) > 1 or len(self.hosts) > 1

    def host(self, name: str) -> HostNet | None:
        """The :class:`HostNet` of ``name``, or None."""
        return next((h for h in self.hosts if h.host == name), None)


def read_network(parsed: ParsedLog) -> NetworkView:
    """The :class:`NetworkView` of ``parsed`` (empty parts where NCCL did not log them). Never raises."""
    by_host: dict[str, dict[str, list[str]]] = {}
    for process, lines in parsed.net_lines.items():
        host = process.rsplit(":", 1)[0] if process != "?" else "?"
        facts = by_host.setdefault(host, {})
        for ln in lines:
            msg = ln.message.strip()
            kind = _kind(msg)
            if kind == "other" and ln.level == "WARN" and msg.startswith("NET/IB"):
                kind = "gid" if _GID_WORDS.search(msg) else "ib_warn"
            facts.setdefault(kind, []).append(msg)
    hosts = [_host(name, facts) for name, facts in sorted(by_host.items())]
    named = {h.host for h in hosts}
    hosts += [HostNet(h) for h in sorted(parsed.hosts - named)]
    return NetworkView(tuple(sorted(hosts, key=lambda h: h.host)), _pairs(parsed), parsed.nnodes)


def _kind(msg: str) -> str:
    for kind, rx in (("ib", _IB_USING), ("sock", _SOCK_USING), ("net", _USING), ("gdr_hca", _GDR_HCA),
                     ("gdr_gpu", _GDR_GPU), ("gid", _GID)):
        if rx.match(msg):
            return kind
    return "no_ib" if msg.startswith(("NET/IB : No", "Failed to open libibverbs")) else "other"


def _devices(lines: list[str], rx: re.Pattern[str]) -> tuple[str, ...]:
    """The ``[i]name`` devices of every ``Using`` line ``rx`` reads, each once, in order."""
    found: dict[str, None] = {}
    for line in lines:
        if m := rx.match(line):
            found.update(dict.fromkeys(_IB_DEV.findall(m.group("devs"))))
    return tuple(found)


def _host(name: str, facts: dict[str, list[str]]) -> HostNet:
    ib, nets = facts.get("ib", []), facts.get("net", [])
    used = _USING.match(nets[-1]) if nets else None
    gdr = [*facts.get("gdr_hca", []), *facts.get("gdr_gpu", [])]
    return HostNet(name, _devices(ib, _IB_USING), ib[0] if ib else "", next(iter(facts.get("no_ib", [])), ""),
                   _devices(facts.get("sock", []), _SOCK_USING), used.group("net") if used else "",
                   nets[-1] if nets else "", tuple(g for g in gdr if "Disabled" in g),
                   tuple(g for g in gdr if "Enabled" in g), tuple(facts.get("gid", [])),
                   tuple(facts.get("ib_warn", [])))


def _rank_hosts(parsed: ParsedLog) -> dict[int, str]:
    """Rank -> host, from each process's ``comm ... rank R nRanks N`` lines of the largest communicator."""
    out: dict[int, str] = {}
    for process, pairs in parsed.comm_ranks.items():
        if process == "?":
            continue
        for rank, n in pairs:
            if parsed.nranks is None or n == parsed.nranks:
                out.setdefault(rank, process.rsplit(":", 1)[0])
    return out


@dataclass
class _Seen:
    via: dict[str, None]
    channels: int
    line: str


def _pairs(parsed: ParsedLog) -> tuple[CrossPair, ...]:
    """Every channel line whose two ends are on different hosts, per (sending host, receiving host).
    ``[receive]`` lines are logged by the receiver, the others by the sender (src/transport/*.cc)."""
    hosts = _rank_hosts(parsed)
    found: dict[tuple[str, str], _Seen] = {}
    for lines in parsed.peer_lines.values():
        for ln in lines:
            m = LINK.match(ln.message.strip())
            if m is None or ln.host is None:
                continue
            receive = m.group("dir") == "receive"
            via = m.group("via")
            mine, other = (int(m.group("dst")), int(m.group("src"))) if receive else (int(m.group("src")), int(m.group("dst")))
            here = hosts.get(mine, ln.host)
            there = hosts.get(other) or (ELSEWHERE if via.startswith("NET/") else None)
            if there is None or there == here:
                continue
            seen = found.setdefault((there, here) if receive else (here, there), _Seen({}, 0, ln.message.strip()))
            seen.via[via] = None
            seen.channels += 1
    return tuple(CrossPair(s, d, tuple(e.via), e.channels, e.line) for (s, d), e in sorted(found.items()))
