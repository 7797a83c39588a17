"""Which server switch picks which decode-allreduce backend, per server and version.

PLACEHOLDER (issue 22, helper "proof"): the catalogue helper's file replaces this one at merge;
its entries here are the few the per-trial proof needs, not verified entries.

Each :class:`BackendChoice` is one released switch (a flag, an environment variable or a
compilation option) of vLLM or SGLang: what it selects, the versions that have it, the TP
sizes and message sizes it takes, what it needs, and the log lines that prove it ran or say it
was refused. A backend set of a search space is a :class:`BackendChoice`'s ``params``;
:func:`choice_of` finds the entry a set's params name, :func:`infeasible` says why one cannot
act on a box, and :func:`tuner.server.backend.prove` says from one launch's log whether it was
applied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CATALOGUE", "BackendChoice", "BackendName", "ServerName", "choice_of", "choices", "infeasible",
           "version_key"]

#: Who carries a decode allreduce (see :class:`tuner.server.backend.Backend`).
BackendName = Literal["nccl", "nccl_symmetric", "custom_allreduce", "symm_mem", "flashinfer", "mscclpp",
                      "none", "unknown"]
ServerName = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class BackendChoice:
    """One released switch of a server that picks the decode-allreduce backend.

    ``name``: the preset name a backend space uses (``vllm-nccl-only``); ``server``; ``backend``:
    what carries the decode allreduce when the switch is applied (a :data:`BackendName`);
    ``params``: the set's entries in a space's form (``{"--disable-custom-all-reduce": "on"}``,
    ``{"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}``); ``since`` / ``until``: the first and last server
    versions that have it (``until`` None: still released); ``tp_sizes``: the TP sizes it takes
    (None: any > 1); ``max_bytes``: the largest allreduce it takes (bytes, None: no limit);
    ``needs``: what it needs (``"nvlink"``, ``"flashinfer"``, ...); ``proof``: regexes of which
    one in the launch's log shows it ran; ``refusal``: regexes of a line saying it was refused
    or fell back; ``source``: the file, function and version read.
    """

    name: str
    server: ServerName
    backend: BackendName
    params: Mapping[str, str]
    since: str
    until: str | None = None
    tp_sizes: tuple[int, ...] | None = None
    max_bytes: int | None = None
    needs: tuple[str, ...] = ()
    proof: tuple[str, ...] = ()
    refusal: tuple[str, ...] = ()
    source: str = ""
    note: str = ""


# vLLM's engine-config line ("..., disable_custom_all_reduce=True, ...") as it logs it at start-up
_FLAG_OFF = r"disable_custom_all_reduce=True[,)]"

#: Placeholder entries (helper "proof"): the catalogue helper's verified table replaces them.
CATALOGUE: tuple[BackendChoice, ...] = (
    BackendChoice(
        name="vllm-custom-allreduce-off", server="vllm", backend="nccl",
        params={"--disable-custom-all-reduce": "on"}, since="0.2.0", proof=(_FLAG_OFF,),
        source="vllm/engine/arg_utils.py, EngineArgs.disable_custom_all_reduce (placeholder)"),
    BackendChoice(
        name="vllm-nccl-only", server="vllm", backend="nccl",
        params={"--disable-custom-all-reduce": "on", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
                "VLLM_ALLREDUCE_USE_FLASHINFER": "0"}, since="0.10.2", proof=(_FLAG_OFF,),
        source="vllm/envs.py, VLLM_ALLREDUCE_USE_SYMM_MEM / VLLM_ALLREDUCE_USE_FLASHINFER (placeholder)"),
    BackendChoice(
        name="vllm-flashinfer", server="vllm", backend="flashinfer",
        params={"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}, since="0.11.0", needs=("flashinfer",),
        proof=(r"Using \[[^\]]*'FLASHINFER'[^\]]*\] all-reduce backends",),
        refusal=(r"FlashInfer All Reduce is disabled because [^\n]*",),
        source="vllm/distributed/device_communicators/flashinfer_all_reduce.py, FlashInferAllReduce.__init__; "
               "cuda_communicator.py's 'Using [...] all-reduce backends' line (placeholder)"),
)


def version_key(version: str) -> tuple[int, ...]:
    """``"0.11.2rc1"`` -> ``(0, 11, 2)``: the leading numeric parts of a server version, for ordering."""
    return tuple(int(m) for m in re.findall(r"\d+", version.split("+")[0].split("rc")[0].split(".dev")[0])[:3])


def choices(server: ServerName, version: str | None = None) -> list[BackendChoice]:
    """The catalogue's entries for ``server`` released in ``version`` (None: every version)."""
    out = [c for c in CATALOGUE if c.server == server]
    if version is None:
        return out
    v = version_key(version)
    return [c for c in out if version_key(c.since) <= v and (c.until is None or v <= version_key(c.until))]


def choice_of(server: ServerName, params: Mapping[str, str]) -> BackendChoice | None:
    """The entry whose ``params`` a set's params (env and flags, space form) hold, else None; of
    several, the one with the most params (``vllm-nccl-only`` over ``vllm-custom-allreduce-off``)."""
    held = [c for c in CATALOGUE if c.server == server and all(params.get(k) == v for k, v in c.params.items())]
    return max(held, key=lambda c: len(c.params)) if held else None


def infeasible(choice: BackendChoice, *, version: str | None, tp: int | None, link: str | None,
               decode_bytes: int | None = None) -> str | None:
    """Why ``choice`` cannot act on this box (version without it, TP size it refuses, a PCIe box
    where it needs NVLink, a decode allreduce above its ``max_bytes``), else None. ``link``:
    ``"nvlink"``, ``"pcie"`` or None (unknown); ``decode_bytes``: bytes of one decode allreduce."""
    if version is not None and choice not in choices(choice.server, version):
        return f"{choice.name} is not in {choice.server} {version} (released from {choice.since})"
    if tp is not None and choice.tp_sizes is not None and tp not in choice.tp_sizes:
        return f"{choice.name} takes TP sizes {', '.join(map(str, choice.tp_sizes))}, not {tp}"
    if link == "pcie" and "nvlink" in choice.needs:
        return f"{choice.name} needs NVLink; this box is PCIe"
    if decode_bytes is not None and choice.max_bytes is not None and decode_bytes > choice.max_bytes:
        return f"{choice.name} takes allreduces up to {choice.max_bytes} B; decode's is {decode_bytes} B"
    return None
