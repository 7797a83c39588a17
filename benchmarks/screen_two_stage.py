#!/usr/bin/env python3
"""Relaunches a two-stage sweep (screen, then relaunch the best) and a one-stage sweep (relaunch
what the sampler proposes) spend before they relaunch a set within 2 % of the best one.

Both run ``nccl-tune sweep`` (as ``python -m tuner.cli``) against the independent env-rate test
server; the two-stage sweep screens first with the independent all_reduce_perf stand-in. Server
and stand-in follow one hidden allreduce landscape (tests/servers/landscape.py; the landscape,
the 360-set space and its corrupting setting are those of tests/e2e/test_screen_sweep.py), so
the truth is known: ``true tok/s`` of every relaunched set is computed from the landscape, not
measured (0 for a set that corrupts results: the server then fails the smoke check, the screen
reports wrong values). Per seed:

* ``relaunches to <=2 %``: budgeted relaunches (baseline included, in order) until the first set
  whose true rate is within 2 % of the best set's;
* ``to same set``: until the first relaunch of the set the two-stage sweep found best (None: not
  within the one-stage budget);
* ``screen runs`` and the wall time of the whole sweep.

The two-stage sweep has a budget of 6 relaunches, the one-stage one 40 (``--no-confirm
--no-final-baseline`` for both: those come on top and are the same in both).

Usage: ``.venv/bin/python benchmarks/screen_two_stage.py [--seeds 1,2,3]`` (about 4 min).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.test_screen_sweep import (  # noqa: E402  (the e2e test's landscape and space)
    LANDSCAPE,
    SPACE,
    _env_toml,
    _screen_toml,
    best_rate,
    true_rate,
)
from tests.helpers import envrate_command, run_cli, write_config  # noqa: E402


def _sweep(folder: Path, seed: int, *, screen: bool) -> tuple[pd.DataFrame, int, float]:
    folder.mkdir(parents=True)
    (folder / "space.toml").write_text(SPACE)
    extra = f"seed = {seed}\n" + (_screen_toml(trials=60, top_k=4) if screen else "")
    cfg = write_config(folder / "exp.toml", command=envrate_command(), space=folder / "space.toml",
                       trials=6 if screen else 40, extra_server=_env_toml(LANDSCAPE), extra_sweep=extra,
                       extra_probe='check = { prompt = "What is the capital of France?", expect = "Paris" }',
                       max_tokens=40, repeats=3)
    t0 = time.monotonic()
    res = run_cli("sweep", str(cfg), "--results", str(folder / "r"), "--study", "s", "--no-confirm",
                  "--no-final-baseline", timeout=1800)
    wall = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"sweep failed ({res.returncode}): {res.stderr[-2000:]}")
    df = pd.read_csv(folder / "r" / "s" / "trials.csv")
    df = df[df["kind"].isin(["baseline", "preset", "search"]) & ~df["recheck"]].reset_index(drop=True)
    df["env_d"] = df["env"].map(json.loads)
    df["true"] = df["env_d"].map(true_rate)
    screen_runs = 0
    if screen:
        screen_runs = pd.read_csv(folder / "r" / "s" / "screen.csv")["run"].nunique()
    return df, screen_runs, wall


def _first(df: pd.DataFrame, test) -> int | None:
    for i, row in df.iterrows():
        if row["status"] == "ok" and test(row):
            return int(i) + 1
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3", help="sampler seeds, comma-separated")
    args = ap.parse_args()
    best = best_rate()
    print(f"best set's true rate: {best:.1f} tok/s; within 2 %: >= {0.98 * best:.1f}")
    print(f"{'seed':>4} {'sweep':>10} {'relaunches to <=2 %':>20} {'to same set':>12} {'screen runs':>12} "
          f"{'wall s':>7}  best relaunched set (true tok/s)")
    for seed in (int(s) for s in args.seeds.split(",")):
        with tempfile.TemporaryDirectory(prefix="nccl-tune-bench-") as tmp:
            two, runs2, wall2 = _sweep(Path(tmp) / "two", seed, screen=True)
            one, runs1, wall1 = _sweep(Path(tmp) / "one", seed, screen=False)
        winner = two.loc[two["true"].idxmax()]
        same = winner["env"]
        for name, df, runs, wall in (("two-stage", two, runs2, wall2), ("one-stage", one, runs1, wall1)):
            near = _first(df, lambda r: r["true"] >= 0.98 * best)
            hit = _first(df, lambda r, key=same: r["env"] == key)
            top = df.loc[df["true"].idxmax()]
            print(f"{seed:>4} {name:>10} {near if near is not None else 'none':>20} "
                  f"{hit if hit is not None else 'none':>12} {runs:>12} {wall:>7.0f}  "
                  f"{' '.join(f'{k}={v}' for k, v in sorted(top['env_d'].items()))} ({top['true']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
