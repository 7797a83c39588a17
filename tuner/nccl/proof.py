"""Proof that a set reached NCCL: what every rank echoed against what the trial launched.

NCCL echoes ``NAME set by environment to VALUE`` the first time it reads an integer or string
parameter (src/misc/param.cc, ncclLoadParam). :func:`confirmations` sorts each launched
variable into confirmed, not applied, or unverifiable from a :class:`~tuner.nccl.log.ParsedLog`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from tuner.nccl.log import ParsedLog
from tuner.nccl.types import NcclVersion
from tuner.nccl.values import canonical_value

__all__ = ["P2P_DISABLE_ECHO_FROM", "Confirmations", "confirmations"]

P2P_DISABLE_ECHO_FROM = NcclVersion(2, 23, 0)  # src/graph/paths.cc ncclGetLevel echoes the disable env

#: Variables NCCL reads, and so echoes, during every communicator init when they are set.
_ECHOED_AT_INIT = frozenset({
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_THREAD_THRESHOLDS", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE",
    "NCCL_LL128_BUFFSIZE", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",
    "NCCL_MAX_CTAS", "NCCL_MIN_CTAS", "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_P2P_LEVEL",
    "NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE",
})


class Confirmations(NamedTuple):
    """``confirmed`` name -> value NCCL echoed; ``not_applied`` name -> why; ``unverifiable`` names."""

    confirmed: dict[str, str]
    not_applied: dict[str, str]
    unverifiable: list[str]


def _why_unverifiable(name: str, value: str, parsed: ParsedLog) -> str:
    """The reason :func:`confirmations` could not verify ``name=value``."""
    if not name.startswith("NCCL_"):
        return f"{name} is read by CUDA or the server, not NCCL: NCCL never echoes it"
    if parsed.info_lines == 0:
        return "the log holds no NCCL INFO line (NCCL_DEBUG=INFO was not in effect)"
    if name == "NCCL_P2P_DISABLE":
        return "NCCL echoes NCCL_P2P_DISABLE only when it is 1 (src/graph/paths.cc, ncclGetLevel)"
    if name == "NCCL_SHM_DISABLE":
        return ("NCCL reads NCCL_SHM_DISABLE only for peers P2P cannot serve (src/transport/shm.cc); "
                "no SHM connection was needed")
    if name == "NCCL_DEBUG_SUBSYS":
        return "NCCL does not echo NCCL_DEBUG_SUBSYS"
    return f"NCCL echoes {name} only when it reads it, which this run may not have needed"


def confirmations(launched_env: Mapping[str, str], parsed: ParsedLog,
                  version: NcclVersion | None = None) -> Confirmations:
    """Compare the set a trial launched with what NCCL echoed on every rank.

    A variable is *confirmed* when every process that logged NCCL lines echoed it with the
    launched value (compared canonically: ``ring`` = ``Ring``, ``0x400000`` = ``4194304``,
    ``2`` = ``PXB``); *not applied* when NCCL reads it at every init yet no process echoed it,
    some did not (unless Ray folded duplicate lines), one echoed another value, or NCCL refused
    it ("Invalid value"); *unverifiable* when NCCL never echoes it (CUDA_DEVICE_MAX_CONNECTIONS,
    ``NCCL_P2P_DISABLE=0``), reads it only on some paths (NCCL_SHM_DISABLE), or the log has no
    NCCL INFO line at all. NCCL_DEBUG itself is confirmed by the presence of INFO lines.
    """
    v = parsed.nccl_version or parsed.server_nccl_version or version
    confirmed: dict[str, str] = {}
    not_applied: dict[str, str] = {}
    unverifiable: list[str] = []
    logged = {p for p in parsed.processes if p != "?"}
    if parsed.ranks_of:  # a process that never initialised a communicator cannot echo init-time reads
        logged &= set(parsed.ranks_of)
    for name, value in launched_env.items():
        if name == "NCCL_DEBUG":
            if parsed.info_lines:
                confirmed[name] = "INFO"
            elif value.upper() in ("INFO", "TRACE"):
                not_applied[name] = "no NCCL INFO line in the log: NCCL never saw NCCL_DEBUG"
            else:
                unverifiable.append(name)
            continue
        if not name.startswith("NCCL_") or parsed.info_lines == 0 or name == "NCCL_DEBUG_SUBSYS":
            unverifiable.append(name)
            continue
        if name in parsed.invalid:
            not_applied[name] = f"NCCL refused {parsed.invalid[name]!r} (\"Invalid value\") and used its default"
            continue
        want = canonical_value(name, value, v)
        echoes = _echoes_for(name, want, parsed, v)
        if not echoes:
            if name == "NCCL_SHM_DISABLE" and want == "1" and "SHM" in parsed.transport_kinds:
                not_applied[name] = "NCCL connected peers over SHM, yet no rank echoed NCCL_SHM_DISABLE=1"
            elif _always_read(name, launched_env, parsed, v):
                not_applied[name] = "no rank echoed it, though NCCL reads it at every communicator init"
            else:
                unverifiable.append(name)
            continue
        wrong = {p: e for p, e in echoes.items() if canonical_value(name, e, v) != want}
        if wrong:
            who, got = next(iter(sorted(wrong.items())))
            not_applied[name] = (f"{_who(parsed, who)} echoed {name}={got} but the trial launched {value}"
                                 + (f" ({len(wrong)} processes differ)" if len(wrong) > 1 else ""))
            continue
        silent = sorted(logged - set(echoes)) if _always_read(name, launched_env, parsed, v) and not parsed.folded else []
        if silent:
            not_applied[name] = (f"{', '.join(_who(parsed, p) for p in silent)} logged NCCL lines but did not "
                                 "echo it")
            continue
        confirmed[name] = next(iter(echoes.values()))
    return Confirmations(confirmed, not_applied, unverifiable)


def _always_read(name: str, env: Mapping[str, str], parsed: ParsedLog, version: NcclVersion | None) -> bool:
    """Whether NCCL reads ``name`` at every communicator init in this run (so silence means dropped)."""
    if name not in _ECHOED_AT_INIT:
        return False
    if name == "NCCL_P2P_LEVEL" and _p2p_disabled(env, version):
        return False  # NCCL_P2P_DISABLE=1 wins before the level is read (src/graph/paths.cc, ncclGetLevel)
    # builds before CUDA 12.1 compile src/transport/nvls.cc's stubs, which never read NCCL_NVLS_ENABLE
    return not (name == "NCCL_NVLS_ENABLE" and (parsed.cuda_version or "").startswith("11."))


def _p2p_disabled(env: Mapping[str, str], version: NcclVersion | None) -> bool:
    return "NCCL_P2P_DISABLE" in env and canonical_value("NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"], version) == "1"


def _echoes_for(name: str, want: str, parsed: ParsedLog, version: NcclVersion | None) -> dict[str, str]:
    """Echoes of ``name``; up to 2.22 NCCL_P2P_DISABLE=1 is echoed as ``NCCL_P2P_LEVEL ... LOC``."""
    echoes = dict(parsed.echoed(name))
    if name == "NCCL_P2P_DISABLE" and not echoes and want == "1" and (
            version is None or version < P2P_DISABLE_ECHO_FROM):
        echoes = {p: "1" for p, e in parsed.echoed("NCCL_P2P_LEVEL").items() if e == "LOC"}
    return echoes


def _who(parsed: ParsedLog, process: str) -> str:
    ranks = sorted(parsed.ranks_of.get(process, ()))
    return f"rank {ranks[0]}" if len(ranks) == 1 else (f"ranks {ranks}" if ranks else f"process {process}")
