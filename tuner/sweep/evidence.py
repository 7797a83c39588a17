"""What NCCL did in a relaunch, read from its log: proof that each variable reached NCCL, the
NCCL version, ranks, channels, warnings, and who carries the decode allreduce.

NCCL logs nothing unless ``NCCL_DEBUG`` asks (src/debug.cc), so every launch, the baseline
included, gets ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV``: init-time lines only
(the ``set by environment to`` echoes of src/misc/param.cc, the communicator and channel lines),
no per-operation logging during the probe. ``[nccl] debug = false`` turns it off; a
``NCCL_DEBUG`` the user put in ``server.env`` is respected (and then what it logs is used).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tuner.diagnose import DEBUG_ENV
from tuner.inputs.config import ExperimentConfig
from tuner.nccl import NcclVersion, ParsedLog, Topology, confirmations, parse_log, topology_from_log
from tuner.record import TrialRecord
from tuner.server import Backend, allreduce_backend

__all__ = [
    "CHANNEL_LINES",
    "Evidence",
    "debug_env",
    "read",
]

#: Rank-0 channel lines kept in the record (a TP-8 box logs one per channel per rank).
CHANNEL_LINES = 8


def debug_env(cfg: ExperimentConfig) -> dict[str, str]:
    """The logging variables to add to a launch: :data:`DEBUG_ENV`, or nothing when
    ``[nccl] debug = false`` or ``server.env`` sets ``NCCL_DEBUG`` itself."""
    if not cfg.nccl.debug or "NCCL_DEBUG" in cfg.server.env:
        return {}
    return dict(DEBUG_ENV)


@dataclass
class Evidence:
    """One relaunch's log, parsed (:class:`tuner.nccl.log.ParsedLog`), with the backend."""

    parsed: ParsedLog
    backend: Backend

    @property
    def version(self) -> NcclVersion | None:
        """The NCCL version the server ran (NCCL's own line, else the server's)."""
        return self.parsed.nccl_version or self.parsed.server_nccl_version

    def topology(self) -> Topology | None:
        """The topology NCCL reported (ranks, nodes, link), or None when it logged none."""
        return topology_from_log(self.parsed)


def read(record: TrialRecord, launched: Mapping[str, str], argv: list[str], server_env: Mapping[str, str],
         version: NcclVersion | None) -> Evidence | None:
    """Parse ``record.log`` into the record's NCCL fields (``nccl_version``, ``nccl_confirmed``,
    ``nccl_not_applied``, ``nccl_unverifiable``, ``nccl_ranks``, ``nccl_channels``,
    ``nccl_warnings``, ``allreduce_backend``), comparing what NCCL echoed with ``launched``
    (the set's variables as launched). None when the log cannot be read."""
    path = Path(record.log)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    parsed = parse_log(lines)
    conf = confirmations(launched, parsed, version)
    record.nccl_version = str(parsed.nccl_version or parsed.server_nccl_version or "")
    record.nccl_confirmed = dict(conf.confirmed)
    record.nccl_not_applied = dict(conf.not_applied)
    record.nccl_unverifiable = list(conf.unverifiable)
    record.nccl_ranks = parsed.ranks
    record.nccl_channels = parsed.ring_lines[:CHANNEL_LINES] + parsed.tree_lines[:2]
    record.nccl_warnings = list(parsed.warnings)
    backend = allreduce_backend(lines, argv, dict(server_env))
    record.allreduce_backend = backend.name
    return Evidence(parsed, backend)
