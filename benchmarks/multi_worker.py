#!/usr/bin/env python3
"""Wall time of one study run by 3 workers against the same study run by 1 worker.

Starts a throwaway PostgreSQL server (tests/pgserver.py), then for 1 and for 3 workers: a fresh
database, and that many ``nccl-tune sweep`` processes (``python -m tuner.cli``) on one study,
each with its own independent test server (tests/servers/envrate_server.py) on its own port,
from one experiment file whose port is ``${PORT}``. Every relaunch loads for ``--load-s`` s
(ENVRATE_LOAD_S; a real vLLM relaunch is ~36 min), then 1 warm-up and 2 recorded runs of 20
tokens. The budget is ``--trials`` relaunches (baseline included); the confirmation of the
winner and the final baseline re-measure are made as a user's sweep makes them.

Printed per worker count: the wall time from the first start to the last exit, the relaunches
(budgeted, baseline re-measures, confirmations), what each worker launched, and at the end the
ratio of the 3-worker wall time to the 1-worker one (ideal: 1/3, plus the rounds that cannot be
shared: the first baseline, and the confirmation followed by its baseline).

Usage: ``.venv/bin/python benchmarks/multi_worker.py [--trials 9] [--load-s 2]`` (~1.5 min
with the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg import fresh_database  # noqa: E402
from tests.pgserver import PgServer  # noqa: E402
from tuner.planning import counts_in_budget  # noqa: E402
from tuner.record import Kind, Status  # noqa: E402
from tuner.study import StudyStore, open_study  # noqa: E402

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_MAX_NCHANNELS]
values = ["1", "2", "4", "8"]
[variables.CUDA_DEVICE_MAX_CONNECTIONS]
values = ["1", "32"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, trials: int, load_s: float) -> Path:
    space = tmp / "space.toml"
    space.write_text(SPACE)
    cmd = [sys.executable, str(ROOT / "tests" / "servers" / "envrate_server.py"), "--port", "{port}"]
    cfg = tmp / "multi.toml"
    cfg.write_text(f"""
[server]
command = {json.dumps(cmd)}
port = "${{PORT}}"
ready_timeout_s = 60
teardown_grace_s = 5
env = {{ ENVRATE_LOAD_S = "{load_s}" }}

[probe]
max_tokens = 20
warmup = 1
repeats = 2
stall_timeout_s = 10

[sweep]
space = "{space}"
trials = {trials}
""")
    return cfg


def run(workers: int, cfg: Path, url: str, tmp: Path, timeline: bool = False) -> tuple[float, float]:
    """Run ``workers`` sweeps of one study at once; print what they did; return the wall time
    (s, first start to last exit) and the relaunch span (s, first relaunch's start to the last
    one's end: without the processes' start-up and their report writing)."""
    t0 = time.monotonic()
    procs = []
    for i in range(workers):
        # each worker its own GPUs and this run its own registry: workers sharing a GPU are refused
        env = {**os.environ, "PORT": str(free_port()), "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": str(i),
               "NCCL_TUNE_WORKERS_DIR": str(tmp / "workers")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "sweep", str(cfg), "--results", str(tmp / f"w{workers}-host{i}"),
             "--study", "bench", "--storage", url], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"a worker failed ({p.returncode}):\n{err[-3000:]}")
    wall = time.monotonic() - t0
    records = [r for r in StudyStore(open_study("bench", url, create=False), {}).records() if r.kind.relaunched]
    budgeted = [r for r in records if counts_in_budget(r)]  # every relaunch counts (tuner.planning.budget)
    firsts = [r.set_key for r in records if r.kind in (Kind.PRESET, Kind.SEARCH) and r.status is not Status.INTERRUPTED]
    by_runner = Counter(r.runner.rpartition(":")[2] for r in records)
    kinds = Counter(("re-measure" if r.recheck else r.kind.value) for r in records)
    span = max((r.finished_at or 0.0) for r in records) - min((r.started_at or 0.0) for r in records)
    print(f"{workers} worker{'s' if workers > 1 else ''}: {wall:6.1f} s wall, {span:6.1f} s of relaunches, "
          f"{len(records)} relaunches "
          f"({len(budgeted)} budgeted; {', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
          f"per worker {sorted(by_runner.values(), reverse=True)}; sets measured twice: {len(firsts) - len(set(firsts))}")
    if timeline:
        start = min(r.started_at or 0.0 for r in records)
        for r in sorted(records, key=lambda r: r.started_at or 0.0):
            print(f"  trial {r.trial:3d} worker {r.runner.rpartition(':')[2]:>7} {r.kind.value:9s}"
                  f"{' re-measure' if r.recheck else '':11s} {(r.started_at or start) - start:6.1f} s +{r.wall_s or 0:5.1f} s")
    return wall, span


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=9, help="relaunch budget, baseline included")
    parser.add_argument("--load-s", type=float, default=2.0, help="each relaunch's load time (s)")
    parser.add_argument("--timeline", action="store_true", help="print every relaunch's start and duration")
    args = parser.parse_args()
    server = PgServer()
    server_url = server.start()
    try:
        with tempfile.TemporaryDirectory(prefix="nccl-tune-multi-") as tmp_name:
            tmp = Path(tmp_name)
            cfg = write_config(tmp, args.trials, args.load_s)
            walls = {}
            for workers in (1, 3):
                with fresh_database(server_url) as url:
                    walls[workers] = run(workers, cfg, url, tmp, args.timeline)
    finally:
        server.stop()
    (wall1, span1), (wall3, span3) = walls[1], walls[3]
    print(f"3 workers / 1 worker with --trials {args.trials}, --load-s {args.load_s}: wall time {wall3 / wall1:.2f}, "
          f"relaunch span {span3 / span1:.2f} (ideal 0.33)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
