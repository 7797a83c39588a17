"""``nccl-tune studies``: the studies of a storage, each with its state, relaunches and its
decision (:func:`tuner.report.studies.print_studies`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.cli.common import VIEW_STORAGE_HELP, Help, storage_default
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``studies`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    v = sub.add_parser("studies", help="list the studies of a storage: state, relaunches and decision",
                       formatter_class=Help)
    v.add_argument("--storage", default=storage_default(), help=VIEW_STORAGE_HELP)
    v.add_argument("--results", type=Path, default=Path("results"), help="results root")
    v.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print every study of ``args.storage`` (else of each ``results/*/study.db``); returns 0."""
    from tuner.report import find_nights, print_studies
    from tuner.study import hide_password

    where = hide_password(args.storage) if args.storage else f"{args.results}/*/study.db"
    print_studies(find_nights(args.storage, args.results), as_json=args.json, where=where)
    return ExitCode.OK
