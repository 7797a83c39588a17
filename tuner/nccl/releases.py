"""What a release changed that is not one variable's record: where NCCL runs its symmetric kernels.

Facts per variable (2.28's CTA limit on Blackwell, 2.30's removed SHM variables) are in the
record, :data:`tuner.nccl.variables.VARIABLES`; this module holds the release facts a backend
choice depends on (:func:`symmetric_kernels_reason`), each citing its tag.
"""

from __future__ import annotations

from tuner.nccl.types import NcclVersion

__all__ = ["SYMMETRIC_FROM", "SYMMETRIC_NVLINK_ONLY_FROM", "symmetric_kernels_reason"]

#: NCCL's symmetric-memory kernels arrive in 2.27 (src/enqueue.cc, ncclPrepareTasks, v2.27.3-1).
SYMMETRIC_FROM = NcclVersion(2, 27, 0)
#: From 2.29 NCCL runs them only when every GPU pair is a direct NVLink (src/sym_kernels.cc,
#: ncclSymkAvailable and isAllDirectNvlink, v2.29.2-1; release notes 2.29: "PCIE systems do not
#: perform as well").
SYMMETRIC_NVLINK_ONLY_FROM = NcclVersion(2, 29, 0)


def symmetric_kernels_reason(version: NcclVersion | None, link: str | None) -> str | None:
    """Why NCCL ``version`` never runs its symmetric kernels on a box whose GPUs talk over
    ``link`` (``"pcie"``, ``"nvlink"``, ``"nvswitch"``, None unknown), else None. Unknown facts
    never give a reason."""
    if version is None:
        return None
    if version < SYMMETRIC_FROM:
        return f"NCCL {version} has no symmetric kernels (they arrive in 2.27: src/enqueue.cc, v2.27.3-1)"
    if link == "pcie" and version >= SYMMETRIC_NVLINK_ONLY_FROM:
        return (f"NCCL {version} runs its symmetric kernels only when every GPU pair is a direct NVLink "
                "(src/sym_kernels.cc, ncclSymkAvailable, v2.29.2-1), and this box's GPUs talk over PCIe")
    return None
