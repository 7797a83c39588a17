"""``-J FILE.json`` of the all_reduce_perf stand-in, laid out as nccl-tests 2.19 writes it
(src/util.cu, ``JSON_FILE_VERSION`` 3): keys in the same order, numbers as ``%lf``, booleans as
the strings ``"true"`` / ``"false"`` (``jsonBool`` writes them with ``jsonStr``), the ``root`` as
its ``%6i`` text, and in a one-process run a ``devices`` list holding rank 0 only (its parser
reads the first line of the device block). The file is opened exclusively: when the name exists
``NAME.0``, ``NAME.1``, ... are tried, as ``jsonOutputInit`` does.
"""

from __future__ import annotations

import math
import os
import time

from .ncclconst import version_code

FILE_VERSION = 3
_STAMP = "%Y-%m-%d %H:%M:%S"


def _num(value: float) -> str:
    """``jsonDouble``: ``%lf``, NaN as the string ``"nan"``."""
    return '"nan"' if isinstance(value, float) and math.isnan(value) else f"{value:f}"


def _str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _obj(items: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{_str(k)}:{v}" for k, v in items) + "}"


class JsonReport:
    """Accumulates the report; ``path`` is None when no file could be opened."""

    def __init__(self, wanted: str, argv: list[str], environ: dict, profile):
        self.path: str | None = None
        self._fh = None
        try_path, n = wanted, 0
        while True:
            try:
                self._fh = open(try_path, "x", encoding="utf-8")  # noqa: SIM115 - closed in finish()
                self.path = try_path
                break
            except FileExistsError:
                try_path, n = f"{wanted}.{n}", n + 1
            except OSError:
                print(f"# skipping json output; {try_path} not accessible")
                return
        env = [f"{k}={v}" for k, v in environ.items() if k.startswith(("NCCL_", "CUDA_", "SIM_"))]
        self.items: list[tuple[str, str]] = [
            ("version", str(FILE_VERSION)),
            ("start_time", _str(time.strftime(_STAMP))),
            ("args", "[" + ",".join(_str(a) for a in argv) + "]"),
            ("env", "[" + ",".join(_str(e) for e in env) + "]"),
            ("nccl_version", str(version_code(profile.nccl_version))),
        ]
        self.results: list[str] = []

    def config(self, args, run) -> None:
        """The ``config`` object, with rank 0's device."""
        if self.path is None:
            return
        step = ("step_factor", str(args.stepfactor)) if args.stepfactor > 1 else \
            ("step_bytes", str(args.stepbytes))
        device = _obj([("rank", "0"), ("group", "0"), ("pid", str(os.getpid())),
                       ("hostname", _str(run.host)), ("device", "0"),
                       ("device_hex", _str("0000:18:00")), ("device_info", _str(run.p.gpu_name))])
        self.items.append(("config", _obj([
            ("nthreads", str(args.nthreads)), ("ngpus", str(args.ngpus)),
            ("minimum_bytes", str(args.minbytes)), ("maximum_bytes", str(args.maxbytes)), step,
            ("warmup_iters", str(args.warmup_iters)), ("iterations", str(args.iters)),
            ("aggregated_iterations", str(args.agg_iters)), ("validation", str(args.check)),
            ("graph", str(args.cudagraph)), ("blocking_collectives", _str(str(bool(args.blocking)).lower())),
            ("per_iter_timing", _str(str(bool(args.per_iter_timing)).lower())),
            ("per_iter_skip", str(args.per_iter_skip)), ("parallel_init", _str("false")),
            ("devices", "[" + device + "]")])))

    def start_results(self) -> None:
        """Nothing to write yet; results are collected."""

    def result(self, nbytes: int, count: int, run, halves, check: bool) -> None:
        """One row: both halves (and their per-iteration objects with ``-I 1``)."""

        items = [("size", str(nbytes)), ("count", str(count)), ("type", _str(run.dtype)),
                 ("redop", _str(run.op)), ("root", _str(f"{-1:6d}"))]
        for name, h in zip(("out_of_place", "in_place"), halves, strict=True):
            items.append((name, _obj([("time", _num(h.time_us)), ("alg_bw", _num(h.algbw)),
                                      ("bus_bw", _num(h.busbw)),
                                      ("nwrong", _num(float(h.wrong)) if check else "null")])))
            if run.args.per_iter_timing:
                skip = run.args.per_iter_skip
                st = iter_stats(h.iters[skip:])
                items.append((f"{name}_per_iter", _obj(
                    [("skipped_iterations", str(skip))]
                    + [(k, _num(v)) for k, v in st.items()]
                    + [("times_us", "[" + ",".join(_num(t) for t in h.iters) + "]")])))
        items += [("actual_iterations", str(run.args.iters)), ("experiment_name", _str(""))]
        self.results.append(_obj(items))

    def close(self) -> None:
        """An early end (a failure before the footer): write what exists, then ``end_time``, as
        ``jsonOutputFinalize`` closes every open object."""
        if self._fh is None:
            return
        if self.results:
            self.items.append(("results", "[" + ",".join(self.results) + "]"))
        self.items.append(("end_time", _str(time.strftime(_STAMP))))
        with self._fh as fh:
            fh.write(_obj(self.items))
        self._fh = None

    def finish(self, errors: int, avg_busbw: float) -> None:
        """Footer objects, the errors list and ``end_time``; writes and closes the file."""
        if self._fh is None:
            return
        self.items += [
            ("results", "[" + ",".join(self.results) + "]"),
            ("out_of_bounds", _obj([("count", str(errors)),
                                    ("okay", _str("true" if errors == 0 else "false"))])),
            ("average_bus_bandwidth", _obj([("bandwidth", _num(avg_busbw)),
                                            ("okay", _str("unchecked"))])),
            ("errors", "[]"),
            ("end_time", _str(time.strftime(_STAMP))),
        ]
        with self._fh as fh:
            fh.write(_obj(self.items))
        self._fh = None


def iter_stats(times: list[float]) -> dict:
    """nccl-tests ``computeIterStats`` (src/util.cu): min, max, avg, p50, p95, p99
    (nearest rank), stdev, cv%."""
    s = sorted(times) or [0.0]
    n = len(s)

    def pct(p: int) -> float:
        return s[min(n - 1, (n * p + 99) // 100 - 1)]

    avg = sum(s) / n
    sd = math.sqrt(sum((x - avg) ** 2 for x in s) / n)
    return {"min_us": s[0], "max_us": s[-1], "avg_us": avg, "p50_us": s[n // 2], "p95_us": pct(95),
            "p99_us": pct(99), "stdev_us": sd, "cv_pct": sd / avg * 100 if avg > 0 else 0.0}
