"""One Slurm step for a server that spans nodes: ``srun --nodes=N --ntasks-per-node=1 --label
--multi-prog FILE``, one task per node, task R running node R's command.

FILE is srun(1)'s MULTIPLE PROGRAM CONFIGURATION: one line per task, ``RANK PROGRAM ARGS...``.
slurmstepd splits the arguments itself, no shell (SchedMD/slurm src/slurmd/slurmstepd/
multi_prog.c, ``multi_prog_get_argv``, Slurm 23.02): single quotes keep every character
between them (``%`` included), a backslash keeps the next character, an unquoted ``%t``/``%o``
becomes the task's rank/offset and any other unquoted ``%X`` is dropped, a line ending in ``\\``
continues on the next. So every word is written single-quoted, a quote inside as ``'\\''``; a
newline cannot be written at all. ``--label`` prefixes each output line with ``R: `` (srun(1),
``-l``), which :func:`split_label` reads back. The allocation's nodes are ``scontrol show
hostnames $SLURM_JOB_NODELIST`` (scontrol(1)), first = head.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from tuner.launchers.base import run_quiet

__all__ = ["allocation_hosts", "multiprog_text", "quote", "split_label", "srun_argv"]

_LABEL = re.compile(r"^\s*(\d+): ?")


def quote(word: str) -> str:
    """``word`` as one argument of a --multi-prog line (single-quoted; see the module docstring).
    Raises ValueError for a newline, which the file cannot hold."""
    if "\n" in word or "\r" in word:
        raise ValueError(f"a --multi-prog argument cannot hold a newline: {word!r}")
    return "'" + word.replace("'", "'\\''") + "'"


def multiprog_text(commands: Sequence[Sequence[str]]) -> str:
    """The --multi-prog file for ``commands`` (task R runs ``commands[R]``)."""
    return "".join(f"{rank} {' '.join(quote(w) for w in argv)}\n" for rank, argv in enumerate(commands))


def srun_argv(srun: str, nnodes: int, conf: Path) -> list[str]:
    """The step's command: ``srun --nodes=N --ntasks-per-node=1 --label --multi-prog FILE``."""
    return [srun, f"--nodes={nnodes}", "--ntasks-per-node=1", "--label", "--multi-prog", str(conf)]


def split_label(line: str) -> tuple[int | None, str]:
    """``(task, text)`` of a ``--label`` line (``"1: text"``, ``" 1: text"``); ``(None, line)``
    for srun's own lines, which carry no label."""
    m = _LABEL.match(line)
    return (int(m.group(1)), line[m.end():]) if m else (None, line)


def allocation_hosts(environ: Mapping[str, str]) -> tuple[list[str], str]:
    """``(hosts, why)``: the allocation's node names (``scontrol show hostnames
    $SLURM_JOB_NODELIST``), or ``([], why)`` when there is none or scontrol did not answer."""
    nodelist = environ.get("SLURM_JOB_NODELIST", "")
    if not nodelist:
        return [], "SLURM_JOB_NODELIST is unset: not inside a Slurm allocation"
    code, out = run_quiet(["scontrol", "show", "hostnames", nodelist], 15.0)
    if code != 0:
        return [], f"scontrol show hostnames {nodelist}: {out.splitlines()[-1] if out else f'exit {code}'}"
    return [h for h in out.split() if h], ""
