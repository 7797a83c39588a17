"""``nccl-tune report --study NAME``: rebuild trials.csv, the figures, report.md and report.html
from the storage, judged on the study's own metric (:func:`tuner.report.write_outputs`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tuner.cli.common import CLI, Help, figures_argument, fraction, storage_default, study_name
from tuner.errors import ExitCode, InputError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``report`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    r = sub.add_parser("report", help="rebuild trials.csv, plots and report.md from the storage", formatter_class=Help)
    r.add_argument("--study", type=study_name, help="study name (without it: the studies there are, in the error)")
    r.add_argument("--storage", default=storage_default(), help="Optuna storage URL (default: $NCCL_TUNE_STORAGE, else SQLite in results/<study>/)")
    r.add_argument("--results", type=Path, default=Path("results"), help="results root")
    r.add_argument("--min-effect", type=fraction, default=None,
                   help="smallest gain worth calling faster (default: what the sweep stored)")
    figures_argument(r, later=False)


def run(args: argparse.Namespace) -> int:
    """Rebuild study ``args.study``'s outputs; returns 0. InputError (exit 2) without a study,
    for one not in the storage (the studies there are named), a storage that cannot be opened
    (StorageUnreadable) or a study a newer nccl-tune wrote (NewerFormat)."""
    from tuner import report
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.report import study_listing
    from tuner.study import StudyStore, check_format, default_storage, hide_password, open_study

    if args.study is None:  # say which studies there are (`nccl-tune studies` shows them in full)
        raise InputError(CLI, "--study", None, study_listing(args.storage, args.results),
                         "report rebuilds one study's results; nccl-tune studies lists them")
    study_dir = args.results / args.study
    storage = args.storage or default_storage(study_dir)
    if not args.storage and not (study_dir / "study.db").exists():
        raise InputError(CLI, "--study", args.study, _or_storage(study_listing(None, args.results)),
                         f"{study_dir / 'study.db'} does not exist")
    try:
        study = open_study(args.study, storage, create=False)
    except KeyError:
        raise InputError(CLI, "--study", args.study, study_listing(args.storage, args.results),
                         f"no study of that name in {hide_password(storage)}") from None
    store = StudyStore(study, {})
    check_format(store, storage, args.study)
    info = store.info()
    min_effect = args.min_effect if args.min_effect is not None else (
        info.min_effect if info.min_effect is not None else DEFAULT_MIN_EFFECT)
    df, verdict = report.write_outputs(store.records(relaunched_only=False), info, args.study, study_dir,
                                       min_effect=min_effect, figures=not args.no_figures)
    report.print_results(df, verdict, info)
    plots = "" if args.no_figures else " and plots"
    print(f"\nwrote {study_dir}/trials.csv, report.md, report.html{plots} (judged on {info.metric.words}, the study's metric)")
    return ExitCode.OK


def _or_storage(listing: str) -> str:
    """``listing`` with "(or pass --storage)" unless it says so already."""
    return listing if "--storage" in listing else listing + " (or pass --storage)"
