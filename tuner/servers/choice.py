"""Which server switch picks which decode-allreduce backend, per server and version.

Each :class:`BackendChoice` is one released switch (a flag, an environment variable or a
compilation option) of vLLM or SGLang, read in that server's released package at the versions
it names (``source``): what it selects, the versions that have it, the TP sizes and message
sizes it takes, what it needs, and the log lines that prove it ran or say it was refused. A
backend set of a search space is a :class:`BackendChoice`'s ``params``; :func:`infeasible` says
why one cannot act on a box; ``tuner.servers.backend.prove`` says from one launch's log whether
it was applied. The entries are tuner/servers/entries.py's `CATALOGUE`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["BackendChoice", "BackendName", "ServerName", "version_key"]

#: Who carries an allreduce: ``nccl`` (pynccl / torch.distributed), ``nccl_symmetric`` (NCCL's
#: symmetric-memory kernels), ``custom_allreduce`` (the server's own IPC kernel), ``symm_mem``
#: (torch symmetric memory), ``flashinfer`` (FlashInfer's allreduce, its fusion pass and its
#: PCIe IPC kernel), ``mscclpp``, ``none`` (tensor parallelism 1) or ``unknown``.
BackendName = Literal["nccl", "nccl_symmetric", "custom_allreduce", "symm_mem", "flashinfer", "mscclpp",
                      "none", "unknown"]

ServerName = Literal["vllm", "sglang"]

_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


def version_key(version: str) -> tuple[int, ...]:
    """``"0.5.3.post1"`` -> ``(0, 5, 3)``: the release numbers, for ordering server versions.

    A suffix (``.post1``, ``rc0``, ``+cu128``, ``.dev12``) is dropped: a post release has what its
    release has. Trailing zeros do not count (``0.11`` == ``0.11.0``). Raises ``ValueError`` for
    text that does not start with a number.
    """
    m = _RELEASE.match(version.strip())
    if not m:
        raise ValueError(f"not a server version: {version!r} (accepted: numbers such as 0.11.0)")
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class BackendChoice:
    """One released switch of a server that picks the decode-allreduce backend.

    ``name``: the preset name a backend space uses (``vllm-nccl-only``); ``server``; ``backend``:
    what carries the decode allreduce when the switch is applied (a :data:`BackendName`);
    ``params``: the set's entries in a space's form (``{"--disable-custom-all-reduce": "on"}``,
    ``{"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}``; empty: the server's default path, which is the
    baseline, never a preset); ``since`` / ``until``: the first and last server versions that
    have it (``until`` None: still released at the newest version read); ``tp_sizes``: the TP
    sizes it takes (None: any > 1); ``max_bytes``: the largest allreduce it takes at its default
    settings (bytes, None: no fixed limit); ``needs``: what it needs (``"nvlink"``,
    ``"flashinfer"``, ``"sm90"``, ``"nvswitch"``, ``"mscclpp"``, ``"one-node"``); ``dispatch``:
    the name vLLM 0.22+ prints first in its dispatch line when this backend is first in line
    (``"CUSTOM"``, ``"PYNCCL"``); ``proof``: regexes of which any one in the launch's log shows
    it ran; ``refusal``: regexes of a line saying it was refused or fell back; ``source``: the
    file, function and versions read; ``note``: what the table says besides.
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
    dispatch: str | None = None
    proof: tuple[str, ...] = ()
    refusal: tuple[str, ...] = ()
    source: str = ""
    note: str = ""

    def released_in(self, version: str | None) -> bool:
        """True when ``version`` (None: unknown, taken as having it) has this switch."""
        if version is None:
            return True
        key = version_key(version)
        if key < version_key(self.since):
            return False
        return self.until is None or key <= version_key(self.until)

    def versions(self) -> str:
        """``"0.11.0+"`` or ``"0.4.9 to 0.5.23"``: the versions that have it, as the table says."""
        return f"{self.since}+" if self.until is None else f"{self.since} to {self.until}"
