"""Search spaces: candidate values per variable, and explicit preset sets tried first.

A space file (TOML)::

    include_presets = "safe.toml"        # optional: presets of another file, tried first
    server = "vllm"                      # optional: "vllm" or "sglang", whose backend switches it sets
    server_version = "0.11.0"            # optional: a switch this version lacks is refused
    [variables.NCCL_PROTO]
    values = ["LL", "LL128", "Simple"]   # "unset" (NCCL's default) is always a candidate
    unsafe = ["LL128"]                   # optional: skipped unless --allow-unsafe
    [[presets]]
    name = "ring-ll"
    env = { NCCL_ALGO = "Ring", NCCL_PROTO = "LL" }

Values of NCCL_TOPO_FILE and NCCL_GRAPH_FILE are paths, relative ones to the space file's folder;
each is made absolute (the server runs elsewhere) and must be a readable file in NCCL's XML
(:func:`tuner.inputs.schema.check_nccl_file`), before any launch and in ``--dry-run``::

    [variables.NCCL_GRAPH_FILE]
    values = ["graphs/ring8.xml"]        # NCCL's graph, as NCCL_GRAPH_DUMP_FILE writes it

Unsafe candidates (forced LL128, exotic algorithms; see :func:`tuner.inputs.schema.check_nccl`) are
skipped with a notice unless ``allow_unsafe``; in a preset they are refused. Validated by the
pydantic models below: every problem of a file is reported at once (see :mod:`tuner.inputs.schema`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PlainValidator, ValidationError, ValidationInfo, field_validator

from tuner.errors import InputError
from tuner.inputs.locate import find_path
from tuner.inputs.schema import (
    SECRET_ACCEPTED,
    SECRET_WHY,
    FileModel,
    LoadContext,
    PresetEnv,
    as_written,
    check_nccl,
    check_nccl_file,
    detail,
    input_problems,
    load_context,
    problem,
    raise_all,
    read_toml,
)
from tuner.nccl import FILE_VARS, NcclVersion
from tuner.redaction import REDACTED, is_secret
from tuner.servers import BACKEND_SERVERS, KINDS, ServerName, switch_versions, version_key

__all__ = ["BACKEND_SPACE", "UNSET", "Preset", "SearchSpace", "backend_space_path", "load_space"]

#: The candidate meaning "do not set the variable; let NCCL choose".
UNSET = "unset"
#: A server's backend space (its presets: the decode-allreduce backend choices), beside default.toml.
BACKEND_SPACE = "search_spaces/{server}-backends.toml"


def backend_space_path(server: str, config_file: Path | None = None) -> tuple[Path, bool]:
    """Where ``server``'s backend space is (:data:`BACKEND_SPACE`), found as ``sweep.space`` is
    (:func:`tuner.inputs.locate.find_path`): next to the experiment file, then in the current
    directory, then the bundled one. Returns ``(path, found)``; not found, the path as written
    (for a message)."""
    raw = Path(BACKEND_SPACE.format(server=server))
    found = find_path(raw, config_file, bundled=True)
    return (found[0], True) if found is not None else (raw, False)


@dataclass(frozen=True)
class Preset:
    """One explicit environment set, e.g. the motivating deployment's tuned set."""

    name: str
    env: dict[str, str]


@dataclass
class SearchSpace:
    """Candidates per variable (``variables``, without "unset"), presets in order, notices.

    ``notices`` lists what was skipped and why (unsafe candidates), for the user to read;
    ``notes``: each variable's ``note`` from the file (a risk, say), shown beside a set to use.
    """

    path: Path
    variables: dict[str, tuple[str, ...]]
    presets: list[Preset]
    notices: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    server: ServerName | None = None
    server_version: str | None = None

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

    def files(self) -> dict[str, tuple[str, ...]]:
        """The graph and topology files the space offers (NCCL_GRAPH_FILE, NCCL_TOPO_FILE: absolute
        paths, checked on load), by variable, from its values and presets; absent when none."""
        return {name: tuple(v for v in values if v != UNSET) for name, values in self.choices().items()
                if name in FILE_VARS and len(values) > 1}

    def size(self) -> int:
        """Number of distinct env sets in the space (product of choice counts)."""
        n = 1
        for values in self.choices().values():
            n *= len(values)
        return n


def _scalar(raw: Any) -> str | int:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise problem("a string or an integer")
    return raw


Scalar = Annotated[str | int, PlainValidator(_scalar)]
_STRING = Field(description="a string")


class _Variable(FileModel):
    """``[variables.NAME]``; ``values`` become the kept candidates (validated, safe, unique)."""

    unsafe: Annotated[list[Scalar], Field(description="a list of values from values")] = Field(
        default_factory=list)
    note: Annotated[str, _STRING] = ""
    values: Annotated[tuple[str, ...], Field(description="a non-empty list of strings or integers")]

    @field_validator("values", mode="before")
    @classmethod
    def _candidates(cls, raw: Any, info: ValidationInfo) -> tuple[str, ...]:
        if not isinstance(raw, list) or not raw:
            raise problem("a non-empty list of strings or integers")
        ctx = load_context(info)
        declared_unsafe = {str(u) for u in info.data.get("unsafe", [])}
        kept: list[str] = []
        details = []
        for i, value in enumerate(raw):
            if isinstance(value, bool) or not isinstance(value, str | int):
                details.append(detail((i,), value, "a string or an integer"))
                continue
            text = str(value)
            if text == UNSET:
                continue
            text, why = check_nccl_file(ctx.variable, text, ctx)
            check = check_nccl(ctx.variable, text, ctx)
            if why or check.wrong:
                details.append(detail((i,), value, check.accepted, why or check.wrong or ""))
                continue
            marked = text in declared_unsafe or str(value) in declared_unsafe  # a path as written, or resolved
            reason = check.unsafe or ("marked unsafe in the space file" if marked else None)
            if reason and not ctx.allow_unsafe:
                ctx.notices.append(f"{ctx.file}: skipping {ctx.variable}={text} ({reason}); "
                                   "pass --allow-unsafe to try it")
            elif text not in kept:
                kept.append(text)
        raise_all("values", details)
        return tuple(kept)


class _PresetEntry(FileModel):
    name: Annotated[str | None, _STRING] = None
    env: Annotated[PresetEnv, Field(description='a table such as { NCCL_PROTO = "LL" }')]
    note: Annotated[str, _STRING] = ""


def _server_version(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("a version such as \"0.11.0\", in quotes")
    version_key(value)  # ValueError names what is accepted
    return value


class _SpaceFile(FileModel):
    description: Annotated[str, _STRING] = ""
    server: Annotated[ServerName | None, Field(description=" or ".join(f'"{s}"' for s in BACKEND_SERVERS))] = None
    server_version: Annotated[str | None, PlainValidator(_server_version),
                              Field(description='a version such as "0.11.0"')] = None
    include_presets: Annotated[str | None, Field(description="a path to another space file")] = None
    variables: Annotated[dict[str, dict[str, Any]], Field(
        description='[variables.NAME] tables with values = ["...", ...] (and optional unsafe, note)')] = Field(
        default_factory=dict)
    presets: Annotated[list[_PresetEntry], Field(
        description="[[presets]] entries with env (and optional name, note)")] = Field(default_factory=list)


def load_space(path: str | os.PathLike[str], *, allow_unsafe: bool = False,
               version: NcclVersion | None = None, allow_unknown: bool = False) -> SearchSpace:
    """Read and validate a search-space file (and the file its ``include_presets`` names).

    Raises :class:`InputError` listing every problem: a missing file, bad TOML, unknown keys,
    values NCCL would misread, secret-named variables, a preset forcing an unsafe setting
    without ``allow_unsafe``, an ``NCCL_*`` name NCCL does not read (a preset's or a variable's;
    unless ``allow_unknown``), an include cycle, nothing left to try. Values are checked by the
    rules of NCCL ``version`` (None: the oldest supported, :data:`tuner.nccl.OLDEST_SUPPORTED`).
    A variable whose name starts with ``-`` is a server flag (``on``: the flag alone).
    """
    return _load(Path(path), allow_unsafe, (), version, allow_unknown)


def _load(file: Path, allow_unsafe: bool, seen: tuple[Path, ...], version: NcclVersion | None = None,
          allow_unknown: bool = False) -> SearchSpace:
    name = str(file)
    data = read_toml(file, "search-space")
    context = LoadContext(file=file, allow_unsafe=allow_unsafe, version=version, check_files=True,
                          allow_unknown=allow_unknown)
    problems: list[InputError] = []
    try:
        parsed: _SpaceFile | None = _SpaceFile.model_validate(data, context=context)
    except ValidationError as exc:
        problems += input_problems(name, exc, _SpaceFile)
        parsed = None

    # Each variable is validated on its own: its name decides what NCCL accepts.
    variables: dict[str, tuple[str, ...]] = {}
    notes: dict[str, str] = {}
    raw_variables = data.get("variables")
    for var, table in raw_variables.items() if isinstance(raw_variables, dict) else ():
        if is_secret(var):
            problems.append(InputError(name, f"variables.{var}", as_written(REDACTED, True), SECRET_ACCEPTED, SECRET_WHY))
            continue
        if not isinstance(table, dict):
            continue  # reported by _SpaceFile
        try:
            parsed_var = _Variable.model_validate(table, context=dataclasses.replace(context, variable=var))
        except ValidationError as exc:
            problems += input_problems(name, exc, _Variable, prefix=("variables", var))
            continue
        if parsed_var.values:
            variables[var] = parsed_var.values
        if parsed_var.note.strip():
            notes[var] = " ".join(parsed_var.note.split())

    presets: list[Preset] = []
    include = data.get("include_presets")
    if isinstance(include, str):
        try:
            included = _include(file, include, allow_unsafe, seen, version, allow_unknown)
            presets.extend(included.presets)
            context.notices.extend(included.notices)
        except InputError as exc:
            problems += exc.problems
    for i, entry in enumerate(parsed.presets if parsed else ()):
        preset_name = entry.name if entry.name is not None else f"preset-{i}"
        if any(p.name == preset_name for p in presets):
            problems.append(InputError(name, f"presets[{i}].name", as_written(preset_name),
                                       "a name no other preset of this space (or of the file it includes) has",
                                       "two presets would print as one in every table"))
            continue
        # a preset that repeats another's set is kept: the planner passes it over as that set's
        # duplicate, and the night records it (a skipped row of trials.csv, "Sets not measured")
        presets.append(Preset(preset_name, entry.env))

    server = parsed.server if parsed else None
    server_version = parsed.server_version if parsed else None
    if server_version and not server and parsed:
        problems.append(InputError(name, "server_version", as_written(server_version),
                                   "server_version together with server = " + " or ".join(f'"{s}"' for s in BACKEND_SERVERS),
                                   "a version of which server? (its backend switches are checked by it)"))
    if server and parsed:
        others = [kind for kind in KINDS if kind.name != server]
        for i, e in enumerate(parsed.presets):
            problems += [InputError(name, f"presets[{i}].env.{k}", as_written(v),
                                    f"variables of {server} (this space's server) or of NCCL",
                                    f"{k} is read by {owner.title}, not {server}")
                         for k, v in e.env.items() for owner in others[:] if owner.owns_variable(k)]
    if server and server_version:
        own = [(f"presets[{i}].env.{k}", k, v) for i, e in enumerate(parsed.presets if parsed else ())
               for k, v in e.env.items()]
        own += [(f"variables.{k}", k, ", ".join(vs)) for k, vs in variables.items()]
        problems += _switch_problems(name, server, server_version, own)
    if not problems and not variables and not presets:
        problems.append(InputError(name, "variables", as_written(raw_variables or {}),
                                   "at least one [variables.NAME] with a safe value, or one [[presets]] entry",
                                   "nothing to try"))
    if problems:
        raise InputError.combine(problems)
    return SearchSpace(path=file, variables=variables, presets=presets, notices=context.notices, notes=notes,
                       server=server, server_version=server_version)


def _switch_problems(file: str, server: ServerName, version: str,
                     entries: list[tuple[str, str, str]]) -> list[InputError]:
    """A backend switch of the catalogue (tuner/servers) that ``server`` ``version`` lacks, one
    problem each: ``entries`` are ``(key as dotted, name, value)``."""
    out = []
    for where, key, value in entries:
        versions = switch_versions(server, key)
        if versions is None:
            continue
        since, until = versions
        have = version_key(since) <= version_key(version) and (until is None or version_key(version) <= version_key(until))
        if not have:
            span = f"{since}+" if until is None else f"{since} to {until}"
            out.append(InputError(file, where, as_written(value), f"a {server} version that has it ({span})",
                                  f"{key} picks an allreduce backend only in {server} {span}, and this space's "
                                  f"server_version is {version} (docs/BACKENDS.md)"))
    return out


def _include(file: Path, include: str, allow_unsafe: bool, seen: tuple[Path, ...],
             version: NcclVersion | None = None, allow_unknown: bool = False) -> SearchSpace:
    """The space ``include_presets`` names, relative to ``file``; refuses a cycle. Its path
    stays as relative as ``file``'s (messages name it as the user would type it)."""
    path = Path(os.path.normpath(file.parent / include))
    here = file.resolve()
    if path.resolve() in (*seen, here):
        raise InputError(str(file), "include_presets", as_written(include),
                         "a file that does not include this one", "cycle")
    if not path.is_file():
        raise InputError(str(file), "include_presets", as_written(include),
                         "a path to another space file, relative to this one", "file not found")
    return _load(path, allow_unsafe, (*seen, here), version, allow_unknown)
