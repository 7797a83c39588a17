"""The night's story as one typed value: built once from the judgement, rendered three ways.

:func:`tuner.report.build.night_report` judges a study's records once and puts what the report
says here: per judged group of relaunches (the study's, or one host type's) a :class:`Part`
with its trials table, its :class:`tuner.report.story.Story` (the decision: the baseline, each
set's ratio and interval, the best set and whether it held), its verdict paragraph, its "Use
it" lines, its figures and its sections; then the sections about the whole night
(:class:`NightReport`). Every section is made of :class:`Block` values (a heading, a paragraph,
a list, a table, code, a figure) built directly from the judgement and the records. The
renderers read this value and nothing else: :func:`tuner.report.markdown.report_markdown`
(report.md), :func:`tuner.report.page.report_html` (report.html) and
:func:`tuner.report.text.print_results` (the terminal). No document is read back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from tuner.record import StudyInfo
from tuner.report.decision import Decision, decide
from tuner.report.frame import env_text, set_text
from tuner.report.story import Story

__all__ = ["FIGURE_SECTIONS", "Block", "Figure", "NightReport", "Part", "Section", "decision_blocks", "table_block"]

#: The report's section of each figure, in report order: file stem -> (heading, alt text).
FIGURE_SECTIONS: dict[str, tuple[str, str]] = {
    "trials_vs_baseline": ("Trials vs baseline", "trials vs baseline"),
    "variable_effects": ("Effect of each variable", "variable effects"),
    "history": ("History", "history"),
    "baselines": ("Baseline drift", "baselines"),
    "concurrency": ("Concurrency", "concurrency"),
}

#: What a block is.
BlockKind = Literal["heading", "paragraph", "list", "table", "code", "html", "figure"]


@dataclass(frozen=True)
class Block:
    """One block of a section: ``kind``; ``text`` (a heading's or paragraph's words with the
    report's two inline marks, ```code``` and ``**bold**``; the code; the HTML; a figure's alt
    text); ``level`` (a heading's: 3 for a sub-heading); ``items`` (a list's entries);
    ``header`` and ``rows`` (a table's cells as shown); ``stem`` (a figure's file stem) and
    ``src`` (its PNG path relative to report.md); ``lang`` (a code block's language)."""

    kind: BlockKind
    text: str = ""
    level: int = 0
    items: tuple[str, ...] = ()
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    stem: str = ""
    src: str = ""
    lang: str = ""


@dataclass(frozen=True)
class Section:
    """One titled section: its ``id`` in report.html, its ``title`` (the heading, which the
    renderer puts at its own level) and its ``blocks``."""

    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Figure:
    """One figure written beside report.md: its file ``stem`` (``trials_vs_baseline``; its
    heading and alt text are :data:`FIGURE_SECTIONS`'), its ``png`` path relative to report.md
    (the SVG beside it) and ``svg``, the SVG document its file holds (inlined by report.html)."""

    stem: str
    png: str
    svg: str


@dataclass(frozen=True, eq=False)
class Part:
    """One judged group of relaunches: the study's, or one host type's of a study measured on
    several (each against its own baseline).

    ``host_type`` (``""``: not recorded) and ``title`` (its heading, ``Host type 1: `...```;
    empty for a study of one type); ``folder``: where its figures are, relative to report.md;
    ``trials``: its relaunches as a :func:`tuner.report.frame.trials_frame`; ``story``: the
    judgement its rows were judged by; ``verdict``: its verdict text (led by its host type when
    there are several): the decision's line, its reasons, then ``details``, the longer verdict
    paragraph; ``decision``: the :class:`tuner.report.decision.Decision` every view shows first;
    ``use``: the ready-to-paste lines of the set the decision recommends (empty when none); ``table``: the trials in the judgement's order; ``figures``: in
    report order; ``levels``: the per-concurrency-level section; ``screen``: the screen's
    section (a study of one type only)."""

    host_type: str
    title: str
    folder: str
    trials: pd.DataFrame
    story: Story
    verdict: str
    use: tuple[str, ...]
    table: Block
    figures: tuple[Figure, ...] = ()
    levels: Section | None = None
    screen: Section | None = None
    decision: Decision = field(default_factory=lambda: decide(None, StudyInfo()))
    details: str = ""

    def figure(self, stem: str) -> Figure | None:
        """The figure of file stem ``stem``, or None when it was not drawn."""
        return next((f for f in self.figures if f.stem == stem), None)


@dataclass(frozen=True, eq=False)
class NightReport:
    """The whole report of a study: its name ``study``; its ``parts`` (one per host type,
    none before any relaunch); ``verdict``: the verdict text (the part's paragraph, or each
    type's one after the other); ``intro``: the sentence before the verdicts of several types;
    the night's sections (None when they have nothing to say): ``triage`` (NCCL's model of the
    machine), ``p2p`` (the host's P2P health: what blocks GPU P2P, with its fix), ``proof`` (what NCCL echoed), ``not_measured`` (the sets recorded without a
    launch), ``failed`` (the failed relaunches); ``closing``: why the sweep stopped and how to
    open the study; ``trials``: every relaunch (the parts' rows) and ``skipped``: the sets not
    measured, the rows of trials.csv."""

    study: str
    parts: tuple[Part, ...]
    verdict: str
    trials: pd.DataFrame
    skipped: pd.DataFrame
    closing: tuple[Block, ...]
    intro: str = ""
    triage: Section | None = None
    p2p: Section | None = None
    proof: Section | None = None
    not_measured: Section | None = None
    failed: Section | None = None

    @property
    def several(self) -> bool:
        """True for a study measured on several host types."""
        return len(self.parts) > 1

    @property
    def empty(self) -> bool:
        """True before any relaunch was recorded."""
        return all(p.trials.empty for p in self.parts)

    def to_json(self, files: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The answer of ``sweep --json`` and ``check --json``: the study, the decision (kind,
        line, reasons, gates), the recommended set or null, each set's ratio to the baseline
        with its 95 % interval and verdict, and ``files`` (name -> path of the report's files).
        A study of several host types has one entry per type under ``host_types``, and the
        first type's decision at the top (NaN as null)."""
        parts = [_part_json(p) for p in self.parts]
        first = parts[0] if parts else _part_json(None)
        out = {"study": self.study, **{k: v for k, v in first.items() if k != "host_type"},
               "files": dict(files or {})}
        if self.several:
            out["host_types"] = parts
        return out


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _part_json(part: Part | None) -> dict[str, Any]:
    """One part's decision, recommended set and sets as :meth:`NightReport.to_json` writes them."""
    d = part.decision if part is not None else decide(None, StudyInfo())
    story = part.story if part is not None else None
    sets = [{"key": x.key, "set": set_text(dict(x.env), list(x.flags)), "env": dict(x.env), "flags": list(x.flags),
             "trials": list(x.trials), "ratio": _num(x.ratio), "low": _num(x.low), "high": _num(x.high),
             "gain_pct": _num(x.gain_pct), "verdict": x.verdict.value} for x in (story.sets if story else ())]
    said = d.to_json()
    return {"host_type": part.host_type if part is not None else "",
            "decision": {"kind": d.kind, "line": d.line, "reasons": list(d.reasons)},
            "recommended": said["recommended"], "use": list(part.use) if part is not None else [],
            "gates": said["gates"], "sets": sets}


def _cell(v: object) -> str:
    """A table cell as the report shows it: floats to 3 decimals below 10, 1 above, NaN/None
    empty, a set as ``NAME=value`` words."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, dict):
        return env_text(v)
    return str(v)


def table_block(df: pd.DataFrame, columns: Sequence[str] | None = None) -> Block:
    """A table block of ``df``'s ``columns`` (default: all), its cells as :func:`_cell` shows them."""
    cols = list(columns if columns is not None else df.columns)
    return Block("table", header=tuple(map(str, cols)),
                 rows=tuple(tuple(_cell(v) for v in row) for row in df[cols].itertuples(index=False)))


def decision_blocks(part: Part) -> tuple[Block, ...]:
    """The verdict of one ``part`` as report.md and report.html show it: the decision's line in
    bold, its reasons, then the longer paragraph (``details``); the verdict text as one
    paragraph for a part built without them."""
    if not part.details:
        return (Block("paragraph", part.verdict),)
    d = part.decision
    reasons = (Block("paragraph", " ".join(d.reasons)),) if d.reasons else ()
    return (Block("paragraph", f"**{d.line}.**"), *reasons, Block("paragraph", part.details))
