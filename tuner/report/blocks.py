"""report.md's lines as blocks, for report.html: the same words and tables, read back once.

The report's sections are made as markdown lines by :mod:`tuner.report.text`,
:mod:`tuner.report.screen` and :mod:`tuner.report.proof`; report.html shows those very lines
rather than wording anything again. :func:`markdown_blocks` reads the few forms those modules
write (headings, paragraphs, ``- `` lists, GitHub tables as :func:`tuner.report.text.markdown_table`
makes them, fenced code, one-line HTML, and a figure link ``[![alt](x.png)](x.svg)``) into
:class:`Block` objects; :func:`split_sections` cuts them at their top headings. It is no general
markdown reader: any other line is a paragraph, shown as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Block", "BlockKind", "markdown_blocks", "split_sections", "table_cells"]

#: What a block is.
BlockKind = Literal["heading", "paragraph", "list", "table", "code", "html", "figure"]

_HEADING = re.compile(r"^(#{1,6}) (.*)$")
_FIGURE = re.compile(r"^\[!\[(?P<alt>[^\]]*)\]\((?P<png>[^)]+)\)\]\((?P<svg>[^)]+)\)$")
_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Block:
    """One block of report.md: ``kind``; ``text`` (a heading's or paragraph's words, the code, the
    HTML, a figure's alt text); ``level`` (a heading's: 2 for ``##``); ``items`` (a list's
    entries); ``header`` and ``rows`` (a table's cells, ``\\|`` read as ``|``); ``stem`` (a
    figure's file stem, ``trials_vs_baseline`` for ``host-type-1/trials_vs_baseline.png``)."""

    kind: BlockKind
    text: str = ""
    level: int = 0
    items: tuple[str, ...] = ()
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    stem: str = ""


def table_cells(line: str) -> tuple[str, ...]:
    """The cells of one table line ``| a | b |``, stripped, ``\\|`` read as ``|``."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return tuple(c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(inner))


def _lines(entries: Iterable[str]) -> list[str]:
    """Every line of ``entries`` (an entry may hold several, as a markdown table does); an entry
    that is HTML (the screen's export table, whose ``<pre>`` holds lines such as ``# unset ...``)
    stays whole."""
    return [line for entry in entries for line in ([entry] if entry.startswith("<") else entry.split("\n"))]


def markdown_blocks(entries: Iterable[str]) -> list[Block]:
    """The blocks of report.md lines ``entries`` (each entry one line or several joined by
    newlines; an entry starting with ``<`` is one HTML block, newlines and all), in order; blank
    lines only separate them."""
    lines = _lines(entries)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("```"):
            end = next((k for k in range(i + 1, len(lines)) if lines[k].startswith("```")), len(lines))
            blocks.append(Block("code", "\n".join(lines[i + 1:end])))
            i = end + 1
            continue
        if (m := _HEADING.match(line)) is not None:
            blocks.append(Block("heading", m.group(2).strip(), level=len(m.group(1))))
        elif (m := _FIGURE.match(line.strip())) is not None:
            stem = m.group("png").rsplit("/", 1)[-1].rsplit(".", 1)[0]
            blocks.append(Block("figure", m.group("alt"), stem=stem))
        elif line.startswith("|"):
            end = i
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            table = lines[i:end]
            has_rule = len(table) > 1 and _RULE.match(table[1].replace(" ", "")) is not None
            header = table_cells(table[0])
            rows = tuple(table_cells(t) for t in table[2 if has_rule else 1:])
            blocks.append(Block("table", header=header, rows=rows))
            i = end
            continue
        elif line.startswith("- "):
            end = i
            while end < len(lines) and lines[end].startswith("- "):
                end += 1
            blocks.append(Block("list", items=tuple(item[2:] for item in lines[i:end])))
            i = end
            continue
        elif line.startswith("<"):
            blocks.append(Block("html", line))
        else:
            blocks.append(Block("paragraph", line))
        i += 1
    return blocks


def split_sections(blocks: Sequence[Block], level: int = 2) -> list[tuple[str, list[Block]]]:
    """``blocks`` cut at each heading of ``level`` or above (fewer ``#``): (heading text, the
    blocks under it) in order; blocks before the first such heading come under ``""``."""
    out: list[tuple[str, list[Block]]] = []
    for b in blocks:
        if b.kind == "heading" and b.level <= level:
            out.append((b.text, []))
        else:
            if not out:
                out.append(("", []))
            out[-1][1].append(b)
    return out
