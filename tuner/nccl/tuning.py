"""NCCL's TUNING table: the cost model rank 0 logs with ``NCCL_DEBUG_SUBSYS=TUNING``.

For each collective and (algorithm, protocol) pair, a latency in microseconds and a bandwidth
in GB/s (src/graph/tuning.cc, ncclTopoTuneModel); :meth:`TuningTable.best` is the pair NCCL's
model picks at a size, as src/graph/tuning.cc ncclTopoGetAlgoTime computes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuner.nccl.lists import FUNCS, PROTOS

__all__ = ["TuningTable", "TuningTableReader"]


@dataclass
class TuningTable:
    """NCCL's TUNING table (rank 0, src/graph/tuning.cc ncclTopoTuneModel).

    ``entries[func][(algo, proto)] = (latency_us, bandwidth_GBps)``; bandwidth 0 means disabled.
    ``max_threads[(algo, proto)]`` is the "Max NThreads" row.
    """

    entries: dict[str, dict[tuple[str, str], tuple[float, float]]] = field(default_factory=dict)
    max_threads: dict[tuple[str, str], int] = field(default_factory=dict)

    def time_us(self, func: str, algo: str, proto: str, nbytes: int) -> float | None:
        """NCCL's model time for one call: ``latency + nbytes / (1000 * bandwidth)``, Tree AllReduce
        bandwidth scaled by NCCL's correction factor (src/graph/tuning.cc, ncclTopoGetAlgoTime); None if
        the pair is disabled or absent."""
        lat, bw = self.entries.get(func, {}).get((algo, proto), (0.0, 0.0))
        if bw <= 0:
            return None
        log_size = (nbytes >> 6).bit_length() - 1 if nbytes >> 6 else -1
        if algo == "Tree" and func == "AllReduce" and 0 <= log_size < 23:
            bw *= _TREE_CORRECTION[PROTOS.index(proto)][log_size]
        return lat + nbytes / (1000 * bw)

    def best(self, func: str, nbytes: int) -> tuple[str, str, float] | None:
        """The pair NCCL's model picks for ``func`` at ``nbytes``: ``(algo, proto, time_us)``."""
        timed = [(t, a, p) for (a, p) in self.entries.get(func, {})
                 if (t := self.time_us(func, a, p, nbytes)) is not None]
        if not timed:
            return None
        t, a, p = min(timed)
        return a, p, t


#: src/graph/tuning.cc treeCorrectionFactor (LL, LL128, Simple), indexed by log2(bytes / 64).
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)


class TuningTableReader:
    """Collects the TUNING table's lines (two layouts: per-algorithm blocks from 2.18,
    "Latency/AlgBw" columns before): :meth:`feed` one NCCL message after another."""

    def __init__(self) -> None:
        self.table: TuningTable | None = None
        self.columns: list[tuple[str, str]] = []
        self.algos: list[str] = []

    def feed(self, msg: str) -> TuningTable | None:
        """Take one NCCL message; the table so far when ``msg`` was one of its rows, else None."""
        text = msg.strip()
        if text.startswith("Algorithm") and "|" in text:
            self.algos = [t for t in text.split("|", 1)[1].split() if t != "|"]
            if self.table is None or self.algos[:1] == ["Tree"]:  # block 0 starts a new table
                self.table = TuningTable()
            return None
        if text.startswith("Latency/AlgBw"):
            self.table = TuningTable()
            pairs = re.findall(r"(\w+)/\s*(\w+)", text.split("|", 1)[1])
            self.columns = [(a, p) for a, p in pairs]
            return None
        if self.table is None:
            return None
        if text.startswith("Protocol") and self.algos:
            protos = [t for t in text.split("|", 1)[1].split() if t != "|"]
            per = max(1, len(protos) // len(self.algos))
            self.columns = [(self.algos[i // per], protos[i]) for i in range(len(protos)) if i // per < len(self.algos)]
            return None
        if text.startswith("Max NThreads"):
            for col, n in zip(self.columns, re.findall(r"\d+", text.split("|", 1)[1]), strict=False):
                self.table.max_threads[col] = int(n)
            return None
        head, _, rest = text.partition("|")
        if head.strip() in FUNCS and self.columns:
            values = re.findall(r"(-?[\d.]+)\s*/\s*(-?[\d.]+)", rest)
            row = self.table.entries.setdefault(head.strip(), {})
            for col, (lat, bw) in zip(self.columns, values, strict=False):
                row[col] = (float(lat), float(bw))
            return self.table
        return None
