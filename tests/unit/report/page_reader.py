"""report.html read back with the stdlib's html.parser, as a browser would see it (for the tests
of tuner.report.page and the simulator night of tests/e2e/test_one_story.py)."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from pathlib import Path


class Page(HTMLParser):
    """What report.html holds: its sections' ids in order, and per section its paragraphs'
    and <pre>'s text, its tables (rows of cell texts), its figures (whether each holds an
    <svg>); every tag, id and address attribute, anywhere."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.paragraphs: dict[str, list[str]] = {}
        self.pres: dict[str, list[str]] = {}
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.figures: dict[str, list[bool]] = {}
        self.tags: Counter[str] = Counter()
        self.ids: list[str] = []
        self.addresses: list[str] = []
        self.styles: list[str] = []
        self._text: list[str] | None = None
        self._svg = 0
        self._style = False

    @property
    def section(self) -> str:
        return self.sections[-1] if self.sections else ""

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        self.addresses += [v or "" for k, v in attrs if k in {"href", "xlink:href", "src", "action", "srcset"}]
        if tag == "svg":
            self._svg += 1
            if self.figures.get(self.section):
                self.figures[self.section][-1] = True
        if self._svg:
            return
        if tag == "style":
            self._style = True
        elif tag == "section":
            self.sections.append(a["id"] or "")
        elif tag == "figure":
            self.figures.setdefault(self.section, []).append(False)
        elif tag == "table":
            self.tables.setdefault(self.section, []).append([])
        elif tag == "tr":
            self.tables[self.section][-1].append([])
        elif tag in {"p", "pre", "td", "th"}:
            self._text = []

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg -= 1
        if self._svg:
            return
        if tag == "style":
            self._style = False
        elif tag in {"p", "pre", "td", "th"} and self._text is not None:
            text = "".join(self._text)
            if tag == "p":
                self.paragraphs.setdefault(self.section, []).append(text)
            elif tag == "pre":
                self.pres.setdefault(self.section, []).append(text)
            else:
                self.tables[self.section][-1][-1].append(text)
            self._text = None

    def handle_data(self, data):
        if self._style:
            self.styles.append(data)
        elif self._text is not None and not self._svg:
            self._text.append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page
