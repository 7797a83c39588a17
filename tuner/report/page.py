"""report.html: the whole report in one file to open in a browser or send, figures inlined as SVG.

A renderer of the :class:`tuner.report.model.NightReport`, as report.md's
(:mod:`tuner.report.markdown`) is: nothing here judges or words anything, and no document is
read back. The verdict paragraph, the "Use it" lines, the tables and the sections are the
model's blocks, the summary's numbers its parts' stories, and each figure is the SVG text of
the figure its PNG was saved from (:func:`tuner.report.svg.inline_svg`). The report's inline
marks (```code```, ``**bold**``) are rendered by markdown-it-py. The order is a reader's: the
verdict and the forest plot first, then the table of every trial, the screen, the proof, the
baselines, the other figures, what was not measured or failed. The page is made by Jinja2
(autoescape on) from ``templates/report.html.j2`` beside this module; its CSS is inline, it
loads nothing (no script, font or image from anywhere), and it is one column on a narrow screen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from tuner.judging import gain_pct
from tuner.report.frame import env_text
from tuner.report.model import FIGURE_SECTIONS, Block, NightReport, Part, Section, decision_blocks
from tuner.report.style import verdict_words
from tuner.report.svg import inline_svg

__all__ = ["HTML_FILE", "report_html", "write_report_html"]

#: The page's file name, beside report.md.
HTML_FILE = "report.html"
_FIGURE_IDS = {"trials_vs_baseline": "forest", "variable_effects": "effects", "history": "history",
               "baselines": "baselines", "concurrency": "concurrency"}
_MORE_FIGURES = ("variable_effects", "history", "concurrency")
_TEMPLATE = "report.html.j2"
#: CommonMark with raw HTML off: a model string's ``<`` is text, never a tag.
_MARKDOWN = MarkdownIt("commonmark", {"html": False})


@dataclass(frozen=True)
class PageSection:
    """One ``<section>`` of report.html: its ``id``, its heading ``title`` (none when empty), its
    ``blocks`` (a figure block's ``stem`` names its inline SVG) and its heading ``level`` (2, or
    3 inside a host type's part)."""

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


def _facts(part: Part) -> list[Fact]:
    """The summary of ``part``: the decision's line first, the baseline's level, the
    relaunches, the best set (the recommended one, or the one that looked best) with its ratio,
    interval and verdict, and whether it held; every number its story's."""
    if part.trials.empty:
        return []
    story = part.story
    facts = [Fact("decision", part.decision.line)]
    if math.isfinite(story.baseline_level):
        facts.append(Fact("baseline", f"{story.baseline_level:.1f} {story.metric.described}"))
    facts.append(Fact("relaunches", str(len(part.trials))))
    best = story.find(story.best) if story.best else None
    if best is not None:
        ci = f" (95 % CI {_pct(best.low)}..{_pct(best.high)})" if math.isfinite(best.low) else ""
        label = "recommended set" if part.decision.recommends else "looked best"
        facts.append(Fact(label, env_text(dict(best.env)) + (" " + " ".join(best.flags) if best.flags else "")))
        facts.append(Fact("its change", (_pct(best.ratio) if math.isfinite(best.ratio) else "?") + ci))
        facts.append(Fact("its verdict", verdict_words(best.verdict, story.min_effect)))
        held = {True: "held on fresh launches: use it", False: "did not hold on fresh launches",
                None: "not confirmed yet"}[story.confirmed]
        facts.append(Fact("confirmation", held))
    return facts


class _Figures:
    """The inline SVG of every figure shown, by a key unique in the page (stem and part)."""

    def __init__(self) -> None:
        self.svgs: dict[str, Markup] = {}

    def block(self, part: Part, stem: str, k: str, alt: str) -> Block | None:
        """A figure block of ``part``'s figure ``stem`` (None when it was not drawn)."""
        fig = part.figure(stem)
        if fig is None:
            return None
        key = f"{stem}{k}"
        self.svgs[key] = Markup(inline_svg(fig.svg, f"{_slug(key)}-", alt))  # matplotlib's own SVG, trusted
        return Block("figure", alt, stem=key)

    def inline(self, blocks: Sequence[Block], part: Part, k: str) -> tuple[Block, ...]:
        """``blocks`` with each figure block made its part's inline figure (dropped when none)."""
        out = []
        for b in blocks:
            if b.kind != "figure":
                out.append(b)
            elif (fig := self.block(part, b.stem, k, b.text)) is not None:
                out.append(fig)
        return tuple(out)


def _shown(section: Section | None, part: Part, k: str, figures: _Figures, level: int = 2) -> list[PageSection]:
    if section is None:
        return []
    return [PageSection(section.id + k, section.title, figures.inline(section.blocks, part, k), level)]


def page_sections(night: NightReport) -> tuple[list[PageSection], dict[str, Markup]]:
    """The sections of report.html for ``night`` in order and the inline SVG of each figure
    block (by its block's ``stem``)."""
    figures = _Figures()
    several = night.several
    verdict: list[Block] = []
    for part in night.parts:
        if several:  # one paragraph a type, as report.md's list item
            verdict.append(Block("paragraph", " ".join(part.verdict.split())))
        else:
            verdict += decision_blocks(part)
        if part.use:
            verdict += [Block("heading", f"Use it{' (' + part.title + ')' if several else ''}", level=3),
                        Block("code", "\n".join(part.use))]
    if night.empty:
        verdict = [Block("paragraph", "No trial recorded yet.")]
    sections = [PageSection("verdict", "Verdict", tuple(verdict))]
    level = 3 if several else 2
    tail: list[PageSection] = []
    after = [night.proof, night.not_measured]
    for n, part in enumerate(night.parts, 1):
        if part.trials.empty:
            continue
        k = f"-{n}" if several else ""
        if several:
            sections.append(PageSection(f"type{k}", part.title, ()))

        def fig(stem: str, part: Part = part, k: str = k) -> PageSection | None:
            heading, alt = FIGURE_SECTIONS[stem]
            block = figures.block(part, stem, k, alt)
            return PageSection(_FIGURE_IDS[stem] + k, heading, (block,), level) if block is not None else None

        levels = (Block("heading", part.levels.title, level=3), *part.levels.blocks) if part.levels else ()
        head = [fig("trials_vs_baseline"),
                PageSection(f"sets{k}", "Every trial, in the forest plot's order", (part.table, *levels), level)]
        rest = [fig("baselines"), *(fig(stem) for stem in _MORE_FIGURES)]
        sections += [s for s in head if s is not None]
        sections += _shown(part.screen, part, k, figures, level)
        if several:
            sections += [s for s in rest if s is not None]
        else:  # the screen and the proof come before the baselines
            sections += [s for a in after for s in _shown(a, part, k, figures)]
            tail = [s for s in rest if s is not None]
    if several:
        tail = [s for a in after for s in _shown(a, night.parts[0], "", figures)]
    sections += tail
    if not night.empty:
        sections += [s for a in (night.triage, night.p2p, night.failed) for s in _shown(a, night.parts[0], "", figures)]
    sections += [PageSection("closing", "", night.closing)]
    return sections, figures.svgs


def _inline(text: str) -> Markup:
    """``text`` as HTML: escaped, with the report's inline marks (```code```, ``**bold**``)
    rendered by markdown-it-py."""
    return Markup(_MARKDOWN.renderInline(text))  # markdown-it escapes the text, raw HTML off


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


def report_html(night: NightReport) -> str:
    """The text of report.html for ``night`` (see the module docstring). Raises
    jinja2.TemplateNotFound when the package was installed without its templates."""
    sections, svgs = page_sections(night)
    summaries = [(p.title, _facts(p)) for p in night.parts]
    return _environment().get_template(_TEMPLATE).render(
        study=night.study, sections=sections, svgs=svgs, summaries=[s for s in summaries if s[1]],
        nav=[s for s in sections if s.title and s.level == 2])


def write_report_html(path: Path, night: NightReport) -> Path:
    """Write :func:`report_html` of ``night`` to ``path`` (UTF-8). Returns ``path``. Raises
    OSError when it cannot be written."""
    path.write_text(report_html(night), encoding="utf-8")
    return path
