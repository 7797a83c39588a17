"""Which server switch picks which decode-allreduce backend, per server and version.

:data:`CATALOGUE` (the entries, tuner/servers/entries.py) lists every released switch of vLLM
and SGLang read in that server's released package; :func:`choices` picks a version's,
:func:`choice_of` names the entry a set's params hold, :func:`infeasible` says why one cannot
act on a box, :func:`switch_versions` the versions that have a switch. The per-launch proof is
``tuner.servers.backend.prove``.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.nccl import NcclVersion, symmetric_kernels_reason
from tuner.servers.choice import BackendChoice, BackendName, ServerName, version_key
from tuner.servers.entries import CATALOGUE
from tuner.servers.kinds import kind_named

__all__ = ["BACKEND_SERVERS", "CATALOGUE", "BackendChoice", "BackendName", "ServerName", "choice_of", "choices", "infeasible",
           "switch_keys", "switch_versions", "version_key"]


#: The server kinds that have backend switches in the catalogue, in its order.
BACKEND_SERVERS: tuple[ServerName, ...] = tuple(dict.fromkeys(c.server for c in CATALOGUE))


def choices(server: ServerName, version: str | None = None) -> list[BackendChoice]:
    """The catalogue's entries for ``server`` released in ``version`` (None: every version).

    Raises ``ValueError`` for a ``version`` that is not a number (:func:`version_key`).
    """
    return [c for c in CATALOGUE if c.server == server and c.released_in(version)]


def switch_keys(server: ServerName) -> set[str]:
    """Every flag and variable name a ``server`` entry's params use."""
    return {k for c in CATALOGUE if c.server == server for k in c.params}


def choice_of(server: ServerName, params: Mapping[str, str]) -> BackendChoice | None:
    """The entry whose ``params`` a set's params (env and flags, space form) hold, else None.

    Of several, the one with most entries wins (``vllm-nccl-only`` over
    ``vllm-custom-allreduce-off``); a value ``"unset"`` counts as absent; a set whose switch
    names hold no entry exactly (a value the catalogue does not list) is None.
    """
    held = {k: v for k, v in params.items() if v != "unset"}
    best: BackendChoice | None = None
    for c in CATALOGUE:
        if c.server != server or not c.params:
            continue
        if all(held.get(k) == v for k, v in c.params.items()) and (best is None or len(c.params) > len(best.params)):
            best = c
    return best


def switch_versions(server: ServerName, key: str) -> tuple[str, str | None] | None:
    """``(since, until)`` of a flag or variable: the widest range of the entries that use it.

    None when no ``server`` entry uses ``key``.
    """
    using = [c for c in CATALOGUE if c.server == server and key in c.params]
    if not using:
        return None
    since = min((c.since for c in using), key=version_key)
    untils = [c.until for c in using]
    until = None if None in untils else max((u for u in untils if u), key=version_key)
    return since, until


def infeasible(choice: BackendChoice, *, version: str | None, tp: int | None, link: str | None,
               decode_bytes: int | None = None, nccl_version: NcclVersion | None = None) -> str | None:
    """Why ``choice`` cannot act on this box, else None.

    A version without it, a TP size it refuses (1, or one not in ``tp_sizes``), a PCIe box where
    it needs NVLink or NVSwitch (``link``: ``"nvlink"``, ``"pcie"`` or None, unknown), a decode
    allreduce above its ``max_bytes`` (``decode_bytes``: bytes of one decode allreduce, None:
    unknown), NCCL's symmetric kernels where ``nccl_version`` never runs them (2.29+ on PCIe,
    :func:`tuner.nccl.symmetric_kernels_reason`). Unknown facts never make it infeasible. Raises ``ValueError`` for a ``version``
    that is not a number.
    """
    server = kind_named(choice.server).title
    if version is not None and not choice.released_in(version):
        switches = ", ".join(choice.params) or "the default"
        pick = "together pick" if len(choice.params) > 1 else "picks"
        return (f"{server} {version} does not have {choice.name} ({switches} {pick} it only in "
                f"{choice.versions()}: {choice.source})")
    if tp is not None and tp <= 1:
        return f"tensor parallel size {tp}: the decode step has no allreduce for {choice.name} to carry"
    if tp is not None and choice.tp_sizes is not None and tp not in choice.tp_sizes:
        return (f"{choice.name} takes TP sizes {', '.join(map(str, choice.tp_sizes))}, not {tp} "
                f"({choice.source})")
    wants = [n for n in choice.needs if n.startswith(("nvlink", "nvswitch"))]
    if link == "pcie" and wants and not (tp == 2 and wants == ["nvlink above 2 GPUs"]):
        return f"{choice.name} needs {' and '.join(wants)}; this box's GPUs talk over PCIe ({choice.source})"
    symk = symmetric_kernels_reason(nccl_version, link) if choice.backend == "nccl_symmetric" else None
    if symk:
        return f"{choice.name} needs NCCL's symmetric kernels: {symk} ({choice.source})"
    if decode_bytes is not None and choice.max_bytes is not None and decode_bytes > choice.max_bytes:
        return (f"a decode allreduce of {decode_bytes} bytes is above the {choice.max_bytes} bytes {choice.name} "
                f"takes ({choice.source})")
    return None
