"""One home per server kind, and which server code carries the allreduce, by server version.

``kind.py``: :class:`ServerKind`, what one server program is and does (its command, routes, log
lines, probe quirks); one module per kind (``vllm.py``, ``sglang.py``, ``tgi.py``, ``trtllm.py``,
``llamacpp.py``, ``openai.py``); ``kinds.py``: :data:`KINDS` and :func:`kind_of`, the kind of a
command and its log (``server.kind`` forces it). No module outside this room names a kind.

``choice.py``: :class:`BackendChoice`, the names (:data:`BackendName`, :data:`ServerName`) and
:func:`version_key`; ``entries.py``: :data:`CATALOGUE`, every released switch as read in the
servers' source; ``catalogue.py``: :func:`~tuner.servers.catalogue.choices`, :func:`choice_of`, :func:`infeasible`,
:func:`~tuner.servers.catalogue.switch_keys`, :func:`switch_versions`. Static knowledge only: the proof of one launch is
``tuner.servers.backend.prove``. The table is docs/BACKENDS.md. ``carrier.py`` says who
carries a set's decode allreduce and what that leaves its NCCL variables
(:func:`~tuner.servers.carrier.set_carrier`, :func:`nccl_cannot_act_at_decode`).
"""

from tuner.servers.backend import Backend, BackendProof, allreduce_backend, prove
from tuner.servers.carrier import nccl_cannot_act_at_decode
from tuner.servers.catalogue import (
    BACKEND_SERVERS,
    CATALOGUE,
    BackendChoice,
    ServerName,
    choice_of,
    infeasible,
    switch_versions,
    version_key,
)
from tuner.servers.kind import ServerKind
from tuner.servers.kinds import GENERIC, KIND_NAMES, KINDS, kind_named, kind_of, simulated

__all__ = [
    "BACKEND_SERVERS",
    "CATALOGUE",
    "GENERIC",
    "KINDS",
    "KIND_NAMES",
    "Backend",
    "BackendChoice",
    "BackendProof",
    "ServerKind",
    "ServerName",
    "allreduce_backend",
    "choice_of",
    "infeasible",
    "kind_named",
    "kind_of",
    "nccl_cannot_act_at_decode",
    "prove",
    "simulated",
    "switch_versions",
    "version_key",
]
