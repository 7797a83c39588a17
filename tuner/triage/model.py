"""The triage's types: a fix set, a finding, the whole triage, stored as plain JSON.

A :class:`Triage` is stored in the study (``StudyInfo.triage``, its :meth:`Triage.to_dict`) so
every runner of a multi-host study plans the same fixes first, and in ``diagnose.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMBINED", "FILES", "Finding", "FixSet", "Triage"]

#: The name of the set that combines every finding's fixes.
COMBINED = "fix: all"
#: The kind of the finding that carries the space's graph/topology files: its sets are never
#: combined (each file is a whole answer of its own) and come right after the combined fix.
FILES = "files"


@dataclass(frozen=True)
class FixSet:
    """One set a finding proposes: ``name`` (``fix: fallback``: short, stable across runs, so a
    resumed study knows it), ``env`` (NCCL variables to values) and ``reason`` (one sentence,
    the hang note of a P2P level included)."""

    name: str
    env: Mapping[str, str]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"name": self.name, "env": dict(self.env), "reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FixSet:
        """Read :meth:`to_dict`'s JSON back; KeyError for a missing name."""
        return cls(str(d["name"]), {str(k): str(v) for k, v in dict(d.get("env") or {}).items()},
                   str(d.get("reason", "")))


@dataclass(frozen=True)
class Finding:
    """Where NCCL's model of the machine may be wrong.

    ``kind``: ``fallback``, ``inter-cpu``, ``simple-at-decode``, ``shm-by-level``,
    ``few-channels``, the network's ``net-sockets``, ``net-no-gdr``, ``net-gid`` or :data:`FILES` (the space's graph/topology files, one set each); ``sentence``: the plain sentence shown (it quotes ``quote``, cites
    ``source`` and says ``cost``); ``quote``: the NCCL log line it rests on; ``source``: the
    NCCL source file and function; ``cost``: what it costs at the night's sizes by NCCL's own
    model (:mod:`tuner.nccl.costmodel`); ``fixes``: the sets that address it.
    """

    kind: str
    sentence: str
    quote: str
    source: str
    cost: str
    fixes: tuple[FixSet, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"kind": self.kind, "sentence": self.sentence, "quote": self.quote, "source": self.source,
                "cost": self.cost, "fixes": [f.to_dict() for f in self.fixes]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """Read :meth:`to_dict`'s JSON back."""
        return cls(str(d.get("kind", "")), str(d.get("sentence", "")), str(d.get("quote", "")),
                   str(d.get("source", "")), str(d.get("cost", "")),
                   tuple(FixSet.from_dict(f) for f in d.get("fixes") or ()))


@dataclass(frozen=True)
class Triage:
    """NCCL's model of the machine, judged after the baseline (or by ``diagnose``).

    ``findings`` in a fixed order; ``model_right``: no finding applies; ``summary``: one line
    (the model looks right, no GRAPH lines were logged, or how many findings); ``notes``: lines
    said once beside the findings (e.g. no decode size known); ``network``: across nodes, the
    transport of each cross-node pair of hosts (:func:`tuner.triage.network.network_triage`;
    empty on one node and in a triage stored before it existed).
    """

    findings: tuple[Finding, ...]
    model_right: bool
    summary: str
    notes: tuple[str, ...] = field(default=())
    network: tuple[str, ...] = field(default=())

    def lines(self) -> list[str]:
        """What is printed: the summary, each finding's sentence, each cross-node pair's transport, each note."""
        return [self.summary, *(f.sentence for f in self.findings), *self.network, *self.notes]

    def fix_sets(self) -> list[FixSet]:
        """The sets to relaunch first: the combination of every finding's fixes (when more than
        one fix exists; named after the finding whose fix already holds them all, else
        :data:`COMBINED`), then the :data:`FILES` finding's sets (one per graph or topology file,
        never combined), then each finding's own, deduplicated by environment (the first name
        kept). A variable two fixes set differently keeps the first finding's value. With one
        fix of its own, that fix comes first and the files after it."""
        own = [f for finding in self.findings if finding.kind != FILES for f in finding.fixes]
        given = [f for finding in self.findings if finding.kind == FILES for f in finding.fixes]
        out: list[FixSet] = []
        if len(own) > 1:
            env: dict[str, str] = {}
            for f in own:
                for k, v in f.env.items():
                    env.setdefault(k, v)
            names = ", ".join(dict.fromkeys(f.name.removeprefix("fix: ") for f in own))
            same = next((f for f in own if dict(f.env) == env), None)  # one fix already holds them all
            out.append(same or FixSet(COMBINED, env, f"every finding's fix at once ({names})"))
        head = out or own[:1]
        seen: set[tuple[tuple[str, str], ...]] = set()
        kept = []
        for f in [*head, *given, *own]:
            key = tuple(sorted(f.env.items()))
            if key in seen or not key:
                continue
            seen.add(key)
            kept.append(f)
        return kept

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (stored in the study and in diagnose.json)."""
        out: dict[str, Any] = {"findings": [f.to_dict() for f in self.findings], "model_right": self.model_right,
               "summary": self.summary, "notes": list(self.notes)}
        if self.network:  # only across nodes: a one-node triage stores what it stored before
            out["network"] = list(self.network)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Triage:
        """Read :meth:`to_dict`'s JSON back."""
        return cls(tuple(Finding.from_dict(f) for f in d.get("findings") or ()), bool(d.get("model_right")),
                   str(d.get("summary", "")), tuple(str(n) for n in d.get("notes") or ()),
                   tuple(str(n) for n in d.get("network") or ()))
