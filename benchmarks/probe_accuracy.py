#!/usr/bin/env python3
"""Accuracy of tuner.measure.run_probe against the reference server run as a separate process.

For each rate (tok/s) and with/without reasoning deltas, starts ``tests/refserver.py`` with
``--rate R --ttft 0.05`` (reasoning: the first quarter of the tokens are ``delta.reasoning``),
probes it with max_tokens N ~ one second of decode (warmup 1, repeats 3) and compares the
median output tok/s with the truth N / (ttft + (N - 1) / R) (vLLM benchmarks/benchmark_serving.py: tokens /
E2E, E2E including TTFT).  Usage: ``.venv/bin/python benchmarks/probe_accuracy.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import refserver  # noqa: E402

from tuner.measure import run_probe  # noqa: E402

RATES = (50.0, 80.0, 500.0, 1000.0, 5000.0)
TTFT = 0.05


def main() -> int:
    t_start = time.perf_counter()
    header = f"{'rate':>7} {'reasoning':>9} {'N':>5} {'truth tok/s':>11} {'measured':>9} {'error %':>8} {'ratio':>7} {'ttft s':>7} {'tpot ms':>8}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for rate in RATES:
        for reasoning in (False, True):
            n = max(8, int(rate))  # ~1 s of decode
            k = n // 4 if reasoning else 0
            proc, url = refserver.spawn("--rate", str(rate), "--ttft", str(TTFT), "--reasoning-tokens", str(k))
            try:
                res = run_probe(url, prompt="Tell me a story.", max_tokens=n, warmup=1, repeats=3)
            finally:
                refserver.kill_process(proc)
            truth = refserver.truth_output_tok_s(n, rate, TTFT)
            meas = res.output_tok_s
            err = (meas / truth - 1) * 100
            worst = max(worst, abs(err))
            print(
                f"{rate:>7.0f} {'yes' if reasoning else 'no':>9} {n:>5} {truth:>11.2f} {meas:>9.2f} "
                f"{err:>+8.3f} {meas / truth:>7.4f} {res.ttft_s:>7.4f} {res.tpot_s * 1000:>8.4f}"
            )
    print(f"\nworst |error| {worst:.3f} %  (true TTFT {TTFT} s; elapsed {time.perf_counter() - t_start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
