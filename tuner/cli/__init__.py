"""``nccl-tune``: sweep, probe, bench, report, diagnose, check, sim.

Every error nccl-tune raises on purpose is a :class:`tuner.errors.NcclTuneError`; :func:`main`
turns it into one paragraph on stderr and its ``exit_code`` (the list is
:class:`tuner.errors.ExitCode`). Bad input exits 2 with the file, key, value and what is
accepted; an interrupted sweep exits 129/130/143 with its server torn down.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tuner.errors import ExitCode, InputError, NcclTuneError

__all__ = [
    "CLI",
    "build_parser",
    "main",
]

CLI = "(command line)"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> float:
    """``8h``, ``90m``, ``3600s``, ``1.5d`` in seconds; a bare number or 0 is refused."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not m:
        hint = f" (did you mean {text.strip()}h or {text.strip()}m?)" if re.fullmatch(r"\s*\d+(\.\d+)?\s*", text) else ""
        raise argparse.ArgumentTypeError(f"{text!r}: give a unit: s, m, h or d, e.g. 8h, 90m or 3600s{hint}")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the time budget must be above 0")
    return seconds


def _until(text: str) -> datetime:
    try:
        t = datetime.strptime(text.strip(), "%H:%M")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use a wall-clock time HH:MM, e.g. 07:00") from None
    now = datetime.now()
    when = now.replace(hour=t.hour, minute=t.minute, second=0, microsecond=0)
    return when if when > now else when + timedelta(days=1)


def _csv_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use a comma list of integers, e.g. 1,2,4,8") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: concurrency levels must be integers >= 1")
    return values


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v < 2**32:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 2**32)")
    return v


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    what = "a whole number above 0" if kind is int else "a finite number above 0"

    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: accepted is {what}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: accepted is {what}")
        return v
    return parse


def _url(text: str) -> str:
    """A server base URL with its scheme (httpx needs one)."""
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r}: accepted is a base URL with its scheme, "
                                         f"such as http://{text.split('://')[-1] or '127.0.0.1:8000'}")
    return text.rstrip("/")


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < 0.5:
        raise argparse.ArgumentTypeError(f"{text!r}: a fraction in [0, 0.5), e.g. 0.01 for 1 %")
    return v


def _study_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, '.', '_' and '-' (a folder name under "
                                         "--results), starting with a letter or digit")
    return text


class _Help(argparse.HelpFormatter):
    """Help that shows an option's default when it has a real one and its text does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            value = ",".join(map(str, action.default)) if isinstance(action.default, list) else action.default
            text += f" (default: {value})"
        return text


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    p = argparse.ArgumentParser(prog="nccl-tune", description="Relaunch an inference server under NCCL environment "
                                "sets and judge each against the untuned baseline.",
                                formatter_class=_Help)
    sub = p.add_subparsers(dest="command", required=True)
    fmt = _Help

    s = sub.add_parser("sweep", help="relaunch the server under each NCCL set and compare with the baseline",
                       formatter_class=fmt)
    s.add_argument("config", help="experiment TOML (see examples/)")
    s.add_argument("--trials", type=_positive(int),
                   help="relaunch budget: every relaunch counts (the baseline, its re-measures, the sets, the "
                        "confirmations); the checks' slots are kept inside it (default: the config's)")
    s.add_argument("--study", type=_study_name, help="study name (default: the config file's stem)")
    s.add_argument("--storage", help="Optuna storage: postgresql://user:pass@host/db (several hosts), "
                                     "journal:///shared/folder/study.log (hosts sharing a filesystem; no "
                                     "heartbeat) (default: SQLite in results/<study>/)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results root")
    s.add_argument("--space", type=Path, help="search-space TOML (default: the config's sweep.space)")
    s.add_argument("--mode", choices=("search", "presets"), help="presets: only the space's preset sets, in order")
    s.add_argument("--seed", type=_nonneg_int, help="sampler seed (>= 0)")
    s.add_argument("--allow-unsafe", action="store_true",
                   help="allow forcing LL128 and other settings that can corrupt data or hang")
    s.add_argument("--baseline-every", type=_nonneg_int, metavar="K",
                   help="re-measure the baseline every K relaunches (each re-measure counts: one set fewer)")
    s.add_argument("--no-final-baseline", action="store_true",
                   help="skip the baseline re-measure after the confirmations (frees its slot)")
    s.add_argument("--no-confirm", action="store_true",
                   help="do not relaunch the finalists to confirm their gain (frees their slots; then no set is "
                        "recommended)")
    s.add_argument("--rebaseline", action="store_true", help="on resume, measure the baseline again")
    s.add_argument("--target", type=_positive(float), help="tok/s goal: stop when a set's CI lower bound meets it")
    s.add_argument("--always", action="store_true", help="with --target: tune even if the baseline already meets it")
    s.add_argument("--timeout", type=_duration, help="start no trial that would end past this duration (8h, 90m, 3600s)")
    s.add_argument("--until", type=_until, help="start no trial that would end past this wall-clock time (HH:MM)")
    s.add_argument("--min-effect", type=_fraction, default=None,
                   help="smallest gain worth calling faster (fraction; default 0.01, or what the study stored)")
    s.add_argument("--dry-run", action="store_true",
                   help="make the sweep's checks before its first launch (files, values, paths, the port, a live "
                        "runner; without the server's program on PATH, what belongs to the night's host is reported, "
                        "not refused), print the plan (values as NCCL reads them, the relaunches in order with every "
                        "skip and its reason, the screen's and the sampler's share with their bounds, the checks' "
                        "slots in the budget) and what was checked, and launch nothing")
    s.add_argument("--force", action="store_true",
                   help="relaunch tuned sets even when a check says it cannot help (NCCL not on the decode path, "
                        "the screen's bound below the noise)")

    pr = sub.add_parser("probe", help="measure single-stream decode of a running server (API key: OPENAI_API_KEY)",
                        formatter_class=fmt)
    pr.add_argument("--url", required=True, type=_url, help="server base URL, e.g. http://127.0.0.1:8000")
    pr.add_argument("--model", help="model id (default: first of /v1/models)")
    pr.add_argument("--max-tokens", type=_positive(int), default=512, help="tokens per run")
    pr.add_argument("--repeats", type=_positive(int), default=3, help="recorded runs")
    pr.add_argument("--warmup", type=_nonneg_int, default=1, help="unrecorded runs first")
    pr.add_argument("--prompt", default="Count from 1 to 50.", help="the prompt")
    pr.add_argument("--stall-timeout", type=_positive(float), default=120.0, help="s without a token before giving up")
    pr.add_argument("--endpoint", choices=("chat", "completions"), default="chat",
                    help="chat completions, or completions for a base model without a chat template")
    pr.add_argument("--json", action="store_true", help="print JSON")

    b = sub.add_parser("bench", help="concurrency table of a running server (API key: OPENAI_API_KEY)",
                       formatter_class=fmt)
    b.add_argument("--url", required=True, type=_url, help="server base URL, e.g. http://127.0.0.1:8000")
    b.add_argument("--model", help="model id (default: first of /v1/models)")
    b.add_argument("--concurrency", type=_csv_ints, default=[1, 2, 4, 8], help="levels, e.g. 1,2,4,8")
    b.add_argument("--requests", type=_positive(int), default=4,
                   help="requests per concurrent stream at each level (C x REQUESTS in all)")
    b.add_argument("--max-tokens", type=_positive(int), default=256, help="tokens per request")
    b.add_argument("--prompt", default="Count from 1 to 50.", help="the prompt")
    b.add_argument("--stall-timeout", type=_positive(float), default=120.0, help="s without a token before a request fails")
    b.add_argument("--endpoint", choices=("chat", "completions"), default="chat",
                   help="chat completions, or completions for a base model without a chat template")
    b.add_argument("--json", action="store_true", help="print JSON")

    r = sub.add_parser("report", help="rebuild trials.csv, plots and report.md from the storage", formatter_class=fmt)
    r.add_argument("--study", type=_study_name, help="study name (without it: the studies there are, in the error)")
    r.add_argument("--storage", help="Optuna storage URL (default: SQLite in results/<study>/)")
    r.add_argument("--results", type=Path, default=Path("results"), help="results root")
    r.add_argument("--min-effect", type=_fraction, default=None,
                   help="smallest gain worth calling faster (default: what the sweep stored)")

    d = sub.add_parser("diagnose", help="one launch with NCCL's TUNING log: what NCCL picks per allreduce size, "
                                        "and who carries the decode allreduce", formatter_class=fmt)
    d.add_argument("config", help="experiment TOML (see examples/)")
    d.add_argument("--results", type=Path, default=Path("results"), help="results root")
    d.add_argument("--study", type=_study_name, help="study name (default: the config file's stem)")
    d.add_argument("--max-tokens", type=_positive(int), default=64, help="tokens per probe completion")
    d.add_argument("--repeats", type=_positive(int), default=2, help="probe completions")
    d.add_argument("--model-config", type=Path,
                   help="the model's config.json, to size the decode allreduce (default: [model] config)")
    d.add_argument("--json", action="store_true", help="print diagnose.json instead of the tables")

    c = sub.add_parser("check", help="relaunch the baseline and a deployed set (baseline, set, set, baseline) and "
                                     "say whether the set still holds: exit 0 it does, 6 it no longer does, 7 it "
                                     "cannot be judged", formatter_class=fmt)
    c.add_argument("config", help="experiment TOML (see examples/)")
    c.add_argument("--set", dest="set_items", nargs="+", required=True, metavar="NAME|VAR=VALUE",
                   help="the deployed set: VAR=VALUE items, or one NAME: a preset or trial number of the --against "
                        "study, 'winner' (the set its verdict names), or a preset of the config's space")
    c.add_argument("--flag", dest="flags", action="append", default=[], metavar="ITEM",
                   help="a server argv item of the set (repeatable, in order): --flag=--disable-custom-all-reduce; "
                        "or put the flags after '--'")
    c.add_argument("--against", type=_study_name,
                   help="the study whose launch noise judges the check (and whose sets --set NAME names); "
                        "without it, the prior")
    c.add_argument("--storage", help="Optuna storage of --against and of the check's own study "
                                     "(default: SQLite in results/<study>/)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results root")
    c.add_argument("--trials", type=_positive(int), default=4,
                   help="relaunches, every one counted (the baselines' included): baseline, set, set, baseline, "
                        "then set, set, baseline again; at least 4")
    c.add_argument("--study", type=_study_name, help="the check's own study (default: check-<config>-<time>)")
    c.add_argument("--allow-unsafe", action="store_true", help="allow a set that forces LL128 or another unsafe value")
    _add_view_parsers(sub)

    sub.add_parser("sim", help="the bundled simulator: nccl-tune sim serve --port P ...", add_help=False)
    return p


def _add_view_parsers(sub: Any) -> None:
    """``studies``, ``status`` and ``compare``: views of studies in a storage (tuner/report/studies.py,
    status.py, compare.py)."""
    storage_help = "Optuna storage URL (default: every SQLite results/<study>/study.db under --results)"
    v = sub.add_parser("studies", help="list the studies of a storage: state, relaunches, best set and its verdict",
                       formatter_class=_Help)
    v.add_argument("--storage", help=storage_help)
    v.add_argument("--results", type=Path, default=Path("results"), help="results root")
    v.add_argument("--json", action="store_true", help="print JSON")
    st = sub.add_parser("status", help="a night from its storage (any host): the trial in flight and its phase, "
                                       "the expected end, the best set so far", formatter_class=_Help)
    st.add_argument("--study", type=_study_name, help="study name (default: the one running study)")
    st.add_argument("--storage", help=storage_help)
    st.add_argument("--results", type=Path, default=Path("results"), help="results root")
    st.add_argument("--json", action="store_true", help="print JSON")
    c = sub.add_parser("compare", help="two nights side by side: what changed, the sets both measured and whether "
                                       "they agree", formatter_class=_Help)
    c.add_argument("study_a", type=_study_name, metavar="STUDY_A", help="the first night (A)")
    c.add_argument("study_b", type=_study_name, metavar="STUDY_B", help="the second night (B)")
    c.add_argument("--storage", help="Optuna storage URL of A, and of B without --storage-b "
                                     "(default: results/<study>/study.db)")
    c.add_argument("--storage-b", help="Optuna storage URL of B (default: --storage, else results/<STUDY_B>/study.db)")
    c.add_argument("--results", type=Path, default=Path("results"), help="results root")
    c.add_argument("--json", action="store_true", help="print JSON")


# -- sweep ---------------------------------------------------------------------------------

def _cmd_sweep(args: argparse.Namespace) -> int:
    from tuner import report
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.nccl import is_tuning_variable
    from tuner.redaction import redact, scrub, secret_values
    from tuner.server import preflight
    from tuner.study import check_fingerprint, check_format, check_metric, check_space, hide_password
    from tuner.sweep import Sweep, SweepOptions
    from tuner.sweep.progress import Progress

    cfg, space = _load_inputs(args, check_program=not args.dry_run)  # a dry run says what is not on PATH
    _check_fixed_env(cfg, space)
    _check_budget(args, cfg)
    if args.dry_run:
        return _dry_run(args, cfg, space)
    preflight.check(cfg, args.results)  # before anything is written
    _say_until(args)
    study_name = args.study or _study_name_from(args.config)
    _hold_gpus(args, cfg, study_name, "sweep")  # refused before anything is opened or written
    trials = args.trials or cfg.sweep.trials
    progress = Progress(trials)  # every relaunch counts, the checks included
    opts = SweepOptions(study=study_name, results=args.results, storage=args.storage, trials=trials,
                        mode=args.mode, seed=args.seed, baseline_every=args.baseline_every,
                        final_baseline=not args.no_final_baseline, confirm=not args.no_confirm,
                        rebaseline=args.rebaseline, allow_unsafe=args.allow_unsafe, force=args.force,
                        target=args.target, always=args.always, timeout_s=args.timeout, until=args.until,
                        progress=progress)
    try:
        sweep = Sweep(cfg, space, opts)
    except OSError as exc:
        raise InputError(CLI, "--results", str(args.results), preflight.RESULTS_ACCEPTED,
                         exc.strerror or str(exc)) from None
    except NcclTuneError:  # said by nccl-tune itself (a bad NCCL_TUNE_HEARTBEAT_S, say)
        raise
    except Exception as exc:  # storage URLs fail in many ways (driver, host, scheme)
        raise _storage_error(args.storage, exc) from None
    store = sweep.store
    check_format(store, sweep.storage_url, study_name)
    secrets = secret_values({**os.environ, **cfg.server.env})  # the runner's env reaches the server too
    check_fingerprint(store, cfg, secrets, args.config, study_name)
    check_space(store, space.choices(), str(space.path), study_name)
    check_metric(store, cfg.probe.metric, args.config, study_name)
    stored_effect = store.info().min_effect
    min_effect = args.min_effect if args.min_effect is not None else (
        stored_effect if stored_effect is not None else DEFAULT_MIN_EFFECT)
    # where NCCL writes its log (NCCL_DEBUG_FILE) changes no measurement: not called "fixed tuning"
    fixed = {k: v for k, v in cfg.server.env.items() if is_tuning_variable(k) and k != "NCCL_DEBUG_FILE"}
    store.update_info(server_command=[scrub(a, secrets) for a in cfg.server.argv()], target=sweep.target,
                      storage_hint=hide_password(sweep.storage_url), server_env=redact(cfg.server.env),
                      fixed_tuning_env=redact(fixed), min_effect=min_effect, space_notes=space.notes,
                      judge_concurrency=cfg.probe.judge_concurrency)
    if fixed:
        progress.log(f"note: server.env fixes {' '.join(f'{k}={v}' for k, v in redact(fixed).items())} for "
                     "every trial; the 'untuned' baseline runs with these too")
    error: NcclTuneError | None = None
    try:
        outcome = sweep.run()
        store.update_info(stop_reason=outcome.stop_reason, target_met_untuned=outcome.target_met_untuned,
                          target_reached_by=outcome.target_reached_by,
                          final_baseline_skipped=outcome.final_baseline_skipped,
                          confirm_skipped=outcome.confirm_skipped, next_run=outcome.next_run)
        n = outcome.relaunches
        progress.log(f"sweep ended: {outcome.stop_reason}; {n} relaunch{'es' if n != 1 else ''} this run")
    except NcclTuneError as exc:
        error = exc
        store.update_info(stop_reason=str(exc))
    records = store.records(relaunched_only=False)
    if error is not None and not records:
        raise error  # refused before any launch (a held port, say): the error alone, no empty report
    if error is not None:
        progress.log(_stopped_message(error))
    df, verdict = report.write_outputs(records, store.info(), study_name, opts.study_dir, min_effect=min_effect)
    report.print_results(df, verdict, store.info())
    print(f"\nresults: {opts.study_dir}/trials.csv, trials_vs_baseline.png, report.md, report.html")
    if error is not None:
        raise error
    return ExitCode.OK


def _say_until(args: argparse.Namespace) -> None:
    """The deadline, said before anything else: a wrong one is seen at once."""
    if args.until is not None:
        print(f"--until: no trial will be started that would end after {args.until:%Y-%m-%d %H:%M}"
              + (" (tomorrow: that time has passed today)" if args.until.date() > datetime.now().date() else ""),
              file=sys.stderr)


def _dry_run(args: argparse.Namespace, cfg: Any, space: Any) -> int:
    """``--dry-run``: the sweep's checks before its first launch (raising what the sweep would
    raise, with its exit status), then the plan and what was checked; launches nothing."""
    from tuner.sweep.dryrun import plan_lines
    from tuner.sweep.prelaunch import start_checks

    try:  # a diagnose.json of the study shapes the plan as it shapes the sweep
        study: str | None = args.study or _study_name_from(args.config)
    except InputError:
        study = None
    checked = start_checks(cfg, space, args.results, study=study, trials=args.trials or cfg.sweep.trials,
                           storage=args.storage)
    from tuner.study import check_workers, gpus_of, workers_dir

    check_workers(gpus_of(cfg), workers_dir())  # a live worker on these GPUs refuses the sweep: exit 3 here too
    _say_until(args)
    study_dir = args.results / study if study is not None else None
    print("\n".join(plan_lines(cfg, space, allow_unsafe=args.allow_unsafe, mode=args.mode, trials=args.trials,
                               baseline_every=args.baseline_every, confirm=not args.no_confirm,
                               final_baseline=not args.no_final_baseline, study_dir=study_dir,
                               timeout_s=args.timeout, until=args.until,
                               records=_stored_records(args, study_dir), info=_stored_info(args, study_dir),
                               force=args.force)))
    print("\n".join(checked.lines()))
    return ExitCode.OK


def _stored_records(args: argparse.Namespace, study_dir: Path | None) -> list[Any]:
    """The relaunches a study already stored (their measured phases time a dry run's night);
    empty without a study or when its storage cannot be read (a dry run writes nothing, and
    never fails for a storage it only reads)."""
    from tuner.study import StudyStore, default_storage, open_study

    if study_dir is None or (not args.storage and not (study_dir / "study.db").exists()):
        return []
    try:
        study = open_study(study_dir.name, args.storage or default_storage(study_dir), create=False)
        return StudyStore(study, {}).records()
    except Exception:  # no such study, an unreachable server, an older format: the clock goes by the config
        return []


def _stored_info(args: argparse.Namespace, study_dir: Path | None) -> Any:
    """The stored study's info (who carried its first baseline's decode allreduce), or None
    without a study or when its storage cannot be read (as :func:`_stored_records`)."""
    from tuner.study import StudyStore, default_storage, open_study

    if study_dir is None or (not args.storage and not (study_dir / "study.db").exists()):
        return None
    try:
        study = open_study(study_dir.name, args.storage or default_storage(study_dir), create=False)
        return StudyStore(study, {}).info()
    except Exception:  # no such study, an unreachable server, an older format: nothing is said
        return None


def _hold_gpus(args: argparse.Namespace, cfg: Any, study: str, command: str) -> None:
    """Register this worker on its GPUs until the command ends (``args.held``), or raise
    GpusInUse (exit 3) naming the live worker of this host that shares one. A registry folder
    that cannot be written leaves the GPUs unchecked, said on stderr."""
    from tuner.study import register, this_worker, workers_dir

    where = workers_dir()
    try:
        held = register(this_worker(cfg, study=study, results=args.results, storage=getattr(args, "storage", None),
                                    command=command), where)
    except OSError as exc:
        print(f"warning: the worker registry {where} cannot be written ({exc.strerror or exc}): GPUs shared with "
              "another nccl-tune worker are not checked; set NCCL_TUNE_WORKERS_DIR to a writable folder",
              file=sys.stderr)
        return
    args.held.callback(held.release)


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


def _load_inputs(args: argparse.Namespace, *, check_program: bool = True) -> tuple[Any, Any]:
    """The experiment file and the search space, with every problem of both in one error
    (``check_program``: a program not on PATH is one of them)."""
    from tuner.inputs.config import load_config
    from tuner.inputs.space import load_space

    problems: list[InputError] = []
    cfg = space = None
    try:
        cfg = load_config(args.config, allow_unsafe=args.allow_unsafe, check_program=check_program,
                          resolve_space=args.space is None)
    except InputError as exc:
        problems += exc.problems
    space_path = args.space or (cfg.sweep.space if cfg is not None else None)
    if space_path is not None:
        try:
            space = load_space(space_path, allow_unsafe=args.allow_unsafe,
                               version=cfg.nccl.nccl_version if cfg is not None else None)
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError.combine(problems)
    return cfg, space


def _stopped_message(exc: NcclTuneError) -> str:
    from tuner.errors import Interrupted

    if isinstance(exc, Interrupted):
        return f"interrupted by {exc}: server torn down, study kept; run the same command to resume"
    return f"sweep stopped: {exc}"


def _study_name_from(config: str) -> str:
    name = Path(config).stem
    try:
        return _study_name(name)
    except argparse.ArgumentTypeError:
        raise InputError(CLI, "--study", name, "letters, digits, '.', '_' and '-'",
                         "the config file's name is not a usable study name; pass --study") from None


def _storage_error(storage: str | None, exc: Exception) -> InputError:
    from tuner.study import hide_password

    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if "+psycopg2" in (storage or ""):  # SQLAlchemy's plain postgresql:// means psycopg 3
        why += " (psycopg2 is not what the [postgres] extra installs: write postgresql://, which uses psycopg 3)"
    elif isinstance(exc, ImportError):
        why += " (install the driver: pip install -e '.[postgres]')"
    return InputError(CLI, "--storage", hide_password(storage or ""),
                      "an Optuna storage: sqlite:///results/s/study.db, postgresql://user:pass@host:5432/db "
                      "or journal:///shared/folder/study.log", why)


def _check_fixed_env(cfg: Any, space: Any) -> None:
    """server.env must not fix a variable the space varies: every trial would override it."""
    varied = set(space.choices())
    for name in cfg.server.env:
        if name in varied:
            raise InputError(str(cfg.path), f"server.env.{name}", cfg.server.env[name],
                             f"variables the search space {space.path} does not vary",
                             "the space varies it too, so the baseline and the trials would disagree about it")


# -- probe, bench, report -------------------------------------------------------------------

def _cmd_probe(args: argparse.Namespace) -> int:
    import json

    from tuner.measure import find_api_key, format_result, run_probe

    key = find_api_key(None, os.environ)  # OPENAI_API_KEY: never a flag (ps, shell history)
    result = run_probe(args.url, model=args.model, prompt=args.prompt, max_tokens=args.max_tokens,
                       warmup=args.warmup, repeats=args.repeats, stall_timeout_s=args.stall_timeout,
                       endpoint=args.endpoint, api_key=key)
    print(json.dumps(result.to_json()) if args.json else format_result(result))
    return ExitCode.OK


def _cmd_bench(args: argparse.Namespace) -> int:
    import json

    from tuner.measure import find_api_key, format_table, levels_to_json, run_bench

    levels = run_bench(args.url, model=args.model, concurrency=args.concurrency, requests=args.requests,
                       max_tokens=args.max_tokens, prompt=args.prompt, stall_timeout_s=args.stall_timeout,
                       endpoint=args.endpoint, api_key=find_api_key(None, os.environ))
    print(json.dumps(levels_to_json(levels)) if args.json else format_table(levels))
    return ExitCode.OK if all(lv.ok for lv in levels) else ExitCode.PROBE_FAILED


def _cmd_report(args: argparse.Namespace) -> int:
    from tuner import report
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.report.nights import study_listing
    from tuner.study import StudyStore, check_format, default_storage, hide_password, open_study

    if args.study is None:  # say which studies there are (`nccl-tune studies` shows them in full)
        raise InputError(CLI, "--study", None, study_listing(args.storage, args.results),
                         "report rebuilds one study's results; nccl-tune studies lists them")
    study_dir = args.results / args.study
    storage = args.storage or default_storage(study_dir)
    if not args.storage and not (study_dir / "study.db").exists():
        raise InputError(CLI, "--study", args.study, study_listing(None, args.results) + " (or pass --storage)",
                         f"{study_dir / 'study.db'} does not exist")
    try:
        study = open_study(args.study, storage, create=False)
    except KeyError:
        raise InputError(CLI, "--study", args.study, study_listing(args.storage, args.results),
                         f"no study of that name in {hide_password(storage)}") from None
    except Exception as exc:  # driver, host or scheme problems
        raise _storage_error(storage, exc) from None
    store = StudyStore(study, {})
    check_format(store, storage, args.study)
    info = store.info()
    min_effect = args.min_effect if args.min_effect is not None else (
        info.min_effect if info.min_effect is not None else DEFAULT_MIN_EFFECT)
    df, verdict = report.write_outputs(store.records(relaunched_only=False), info, args.study, study_dir, min_effect=min_effect)
    report.print_results(df, verdict, info)
    print(f"\nwrote {study_dir}/trials.csv, report.md, report.html and plots (judged on {info.metric.words}, the study's metric)")
    return ExitCode.OK


def _cmd_studies(args: argparse.Namespace) -> int:
    from tuner.report.nights import find_nights
    from tuner.report.studies import print_studies

    print_studies(find_nights(args.storage, args.results), as_json=args.json)
    return ExitCode.OK


def _cmd_status(args: argparse.Namespace) -> int:
    from tuner.report.nights import find_nights, open_night
    from tuner.report.status import night_status, pick_running, print_status
    from tuner.study import hide_password

    if args.study is not None:
        night = open_night(args.study, args.storage, args.results)
    else:
        where = hide_password(args.storage) if args.storage else f"{args.results}/*/study.db"
        night = pick_running(find_nights(args.storage, args.results), where)
    print_status(night_status(night), as_json=args.json)
    return ExitCode.OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from tuner.report.compare import compare_nights, print_comparison
    from tuner.report.nights import open_night

    a = open_night(args.study_a, args.storage, args.results, study_key="STUDY_A")
    b = open_night(args.study_b, args.storage_b or args.storage, args.results, study_key="STUDY_B",
                   storage_key="--storage-b" if args.storage_b else "--storage")
    print_comparison(compare_nights(a, b), as_json=args.json)
    return ExitCode.OK


def _space_files(cfg: Any) -> dict[str, tuple[str, ...]]:
    """The graph/topology files of the config's search space, for diagnose's triage: only when
    the space names one of those variables (then the space is loaded, and a bad file is an
    InputError, exit 2, before the launch); empty when the space file is not found."""
    from tuner.inputs.space import load_space
    from tuner.nccl import FILE_VARS

    raw = Path(cfg.sweep.space)
    path = next((p for p in ([raw] if raw.is_absolute() else [raw, cfg.path.parent / raw]) if p.is_file()), None)
    if path is None or not any(name in path.read_text(errors="replace") for name in FILE_VARS):
        return {}
    return load_space(path, allow_unsafe=True, version=cfg.nccl.nccl_version).files()


def _cmd_diagnose(args: argparse.Namespace) -> int:
    import json

    from tuner import diagnose
    from tuner.inputs.config import load_config
    from tuner.study import check_processes, gpus_of

    cfg = load_config(args.config, resolve_space=False)
    study = args.study or _study_name_from(args.config)
    study_dir = args.results / study
    size = diagnose.model_decode_size(cfg, args.model_config)
    diagnose.check_inputs(cfg, args.results)
    _hold_gpus(args, cfg, study, "diagnose")  # its launch must not share a GPU with a worker either
    check_processes(gpus_of(cfg))  # nor with a compute process NVML lists on them
    diag = diagnose.run(cfg, study_dir, study=study, max_tokens=args.max_tokens, repeats=args.repeats,
                        decode_size=size, log=lambda text: print(text, file=sys.stderr), space_files=_space_files(cfg))
    json_path, md_path = diagnose.write_diagnosis(diag, study_dir)
    if args.json:
        print(json.dumps(diag.to_json(), indent=2))
    else:
        diagnose.print_diagnosis(diag)
        print(f"\nwrote {md_path}, {json_path}; server log {diag.launch['log']}")
    return ExitCode.OK


# -- check ---------------------------------------------------------------------------------

def _cmd_check(args: argparse.Namespace) -> int:
    """``nccl-tune check``: the logic is tuner.sweep.check's; here the inputs, the worker
    registry, the outputs and the exit status."""
    from tuner import report
    from tuner.errors import NoLongerHolds, NotJudged
    from tuner.inputs.config import load_config
    from tuner.inputs.space import load_space
    from tuner.judging import DEFAULT_MIN_EFFECT
    from tuner.server import preflight
    from tuner.study import this_host
    from tuner.sweep import CHECK_TRIALS, PRIOR_WORDS, SweepOptions, judge_check, open_against, resolve_set, run_check
    from tuner.sweep.progress import Progress

    if args.trials < CHECK_TRIALS:
        raise InputError(CLI, "--trials", args.trials, f"an integer >= {CHECK_TRIALS}",
                         "baseline, set, set, baseline is the smallest check that can say the set holds")
    cfg = load_config(args.config, allow_unsafe=args.allow_unsafe, resolve_space=False)
    metric = cfg.probe.metric
    try:
        against = (open_against(args.against, args.storage, args.results, metric, this_host(cfg).host_type)
                   if args.against else None)
    except NcclTuneError:
        raise
    except Exception as exc:  # storage URLs fail in many ways (driver, host, scheme)
        raise _storage_error(args.storage, exc) from None

    def space() -> Any:
        try:
            return load_space(cfg.sweep.space, allow_unsafe=args.allow_unsafe, version=cfg.nccl.nccl_version)
        except InputError:
            return None

    checked = resolve_set(args.set_items, [*args.flags, *getattr(args, "trailing", [])], cfg=cfg, space=space,
                          against=against, allow_unsafe=args.allow_unsafe)
    study = args.study or f"check-{_study_name_from(args.config)}-{datetime.now():%Y%m%d-%H%M%S}"
    if (args.results / study / "study.db").exists() and not args.storage:
        raise InputError(CLI, "--study", study, "a study name not used yet", "a check is one fresh study")
    preflight.check(cfg, args.results)
    _hold_gpus(args, cfg, study, "check")
    progress = Progress(args.trials)
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
                          noise_from=noise_from, info=store.info())
    store.update_info(stop_reason=f"nccl-tune check: {verdict.reason}", min_effect=DEFAULT_MIN_EFFECT)
    report.write_outputs(records, store.info(), study, opts.study_dir, min_effect=DEFAULT_MIN_EFFECT)
    if verdict.holds:
        print(f"check: the set {verdict.reason}")
    print(f"results: {opts.study_dir}/trials.csv, report.md (nccl-tune report --study {study})")
    if verdict.holds is None:
        raise NotJudged(verdict.reason)
    if not verdict.holds:
        raise NoLongerHolds(verdict.reason)
    return ExitCode.OK


# -- entry point ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nccl-tune`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from importlib import import_module

        code: int = import_module("tuner.sim.cli").main(argv[1:])
        return code
    trailing: list[str] = []
    if argv[:1] == ["check"] and "--" in argv:  # `check ... -- --disable-custom-all-reduce`: the set's flags
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    args.trailing = trailing
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    handlers = {"sweep": _cmd_sweep, "probe": _cmd_probe, "bench": _cmd_bench, "report": _cmd_report,
                "diagnose": _cmd_diagnose, "check": _cmd_check,
                "studies": _cmd_studies, "status": _cmd_status, "compare": _cmd_compare}
    args.held = contextlib.ExitStack()  # what a command holds until it ends (its worker registry file)
    try:
        return int(handlers[args.command](args))
    except NcclTuneError as exc:
        print(f"nccl-tune: {_prefix(exc, args)}{exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("nccl-tune: interrupted", file=sys.stderr)
        return int(ExitCode.SIGINT)
    except BrokenPipeError:  # `nccl-tune report ... | head`: the reader left; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.OK)
    finally:
        args.held.close()


def _prefix(exc: NcclTuneError, args: argparse.Namespace) -> str:
    from tuner.errors import ProbeError, TrialFailed

    if isinstance(exc, InputError):
        return "error: "
    if args.command == "diagnose" and isinstance(exc, TrialFailed):
        return "diagnose: the server launch failed: "
    if isinstance(exc, ProbeError):
        return f"{args.command} failed against {getattr(args, 'url', '?')}: "
    return ""


if __name__ == "__main__":
    sys.exit(main())
