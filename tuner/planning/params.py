"""A set as Optuna parameters and back: environment variables plus server flags.

A searched name that starts with ``-`` is a server flag: ``on`` adds the flag alone
(``--disable-custom-all-reduce``), another value adds flag and value (``--max-num-seqs 4``);
``unset`` (:data:`tuner.inputs.space.UNSET`) leaves the name out.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.inputs.space import UNSET

__all__ = ["FLAG_ON", "flag_params", "split_params"]

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
