"""Which server code carries the allreduce, by server version: static knowledge only.

``catalogue`` lists each released switch of vLLM and SGLang that picks the decode-allreduce
backend (:class:`BackendChoice`, :data:`CATALOGUE`), finds the one a set's params name
(:func:`choice_of`) and says why one cannot act on a box (:func:`infeasible`); ``carrier``
says who carries a set's decode allreduce and what that means for its NCCL variables
(:func:`set_carrier`, :func:`nccl_cannot_act_at_decode`).
"""

from tuner.backends.carrier import NOT_NCCL, nccl_cannot_act_at_decode, set_carrier
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

__all__ = ["CATALOGUE", "NOT_NCCL", "BackendChoice", "BackendName", "ServerName", "choice_of", "choices",
           "infeasible", "nccl_cannot_act_at_decode", "set_carrier", "version_key"]
