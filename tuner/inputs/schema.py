"""What the experiment file and the search space share: strict pydantic models, NCCL's rules
as validators, and the one adapter from ``pydantic.ValidationError`` to :class:`InputError`.

pydantic validates a whole file and reports every problem at once; the adapter turns each into
one paragraph naming the file, the dotted key (``server.env.NCCL_BUFFSIZE``,
``presets[0].env.NCCL_PROTO``), the value as the user wrote it in TOML (secrets as ``***``)
and what is accepted. "What is accepted" is the field's ``description``, or the ``accepted``
of an error raised by a validator here (:func:`problem`, :func:`detail`).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails, PydanticCustomError

from tuner.errors import InputError
from tuner.nccl import (
    DEBUG_FILE_VAR,
    FILE_VARS,
    NEWEST_VERIFIED,
    OLDEST_SUPPORTED,
    NcclVersion,
    accepted,
    check_value,
    cross_problems,
    cross_warnings,
    debug_file_warnings,
    name_warning,
    read_xml_file,
    since_text,
    unsafe_reason,
    value_since,
    value_warnings,
)
from tuner.redaction import REDACTED, argv_secrets, is_secret, redact_argv, scrub

__all__ = [
    "SECRET_ACCEPTED",
    "SECRET_WHY",
    "FileModel",
    "LoadContext",
    "PresetEnv",
    "ServerEnv",
    "as_written",
    "check_nccl",
    "check_nccl_file",
    "detail",
    "input_error",
    "input_problems",
    "load_context",
    "problem",
    "raise_all",
    "read_toml",
]


class FileModel(BaseModel):
    """A table of a user's TOML file: no unknown keys, no type coercion ("8000" is not a
    port, ``true`` is not 1), immutable once validated."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True)
class LoadContext:
    """What validators need beyond the value: passed as pydantic's validation ``context``.

    Without one (a model built in code) nothing is looked up on disk or PATH, and unsafe
    NCCL values are refused. ``check_files``: values of NCCL_TOPO_FILE/NCCL_GRAPH_FILE are
    resolved against ``file``'s folder and read as NCCL's XML (:func:`check_nccl_file`; the
    search space sets it). ``notices`` collects what was skipped (shared by copies);
    ``variable`` is the search-space variable being validated; ``version``: the NCCL release
    whose rules apply (``[nccl] version``; None: the oldest supported, the strictest);
    ``allow_unknown``: an ``NCCL_*`` name the record does not hold passes with a notice
    (``--allow-unknown``: a variable of an NCCL newer than the record).
    """

    file: Path = Path("(code)")
    allow_unsafe: bool = False
    version: NcclVersion | None = None
    allow_unknown: bool = False
    check_program: bool = False
    resolve_space: bool = False
    check_files: bool = False
    notices: list[str] = field(default_factory=list)
    variable: str = ""


def load_context(info: ValidationInfo) -> LoadContext:
    """The :class:`LoadContext` of this validation, or the default one."""
    return info.context if isinstance(info.context, LoadContext) else LoadContext()


# -- errors raised by validators -------------------------------------------------------------

def problem(accepted: str, why: str = "") -> PydanticCustomError:
    """An error for the value being validated: ``raise problem("an integer >= 2")``.

    ``accepted`` and ``why`` travel in the error's ``ctx`` to :func:`input_problems`; the
    message is for a model built in code, where the ValidationError itself is seen."""
    message = f"{why}; accepted: {accepted}" if why else f"accepted: {accepted}"
    return PydanticCustomError("input", "{message}", {"why": why, "accepted": accepted, "message": message})


def detail(loc: tuple[str | int, ...], value: object, accepted: str, why: str = "") -> InitErrorDetails:
    """One of several errors below the value being validated (``loc`` relative to it);
    raise them together with :func:`raise_all`."""
    return InitErrorDetails(type=problem(accepted, why), loc=loc, input=value)


def raise_all(title: str, details: list[InitErrorDetails]) -> None:
    """Raise every detail at once; pydantic prefixes each ``loc`` with the enclosing keys
    (a ValidationError raised in a validator joins the outer one: pydantic-core PR #510)."""
    if details:
        raise ValidationError.from_exception_data(title, details)


# -- reading ---------------------------------------------------------------------------------

def read_toml(file: Path, what: str) -> dict[str, Any]:
    """Parse a TOML file; InputError naming the file for a missing, unreadable or invalid one."""
    shown = as_written(str(file))
    try:
        return tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise InputError(str(file), "(file)", shown, f"an existing {what} TOML file", "file not found") from None
    except OSError as exc:
        raise InputError(str(file), "(file)", shown, f"a readable {what} TOML file", exc.strerror or str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(file), "(file)", shown, "valid TOML", str(exc)) from None


# -- NCCL's rules: every call into tuner.nccl is in this section -----------------------------

SECRET_ACCEPTED = "NCCL/CUDA tuning variables only"
SECRET_WHY = ("a secret (name holds TOKEN, KEY, SECRET or PASSWORD) belongs in server.env, "
              "where it is passed on but never written")
UNSAFE_ACCEPTED = "a safe-ish value, or pass --allow-unsafe"


@dataclass(frozen=True)
class NcclCheck:
    """How NCCL reads one ``name=value``: ``wrong`` (why it would be misread, else None),
    ``accepted`` (what the variable accepts), ``unsafe`` (why it can corrupt or hang, else None)."""

    wrong: str | None
    accepted: str
    unsafe: str | None


def check_nccl(name: str, text: str, ctx: LoadContext | None = None) -> NcclCheck:
    """Check one value as NCCL ``ctx.version`` parses it (NCCL src/misc/param.cc,
    src/graph/tuning.cc; rules in tuner.nccl): a misspelled or unknown NCCL name (unless
    ``ctx.allow_unknown``), a variable the known version no longer reads, or a value NCCL
    rejects or silently ignores is ``wrong``; clamps and names NCCL does not read are noted in
    ``ctx.notices``. Server flags (names starting with ``-``) are passed as written."""
    if name.startswith("-"):
        return NcclCheck(None, "a value for the server flag, or \"on\" for the flag alone", None)
    ctx = ctx or LoadContext()
    version = ctx.version
    wrong = check_value(name, text, version, allow_unknown=ctx.allow_unknown)
    since = value_since(name, text) if wrong and version is None else None
    if wrong and version is None and since is None:
        newest = check_value(name, text, NEWEST_VERIFIED, allow_unknown=ctx.allow_unknown)
        if newest and newest != wrong:  # say why the newer grammar refuses it too
            wrong = f"{wrong}; no later release reads it either: {newest}"
    if since is not None and since > OLDEST_SUPPORTED:
        # a value only a newer NCCL reads: accepted while the version is unknown, judged by
        # that release here and launched only if the baseline's NCCL is one (tuner.planning)
        wrong, version = None, since
        note = f"{ctx.file}: {name}={text} needs NCCL {since_text(since)}: launched once the baseline shows an NCCL that new"
        if note not in ctx.notices:
            ctx.notices.append(note)
    if not wrong:
        warnings = [name_warning(name, version), *value_warnings(name, text, version)]
        if name == DEBUG_FILE_VAR and text:
            warnings += debug_file_warnings(text)
        for warning in warnings:
            if warning and f"{ctx.file}: {warning}" not in ctx.notices:
                ctx.notices.append(f"{ctx.file}: {warning}")
    return NcclCheck(wrong, accepted(name, version), unsafe_reason(name, text, version=version))


def check_nccl_file(name: str, text: str, ctx: LoadContext | None = None) -> tuple[str, str | None]:
    """``(value, why)`` for a value of a file variable (:data:`tuner.nccl.FILE_VARS`:
    NCCL_TOPO_FILE, NCCL_GRAPH_FILE) when ``ctx.check_files``: a relative path is made absolute
    against the folder of ``ctx.file`` (the server runs elsewhere), then the file must exist, be
    readable and parse as the XML NCCL needs (:func:`tuner.nccl.read_xml_file`: root
    ``system``/``graphs`` with ``version="1"``, src/graph/xml.cc). ``why`` is None when it does.
    Other names, and contexts without ``check_files``, return ``(text, None)``."""
    ctx = ctx or LoadContext()
    if name not in FILE_VARS or not ctx.check_files or not text.strip():
        return text, None
    path = os.path.abspath(os.path.join(ctx.file.parent, os.path.expanduser(text)))
    _file, why = read_xml_file(name, path)
    return path, why


def check_nccl_set(env: Mapping[str, str], ctx: LoadContext | None = None) -> list[tuple[str, str, str]]:
    """Problems between the variables of one set, as ``(name, accepted, why)``; what NCCL
    only adjusts (MIN channels above MAX: "max, then min") is noted in ``ctx.notices``."""
    ctx = ctx or LoadContext()
    for _, why in cross_warnings(env, ctx.version):
        if f"{ctx.file}: {why}" not in ctx.notices:
            ctx.notices.append(f"{ctx.file}: {why}")
    return [(name, "variables NCCL can use together", why) for name, why in cross_problems(env, ctx.version)]


def _env_table(raw: Any, info: ValidationInfo, *, secrets: bool, required: bool) -> dict[str, str]:
    """Validate ``{ NAME = value }`` as NCCL would read it; every bad entry is reported.

    Integers become their decimal string; floats and booleans are refused; forcing an unsafe
    setting (LL128, NVLS, exotic algorithms) is refused unless ``allow_unsafe``.
    """
    if not isinstance(raw, dict):
        raise problem('a table such as { NCCL_PROTO = "LL" }')
    ctx = load_context(info)
    allow_unsafe = ctx.allow_unsafe
    env: dict[str, str] = {}
    details: list[InitErrorDetails] = []
    for name, value in raw.items():
        if not secrets and is_secret(name):
            details.append(detail((name,), value, SECRET_ACCEPTED, SECRET_WHY))
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            details.append(detail((name,), value, "a string or an integer"))
            continue
        text, why = check_nccl_file(name, str(value), ctx)
        check = check_nccl(name, text, ctx)
        if why or check.wrong:
            details.append(detail((name,), value, check.accepted, why or check.wrong or ""))
        elif check.unsafe and not allow_unsafe:
            details.append(detail((name,), value, UNSAFE_ACCEPTED, check.unsafe))
        else:
            env[name] = text
    for name, wanted, why in check_nccl_set(env, ctx):
        details.append(detail((name,), raw[name], wanted, why))
    raise_all("env", details)
    if required and not env:
        raise problem("at least one variable (the baseline is always run)")
    return env


def _server_env(raw: Any, info: ValidationInfo) -> dict[str, str]:
    return _env_table(raw, info, secrets=True, required=False)


def _preset_env(raw: Any, info: ValidationInfo) -> dict[str, str]:
    return _env_table(raw, info, secrets=False, required=True)


#: ``server.env``: applied to every trial; secrets (HF_TOKEN) allowed, passed on, never written.
ServerEnv = Annotated[dict[str, str], BeforeValidator(_server_env)]
#: A preset's set: tuning variables only, at least one.
PresetEnv = Annotated[dict[str, str], BeforeValidator(_preset_env)]


# -- the adapter: ValidationError -> InputError ----------------------------------------------

class AsWritten(str):
    """A value rendered as TOML, shown bare in messages (``[1, 0]``, ``"4M"``, ``***``)."""

    def __repr__(self) -> str:
        return str(self)


MISSING = AsWritten("(missing)")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def as_written(value: object, secret: bool = False) -> AsWritten:
    """``value`` as TOML text; secrets (``secret``, or secret-named keys inside a table) as ``***``."""
    return AsWritten(REDACTED if secret else _toml(value))


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = [f"{_toml_key(k)} = {REDACTED if is_secret(str(k)) else _toml(v)}" for k, v in value.items()]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: object) -> str:
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else json.dumps(text, ensure_ascii=False)


def dotted(loc: Sequence[str | int]) -> str:
    """``("presets", 0, "env", "NCCL_PROTO")`` -> ``presets[0].env.NCCL_PROTO``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _strip(tp: Any) -> Any:
    """``X | None`` -> X."""
    if get_origin(tp) in (Union, UnionType):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0] if len(args) == 1 else tp
    return tp


def _element(tp: Any) -> Any:
    """The item type of ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``."""
    args = get_args(tp)
    if get_origin(tp) is dict and args:
        return args[-1]
    if get_origin(tp) in (list, tuple) and args:
        return args[0]
    return tp


def _field_at(root: type[BaseModel], loc: Sequence[str | int]) -> tuple[FieldInfo | None, type[BaseModel], list[str]]:
    """The deepest field ``loc`` goes through, the model holding the last key it names, and
    the keys of ``loc`` that are not fields (table keys such as variable names, unknown keys)."""
    tp: Any = root
    info: FieldInfo | None = None
    holder = root
    names: list[str] = []
    for i, part in enumerate(loc):
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            holder = tp
            if not (isinstance(part, str) and part in tp.model_fields):
                names += [p for p in loc[i:] if isinstance(p, str)]
                break
            info = tp.model_fields[part]
            tp = info.annotation
        else:
            names += [part] if isinstance(part, str) else []
            tp = _element(tp)
    return info, holder, names


def _command_redacted(raw: Any) -> Any:
    """``raw`` with the secrets a command passes as ``***`` (:func:`tuner.redaction.redact_argv`):
    a list of words, or a string split as the command is (its plain words, quotes unbalanced)."""
    if isinstance(raw, list | tuple) and all(isinstance(a, str) for a in raw):
        return redact_argv(raw)
    if isinstance(raw, str) and " " in raw.strip():
        try:
            words = shlex.split(raw)
        except ValueError:
            words = raw.split()
        return scrub(raw, argv_secrets(words))
    return raw


def input_problems(file: str, exc: ValidationError, root: type[BaseModel],
                   prefix: tuple[str | int, ...] = ()) -> list[InputError]:
    """One :class:`InputError` per problem of ``exc`` (validation of ``root`` at ``prefix``)."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        info, holder, names = _field_at(root, loc)
        ctx = err.get("ctx") or {}
        value = as_written(_command_redacted(err["input"]), secret=any(is_secret(n) for n in names))
        why = ""
        if err["type"] == "input":
            accepted, why = ctx["accepted"], ctx["why"]
        elif err["type"] == "extra_forbidden":
            accepted, why = f"the keys {', '.join(sorted(holder.model_fields))}", "unknown key"
        else:
            accepted = (info.description if info and info.description else err["msg"])
            if err["type"] == "missing":
                value = MISSING
        problems.append(InputError(file, dotted(prefix + loc), value, accepted, why))
    return problems


def input_error(file: str, exc: ValidationError, root: type[BaseModel]) -> InputError:
    """Every problem of ``exc`` in one :class:`InputError` (one paragraph each)."""
    return InputError.combine(input_problems(file, exc, root))
