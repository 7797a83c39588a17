"""report.md: the :class:`tuner.report.model.NightReport` written as GitHub markdown.

Reads the model only. The layout: the verdict, the best set's "Use it" lines, the screen's
section, NCCL's model of the machine, a section per figure (each image linking to its SVG) with
the trials table and the per-level section under the first, then the proof, the sets not
measured, the failed relaunches and why the sweep stopped. A study of several host types has one
verdict per type, then per type a section with what a study of one type shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.report.model import FIGURE_SECTIONS, Block, NightReport, Part, Section, decision_blocks

__all__ = ["block_lines", "report_markdown", "section_lines", "table_markdown"]


def table_markdown(block: Block) -> str:
    """A GitHub-markdown table of a table ``block``, each line ending in a newline; ``|`` in a
    row's cell written ``\\|``."""
    head = "| " + " | ".join(block.header) + " |\n|" + "---|" * len(block.header) + "\n"
    return head + "".join("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |\n" for row in block.rows)


def block_lines(block: Block) -> list[str]:
    """report.md lines of one ``block``, the blank line after it included (a table is one
    entry of several lines)."""
    if block.kind == "heading":
        return ["#" * block.level + " " + block.text, ""]
    if block.kind == "list":
        return [*(f"- {item}" for item in block.items), ""] if block.items else []
    if block.kind == "table":
        return [table_markdown(block), ""]
    if block.kind == "code":
        return ["```" + block.lang, block.text, "```", ""]
    if block.kind == "figure":
        return [f"[![{block.text}]({block.src})]({block.src.rsplit('.', 1)[0]}.svg)", ""]
    return [block.text, ""]  # a paragraph, or the screen's one HTML table


def section_lines(section: Section | None, level: int = 2) -> list[str]:
    """report.md lines of ``section`` under a heading of ``level`` (none for None)."""
    if section is None:
        return []
    return ["#" * level + " " + section.title, "", *(line for b in section.blocks for line in block_lines(b))]


def _blocks(blocks: Sequence[Block]) -> list[str]:
    return [line for b in blocks for line in block_lines(b)]


def _body(night: NightReport, part: Part, level: int) -> list[str]:
    """One part: its "Use it" lines, the screen, the triage, the P2P health, the figures with the trials table
    and the per-level section under the first."""
    head = "#" * level
    lines: list[str] = []
    if part.use:
        lines += [f"{head} Use the best set", "", *block_lines(Block("code", "\n".join(part.use), lang="sh"))]
    lines += section_lines(part.screen, 2)
    lines += section_lines(night.triage, level)
    lines += section_lines(night.p2p, level)
    for stem, (heading, alt) in FIGURE_SECTIONS.items():
        fig = part.figure(stem)
        if fig is not None:
            lines += [f"{head} {heading}", "", *block_lines(Block("figure", alt, stem=stem, src=fig.png))]
        if stem == "trials_vs_baseline":
            if fig is None:
                lines += [f"{head} {heading}", ""]
            lines += block_lines(part.table)
            lines += section_lines(part.levels, level)
    return lines


def report_markdown(night: NightReport) -> str:
    """The text of report.md for ``night`` (see the module docstring); ``No trial recorded yet.``
    under the title before any relaunch."""
    lines = [f"# nccl-tune report: {night.study}", ""]
    if night.empty:
        return "\n".join([*lines, "No trial recorded yet.", ""])
    lines += ["## Verdict", ""]
    if night.several:
        lines += [night.intro, "", *block_lines(Block("list", items=tuple(" ".join(p.verdict.split()) for p in night.parts)))]
        for part in night.parts:
            lines += [f"## {part.title}", "", *_body(night, part, 3)]
    else:
        lines += [*_blocks(decision_blocks(night.parts[0])), *_body(night, night.parts[0], 2)]
    for section in (night.proof, night.not_measured, night.failed):
        lines += section_lines(section)
    return "\n".join(lines + _blocks(night.closing))
