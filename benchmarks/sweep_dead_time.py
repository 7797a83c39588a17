#!/usr/bin/env python3
"""The runner's dead time per trial over a 10-trial simulated sweep.

Runs ``nccl-tune sweep`` (as ``python -m tuner.cli``) on the bundled simulator with the
``fast-tiny`` profile, a 1 s model load and ``--no-final-baseline`` into a temporary results
folder, then reads its trials.csv. Per trial (all times in s):

* ``wall_s``: launch to teardown done; ``load_s``: launch to ready (the server's load time as
  the runner sees it); ``probe_s``: ready check, smoke check, warmup, recorded runs;
  ``teardown_s``: SIGTERM to the process group until it is gone and the port is free.
* dead = wall - load - probe: what the runner adds around a relaunch; split into teardown and
  the rest (spawn, bookkeeping). On the real box each relaunch is ~36 min of load, so dead time
  only matters if it is seconds per trial.
* between trials: start of trial k+1 minus the end of trial k (sampler ask/tell, storage
  writes), outside every trial's wall_s.

Usage: ``.venv/bin/python benchmarks/sweep_dead_time.py`` (about 1 min).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 10
LOAD_TIME_S = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path) -> Path:
    """examples/sim.toml on the fast-tiny profile with a 1 s load."""
    cmd = [sys.executable, "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}",
           "--load-time", str(LOAD_TIME_S)]
    cfg = tmp / "sim-dead-time.toml"
    cfg.write_text(f"""
[server]
command = {json.dumps(cmd)}
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 10

[probe]
prompt = "Count from 1 to 50."
max_tokens = 128
warmup = 1
repeats = 3
stall_timeout_s = 30
check = {{ prompt = "What is the capital of France?", expect = "Paris" }}

[sweep]
space = "{(ROOT / 'search_spaces' / 'default.toml').as_posix()}"
trials = {TRIALS}
seed = 7
""")
    return cfg


def main() -> int:
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-dead-time-") as tmp:
        cfg = write_config(Path(tmp))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "tuner.cli", "sweep", str(cfg), "--results", tmp, "--study", "dead",
                              "--trials", str(TRIALS), "--no-final-baseline"],
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=170)
        sweep_s = time.perf_counter() - t0
        if res.returncode != 0:
            print(res.stdout[-3000:], res.stderr[-3000:], sep="\n")
            print(f"sweep failed with exit status {res.returncode}")
            return 1
        df = pd.read_csv(Path(tmp) / "dead" / "trials.csv").sort_values("trial").reset_index(drop=True)

    for col in ("load_s", "probe_s", "teardown_s"):
        df[col] = df[col].fillna(0.0)  # a failed launch has no load/probe time
    df["dead_s"] = df["wall_s"] - df["load_s"] - df["probe_s"]
    df["other_s"] = df["dead_s"] - df["teardown_s"]
    df["dead_frac"] = df["dead_s"] / df["wall_s"]
    ends = df["started_at"] + df["wall_s"]
    df["gap_before_s"] = df["started_at"] - ends.shift(1)

    print(f"{'trial':>5} {'kind':>8} {'status':>8} {'wall s':>7} {'load s':>7} {'probe s':>7} {'dead s':>7} "
          f"{'teardown s':>10} {'rest s':>7} {'dead/wall':>9} {'gap before s':>12}")
    for _, r in df.iterrows():
        gap = "" if pd.isna(r["gap_before_s"]) else f"{r['gap_before_s']:.3f}"
        print(f"{int(r['trial']):>5} {r['kind']:>8} {r['status']:>8} {r['wall_s']:>7.3f} {r['load_s']:>7.3f} "
              f"{r['probe_s']:>7.3f} {r['dead_s']:>7.3f} {r['teardown_s']:>10.3f} {r['other_s']:>7.3f} "
              f"{r['dead_frac'] * 100:>8.1f}% {gap:>12}")
    d = df["dead_s"]
    print(f"\n{len(df)} relaunches ({int((df['status'] == 'ok').sum())} ok), server load time {LOAD_TIME_S} s "
          f"(load_s includes the simulator's own start-up)")
    extra = df.loc[df["status"] == "ok", "load_s"] - LOAD_TIME_S
    print(f"load_s - configured load time: median {extra.median():.3f} s, max {extra.max():.3f} s "
          "(simulator interpreter start-up, plus readiness polled every 0.25 s: counted as load, not dead time)")
    print(f"dead time per trial: median {d.median():.3f} s, max {d.max():.3f} s, total {d.sum():.2f} s")
    print(f"  teardown:       median {df['teardown_s'].median():.3f} s, max {df['teardown_s'].max():.3f} s, "
          f"{df['teardown_s'].sum() / d.sum() * 100:.0f} % of the dead time")
    print(f"  rest (spawn, bookkeeping): median {df['other_s'].median():.3f} s, max {df['other_s'].max():.3f} s")
    print(f"dead / wall: median {df['dead_frac'].median() * 100:.1f} %, max {df['dead_frac'].max() * 100:.1f} %, "
          f"overall {d.sum() / df['wall_s'].sum() * 100:.1f} %")
    gaps = df["gap_before_s"].dropna()
    if not gaps.empty:
        print(f"between trials (outside wall_s: sampler, storage): median {gaps.median():.3f} s, max {gaps.max():.3f} s")
    print(f"sweep command: {sweep_s:.1f} s in all, sum of wall_s {df['wall_s'].sum():.1f} s "
          f"(the rest is CLI start-up, between-trial work and the report); elapsed {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
