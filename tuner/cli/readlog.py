"""``nccl-tune read-log FILE... [--json]``: what nccl-tune reads from logs it did not launch (a
colleague's box, a CI artifact, a pasted issue), launching nothing (:func:`tuner.readlog.read_logs`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.cli.common import Help
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``read-log`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    v = sub.add_parser("read-log", help="read NCCL, nccl-tests and server logs nccl-tune did not launch: version, "
                       "ranks, threads, echoes, peers, nccl-tests rows, backend, triage", formatter_class=Help)
    v.add_argument("files", nargs="+", type=Path, metavar="FILE", help="log files, read together as one run")
    v.add_argument("--json", action="store_true", help="print one JSON object for all the files")


def run(args: argparse.Namespace) -> int:
    """Read ``args.files`` and print what they hold; 0 when read, 2 when a file cannot be read."""
    from tuner.readlog import read_logs, render

    render(read_logs(list(args.files)), as_json=args.json)
    return ExitCode.OK
