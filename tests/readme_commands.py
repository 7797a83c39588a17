"""The README's example commands, found, run exactly as printed, and its shown output checked or
rewritten from a fresh run.

A command the README runs is a ``$ `` line of a fenced ``console`` block; the lines after it, up
to the next ``$ `` line or the block's end, are its output as a run printed it (stdout and stderr
in the order a terminal shows them). An HTML comment just above the block (invisible on GitHub)
says which of the run's lines the block shows:

- ``<!-- output: all -->``: every line;
- ``<!-- output: grep REGEX -->``: the lines REGEX finds (``re.search``), a ``...`` line where
  lines were left out;
- ``<!-- output: from REGEX -->``: the lines from the first one REGEX finds to the end, after a
  ``...`` line (a night's report without its progress);
- ``<!-- output: run by tests/e2e/X.py -->``: a command too slow for this check (a real server),
  run as printed by that test, which reads it from here with :func:`command_starting`.

A rule may end in ``; check REGEX``: every line is shown as the rule says, but only the shown
lines REGEX finds are checked (a night's table rows and its reasons paragraph vary in their words
from night to night on a busy machine: a set "faster (2 launches)" on one, "(one launch)" on
another). The demo's block checks its table's header and its results line only: its decision
is not yet the same on every night (1 of 4 plain runs said "Not decided"; benchmarks/
demo_stability.py measures it), and a README check must not fail on that.

A command is known when it is ``nccl-tune ARGS``, with optional ``NAME=value`` assignments before
it and an optional ``; echo "exit $?"`` after it (the exit status printed as the shell would);
anything else (a pipe, a redirect, another program) is refused. It runs from a temporary copy of
the repository's ``examples/`` and ``search_spaces/`` (so its relative paths and its default
``results/`` folder are those of a checkout's root, and nothing lands in the checkout), as
``python -m tuner.cli ARGS``: the program the ``nccl-tune`` entry point runs
(pyproject.toml, ``[project.scripts]``).

Checking masks numbers: each run of digits may be any digits and each run of spaces any spaces
(a table's columns move with its numbers), so a run on another machine or night matches, while a
changed word (the decision) does not. A run's output shows its workspace as ``.`` and its
interpreter as :data:`PYTHON_SHOWN`. ``make demo`` and ``make test`` are shown in ``sh``
blocks, not re-run here: ``make demo`` is ``nccl-tune sweep examples/sim.toml --study demo``,
which a console block runs, and ``make test`` is this suite.

Regenerate the README's outputs after a change to what a command prints::

    PYTHONPATH=$PWD .venv/bin/python tests/readme_commands.py --write   # rewrites README.md in place
    PYTHONPATH=$PWD .venv/bin/python tests/readme_commands.py           # checks, as the test does
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: What a command's workspace holds: copies of the checkout's folders a README command names.
COPIED = ("examples", "search_spaces")
_RULE = re.compile(r"^<!--\s*output:\s*(.+?)\s*-->\s*$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ECHO_EXIT = '; echo "exit $?"'
ELIDED = "..."
#: How a run's interpreter path is shown (a checkout's venv, as the README's install makes it).
PYTHON_SHOWN = ".venv/bin/python"


class UnknownCommand(ValueError):
    """A README command this module does not know how to run as printed."""


@dataclass
class Command:
    """One ``$ `` line and the output lines the README shows after it."""

    line: str            # as printed, without the leading "$ "
    shown: list[str] = field(default_factory=list)
    first: int = 0       # README line index of the "$ " line
    last: int = 0        # README line index after its last output line


@dataclass
class Block:
    """A fenced console block: its rule and its commands."""

    rule: str
    commands: list[Command]
    start: int           # line index of the opening fence
    end: int             # line index of the closing fence
    indent: str = ""     # the fence's indent (a block inside a list item), stripped from its lines


def blocks(text: str) -> list[Block]:
    """Every fenced ``console`` block of ``text``, with the rule of the comment above it
    (``all`` where there is none)."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        m = _RULE.match(lines[i - 1].strip()) if i else None
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        commands: list[Command] = []
        for k in range(i + 1, j):
            line = lines[k].removeprefix(indent)
            if line.startswith("$ "):
                commands.append(Command(line[2:], first=k, last=k + 1))
            elif commands:
                commands[-1].shown.append(line)
                commands[-1].last = k + 1
            else:
                raise UnknownCommand(f"README.md line {k + 1}: output before any command in a console block")
        out.append(Block(m.group(1) if m else "all", commands, i, j, indent))
        i = j + 1
    return out


def command_starting(prefix: str, text: str | None = None) -> str:
    """The one README command that starts with ``prefix`` (for the tests that run a command this
    module leaves to them)."""
    found = [c.line for b in blocks(text if text is not None else README.read_text()) for c in b.commands
             if c.line.startswith(prefix)]
    if len(found) != 1:
        raise AssertionError(f"README.md shows {len(found)} commands starting {prefix!r}, not one: {found}")
    return found[0]


def argv_of(line: str) -> tuple[dict[str, str], list[str], bool]:
    """``(env, argv, echo_exit)`` of a README command: the assignments before it, the argv that
    runs it here (``python -m tuner.cli ...`` for ``nccl-tune ...``), whether it prints its exit
    status. Raises :class:`UnknownCommand` for anything else."""
    echo = line.endswith(_ECHO_EXIT)
    words = shlex.split(line.removesuffix(_ECHO_EXIT) if echo else line, comments=True)
    env = {}
    while words and _ASSIGN.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "nccl-tune" or any(w in {"|", ">", ">>", "<", "&", "&&", ";", "2>&1"}
                                                    or w.startswith((">", "2>")) for w in words):
        raise UnknownCommand(f"README command {line!r}: only `[NAME=value ...] nccl-tune ARGS"
                             f"[{_ECHO_EXIT}]` is run as printed")
    return env, [sys.executable, "-m", "tuner.cli", *words[1:]], echo


#: In a workspace: the port each copied example was moved to, and the one it names (JSON).
PORTS_FILE = ".ports.json"


def workspace(parent: Path) -> Path:
    """A folder laid out as a checkout's root for the commands: copies of :data:`COPIED`, each
    example's ``port`` moved to a free one (a test beside it may use the same example, and
    ``make demo`` its port); :func:`run` shows the port the example names."""
    for name in COPIED:
        shutil.copytree(ROOT / name, parent / name)
    ports = {}
    for example in sorted((parent / "examples").glob("*.toml")):
        text = example.read_text()
        m = re.search(r"^port = (\d+)", text, re.M)
        if m:
            free = _free_port()
            ports[str(free)] = m.group(1)
            example.write_text(text[:m.start(1)] + str(free) + text[m.end(1):])
    (parent / PORTS_FILE).write_text(json.dumps(ports))
    return parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(line: str, cwd: Path, extra_env: dict[str, str] | None = None, timeout: float = 900) -> tuple[int, str]:
    """Run a README command as printed from ``cwd``: ``(exit status, what a terminal shows)``,
    stdout and stderr in one stream, unbuffered, so their lines keep their order."""
    env_add, argv, echo = argv_of(line)
    env = {**os.environ, **(extra_env or {}), **env_add, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("COLUMNS", None)
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    out = proc.stdout.replace(str(cwd), ".").replace(sys.executable, PYTHON_SHOWN)
    ports = cwd / PORTS_FILE
    for free, named in (json.loads(ports.read_text()) if ports.is_file() else {}).items():
        out = re.sub(rf"\b{free}\b", named, out)
    if echo:
        out += f"exit {proc.returncode}\n"
    return proc.returncode, out


def pattern(line: str) -> re.Pattern[str]:
    """``line`` with every run of digits standing for any digits and every run of spaces for any
    spaces."""
    parts = []
    for tok in re.findall(r"\d+|\s+|[^\d\s]+", line.rstrip()):
        parts.append(r"\d+" if tok[0].isdigit() else r"\s+" if tok[0].isspace() else re.escape(tok))
    return re.compile("^" + "".join(parts) + r"\s*$")


def split_rule(rule: str) -> tuple[str, re.Pattern[str] | None]:
    """``(what to show, which shown lines to check or None for all)`` of a block's rule."""
    show, sep, check = rule.partition("; check ")
    return show.strip(), (re.compile(check.strip()) if sep else None)


def missing(shown: list[str], output: str, check: re.Pattern[str] | None = None) -> list[str]:
    """The shown lines (``...`` aside; only those ``check`` finds, when given) that no line of the
    output matches, numbers masked. In any order: a table's rows of sets within the noise of each
    other change places between runs."""
    got = [line.rstrip() for line in output.splitlines()]
    return [want for want in shown if want.strip() != ELIDED and (check is None or check.search(want))
            and not any(pattern(want).match(g) for g in got)]


def select(rule: str, output: str) -> list[str]:
    """The lines of ``output`` a block with ``rule`` shows."""
    rule = split_rule(rule)[0]
    lines = [line.rstrip() for line in output.splitlines()]
    if rule == "all":
        return lines
    if rule.startswith("grep "):
        rx = re.compile(rule.removeprefix("grep "))
        kept: list[str] = []
        for k, line in enumerate(lines):
            if rx.search(line):
                if (k > 0 and not kept) or (kept and kept[-1] != ELIDED and not rx.search(lines[k - 1])):
                    kept.append(ELIDED)
                kept.append(line)
            elif k == len(lines) - 1 and kept and kept[-1] != ELIDED:
                kept.append(ELIDED)
        return kept
    if rule.startswith("from "):
        rx = re.compile(rule.removeprefix("from "))
        k = next((k for k, line in enumerate(lines) if rx.search(line)), None)
        return [] if k is None else ([ELIDED] if k else []) + lines[k:]
    raise UnknownCommand(f"README output rule {rule!r}: accepted: all, grep REGEX, from REGEX, run by tests/e2e/X.py")


def delegated(rule: str) -> Path | None:
    """The test a ``run by`` rule names, or None for a rule this module runs itself."""
    return ROOT / rule.removeprefix("run by ").strip() if rule.startswith("run by ") else None


def results(workdir: Path, extra_env: dict[str, str] | None = None) -> list[tuple[Block, Command, int, str]]:
    """Run every command this module runs, in README order, in one workspace (a later command
    may read what an earlier one wrote, as the reader's would): (block, command, status,
    output) each."""
    space = workspace(workdir)
    out = []
    for block in blocks(README.read_text()):
        if delegated(block.rule) is not None:
            continue
        for cmd in block.commands:
            rc, output = run(cmd.line, space, extra_env)
            out.append((block, cmd, rc, output))
    return out


def problems(runs: list[tuple[Block, Command, int, str]]) -> list[str]:
    """Each command that failed without saying its status, or whose shown lines its run lacks."""
    bad = []
    for block, cmd, rc, output in runs:
        if rc != 0 and not cmd.line.endswith(_ECHO_EXIT):
            bad.append(f"$ {cmd.line}: exit {rc}\n{output[-3000:]}")
        if lost := missing(cmd.shown, output, split_rule(block.rule)[1]):
            bad.append(f"$ {cmd.line}: the run printed no line like\n  " + "\n  ".join(lost)
                       + f"\n--- it printed:\n{output[-6000:]}")
    return bad


def rewrite(runs: list[tuple[Block, Command, int, str]]) -> str:
    """README.md with each run command's shown output replaced by its rule's lines of the run."""
    lines = README.read_text().splitlines()
    for block, cmd, _rc, output in sorted(runs, key=lambda r: -r[1].first):
        lines[cmd.first + 1:cmd.last] = [(block.indent + line).rstrip() for line in select(block.rule, output)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="readme-commands-") as tmp:
        workers = Path(tmp) / "workers"
        workers.mkdir()
        runs = results(Path(tmp) / "repo", {"NCCL_TUNE_WORKERS_DIR": str(workers)})
    if "--write" in argv:
        README.write_text(rewrite(runs))
        print(f"rewrote the output of {len(runs)} commands in {README}")
    bad = problems(runs)
    print("\n\n".join(bad) if bad else f"all {len(runs)} README commands print what README.md shows")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
