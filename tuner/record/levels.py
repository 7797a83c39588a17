"""One level of the concurrency table, as the bench measures it and the trial record stores it.

Stored in ``TrialRecord.concurrency`` (one per level, in the order measured) as the plain JSON
of its fields (:meth:`LevelResult.to_json`), which is also what ``nccl-tune bench --json``
prints and what trials.csv's ``concurrency`` column holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.record.plain import known_fields

__all__ = ["LevelResult"]


@dataclass
class LevelResult:
    """One concurrency level (units: s, tok/s).  ``total`` = concurrency x requests.

    ``errors``: one short string per failed request; ``wall_s``: from the workers' start to the
    level's last request; ``aggregate_tok_s``: completion tokens of the ok requests / ``wall_s``;
    ``latency_*_s``: E2E latency of the ok requests (None when none succeeded);
    ``completion_tokens``: their sum; ``ttft_avg_s``: mean TTFT of those whose timing is
    measurable; ``tokens_counted``: True when a token count was a guess (definitions:
    :mod:`tuner.measure.bench`).
    """

    concurrency: int
    ok: int
    total: int
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    aggregate_tok_s: float = 0.0
    latency_avg_s: float | None = None
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    completion_tokens: int = 0  # sum over ok requests
    ttft_avg_s: float | None = None
    tokens_counted: bool = False

    def to_json(self) -> dict[str, Any]:
        """This level as a plain dict (field names as above; s and tok/s)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LevelResult:
        """The level :meth:`to_json` wrote (unknown keys ignored, missing ones at their
        defaults; ``ok`` and ``total`` 0 when absent). Raises TypeError for a non-object and
        KeyError without ``concurrency``."""
        values = known_fields(cls, data)
        return cls(**{"ok": 0, "total": 0, **values, "concurrency": int(data["concurrency"])})
