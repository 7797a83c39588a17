"""``nccl-tune compare STUDY_A STUDY_B``: two nights side by side, what changed between them and
whether the sets both measured agree (:mod:`tuner.report.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.cli.common import Help, storage_default, study_name
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``compare`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    c = sub.add_parser("compare", help="two nights side by side: what changed, the sets both measured and whether "
                                       "they agree", formatter_class=Help)
    c.add_argument("study_a", type=study_name, metavar="STUDY_A", help="the first night (A)")
    c.add_argument("study_b", type=study_name, metavar="STUDY_B", help="the second night (B)")
    c.add_argument("--storage", default=storage_default(), help="Optuna storage URL of A, and of B without --storage-b "
                                     "(default: $NCCL_TUNE_STORAGE, else results/<study>/study.db)")
    c.add_argument("--storage-b", help="Optuna storage URL of B (default: --storage, else results/<STUDY_B>/study.db)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results root")
    c.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the comparison of the two studies (or JSON); returns 0."""
    from tuner.report import compare_nights, open_night, print_comparison

    a = open_night(args.study_a, args.storage, args.results, study_key="STUDY_A")
    b = open_night(args.study_b, args.storage_b or args.storage, args.results, study_key="STUDY_B",
                   storage_key="--storage-b" if args.storage_b else "--storage")
    print_comparison(compare_nights(a, b), as_json=args.json)
    return ExitCode.OK
