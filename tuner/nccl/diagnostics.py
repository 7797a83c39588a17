"""NCCL's own init diagnostics (2.31+): the variable that asks for them and what their P2P check says.

``NCCL_RUN_DIAGNOSTICS=1`` makes every communicator init write data between every GPU pair NCCL
means to reach by P2P, read it back, and report under the ``NCCL DIAG`` prefix on rank 0's stdout
(src/diagnostics.cc ``NCCL_PARAM(Diagnostics, "RUN_DIAGNOSTICS", 0)``; docs/diagnostics.rst,
"Active Diagnostics"; NCCL 2.31). The report never fails the init. The lines it prints
(src/diagnostics/p2p.cc, ``ncclDiagP2pReport`` and ``ncclDiagP2pReportSummary``)::

    NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)
    NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification
    NCCL DIAG [INFO] p2p: write mismatch srcRank=0 srcCudaDev=0 srcNvmlDev=0 dstRank=1 dstCudaDev=1
        dstNvmlDev=1 path=PHB handle=CUMEM_POSIX_FD expected=0x... got=0x... verify=0x...; check the
        affected pair with 'nvidia-smi topo -p2p p', then check Linux bare-metal IOMMU mode and PCIe ACS settings

An older NCCL reads only the parameters it declares (src/misc/param.cc, ``ncclGetEnv`` per
``NCCL_PARAM``), so the variable is harmless before 2.31: :func:`diagnostics_env` sets it unless
the version is known to be older. :func:`read_diag` turns the messages
(:attr:`tuner.nccl.log.ParsedLog.diag`) into :class:`DiagResult` values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tuner.nccl.types import NcclVersion

__all__ = ["DIAGNOSTICS_FROM", "DIAGNOSTICS_VAR", "DiagResult", "diagnostics_env", "read_diag"]

#: The variable (src/diagnostics.cc, ``NCCL_PARAM(Diagnostics, "RUN_DIAGNOSTICS", 0)``).
DIAGNOSTICS_VAR = "NCCL_RUN_DIAGNOSTICS"
#: The first release with the active diagnostics (docs/diagnostics.rst: "As of v2.31").
DIAGNOSTICS_FROM = NcclVersion(2, 31, 0)

_SUMMARY_OK = re.compile(r"^\[OK\]\s+p2p: verified P2P access .*?\((?P<n>\d+) peer accesses\)")
_SUMMARY_PART = re.compile(r"^\[INFO\]\s+p2p: only (?P<passed>\d+)/(?P<tested>\d+) GPU-to-GPU peer accesses")
# one failed edge: "[INFO] p2p: <what> srcRank=0 srcCudaDev=0 srcNvmlDev=0 dstRank=1 ... path=PHB handle=..."
_EDGE = re.compile(r"^\[INFO\]\s+p2p: (?P<what>[a-z/ -]+?) srcRank=(?P<src>\d+) .*?srcNvmlDev=(?P<srcdev>-?\d+) "
                   r"dstRank=(?P<dst>\d+) .*?dstNvmlDev=(?P<dstdev>-?\d+) path=(?P<path>\w+)"
                   r"(?:.*?; (?P<advice>.*))?$")


@dataclass(frozen=True)
class DiagResult:
    """One result of NCCL's P2P check: ``kind`` ``ok`` (every pair verified), ``partial``
    (``passed`` of ``tested`` peer accesses verified) or ``edge`` (one failed direction:
    ``what`` NCCL names, ``write mismatch``, ``peer-memory import failed``...; ``src``/``dst``
    ranks, their NVML device indices ``src_gpu``/``dst_gpu``, NCCL's ``path`` type (PIX, PXB,
    PHB, SYS, NVL...) and NCCL's own ``advice``); ``line``: the message as NCCL printed it."""

    kind: str
    line: str
    passed: int | None = None
    tested: int | None = None
    what: str = ""
    src: int | None = None
    dst: int | None = None
    src_gpu: int | None = None
    dst_gpu: int | None = None
    path: str = ""
    advice: str = ""


def diagnostics_env(version: NcclVersion | None, user_env: Iterable[str] = ()) -> dict[str, str]:
    """``{NCCL_RUN_DIAGNOSTICS: "1"}`` for a baseline launch, unless ``version`` is known to be
    older than :data:`DIAGNOSTICS_FROM` or the user's ``server.env`` (``user_env``, its names)
    sets the variable itself; else ``{}``."""
    if DIAGNOSTICS_VAR in set(user_env) or (version is not None and version < DIAGNOSTICS_FROM):
        return {}
    return {DIAGNOSTICS_VAR: "1"}


def read_diag(messages: Iterable[str]) -> list[DiagResult]:
    """The P2P check's results among ``messages`` (the text after ``NCCL DIAG``, as
    :attr:`tuner.nccl.log.ParsedLog.diag` keeps it), in order; other DIAG lines (the header, the
    network check, the timing line) are not P2P results and are left out."""
    out: list[DiagResult] = []
    for raw in messages:
        text = raw.strip()
        if m := _SUMMARY_OK.match(text):
            out.append(DiagResult("ok", text, passed=int(m["n"]), tested=int(m["n"])))
        elif m := _SUMMARY_PART.match(text):
            out.append(DiagResult("partial", text, passed=int(m["passed"]), tested=int(m["tested"])))
        elif m := _EDGE.match(text):
            out.append(DiagResult("edge", text, what=m["what"].strip(), src=int(m["src"]), dst=int(m["dst"]),
                                  src_gpu=int(m["srcdev"]), dst_gpu=int(m["dstdev"]), path=m["path"],
                                  advice=(m["advice"] or "").strip()))
    return out
