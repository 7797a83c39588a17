"""The most fix sets the triage can propose for a space, known before any log: the dry run's bound.

The triage's sets (:meth:`tuner.triage.model.Triage.fix_sets`) are cut to the variables and
values the space searches (:meth:`tuner.planning.order.Planner.fixes_first`), so a space bounds
them: one set per finding kind whose fix the space can hold (:data:`tuner.triage.findings.FIX_VALUES`;
kinds in :data:`tuner.triage.findings.EXCLUSIVE` count once), their combination when two or more
can, and one per graph or topology file the space offers (the ``files`` finding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.nccl import GRAPH_FILE_VAR, TOPO_FILE_VAR
from tuner.triage.findings import EXCLUSIVE, FIX_VALUES

__all__ = ["FixBound", "fix_bound"]

_WORDS = {"fallback": "the search fallback", "simple-at-decode": "Simple at the decode size",
          "shm-by-level": "SHM pairs kept off P2P by the level", "few-channels": "too few channels",
          "net-gid": "a RoCE GID problem"}


@dataclass(frozen=True)
class FixBound:
    """``most``: the most sets the triage can relaunch on this space (0: none of its fix
    variables is searched); ``holds``: per finding kind the space can fix, the ``VAR=value``
    pairs of its fix the space holds; ``combined``: whether their combination counts;
    ``files``: the graph/topology files the space offers (one set each)."""

    most: int
    holds: dict[str, tuple[str, ...]]
    combined: bool
    files: int

    def text(self) -> str:
        """How ``most`` is counted, e.g. ``at most 3 here: one per finding whose fix the space
        holds (the search fallback or Simple at the decode size: NCCL_PROTO=LL; ...) and their
        combination``."""
        groups: list[str] = []
        for kinds in _groups():
            held = [k for k in kinds if k in self.holds]
            if held:
                by_var: dict[str, list[str]] = {}
                for var, _, value in sorted({p.partition("=") for k in held for p in self.holds[k]}):
                    by_var.setdefault(var, []).append(value)
                groups.append(" or ".join(_WORDS[k] for k in held) + ": "
                              + ", ".join(f"{var}={'/'.join(vs)}" for var, vs in by_var.items()))
        parts = [f"one per finding whose fix the space holds ({'; '.join(groups)})"] if groups else []
        if self.combined:
            parts.append("their combination")
        if self.files:
            parts.append(f"one per graph or topology file ({self.files})")
        return f"at most {self.most} here: " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1
                                                else "".join(parts))


def _groups() -> list[tuple[str, ...]]:
    """The finding kinds with fixes, those that never meet grouped (one counts per group)."""
    grouped = {k for g in EXCLUSIVE for k in g}
    return [*EXCLUSIVE, *((k,) for k in FIX_VALUES if k not in grouped)]


def fix_bound(choices: Mapping[str, Sequence[str]]) -> FixBound:
    """The bound for a space given by its ``choices`` (:meth:`tuner.inputs.space.SearchSpace.choices`:
    per variable its values, presets' included). Never raises."""
    holds: dict[str, tuple[str, ...]] = {}
    for kind, values in FIX_VALUES.items():
        pairs = tuple(f"{var}={v}" for var, vs in values.items() for v in choices.get(var, ()) if v in vs)
        if pairs:
            holds[kind] = pairs
    own = sum(1 for kinds in _groups() if any(k in holds for k in kinds))
    files = len({v for var in (GRAPH_FILE_VAR, TOPO_FILE_VAR) for v in choices.get(var, ()) if v != "unset"})
    combined = own >= 2
    return FixBound(own + int(combined) + files, holds, combined, files)
