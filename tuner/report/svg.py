"""A figure as SVG text: the ``.svg`` files beside the PNGs, and the same text inlined in report.html.

:func:`figure_svg` renders a matplotlib ``Figure`` to an SVG document in memory, its ids made
from ``salt`` (matplotlib's ``svg.hashsalt``) so the same figure gives the same text;
:func:`inline_svg` makes that document an element for an HTML page: no XML prolog, DOCTYPE or
RDF metadata (the only external addresses in it), every id prefixed so that several figures on
one page never share one (matplotlib names glyphs by font, ``DejaVuSans-30``, in every figure).
"""

from __future__ import annotations

import io
import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: a --no-figures night never pays for it
    from matplotlib.figure import Figure

__all__ = ["figure_svg", "inline_svg"]

_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
# an id, and the two ways an SVG refers to one: xlink:href="#id" (or href) and url(#id)
_IDS = re.compile(r'(\bid="|href="#|url\(#)')
_ID = re.compile(r' id="([^"]*)"')


def figure_svg(fig: Figure, salt: str) -> str:
    """``fig`` as an SVG document (text, the bytes a ``.svg`` file holds): no date, ids hashed with
    ``salt`` (any text: the same figure and salt give the same document). Nothing is left open in
    pyplot."""
    import matplotlib as mpl

    buf = io.StringIO()
    with warnings.catch_warnings(), mpl.rc_context({"svg.hashsalt": salt}):
        warnings.filterwarnings("ignore", message="constrained_layout not applied")  # a figure with almost no data
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def inline_svg(svg: str, prefix: str, label: str = "") -> str:
    """The ``<svg>`` element of the document ``svg`` (:func:`figure_svg`), for an HTML page: the
    prolog and ``<metadata>`` dropped, each id and reference to one prefixed with ``prefix``
    (letters, digits, ``-``), a repeated id numbered, ``role="img"`` and ``aria-label`` ``label``
    added. Raises ValueError
    when ``svg`` holds no ``<svg`` element."""
    if "<svg" not in svg:
        raise ValueError("not an SVG document: no <svg element")
    body = _METADATA.sub("", _PROLOG.sub("", svg, count=1))
    body = _IDS.sub(lambda m: m.group(1) + prefix, body)
    body = _unique_ids(body)
    label_attr = f' aria-label="{_attr(label)}"' if label else ""
    return body.replace("<svg", f'<svg role="img"{label_attr}', 1).strip()


def _unique_ids(body: str) -> str:
    """``body`` with each repeated id (a matplotlib gid given to several artists, as the forest
    plot's ``forest-mark``) numbered ``-2``, ``-3`` after its first: the first keeps its name,
    so what refers to it still finds it."""
    seen: dict[str, int] = {}

    def number(m: re.Match[str]) -> str:
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        return m.group(0) if seen[name] == 1 else f' id="{name}-{seen[name]}"'
    return _ID.sub(number, body)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
