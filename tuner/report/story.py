"""The judgement's numbers as every output shows them: one :class:`Story` per judged group of relaunches.

:func:`story_of` copies from a :class:`tuner.judging.judge.Judgement` what the report says and
draws: the baseline's launches (trial and robust level), its level and drift, each set's ratio
to the baseline with its 95 % interval and verdict, the sets in order (best first) and the best
set, the one the verdict names. It is made once, where the night is judged
(:func:`tuner.report.frame.judged_trials`, :func:`tuner.report.build.night_report`), and handed
to the tables and every figure beside the trials frame, so none of them computes a level, a
drift or a ranking of its own, and the verdict paragraph words the judgement the story was
copied from. :func:`write_story` keeps it beside trials.csv as ``judgement.json``
(:data:`STORY_FILE`); :func:`read_story` reads it back for ``notebooks/analysis.ipynb``, which
never judges again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.judging import Judgement, gain_pct
from tuner.record import Metric, Verdict

__all__ = [
    "STORY_FILE",
    "SetFigures",
    "Story",
    "read_story",
    "story_of",
    "write_story",
]

#: The story's file beside trials.csv.
STORY_FILE = "judgement.json"


@dataclass(frozen=True)
class SetFigures:
    """One tuned set as the judgement left it: ``key`` (:func:`tuner.record.set_key`), its
    ``env`` and ``flags``, the ``trials`` of its ok launches, ``ratio`` (set level / baseline
    level interpolated at its launches, on all its launches) with its 95 % interval
    ``low``..``high`` (NaN when none) and its ``verdict``."""

    key: str
    env: Mapping[str, str]
    flags: tuple[str, ...]
    trials: tuple[int, ...]
    ratio: float
    low: float
    high: float
    verdict: Verdict

    @property
    def gain_pct(self) -> float:
        """:func:`tuner.judging.stats.gain_pct` of :attr:`ratio`."""
        return gain_pct(self.ratio)


@dataclass(frozen=True)
class Story:
    """The numbers of one judgement that the report shows (see the module docstring).

    ``baseline_trials``/``baseline_levels``: each ok baseline launch, oldest first, and its
    robust level (tok/s); ``baseline_level``: their geometric mean (tok/s, NaN without one);
    ``drift``: max/min - 1 of the levels; ``drift_trend``: the fitted change over the night
    (fractions); ``launch_noise``: the launch-to-launch SD every interval includes (fraction,
    NaN without a baseline); ``sets``: best first (:meth:`tuner.judging.judge.Judgement.order`);
    ``best``: the key of the set the verdict names (None: none); ``confirmed``: True when its
    gain held on fresh launches (use it), False when that failed, None before; ``level``: the
    concurrency judged (1: the single-stream probe).
    """

    metric: Metric
    min_effect: float
    baseline_trials: tuple[int, ...]
    baseline_levels: tuple[float, ...]
    baseline_level: float
    drift: float
    drift_trend: float
    launch_noise: float
    sets: tuple[SetFigures, ...] = field(default_factory=tuple)
    best: str | None = None
    confirmed: bool | None = None
    level: int = 1

    def order(self) -> list[str]:
        """The set keys, best first."""
        return [s.key for s in self.sets]

    def rank(self, key: str) -> int:
        """The place of set ``key`` in :meth:`order` (0 = best); after every set when unknown."""
        return next((i for i, s in enumerate(self.sets) if s.key == key), len(self.sets))

    def find(self, key: str) -> SetFigures | None:
        """The set of ``key``, or None."""
        return next((s for s in self.sets if s.key == key), None)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (NaN as null, the verdict and metric as their values)."""
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None
        return {"metric": self.metric.value, "min_effect": self.min_effect, "level": self.level,
                "baseline_trials": list(self.baseline_trials), "baseline_levels": list(self.baseline_levels),
                "baseline_level": num(self.baseline_level), "drift": self.drift, "drift_trend": self.drift_trend,
                "launch_noise": num(self.launch_noise), "best": self.best, "confirmed": self.confirmed,
                "sets": [{"key": s.key, "env": dict(s.env), "flags": list(s.flags), "trials": list(s.trials),
                          "ratio": num(s.ratio), "low": num(s.low), "high": num(s.high), "verdict": s.verdict.value}
                         for s in self.sets]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Story:
        """The story :meth:`to_json` wrote. Raises KeyError or ValueError for other data."""
        def num(v: float | None) -> float:
            return math.nan if v is None else float(v)
        sets = tuple(SetFigures(str(s["key"]), dict(s["env"]), tuple(s["flags"]), tuple(int(t) for t in s["trials"]),
                                num(s["ratio"]), num(s["low"]), num(s["high"]), Verdict(s["verdict"]))
                     for s in data["sets"])
        return cls(Metric(data["metric"]), float(data["min_effect"]), tuple(int(t) for t in data["baseline_trials"]),
                   tuple(float(v) for v in data["baseline_levels"]), num(data["baseline_level"]),
                   float(data["drift"]), float(data["drift_trend"]), num(data["launch_noise"]), sets,
                   data["best"], data["confirmed"], int(data["level"]))


def story_of(judgement: Judgement, *, headline: Judgement | None = None) -> Story:
    """The :class:`Story` of ``judgement``. ``headline``: the judgement "use it" rests on when
    it is another concurrency level's (``probe.judge_concurrency``): the best set and whether
    it held are then that one's, every number the single stream's."""
    j = judgement
    h = headline or j
    order = j.order()
    if h.winner in order:  # the set the verdict names comes first
        order.remove(h.winner)
        order.insert(0, h.winner)
    sets = []
    for key in order:
        s = j.sets[key]
        c = s.comparison
        nan = math.nan
        sets.append(SetFigures(key, dict(s.env), tuple(s.flags), tuple(s.trials), c.ratio if c else nan,
                               c.ci_low if c else nan, c.ci_high if c else nan, s.verdict))
    noise = j.noise.sigma if j.noise is not None else math.nan
    return Story(j.metric, j.min_effect, tuple(j.baseline_trials), tuple(j.baseline_levels), j.baseline_level,
                 j.drift, j.drift_trend, noise, tuple(sets), h.winner, h.confirmed, j.level)


def write_story(story: Story, path: Path) -> None:
    """Write ``story`` to ``path`` as JSON. Raises OSError when it cannot be written."""
    path.write_text(json.dumps(story.to_json(), indent=1) + "\n")


def read_story(path: Path | str) -> Story:
    """The story :func:`write_story` wrote to ``path``. Raises OSError (FileNotFoundError when
    there is none) and ValueError for a file that is not one."""
    try:
        return Story.from_json(json.loads(Path(path).read_text()))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a judgement.json of nccl-tune ({exc!r})") from exc
