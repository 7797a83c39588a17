"""Every citation of a docs/ heading the repository makes resolves: ``docs/X.md#anchor`` (GitHub's
anchor of a heading), ``docs/X.md, "Heading"`` (a heading's text, with or without its section
number, the quote free to run over a comment's next lines) and ``docs/X.md, section N``.

And the simulator example states its cost model's decode split, the numbers it computes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = ROOT / "docs"
#: Where citations may be: the repository's own text files (not results, not the venv).
FOLDERS = ("tuner", "docs", "examples", "search_spaces", "benchmarks", "notebooks", "tests")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".ipynb", ".txt", ".yml", ".yaml", ".cfg", ".sh"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_NUMBER = re.compile(r"^(\d+[a-z]?)\.\s+")
_ANCHOR = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")
_LOCAL_ANCHOR = re.compile(r"\]\(([\w-]+\.md)#([\w-]+)\)")  # a link inside docs/ to a sibling
_QUOTED = re.compile(r"docs/([\w-]+\.md),\s*[\"“]([^\"”]{1,300})[\"”]")
_SECTION = re.compile(r"docs/([\w-]+\.md),\s*section\s+(\d+[a-z]?)\b")
_CONTINUATION = re.compile(r"\s*\n\s*(?:#+|//|\*)?\s*")  # a quote broken over comment lines


def heading_text(raw: str) -> str:
    """A heading as GitHub shows it: links as their text, code spans as their content."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return " ".join(text.replace("`", "").split())


def slug(text: str) -> str:
    """GitHub's anchor of a heading's text (github-slugger): lower case, every character but
    letters, digits, spaces, ``-`` and ``_`` dropped, spaces to ``-``."""
    return "".join(c for c in text.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The headings of a markdown file, in order, outside fenced code blocks."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            out.append(heading_text(m.group(2)))
    return out


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of ``path`` (repeats get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for text in headings(path):
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def unresolved(text: str, here: Path | None = None) -> list[str]:
    """The citations in ``text`` that name no heading of an existing docs/ file (``here``: the
    file the text is from, for its links to siblings inside docs/)."""
    bad = []
    def doc(name: str) -> Path | None:
        path = DOCS / name
        return path if path.is_file() else None
    links = [(m.group(1), m.group(2), m.group(0)) for m in _ANCHOR.finditer(text)]
    if here is not None and here.parent == DOCS:
        links += [(m.group(1), m.group(2), m.group(0)) for m in _LOCAL_ANCHOR.finditer(text)]
    for name, anchor, cited in links:
        path = doc(name)
        if path is None or anchor not in anchors(path):
            bad.append(cited)
    for m in _QUOTED.finditer(text):
        path = doc(m.group(1))
        quote = " ".join(_CONTINUATION.sub(" ", m.group(2)).split())
        known = {h for h in headings(path)} | {_NUMBER.sub("", h) for h in headings(path)} if path else set()
        if quote not in known:
            bad.append(m.group(0))
    for m in _SECTION.finditer(text):
        path = doc(m.group(1))
        numbers = {n.group(1) for h in headings(path) if (n := _NUMBER.match(h))} if path else set()
        if m.group(2) not in numbers:
            bad.append(m.group(0))
    return bad


def _files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in SUFFIXES]
    return [p for p in files if p != Path(__file__)]


def test_every_docs_heading_citation_resolves():
    bad = []
    for path in _files():
        text = path.read_text(errors="replace")
        bad += [f"{path.relative_to(ROOT)}: {c}" for c in unresolved(text, path)]
    assert bad == []


def test_the_resolver_finds_what_is_wrong():
    assert unresolved('see docs/NCCL.md, "The motivating box": TP 8') == ['docs/NCCL.md, "The motivating box"']
    assert unresolved('(docs/NCCL.md, "6. Which variables can change the decode allreduce at the model\'s\n'
                      '# message size, and why")') == []
    assert unresolved('docs/NCCL.md, "Who carries the decode allreduce"') == []  # its number may be left out
    assert unresolved('docs/NCCL.md, "Which variables can change"') != []  # a part of a heading is not one
    assert unresolved("docs/NCCL.md#8-who-carries-the-decode-allreduce and docs/NCCL.md#9a-ncclsmodel") == [
        "docs/NCCL.md#9a-ncclsmodel"]
    assert unresolved("docs/NCCL.md, section 7; docs/NCCL.md, section 77; docs/NOPE.md#x") == [
        "docs/NOPE.md#x", "docs/NCCL.md, section 77"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("6. Which variables can change the decode allreduce at the model's message size, and why",
     "6-which-variables-can-change-the-decode-allreduce-at-the-models-message-size-and-why"),
    ("NCCL_ALGO and NCCL_PROTO (src/graph/tuning.cc, parseList and ncclTopoTuneModel)",
     "nccl_algo-and-nccl_proto-srcgraphtuningcc-parselist-and-nccltopotunemodel"),
    ("9a. NCCL's model of the machine (GRAPH)", "9a-nccls-model-of-the-machine-graph"),
])
def test_anchors_follow_github(heading, anchor):
    assert slug(heading) == anchor


def test_the_sim_example_states_its_cost_models_decode_split():
    from tuner.sim.costmodel import CostModel
    from tuner.sim.ncclenv import settings_from
    from tuner.sim.profiles import load_profile

    profile = load_profile("pcie-8x-mla")
    b = CostModel(profile, settings_from({}, profile.nccl_version)).breakdown(1)
    core = b.allreduce.core_us
    screened = core + profile.bench_launch_us  # what nccl-tests times: the collective and its launch
    lines = (ROOT / "examples" / "sim.toml").read_text().split("\n[server]")[0].splitlines()
    comment = " ".join(line.lstrip("# ") for line in lines)
    said = [f"decode step {b.step_ms:.1f} ms", f"{profile.compute_ms:g} ms of compute",
            f"{profile.allreduces_per_token} allreduces of {b.allreduce.time_us:.1f} us",
            f"({b.allreduce_ms:.2f} ms, {b.share * 100:.0f} %)", f"{core:.1f} us of NCCL collective",
            f"{profile.op_overhead_us:g} us of per-operation overhead", f"{screened:.1f} us with nccl-tests",
            f"about {profile.allreduces_per_token * screened / 1000 / b.step_ms * 100:.0f} % of decode"]
    missing = [s for s in said if s not in comment]
    assert missing == [], comment
