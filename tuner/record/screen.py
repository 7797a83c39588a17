"""What the screen stage concluded, as the study stores it (``StudyInfo.screen``).

Written by :meth:`tuner.screen.stage.Stage.summary` after the screen's runs (and again after
each check run), read by the report's Screen section (:mod:`tuner.report.screen`). Stored as
the plain JSON of its fields (:meth:`ScreenSummary.to_json`, nested types as JSON objects);
:meth:`ScreenSummary.from_json` reads it back, unknown keys ignored and missing ones at their
defaults, so a summary any earlier format wrote reads. Sizes in bytes, times in us, rates in
tok/s, gains and noise in percent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.record.plain import known_fields

__all__ = ["RankedEntry", "ScreenBound", "ScreenExport", "ScreenSummary", "TopSet"]


@dataclass(frozen=True)
class ScreenBound:
    """The bound on what tuning could gain (:class:`tuner.screen.bound.Bound`): ``share`` of
    TPOT spent in allreduce (fraction), ``max_gain_pct`` if allreduce were free,
    ``best_gain_pct`` predicted for the best screened set, the baseline's ``baseline_tpot_s``
    (s) and ``baseline_tok_s``, ``free_allreduce_tok_s`` and ``best_tok_s``, ``reliable``
    (False when the screen overstates), ``notes`` and the ``sentence`` the report prints."""

    share: float | None = None
    max_gain_pct: float | None = None
    best_gain_pct: float | None = None
    baseline_tpot_s: float | None = None
    baseline_tok_s: float | None = None
    free_allreduce_tok_s: float | None = None
    best_tok_s: float | None = None
    reliable: bool = False
    notes: list[str] = field(default_factory=list)
    sentence: str = ""


@dataclass(frozen=True)
class ScreenExport:
    """The tuner-plugin export: ``csv`` and ``conf`` paths (empty when not written), the
    config's ``lines``, ``notes`` and the ``compatibility`` sentence (empty when unknown)."""

    csv: str = ""
    conf: str = ""
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compatibility: str = ""


@dataclass(frozen=True)
class TopSet:
    """A screened set relaunched first: its ``env`` and preset ``name`` (``screen-1``...)."""

    env: dict[str, str] = field(default_factory=dict)
    name: str = ""


@dataclass(frozen=True)
class RankedEntry:
    """One ranked screened set: ``key`` (:func:`tuner.screen.rank.screen_key`), ``env``, and
    its median out-of-place times ``decode_us`` and ``prefill_us`` (None when not screened)."""

    key: str = ""
    env: dict[str, str] = field(default_factory=dict)
    decode_us: float = 0.0
    prefill_us: float | None = None


@dataclass(frozen=True)
class ScreenSummary:
    """What the screen found.

    ``decode_bytes``/``prefill_bytes``: the sizes screened (prefill None when not);
    ``allreduces_per_token`` (None without ``[model]``); ``size_reasons``: where each size came
    from; ``runs``: screen runs made; ``ended``: why they stopped; ``untuned_us`` and
    ``untuned_drift`` (fraction, first to last untuned run); ``best_us`` and ``best_set`` (the
    fastest screened set, None without one); ``top_sets``; ``ranking`` (best first, the first
    :data:`tuner.screen.stage.RANKING_KEPT`); ``bad_sets`` (screen key -> why: wrong values);
    ``noise_pct`` (what a relaunch tells from noise, None unknown); ``bound`` (None when it does
    not apply, ``bound_note`` says why); ``export``; ``notes``.
    """

    decode_bytes: int = 0
    prefill_bytes: int | None = None
    allreduces_per_token: int | None = None
    size_reasons: list[str] = field(default_factory=list)
    runs: int = 0
    ended: str = ""
    untuned_us: float | None = None
    untuned_drift: float | None = None
    best_us: float | None = None
    best_set: dict[str, str] | None = None
    top_sets: list[TopSet] = field(default_factory=list)
    ranking: list[RankedEntry] = field(default_factory=list)
    bad_sets: dict[str, str] = field(default_factory=dict)
    noise_pct: float | None = None
    bound: ScreenBound | None = None
    bound_note: str = ""
    export: ScreenExport = field(default_factory=ScreenExport)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The plain JSON object stored (nested types as objects, keys in field order)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScreenSummary:
        """The summary :meth:`to_json` (or any earlier format) wrote. Raises TypeError when a
        part that is an object is not one."""
        values = known_fields(cls, data)
        if "top_sets" in values:
            values["top_sets"] = [TopSet(**known_fields(TopSet, t)) for t in values["top_sets"]]
        if "ranking" in values:
            values["ranking"] = [RankedEntry(**known_fields(RankedEntry, r)) for r in values["ranking"]]
        if "bound" in values:
            values["bound"] = ScreenBound(**known_fields(ScreenBound, values["bound"]))
        if "export" in values:
            values["export"] = ScreenExport(**known_fields(ScreenExport, values["export"]))
        return cls(**values)
