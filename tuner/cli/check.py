"""``nccl-tune check CONFIG --set ...``: relaunch the baseline and a deployed set (baseline, set,
set, baseline) and say whether the set still holds: exit 0 it does, 6 it no longer does, 7 it
cannot be judged. The logic is :mod:`tuner.sweep.check`'s; here the inputs, the worker
registry, the outputs and the exit status."""

from __future__ import annotations

import argparse
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

from tuner.cli.common import (
    CLI,
    Help,
    figures_argument,
    hold_gpus,
    positive,
    result_files,
    soak_minutes,
    storage_default,
    study_name,
    study_name_from,
    with_soak,
)
from tuner.errors import ExitCode, InputError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``check`` subparser and its arguments, on ``sub`` (argparse's subparsers). The set's
    server flags may also follow ``--`` (the dispatcher puts them in ``args.trailing``)."""
    c = sub.add_parser("check", help="relaunch the baseline and a deployed set (baseline, set, set, baseline) and "
                                     "say whether the set still holds: exit 0 it does, 6 it no longer does, 7 it "
                                     "cannot be judged", formatter_class=Help)
    c.add_argument("config", help="experiment TOML (see examples/)")
    c.add_argument("--set", dest="set_items", nargs="+", required=True, metavar="NAME|VAR=VALUE",
                   help="the deployed set: VAR=VALUE items, or one NAME: a preset or trial number of the --against "
                        "study, 'winner' (the set its verdict names), or a preset of the config's space")
    c.add_argument("--flag", dest="flags", action="append", default=[], metavar="ITEM",
                   help="a server argv item of the set (repeatable, in order): --flag=--disable-custom-all-reduce; "
                        "or put the flags after '--'")
    c.add_argument("--against", type=study_name,
                   help="the study whose launch noise judges the check (and whose sets --set NAME names); "
                        "without it, the prior")
    c.add_argument("--storage", default=storage_default(), help="Optuna storage of --against and of the check's own study "
                                     "(default: $NCCL_TUNE_STORAGE, else SQLite in results/<study>/)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results root")
    c.add_argument("--trials", type=positive(int), default=4,
                   help="relaunches, every one counted (the baselines' included): baseline, set, set, baseline, "
                        "then set, set, baseline again; at least 4")
    c.add_argument("--soak", type=soak_minutes, metavar="MINUTES",
                   help="minutes of sustained load the set's last launch and the baseline's last launch run "
                        "after their probe, watched for a hang (default: sweep.soak_minutes, 10; 0: none)")
    c.add_argument("--study", type=study_name, help="the check's own study (default: check-<config>-<time>)")
    c.add_argument("--allow-unsafe", action="store_true", help="allow a set that forces LL128 or another unsafe value")
    c.add_argument("-v", "--verbose", action="store_true",
                   help="print the whole log here (each phase; each relaunch's result, proof and NCCL library; the triage's findings); it is "
                   "always kept in <results>/<study>/night.log")
    c.add_argument("--allow-unknown", action="store_true",
                   help="let through an NCCL_* variable nccl-tune's record does not hold (one of an NCCL newer than "
                        "2.30.7), with a note; without it such a name is refused as a likely typo")
    c.add_argument("--json", action="store_true",
                   help="print the answer as one JSON object on stdout (holds true/false/null and why, the set's "
                        "ratio and interval, whether the --against study confirmed it, the report's files); exit "
                        "status as without it")
    figures_argument(c)


def run(args: argparse.Namespace) -> int:
    """Run the check; returns 0 when the set holds, raises NoLongerHolds (exit 6) or NotJudged
    (exit 7) otherwise, InputError (exit 2) for bad input (StorageUnreadable for a storage that
    cannot be opened)."""
    from tuner import report
    from tuner.errors import NoLongerHolds, NotJudged
    from tuner.inputs import find_path, load_config, load_space
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.server import preflight
    from tuner.study import this_host
    from tuner.sweep import (
        CHECK_TRIALS,
        NIGHT_LOG,
        PRIOR_WORDS,
        Progress,
        SweepOptions,
        judge_check,
        open_against,
        resolve_set,
        run_check,
    )

    if args.trials < CHECK_TRIALS:
        raise InputError(CLI, "--trials", args.trials, f"an integer >= {CHECK_TRIALS}",
                         "baseline, set, set, baseline is the smallest check that can say the set holds")
    cfg = with_soak(load_config(args.config, allow_unsafe=args.allow_unsafe, resolve_space=False,
                                allow_unknown=args.allow_unknown), args.soak)
    metric = cfg.probe.metric
    against = (open_against(args.against, args.storage, args.results, metric, this_host(cfg).host_type)
               if args.against else None)

    def space() -> Any:
        found = find_path(cfg.sweep.space, cfg.path, bundled=True)  # as a sweep finds it
        try:
            return load_space(found[0] if found else cfg.sweep.space, allow_unsafe=args.allow_unsafe, version=cfg.nccl.nccl_version,
                              allow_unknown=args.allow_unknown)
        except InputError:
            return None

    checked = resolve_set(args.set_items, [*args.flags, *getattr(args, "trailing", [])], cfg=cfg, space=space,
                          against=against, allow_unsafe=args.allow_unsafe, allow_unknown=args.allow_unknown)
    study = args.study or f"check-{study_name_from(args.config)}-{datetime.now():%Y%m%d-%H%M%S}"
    if (args.results / study / "study.db").exists() and not args.storage:
        raise InputError(CLI, "--study", study, "a study name not used yet", "a check is one fresh study")
    preflight.check(cfg, args.results)
    hold_gpus(args, cfg, study, "check")
    progress = Progress(args.trials, verbose=args.verbose)
    progress.keep(args.results / study / NIGHT_LOG)
    progress.log(f"check: {checked.words()} ({checked.source}) against the untuned baseline, {args.trials} relaunches "
                 f"as study {study}" + (f"; judged with the launch noise of study {against.name}" if against else ""))
    opts = SweepOptions(study=study, results=args.results, storage=args.storage, trials=args.trials, confirm=False,
                        final_baseline=False, allow_unsafe=args.allow_unsafe, force=True, progress=progress)
    try:
        sweep = run_check(cfg, checked, opts)
    except OSError as exc:
        raise InputError(CLI, "--results", str(args.results), preflight.RESULTS_ACCEPTED,
                         exc.strerror or str(exc)) from None
    store = sweep.store
    records = store.records(relaunched_only=False)
    noise_from = f"the stored noise of study {against.name}" if against else PRIOR_WORDS
    verdict = judge_check(records, checked, metric=metric, noise=against.noise if against else None,
                          noise_from=noise_from, info=store.info(), against=against)
    store.update_info(stop_reason=f"{report.CHECK_PREFIX}{verdict.reason}", min_effect=DEFAULT_MIN_EFFECT)
    night, _ = report.write_outputs(records, store.info(), study, opts.study_dir, min_effect=DEFAULT_MIN_EFFECT,
                                    figures=not args.no_figures)
    changed = report.library_change(against.records, records, (against.name, study)) if against else None
    if args.json:
        print(json.dumps(_answer(verdict, checked, against, changed, night.to_json(
            result_files(opts.study_dir, figures=not args.no_figures))), indent=1))
    else:
        if changed:
            print(f"check: {changed}")
        if verdict.holds:
            print(f"check: the set {verdict.reason}")
        print(f"results: {opts.study_dir}/trials.csv, report.md, report.html (nccl-tune report --study {study})")
    if verdict.holds is None:
        raise NotJudged(verdict.reason)
    if not verdict.holds:
        raise NoLongerHolds(verdict.reason)
    return ExitCode.OK


def _answer(verdict: Any, checked: Any, against: Any, changed: str | None, night: dict[str, Any]) -> dict[str, Any]:
    """``check --json``'s object: the decision (``kind`` holds, no-longer-holds or not-judged, and
    its line), the set recommended (the one checked when it holds, else null), ``holds`` (true,
    false, null: cannot be judged) and ``reason``,
    the set, its ratio to the baseline on the check's launches with the one-sided lower bound,
    the ``--against`` study and whether it confirmed the set, the library change, and the
    check study's report (:meth:`tuner.report.model.NightReport.to_json`: its files, its sets)."""
    from tuner.sweep import never_confirmed

    c = verdict.comparison
    def num(v: float | None) -> float | None:
        return v if v is not None and math.isfinite(v) else None
    unconfirmed = never_confirmed(against, checked)
    the_set = {"name": checked.name, "env": dict(checked.env), "flags": list(checked.flags), "source": checked.source}
    kind = {True: "holds", False: "no-longer-holds", None: "not-judged"}[verdict.holds]
    return {"decision": {"kind": kind, "line": verdict.reason.split(": ", 1)[0] + ": " + checked.words()},
            "holds": verdict.holds, "reason": verdict.reason, "recommended": the_set if verdict.holds else None,
            "set": the_set,
            "ratio": num(c.ratio) if c else None, "low": num(c.ci_low) if c else None,
            "gain_pct": num(c.gain_pct) if c else None,
            "against": ({"study": against.name, "confirmed": not unconfirmed, "said": unconfirmed or None}
                        if against else None),
            "library_change": changed or None, "study": night["study"], "files": night["files"],
            "sets": night["sets"]}
