"""NCCL WARN lines that explain no failure, by NCCL version: NCCL printed them and went on.

A launch's cause is never one of these (:func:`benign_warn`); each entry cites the ``src/`` file
and function that prints it and the releases that do. A version outside an entry's range keeps
the line a candidate cause (a later release may print the same words for a real failure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.nccl.types import NcclVersion

__all__ = ["BENIGN_WARNS", "BenignWarn", "benign_warn"]


@dataclass(frozen=True)
class BenignWarn:
    """One harmless WARN: ``pattern`` (a regex searched in the WARN's message, the text after
    ``NCCL WARN``), the releases that print it harmlessly (``first`` to ``last`` inclusive, None:
    open-ended) and ``source`` (the NCCL file and function, and why it is harmless)."""

    pattern: str
    first: NcclVersion | None
    last: NcclVersion | None
    source: str

    def covers(self, version: NcclVersion | None) -> bool:
        """True for a release in this entry's range, or an unknown one (None)."""
        if version is None:
            return True
        return (self.first is None or version >= self.first) and (self.last is None or version <= self.last)


_V = NcclVersion.parse

#: Every known harmless WARN, oldest source first.
BENIGN_WARNS: tuple[BenignWarn, ...] = (
    BenignWarn(r"Failed to open libibverbs", None, None,
               "src/misc/ibvwrap.cc, wrap_ibv_symbols: no libibverbs.so on the host; NCCL uses sockets"),
    BenignWarn(r"^Failed to find CUDA library \S* ?\(NCCL_CUDA_PATH='[^']*'\)", _V("2.12.0"), _V("2.19.4"),
               "src/misc/cudawrap.cc, ncclCudaLibraryInit: the dlopen of libcuda.so by name fails in "
               "containers with only libcuda.so.1; NCCL goes on through the runtime's entry points "
               "(printed at every init by 2.18.x: NVIDIA/nccl-tests #166)"),
    BenignWarn(r"NET/Plugin ?: ?(?:Failed to find ncclNetPlugin\w* symbol|No plugin found \(libnccl-net\.so\)"
               r"|Plugin load \(libnccl-net\.so\) returned|Plugin load returned)", None, None,
               "src/net.cc (up to 2.18), src/plugin/net.cc (2.19 on), ncclNetPluginInit: no network "
               "plugin, or an older plugin ABI; NCCL falls back to its internal transports (INFO in the "
               "releases read, WARN in builds that raise it)"),
    BenignWarn(r"^Could not find real path of \S+ \(/sys/class/infiniband/", None, None,
               "src/transport/net_ib.cc, ncclIbGetPciPath: a NIC with no PCI path (VMs); NCCL keeps it "
               "with an empty path"),
    BenignWarn(r"^Could not find real path of /sys/class/pci_bus/", None, None,
               "src/graph/topo.cc / xml.cc, getPciPath: a PCI path a VM does not expose; an init that "
               "fails on it ends in an NCCL error line, which is the cause"),
    BenignWarn(r"^Invalid NCCL_(?:LL128_)?NTHREADS -?\d+ \((?:must be a multiple of|maximum|minimum) \d+\)",
               None, _V("2.26.99"),
               "src/graph/tuning.cc, getNthreads: NCCL replaced the thread count (an INFO from 2.27)"),
)

_COMPILED = tuple((re.compile(w.pattern), w) for w in BENIGN_WARNS)


def benign_warn(message: str, version: NcclVersion | str | None = None) -> bool:
    """True when an ``NCCL WARN`` ``message`` (the text after ``NCCL WARN``, e.g. ``"Failed to
    open libibverbs.so[.1]"``) is harmless in NCCL ``version`` (an :class:`NcclVersion`, a
    ``"2.18.1"`` string, or None when unknown: then any release's harmless WARN counts). An
    unreadable version string counts as unknown."""
    if isinstance(version, str):
        try:
            version = NcclVersion.parse(version)
        except ValueError:
            version = None
    text = message.strip()
    return any(pattern.search(text) and warn.covers(version) for pattern, warn in _COMPILED)
