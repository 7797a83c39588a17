"""report.html: the whole report in one file to open in a browser or send, figures inlined as SVG.

Nothing here judges or words anything: the verdict paragraph, the "Use it" lines, the tables and
the screen, proof and per-level sections are the very lines report.md is made of
(:mod:`tuner.report.text`, :mod:`tuner.report.screen`, :mod:`tuner.report.proof`, read back by
:mod:`tuner.report.blocks`), the summary's numbers are the frame's story's
(:func:`tuner.report.frame.frame_story`), and each figure is the SVG text of the figure its PNG
was saved from (:func:`tuner.report.svg.inline_svg`). The order is a reader's: the verdict and
the forest plot first, then the table of every trial, the screen, the proof, the baselines, the
other figures, what was not measured or failed. The page is made by Jinja2 (autoescape on) from
``templates/report.html.j2`` beside this module; its CSS is inline, it loads nothing (no script,
font or image from anywhere), and it is one column on a narrow screen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from tuner.judging import gain_pct
from tuner.record import StudyInfo
from tuner.report.blocks import Block, markdown_blocks, split_sections
from tuner.report.frame import env_text, frame_story
from tuner.report.style import verdict_words
from tuner.report.svg import inline_svg
from tuner.report.text import (
    FIGURE_SECTIONS,
    closing_markdown,
    failed_markdown,
    markdown_table,
    summary_table,
    triage_markdown,
    use_lines,
)

__all__ = ["HTML_FILE", "SECTION_IDS", "Fact", "PagePart", "PageSection", "page_sections", "report_html",
           "write_report_html"]

#: The page's file name, beside report.md.
HTML_FILE = "report.html"
#: Section ids of report.html by report.md heading (the others: the heading in lower case, dashed).
SECTION_IDS: dict[str, str] = {
    "Screen": "screen",
    "Proof that each set reached NCCL": "proof",
    "Sets not measured": "not-measured",
    "NCCL's model of the machine": "machine",
    "Failed trials": "failed",
}
_FIGURE_IDS = {"trials_vs_baseline": "forest", "variable_effects": "effects", "history": "history",
               "baselines": "baselines", "concurrency": "concurrency"}
_MORE_FIGURES = ("variable_effects", "history", "concurrency")
_TEMPLATE = "report.html.j2"


@dataclass(frozen=True)
class PagePart:
    """One judged group of relaunches: the study's, or one host type's of a study measured on
    several. ``df``: its trials frame (:func:`tuner.report.frame.trials_frame`); ``verdict``: its
    verdict paragraph as report.md has it; ``figures``: each figure's SVG document by file stem
    (:func:`tuner.report.plots.save_figures`'s ``svgs``, the screen's under
    :data:`tuner.report.screen.FIGURE`); ``levels``: its "Per concurrency level" lines
    (:func:`tuner.report.text.levels_markdown`); ``screen``: the screen's lines
    (:func:`tuner.report.screen.screen_markdown`); ``title``: the host type's heading (empty
    for a study of one type)."""

    df: pd.DataFrame
    verdict: str
    figures: Mapping[str, str] = field(default_factory=dict)
    levels: Sequence[str] = ()
    screen: Sequence[str] = ()
    title: str = ""


@dataclass(frozen=True)
class PageSection:
    """One ``<section>`` of report.html: its ``id``, its heading ``title`` (none when empty), its
    ``blocks`` and its heading ``level`` (2, or 3 inside a host type's part)."""

    id: str
    title: str
    blocks: tuple[Block, ...]
    level: int = 2


@dataclass(frozen=True)
class Fact:
    """One line of the summary beside the verdict: ``label`` and ``value`` (text)."""

    label: str
    value: str


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


def _pct(ratio: float) -> str:
    return f"{gain_pct(ratio):+.1f} %"


def _facts(part: PagePart) -> list[Fact]:
    """The summary of ``part``: the baseline's level, the relaunches, the best set with its
    ratio, interval and verdict, and whether it held; every number the story's."""
    if part.df.empty:
        return []
    story = frame_story(part.df)
    facts = [Fact("relaunches", str(len(part.df)))]
    if math.isfinite(story.baseline_level):
        facts.insert(0, Fact("baseline", f"{story.baseline_level:.1f} {story.metric.described}"))
    best = story.find(story.best) if story.best else None
    if best is not None:
        ci = f" (95 % CI {_pct(best.low)}..{_pct(best.high)})" if math.isfinite(best.low) else ""
        facts.append(Fact("best set", env_text(dict(best.env)) + (" " + " ".join(best.flags) if best.flags else "")))
        facts.append(Fact("its change", (_pct(best.ratio) if math.isfinite(best.ratio) else "?") + ci))
        facts.append(Fact("its verdict", verdict_words(best.verdict, story.min_effect)))
        held = {True: "held on fresh launches: use it", False: "did not hold on fresh launches",
                None: "not confirmed yet"}[story.confirmed]
        facts.append(Fact("confirmation", held))
    return facts


def _figure(part: PagePart, stem: str, key: str, svgs: dict[str, Markup], alt: str) -> Block | None:
    """A figure block of ``part``'s figure ``stem``, its inline SVG put in ``svgs`` under ``key``;
    None when the part has no such figure."""
    doc = part.figures.get(stem)
    if doc is None:
        return None
    svgs[key] = Markup(inline_svg(doc, f"{_slug(key)}-", alt))  # matplotlib's own SVG, trusted
    return Block("figure", alt, stem=key)


def _with_figures(blocks: Sequence[Block], part: PagePart, k: str, svgs: dict[str, Markup]) -> tuple[Block, ...]:
    """``blocks`` with each figure link replaced by its inline figure (dropped when none)."""
    out = []
    for b in blocks:
        if b.kind == "figure":
            fig = _figure(part, b.stem, f"{b.stem}{k}", svgs, b.text)
            if fig is not None:
                out.append(fig)
        else:
            out.append(b)
    return tuple(out)


def _line_sections(lines: Sequence[str], part: PagePart, k: str, svgs: dict[str, Markup],
                   level: int = 2) -> list[PageSection]:
    """Sections of report.md ``lines``, cut at their ``##`` headings."""
    out = []
    for title, blocks in split_sections(markdown_blocks(lines)):
        if blocks or title:
            out.append(PageSection(SECTION_IDS.get(title, _slug(title or "notes")) + k, title,
                                   _with_figures(blocks, part, k, svgs), level))
    return out


def page_sections(parts: Sequence[PagePart], info: StudyInfo, *, after: Sequence[str] = ()
                  ) -> tuple[list[PageSection], dict[str, Markup]]:
    """The sections of report.html in order and the inline SVG of each figure block (by its
    block's ``stem``). ``parts``: one per host type (one for most studies); ``after``: report.md's
    proof and sets-not-measured lines (:func:`tuner.report.proof.proof_markdown`,
    :func:`tuner.report.text.not_measured_markdown`)."""
    svgs: dict[str, Markup] = {}
    several = len(parts) > 1
    verdict: list[Block] = []
    for part in parts:
        verdict.append(Block("paragraph", part.verdict))
        use = use_lines(part.df, info) if not part.df.empty else []
        if use:
            verdict += [Block("heading", f"Use it{' (' + part.title + ')' if several else ''}", level=3),
                        Block("code", "\n".join(use))]
    if all(p.df.empty for p in parts):
        verdict = [Block("paragraph", "No trial recorded yet.")]
    sections = [PageSection("verdict", "Verdict", tuple(verdict))]
    level = 3 if several else 2
    tail: list[PageSection] = []
    for n, part in enumerate(parts, 1):
        if part.df.empty:
            continue
        k = f"-{n}" if several else ""
        if several:
            sections.append(PageSection(f"type{k}", part.title, ()))

        def fig(stem: str, part: PagePart = part, k: str = k) -> PageSection | None:
            heading, alt = FIGURE_SECTIONS[stem]
            block = _figure(part, stem, f"{stem}{k}", svgs, alt)
            return PageSection(_FIGURE_IDS[stem] + k, heading, (block,), level) if block is not None else None

        table = markdown_blocks([markdown_table(summary_table(part.df))])
        levels = markdown_blocks(part.levels)
        head = [fig("trials_vs_baseline"),
                PageSection(f"sets{k}", "Every trial, in the forest plot's order", (*table, *levels), level)]
        rest = [fig("baselines"), *(fig(stem) for stem in _MORE_FIGURES)]
        sections += [s for s in head if s is not None]
        screen = _line_sections(part.screen, part, k, svgs, level)
        if several:
            sections += screen + [s for s in rest if s is not None]
        else:  # the screen and the proof come before the baselines
            sections += screen
            sections += _line_sections(after, part, k, svgs)
            tail = [s for s in rest if s is not None]
    if several:
        tail = _line_sections(after, parts[0], "", svgs)
    sections += tail
    everything = pd.concat([p.df for p in parts if not p.df.empty] or [pd.DataFrame()], ignore_index=True)
    if not everything.empty:
        sections += _line_sections(triage_markdown(info), parts[0], "", svgs)
        sections += _line_sections(failed_markdown(everything.sort_values("trial"), host_type=several), parts[0],
                                   "", svgs)
    sections += [PageSection("closing", "", tuple(markdown_blocks(closing_markdown(info))))]
    return sections, svgs


def _inline(text: str) -> Markup:
    """``text`` escaped, with report.md's two inline marks shown: ```code``` and ``**bold**``."""
    out = str(escape(text))
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return Markup(out)  # escaped above


def _cell(text: str) -> Markup:
    """A table cell as :func:`_inline` shows it, with a break allowed after ``_``, ``=`` and ``,``:
    a variable name wraps there (``CUDA_DEVICE_MAX_<wbr>CONNECTIONS``), never inside a word."""
    return Markup(re.sub(r"(?<=[_=,])(?=[^\s<])", "<wbr>", str(_inline(text))))  # after escaping


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("tuner.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["inline"] = _inline
    env.filters["cell"] = _cell
    return env


def report_html(parts: Sequence[PagePart], info: StudyInfo, study_name: str, *, after: Sequence[str] = ()) -> str:
    """The text of report.html for ``parts`` (see :class:`PagePart`; ``after``: as
    :func:`page_sections`). Raises jinja2.TemplateNotFound when the package was installed
    without its templates."""
    sections, svgs = page_sections(parts, info, after=after)
    summaries = [(p.title, _facts(p)) for p in parts]
    return _environment().get_template(_TEMPLATE).render(
        study=study_name, sections=sections, svgs=svgs, summaries=[s for s in summaries if s[1]],
        nav=[s for s in sections if s.title and s.level == 2])


def write_report_html(path: Path, parts: Sequence[PagePart], info: StudyInfo, study_name: str, *,
                      after: Sequence[str] = ()) -> Path:
    """Write :func:`report_html` to ``path`` (UTF-8). Returns ``path``. Raises OSError when it
    cannot be written."""
    path.write_text(report_html(parts, info, study_name, after=after), encoding="utf-8")
    return path
