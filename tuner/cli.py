"""``nccl-tune``: sweep, probe, bench, report, sim.

Bad input exits 2 with one paragraph naming the file, key, value and what is accepted; an
interrupted sweep exits 130 (SIGINT) or 143 (SIGTERM) with its server torn down.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

from tuner.errors import InputError, SweepAborted
from tuner.nccl_env import is_tuning_variable


def _duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"--timeout {text!r}: use a number with s, m, h or d, e.g. 8h or 90m")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _until(text: str) -> datetime:
    try:
        t = datetime.strptime(text.strip(), "%H:%M")
    except ValueError:
        raise argparse.ArgumentTypeError(f"--until {text!r}: use a wall-clock time HH:MM, e.g. 07:00") from None
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


def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
        return v
    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    p = argparse.ArgumentParser(prog="nccl-tune", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sweep", help="relaunch the server under each NCCL set and compare with the baseline")
    s.add_argument("config", help="experiment TOML (see examples/)")
    s.add_argument("--trials", type=_positive(int), help="relaunch budget, baseline included (default: config)")
    s.add_argument("--study", help="study name (default: the config file's stem)")
    s.add_argument("--storage", help="Optuna storage URL, e.g. postgresql://user@host/db (default: SQLite in results/<study>/)")
    s.add_argument("--results", type=Path, default=Path("results"), help="results root (default: results)")
    s.add_argument("--space", type=Path, help="search-space TOML (default: the config's sweep.space)")
    s.add_argument("--mode", choices=("search", "presets"), help="presets: only the space's preset sets, in order")
    s.add_argument("--seed", type=_nonneg_int, help="sampler seed (>= 0)")
    s.add_argument("--allow-unsafe", action="store_true", help="allow forcing LL128 and other settings that can corrupt data or hang")
    s.add_argument("--baseline-every", type=int, metavar="K", help="re-measure the baseline every K trials (drift check)")
    s.add_argument("--no-final-baseline", action="store_true", help="skip the drift re-measure of the baseline at the end")
    s.add_argument("--rebaseline", action="store_true", help="on resume, measure the baseline again")
    s.add_argument("--target", type=_positive(float), help="tok/s goal: stop when a set's CI lower bound meets it")
    s.add_argument("--always", action="store_true", help="with --target: tune even if the baseline already meets it")
    s.add_argument("--timeout", type=_duration, help="stop before a trial that would end past this duration (e.g. 8h)")
    s.add_argument("--until", type=_until, help="stop before a trial that would end past this wall-clock time (HH:MM)")
    s.add_argument("--min-effect", type=float, default=0.01, help="smallest gain worth calling faster (fraction, default 0.01)")

    pr = sub.add_parser("probe", help="measure single-stream decode of a running server")
    pr.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    pr.add_argument("--model", help="model id (default: first of /v1/models)")
    pr.add_argument("--max-tokens", type=_positive(int), default=512)
    pr.add_argument("--repeats", type=_positive(int), default=3)
    pr.add_argument("--warmup", type=int, default=1)
    pr.add_argument("--prompt", default="Count from 1 to 50.")
    pr.add_argument("--stall-timeout", type=_positive(float), default=120.0, help="s without a token before giving up")
    pr.add_argument("--json", action="store_true", help="print JSON")

    b = sub.add_parser("bench", help="concurrency table of a running server")
    b.add_argument("--url", required=True)
    b.add_argument("--model")
    b.add_argument("--concurrency", type=_csv_ints, default=[1, 2, 4, 8], help="levels, e.g. 1,2,4,8")
    b.add_argument("--requests", type=_positive(int), default=4, help="requests per concurrent stream at each level")
    b.add_argument("--max-tokens", type=_positive(int), default=256)
    b.add_argument("--prompt", default="Count from 1 to 50.")
    b.add_argument("--json", action="store_true")

    r = sub.add_parser("report", help="rebuild trials.csv, plots and report.md from the storage")
    r.add_argument("--study", required=True)
    r.add_argument("--storage", help="Optuna storage URL (default: SQLite in results/<study>/)")
    r.add_argument("--results", type=Path, default=Path("results"))
    r.add_argument("--min-effect", type=float, default=0.01)

    sub.add_parser("sim", help="the bundled simulator: nccl-tune sim serve --port P ...", add_help=False)
    return p


def _cmd_sweep(args: argparse.Namespace) -> int:
    from tuner import report
    from tuner.config import load_config
    from tuner.progress import Progress
    from tuner.space import load_space
    from tuner.study import Interrupted, Sweep, SweepOptions

    cfg = load_config(args.config, allow_unsafe=args.allow_unsafe, resolve_space=args.space is None)
    space = load_space(args.space or cfg.sweep.space, allow_unsafe=args.allow_unsafe)
    if args.baseline_every is not None and args.baseline_every < 0:
        raise InputError("(command line)", "--baseline-every", args.baseline_every, "an integer >= 0")
    if not 0 <= args.min_effect < 0.5:
        raise InputError("(command line)", "--min-effect", args.min_effect, "a fraction in [0, 0.5)")
    _check_fixed_env(cfg, space)
    study_name = args.study or Path(args.config).stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", study_name):
        raise InputError("(command line)", "--study", study_name, "letters, digits, '.', '_' and '-' (a folder name under --results)")
    trials = args.trials or cfg.sweep.trials
    opts = SweepOptions(study=study_name, results=args.results, storage=args.storage, trials=trials,
                        mode=args.mode, seed=args.seed, allow_unsafe=args.allow_unsafe,
                        baseline_every=args.baseline_every, final_baseline=not args.no_final_baseline,
                        rebaseline=args.rebaseline, target=args.target, always=args.always,
                        timeout_s=args.timeout, until=args.until, min_effect=args.min_effect,
                        progress=Progress(trials + (0 if args.no_final_baseline else 1)))
    try:
        sweep = Sweep(cfg, space, opts)
    except OSError as exc:
        raise InputError("(command line)", "--results", str(args.results), "a folder nccl-tune can create and write",
                         exc.strerror or str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - storage URLs fail in many ways (driver, host, scheme)
        raise _storage_error(args.storage, exc) from None
    study = sweep.study
    from tuner.nccl_env import redact, scrub, secret_values

    secrets = secret_values({**os.environ, **cfg.server.env})  # the runner's own env reaches the server too
    _check_fingerprint(study, cfg, secrets, args.config, study_name)
    study.set_user_attr("server_command", [scrub(a, secrets) for a in cfg.server.argv()])
    study.set_user_attr("target", sweep.target)
    study.set_user_attr("storage_hint", _hide_password(sweep.storage))
    study.set_user_attr("server_env", redact(cfg.server.env))
    fixed = {k: v for k, v in cfg.server.env.items() if is_tuning_variable(k)}
    study.set_user_attr("fixed_tuning_env", redact(fixed))
    if fixed:
        sweep.progress.log(f"note: server.env fixes {' '.join(f'{k}={v}' for k, v in redact(fixed).items())} for "
                           "every trial; the 'untuned' baseline runs with these too")
    code = 0
    try:
        outcome = sweep.run()
        study.set_user_attr("stop_reason", outcome.stop_reason)
        study.set_user_attr("target_met_untuned", outcome.target_met_untuned)
        study.set_user_attr("target_reached_by", outcome.target_reached_by)
        sweep.progress.log(f"sweep ended: {outcome.stop_reason} ({outcome.relaunches} relaunches this run)")
        if outcome.baseline_failed:
            code = 4
    except Interrupted as exc:
        sweep.progress.log(f"interrupted by {exc}: server torn down, study kept; run the same command to resume")
        code = exc.code
    except SweepAborted as exc:
        print(f"nccl-tune: sweep stopped: {exc}", file=sys.stderr)
        code = 3
    df, verdict = report.write_outputs(study, opts.study_dir, min_effect=args.min_effect)
    _print_results(df, verdict, study)
    print(f"\nresults: {opts.study_dir}/trials.csv, trials_vs_baseline.png, report.md")
    return code


def _print_results(df, verdict: str, study) -> None:
    """The table sorted by tok/s, the verdict paragraph and, for a significant best set, the
    ready-to-paste export and launch lines."""
    from tuner import report

    if not df.empty:
        print(report.console_table(df))
    print()
    print(verdict)
    best = report.best_row(df) if not df.empty else None
    if best is not None and best["verdict"] == "faster":
        print("\nUse it:")
        for line in report.export_lines(json.loads(best["env"]), study.user_attrs.get("server_command")):
            print(f"  {line}")


def _hide_password(url: str) -> str:
    """A storage URL with its password replaced by ***, for anything written."""
    return re.sub(r"(//[^:/@]+:)[^@/]*@", r"\1***@", url)


def _storage_error(storage: str | None, exc: Exception) -> InputError:
    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if "postgres" in (storage or "") and isinstance(exc, ImportError | ModuleNotFoundError) or "psycopg" in why:
        why += " (install the driver: pip install -e '.[postgres]')"
    return InputError("(command line)", "--storage", _hide_password(storage or ""),
                      "an Optuna storage URL, e.g. sqlite:///results/s/study.db or postgresql://user:pass@host/db", why)


def _check_fixed_env(cfg, space) -> None:
    """server.env must not fix a variable the space varies: every trial would silently override it."""
    varied = set(space.choices())
    for name in cfg.server.env:
        if name in varied:
            raise InputError(str(cfg.path), f"server.env.{name}", cfg.server.env[name],
                             f"variables the search space {space.path} does not vary",
                             "the space varies it too, so the baseline and the trials would disagree about it")


def _check_fingerprint(study, cfg, secrets, config_path, study_name) -> None:
    """Refuse to resume a study with a different server or probe: old trials would be judged
    against a baseline measured under other conditions."""
    from tuner.nccl_env import redact, scrub

    now = {"server.command": [scrub(a, secrets) for a in cfg.server.command],
           "server.env": redact(cfg.server.env),
           "probe.prompt": cfg.probe.prompt, "probe.max_tokens": cfg.probe.max_tokens}
    before = study.user_attrs.get("fingerprint")
    if before is None:
        study.set_user_attr("fingerprint", now)
        return
    changed = [k for k in now if json.dumps(now[k]) != json.dumps(before.get(k))]
    if changed:
        raise InputError(str(config_path), ", ".join(changed), [now[k] for k in changed],
                         f"the settings study '{study_name}' was measured with ({', '.join(repr(before.get(k)) for k in changed)}), "
                         "or a new --study name",
                         "resuming would judge new trials against a baseline measured under other conditions")


def _cmd_probe(args: argparse.Namespace) -> int:
    from tuner import probe

    result = probe.run_probe(args.url, model=args.model, prompt=args.prompt, max_tokens=args.max_tokens,
                             warmup=args.warmup, repeats=args.repeats, stall_timeout_s=args.stall_timeout)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    print(f"{'run':>4} {'tok/s':>9} {'TTFT s':>8} {'TPOT ms':>8} {'E2E s':>7} {'tokens':>7}")
    for i, r in enumerate(result.runs, 1):
        tpot = f"{r.tpot_s * 1000:.2f}" if r.tpot_s is not None else "-"
        print(f"{i:>4} {r.output_tok_s:>9.2f} {r.ttft_s:>8.3f} {tpot:>8} {r.e2e_s:>7.2f} {r.completion_tokens:>7}"
              + ("  (counted: no usage chunk)" if r.tokens_counted else ""))
    print(f"median output tok/s: {result.output_tok_s:.2f}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from tuner import bench

    levels = bench.run_bench(args.url, model=args.model, concurrency=args.concurrency, requests=args.requests,
                             max_tokens=args.max_tokens, prompt=args.prompt)
    print(json.dumps(bench.levels_to_json(levels)) if args.json else bench.format_table(levels))
    return 0 if all(lv.ok for lv in levels) else 1


def _cmd_report(args: argparse.Namespace) -> int:
    import optuna

    from tuner import report
    from tuner.study import default_storage

    study_dir = args.results / args.study
    storage = args.storage or default_storage(study_dir)
    if not args.storage and not (study_dir / "study.db").exists():
        raise InputError("(command line)", "--study", args.study,
                         f"a study with a storage; {study_dir / 'study.db'} does not exist (or pass --storage)")
    try:
        study = optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        raise InputError("(command line)", "--study", args.study,
                         f"a study name present in {_hide_password(storage)}") from None
    except Exception as exc:  # noqa: BLE001 - driver, host or scheme problems
        raise _storage_error(storage, exc) from None
    df, verdict = report.write_outputs(study, study_dir, min_effect=args.min_effect)
    _print_results(df, verdict, study)
    print(f"\nwrote {study_dir}/trials.csv, report.md and plots")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nccl-tune`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from importlib import import_module

        return import_module("tuner.sim.cli").main(argv[1:])
    args = build_parser().parse_args(argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    handlers = {"sweep": _cmd_sweep, "probe": _cmd_probe, "bench": _cmd_bench, "report": _cmd_report}
    try:
        return handlers[args.command](args)
    except InputError as exc:
        print(f"nccl-tune: error: {exc}", file=sys.stderr)
        return 2
    except SweepAborted as exc:
        print(f"nccl-tune: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("nccl-tune: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - probe/bench failures against a user's server
        from tuner.probe import ProbeError

        if isinstance(exc, ProbeError):
            print(f"nccl-tune: {args.command} failed against {getattr(args, 'url', '?')}: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
