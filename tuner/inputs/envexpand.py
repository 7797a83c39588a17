"""``${NAME}`` in an experiment file: one file for every host of a study.

A string value of the experiment file may name environment variables of the runner, e.g.
``port = "${PORT}"`` or ``env = { CUDA_VISIBLE_DEVICES = "${GPUS}" }``; they are replaced when
the file is loaded, before it is validated. Only the braced form is read (``$PORT`` stays as
written, as does ``{port}``, which the server command fills in itself); ``$$`` stands for one
``$``. A value that is a reference and nothing else, for a numeric key (``port``,
``ready_timeout_s``...), becomes that number. A variable that is not set is an error naming
the file, the key and the variable: a worker must never start with an empty port or GPU list.

Table keys are never expanded. What the file says before expansion stays available
(:attr:`tuner.inputs.config.ExperimentConfig.written`): the study's resume fingerprint and the host
type are taken of it, so hosts whose files differ only in such values join one study.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tuner.errors import InputError

__all__ = ["expand", "expand_text", "references"]

_REF = re.compile(r"\$\$|\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ACCEPTED = "a value whose ${NAME} references name set environment variables (write $$ for a literal $)"

#: ``numeric(dotted_key)``: int or float for a numeric key of the file, else None.
NumericOf = Callable[[str], type | None]


def references(text: str) -> list[str]:
    """The variable names ``text`` refers to with ``${NAME}`` (``$$`` is not one)."""
    return [m.group(1) for m in _REF.finditer(text) if m.group(0) != "$$"]


def expand_text(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with every ``${NAME}`` replaced by ``environ[NAME]`` and ``$$`` by ``$``;
    returns it and the problems found (a name that is unset or not a valid name)."""
    problems: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if not _NAME.fullmatch(name):
            problems.append(f"${{{name}}} is not a variable name (letters, digits and _, not first a digit)")
            return m.group(0)
        if name not in environ:
            problems.append(f"the environment variable {name} is not set")
            return m.group(0)
        return environ[name]

    return _REF.sub(sub, text), problems


def expand(data: Any, environ: Mapping[str, str], file: str, numeric: NumericOf = lambda key: None,
           key: str = "") -> Any:
    """A copy of the parsed TOML ``data`` with every string value expanded (see the module
    docstring); ``numeric`` says which dotted keys take numbers. Raises InputError listing
    every unset or malformed reference, and every reference to a numeric key whose value is
    not a number, with the file and the dotted key."""
    problems: list[InputError] = []
    out = _walk(data, environ, file, numeric, key, problems)
    if problems:
        raise InputError.combine(problems)
    return out


def _walk(value: Any, environ: Mapping[str, str], file: str, numeric: NumericOf, key: str,
          problems: list[InputError]) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, environ, file, numeric, f"{key}.{k}" if key else str(k), problems)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, environ, file, numeric, f"{key}[{i}]", problems) for i, v in enumerate(value)]
    if not isinstance(value, str) or "$" not in value:
        return value
    text, found = expand_text(value, environ)
    problems += [InputError(file, key, value, ACCEPTED, why) for why in found]
    kind = numeric(key)
    whole = _REF.fullmatch(value)
    if found or kind is None or whole is None or whole.group(0) == "$$":
        return text
    try:
        return kind(text)
    except ValueError:
        problems.append(InputError(file, key, f"{value} = {text!r}", f"{'an integer' if kind is int else 'a number'}",
                                   f"the environment variable {whole.group(1)} holds {text!r}"))
        return text
