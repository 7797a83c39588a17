"""What a study is judged on: the metric, one per study, stored with it.

Both metrics are recorded for every relaunch (``TrialRecord.output_tok_s`` and
``decode_tok_s``, with their per-run lists); the study's metric (``probe.metric`` when the study
began, :attr:`tuner.record.study.StudyInfo.metric`) is the one verdicts, the sampler, the run
count of ``repeats = "auto"`` and the figures use.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Metric"]


class Metric(StrEnum):
    """A study's judged metric; the value is the record field holding its median (tok/s)."""

    OUTPUT = "output_tok_s"  #: completion tokens / E2E of a run (the figure users quote)
    DECODE = "decode_tok_s"  #: 1 / TPOT of a run (prefill excluded)

    @property
    def words(self) -> str:
        """``output tok/s`` or ``decode tok/s``: the metric in a sentence."""
        return "output tok/s" if self is Metric.OUTPUT else "decode tok/s"

    @property
    def described(self) -> str:
        """The metric as the report's baseline sentence and the forest plot's title name it."""
        return "single-stream output tok/s" if self is Metric.OUTPUT else "single-stream decode tok/s (1 / TPOT)"
