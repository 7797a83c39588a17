"""The rules of one night in one object: a set's identity, and whether it may be launched.

The sweep builds it with the facts it learns from the first baseline's log; ``--dry-run``
with what is known before the night (``[nccl] version``, a ``diagnose.json``). Both then ask
the same questions of the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tuner.planning import feasibility
from tuner.planning.identity import DecodeContext, Facts, set_identity

__all__ = ["Rules"]


class Rules:
    """Identity and feasibility for one night.

    ``server_env``: what every launch gets; ``facts()``: the NCCL version and topology as known
    now (called at every question: the sweep learns them mid-night); ``decode``: the study's
    decode context (identity at the decode size), or None; ``allow_unsafe``: --allow-unsafe.
    """

    def __init__(self, server_env: Mapping[str, str], facts: Callable[[], Facts], *,
                 decode: DecodeContext | None = None, allow_unsafe: bool = False) -> None:
        self.server_env = dict(server_env)
        self.facts = facts
        self.decode = decode
        self.allow_unsafe = allow_unsafe

    def key_of(self, env: dict[str, str], flags: list[str]) -> str:
        """The set's identity (:func:`tuner.planning.identity.set_identity`)."""
        return set_identity(env, flags, self.facts(), self.decode)

    @property
    def untuned_key(self) -> str:
        """The identity of the untuned set (the baseline's)."""
        return self.key_of({}, [])

    def problems(self, env: dict[str, str]) -> list[str]:
        """Why the set must not be launched (:func:`tuner.planning.feasibility.problems`)."""
        return feasibility.problems(env, self.server_env, self.facts(), allow_unsafe=self.allow_unsafe)

    def doubts(self, env: dict[str, str]) -> list[str]:
        """Why the set may still not be launched (:func:`tuner.planning.feasibility.doubts`)."""
        return feasibility.doubts(env, self.server_env, self.facts())
