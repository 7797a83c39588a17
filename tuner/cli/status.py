"""``nccl-tune status``: a night from its storage, on any host: the trial in flight and its
phase, the expected end, the best set so far (:mod:`tuner.report.status`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.cli.common import VIEW_STORAGE_HELP, Help, storage_default, study_name
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``status`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    st = sub.add_parser("status", help="a night from its storage (any host): the trial in flight and its phase, "
                                       "the expected end, the best set so far", formatter_class=Help)
    st.add_argument("--study", type=study_name, help="study name (default: the one running study)")
    st.add_argument("--storage", default=storage_default(), help=VIEW_STORAGE_HELP)
    st.add_argument("--results", type=Path, default=Path("results"), help="results root")
    st.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the status of ``args.study`` (else of the one running study); returns 0."""
    from tuner.report import find_nights, night_status, open_night, pick_running, print_status
    from tuner.study import hide_password

    if args.study is not None:
        night = open_night(args.study, args.storage, args.results)
    else:
        where = hide_password(args.storage) if args.storage else f"{args.results}/*/study.db"
        night = pick_running(find_nights(args.storage, args.results), where)
    print_status(night_status(night), as_json=args.json)
    return ExitCode.OK
