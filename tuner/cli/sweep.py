"""``nccl-tune sweep CONFIG``: relaunch the server under each NCCL set and judge each against the
untuned baseline (the loop: :class:`tuner.sweep.Sweep`; whether a run may resume its study and
what it records there: :func:`tuner.study.begin_run`), or with ``--dry-run`` its checks and plan."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from tuner.cli.common import (
    CLI,
    Help,
    duration,
    figures_argument,
    fraction,
    hold_gpus,
    nonneg_int,
    positive,
    result_files,
    soak_minutes,
    storage_default,
    study_name,
    study_name_from,
    until,
    with_soak,
)
from tuner.errors import ExitCode, InputError, Interrupted, NcclTuneError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``sweep`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    s = sub.add_parser("sweep", help="relaunch the server under each NCCL set and compare with the baseline",
                       formatter_class=Help)
    s.add_argument("config", help="experiment TOML (see examples/)")
    s.add_argument("--trials", type=positive(int),
                   help="relaunch budget: every relaunch counts (the baseline, its re-measures, the sets, the "
                        "confirmations); the checks' slots are kept inside it (default: the config's sweep.trials; without "
                        "one, under --until/--timeout what fits before the deadline, else 12)")
    s.add_argument("--study", type=study_name, help="study name (default: the config file's stem)")
    s.add_argument("--storage", default=storage_default(), help="Optuna storage: postgresql://user:pass@host/db (several hosts), "
                                     "journal:///shared/folder/study.log (hosts sharing a filesystem; no "
                                     "heartbeat) (default: $NCCL_TUNE_STORAGE, else SQLite in results/<study>/)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results root")
    s.add_argument("--space", type=Path, help="a search-space TOML, or a bundled space's name such as safe "
                   "(default: the config's sweep.space)")
    s.add_argument("--mode", choices=("search", "presets"), help="presets: only the space's preset sets, in order")
    s.add_argument("--seed", type=nonneg_int, help="sampler seed (>= 0)")
    s.add_argument("--allow-unsafe", action="store_true",
                   help="allow forcing LL128 and other settings that can corrupt data or hang")
    s.add_argument("--allow-unknown", action="store_true",
                   help="let through an NCCL_* variable nccl-tune's record does not hold (one of an NCCL newer than "
                        "2.30.7), with a note; without it such a name is refused as a likely typo")
    s.add_argument("--baseline-every", type=nonneg_int, metavar="K",
                   help="re-measure the baseline every K relaunches (each re-measure counts: one set fewer)")
    s.add_argument("--no-final-baseline", action="store_true",
                   help="skip the baseline re-measure after the confirmations (frees its slot)")
    s.add_argument("--no-confirm", action="store_true",
                   help="do not relaunch the finalists to confirm their gain (frees their slots; then no set is "
                        "recommended)")
    s.add_argument("--soak", type=soak_minutes, metavar="MINUTES",
                   help="minutes of sustained load each finalist's confirmation runs after its probe, at the probe's "
                        "concurrency levels, watched for a hang (a stall, the server's watchdog line); the final "
                        "baseline gets the same where time allows (default: sweep.soak_minutes, 10; 0: none)")
    s.add_argument("--rebaseline", action="store_true", help="on resume, measure the baseline again")
    s.add_argument("--target", type=positive(float), help="tok/s goal: stop when a set's CI lower bound meets it")
    s.add_argument("--always", action="store_true", help="with --target: tune even if the baseline already meets it")
    s.add_argument("--timeout", type=duration, help="start no trial that would end past this duration (8h, 90m, 3600s)")
    s.add_argument("--until", type=until, help="start no trial that would end past this wall-clock time (HH:MM)")
    s.add_argument("--min-effect", type=fraction, default=None,
                   help="smallest gain worth calling faster (fraction; default 0.01, or what the study stored)")
    s.add_argument("--fresh", action="store_true",
                   help="start the study over: its folder under --results (the previous night's results) is removed "
                   "once every check before the first launch has passed, never before; not with --storage")
    s.add_argument("-v", "--verbose", action="store_true",
                   help="print the whole night's log here (each phase; each relaunch's result, proof and NCCL library; the triage's findings); "
                   "it is always kept in <results>/<study>/night.log")
    s.add_argument("--dry-run", action="store_true",
                   help="make the sweep's checks before its first launch (files, values, paths, the port, a live "
                        "runner; without the server's program on PATH, what belongs to the night's host is reported, "
                        "not refused), print the plan (values as NCCL reads them, the relaunches in order with every "
                        "skip and its reason, the screen's and the sampler's share with their bounds, the checks' "
                        "slots in the budget) and what was checked, and launch nothing")
    s.add_argument("--force", action="store_true",
                   help="relaunch tuned sets even when a check says it cannot help (NCCL not on the decode path, "
                        "the screen's bound below the noise)")
    s.add_argument("--json", action="store_true",
                   help="print the answer as one JSON object on stdout (the decision, the recommended set or null, "
                        "each set's ratio and interval, the gates, the report's files); progress stays on stderr")
    figures_argument(s)


def run(args: argparse.Namespace) -> int:
    """Run ``nccl-tune sweep`` with the parsed ``args``; returns the exit status (raises the
    NcclTuneError that ends it, after the report of what was recorded)."""
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.redaction import secret_values
    from tuner.server import preflight
    from tuner.study import begin_run, record_end, record_stop
    from tuner.sweep import NIGHT_LOG, Progress, Sweep, SweepOptions

    if args.fresh and args.storage:
        raise InputError(CLI, "--fresh", True, "without --storage (a study folder of its own)",
                         "a shared study is not removed by one worker; name a new --study instead")
    cfg, space = _load_inputs(args, check_program=not args.dry_run)  # a dry run says what is not on PATH
    cfg = with_soak(cfg, args.soak)
    _check_fixed_env(cfg, space)
    _check_budget(args, cfg)
    if args.dry_run:
        return _dry_run(args, cfg, space)
    preflight.check(cfg, args.results, [n for n in space.choices() if not n.startswith("-")],
                    f"the search space {space.path}")  # before anything is written
    _say_until(args)
    name = args.study or study_name_from(args.config)
    hold_gpus(args, cfg, name, "sweep")  # refused before anything is opened or written
    if args.fresh:
        _start_over(args.results / name)  # every check passed: the new night can start
    trials = args.trials or cfg.sweep.trials
    fill = _fills_clock(args, cfg)
    progress = Progress(trials, verbose=args.verbose)  # every relaunch counts, the checks included
    opts = SweepOptions(study=name, results=args.results, storage=args.storage, trials=trials,
                        mode=args.mode, seed=args.seed, baseline_every=args.baseline_every,
                        final_baseline=not args.no_final_baseline, confirm=not args.no_confirm,
                        rebaseline=args.rebaseline, allow_unsafe=args.allow_unsafe, force=args.force,
                        target=args.target, always=args.always, timeout_s=args.timeout, until=args.until,
                        fill_clock=fill, progress=progress)
    try:
        sweep = Sweep(cfg, space, opts)  # a storage it cannot open: StorageUnreadable, exit 2
    except OSError as exc:
        raise InputError(CLI, "--results", str(args.results), preflight.RESULTS_ACCEPTED,
                         exc.strerror or str(exc)) from None
    store = sweep.store
    begun = begin_run(store, cfg, space, config_path=args.config, study=name, storage_url=sweep.storage_url,
                      secrets=secret_values({**os.environ, **cfg.server.env}),  # the runner's env reaches the server
                      target=sweep.target, min_effect=args.min_effect, default_min_effect=DEFAULT_MIN_EFFECT)
    progress.keep(opts.study_dir / NIGHT_LOG)  # once the study is this night's (a refused resume writes no log)
    if begun.fixed:
        progress.log(f"note: server.env fixes {' '.join(f'{k}={v}' for k, v in begun.fixed.items())} for "
                     "every trial; the 'untuned' baseline runs with these too")
    error: NcclTuneError | None = None
    try:
        outcome = sweep.run()
        record_end(store, outcome)
        n = outcome.relaunches
        progress.log(f"sweep ended: {outcome.stop_reason}; {n} relaunch{'es' if n != 1 else ''} this run")
    except NcclTuneError as exc:
        error = exc
        if sweep.outcome.relaunches:  # a run stopped before its first relaunch leaves the study as it was
            record_stop(store, str(exc))
    records = store.records(relaunched_only=False)
    if error is not None and (not records or not sweep.outcome.relaunches):
        # refused before any launch of its own (a held port, another runner's night): the error alone; the
        # study's report and stop reason stay what its own runs wrote
        raise error
    if error is not None:
        progress.log(_stopped_message(error))
    from tuner import report  # matplotlib and the rest: seconds, only for a night that reaches its end

    df, verdict = report.write_outputs(records, store.info(), name, opts.study_dir, min_effect=begun.min_effect,
                                       figures=not args.no_figures)
    if args.json:
        print(json.dumps(df.to_json(result_files(opts.study_dir, figures=not args.no_figures)), indent=1))
    else:
        report.print_results(df, verdict, store.info())
        figures = "" if args.no_figures else ", trials_vs_baseline.png"
        print(f"\nresults: {opts.study_dir}/trials.csv{figures}, report.md, report.html")
    if error is not None:
        raise error
    return ExitCode.OK


def _start_over(study_dir: Path) -> None:
    """``--fresh``: remove the previous night's study folder (its study.db, logs and reports)."""
    if study_dir.is_dir() and not study_dir.is_symlink():
        shutil.rmtree(study_dir)
    elif study_dir.exists():
        raise InputError(CLI, "--fresh", str(study_dir), "a study folder to start over", "not a folder")


def _stopped_message(exc: NcclTuneError) -> str:
    if isinstance(exc, Interrupted):
        return f"interrupted by {exc}: server torn down, study kept; run the same command to resume"
    return f"sweep stopped: {exc}"


def _say_until(args: argparse.Namespace) -> None:
    """The deadline, said before anything else: a wrong one is seen at once."""
    if args.until is not None:
        print(f"--until: no trial will be started that would end after {args.until:%Y-%m-%d %H:%M}"
              + (" (tomorrow: that time has passed today)" if args.until.date() > datetime.now().date() else ""),
              file=sys.stderr)


def _dry_run(args: argparse.Namespace, cfg: Any, space: Any) -> int:
    """``--dry-run``: the sweep's checks before its first launch (raising what the sweep would
    raise, with its exit status), then the plan and what was checked; launches nothing."""
    from tuner.study import check_workers, gpus_of, stored_study, workers_dir
    from tuner.sweep import plan_lines, start_checks

    try:  # a diagnose.json of the study shapes the plan as it shapes the sweep
        study: str | None = args.study or study_name_from(args.config)
    except InputError:
        study = None
    fill = _fills_clock(args, cfg)
    checked = start_checks(cfg, space, args.results, study=study, trials=None if fill else args.trials or cfg.sweep.trials,
                           storage=args.storage, confirm=not args.no_confirm, final_baseline=not args.no_final_baseline,
                           baseline_every=args.baseline_every)
    check_workers(gpus_of(cfg), workers_dir())  # a live worker on these GPUs refuses the sweep: exit 3 here too
    _say_until(args)
    study_dir = args.results / study if study is not None else None
    # its measured phases time the night; --fresh: none, the study starts over
    records, info = stored_study(study_dir if not args.fresh else None, args.storage)
    print("\n".join(plan_lines(cfg, space, allow_unsafe=args.allow_unsafe, mode=args.mode, trials=args.trials,
                               baseline_every=args.baseline_every, confirm=not args.no_confirm,
                               final_baseline=not args.no_final_baseline, study_dir=study_dir,
                               timeout_s=args.timeout, until=args.until, records=records, info=info,
                               force=args.force)))
    print("\n".join(checked.lines()))
    return ExitCode.OK


def _fills_clock(args: argparse.Namespace, cfg: Any) -> bool:
    """True when the budget is what fits before the deadline: ``--until``/``--timeout`` and no
    trials given (neither ``--trials`` nor ``sweep.trials``; tuner.planning.clock_budget)."""
    return args.trials is None and not cfg.sweep.trials_given and (args.timeout is not None or args.until is not None)


def _check_fixed_env(cfg: Any, space: Any) -> None:
    """server.env must not fix a variable the space varies: every trial would override it."""
    varied = set(space.choices())
    for name in cfg.server.env:
        if name in varied:
            raise InputError(str(cfg.path), f"server.env.{name}", cfg.server.env[name],
                             f"variables the search space {space.path} does not vary",
                             "the space varies it too, so the baseline and the trials would disagree about it")


def _check_budget(args: argparse.Namespace, cfg: Any) -> None:
    """Refuse a budget that cannot hold the baseline, one set and the reserved checks (InputError
    naming --trials or sweep.trials, the value and the minimum), before anything starts."""
    from tuner.planning import Budget

    trials = args.trials or cfg.sweep.trials
    why = Budget(trials, not args.no_confirm, not args.no_final_baseline).problem()
    if why is None:
        return
    minimum = Budget(trials, not args.no_confirm, not args.no_final_baseline).minimum
    if args.trials:
        raise InputError(CLI, "--trials", trials, f"an integer >= {minimum}", why)
    raise InputError(str(args.config), "sweep.trials", trials, f"an integer >= {minimum} (or pass --trials)", why)


def _cli_space(raw: Path) -> Path:
    """``--space``: a path from the current directory, else the bundled space it names
    (:func:`tuner.inputs.locate.find_path`); as given when neither, for load_space's message."""
    from tuner.inputs import find_path

    found = find_path(raw, None, bundled=True)
    return found[0] if found is not None else raw


def _load_inputs(args: argparse.Namespace, *, check_program: bool = True) -> tuple[Any, Any]:
    """The experiment file and the search space, with every problem of both in one error
    (``check_program``: a program not on PATH is one of them)."""
    from tuner.inputs import load_config, load_space

    problems: list[InputError] = []
    cfg = space = None
    try:
        cfg = load_config(args.config, allow_unsafe=args.allow_unsafe, check_program=check_program,
                          resolve_space=args.space is None, allow_unknown=args.allow_unknown)
    except InputError as exc:
        problems += exc.problems
    space_path = _cli_space(args.space) if args.space else (cfg.sweep.space if cfg is not None else None)
    if space_path is not None:
        try:
            space = load_space(space_path, allow_unsafe=args.allow_unsafe,
                               version=cfg.nccl.nccl_version if cfg is not None else None,
                               allow_unknown=args.allow_unknown)
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError.combine(problems)
    return cfg, space
