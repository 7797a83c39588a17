"""Every server kind, and which one a command and its log run.

:data:`KINDS` lists the kinds, the generic OpenAI-compatible one last. :func:`kind_of` finds the
kind of a launch: ``server.kind`` when set; else the one its command names (a wrapper such as
``docker run ... vllm/vllm-openai`` or ``srun ... vllm serve`` names it too); else the one its
log marks; else the generic one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from tuner.servers.kind import ServerKind
from tuner.servers.llamacpp import LLAMACPP
from tuner.servers.openai import OPENAI
from tuner.servers.sglang import SGLANG
from tuner.servers.tgi import TGI
from tuner.servers.trtllm import TRTLLM
from tuner.servers.vllm import VLLM

__all__ = ["GENERIC", "KINDS", "KIND_NAMES", "kind_named", "kind_of", "simulated"]

#: Every kind; the generic one last (it names no command and marks no line).
KINDS: tuple[ServerKind, ...] = (VLLM, SGLANG, TGI, TRTLLM, LLAMACPP, OPENAI)
#: The kind of a server nothing names.
GENERIC = OPENAI
#: The ``server.kind`` values accepted.
KIND_NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)


def kind_named(name: str) -> ServerKind:
    """The kind called ``name`` (one of :data:`KIND_NAMES`). Raises KeyError for another name."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise KeyError(name)


def kind_of(argv: Sequence[str] = (), log_lines: Iterable[str] = (), forced: str | None = None) -> ServerKind:
    """The kind of the server ``argv`` launches: ``forced`` (``server.kind``) when given; the
    first kind the command names; else the first kind whose mark the log shows (the first 2,000
    lines read); else :data:`GENERIC`."""
    if forced:
        return kind_named(forced)
    named = [k for k in KINDS if k.named_by(argv)]
    if named:
        return named[0]
    for i, line in enumerate(log_lines):
        if i >= 2000:
            break
        for kind in KINDS:
            if kind.marks(line):
                return kind
    return GENERIC


def simulated(argv: Sequence[str]) -> bool:
    """True when ``argv`` runs nccl-tune's bundled simulator (``{python} -m tuner.sim ...`` or
    ``nccl-tune sim ...``), a server that computes nothing on a GPU (tuner/sim)."""
    args = list(argv)
    if args[1:3] == ["-m", "tuner.sim"]:
        return True
    return bool(args) and os.path.basename(args[0]) == "nccl-tune" and args[1:2] == ["sim"]
