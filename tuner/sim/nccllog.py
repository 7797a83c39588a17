"""NCCL-style log lines on stderr (REFERENCE.md section 3; NCCL src/debug.cc).

Format: ``<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <message>`` (WARN likewise). The simulator
always prints the ``set by environment`` lines and every WARN (so tools can parse them without
setting NCCL_DEBUG); the communicator init lines (``comm 0x...``, ``Channel 00/04 : ...``,
``N coll channels, ...``, ``Init COMPLETE``) need NCCL_DEBUG=INFO or TRACE, and the tuning table
plus the per-operation line also need TUNING (or ALL) in NCCL_DEBUG_SUBSYS, as in NCCL.
Machine-readable simulator lines start with ``SIM `` instead.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

from .costmodel import CostModel, comm_channels, nccl_model, hop_transports
from .ncclenv import ALGOS, PROTOS
from .profiles import Profile


class NcclLog:
    """Writes NCCL-formatted and ``SIM`` lines to ``stream`` (stderr), flushed per line."""

    def __init__(self, stream=None, dev: int = 0):
        self.stream = stream if stream is not None else sys.stderr
        self.host = socket.gethostname().split(".")[0]
        self.dev = dev
        self._lock = threading.Lock()

    def _prefix(self) -> str:
        return f"{self.host}:{os.getpid()}:{threading.get_native_id()} [{self.dev}]"

    def line(self, text: str) -> None:
        """Write one raw line."""
        with self._lock:
            try:
                self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed by the launcher: keep serving
                pass

    def info(self, msg: str) -> None:
        """``... NCCL INFO msg``."""
        self.line(f"{self._prefix()} NCCL INFO {msg}")

    def warn(self, msg: str) -> None:
        """``... NCCL WARN msg``."""
        self.line(f"{self._prefix()} NCCL WARN {msg}")

    def sim(self, tag: str, payload) -> None:
        """``SIM <TAG> <payload>``; dict/list payloads as compact JSON."""
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        self.line(f"SIM {tag} {payload}".rstrip())


def debug_flags(environ: dict) -> tuple[bool, bool]:
    """(init lines wanted, tuning lines wanted) from NCCL_DEBUG / NCCL_DEBUG_SUBSYS."""
    level = environ.get("NCCL_DEBUG", "").strip().upper()
    info = level in ("INFO", "TRACE")
    subsys = environ.get("NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV").upper()
    negated = subsys.startswith("^")
    names = {s.strip() for s in subsys.lstrip("^").split(",")}
    tuning = ("TUNING" in names or "ALL" in names) != negated
    return info, info and tuning


def init_lines(profile: Profile, model: CostModel, comm_id: int) -> list[str]:
    """The INFO messages of a successful communicator init on rank 0 (src/init.cc)."""
    s = model.settings
    n = profile.tp
    nch = comm_channels(profile, s)
    ring = " ".join(str(r) for r in range(n))
    lines = [f"NCCL version {profile.nccl_version}+cuda12.9 (simulated)",
             f"comm 0x{comm_id:x} rank 0 nRanks {n} nNodes 1 localRanks {n} localRank 0 MNNVL 0"]
    lines += [f"Channel {c:02d}/{nch:02d} : {ring}" for c in range(nch)]
    transports = {t for f, t in hop_transports(profile, s) if f > 0}
    via = {"P2P": "P2P/CUMEM/read" if profile.link == "nvlink" else "P2P/CUMEM",
           "SHM": "SHM/direct/direct", "NET": "NET/Socket/0"}
    for c in range(min(nch, 2)):
        for t in sorted(transports):
            lines.append(f"Channel {c:02d}/0 : 0[0] -> 1[1] via {via[t]}")
    lines += ["Connected all rings", "Connected all trees",
              f"{nch} coll channels, 0 collnet channels, 0 nvls channels, {nch} p2p channels, "
              "2 p2p channels per peer",
              f"ncclCommInitRank comm 0x{comm_id:x} rank 0 nranks {n} cudaDev 0 nvmlDev 0 "
              f"busId 1000 commId 0x{comm_id ^ 0x5eed5eed:x} - Init COMPLETE"]
    return lines


def tuning_lines(profile: Profile, model: CostModel) -> list[str]:
    """The TUNING table (latency us / algbw GB/s per algorithm x protocol) and the per-op line
    for one decode allreduce (src/graph/tuning.cc, src/enqueue.cc; format varies by version)."""
    s = model.settings
    nbytes = profile.decode_bytes
    table = {(e.algo, e.proto): e for e in nccl_model(profile, s, nbytes)}
    algos = [a for a in ALGOS if a in ("Tree", "Ring")]
    head = "Latency/AlgBw |" + "".join(f" {a:>7s}/{p:>6s} |" for a in algos for p in PROTOS)
    row = "    AllReduce |"
    for a in algos:
        for p in PROTOS:
            e = table.get((a, p))
            row += f"{e.latency_us:8.1f}/{e.algbw_GBps:6.1f} |" if e else f"{0.0:8.1f}/{0.0:6.1f} |"
    lines = [head, row]
    cost = model.allreduce(nbytes)
    if cost.via == "nccl":
        lines.append(f"AllReduce: {nbytes} Bytes -> Algo {cost.algo.upper()} proto {cost.proto} "
                     f"channel{{Lo..Hi}}={{0..{cost.nchannels - 1}}}")
    return lines
