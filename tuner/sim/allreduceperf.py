"""``all_reduce_perf`` stand-in: nccl-tests' output under the simulator's cost model.

Same profile, NCCL environment reading, refusals and faults as ``sim serve``; the time of an
iteration is NCCL's collective on the simulated hardware plus a launch (``bench_launch_us``), with
per-run and per-iteration noise. algbw = S / t and busbw = algbw x 2(n-1)/n (nccl-tests
doc/PERFORMANCE.md; src/all_reduce.cu ``AllReduceGetBw``).

``--format`` picks an nccl-tests version's layout (github.com/NVIDIA/nccl-tests):

* ``2.11``: v2.11.0 - ``error`` column (max deviation, ``%5.0le``), no ``root`` column,
  ``#   Rank  0 Pid ...`` device lines, 5 warm-up iterations by default;
* ``2.13``: v2.13.9 - ``#wrong`` column, ``root`` column, ``[0x18]`` bus ids;
* ``2.19`` (default): v2.19.6 (src/util.cu) - version and ``Collective test`` lines,
  ``[0000:18:00]`` bus ids, ``-I 1`` per-iteration columns (i_min, i_max, i_p99, i_cv%), ``-J
  FILE.json`` JSON output (format version 3).

A set that runs a protocol where NCCL would not have enabled it (LL128 forced on PCIe) corrupts
the results: non-zero ``#wrong``. NCCL's per-operation TUNING line is printed once per size
(NCCL prints one per call). With NCCL_DEBUG_FILE (``%h``/``%p``), NCCL's lines go to that
file instead of the output, as NCCL does (ncclstdio). The JSON ``env`` list keeps only NCCL_*, CUDA_* and SIM_* variables
(nccl-tests writes the whole environment; the stand-in never writes a secret).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import re
import resource
import signal
import sys
import threading
import time

from .costmodel import CollectiveCrash, CostModel, check_init
from .faults import FAULT_MODES, FaultError, parse_faults
from .jsonout import iter_stats
from .ncclconst import DATATYPE_BYTES, ERROR_STRINGS, version_code
from .ncclenv import NcclInitError, load_conf_file, read_env
from .nccllog import (
    DebugConfig,
    format_line,
    host_name,
    init_messages,
    matrix_message,
    op_message,
    output_plan,
    split_echoes,
    tuning_table,
    version_message,
)
from .ncclstdio import open_sink
from .profiles import BUILTIN, DEFAULT_PROFILE, Profile, ProfileError, load_profile

FORMATS = ("2.11", "2.13", "2.19")
TESTS_VERSION = {"2.19": "2.19.6"}
TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16")
OPS = ("sum", "prod", "max", "min", "avg")
PROGRAM = "all_reduce_perf"


def parse_size(text: str) -> int:
    """nccl-tests ``parsesize``: a number with an optional K/M/G suffix (powers of 1024);
    raises ValueError otherwise."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*([kKmMgG]?)\S*", text)
    if not m:
        raise ValueError(text)
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()])


def float_str(value: float, width: int) -> str:
    """nccl-tests ``getFloatStr`` (src/util.cu): 2 decimals if it fits, then 1, 0, exponent."""
    for digits in (2, 1, 0):
        s = f"{value:{width}.{digits}f}"
        if len(s) <= width:
            return s
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def old_time_str(us: float) -> str:
    """Time column of nccl-tests <= 2.17 (src/common.cu ``BenchTime``)."""
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


@dataclasses.dataclass
class Half:
    """One out-of-place or in-place measurement: average time (us), bandwidths (GB/s), wrong
    elements, per-iteration times (us)."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int
    iters: list


def _parser(prog: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog, description="Print nccl-tests all_reduce_perf output for the simulated box "
        "under the current NCCL environment (same cost model, profile and faults as serve).")
    add = ap.add_argument
    add("-t", "--nthreads", type=int, default=1, help="threads (default 1)")
    add("-g", "--ngpus", type=int, default=1, help="GPUs per thread (default 1)")
    add("-b", "--minbytes", default="32M", help="smallest size, K/M/G suffixes (default 32M)")
    add("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    add("-i", "--stepbytes", default="1M", help="size increment without -f (default 1M)")
    add("-f", "--stepfactor", type=int, default=1, help="size multiplier (default 1: use -i)")
    add("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    add("-w", "--warmup_iters", type=int, default=None,
        help="warm-up iterations (default 1; 5 with --format 2.11 or 2.13)")
    add("-m", "--agg_iters", type=int, default=1, help="aggregated iterations (default 1)")
    add("-c", "--check", type=int, default=1, help="check iterations; 0 prints N/A (default 1)")
    add("-o", "--op", default="sum", help="reduction (default sum)")
    add("-d", "--datatype", default="float", help="bfloat16, half, float or another nccl-tests type (default float)")
    add("-r", "--root", type=int, default=0, help="accepted, unused by allreduce")
    add("-z", "--blocking", type=int, default=0, help="accepted, no effect")
    add("-G", "--cudagraph", type=int, default=0, help="accepted, no effect")
    add("-a", "--average", type=int, default=1, help="accepted, no effect")
    add("-T", "--timeout", type=int, default=0, help="accepted, no effect")
    add("-I", "--per_iter_timing", type=int, default=0,
        help="1 adds per-iteration columns (format 2.19; default 0)")
    add("-K", "--per_iter_skip", type=int, default=0, help="leading iterations left out of -I")
    add("-J", "--output_file", default=None, metavar="FILE.json",
        help="also write JSON (format 2.19)")
    add("--profile", default=None,
        help=f"built-in ({', '.join(BUILTIN)}) or a .toml file (default SIM_PROFILE or "
             f"{DEFAULT_PROFILE})")
    add("--format", choices=FORMATS, default="2.19",
        help="nccl-tests version whose layout to print (default 2.19)")
    add("--seed", type=int, default=None, help="noise seed (default SIM_SEED or random)")
    add("--noise", type=float, default=None, metavar="FRACTION",
        help="per-run time noise, 1 sigma (default: the profile's bench_noise)")
    add("--fault", default=None, metavar="MODE[,MODE]",
        help=f"failure to play (or SIM_FAULT): {', '.join(FAULT_MODES)}")
    return ap


def _sizes(args) -> list[int]:
    sizes, size = [], args.minbytes
    while size <= args.maxbytes:
        sizes.append(size)
        nxt = size * args.stepfactor if args.stepfactor > 1 else size + args.stepbytes
        if nxt <= size:
            break
        size = nxt
    return sizes


class Run:
    """One all_reduce_perf process: options, profile, model, output."""

    def __init__(self, args, profile: Profile, environ: dict, out):
        self.args, self.p, self.environ, self.out = args, profile, environ, out
        self.fmt = args.format
        self.n = args.nthreads * args.ngpus
        self.host = host_name()
        seed = args.seed if args.seed is not None else environ.get("SIM_SEED")
        self.rng = random.Random(None if seed in (None, "") else int(seed))
        self.debug = DebugConfig(environ)
        self.version = profile.nccl_version
        self.dtype: str = args.datatype
        self.op: str = args.op
        # NCCL_DEBUG_FILE takes NCCL's lines out of the output, as NCCL does (nccllog.output_plan)
        self.sink = open_sink(output_plan(load_conf_file(environ), self.debug, self.version,
                                          host=self.host), os.getpid())

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def say_nccl(self, text: str) -> None:
        """One NCCL line: to NCCL_DEBUG_FILE's file when it names one, else with the output."""
        if self.sink is not None:
            self.sink.write(text)
        else:
            self.say(text)

    # -- header ----------------------------------------------------------------------------
    def header(self) -> None:
        a = self.args
        step = f"{a.stepfactor}(factor)" if a.stepfactor > 1 else f"{a.stepbytes}(bytes)"
        code = version_code(self.version)
        if self.fmt == "2.19":
            self.say(f"# nccl-tests version {TESTS_VERSION['2.19']} nccl-headers={code} "
                     f"nccl-library={code}")
            self.say(f"# Collective test starting: {PROGRAM}")
            self.say(f"# nThread {a.nthreads} nGpus {a.ngpus} minBytes {a.minbytes} maxBytes "
                     f"{a.maxbytes} step: {step} warmup iters: {a.warmup_iters} iters: {a.iters} "
                     f"agg iters: {a.agg_iters} validation: {a.check} graph: {a.cudagraph} "
                     f"unalign: 0")
            if a.per_iter_timing:
                skip = f"; summary skips first {a.per_iter_skip} iterations" if a.per_iter_skip else ""
                self.say("# Per-Iteration Report: CUDA event timing; i_* uses max over process "
                         f"rows{skip} ")
        elif self.fmt == "2.13":
            self.say(f"# nThread {a.nthreads} nGpus {a.ngpus} minBytes {a.minbytes} maxBytes "
                     f"{a.maxbytes} step: {step} warmup iters: {a.warmup_iters} iters: {a.iters} "
                     f"agg iters: {a.agg_iters} validation: {a.check} graph: {a.cudagraph}")
        else:
            self.say(f"# nThread {a.nthreads} nGpus {a.ngpus} minBytes {a.minbytes} maxBytes "
                     f"{a.maxbytes} step: {step} warmup iters: {a.warmup_iters} iters: {a.iters} "
                     f"validation: {a.check} ")
        self.say("#")
        self.say("# Using devices")
        pid = os.getpid()
        for r in range(self.n):
            bus = 0x18 + 0x10 * r
            if self.fmt == "2.19":
                self.say(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {self.host:>10s} device {r:2d} "
                         f"[0000:{bus:02x}:00] {self.p.gpu_name}")
            elif self.fmt == "2.13":
                self.say(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {self.host:>10s} device {r:2d} "
                         f"[0x{bus:02x}] {self.p.gpu_name}")
            else:
                self.say(f"#   Rank {r:2d} Pid {pid:6d} on {self.host:>10s} device {r:2d} "
                         f"[0x{bus:02x}] {self.p.gpu_name}")

    def table_header(self) -> None:
        t, tl = "time", "  "
        if self.fmt == "2.11":
            self.say("#")
            self.say(f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}            out-of-place                       in-place          ")
            self.say(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {t:>7s}  {'algbw':>6s}  {'busbw':>6s}  {'error':>5s}  {t:>7s}  {'algbw':>6s}  {'busbw':>6s}  {'error':>5s}")
            self.say(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>5s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>5s}")
            return
        if self.fmt == "2.13":
            self.say("#")
            self.say(f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       in-place          ")
            self.say(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {t:>7s}  {'algbw':>6s}  {'busbw':>6s} {'#wrong':>6s}  {t:>7s}  {'algbw':>6s}  {'busbw':>6s} {'#wrong':>6s}")
            self.say(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>5s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>5s}")
            return
        self.say("#")
        if self.args.per_iter_timing:
            self.say(f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}              out-of-place (+ per-iteration)                                in-place (+ per-iteration)")
            cols = ["size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong",
                    "i_min", "i_max", "i_p99", "i_cv%", t, "algbw", "busbw", "#wrong", "i_min",
                    "i_max", "i_p99", "i_cv%"]
            units = ["(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)",
                     "(us)", "(%)", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)"]
            widths = [10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 7, 7, 7, 7, 6, 6, 6, 7, 7, 7, 7]
        else:
            self.say(f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       in-place          ")
            cols = ["size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t,
                    "algbw", "busbw", "#wrong"]
            units = ["(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                     "(GB/s)", "(GB/s)", ""]
            widths = [10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6]
        for row in (cols, units):
            self.say("# " + tl.join(f"{c:>{w}s}" for c, w in zip(row, widths, strict=True)) + " ")

    # -- measurements ----------------------------------------------------------------------
    def measure(self, model: CostModel, nbytes: int, run_factor: float, wrong: bool) -> Half:
        a = self.args
        base = model.bench_us(nbytes, self.n, self.dtype)
        iters = [base * run_factor * max(0.5, 1 + self.rng.gauss(0.0, self.p.bench_iter_noise))
                 for _ in range(max(1, a.iters))]
        t = sum(iters) / len(iters)
        algbw = nbytes / 1e3 / t if t > 0 else 0.0
        busbw = algbw * (2 * (self.n - 1) / self.n)
        count = nbytes // DATATYPE_BYTES.get(self.dtype, 4)
        return Half(t, algbw, busbw, (count // 3 + 1) if wrong else 0, iters)

    def row(self, nbytes: int, count: int, halves: list[Half], check: bool) -> str:
        root = -1
        if self.fmt == "2.11":
            line = f"{nbytes:12d}  {count:12d}  {self.dtype:>8s}  {self.op:>6s}"
        else:
            line = f"{nbytes:12d}  {count:12d}  {self.dtype:>8s}  {self.op:>6s}  {root:6d}"
        for h in halves:
            if self.fmt == "2.19":
                line += f"  {float_str(h.time_us, 7)}  {float_str(h.algbw, 6)}  {float_str(h.busbw, 6)}"
                line += f"  {h.wrong:6g}" if check else "    N/A"
                if self.args.per_iter_timing:
                    st = iter_stats(h.iters[self.args.per_iter_skip:])
                    line += "  " + "  ".join(float_str(v, 7) for v in (st["min_us"], st["max_us"],
                                                                       st["p99_us"], st["cv_pct"]))
            elif self.fmt == "2.13":
                wrong = f"{h.wrong:5g}" if check else f"{'N/A':>5s}"
                line += f"  {old_time_str(h.time_us)}  {h.algbw:6.2f}  {h.busbw:6.2f}  {wrong}"
            else:
                delta = float(h.wrong and 2) if check else None
                err = f"{delta:5.0e}" if delta is not None else f"{'N/A':>5s}"
                line += f"  {old_time_str(h.time_us)}  {h.algbw:6.2f}  {h.busbw:6.2f}  {err}"
        return line

    # -- NCCL lines --------------------------------------------------------------------------
    def nccl_lines(self, report, model: CostModel | None, error: NcclInitError | None) -> None:
        pid = os.getpid()
        tid0 = threading.get_native_id()
        for r in range(self.n):
            tid = tid0 + 1 + r
            vmsg = version_message(self.p, self.debug, r)
            early, late = split_echoes(report.messages if report else [])
            msgs = ([vmsg] if vmsg else []) + (early if error is None else list(report.messages if report else []))
            if error is not None:
                msgs += error.messages
            elif model is not None:
                tm = model.tune(self.n)
                msgs += init_messages(self.p, report.settings, tm, r, 0x55D0A0000, tuning_echoes=late)
                if r == 0:
                    matrix = matrix_message(report.settings, tm.algos)
                    msgs += ([matrix] if matrix else []) + tuning_table(tm)
            for m in msgs:
                text = format_line(m, self.debug, r, self.version, pid, tid, self.host)
                if text is not None:
                    self.say_nccl(text)

    def nccl_failure(self, exc: NcclInitError) -> int:
        last = exc.warn_lines[-1] if exc.warn_lines else ""
        what = ERROR_STRINGS.get(exc.result, exc.result)
        text = f"'{what}'" if self.fmt == "2.11" else f"'{what} / {last}'"
        self.say(f"{self.host}: Test NCCL failure common.cu:1206 {text}")
        self.say(f" .. {self.host} pid {os.getpid()}: Test failure common.cu:1056")
        return 3


def _die_fpe() -> None:
    """Die of SIGFPE like a host-side integer division by zero (no core file)."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.stdout.flush()
    signal.signal(signal.SIGFPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGFPE)
    time.sleep(1)
    os._exit(136)


def _hang() -> int:
    while True:  # SIGTERM/SIGKILL end it
        time.sleep(3600)


def main(argv: list[str], environ: dict | None = None, prog: str = "all_reduce_perf",
         out=None) -> int:
    """Run the stand-in; returns the exit status: 0; 1 (nccl-tests <= 2.13) or 7 (2.19) when
    values were wrong; 2 for a CUDA failure or bad arguments; 3 for an NCCL failure; 5 for more
    GPUs than the profile has; killed by SIGFPE when a chunk rounds down to 0."""
    holder: list = []
    try:
        return _main(argv, environ, prog, out, holder)
    finally:
        for report in holder:
            report.close()


def _main(argv: list[str], environ: dict | None, prog: str, out, holder: list) -> int:
    from .jsonout import JsonReport

    environ = dict(os.environ if environ is None else environ)
    out = out or sys.stdout
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, (int, type(None))) else 2
    for name in ("minbytes", "maxbytes", "stepbytes"):
        try:
            setattr(args, name, parse_size(getattr(args, name)))
        except ValueError:
            print(f"invalid size specified for '{name.replace('bytes', 'Bytes') if name == 'stepbytes' else name}'",
                  file=sys.stderr)
            return 2
    if args.minbytes > args.maxbytes:
        print(f"invalid sizes for 'minbytes' and 'maxbytes': {args.minbytes} > {args.maxbytes}",
              file=sys.stderr)
        return 2
    if args.warmup_iters is None:
        args.warmup_iters = 1 if args.format == "2.19" else 5
    if args.format != "2.19" and (args.output_file or args.per_iter_timing):
        # -J came with nccl-tests 2.18, -I with 2.19.2: older getopt loops reject them, print
        # the usage and return 0 without running (src/common.cu).
        flag = "J" if args.output_file else "I"
        print(f"{PROGRAM}: invalid option -- '{flag}'", file=sys.stderr)
        print(f"invalid option '{flag}'", file=out or sys.stdout)
        print(f"USAGE: {PROGRAM} ", file=out or sys.stdout)
        return 0
    try:
        profile = load_profile(args.profile or environ.get("SIM_PROFILE"))
        faults = parse_faults(args.fault, environ=environ)
    except (ProfileError, FaultError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    run = Run(args, profile, environ, out)
    if args.datatype not in TYPES:
        run.say(f"invalid type {args.datatype}, defaulting to float .. ")
        args.datatype = "float"
    if args.op not in OPS:
        run.say(f"invalid op {args.op}, defaulting to sum .. ")
        args.op = "sum"
    run.dtype, run.op = args.datatype, args.op
    report = JsonReport(args.output_file, [PROGRAM, *argv], environ, profile) \
        if args.output_file and args.format == "2.19" else None
    if report is not None and report.path:
        holder.append(report)
        run.say(f"# Writing JSON output to {report.path}")
    run.header()
    if run.n > profile.tp:
        print(f"Invalid number of GPUs: {run.n} requested but only {profile.tp} were found.",
              file=sys.stderr)
        print("Please check the number of processes and GPUs per process.", file=sys.stderr)
        return 5
    if report is not None:
        report.config(args, run)
    if faults.has("hang-start"):
        return _hang()
    if faults.has("crash-start"):
        run.say(f"{run.host}: Test CUDA failure common.cu:1108 'out of memory'")
        run.say(f" .. {run.host} pid {os.getpid()}: Test failure common.cu:1056")
        return 2
    try:
        env_report = read_env(environ, profile.nccl_version)
    except NcclInitError as exc:
        run.nccl_lines(None, None, exc)
        return run.nccl_failure(exc)
    model = CostModel(profile, env_report.settings)
    try:
        check_init(profile, env_report.settings)
    except NcclInitError as exc:
        run.nccl_lines(env_report, None, exc)
        return run.nccl_failure(exc)
    run.nccl_lines(env_report, model, None)
    sizes = [s // DATATYPE_BYTES.get(run.dtype, 4) * DATATYPE_BYTES.get(run.dtype, 4) for s in _sizes(args)]
    warm = sizes if args.format == "2.19" else [sizes[-1], sizes[0]] if sizes else []
    tm = model.tune(run.n)
    try:
        for s in warm:
            model.nccl(s, run.n, run.dtype)
    except NcclInitError as exc:
        for m in exc.messages:
            text = format_line(m, run.debug, 0, run.version, os.getpid(), threading.get_native_id(),
                               run.host)
            if text:
                run.say_nccl(text)
        return run.nccl_failure(exc)
    except CollectiveCrash:
        _die_fpe()
    run.table_header()
    if report is not None:
        report.start_results()
    run_factor = max(0.5, 1 + run.rng.gauss(0.0, profile.bench_noise if args.noise is None
                                             else args.noise))
    errors, bws = 0, []
    check = args.check != 0
    for i, s in enumerate(sizes):
        try:
            cost = model.nccl(s, run.n, run.dtype)
        except CollectiveCrash:
            _die_fpe()
        msg = op_message(tm, run.version, s, cost.nchannels)
        if msg is not None:
            text = format_line(msg, run.debug, 0, run.version, os.getpid(), threading.get_native_id(),
                               run.host)
            if text:
                run.say_nccl(text)
        wrong = check and (cost.corrupt or faults.has("wrong-output"))
        halves = [run.measure(model, s, run_factor, wrong),
                  run.measure(model, s, run_factor * 0.99, wrong)]
        count = s // DATATYPE_BYTES.get(run.dtype, 4)
        run.say(run.row(s, count, halves, check))
        errors += sum(1 for h in halves if h.wrong)
        bws += [h.busbw for h in halves]
        if report is not None:
            report.result(s, count, run, halves, check)
        if i == 0 and faults.has("hang-mid-stream"):
            return _hang()
        if i == 0 and faults.has("crash-mid-stream"):
            run.say(f"{run.host}: Test NCCL failure common.cu:1206 'unhandled cuda error (run with "
                    "NCCL_DEBUG=INFO for details) / Cuda failure 'an illegal memory access was "
                    "encountered''")
            run.say(f" .. {run.host} pid {os.getpid()}: Test failure common.cu:1056")
            return 3
    avg = sum(bws) / len(bws) if bws else 0.0
    run.say(f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}")
    run.say(f"# Avg bus bandwidth    : {avg:g} ")
    run.say("#")
    if args.format == "2.19":
        run.say(f"# Collective test concluded: {PROGRAM}")
        run.say("#")
        run.say("")
        if report is not None:
            report.finish(errors, avg)
        if errors:
            run.say(f" .. {run.host} pid {os.getpid()}: Test failure common.cu:1454")
            return 7
        return 0
    if args.format == "2.13":
        run.say("")
    return 1 if errors else 0
