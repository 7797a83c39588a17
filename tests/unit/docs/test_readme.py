"""The README stays short and its console blocks stay runnable: every ``$ `` command is one
tests/readme_commands.py runs as printed (or one a named test runs, reading it from the README),
and the check of a run's output masks numbers but not words. The runs themselves are
tests/e2e/test_readme_commands.py."""

from __future__ import annotations

import re

import pytest

from tests import readme_commands as rc
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()


def test_the_readme_is_short_and_maps_the_docs():
    assert len(README.splitlines()) <= 400
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", README))
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"


def test_every_console_command_is_one_that_a_test_runs():
    blocks = rc.blocks(README)
    assert blocks, "the README shows no console block"
    for block in blocks:
        assert block.commands, f"README.md line {block.start + 1}: a console block without a command"
        test = rc.delegated(block.rule)
        if test is not None:
            assert test.is_file(), block.rule
            read = re.findall(r'readme_commands\.command_starting\("([^"]+)"\)', test.read_text())
            for cmd in block.commands:  # the named test reads this very line from the README
                assert any(cmd.line.startswith(p) and rc.command_starting(p, README) == cmd.line for p in read), (
                    f"{block.rule} does not read `{cmd.line}` from the README")
            continue
        rc.select(block.rule, "")  # a rule it knows
        for cmd in block.commands:
            rc.argv_of(cmd.line)  # raises for a command it cannot run as printed


def test_only_console_blocks_show_commands_with_their_output():
    """A ``$ `` line outside a console block would be an example no test runs."""
    fenced, kind = False, ""
    for n, line in enumerate(README.splitlines(), 1):
        if line.strip().startswith("```"):
            fenced, kind = (not fenced, line.strip()[3:]) if not fenced else (False, "")
            continue
        if fenced and line.lstrip().startswith("$ "):
            assert kind == "console", f"README.md line {n}: a shown command in a ```{kind} block"


@pytest.mark.parametrize("line", [
    "nccl-tune sweep x.toml | tee log", "nccl-tune sweep x.toml > night.log 2>&1 &", "make demo",
    "python -m tuner.cli sweep x.toml", "nccl-tune sweep x.toml && echo done", "nccl-tune sweep x.toml 2>/dev/null",
])
def test_a_command_that_cannot_run_as_printed_is_refused(line):
    with pytest.raises(rc.UnknownCommand):
        rc.argv_of(line)


def test_assignments_and_the_exit_echo_are_run_as_a_shell_would():
    env, argv, echo = rc.argv_of('SIM_NO_EFFECT=NCCL_P2P_LEVEL nccl-tune check x.toml --set "A=1 B"; echo "exit $?"')
    assert env == {"SIM_NO_EFFECT": "NCCL_P2P_LEVEL"} and echo
    assert argv[1:] == ["-m", "tuner.cli", "check", "x.toml", "--set", "A=1 B"]


def test_numbers_are_masked_and_words_are_not():
    shown = ["    1  preset    ok       75.5    1.088  1.043..1.134  faster (held on fresh launches)  NCCL_P2P_LEVEL=SYS",
             "...", "Best set: NCCL_P2P_LEVEL=SYS (trial 1), +8.8 %: Use it."]
    run = ("noise\n    1  preset    ok      100.5    1.1  0.943..1.134  faster (held on fresh launches)  NCCL_P2P_LEVEL=SYS\n"
           "more\nBest set: NCCL_P2P_LEVEL=SYS (trial 12), +18.8 %: Use it.\n")
    assert rc.missing(shown, run) == []
    assert rc.missing(shown, run.replace("Use it.", "keep the defaults.")) == [shown[2]]
    assert rc.missing(shown, run.replace("+18.8", "-18.8")) == [shown[2]]  # a sign is a word
    assert rc.missing(["Best set: NCCL_P2P_LEVEL=SYS (trial 1)"], run) == ["Best set: NCCL_P2P_LEVEL=SYS (trial 1)"]  # whole lines


def test_the_rules_pick_the_lines_a_block_shows():
    out = "a 1\nb 2\ntrial kind\nrow 1\n\nBaseline: x\n"
    assert rc.select("all", out) == ["a 1", "b 2", "trial kind", "row 1", "", "Baseline: x"]
    assert rc.select("from ^trial", out) == ["...", "trial kind", "row 1", "", "Baseline: x"]
    assert rc.select(r"grep ^(b|row)", out) == ["...", "b 2", "...", "row 1", "..."]
    with pytest.raises(rc.UnknownCommand):
        rc.select("head 3", out)


def test_a_check_clause_shows_every_line_and_checks_the_lines_it_finds():
    rule = "from ^trial; check ^(Use|  export)"
    out = "noise\ntrial kind\nrow 1 faster (2 launches)\nUse X: +6 %\n  export X=1\n"
    assert rc.select(rule, out) == ["...", "trial kind", "row 1 faster (2 launches)", "Use X: +6 %", "  export X=1"]
    show, check = rc.split_rule(rule)
    assert show == "from ^trial" and check is not None
    other = out.replace("(2 launches)", "(one launch)")
    assert rc.missing(rc.select(rule, out), other, check) == []  # a row's words may vary
    assert rc.missing(rc.select(rule, out), other.replace("Use X", "Not decided: X"), check) == ["Use X: +6 %"]


def test_a_rewrite_replaces_only_the_shown_output(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- output: from ^trial -->\n```console\n$ nccl-tune sweep a.toml\n...\nold\n```\n\nend\n")
    monkeypatch.setattr(rc, "README", readme)
    block = rc.blocks(readme.read_text())[0]
    text = rc.rewrite([(block, block.commands[0], 0, "progress\ntrial 1\nnew\n")])
    assert text == "# x\n\n<!-- output: from ^trial -->\n```console\n$ nccl-tune sweep a.toml\n...\ntrial 1\nnew\n```\n\nend\n"
