"""``nccl-tune sweep CONFIG --dry-run``: the night's plan, checked, with nothing launched.

Before a 36-minute load, a user sees which NCCL release's rules checked the values, what every
candidate value means to NCCL (its canonical form, a value equal to NCCL's default, clamps),
which environment every launch gets, the presets in the order they would run (or why one is
skipped: equal to the untuned set or to an earlier preset, rejected), and how many distinct
sets the sampler may draw from. Values NCCL would reject or silently ignore never get here:
loading the files refuses them, all at once, with the reason (exit 2).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable

from tuner.inputs.config import ExperimentConfig
from tuner.inputs.space import UNSET, SearchSpace
from tuner.nccl import (
    OLDEST_SUPPORTED,
    NcclVersion,
    canonical_set,
    canonical_value,
    cross_problems,
    cross_warnings,
    risky_reason,
    unsafe_reason,
)
from tuner.planning.plan import split_params
from tuner.record import set_key
from tuner.redaction import redact
from tuner.server import split_inherited
from tuner.sweep.evidence import debug_env

#: Above this many points the sampler's distinct sets are not counted one by one.
COUNT_LIMIT = 200_000


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(untuned)"


def plan_lines(cfg: ExperimentConfig, space: SearchSpace, *, allow_unsafe: bool = False,
               mode: str | None = None, environ: dict[str, str] | None = None) -> list[str]:
    """The plan as printable lines (see the module docstring)."""
    version = cfg.nccl.nccl_version
    rules = (f"NCCL {version} ([nccl] version)" if version else
             f"NCCL {OLDEST_SUPPORTED}, the oldest supported (set [nccl] version, or the baseline's "
             "log gives the real one)")
    out = [f"Values checked by the rules of {rules}; nothing is launched (--dry-run)."]
    removed, kept = split_inherited(environ if environ is not None else dict(os.environ), frozenset(space.choices()))
    every = {**cfg.server.env, **debug_env(cfg)}
    out.append("Every launch, the baseline included: " + (_env_text(redact(every)) if every else "no added variable")
               + (f"; inherited {', '.join(removed)} removed" if removed else "")
               + (f"; inherited hardware selectors {', '.join(kept)} kept" if kept else "") + ".")
    notes = [*cfg.notices, *space.notices]
    if notes:
        out.append("Notes:")
        out += [f"  - {n}" for n in notes]
    out.append("Candidate values as NCCL reads them:")
    for name, values in space.variables.items():
        shown = []
        for v in values:
            canon = canonical_value(name, v, version) if not name.startswith("-") else v
            if canon == "":
                shown.append(f"{v} (= NCCL's default: same as unset)")
            elif canon != v:
                shown.append(f"{v} (NCCL reads {canon})")
            else:
                shown.append(v)
        out.append(f"  {name}: unset, " + ", ".join(shown))
    key_of = _key_of(version)
    seen = {key_of({}, []): "the untuned baseline"}
    out.append("Relaunches in order: 1. the untuned baseline")
    for i, preset in enumerate(space.presets, 2):
        key = key_of(preset.env, [])
        problems = [r for _, r in cross_problems({**cfg.server.env, **preset.env}, version)]
        if problems:
            out.append(f"  {i}. {preset.name}: {_env_text(preset.env)} - skipped: {problems[0]}")
        elif key in seen:
            out.append(f"  {i}. {preset.name}: {_env_text(preset.env)} - skipped: to NCCL the same set as {seen[key]}")
        else:
            seen[key] = f"preset {preset.name}"
            as_read = canonical_set(preset.env, version)
            extra = f" (to NCCL: {_env_text(as_read)})" if as_read != preset.env else ""
            if cross_warnings({**cfg.server.env, **preset.env}, version):
                extra += " - may not be launched (see Notes): the baseline's NCCL version and topology decide"
            out.append(f"  {i}. {preset.name}: {_env_text(preset.env)}{extra}")
    if (mode or cfg.sweep.mode) == "presets":
        out.append("Mode presets: the sampler proposes nothing after them.")
    else:
        out.append(_sampler_line(space, key_of, set(seen)))
    out.append(f"Budget: {cfg.sweep.trials} relaunches (the baseline included), then the final baseline "
               "re-measure and one confirmation of a winner.")
    if any(unsafe_reason(n, v, version=version) for n, vs in space.variables.items() for v in vs):
        out.append("Unsafe values are in the space (--allow-unsafe): they can corrupt data or hang.")
    risky = [why for n, vs in space.variables.items() for v in vs if (why := risky_reason(n, v, version))]
    if risky:
        out.append("Risky but reversible values are in the space (a trial that hangs is torn down and recorded as failed):")
        out += [f"  - {why}" for why in risky]
    return out


def _key_of(version: NcclVersion | None) -> Callable[[dict[str, str], list[str]], str]:
    def key_of(env: dict[str, str], flags: list[str]) -> str:
        return set_key(canonical_set(env, version), flags)
    return key_of


def _sampler_line(space: SearchSpace, key_of: Callable[[dict[str, str], list[str]], str], planned: set[str]) -> str:
    choices = space.choices()
    points = math.prod(len(v) for v in choices.values())
    if points > COUNT_LIMIT:
        return f"Then the sampler (TPE) draws from {points} points (too many to count distinct sets here)."
    names = list(choices)
    extra = [n for n, v in choices.items() if set(v) - {UNSET} - set(space.variables.get(n, ()))]
    keys = set()
    for combo in itertools.product(*choices.values()):
        env, flags = split_params(dict(zip(names, combo, strict=True)))
        keys.add(key_of(env, flags))
    fresh = len(keys - planned)
    return (f"Then the sampler (TPE) draws from {points} points of {len(choices)} variables "
            f"({', '.join(f'{n}: {_values(len(v) - (UNSET in v))}' for n, v in choices.items())}, each also unset): "
            f"{len(keys)} distinct sets to NCCL, {fresh} not already planned above"
            + (f"; the presets' values of {', '.join(extra)} are in it too (one Optuna distribution per "
               "variable holds every value a trial used)" if extra else "") + ".")


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"
