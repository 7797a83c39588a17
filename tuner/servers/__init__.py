"""Which server code carries the allreduce, by server version: vLLM's and SGLang's backend switches.

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
    CATALOGUE,
    BackendChoice,
    ServerName,
    choice_of,
    infeasible,
    switch_versions,
    version_key,
)

__all__ = [
    "CATALOGUE",
    "Backend",
    "BackendChoice",
    "BackendProof",
    "ServerName",
    "allreduce_backend",
    "choice_of",
    "infeasible",
    "nccl_cannot_act_at_decode",
    "prove",
    "switch_versions",
    "version_key",
]
