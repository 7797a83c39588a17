"""NCCL's log output: which messages NCCL_DEBUG lets through, their exact line format, and the
init / tuning messages of one rank.

Filtering follows src/debug.cc ``ncclDebugInit``: NCCL_DEBUG is VERSION, WARN, INFO, ABORT or
TRACE (case-insensitive; unset or anything else prints nothing); NCCL_DEBUG_SUBSYS is a comma list
of subsystems (INIT, ENV, TUNING, GRAPH, ALL, ...), ``^`` first negates it, default
INIT,BOOTSTRAP,ENV. Format (``ncclDebugLog``): ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>``;
a WARN starts with an empty line and names ``file:line`` (from 2.26 also a ``[date time]``
stamp); a VERSION-level line is the bare text. Lines printed by the simulator itself start with
``SIM `` instead.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

from .costmodel import TuneModel, hop_transports, select
from .ncclconst import ALGO_UPPER, FUNCS, PROTO_UPPER, PROTOS, shm_via, version_tuple
from .ncclenv import Message, NcclSettings, info
from .ncclnet import NetChoice, net_choice, via
from .ncclstdio import Sink
from .nccltopo import graph_messages, topology_messages
from .profiles import Profile

#: ``ncclDebugLogLevel`` (src/include/nccl_common.h).
LEVELS = {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}
#: Subsystem names accepted by NCCL_DEBUG_SUBSYS (src/debug.cc).
SUBSYSTEMS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "CALL",
              "PROXY", "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS")


class DebugConfig:
    """What NCCL_DEBUG / NCCL_DEBUG_SUBSYS let through: ``level`` (0 = nothing) and ``mask``."""

    def __init__(self, environ: dict):
        text = environ.get("NCCL_DEBUG")
        self.level = 0 if text is None else LEVELS.get(text.upper(), 0)
        subsys = environ.get("NCCL_DEBUG_SUBSYS")
        mask = {"INIT", "BOOTSTRAP", "ENV"}
        if subsys is not None:
            invert = subsys.startswith("^")
            mask = set(SUBSYSTEMS) if invert else set()
            for tok in (t for t in (subsys[1:] if invert else subsys).split(",") if t):
                names = set(SUBSYSTEMS) if tok.upper() == "ALL" else \
                    {tok.upper()} if tok.upper() in SUBSYSTEMS else set()
                mask = mask - names if invert else mask | names
        self.mask = frozenset(mask)

    def wants(self, msg: Message) -> bool:
        """Whether ``msg`` is printed (level, then subsystem mask; ALL matches any mask bit)."""
        if self.level < LEVELS[msg.level]:
            return False
        return bool(self.mask) if "ALL" in msg.subsys else bool(self.mask & set(msg.subsys))

    @property
    def info(self) -> bool:
        """INFO lines are possible (level INFO or above)."""
        return self.level >= LEVELS["INFO"]

    @property
    def tuning(self) -> bool:
        """TUNING lines are printed."""
        return self.info and "TUNING" in self.mask


#: nccl-tune's name for the node a process plays (its local node mode sets it): the host NCCL's
#: lines show, in place of the machine's name.
NODE_VAR = "NCCL_TUNE_NODE"


def host_name() -> str:
    """NCCL's ``getHostName(.., '.')``: the host name up to the first dot; the node's name
    (``NCCL_TUNE_NODE``) when nccl-tune plays several nodes on one machine."""
    return (os.environ.get(NODE_VAR) or socket.gethostname()).split(".")[0]


def body(msg: Message, dev: int, version: str, now: float | None = None) -> tuple[str, str]:
    """(text before ``host:pid:tid ``, text after it) of one formatted message; a VERSION
    message has no prefix and comes back as ("", text)."""
    if msg.level == "VERSION":
        return "", msg.text
    if msg.level == "WARN":
        stamp = ""
        if version_tuple(version) >= (2, 26, 0):  # NCCL_DEBUG_TIMESTAMP_LEVELS defaults to WARN
            stamp = time.strftime("[%Y-%m-%d %H:%M:%S] ", time.localtime(now))
        return "\n" + stamp, f"[{dev}] {msg.src} NCCL WARN {msg.text}"
    return "", f"[{dev}] NCCL INFO {msg.text}"


def format_line(msg: Message, debug: DebugConfig, dev: int, version: str, pid, tid,
                host: str | None = None) -> str | None:
    """The printed line of ``msg`` for a rank (None when NCCL_DEBUG filters it out); ``pid`` and
    ``tid`` may be placeholders a worker process fills in."""
    if not debug.wants(msg):
        return None
    pre, post = body(msg, dev, version)
    if msg.level == "VERSION":
        return post
    return f"{pre}{host or host_name()}:{pid}:{tid} {post}"


def output_plan(environ: dict, debug: DebugConfig, version: str, stdout: str = "line",
                host: str | None = None) -> dict:
    """Where a process's NCCL lines go, as src/debug.cc ``ncclDebugInit`` decides, for
    ``ncclstdio.open_sink``: the NCCL_DEBUG_FILE pattern of ``environ`` (after the NCCL_CONF_FILE
    merge) when NCCL_DEBUG is above VERSION (NCCL opens no file otherwise), line-buffered from
    2.27 and unbuffered before; else stdout, ``stdout`` = ``"line"`` (the simulator's tidy
    whole lines) or ``"block"`` (glibc's 4096-byte blocks on a pipe)."""
    pattern = environ.get("NCCL_DEBUG_FILE") if debug.level > LEVELS["VERSION"] else None
    return {"debug_file": pattern, "line_buffered": version_tuple(version) >= (2, 27, 0),
            "host": host or host_name(), "stdout": stdout}


class NcclLog:
    """Writes NCCL-formatted, vLLM-formatted and ``SIM`` lines to ``stream`` (stderr); NCCL's
    own lines go to ``sink`` instead when one is given (ncclstdio: NCCL_DEBUG_FILE or a
    block-buffered stdout)."""

    def __init__(self, stream=None, dev: int = 0, debug: DebugConfig | None = None,
                 version: str = "2.27.3", sink: Sink | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.host = host_name()
        self.dev = dev
        self.debug = debug or DebugConfig({})
        self.version = version
        self.sink = sink
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        """Write one raw line."""
        with self._lock:
            try:
                self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed by the launcher: keep serving
                pass

    def nccl(self, msg: Message) -> None:
        """Print ``msg`` if NCCL_DEBUG asks for it."""
        text = format_line(msg, self.debug, self.dev, self.version, os.getpid(),
                           threading.get_native_id(), self.host)
        if text is not None:
            self.nccl_line(text)

    def nccl_line(self, text: str) -> None:
        """Write one formatted NCCL message where NCCL writes it (the sink, else the stream)."""
        if self.sink is not None:
            self.sink.write(text)
        else:
            self.line(text)

    def flush_nccl(self) -> None:
        """What a normal exit does to NCCL's buffered output: write it out."""
        if self.sink is not None:
            self.sink.flush()

    def info(self, text: str, *subsys: str) -> None:
        """An INFO message (subsystem ALL unless given)."""
        self.nccl(info(text, *subsys))

    def sim(self, tag: str, payload) -> None:
        """``SIM <TAG> <payload>``; dict/list payloads as compact JSON."""
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        self.line(f"SIM {tag} {payload}".rstrip())


def version_message(profile: Profile, debug: DebugConfig, rank: int) -> Message | None:
    """``showVersion`` (src/init.cc): at INFO and above every rank logs ``NCCL version
    X+cudaY`` as INFO; at VERSION or WARN only rank 0 prints the bare line."""
    text = f"NCCL version {profile.nccl_version}+cuda{profile.cuda_version}"
    if debug.level > LEVELS["WARN"]:
        return info(text)
    if debug.level and rank == 0:
        return Message("VERSION", ("ALL",), text)
    return None


def _cross_hops(profile: Profile, n: int) -> set[int]:
    """Ranks whose ring hop to the next rank crosses sockets (spread evenly)."""
    k = round(profile.cross_fraction * n)
    return {(i + 1) * n // k - 1 for i in range(k)} if k else set()


#: Variables NCCL reads, and so echoes, in ``ncclTopoTuneModel`` (src/graph/tuning.cc: NCCL_PROTO,
#: NCCL_ALGO, NCCL_THREAD_THRESHOLDS with ``ncclGetEnv``, the thread counts as ``NCCL_PARAM``s):
#: after the rings and trees are connected, not where the other echoes come.
TUNING_VARS = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_THREAD_THRESHOLDS", "NCCL_NTHREADS", "NCCL_LL128_NTHREADS")


def split_echoes(messages) -> tuple[list[Message], list[Message]]:
    """(messages of the start of init, echoes of TUNING_VARS that come at tuning time)."""
    late = [m for m in messages if m.text.split(" ", 1)[0] in TUNING_VARS]
    return [m for m in messages if m not in late], late


def node_layout(nranks: int, nodes: int, rank: int) -> tuple[int, int, int]:
    """(node, local rank, ranks on that node) of ``rank`` when ``nranks`` are spread over
    ``nodes`` in blocks, the driver's node first (as vLLM's Ray executor sorts its workers)."""
    nodes = max(1, min(nodes, nranks))
    per = -(-nranks // nodes)
    node = rank // per
    return node, rank - node * per, min(per, nranks - node * per)


def init_messages(profile: Profile, settings: NcclSettings, tm: TuneModel, rank: int,
                  comm_id: int, nodes: int = 1, tuning_echoes=()) -> list[Message]:
    """INFO messages of one rank's ``ncclCommInitRank``, in log order (src/init.cc: first the
    GRAPH lines of nccltopo, ncclTopoPrint and the searched graphs; src/graph/rings.cc, src/transport/p2p.cc and shm.cc, src/transport/generic.cc), with
    ``tuning_echoes`` (split_echoes) where ncclTopoTuneModel logs them; with ``nodes`` > 1 the
    comm line counts nodes and local ranks (node_layout) and the GPU is the local one; the
    transports stay those of one node."""
    n, nch = tm.nranks, tm.nchannels
    node, local, local_n = node_layout(n, nodes, rank)
    if nodes <= 1:
        local, local_n = rank, n
    net = net_choice(profile, settings.raw, node) if profile.gpus_per_node else None
    ngpus = local_n if net is not None else n
    out = list(net.messages) if net is not None else []
    out += topology_messages(profile, settings.version, ngpus) + graph_messages(profile, settings.version, ngpus)
    out += [info(f"comm 0x{comm_id + rank * 0x400:x} rank {rank} nRanks {n} nNodes {max(1, min(nodes, n))} "
                f"localRanks {local_n} localRank {local} MNNVL 0", "INIT")]
    if rank == 0:
        width = len(str(n - 1))
        ring = "".join(f" {r:>{width}}" for r in range(n))
        out += [info(f"Channel {c:02d}/{nch:02d} :{ring}", "INIT") for c in range(nch)]
    trees = "".join(f" [{c}] {rank + 1 if rank + 1 < n else -1}/-1/-1->{rank}->{rank - 1}"
                    for c in range(nch))
    out.append(info(f"Trees{trees}", "INIT"))
    chunk = 524288 if profile.link == "nvlink" else 131072  # P2P_NVL / P2P_PCI_CHUNKSIZE
    if chunk * 8 > settings.buffsize:
        chunk = settings.buffsize // 8
    out.append(info(f"P2P Chunksize set to {chunk}", "INIT"))
    crossing = rank in _cross_hops(profile, n)
    kinds = [t for s, t in hop_transports(profile, settings, n)]
    hop = kinds[-1] if (crossing and len(kinds) > 1) else kinds[0]
    nxt = (rank + 1) % n
    if net is not None:
        out += _net_channels(net, n, nodes, rank, nch)
        hop = "" if node_layout(n, nodes, nxt)[0] != node else hop
    read = "/read" if profile.link == "nvlink" and profile.compute_capability >= 80 else ""
    for c in range(nch if hop else 0):
        if hop == "P2P":
            kind = "CUMEM" if settings.cumem else "IPC"
            text = f"Channel {c:02d}/0 : {rank}[{rank}] -> {nxt}[{nxt}] via P2P/{kind}{read}"
            out.append(info(text, "INIT", "P2P"))
        elif hop == "SHM":
            text = f"Channel {c:02d} : {rank}[{rank}] -> {nxt}[{nxt}] via {shm_via(settings.version)}"
            out.append(info(text, "INIT", "SHM"))
        else:
            text = f"Channel {c:02d}/0 : {rank}[{rank}] -> {nxt}[{nxt}] [send] via NET/Socket/0"
            out.append(info(text, "INIT", "NET"))
    gdr = int(net is not None and net.gdr)
    suffix = f", use ring PXN 0 GDR {gdr}" if version_tuple(settings.version) >= (2, 24, 0) else ""
    out += [info(f"Connected all rings{suffix}", "INIT"), info("Connected all trees", "INIT")]
    out += list(tuning_echoes) + list(tm.messages)
    t = tm.thresholds
    out.append(info(f"threadThresholds {t['Tree']['LL']}/{t['Tree']['LL128']}/{t['Tree']['Simple']} | "
                    f"{t['Ring']['LL']}/{t['Ring']['LL128']}/{t['Ring']['Simple']} | "
                    f"{t['CollNetDirect']['Simple']} | {t['CollNetChain']['Simple']}", "INIT"))
    p2p = 1 << (nch - 1).bit_length()  # pow2Up (src/graph/paths.cc ncclTopoComputeP2pChannels)
    per_peer = p2p if profile.link == "nvlink" else min(2, p2p)
    out.append(info(f"{nch} coll channels, {nch} collnet channels, {profile.nvls_channels} nvls "
                    f"channels, {p2p} p2p channels, {per_peer} p2p channels per peer", "INIT"))
    out.append(info(f"ncclCommInitRank comm 0x{comm_id + rank * 0x400:x} rank {rank} nranks {n} "
                    f"cudaDev {local} nvmlDev {local} busId {bus_id(local)} commId "
                    f"0x{comm_id ^ 0x5EED5EED5EED:x} - Init COMPLETE", "INIT"))
    return out


def _net_channels(net: NetChoice, n: int, nodes: int, rank: int, nch: int) -> list[Message]:
    """A rank's ring connections that leave its node (src/transport/net.cc): the ``[receive]``
    lines from the previous rank and the ``[send]`` lines to the next, each channel on its NIC
    (reallogs 04: ``Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0``)."""
    node = node_layout(n, nodes, rank)[0]
    prev, nxt = (rank - 1) % n, (rank + 1) % n
    dev = node_layout(n, nodes, rank)[1]
    out = []
    if node_layout(n, nodes, prev)[0] != node:
        pdev = node_layout(n, nodes, prev)[1]
        out += [info(f"Channel {c:02d}/0 : {prev}[{pdev}] -> {rank}[{dev}] [receive] via {via(net, c)}",
                     "INIT", "NET") for c in range(nch)]
    if node_layout(n, nodes, nxt)[0] != node:
        ndev = node_layout(n, nodes, nxt)[1]
        out += [info(f"Channel {c:02d}/0 : {rank}[{dev}] -> {nxt}[{ndev}] [send] via {via(net, c)}",
                     "INIT", "NET") for c in range(nch)]
    return out


def bus_id(rank: int) -> str:
    """A PCI bus id for a GPU, as NCCL prints it (``%lx``)."""
    return f"{0x18 + 0x10 * rank:x}000"


def matrix_message(settings: NcclSettings, algo_names: tuple) -> Message | None:
    """``Enabled NCCL Func/Proto/Algo Matrix`` (src/graph/tuning.cc, 2.24+, rank 0, when
    NCCL_ALGO or NCCL_PROTO is set): one message spanning several lines."""
    if version_tuple(settings.version) < (2, 24, 0):
        return None
    if "NCCL_ALGO" not in settings.raw and "NCCL_PROTO" not in settings.raw:
        return None
    sel = settings.selection
    text = "\n     Function | " + "".join(f"{p:>8s}  " for p in PROTOS) + " | "
    text += "".join(f"{a:>13s}  " for a in algo_names) + "\n"
    for f in FUNCS:
        text += f"{f:>13s} | " + "".join(f"{sel.proto_state(p, f):8d}  " for p in PROTOS) + " | "
        text += "".join(f"{int(sel.algo_on(a, f)):13d}  " for a in algo_names) + "\n"
    return info(f"Enabled NCCL Func/Proto/Algo Matrix:{text}", "ENV")


def tuning_table(tm: TuneModel) -> list[Message]:
    """The TUNING table of ``ncclTopoTuneModel`` (rank 0): blocks of three algorithms; per
    function ``latency/bandwidth`` for each protocol."""
    out = []
    names = tm.algos
    for block in range((len(names) + 2) // 3):
        cols = names[block * 3:block * 3 + 3]
        out.append(info("  Algorithm   |" + "".join(f" {'':>14s}   {a:>14s}   {'':>14s} |" for a in cols),
                        "TUNING"))
        # tuning.cc prints the protocol header for three algorithms even in a short last block
        out.append(info("  Protocol    |" + "".join(f" {p:>14s} |" for _ in range(3) for p in PROTOS),
                        "TUNING"))
        out.append(info(" Max NThreads |" + "".join(f" {tm.max_threads[a][p]:14d} |" for a in cols
                                                    for p in PROTOS), "TUNING"))
        for f in FUNCS:
            row = "".join(f"{tm.latency[f][a][p]:8.1f}/{tm.bandwidth[f][a][p]:6.1f} |"
                          for a in cols for p in PROTOS)
            out.append(info(f"{f:>13s} |{row}", "TUNING"))
    return out


def op_message(tm: TuneModel, version: str, nbytes: int, nchannels: int | None = None,
               func: str = "AllReduce") -> Message | None:
    """The per-operation TUNING line of rank 0 for one collective of ``nbytes``, in the format
    of ``version`` (src/enqueue.cc): 2.24+ ``AllReduce: N Bytes -> Algo RING proto LL
    channel{Lo..Hi}={0..c}``; 2.23 ``AllReduce: N Bytes -> Algo 1 proto 0 time T``; 2.21-2.22
    without the function; none before 2.21. None when nothing is available."""
    choice = select(tm, nbytes, func)
    if choice is None:
        return None
    algo, proto, t = choice
    v = version_tuple(version)
    if v >= (2, 24, 0):
        hi = (nchannels or 1) - 1
        text = (f"{func}: {nbytes} Bytes -> Algo {ALGO_UPPER[algo]} proto {PROTO_UPPER[proto]} "
                f"channel{{Lo..Hi}}={{0..{hi}}}")
    elif v >= (2, 21, 0):
        idx = f"{nbytes} Bytes -> Algo {tm.algos.index(algo)} proto {PROTOS.index(proto)} time {t:f}"
        text = f"{func}: {idx}" if v >= (2, 23, 0) else idx
    else:
        return None
    return info(text, "TUNING")
