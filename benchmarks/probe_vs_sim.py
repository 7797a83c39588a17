#!/usr/bin/env python3
"""The probe's error against the simulator's true rate at 50, 500 and 5000 tok/s.

For each target rate R a temporary simulator profile (extends ``fast-tiny``) is written with
``compute_ms = 1000 / R`` and no allreduce in the decode step (``allreduces_per_layer = 0``),
so the cost model's decode step is exactly 1/R s, and a fixed TTFT (``prefill_fixed_ms``,
``prefill_ms_per_token = 0``). ``python -m tuner.sim serve --port 0 --noise 0 --launch-noise 0``
serves it; its ``SIM READY tok_s=<rate>`` line gives the decode rate (1000 / step_ms, without
TTFT). The sim sends token i at ``t0 + prefill + i * step`` (absolute schedule), so the truth
for the figure users quote (output tokens / E2E, vLLM benchmarks/benchmark_serving.py) is

    truth = N / (ttft + (N - 1) / rate)        N = max_tokens (ignore_eos: always N tokens)

``tuner.measure.run_probe`` (warmup 1, repeats 5) measures it; N is chosen for ~2 s of decode.
Usage: ``.venv/bin/python benchmarks/probe_vs_sim.py`` (about 45 s).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.measure import run_probe  # noqa: E402

TARGETS = (50.0, 500.0, 5000.0)  # tok/s
TTFT_MS = 20.0  # true time to first token (ms)
DECODE_S = 2.0  # ~seconds of decode per request
WARMUP, REPEATS = 1, 5
PROMPT = "Count from 1 to 50."
READY_RE = re.compile(r"SIM READY tok_s=([0-9.]+) .*url=(\S+)")


def write_profile(path: Path, rate: float) -> None:
    path.write_text(f"""extends = "fast-tiny"
name = "probe-bench-{rate:g}"
model = "sim/probe-bench"
compute_ms = {1000.0 / rate!r}
allreduces_per_layer = 0
prefill_fixed_ms = {TTFT_MS!r}
prefill_ms_per_token = 0.0
max_model_len = 65536
""")


def start_sim(profile: Path, log: Path) -> tuple[subprocess.Popen, float, str]:
    """Start the simulator in its own session; returns (process, decode tok/s, base URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SIM_", "CUDA_DEVICE_MAX"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner.sim", "serve", "--port", "0", "--profile", str(profile),
             "--load-time", "0", "--noise", "0", "--launch-noise", "0", "--workers", "0"],
            stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY_RE.search(log.read_text(errors="replace"))
        if m:
            return proc, float(m.group(1)), m.group(2)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    stop_sim(proc)
    raise RuntimeError(f"simulator did not become ready:\n{log.read_text(errors='replace')[-2000:]}")


def stop_sim(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    t_start = time.perf_counter()
    header = (f"{'target':>7} {'N':>6} {'sim rate':>9} {'truth tok/s':>11} {'measured':>9} {'error %':>8} "
              f"{'ratio':>7} {'spread %':>8} {'TTFT ms true/meas':>17} {'TPOT ms true/meas':>17} {'TPOT err %':>10}")
    lines, worst = [], 0.0
    with tempfile.TemporaryDirectory(prefix="probe-vs-sim-") as tmp:
        for target in TARGETS:
            profile = Path(tmp) / f"rate-{target:g}.toml"
            write_profile(profile, target)
            proc, rate, url = start_sim(profile, Path(tmp) / f"sim-{target:g}.log")
            n = max(16, int(target * DECODE_S))
            try:
                res = run_probe(url, prompt=PROMPT, max_tokens=n, warmup=WARMUP, repeats=REPEATS, stall_timeout_s=30)
            finally:
                stop_sim(proc)
            assert all(r.completion_tokens == n for r in res.runs), [r.completion_tokens for r in res.runs]
            truth = n / (TTFT_MS / 1000.0 + (n - 1) / rate)
            meas = res.output_tok_s
            err = (meas / truth - 1) * 100
            worst = max(worst, abs(err))
            per_run = [r.output_tok_s for r in res.runs]
            spread = (max(per_run) - min(per_run)) / meas * 100
            tpot_err = (res.tpot_s * rate - 1) * 100
            lines.append(
                f"{target:>7.0f} {n:>6} {rate:>9.3f} {truth:>11.3f} {meas:>9.3f} {err:>+8.3f} {meas / truth:>7.4f} "
                f"{spread:>8.3f} {TTFT_MS:>8.2f}/{res.ttft_s * 1000:<8.2f} "
                f"{1000 / rate:>8.4f}/{res.tpot_s * 1000:<8.4f} {tpot_err:>+10.4f}")
    print(header)
    print("-" * len(header))
    print("\n".join(lines))
    print(f"\nworst |error| {worst:.3f} %  (sim noise 0; warmup {WARMUP}, repeats {REPEATS}; "
          f"truth = N / (TTFT + (N-1)/rate); elapsed {time.perf_counter() - t_start:.1f} s)")
    print("spread %: (max - min) / median of the recorded runs.  TPOT err %: measured (E2E - TTFT) / (N - 1)\n"
          "against the sim's step 1/rate, the decode timing alone.  Measured TTFT above the true TTFT is\n"
          "time the simulator spends on a request before its token schedule starts (accept, parse, planning\n"
          "the N tokens: ~1-5 ms, more at large N); a plain http.client request sees the same excess.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
