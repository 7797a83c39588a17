"""An independent all_reduce_perf stand-in: nccl-tests 2.19 output whose times follow the hidden
allreduce landscape of tests/servers/landscape.py, the one the env-rate test server's decode
speed follows too. Stdlib only; not the project's simulator, imports nothing from ``tuner``.

Accepts the options a screen passes: ``-b``/``-e`` (sizes, K/M/G suffixes), ``-f`` (step
factor), ``-i`` (step bytes), ``-g`` (GPUs), ``-d`` (datatype), ``-n``, ``-w``, ``-c`` (0 prints
N/A), ``-J FILE`` (JSON with the whole environment, as nccl-tests writes it), ``-h`` (usage
listing ``-J``). The layout is nccl-tests v2.19.6's (src/util.cu: version line, ``Collective
test`` lines, device lines, ``#wrong`` columns, ``Out of bounds values`` and ``Avg bus
bandwidth`` footers). A set the landscape marks wrong reports non-zero ``#wrong`` on every row
and exits 7 after ``Test failure`` lines; one it marks hanging prints its header and sleeps.
ENVRATE_AR_NOISE (fraction, 1 sigma) draws one lognormal factor per run. Every run appends the
NCCL_* variables it saw to ENVRATE_AR_SEEN_FILE when that is set (one JSON line per run).
"""

import getopt
import json
import math
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import landscape

TYPE_BYTES = {"float": 4, "half": 2, "bfloat16": 2, "double": 8, "int32": 4, "int8": 1, "uint8": 1}
USAGE = """USAGE: all_reduce_perf
	[-t,--nthreads <num threads>]
	[-g,--ngpus <gpus per thread>]
	[-b,--minbytes <min size in bytes>]
	[-e,--maxbytes <max size in bytes>]
	[-i,--stepbytes <increment size>]
	[-f,--stepfactor <increment factor>]
	[-n,--iters <iteration count>]
	[-w,--warmup_iters <warmup iteration count>]
	[-c,--check <check iteration count>]
	[-d,--datatype <nccltype/all>]
	[-J,--output_file <output file>]
	[-h,--help]"""


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    suffix = text[-1:].lower()
    return int(float(text[:-1]) * units[suffix]) if suffix in units else int(text)


def fmt(value: float, width: int) -> str:
    """nccl-tests getFloatStr: 2 decimals when they fit the width, then fewer."""
    for digits in (2, 1, 0):
        text = f"{value:{width}.{digits}f}"
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}"


def main(argv: list[str]) -> int:
    try:
        opts, _ = getopt.getopt(argv, "t:g:b:e:i:f:n:w:c:d:J:h",
                                ["nthreads=", "ngpus=", "minbytes=", "maxbytes=", "stepbytes=", "stepfactor=",
                                 "iters=", "warmup_iters=", "check=", "datatype=", "output_file=", "help"])
    except getopt.GetoptError as exc:
        print(f"all_reduce_perf: {exc}", file=sys.stderr)
        print(USAGE)
        return 0
    o = dict(opts)
    if "-h" in o or "--help" in o:
        print(USAGE)
        return 0
    env = os.environ
    seen_file = env.get("ENVRATE_AR_SEEN_FILE")
    if seen_file:
        with open(seen_file, "a") as f:
            f.write(json.dumps({k: v for k, v in env.items() if k.startswith("NCCL_")}, sort_keys=True) + "\n")
    ngpus = int(o.get("-g", "1"))
    dtype = o.get("-d", "float")
    lo, hi = parse_size(o.get("-b", "32M")), parse_size(o.get("-e", "32M"))
    factor, step = int(o.get("-f", "1")), parse_size(o.get("-i", "1M"))
    iters, warmup, check = int(o.get("-n", "20")), int(o.get("-w", "1")), int(o.get("-c", "1"))
    width = TYPE_BYTES.get(dtype, 4)
    sizes, size = [], lo
    while size <= hi:
        sizes.append(size // width * width)
        size = size * factor if factor > 1 else size + step
    host, pid = socket.gethostname()[:10], os.getpid()
    code = 22703
    print(f"# nccl-tests version 2.19.6 nccl-headers={code} nccl-library={code}")
    print("# Collective test starting: all_reduce_perf")
    print(f"# nThread 1 nGpus {ngpus} minBytes {lo} maxBytes {hi} step: "
          f"{f'{factor}(factor)' if factor > 1 else f'{step}(bytes)'} warmup iters: {warmup} iters: {iters} "
          f"agg iters: 1 validation: {check} graph: 0 unalign: 0")
    print("#")
    print("# Using devices")
    for r in range(ngpus):
        print(f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {host:>10s} device {r:2d} [0000:{0x18 + r:02x}:00] "
              "Stand-in GPU")
    sys.stdout.flush()
    if landscape.holds(env, "ENVRATE_AR_HANG"):
        time.sleep(3600)
        return 0
    print("#")
    print("#                                                              out-of-place                       "
          "in-place          ")
    print("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
          "   busbw  #wrong ")
    print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)"
          "  (GB/s)         ")
    run = math.exp(random.Random().gauss(0.0, float(env.get("ENVRATE_AR_NOISE", "0"))))
    wrong = landscape.holds(env, "ENVRATE_AR_WRONG") and check != 0
    results, errors, bws = [], 0, []
    for s in sizes:
        count = s // width
        halves = []
        for inplace in (0, 1):
            t = landscape.time_us(env, s) * run * (0.99 if inplace else 1.0)
            algbw = s / 1e3 / t
            busbw = algbw * 2 * (ngpus - 1) / ngpus
            nwrong = count // 3 + 1 if wrong else 0
            halves.append((t, algbw, busbw, nwrong))
            errors += 1 if nwrong else 0
            bws.append(busbw)
        line = f"{s:12d}  {count:12d}  {dtype:>8s}  {'sum':>6s}  {-1:6d}"
        for t, algbw, busbw, nwrong in halves:
            line += f"  {fmt(t, 7)}  {fmt(algbw, 6)}  {fmt(busbw, 6)}  " + (f"{nwrong:6d}" if check else "   N/A")
        print(line)
        results.append((s, count, halves))
    avg = sum(bws) / len(bws) if bws else 0.0
    print(f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}")
    print(f"# Avg bus bandwidth    : {avg:g} ")
    print("#")
    print("# Collective test concluded: all_reduce_perf")
    print("#")
    print("")
    if "-J" in o or "--output_file" in o:
        _json(o.get("-J") or o["--output_file"], argv, env, ngpus, lo, hi, iters, warmup, check, dtype, results,
              errors, avg, code)
    if errors:
        print(f" .. {host} pid {pid}: Test failure common.cu:1454")
        return 7
    return 0


def _json(path, argv, env, ngpus, lo, hi, iters, warmup, check, dtype, results, errors, avg, code):
    """The -J file as nccl-tests 2.19.6 writes it (src/util.cu), whole environment included."""

    def half(h):
        t, algbw, busbw, nwrong = h
        return {"time": t, "alg_bw": algbw, "bus_bw": busbw, "nwrong": nwrong if check else None}

    data = {"version": 3, "start_time": time.strftime("%Y-%m-%d %H:%M:%S"), "args": ["all_reduce_perf", *argv],
            "env": [f"{k}={v}" for k, v in env.items()], "nccl_version": code,
            "config": {"nthreads": 1, "ngpus": ngpus, "minimum_bytes": lo, "maximum_bytes": hi,
                       "warmup_iters": warmup, "iterations": iters, "aggregated_iterations": 1, "validation": check,
                       "graph": 0, "devices": [{"rank": r, "group": 0, "pid": os.getpid(), "hostname": "standin",
                                                "device": r, "device_hex": f"0000:{0x18 + r:02x}:00",
                                                "device_info": "Stand-in GPU"} for r in range(ngpus)]},
            "results": [{"size": s, "count": c, "type": dtype, "redop": "sum", "root": "    -1",
                         "out_of_place": half(h[0]), "in_place": half(h[1])} for s, c, h in results],
            "out_of_bounds": {"count": errors, "okay": "false" if errors else "true"},
            "average_bus_bandwidth": {"bandwidth": avg, "okay": "false" if errors else "true"},
            "errors": [], "end_time": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(path, "w") as f:
        json.dump(data, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
