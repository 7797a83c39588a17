"""Which server code carries the allreduce, by server version: static knowledge only.

``catalogue`` holds every released switch of vLLM and SGLang that picks the decode-allreduce
backend (:data:`CATALOGUE` of :class:`BackendChoice`), the entry a set's params name
(:func:`choice_of`) and why one cannot act on a box (:func:`infeasible`). Reading a launch's
log for proof is the server layer's (:func:`tuner.server.backend.prove`).
"""

from tuner.backends.catalogue import (
    CATALOGUE,
    BackendChoice,
    BackendName,
    ServerName,
    choice_of,
    choices,
    infeasible,
    version_key,
)

__all__ = ["CATALOGUE", "BackendChoice", "BackendName", "ServerName", "choice_of", "choices", "infeasible",
           "version_key"]
