"""The two facts NCCL's rules depend on: which NCCL release runs, and on what machine.

:class:`NcclVersion` orders releases (``2.21.5`` < ``2.24.3``); :class:`Topology` describes the
communicator the rules are judged for. Both are filled from the baseline's log by
:mod:`tuner.nccl.log`, or from the config (``[nccl] version``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["NEWEST_VERIFIED", "OLDEST_SUPPORTED", "NcclVersion", "Topology", "judged_version"]

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][\w.+-]*)?\s*$")


@dataclass(frozen=True, order=True)
class NcclVersion:
    """An NCCL release, ordered by (major, minor, patch); ``str()`` gives ``"2.21.5"``."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> NcclVersion:
        """Read ``"2.21.5"``, ``"2.21"``, ``"v2.21.5-1"`` (a git tag) or ``"2.21.5+cuda12.4"``.

        Raises ValueError for anything else.
        """
        m = _VERSION.match(text)
        if not m:
            raise ValueError(f"not an NCCL version: {text!r} (expected e.g. 2.21.5)")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    @classmethod
    def from_code(cls, code: int) -> NcclVersion:
        """From ``ncclGetVersion``'s integer: ``22105`` -> 2.21.5 (NCCL src/nccl.h.in, NCCL_VERSION)."""
        if code >= 10000:
            return cls(code // 10000, (code % 10000) // 100, code % 100)
        return cls(code // 1000, (code % 1000) // 100, code % 100)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


#: The oldest release whose rules this package states (NVLSTree, the last algorithm name before
#: PAT, arrived in 2.18.1). An unknown version is judged by these rules: the strictest ones.
OLDEST_SUPPORTED = NcclVersion(2, 18, 1)
#: The newest release the rules were checked against; later releases are judged by its rules.
NEWEST_VERIFIED = NcclVersion(2, 30, 7)


def judged_version(version: NcclVersion | None) -> NcclVersion:
    """The release a rule is judged for: ``version``, or :data:`OLDEST_SUPPORTED` when unknown."""
    return OLDEST_SUPPORTED if version is None else version

Link = Literal["pcie", "nvlink", "nvswitch"]


@dataclass(frozen=True)
class Topology:
    """The communicator NCCL runs on, as far as it is known.

    ``nranks``: GPUs in the tensor-parallel communicator; ``nnodes``: hosts it spans;
    ``link``: how the GPUs of one node reach each other (``"pcie"`` only PCIe, ``"nvlink"``
    NVLink, ``"nvswitch"`` NVLink through NVSwitches) or None if unknown; ``has_nvls``: NVLink
    SHARP multicast is available (NCCL logs "NVLS multicast support is available");
    ``gpu_arch``: compute capability times ten (80 A100, 90 H100, 120 RTX PRO 6000 Blackwell) or
    None; ``collnet``: a CollNet (SHARP) network plugin is present; ``cpu_vendor``: the CPU NCCL
    saw (``"Intel"``, ``"AMD"``, ``"Zhaoxin"``, ``"ARM"``, ``"POWER"``; its GRAPH topology lines,
    src/graph/topo.cc ncclTopoPrintRec) or None if unknown.
    """

    nranks: int
    nnodes: int = 1
    link: Link | None = None
    has_nvls: bool = False
    gpu_arch: int | None = None
    collnet: bool = False
    cpu_vendor: str | None = None

    @property
    def nvlink(self) -> bool | None:
        """True when the GPUs of a node talk over NVLink, False on PCIe only, None if unknown."""
        return None if self.link is None else self.link in ("nvlink", "nvswitch")
