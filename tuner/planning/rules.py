"""The rules of one night in one object: a set's identity, whether it may be launched, and
whether it can act at all.

The sweep builds it with the facts it learns from the first baseline's log; ``--dry-run``
with what is known before the night (``[nccl] version``, a ``diagnose.json``). Both then ask
the same questions of the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from tuner.nccl import canonical_set
from tuner.planning import feasibility
from tuner.planning.identity import DecodeContext, Facts, night_inert, set_identity
from tuner.planning.params import flag_params
from tuner.servers import BACKEND_SERVERS, choice_of, infeasible, nccl_cannot_act_at_decode

__all__ = ["Rules"]


class Rules:
    """Identity and feasibility for one night.

    ``server_env``: what every launch gets; ``facts()``: the NCCL version and topology as known
    now (called at every question: the sweep learns them mid-night); ``decode``: the study's
    decode context (identity at every allreduce size the night measures, :meth:`inert`), or None; ``allow_unsafe``: --allow-unsafe.
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

    def inert(self, env: dict[str, str]) -> dict[str, str]:
        """The variables of ``env`` that cannot change any allreduce the night measures, each
        with why (:func:`tuner.planning.identity.night_inert`); empty without a decode context.

        The one place that decides "cannot act": decode at every ``probe.concurrency`` level
        and the prompt's prefill (:mod:`tuner.planning.sizes`), each under NCCL's pick there
        from the study's diagnosis. A variable is in it only when it cannot act at every size
        and NCCL's pick is known at each; the set's identity leaves these out (:meth:`key_of`).
        """
        if self.decode is None:
            return {}
        facts = self.facts()
        return night_inert(canonical_set(env, facts.version, facts.topology), facts, self.decode)

    def cannot_act(self, env: dict[str, str], flags: list[str] | None = None) -> str | None:
        """Why ``env`` as a whole cannot change any allreduce the night measures, or None when it
        can or that is not known (see :meth:`inert`). Callers that need the answer for one
        variable ask with ``{name: value}``. The untuned set (or one NCCL reads as it) cannot act:
        "NCCL reads it as the untuned set". For the backend check (NCCL not on the decode path)
        and the verdicts (a gain a set that cannot act cannot have) to ask the same question.

        The sizes NCCL carries: where the set's decode allreduce is carried by another backend
        (its backend choice, ``flags`` included, or the baseline's:
        :func:`tuner.servers.nccl_cannot_act_at_decode`), the decode sizes are not NCCL's, so
        its variables are judged at the prefill sizes alone; with no prefill size whose NCCL pick
        is known, the set cannot act ("cannot act at decode"), its prefill effect a measured
        ratio only.
        """
        facts = self.facts()
        canon = canonical_set(env, facts.version, facts.topology)
        if not canon:
            return "NCCL reads it as the untuned set" if env else "it is the untuned set"
        elsewhere = nccl_cannot_act_at_decode(facts.server, env, flags or [], facts.backend)
        if elsewhere is not None:
            prefill = tuple(p for p in self.decode.picks if p.size.phase != "decode") if self.decode else ()
            if not prefill:
                return elsewhere
            at_prefill = dataclasses.replace(self.decode, picks=prefill) if self.decode else None
            inert = night_inert(canon, facts, at_prefill) if at_prefill is not None else {}
            return None if set(canon) - set(inert) else elsewhere
        inert = self.inert(env)
        if self.decode is None or set(canon) - set(inert):
            return None
        return "; ".join(inert[name] for name in sorted(canon))

    def backend_problem(self, env: dict[str, str], flags: list[str]) -> str | None:
        """Why the backend choice the set names (:func:`tuner.servers.choice_of`, with the
        server the baseline's log named) cannot act on this box, by the server's version, the
        TP size and the links the baseline's log showed (:func:`tuner.servers.infeasible`), or
        because it routes to NCCL where the baseline's decode allreduce already runs on NCCL (it
        only turns off backends the baseline does not use), else None (no choice named, nothing
        known against it)."""
        facts = self.facts()
        if facts.server not in BACKEND_SERVERS:
            return None
        choice = choice_of(facts.server, {**env, **flag_params(flags)})
        if choice is None:
            return None
        if choice.backend == "nccl" and facts.backend == "nccl":
            return (f"the baseline's decode allreduce already runs on NCCL: {choice.name} only turns off backends "
                    "the baseline does not use, so it cannot change it")
        topo = facts.topology
        return infeasible(choice, version=facts.server_version, tp=topo.nranks if topo is not None else None,
                          link=topo.link if topo is not None else None,
                          decode_bytes=self.decode.nbytes if self.decode is not None else None,
                          nccl_version=facts.version)

    def problems(self, env: dict[str, str]) -> list[str]:
        """Why the set must not be launched (:func:`tuner.planning.feasibility.problems`)."""
        return feasibility.problems(env, self.server_env, self.facts(), allow_unsafe=self.allow_unsafe)

    def doubts(self, env: dict[str, str]) -> list[str]:
        """Why the set may still not be launched (:func:`tuner.planning.feasibility.doubts`)."""
        return feasibility.doubts(env, self.server_env, self.facts())
