"""Stored dataclasses read back from plain JSON: the fields a class knows, nothing else.

Every stored type of :mod:`tuner.record` is written as the plain JSON of its fields
(:func:`dataclasses.asdict`) and read back through :func:`known_fields`, so a key an older or a
newer nccl-tune wrote that this one does not know is ignored, and one it did not write keeps the
field's default (how a later format adds a field: see :mod:`tuner.record.format`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["known_fields"]


def known_fields(cls: type, data: Mapping[str, Any] | None) -> dict[str, Any]:
    """The items of ``data`` (a JSON object, or None for none) that name a field of the
    dataclass ``cls`` and are not None (None keeps the field's default). Raises TypeError when
    ``data`` is not a mapping."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise TypeError(f"a stored {cls.__name__} is a JSON object, not {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names and v is not None}
