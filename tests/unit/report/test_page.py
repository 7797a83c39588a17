"""report.html, read back with the stdlib's html.parser as a browser would see it: its sections in
a reader's order, each figure an inline <svg>, every set of trials.csv in its tables, nothing
fetched from anywhere, and the same verdict, "Use it" lines and per-set numbers as report.md,
from real trial records written by write_outputs."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import built_once, trial_record
from tests.unit.report.page_reader import Page, parse
from tests.unit.report.picture_cases import with_winner
from tests.unit.report.test_host_types import two_types
from tuner import report
from tuner.record import StudyInfo
from tuner.report.frame import env_text, read_trials_csv
from tuner.report.markdown import block_lines, section_lines
from tuner.report.model import Block, Section
from tuner.report.page import HTML_FILE
from tuner.report.svg import inline_svg

INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--tensor-parallel-size", "8"],
                 storage_hint="sqlite:///results/night/study.db", min_effect=0.01, stop_reason="budget spent",
                 p2p_health={"gates": [], "unread": [], "facts": "2 GPUs, IOMMU off", "diag": ""})
#: What a browser would fetch: no such tag may appear.
FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "audio", "video", "source", "base"}
EXTERNAL = re.compile(r"^\s*(https?:|//|file:|data:|javascript:)", re.I)


def md_section(md: str, heading: str) -> str:
    """The text under ``## heading`` of report.md, up to the next ``##`` heading."""
    return md.split(f"## {heading}\n\n", 1)[1].split("\n## ", 1)[0]


def table_cells(line: str) -> tuple[str, ...]:
    """The cells of one markdown table line ``| a | b |``, stripped, ``\\|`` read as ``|``."""
    inner = line.strip()[1:-1]
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


def md_table(text: str) -> list[list[str]]:
    """The first markdown table of ``text``: its header, then its rows (the rule left out)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [list(table_cells(line)) for k, line in enumerate(lines) if k != 1]


PROOF = [{"name": "NCCL_PROTO", "value": "LL", "status": "confirmed", "ranks": "0-7 (8/8)", "echo": "LL",
          "source": "NCCL_DEBUG_FILE x8", "why": ""},
         {"name": "NCCL_MAX_NCHANNELS", "value": "16", "status": "confirmed", "ranks": "0-7 (8/8)", "echo": "16",
          "source": "NCCL_DEBUG_FILE x8", "why": ""}]


def night() -> list:
    """with_winner's night (a faster set confirmed on fresh launches), its sets' proof rows, and
    one set not measured (to NCCL the same as the baseline)."""
    recs = with_winner()
    for r in recs:
        if r.env:
            r.nccl_proof = [p for p in PROOF if p["name"] in r.env]
    return [*recs, trial_record(8, "duplicate", status="skipped", env={"NCCL_BUFFSIZE": "4194304"},
                                preset="buffsize-default", duplicate_of=0, cause="the same set to NCCL at 14336 B")]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, Page, str]:
    out = built_once(tmp_path_factory, "page-night", lambda d: report.write_outputs(night(), INFO, "night", d,
                                                                                    min_effect=0.01))
    return out, parse(out / HTML_FILE), (out / "report.md").read_text()


def test_sections_come_in_a_readers_order(written):
    _, page, _ = written
    assert page.sections == ["verdict", "forest", "sets", "proof", "not-measured", "baselines", "effects", "history",
                             "concurrency", "p2p", "closing"]


def test_each_figure_is_an_inline_svg_one_per_png(written):
    out, page, _ = written
    assert all(all(held) for held in page.figures.values()), page.figures
    assert {s: len(f) for s, f in page.figures.items()} == {s: 1 for s in ("forest", "baselines", "effects",
                                                                           "history", "concurrency")}
    assert page.tags["svg"] == len(list(out.glob("*.png"))) == 5
    assert len(page.ids) == len(set(page.ids)), [i for i, n in Counter(page.ids).items() if n > 1][:5]


def test_nothing_is_fetched_from_anywhere(written):
    out, page, _ = written
    assert not FETCHING_TAGS & set(page.tags), FETCHING_TAGS & set(page.tags)
    assert page.addresses and all(a.startswith("#") for a in page.addresses), \
        [a for a in page.addresses if not a.startswith("#")][:5]
    assert not [a for a in page.addresses if EXTERNAL.match(a)]
    text = (out / HTML_FILE).read_text()
    assert "@import" not in text
    assert all(u.startswith("#") for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", text))
    assert '<meta name="viewport" content="width=device-width' in text
    assert "@media (max-width" in "".join(page.styles)


def test_verdict_and_use_it_are_report_mds(written):
    _, page, md = written
    said = [p.replace("**", "") for p in md_section(md, "Verdict").strip().split("\n\n")]
    assert page.paragraphs["verdict"] == said and len(said) == 3  # the decision, its reasons, the paragraph
    assert said[0].startswith("Use NCCL_") and said[0].endswith(", confirmed on fresh launches.")
    use = md_section(md, "Use the best set").split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert page.pres["verdict"] == [use]
    assert use.startswith("export NCCL_")


def test_the_table_is_report_mds_and_holds_every_set_of_trials_csv(written):
    out, page, md = written
    sets, *levels = page.tables["sets"]
    assert sets == md_table(md_section(md, "Trials vs baseline"))
    assert levels[0] == md_table(md_section(md, "Per concurrency level"))
    header, *rows = sets
    csv = read_trials_csv(out / "trials.csv")
    measured = csv[csv["status"] != "skipped"]
    by_trial = {int(r[header.index("trial")]): r for r in rows}
    assert sorted(by_trial) == sorted(int(t) for t in measured["trial"])
    for _, r in measured.iterrows():
        row = by_trial[int(r["trial"])]
        assert row[header.index("env")] == env_text(r["env"])
        if r["vs_baseline"] == r["vs_baseline"]:  # a ratio: the same three decimals as report.md
            assert row[header.index("vs_baseline")] == f"{r['vs_baseline']:.3f}"
    skipped = csv[csv["status"] == "skipped"]
    [not_measured] = page.tables["not-measured"]
    assert [int(r[0]) for r in not_measured[1:]] == [int(t) for t in skipped["trial"]]


def test_the_proof_table_is_report_mds(written):
    _, page, md = written
    [proof] = page.tables["proof"]
    assert proof == md_table(md_section(md, "Proof that each set reached NCCL"))
    assert {r[1] for r in proof[1:]} == {"NCCL_PROTO", "NCCL_MAX_NCHANNELS"}


def test_summary_numbers_are_the_storys(written):
    out, _, _ = written
    text = (out / HTML_FILE).read_text()
    story = report.read_story(out / report.STORY_FILE)
    best = story.find(story.best or "")
    assert best is not None and story.confirmed is True
    assert f"{(best.ratio - 1) * 100:+.1f} % (95 % CI {(best.low - 1) * 100:+.1f} %..{(best.high - 1) * 100:+.1f} %)" in text
    assert "held on fresh launches: use it" in text


def test_two_host_types_each_get_their_verdict_and_figures(tmp_path):
    report.write_outputs(two_types(), INFO, "multi", tmp_path, min_effect=0.01)
    page = parse(tmp_path / HTML_FILE)
    md = (tmp_path / "report.md").read_text()
    assert page.sections == ["verdict", "type-1", "forest-1", "sets-1", "baselines-1", "effects-1", "history-1",
                             "type-2", "forest-2", "sets-2", "baselines-2", "effects-2", "history-2", "p2p", "closing"]
    titled = [line[2:].replace("`", "") for line in md_section(md, "Verdict").splitlines()
              if line.startswith("- Host type")]  # the HTML renders the `code` marks
    assert page.paragraphs["verdict"] == titled and len(titled) == 2
    assert all(all(f) for f in page.figures.values())
    assert len(page.ids) == len(set(page.ids))


def test_no_trial_yet(tmp_path):
    report.write_outputs([], INFO, "empty", tmp_path, min_effect=0.01)
    page = parse(tmp_path / HTML_FILE)
    assert page.paragraphs["verdict"] == ["No trial recorded yet."]
    assert page.sections == ["verdict", "closing"] and not page.figures


def test_blocks_are_written_as_report_md_has_them():
    section = Section("screen", "Screen", (
        Block("paragraph", "**Bound.** at most `+2 %`."), Block("list", items=("one", "two")),
        Block("table", header=("a", "b"), rows=(("1", "2 | 3"),)), Block("code", "export A=1", lang="sh"),
        Block("figure", "alt text", stem="x", src="host-type-1/x.png"), Block("list")))
    assert "\n".join(section_lines(section)) == (
        "## Screen\n\n**Bound.** at most `+2 %`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 \\| 3 |\n\n\n"
        "```sh\nexport A=1\n```\n\n[![alt text](host-type-1/x.png)](host-type-1/x.svg)\n")
    assert table_cells("| 1 | 2 \\| 3 |") == ("1", "2 | 3")
    # the screen's export table: one HTML block whose <pre> holds "# ..." lines, written whole
    html = "<table><tr><td><pre># unset NCCL_ALGO\n# tuner.conf\nx</pre></td></tr></table>"
    assert block_lines(Block("html", html)) == [html, ""]


def test_inline_svg_drops_the_prolog_and_prefixes_every_id():
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/x.dtd">\n'
           '<svg xmlns="http://www.w3.org/2000/svg"><metadata><rdf:RDF/></metadata><defs><path id="g1"/></defs>'
           '<use xlink:href="#g1"/><g clip-path="url(#c1)"/></svg>')
    out = inline_svg(doc, "f1-", 'a "label"')
    assert out.startswith('<svg role="img" aria-label="a &quot;label&quot;"')
    assert 'id="f1-g1"' in out and 'href="#f1-g1"' in out and "url(#f1-c1)" in out
    assert "DOCTYPE" not in out and "metadata" not in out
    with pytest.raises(ValueError):
        inline_svg("<html/>", "f1-")
