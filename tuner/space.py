"""Search spaces: candidate values per variable, and explicit preset sets tried first.

A space file (TOML)::

    include_presets = "safe.toml"        # optional: presets of another file, tried first
    [variables.NCCL_PROTO]
    values = ["LL", "LL128", "Simple"]   # "unset" (NCCL's default) is always a candidate
    [[presets]]
    name = "ring-ll"
    env = { NCCL_ALGO = "Ring", NCCL_PROTO = "LL" }

Unsafe candidates (forced LL128, exotic algorithms; see :func:`tuner.nccl_env.unsafe_reason`)
are skipped with a notice unless ``allow_unsafe``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tuner import nccl_env
from tuner.config import env_table, read_toml
from tuner.errors import InputError

#: The candidate meaning "do not set the variable; let NCCL choose".
UNSET = "unset"


@dataclass(frozen=True)
class Preset:
    """One explicit environment set, e.g. the motivating deployment's tuned set."""

    name: str
    env: dict[str, str]


@dataclass
class SearchSpace:
    """Candidates per variable (``variables``, without "unset"), presets in order, notices.

    ``notices`` lists what was skipped and why (unsafe candidates), for the user to read.
    """

    path: Path
    variables: dict[str, tuple[str, ...]]
    presets: list[Preset]
    notices: list[str] = field(default_factory=list)

    def choices(self) -> dict[str, tuple[str, ...]]:
        """Per variable: ``("unset", *candidates)`` plus any value a preset uses.

        Every variable a preset mentions is included, so every trial, baseline and presets
        included, is a point of one Optuna categorical space and teaches the sampler.
        """
        out: dict[str, list[str]] = {name: [UNSET, *values] for name, values in self.variables.items()}
        for preset in self.presets:
            for name, value in preset.env.items():
                out.setdefault(name, [UNSET])
                if value not in out[name]:
                    out[name].append(value)
        return {name: tuple(values) for name, values in out.items()}

    def size(self) -> int:
        """Number of distinct env sets in the space (product of choice counts)."""
        n = 1
        for values in self.choices().values():
            n *= len(values)
        return n


def _no_secret(file: str, key: str, name: str) -> None:
    if nccl_env.is_secret(name):
        raise InputError(file, key, nccl_env.REDACTED, "NCCL/CUDA tuning variables only",
                         "a secret (name holds TOKEN, KEY, SECRET or PASSWORD) belongs in server.env, "
                         "where it is passed on but never written")


def _values(file: str, name: str, table: object, allow_unsafe: bool, notices: list[str]) -> tuple[str, ...]:
    key = f"variables.{name}"
    _no_secret(file, key, name)
    if not isinstance(table, dict) or set(table) - {"values", "unsafe", "note"} or "values" not in table:
        raise InputError(file, key, table, 'a table with values = ["...", ...] (and optional unsafe, note)')
    raw = table["values"]
    if not isinstance(raw, list) or not raw:
        raise InputError(file, f"{key}.values", raw, "a non-empty list of strings or integers")
    declared_unsafe = table.get("unsafe", [])
    if not isinstance(declared_unsafe, list):
        raise InputError(file, f"{key}.unsafe", declared_unsafe, "a list of values from values")
    kept: list[str] = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(file, f"{key}.values", value, "strings or integers")
        text = str(value)
        if text == UNSET:
            continue
        problem = nccl_env.check_value(name, text)
        if problem:
            raise InputError(file, f"{key}.values", text, nccl_env.accepted(name), problem)
        reason = nccl_env.unsafe_reason(name, text) or (
            "marked unsafe in the space file" if value in declared_unsafe else None)
        if reason and not allow_unsafe:
            notices.append(f"{file}: skipping {name}={text} ({reason}); pass --allow-unsafe to try it")
            continue
        if text not in kept:
            kept.append(text)
    return tuple(kept)


def load_space(path: str | os.PathLike[str], *, allow_unsafe: bool = False, _seen: tuple = ()) -> SearchSpace:
    """Read and validate a search-space file.

    Raises :class:`InputError` for a missing file, bad TOML, unknown keys, values NCCL would
    misread, or a preset forcing an unsafe setting without ``allow_unsafe``.
    """
    file = Path(path)
    name = str(file)
    data = read_toml(file, "search-space")
    known = {"description", "include_presets", "variables", "presets"}
    for key in data:
        if key not in known:
            raise InputError(name, key, data[key], f"the keys {', '.join(sorted(known))}", "unknown key")
    notices: list[str] = []
    variables_table = data.get("variables", {})
    if not isinstance(variables_table, dict):
        raise InputError(name, "variables", variables_table, "[variables.NAME] tables")
    variables = {}
    for var, table in variables_table.items():
        values = _values(name, var, table, allow_unsafe, notices)
        if values:
            variables[var] = values

    presets: list[Preset] = []
    include = data.get("include_presets")
    if include is not None:
        if not isinstance(include, str):
            raise InputError(name, "include_presets", include, "a path to another space file")
        inc_path = (file.parent / include).resolve()
        if inc_path in _seen:
            raise InputError(name, "include_presets", include, "a file that does not include this one", "cycle")
        included = load_space(inc_path, allow_unsafe=allow_unsafe, _seen=_seen + (file.resolve(),))
        presets.extend(included.presets)
        notices.extend(included.notices)
    raw_presets = data.get("presets", [])
    if not isinstance(raw_presets, list):
        raise InputError(name, "presets", raw_presets, "[[presets]] entries with name and env")
    for i, entry in enumerate(raw_presets):
        key = f"presets[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "env", "note"} or "env" not in entry:
            raise InputError(name, key, entry, "a table with name, env (and optional note)")
        label = entry.get("name", f"preset-{i}")
        if not isinstance(label, str):
            raise InputError(name, f"{key}.name", label, "a string")
        if isinstance(entry["env"], dict):
            for var in entry["env"]:
                _no_secret(name, f"{key}.env.{var}", var)
        env = env_table(name, f"{key}.env", entry["env"], allow_unsafe)
        if not env:
            raise InputError(name, f"{key}.env", entry["env"], "at least one variable (the baseline is always run)")
        if any(p.env == env for p in presets):
            continue
        presets.append(Preset(label, env))
    if not variables and not presets:
        raise InputError(name, "variables", variables_table,
                         "at least one [variables.NAME] with a safe value, or one [[presets]] entry", "nothing to try")
    return SearchSpace(path=file, variables=variables, presets=presets, notices=notices)
