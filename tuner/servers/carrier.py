"""Who carries a set's decode allreduce, and what that leaves its NCCL variables.

A set that names a backend choice of the catalogue (:func:`tuner.servers.catalogue.choice_of`)
runs the backend that choice selects; any other set runs what the study's first baseline ran
(``baseline``: :attr:`tuner.record.StudyInfo.allreduce_backend`). Where that is not NCCL, NCCL's
variables cannot change the decode allreduce (they still act on what NCCL does carry: the
prefill's larger allreduces and vLLM V1's per-step logits all-gather).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tuner.nccl import is_tuning_variable
from tuner.servers.catalogue import BACKEND_SERVERS, BackendName, choice_of

__all__ = ["nccl_cannot_act_at_decode"]

#: Backends that take the decode allreduce away from NCCL (``none``: TP 1, no allreduce at all).
#: ``nccl_symmetric`` and ``unknown`` are not in it: NCCL may still carry it.
NOT_NCCL: frozenset[str] = frozenset({"custom_allreduce", "symm_mem", "flashinfer", "mscclpp", "none"})


def _params(env: Mapping[str, str], flags: Sequence[str]) -> dict[str, str]:
    """``env`` and ``flags`` (argv items) in a space's form: a bare flag is ``on``."""
    out = dict(env)
    i = 0
    while i < len(flags):
        if i + 1 < len(flags) and not flags[i + 1].startswith("-"):
            out[flags[i]] = flags[i + 1]
            i += 2
        else:
            out[flags[i]] = "on"
            i += 1
    return out


def set_carrier(server: str | None, env: Mapping[str, str], flags: Sequence[str], baseline: str) -> str:
    """The backend that carries the decode allreduce of the set ``env`` + ``flags``: its
    catalogue choice's (``server`` ``"vllm"``/``"sglang"``), else ``baseline`` (the first
    baseline's backend name, ``""`` when not known); ``unknown`` for a set with flags on a
    server not known (a flag such as --disable-custom-all-reduce may move it)."""
    if server in BACKEND_SERVERS:
        choice = choice_of(server, _params(env, flags))
        if choice is not None:
            return choice.backend
    elif flags:
        return "unknown"  # a server not known: any flag may move the allreduce to NCCL
    return baseline


def nccl_cannot_act_at_decode(server: str | None, env: Mapping[str, str], flags: Sequence[str],
                              baseline: str) -> str | None:
    """Why the NCCL variables of a set cannot act at decode (its decode allreduce is carried by
    a backend in :data:`NOT_NCCL`, :func:`set_carrier`), or None: it sets no NCCL variable, or
    NCCL carries it, or that is not known."""
    nccl = [k for k in env if is_tuning_variable(k)]
    carrier: BackendName | str = set_carrier(server, env, flags, baseline)
    if not nccl or carrier not in NOT_NCCL:
        return None
    if carrier == "none":
        return "TP 1: one GPU, no allreduce for NCCL to carry"
    return (f"NCCL does not carry the decode allreduce here ({carrier} does): its variables cannot act at "
            "decode, only on what NCCL still carries (the prefill)")
