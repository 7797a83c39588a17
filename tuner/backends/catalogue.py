"""Which server switch picks which decode-allreduce backend, per server and version.

PLACEHOLDER (issue 22, helper "night"): a minimal stand-in with three entries so the night can
plan and judge backend sets; the catalogue work replaces this file (its entries, each verified
in the server's source). The names and signatures are the catalogue's API.

Each :class:`BackendChoice` is one released switch (a flag, an environment variable) of vLLM or
SGLang: what it selects, the versions that have it, the TP sizes and message sizes it takes,
what it needs. A backend set of a search space is a :class:`BackendChoice`'s ``params``;
:func:`infeasible` says why one cannot act on a box.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CATALOGUE", "BackendChoice", "BackendName", "ServerName", "choice_of", "choices", "infeasible",
           "version_key"]

#: Who carries a decode allreduce (:func:`tuner.server.backend.allreduce_backend`).
BackendName = Literal["nccl", "nccl_symmetric", "custom_allreduce", "symm_mem", "flashinfer", "mscclpp",
                      "none", "unknown"]
ServerName = Literal["vllm", "sglang"]


@dataclass(frozen=True)
class BackendChoice:
    """One released switch of a server that picks the decode-allreduce backend.

    ``name``: the preset name a backend space uses (``vllm-nccl-only``); ``server``; ``backend``:
    what carries the decode allreduce when the switch is applied; ``params``: the set's entries
    in a space's form (``{"--disable-custom-all-reduce": "on"}``); ``since`` / ``until``: the
    first and last server versions that have it (``until`` None: still released); ``tp_sizes``:
    the TP sizes it takes (None: any > 1); ``max_bytes``: the largest allreduce it takes (bytes,
    None: no limit); ``needs``: what it needs (``"nvlink"``, ...); ``source``: the file read.
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


#: Placeholder entries (the catalogue work verifies and completes them).
CATALOGUE: tuple[BackendChoice, ...] = (
    BackendChoice(name="vllm-nccl-only", server="vllm", backend="nccl",
                  params={"--disable-custom-all-reduce": "on"}, since="0.2.0",
                  source="vllm/engine/arg_utils.py, EngineArgs.disable_custom_all_reduce (v0.11.0)"),
    BackendChoice(name="vllm-custom-allreduce-off", server="vllm", backend="nccl",
                  params={"--disable-custom-all-reduce": "on"}, since="0.2.0",
                  source="vllm/engine/arg_utils.py, EngineArgs.disable_custom_all_reduce (v0.11.0)"),
    BackendChoice(name="vllm-symm-mem", server="vllm", backend="symm_mem",
                  params={"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}, since="0.10.2", needs=("nvlink",),
                  source="vllm/envs.py, VLLM_ALLREDUCE_USE_SYMM_MEM (v0.10.2)"),
)


def version_key(version: str) -> tuple[int, ...]:
    """``"0.10.2"`` (or ``"vllm 0.10.2rc1"``) as ``(0, 10, 2)``: the leading numbers, for comparing."""
    m = re.search(r"\d+(?:\.\d+)*", version)
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def choices(server: ServerName, version: str | None = None) -> list[BackendChoice]:
    """The catalogue's entries for ``server`` released in ``version`` (None: every version)."""
    return [c for c in CATALOGUE if c.server == server and (version is None or _released(c, version))]


def _released(choice: BackendChoice, version: str) -> bool:
    key = version_key(version)
    if not key:
        return True  # a version not read: not refused on a guess
    return version_key(choice.since) <= key and (choice.until is None or key <= version_key(choice.until))


def choice_of(server: ServerName, params: Mapping[str, str]) -> BackendChoice | None:
    """The entry whose ``params`` a set's params (env and flags, space form) hold, else None;
    the entry holding the most params wins (ties: the first in :data:`CATALOGUE`)."""
    held = [c for c in CATALOGUE if c.server == server and c.params
            and all(params.get(k) == v for k, v in c.params.items())]
    return max(held, key=lambda c: len(c.params)) if held else None


def infeasible(choice: BackendChoice, *, version: str | None, tp: int | None, link: str | None,
               decode_bytes: int | None = None) -> str | None:
    """Why ``choice`` cannot act on this box (version without it, TP size it refuses, a PCIe box
    where it needs NVLink, a decode allreduce above its ``max_bytes``), else None. ``link``:
    ``"nvlink"``, ``"pcie"`` or None (unknown); ``decode_bytes``: bytes of one decode allreduce.
    What is not known (None) refuses nothing."""
    if version and not _released(choice, version):
        span = f"{choice.since} to {choice.until}" if choice.until else f"{choice.since} and later"
        return f"{choice.name}: {choice.server} {version} does not have it (released in {span}; {choice.source})"
    if tp is not None and choice.tp_sizes is not None and tp not in choice.tp_sizes:
        return f"{choice.name}: takes TP {', '.join(map(str, choice.tp_sizes))}, not TP {tp} ({choice.source})"
    if "nvlink" in choice.needs and link is not None and link not in ("nvlink", "nvswitch"):
        return f"{choice.name}: needs NVLink between the GPUs; this box's are joined by {link} ({choice.source})"
    if decode_bytes is not None and choice.max_bytes is not None and decode_bytes > choice.max_bytes:
        return (f"{choice.name}: takes allreduces up to {choice.max_bytes} B, the decode allreduce is {decode_bytes} B "
                f"({choice.source})")
    return None
