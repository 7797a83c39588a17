"""Command line of the simulator: ``nccl-tune sim <command>`` or ``python -m tuner.sim <command>``.

Commands: ``serve`` (the simulated vLLM server, server.py), ``all-reduce-perf`` (nccl-tests'
all_reduce_perf, allreduceperf.py), ``model`` (the cost model's prediction, no server),
``profiles``, ``faults``, ``worker`` (one TP worker, started by serve). Exit status: what the
command returns (serve: 0 after SIGTERM, 1 on a simulated failure), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from . import faults as faults_mod
from .arbackends import MISSING_PACKAGES, plan_for, vtuple
from .nodes import DEFAULT_MASTER_PORT, NodeSpec
from .profiles import BUILTIN, DEFAULT_PROFILE, ProfileError, load_profile

REASONING_FIELDS = ("reasoning", "reasoning_content", "both")
APIS = ("vllm", "tgi")
STDOUT_BUFFERING = ("line", "block")
DEFAULT_PROG = "nccl-tune sim"


class _Formatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help when it has a plain default and the help
    does not already say where its default comes from."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "(default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def _env_default(environ: dict, name: str, kind, fallback, prog: str):
    text = environ.get(name)
    if text in (None, ""):
        return fallback
    try:
        return kind(text)
    except ValueError:
        raise SystemExit(f"{prog}: {name}={text!r} is not a valid {kind.__name__}") from None


def _parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog, description="Simulated tensor-parallel vLLM server and nccl-tests "
        "all_reduce_perf whose speed depends on the NCCL environment.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("serve", formatter_class=_Formatter, help="run the simulated server",
                       description="Run the simulated OpenAI-compatible server.")
    s.add_argument("--host", default="127.0.0.1", help="address to bind")
    s.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one (see SIM READY)")
    s.add_argument("--profile", default=None,
                   help=f"built-in ({', '.join(BUILTIN)}) or a .toml file "
                        f"(default: SIM_PROFILE, else {DEFAULT_PROFILE})")
    s.add_argument("--load-time", type=float, default=None, metavar="S",
                   help="seconds before the port is bound (default: SIM_LOAD_TIME_S, else the "
                        "profile's)")
    s.add_argument("--model", default=None, help="served model name (default: the profile's)")
    s.add_argument("--noise", type=float, default=None, metavar="FRACTION",
                   help="per-request speed noise, 1 sigma (default: SIM_NOISE, else the profile's)")
    s.add_argument("--launch-noise", type=float, default=None, metavar="FRACTION",
                   help="per-launch speed noise, 1 sigma (default: SIM_LAUNCH_NOISE, else 0.005)")
    s.add_argument("--seed", type=int, default=None,
                   help="noise seed (default: SIM_SEED, else random)")
    s.add_argument("--workers", type=int, default=None,
                   help="worker processes to spawn (default: SIM_WORKERS, else TP-1)")
    s.add_argument("--reasoning-tokens", type=int, default=None, metavar="K",
                   help="the first K tokens of each chat answer are reasoning deltas (default: "
                        "SIM_REASONING_TOKENS, else 0)")
    s.add_argument("--reasoning-field", choices=REASONING_FIELDS, default="reasoning",
                   help="delta field of the reasoning tokens")
    s.add_argument("--ignore-var", action="append", default=None, metavar="NAME",
                   help="drop this variable before NCCL reads it (repeatable), as a server that "
                        "overwrites it or workers that never receive it (default: "
                        "SIM_IGNORE_VARS, comma-separated)")
    s.add_argument("--no-effect", action="append", default=None, metavar="NAME",
                   help="test support: NCCL reads and echoes this variable (repeatable) but the speed "
                        "is that of the launch without it, as after an NCCL upgrade that made a tuned "
                        "value moot (default: SIM_NO_EFFECT, comma-separated)")
    s.add_argument("--compilation-config", "-cc", default=None, metavar="JSON",
                   help="vLLM's flag, accepted as vLLM does; its passes (the allreduce + RMSNorm fusion) are not "
                        "simulated, so nothing logs that one ran")
    s.add_argument("--disable-custom-all-reduce", action="store_true",
                   help="vLLM's flag: NCCL carries the decode allreduces")
    _backend_options(s)
    s.add_argument("--stdout-buffering", choices=STDOUT_BUFFERING, default=None,
                   help="where NCCL's lines go without NCCL_DEBUG_FILE: 'line', whole lines with "
                        "the other lines (tidy); 'block', each process's stdout through a "
                        "4096-byte buffer as on a real server's pipe: cut mid-line, mixed with "
                        "other output, lost when the process is SIGKILLed (default: "
                        "SIM_STDOUT_BUFFERING, else line)")
    s.add_argument("--ray", action="store_true", default=None,
                   help="vLLM 0.8.2 on Ray: workers get the environment of 'ray start' and only "
                        "the variables vLLM copies (no NCCL_*); their lines come back prefixed "
                        "'(RayWorkerWrapper pid=N)' and folded '[repeated Nx across cluster]' "
                        "(default: SIM_RAY=1)")
    s.add_argument("--ray-nodes", type=int, default=1, metavar="N",
                   help="nodes of the Ray cluster; workers off the driver's node show ip=")
    s.add_argument("--ray-start-env", action="append", default=None, metavar="NAME=VALUE",
                   help="a variable 'ray start' had (repeatable; default: NCCL_DEBUG=INFO)")
    s.add_argument("--fault", default=None, metavar="MODE[,MODE]",
                   help=f"failure to play: {', '.join(faults_mod.FAULT_MODES)} (default: SIM_FAULT)")
    s.add_argument("--fault-when", action="append", default=None, metavar="'COND[&COND] => EFFECT[,EFFECT]'",
                   help="a fault bound to the set (repeatable): COND is NAME=VALUE (the launch environment holds "
                        "that string), NAME, !NAME or custom-allreduce; EFFECT is corrupt (answers garbled from a "
                        "token in [6, 12): 'Paris' survives), hang-after-load=S (streams stop after S s of load, "
                        "/health stays 200, PyTorch's watchdog line --watchdog-s later) or speed=F (tok/s x F); "
                        "added to the profile's set_faults, e.g. 'NCCL_P2P_LEVEL=SYS => corrupt,speed=1.08' "
                        "(default: SIM_FAULT_WHEN, entries separated by ';')")
    s.add_argument("--time-scale", type=float, default=None, metavar="X",
                   help="simulated seconds per wall second for hang-after-load and the watchdog: X=60 plays a "
                        "90 s hang-after-load after 1.5 s of load (default: SIM_TIME_SCALE, else 1)")
    s.add_argument("--watchdog-s", type=float, default=None, metavar="S",
                   help="PyTorch's NCCL watchdog timeout: the watchdog line comes S s (simulated) after a "
                        "hang-after-load hang (default: SIM_WATCHDOG_S, else 600)")
    s.add_argument("--divergence-rate", type=float, default=None, metavar="P",
                   help="share of 300-token greedy answers that part late (from token 64) from the untuned "
                        "launch's when the set changes the allreduce reduction order (default: "
                        "SIM_DIVERGENCE_RATE, else the profile's: 0.03)")
    s.add_argument("--launch-divergence-rate", type=float, default=None, metavar="P",
                   help="the same for any launch against the ideal path, drawn anew per launch (from --seed "
                        "when given; 0 with VLLM_BATCH_INVARIANT=1) (default: SIM_LAUNCH_DIVERGENCE_RATE, else "
                        "the profile's: 0.003)")
    s.add_argument("--fault-after", type=int, default=None, metavar="K",
                   help="mid-stream faults trigger after K tokens (default: SIM_FAULT_AFTER, "
                        "else 8)")
    s.add_argument("--fault-request", type=int, default=None, metavar="N",
                   help="request-bound faults hit the N-th completion request of any kind "
                        "(default: SIM_FAULT_REQUEST, else the first streamed request asking for "
                        "more than 8 tokens: a probe run, not the readiness request)")
    s.add_argument("--log-schedule", action="store_true",
                   help="after each stream print SIM SCHEDULE {\"due\": [...], \"batch\": [...]}: when each "
                        "token was due (time.perf_counter s; none leaves before it) and each step's batch")
    s.add_argument("--api", choices=APIS, default="vllm",
                   help="the server imitated: vLLM, or 'tgi' (text-generation-inference: its launcher's log, "
                        "/info, no GET /v1/models before 2.3, any model name, no usage chunk, the role in every delta)")
    s.add_argument("--tgi-version", default="2.2.0", metavar="X.Y.Z",
                   help="with --api tgi: the version served (GET /v1/models from 2.3)")
    s.add_argument("--stream-interval", type=int, default=1, metavar="N",
                   help="tokens per stream chunk, as trtllm-serve's stream_interval (the first chunk too)")
    s.add_argument("--ignores-ignore-eos", action="store_true",
                   help="accept ignore_eos and end each answer at its natural end anyway (64 tokens of "
                        "free text), as TGI and some SGLang versions do")
    s.add_argument("--first-token-delay", type=float, default=0.0, metavar="S",
                   help="the launch's first request gets its headers at once and its first token S s "
                        "later (a JIT compile on the first request); requests meanwhile wait too")
    s.add_argument("--first-token-log", choices=("compile", "none"), default="compile",
                   help="with --first-token-delay: log a warm-up line (a graph compile), or nothing")
    s.add_argument("--teardown-s", type=float, default=None, metavar="S",
                   help="slow-teardown delay in seconds (default: SIM_TEARDOWN_S, else 3)")
    n = s.add_argument_group("a server across nodes (vLLM's multi-node flags; profiles roce-2x-spark, "
                             "roce-4x-spark): one process per node, the head (node rank 0) serves HTTP once "
                             "every node joined its rendezvous; NCCL's lines show NCCL_TUNE_NODE as host")
    n.add_argument("--nnodes", type=int, default=1, metavar="N",
                   help="nodes the server spans: the profile's (TP / GPUs per node)")
    n.add_argument("--node-rank", type=int, default=0, metavar="R", help="this node's rank, 0 = the head")
    n.add_argument("--master-addr", default="127.0.0.1", metavar="ADDR",
                   help="the head's rendezvous address (a real TCP socket)")
    n.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT, metavar="PORT",
                   help="the head's rendezvous port")
    n.add_argument("--headless", action="store_true",
                   help="no HTTP server (node ranks > 0 run so whether given or not)")

    sub.add_parser("all-reduce-perf", add_help=False,
                   help="print nccl-tests all_reduce_perf output (see its --help)")

    m = sub.add_parser("model", formatter_class=_Formatter,
                       help="print the cost model's prediction, no server",
                       description="Print what the cost model predicts for a profile under the "
                       "current environment plus --env overrides.")
    m.add_argument("--profile", default=None,
                   help=f"built-in profile or .toml file (default: SIM_PROFILE, else {DEFAULT_PROFILE})")
    m.add_argument("--env", action="append", default=None, metavar="NAME=VALUE",
                   help="override an environment variable (repeatable)")
    m.add_argument("--batch", type=int, default=1, help="concurrent streams")
    m.add_argument("--json", action="store_true", help="one JSON object instead of text")
    m.add_argument("--disable-custom-all-reduce", action="store_true",
                   help="vLLM's flag: no custom allreduce")
    m.add_argument("--fault-when", action="append", default=None, metavar="'COND => EFFECT'",
                   help="as serve's: set-bound faults added to the profile's (default: SIM_FAULT_WHEN)")
    _backend_options(m)

    sub.add_parser("profiles", help="list the built-in profiles")
    sub.add_parser("faults", help="list the fault modes")
    sub.add_parser("worker", add_help=False, help="one simulated TP worker (started by serve)")
    return ap


def _backend_options(ap: argparse.ArgumentParser) -> None:
    """Options that choose vLLM's allreduce backends (arbackends.py), shared by serve and model."""
    ap.add_argument("--vllm-version", default=None, metavar="X.Y.Z",
                    help="vLLM version to simulate: which backend variables it reads, their "
                         "defaults, its dispatch order and log lines (default: the profile's)")
    ap.add_argument("--sim-missing", action="append", default=None, metavar="PACKAGE",
                    help=f"a package the server lacks ({', '.join(MISSING_PACKAGES)}; "
                         "repeatable): its backend falls back with vLLM's message (default: "
                         "TUNER_SIM_MISSING, comma-separated)")


def backend_choice(args, environ: dict, profile, prog: str):
    """(profile with --vllm-version / --disable-custom-all-reduce applied, missing packages).
    Raises ProfileError for a bad version or package name."""
    import dataclasses

    if args.vllm_version is not None:
        try:
            vtuple(args.vllm_version)
        except ValueError:
            raise ProfileError(f"--vllm-version must look like 0.30.0, got "
                               f"{args.vllm_version!r}") from None
        profile = dataclasses.replace(profile, vllm_version=args.vllm_version)
    if args.disable_custom_all_reduce:
        profile = dataclasses.replace(profile, disable_custom_all_reduce=True)
    names = args.sim_missing or [n for n in re.split(r"[,\s]+", environ.get("TUNER_SIM_MISSING", ""))
                                 if n]
    where = "--sim-missing" if args.sim_missing else "TUNER_SIM_MISSING"
    for name in names:
        if name not in MISSING_PACKAGES:
            raise ProfileError(f"{where}: unknown package {name!r}; accepted: "
                               f"{', '.join(MISSING_PACKAGES)}")
    return profile, tuple(sorted(set(names)))


def _rates(args, environ: dict, profile):
    """The profile with --divergence-rate / --launch-divergence-rate (or their SIM_* variables)."""
    import dataclasses

    out = {}
    for field, flag, name in (("divergence_rate", args.divergence_rate, "SIM_DIVERGENCE_RATE"),
                              ("launch_divergence_rate", args.launch_divergence_rate,
                               "SIM_LAUNCH_DIVERGENCE_RATE")):
        text = flag if flag is not None else environ.get(name)
        if text in (None, ""):
            continue
        where = f"--{field.replace('_', '-')}" if flag is not None else name
        try:
            value = float(text)
        except ValueError:
            raise ProfileError(f"{where} must be a number within [0, 1), got {text!r}") from None
        if not 0.0 <= value < 1.0:
            raise ProfileError(f"{where} must be within [0, 1) (the share of 300-token answers that "
                               f"part), got {text!r}")
        out[field] = value
    return dataclasses.replace(profile, **out) if out else profile


def ignored_vars(cli: list[str] | None, environ: dict) -> tuple[str, ...]:
    """Names from ``--ignore-var`` (repeatable) or else ``SIM_IGNORE_VARS`` (comma or space
    separated)."""
    if cli:
        return tuple(cli)
    return tuple(n for n in re.split(r"[,\s]+", environ.get("SIM_IGNORE_VARS", "")) if n)


def no_effect_vars(cli: list[str] | None, environ: dict) -> tuple[str, ...]:
    """Names from ``--no-effect`` (repeatable) or else ``SIM_NO_EFFECT`` (comma or space
    separated): read by NCCL, without effect on the speed."""
    if cli:
        return tuple(cli)
    return tuple(n for n in re.split(r"[,\s]+", environ.get("SIM_NO_EFFECT", "")) if n)


def node_spec(args, profile) -> NodeSpec | None:
    """The serve flags of a server across nodes, checked against the profile (None: one node).
    Raises ProfileError naming the flag, its value and what is accepted."""
    if not 1 <= args.nnodes <= 64:
        raise ProfileError(f"--nnodes must be within 1-64, got {args.nnodes}")
    if not 0 <= args.node_rank < args.nnodes:
        raise ProfileError(f"--node-rank must be within 0-{args.nnodes - 1} (--nnodes {args.nnodes}), "
                           f"got {args.node_rank}")
    if not 1 <= args.master_port <= 65535:
        raise ProfileError(f"--master-port must be within 1-65535, got {args.master_port}")
    if args.headless and args.node_rank == 0:
        raise ProfileError("--headless is for node ranks > 0: node rank 0 is the head, which serves HTTP")
    spans = sorted(name for name, p in BUILTIN.items() if p.nnodes > 1)
    if profile.nnodes != args.nnodes:
        what = (f"spans {profile.nnodes} nodes (TP {profile.tp}, {profile.gpus_per_node} GPU(s) per node)"
                if profile.nnodes > 1 else "is one node")
        raise ProfileError(f"--nnodes {args.nnodes}: profile {profile.name} {what}; give --nnodes "
                           f"{profile.nnodes}, or a profile across nodes ({', '.join(spans)})")
    if args.nnodes == 1:
        return None
    return NodeSpec(args.nnodes, args.node_rank, args.master_addr, args.master_port,
                    args.headless or args.node_rank > 0)


def _serve(args, environ: dict, prog: str) -> int:
    from .server import ServeOptions, serve

    try:
        profile = load_profile(args.profile or environ.get("SIM_PROFILE"))
        nodes = node_spec(args, profile)
        plan = faults_mod.parse_faults(args.fault, after_tokens=args.fault_after,
                                       on_request=args.fault_request, teardown_s=args.teardown_s,
                                       environ=environ, when=args.fault_when,
                                       time_scale=args.time_scale, watchdog_s=args.watchdog_s)
        profile, missing = backend_choice(args, environ, profile, prog)
        profile = _rates(args, environ, profile)
    except (ProfileError, faults_mod.FaultError) as exc:
        print(f"{prog} serve: {exc}", file=sys.stderr)
        return 2
    load = args.load_time if args.load_time is not None else _env_default(
        environ, "SIM_LOAD_TIME_S", float, profile.load_time_s, prog)
    noise = args.noise if args.noise is not None else _env_default(
        environ, "SIM_NOISE", float, profile.noise, prog)
    launch = args.launch_noise if args.launch_noise is not None else _env_default(
        environ, "SIM_LAUNCH_NOISE", float, 0.005, prog)
    seed = args.seed if args.seed is not None else _env_default(environ, "SIM_SEED", int, None, prog)
    workers = args.workers if args.workers is not None else _env_default(
        environ, "SIM_WORKERS", int, (profile.gpus_per_node or profile.tp) - 1, prog)
    reasoning = args.reasoning_tokens if args.reasoning_tokens is not None else _env_default(
        environ, "SIM_REASONING_TOKENS", int, 0, prog)
    for name, value in (("--load-time", load), ("--noise", noise), ("--launch-noise", launch),
                        ("--workers", workers), ("--reasoning-tokens", reasoning)):
        if value < 0:
            print(f"{prog} serve: {name} must be >= 0, got {value}", file=sys.stderr)
            return 2
    if not 0 <= args.port <= 65535:
        print(f"{prog} serve: --port must be within 0-65535, got {args.port}", file=sys.stderr)
        return 2
    buffering = args.stdout_buffering or environ.get("SIM_STDOUT_BUFFERING") or "line"
    if buffering not in STDOUT_BUFFERING:
        print(f"{prog} serve: SIM_STDOUT_BUFFERING must be one of {', '.join(STDOUT_BUFFERING)}, "
              f"got {buffering!r}", file=sys.stderr)
        return 2
    start_env = None
    for item in args.ray_start_env or []:
        if "=" not in item:
            print(f"{prog} serve: --ray-start-env expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        start_env = start_env or {}
        k, v = item.split("=", 1)
        start_env[k] = v
    if args.ray_nodes < 1:
        print(f"{prog} serve: --ray-nodes must be >= 1, got {args.ray_nodes}", file=sys.stderr)
        return 2
    ray = args.ray if args.ray is not None else environ.get("SIM_RAY", "") not in ("", "0")
    opts = ServeOptions(profile=profile, model_name=args.model or profile.model, host=args.host,
                        port=args.port, load_time_s=load, noise=noise, launch_noise=launch,
                        seed=seed, workers=workers, reasoning_tokens=reasoning,
                        reasoning_field=args.reasoning_field, faults=plan, environ=environ,
                        ignore_vars=ignored_vars(args.ignore_var, environ), stdout_buffering=buffering,
                        no_effect=no_effect_vars(args.no_effect, environ),
                        ray=ray, ray_nodes=args.ray_nodes, ray_start_env=start_env, log_schedule=args.log_schedule,
                        missing=missing, api=args.api, tgi_version=args.tgi_version,
                        stream_interval=args.stream_interval, ignores_ignore_eos=args.ignores_ignore_eos,
                        first_token_delay_s=args.first_token_delay, first_token_log=args.first_token_log,
                        nodes=nodes)
    if args.stream_interval < 1:
        print(f"{prog} serve: --stream-interval must be >= 1, got {args.stream_interval}", file=sys.stderr)
        return 2
    return serve(opts)


#: Every non-NCCL backend variable off: with --disable-custom-all-reduce, pure NCCL.
NCCL_ONLY = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "0", "VLLM_USE_NCCL_SYMM_MEM": "0",
             "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "0"}


def _model(args, environ: dict, prog: str) -> int:
    import dataclasses

    from .costmodel import CollectiveCrash, CostModel, check_init
    from .ncclenv import NcclInitError, read_env
    from .server import set_behaviour

    try:
        profile = load_profile(args.profile or environ.get("SIM_PROFILE"))
        profile, missing = backend_choice(args, environ, profile, prog)
        faults = faults_mod.parse_faults("", environ=environ, when=args.fault_when)
    except (ProfileError, faults_mod.FaultError) as exc:
        print(f"{prog} model: {exc}", file=sys.stderr)
        return 2
    env = dict(environ)
    for item in args.env or []:
        if "=" not in item:
            print(f"{prog} model: --env expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        k, v = item.split("=", 1)
        env[k] = v
    try:
        plan = plan_for(profile, env, missing)
    except ValueError as exc:
        print(f"vLLM would fail at start: ValueError: {exc}", file=sys.stderr)
        return 1
    try:
        settings = read_env(env, profile.nccl_version).settings
        check_init(profile, settings)
        model, effects, order_key = set_behaviour(profile, faults, env, CostModel(profile, settings, plan),
                                                  missing)
        bd = model.breakdown(max(1, args.batch))
        bare = dataclasses.replace(profile, disable_custom_all_reduce=True)
        nccl_bd = CostModel(bare, settings, plan_for(bare, NCCL_ONLY)).breakdown(max(1, args.batch))
    except NcclInitError as exc:
        print(f"NCCL would fail: {'; '.join(m.text for m in exc.messages if m.level == 'WARN')} "
              f"({exc.result})", file=sys.stderr)
        return 1
    except CollectiveCrash as exc:
        print(f"NCCL would crash: {exc.reason} ({exc.proto}, {exc.nbytes} bytes)", file=sys.stderr)
        return 1
    c = bd.allreduce
    out = {"profile": profile.name, "batch": bd.batch, "tok_s_per_stream": round(bd.tok_s, 3),
           "tok_s_aggregate": round(bd.tok_s * bd.batch, 3), "step_ms": round(bd.step_ms, 4),
           "compute_ms": round(bd.compute_ms, 4), "allreduce_ms": round(bd.allreduce_ms, 4),
           "allreduce_share": round(bd.share, 4), "allreduce_bytes": c.nbytes,
           "allreduce_us": round(c.time_us, 3), "nccl_model_us": round(c.model_us, 3),
           "via": c.via, "algo": c.algo, "proto": c.proto, "nchannels": c.nchannels,
           "nthreads": c.nthreads, "corrupt": c.corrupt,
           "parts_us": {k: round(v, 3) for k, v in c.parts.items()},
           "vllm_version": profile.vllm_version, "backends": list(plan.enabled),
           "backend": plan.pick(c.nbytes), "backend_us": round(c.time_us, 3),
           "nccl_only_tok_s": round(nccl_bd.tok_s, 3),
           "vs_nccl_only": f"{(bd.tok_s / nccl_bd.tok_s - 1) * 100:+.1f} %",
           "set_effects": effects.as_dict(),
           "reduction_order": "untuned" if order_key is None else "changed"}
    if profile.gpus_per_node:
        from .ncclnet import net_choice

        out["network"] = net_choice(profile, settings.raw).name
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:18s} {v}")
    return 0


def main(argv: list[str] | None = None, prog: str = DEFAULT_PROG) -> int:
    """Entry point: ``main(["serve", "--port", "8000"])``; returns the exit status. ``prog`` is
    the name help and errors use (``nccl-tune sim`` from the nccl-tune CLI)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:  # the worker has its own parser and must stay importable alone
        from .worker import main as worker_main

        return worker_main(argv[1:])
    if argv[:1] == ["all-reduce-perf"]:
        from .allreduceperf import main as arp_main

        return arp_main(argv[1:], prog=f"{prog} all-reduce-perf")
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad input, 0 for --help
        return int(exc.code or 0) if isinstance(exc.code, (int, type(None))) else 2
    environ = dict(os.environ)
    try:
        if args.command == "serve":
            return _serve(args, environ, prog)
        if args.command == "model":
            return _model(args, environ, prog)
    except SystemExit as exc:  # a bad SIM_* value
        print(exc, file=sys.stderr)
        return 2
    if args.command == "profiles":
        for name, p in BUILTIN.items():
            print(f"{name:16s} tp={p.tp} link={p.link} layers={p.layers} hidden={p.hidden} "
                  f"nccl={p.nccl_version} model={p.model} load_time_s={p.load_time_s}"
                  + (f" nodes={p.nnodes}" if p.nnodes > 1 else ""))
        return 0
    if args.command == "faults":
        for name, what in faults_mod.FAULT_MODES.items():
            print(f"{name:18s} {what}")
        return 0
    return 2
