"""The sets of a search space, counted by identity: how many the sampler can still draw.

A space of categorical variables (each also unset) has ``prod(len(values))`` points; many are
one set to NCCL (:mod:`tuner.planning.identity`). Small spaces are enumerated to know, without
asking the sampler, that every set is measured, in flight or cannot run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping

from tuner.planning.params import split_params

__all__ = ["COUNT_LIMIT", "open_keys", "point_count", "point_sets"]

#: Spaces up to this many points are enumerated during the night to tell that nothing is left.
ENUMERABLE_POINTS = 20_000
#: Above this many points ``--dry-run`` does not count the distinct sets one by one.
COUNT_LIMIT = 200_000


def point_count(choices: Mapping[str, tuple[str, ...]]) -> int:
    """Points of the space (``unset`` counted as a value)."""
    return math.prod(len(v) for v in choices.values())


def point_sets(choices: Mapping[str, tuple[str, ...]]) -> Iterator[tuple[dict[str, str], list[str]]]:
    """Every point of the space as ``(env, flags)`` (:func:`tuner.planning.params.split_params`)."""
    names = list(choices)
    for combo in itertools.product(*choices.values()):
        yield split_params(dict(zip(names, combo, strict=True)))


def open_keys(choices: Mapping[str, tuple[str, ...]], key_of: Callable[[dict[str, str], list[str]], str],
              problems: Callable[[dict[str, str]], list[str]], done: set[str]) -> set[str] | None:
    """Keys of the sets of the space that are not in ``done`` (measured, decided or in flight)
    and may be launched; None above :data:`ENUMERABLE_POINTS` points."""
    if point_count(choices) > ENUMERABLE_POINTS:
        return None
    found: set[str] = set()
    for env, flags in point_sets(choices):
        key = key_of(env, flags)
        if key not in done and key not in found and not problems(env):
            found.add(key)
    return found
