"""The commands a docs/ page shows, found and run as printed (for docs/SCALE.md's Slurm and
Kubernetes commands, which run other programs than nccl-tune: tests/readme_commands.py runs the
README's nccl-tune commands).

A command is a ``$ `` line of a fenced ``console`` block, its shown output the lines after it
(tests/readme_commands.py, :func:`blocks`). It runs without a shell, as the shell would run a
simple command: ``$NAME``, ``${NAME}`` and ``"$NAME"`` are the environment's value (a URL: no
spaces, no quotes), the words split as ``shlex`` splits them; a pipe, redirect, ``;``, ``&&``
or command substitution is refused, so what runs is what the page prints.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.readme_commands import Command, blocks, missing

__all__ = ["argv_of", "command", "run"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_REFUSED = ("|", ">", "<", ";", "&", "`", "$(")


def command(page: Path, prefix: str) -> Command:
    """The one command of ``page``'s console blocks that starts with ``prefix``, with its shown
    output; AssertionError when there is none or several."""
    found = [c for b in blocks(page.read_text()) for c in b.commands if c.line.startswith(prefix)]
    if len(found) != 1:
        raise AssertionError(f"{page.name} shows {len(found)} commands starting {prefix!r}, not one: "
                             f"{[c.line for c in found]}")
    return found[0]


def argv_of(line: str, environ: Mapping[str, str]) -> list[str]:
    """The argv a shell runs for ``line``: its variables expanded from ``environ`` (an unset one
    is an error here, where the shell would pass an empty word), its words split."""
    if any(tok in line for tok in _REFUSED):
        raise ValueError(f"{line!r}: only a simple command runs as printed (no pipe, redirect, list or substitution)")

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in environ:
            raise ValueError(f"{line!r}: ${name} is not set")
        return environ[name]

    return shlex.split(_VAR.sub(value, line))


def run(cmd: Command, cwd: Path, environ: Mapping[str, str], *, insert: tuple[str, ...] = (),
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` as printed from ``cwd`` with ``environ`` (``insert``: words put after the
    program's name, e.g. a test-only ``--wait``); stdout and stderr in one stream. The shown
    output lines it lacks (numbers masked) are in the result's ``missing`` attribute."""
    argv = argv_of(cmd.line, environ)
    argv[1:1] = list(insert)
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: a stand-in passes it to what it started (SIGKILL would leave that running)
        proc.communicate(timeout=60)
        raise
    done = subprocess.CompletedProcess(argv, proc.returncode, out, None)
    done.missing = missing(cmd.shown, out)  # type: ignore[attr-defined]
    return done
