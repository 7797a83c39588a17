"""Command line of the simulator: ``python -m tuner.sim <command>`` or ``nccl-tune sim <command>``.

Commands:

* ``serve``: run the simulated vLLM server (see server.py). Options fall back to environment
  variables, then to the profile: ``--load-time`` / ``SIM_LOAD_TIME_S``, ``--noise`` /
  ``SIM_NOISE``, ``--launch-noise`` / ``SIM_LAUNCH_NOISE``, ``--seed`` / ``SIM_SEED``,
  ``--workers`` / ``SIM_WORKERS``, ``--reasoning-tokens`` / ``SIM_REASONING_TOKENS``,
  ``--fault`` / ``SIM_FAULT`` (with ``--fault-after`` / ``SIM_FAULT_AFTER``,
  ``--fault-request`` / ``SIM_FAULT_REQUEST``, ``--teardown-s`` / ``SIM_TEARDOWN_S``).
* ``model``: print what the cost model predicts for a profile under the current environment
  plus ``--env NAME=VALUE`` overrides (tok/s, allreduce share, NCCL's pick), no server.
* ``profiles`` / ``faults``: list the built-in profiles / fault modes.
* ``worker``: one simulated TP worker (normally started by ``serve``).

Exit status: what the server returns (0 after SIGTERM, 1 on a simulated failure), 2 for bad
command-line input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import faults as faults_mod
from .profiles import BUILTIN, DEFAULT_PROFILE, ProfileError, load_profile

REASONING_FIELDS = ("reasoning", "reasoning_content", "both")


def _env_default(environ: dict, name: str, kind, fallback):
    text = environ.get(name)
    if text in (None, ""):
        return fallback
    try:
        return kind(text)
    except ValueError:
        raise SystemExit(f"tuner.sim: {name}={text!r} is not a valid {kind.__name__}") from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tuner.sim", description="Simulated TP-N vLLM server whose "
                                 "decode speed depends on its NCCL environment.")
    sub = ap.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the simulated OpenAI-compatible server")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000, help="0 picks a free port (see SIM READY)")
    s.add_argument("--profile", default=None,
                   help=f"built-in ({', '.join(BUILTIN)}) or a .toml file; default "
                        f"SIM_PROFILE or {DEFAULT_PROFILE}")
    s.add_argument("--load-time", type=float, default=None, metavar="S",
                   help="seconds before the port is bound (default SIM_LOAD_TIME_S or profile)")
    s.add_argument("--model", default=None, help="served model name (default: the profile's)")
    s.add_argument("--noise", type=float, default=None, metavar="FRACTION",
                   help="per-request speed noise, 1 sigma (default SIM_NOISE or profile, 0.02)")
    s.add_argument("--launch-noise", type=float, default=None, metavar="FRACTION",
                   help="per-launch speed noise, 1 sigma (default SIM_LAUNCH_NOISE or 0.005)")
    s.add_argument("--seed", type=int, default=None, help="noise seed (default SIM_SEED or random)")
    s.add_argument("--workers", type=int, default=None,
                   help="worker processes to spawn (default SIM_WORKERS or TP-1)")
    s.add_argument("--reasoning-tokens", type=int, default=None, metavar="K",
                   help="first K tokens of each chat answer are reasoning deltas")
    s.add_argument("--reasoning-field", choices=REASONING_FIELDS, default="reasoning",
                   help="delta field of reasoning tokens (default: reasoning, as new vLLM)")
    s.add_argument("--fault", default=None, metavar="MODE[,MODE]",
                   help=f"failure to play: {', '.join(faults_mod.FAULT_MODES)} (or SIM_FAULT)")
    s.add_argument("--fault-after", type=int, default=None, metavar="K",
                   help="mid-stream faults trigger after K tokens (default 8)")
    s.add_argument("--fault-request", type=int, default=None, metavar="N",
                   help="mid-stream faults trigger on the N-th completion request (default 1)")
    s.add_argument("--teardown-s", type=float, default=None, metavar="S",
                   help="slow-teardown delay in seconds (default 3)")

    m = sub.add_parser("model", help="print the cost model's prediction, no server")
    m.add_argument("--profile", default=None)
    m.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="override an environment variable (repeatable)")
    m.add_argument("--batch", type=int, default=1, help="concurrent streams")
    m.add_argument("--json", action="store_true", help="one JSON object instead of text")

    sub.add_parser("profiles", help="list built-in profiles")
    sub.add_parser("faults", help="list fault modes")
    w = sub.add_parser("worker", help="one simulated TP worker (started by serve)",
                       add_help=False)
    w.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


def _serve(args, environ: dict) -> int:
    from .server import ServeOptions, serve

    try:
        profile = load_profile(args.profile or environ.get("SIM_PROFILE"))
        plan = faults_mod.parse_faults(args.fault, after_tokens=args.fault_after,
                                       on_request=args.fault_request, teardown_s=args.teardown_s,
                                       environ=environ)
    except (ProfileError, faults_mod.FaultError) as exc:
        print(f"tuner.sim serve: {exc}", file=sys.stderr)
        return 2
    load = args.load_time if args.load_time is not None else _env_default(
        environ, "SIM_LOAD_TIME_S", float, profile.load_time_s)
    noise = args.noise if args.noise is not None else _env_default(
        environ, "SIM_NOISE", float, profile.noise)
    launch = args.launch_noise if args.launch_noise is not None else _env_default(
        environ, "SIM_LAUNCH_NOISE", float, 0.005)
    seed = args.seed if args.seed is not None else _env_default(environ, "SIM_SEED", int, None)
    workers = args.workers if args.workers is not None else _env_default(
        environ, "SIM_WORKERS", int, profile.tp - 1)
    reasoning = args.reasoning_tokens if args.reasoning_tokens is not None else _env_default(
        environ, "SIM_REASONING_TOKENS", int, 0)
    for name, value in (("--load-time", load), ("--noise", noise), ("--launch-noise", launch),
                        ("--workers", workers), ("--reasoning-tokens", reasoning)):
        if value < 0:
            print(f"tuner.sim serve: {name} must be >= 0, got {value}", file=sys.stderr)
            return 2
    if not 0 <= args.port <= 65535:
        print(f"tuner.sim serve: --port must be within 0-65535, got {args.port}", file=sys.stderr)
        return 2
    opts = ServeOptions(profile=profile, model_name=args.model or profile.model, host=args.host,
                        port=args.port, load_time_s=load, noise=noise, launch_noise=launch,
                        seed=seed, workers=workers, reasoning_tokens=reasoning,
                        reasoning_field=args.reasoning_field, faults=plan, environ=environ)
    return serve(opts)


def _model(args, environ: dict) -> int:
    from .costmodel import CostModel, check_init
    from .ncclenv import NcclInitError, read_env

    try:
        profile = load_profile(args.profile or environ.get("SIM_PROFILE"))
    except ProfileError as exc:
        print(f"tuner.sim model: {exc}", file=sys.stderr)
        return 2
    env = dict(environ)
    for item in args.env:
        if "=" not in item:
            print(f"tuner.sim model: --env expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        k, v = item.split("=", 1)
        env[k] = v
    try:
        settings = read_env(env).settings
        check_init(profile, settings)
    except NcclInitError as exc:
        print(f"NCCL would refuse this environment: {'; '.join(exc.warn_lines)}", file=sys.stderr)
        return 1
    bd = CostModel(profile, settings).breakdown(max(1, args.batch))
    c = bd.allreduce
    out = {"profile": profile.name, "batch": bd.batch, "tok_s_per_stream": round(bd.tok_s, 3),
           "tok_s_aggregate": round(bd.tok_s * bd.batch, 3), "step_ms": round(bd.step_ms, 4),
           "compute_ms": round(bd.compute_ms, 4), "allreduce_ms": round(bd.allreduce_ms, 4),
           "allreduce_share": round(bd.share, 4), "allreduce_bytes": c.nbytes,
           "allreduce_us": round(c.time_us, 3), "via": c.via, "algo": c.algo, "proto": c.proto,
           "nchannels": c.nchannels, "nthreads": c.nthreads,
           "parts_us": {k: round(v, 3) for k, v in c.parts.items()}}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:18s} {v}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``main(["serve", "--port", "8000"])``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:  # the worker has its own parser and must stay importable alone
        from .worker import main as worker_main

        return worker_main(argv[1:])
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad input, 0 for --help
        return int(exc.code or 0) if isinstance(exc.code, (int, type(None))) else 2
    environ = dict(os.environ)
    if args.command == "serve":
        return _serve(args, environ)
    if args.command == "model":
        return _model(args, environ)
    if args.command == "profiles":
        for name, p in BUILTIN.items():
            print(f"{name:16s} tp={p.tp} link={p.link} layers={p.layers} hidden={p.hidden} "
                  f"model={p.model} load_time_s={p.load_time_s}")
        return 0
    if args.command == "faults":
        for name, what in faults_mod.FAULT_MODES.items():
            print(f"{name:18s} {what}")
        return 0
    return 2
