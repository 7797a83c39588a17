"""P2P health, said before the night and after its first baseline: what this host shows (ACS,
the IOMMU, BAR1, the driver's P2P matrix: :func:`tuner.server.p2phost.read_host`) and NCCL's own P2P
check, judged by :func:`tuner.triage.p2p_health` into gates with their documented fixes.

The first baseline of a night runs NCCL's init diagnostics where the NCCL version has them
(``NCCL_RUN_DIAGNOSTICS=1``, 2.31+: :func:`tuner.nccl.diagnostics_env`, added to baseline launches
by :mod:`tuner.sweep.trial`); :func:`night_health` reads their ``NCCL DIAG`` lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tuner.nccl import DIAGNOSTICS_VAR, NcclVersion, diagnostics_env, read_diag
from tuner.server import p2phost
from tuner.triage import P2pHealth, p2p_health

__all__ = ["diagnostics_line", "night_health", "plan_p2p_lines"]


def night_health(diag: Sequence[str] = ()) -> P2pHealth:
    """This host read now, with NCCL's ``NCCL DIAG`` messages ``diag`` (a baseline's
    :attr:`tuner.nccl.ParsedLog.diag`; empty: none), judged."""
    return p2p_health(p2phost.read_host(), read_diag(diag))


def diagnostics_line(version: NcclVersion | None, server_env: Mapping[str, str]) -> str:
    """Whether the baseline runs NCCL's own P2P check, in one line."""
    if DIAGNOSTICS_VAR in server_env:
        return (f"P2P health: server.env sets {DIAGNOSTICS_VAR}={server_env[DIAGNOSTICS_VAR]} itself: every launch "
                "runs what it asks; the report reads any NCCL DIAG lines of the first baseline.")
    if not diagnostics_env(version):
        return (f"P2P health: NCCL {version} has no init diagnostics ({DIAGNOSTICS_VAR}, NCCL 2.31+): only the "
                "host's facts are judged.")
    return (f"P2P health: the baselines run NCCL's own P2P check ({DIAGNOSTICS_VAR}=1: at init, NCCL 2.31+ writes and "
            "reads between every GPU pair and prints NCCL DIAG lines; an older NCCL ignores it); the report "
            "says what it found.")


def plan_p2p_lines(version: NcclVersion | None, server_env: Mapping[str, str]) -> list[str]:
    """The dry run's lines: one per gate this host shows (or the clean line), what could not
    be read, and whether the baseline runs NCCL's own check."""
    return [*night_health().lines(), diagnostics_line(version, server_env)]
