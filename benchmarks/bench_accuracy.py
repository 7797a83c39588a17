#!/usr/bin/env python3
"""Accuracy of tuner.measure.bench.run_bench against the reference server run as a separate process.

Independent pacing (refserver default): each stream gets R tok/s, so with C workers x
REQUESTS back-to-back requests of N tokens the true aggregate is C x N / (ttft + (N - 1) / R).
Shared capacity (``--shared-capacity``, ttft 0): R tok/s in total; with C >= 2 the server is
never idle, so the true wall is (C x REQUESTS x N - 1) / R; with C = 1 it is REQUESTS x
(N - 1) / R.  Usage: ``.venv/bin/python benchmarks/bench_accuracy.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import refserver  # noqa: E402

from tuner.measure.bench import format_table, run_bench  # noqa: E402

LEVELS = [1, 2, 4, 8]
REQUESTS = 2
TTFT = 0.02


def _row(mode: str, rate: float, lv, truth: float) -> str:
    err = (lv.aggregate_tok_s / truth - 1) * 100
    return (
        f"{mode:>11} {rate:>7.1f} {lv.concurrency:>3} {lv.ok:>3}/{lv.total:<3} {truth:>11.2f} "
        f"{lv.aggregate_tok_s:>9.2f} {err:>+8.3f} {lv.aggregate_tok_s / truth:>7.4f} {lv.latency_p50_s:>7.3f}"
    ), abs(err)


def main() -> int:
    t_start = time.perf_counter()
    header = f"{'mode':>11} {'rate':>7} {'C':>3} {'ok/total':>7} {'truth tok/s':>11} {'measured':>9} {'error %':>8} {'ratio':>7} {'p50 s':>7}"
    rows, worst, example = [], 0.0, None
    for rate in (50.0, 81.4, 200.0):
        n = int(rate)  # ~1 s per request
        proc, url = refserver.spawn("--rate", str(rate), "--ttft", str(TTFT))
        try:
            levels = run_bench(url, concurrency=LEVELS, requests=REQUESTS, max_tokens=n)
        finally:
            refserver.kill_process(proc)
        example = example or levels
        for lv in levels:
            truth = lv.concurrency * n / (TTFT + (n - 1) / rate)
            line, e = _row("independent", rate, lv, truth)
            rows.append(line)
            worst = max(worst, e)
    rate, n = 400.0, 100
    proc, url = refserver.spawn("--rate", str(rate), "--shared-capacity")
    try:
        levels = run_bench(url, concurrency=LEVELS, requests=REQUESTS, max_tokens=n)
    finally:
        refserver.kill_process(proc)
    for lv in levels:
        total = lv.concurrency * REQUESTS * n
        wall = REQUESTS * (n - 1) / rate if lv.concurrency == 1 else (total - 1) / rate
        line, e = _row("shared", rate, lv, total / wall)
        rows.append(line)
        worst = max(worst, e)
    print(header)
    print("-" * len(header))
    print("\n".join(rows))
    print(f"\nworst |error| {worst:.3f} %  (REQUESTS={REQUESTS} per worker; elapsed {time.perf_counter() - t_start:.1f} s)")
    print("\nformat_table for the independent 50 tok/s server:\n")
    print(format_table(example))
    return 0


if __name__ == "__main__":
    sys.exit(main())
