#!/usr/bin/env python3
"""The night's clock against the night: estimated / actual wall time of a simulated 12-relaunch night.

Runs ``nccl-tune sweep examples/sim.toml --trials 12`` (as ``python -m tuner.cli``, on a free
port, into a temporary results folder), then holds the clock (:mod:`tuner.planning.clock`)
against what the night measured (all times in s):

* ``before the night``: what ``--dry-run`` prints, from the config alone (``server.expected_load_s``,
  the probe's tokens at ``probe.expected_tok_s``; the teardown and the time between relaunches
  not known yet), for the relaunches the night then made;
* ``after k relaunches``: the clock the sweep prints before relaunch k + 1, from the phases its
  first k relaunches measured, for the relaunches left;
* ``actual``: the first relaunch's start to the last one's end (``started_at``, ``finished_at``
  of the stored records), or from the end of relaunch k; ratio = estimated / actual.

``--concurrency 1,4,16`` adds ``probe.concurrency`` (the bench after each probe: the
estimate counts its requests). Usage: ``.venv/bin/python benchmarks/plan_clock.py`` (about 3 min).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.inputs.config import load_config  # noqa: E402
from tuner.planning import relaunch_time  # noqa: E402
from tuner.study.storage import StudyStore, default_storage, open_study  # noqa: E402

TRIALS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, concurrency: str) -> Path:
    """examples/sim.toml as shipped (its clock hints too) on a free port; with ``concurrency`` its levels."""
    text = (ROOT / "examples" / "sim.toml").read_text()
    text = re.sub(r"^port = \d+", f"port = {free_port()}", text, flags=re.M)
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT / "search_spaces" / "default.toml"}"')
    if concurrency:
        text = text.replace("[probe]\n", f"[probe]\nconcurrency = [{concurrency}]\n")
    cfg = tmp / "sim.toml"
    cfg.write_text(text)
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="", help="probe.concurrency levels, e.g. 1,4,16 (default: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-clock-") as tmp:
        cfg_path = write_config(Path(tmp), args.concurrency)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        t0 = time.time()
        res = subprocess.run([sys.executable, "-m", "tuner.cli", "sweep", str(cfg_path), "--results", tmp, "--study",
                              "clock", "--trials", str(TRIALS)], capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=1800)
        process_s = time.time() - t0
        if res.returncode != 0:
            print(res.stderr[-3000:], file=sys.stderr)
            return 1
        cfg = load_config(cfg_path)
        store = StudyStore(open_study("clock", default_storage(Path(tmp) / "clock"), create=False), {})
        made = sorted((r for r in store.records() if r.started_at and r.finished_at), key=lambda r: r.started_at or 0)
    n = len(made)
    end = max(r.finished_at or 0.0 for r in made)
    start = made[0].started_at or 0.0
    rows = []
    before = relaunch_time(cfg)
    if before.seconds is not None:
        rows.append(("before the night (the dry run's)", n, n * before.seconds, end - start))
    for k in range(1, n):
        per = relaunch_time(cfg, made[:k])
        if per.seconds is not None:
            rows.append((f"after {k} relaunch{'es' if k != 1 else ''}", n - k, (n - k) * per.seconds,
                         end - (made[k - 1].finished_at or 0.0)))
    levels = f", probe.concurrency = [{args.concurrency}]" if args.concurrency else ""
    print(f"# examples/sim.toml{levels}: {n} relaunches, --trials {TRIALS}; process wall {process_s:.1f} s "
          f"(start-up and the report included), relaunch span {end - start:.1f} s")
    print(f"# the night's clock line at the start: {_clock_line(res.stderr)}")
    print(f"{'estimate':36} {'left':>4} {'estimated s':>11} {'actual s':>9} {'ratio':>6}")
    for what, left, est, actual in rows:
        print(f"{what:36} {left:>4} {est:>11.1f} {actual:>9.1f} {est / actual:>6.2f}")
    final = relaunch_time(cfg, made)
    print(f"# measured at the end: {final.words()}")
    return 0


def _clock_line(stderr: str) -> str:
    lines = [line.split("clock: ", 1)[1] for line in stderr.splitlines() if "clock: " in line]
    return lines[-1] if lines else "(none)"


if __name__ == "__main__":
    sys.exit(main())
