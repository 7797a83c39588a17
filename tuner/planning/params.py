"""A set as Optuna parameters and back: environment variables plus server flags.

A searched name that starts with ``-`` is a server flag: ``on`` adds the flag alone
(``--disable-custom-all-reduce``), another value adds flag and value (``--max-num-seqs 4``);
``unset`` (:data:`tuner.inputs.space.UNSET`) leaves the name out. A set about to be launched
is one :class:`Launch`, made once from its parameters and carried to its record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tuner.inputs import UNSET
from tuner.redaction import redact

__all__ = ["Launch", "flag_params", "split_params"]

#: Value of a flag-type name that adds the flag alone (e.g. ``--disable-custom-all-reduce``).
FLAG_ON = "on"


def split_params(params: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(env, flags)`` of a categorical point: unset names dropped, flag names to argv items."""
    env: dict[str, str] = {}
    flags: list[str] = []
    for name, value in params.items():
        if value == UNSET:
            continue
        if name.startswith("-"):
            flags += [name] if value == FLAG_ON else [name, value]
        else:
            env[name] = str(value)
    return env, flags


def flag_params(flags: list[str]) -> dict[str, str]:
    """Inverse of the flag part of :func:`split_params`: ``["--x", "--y", "3"]`` to params."""
    out: dict[str, str] = {}
    i = 0
    while i < len(flags):
        name = flags[i]
        if i + 1 < len(flags) and not flags[i + 1].startswith("-"):
            out[name] = flags[i + 1]
            i += 2
        else:
            out[name] = FLAG_ON
            i += 1
    return out


@dataclass(frozen=True)
class Launch:
    """One set as the night launches it, made once from its Optuna ``params``: ``env`` (the
    real values the server gets), ``flags`` (server argv items), ``key`` (its identity to NCCL,
    the planner's ``key_of``) and ``shown_env`` (``env`` with secrets as ``***``, what the
    record and every printed line hold)."""

    params: Mapping[str, str]
    env: Mapping[str, str]
    flags: tuple[str, ...]
    key: str
    shown_env: Mapping[str, str]

    @classmethod
    def of(cls, params: Mapping[str, str], key_of: Callable[[dict[str, str], list[str]], str]) -> Launch:
        """The launch of ``params`` (:func:`split_params`), keyed by ``key_of(env, flags)``."""
        env, flags = split_params(params)
        return cls(dict(params), env, tuple(flags), key_of(env, flags), redact(env))
