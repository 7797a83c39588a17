"""The host a relaunch ran on, as its trial record stores it (``TrialRecord.host``).

Made by :meth:`tuner.study.host.Host.record` (the runner's host, its GPUs from NVML and the
versions its server's log names); stored as the plain JSON of its fields, which is also the
``host`` column of trials.csv. A record written before hosts were recorded has none (None,
``{}`` in trials.csv).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tuner.record.plain import known_fields

__all__ = ["HostRecord"]


@dataclass(frozen=True)
class HostRecord:
    """``name`` (the host's name), ``gpu`` (the GPU model the server was given; mixed boxes
    joined with `` + ``), ``gpu_count``, ``driver`` (NVIDIA driver version; empty without NVML),
    ``nccl`` and ``server`` (the versions the relaunch's log names, or empty)."""

    name: str = ""
    gpu: str = ""
    gpu_count: int = 0
    driver: str = ""
    nccl: str = ""
    server: str = ""

    def to_json(self) -> dict[str, Any]:
        """The plain JSON object stored (keys in field order)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostRecord:
        """The host :meth:`to_json` wrote (unknown keys ignored, missing ones empty). Raises
        TypeError for a non-object."""
        return cls(**known_fields(cls, data))
