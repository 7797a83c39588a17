#!/usr/bin/env python3
"""What many workers on one PostgreSQL study cost the storage: queries per relaunch, heartbeat
traffic, connections, time in storage calls, and the sampler's time with many running trials.

Part 1 (``--workers N``, default 20): a throwaway PostgreSQL server (tests/pgserver.py), one
study, N ``nccl-tune sweep`` workers started together on one machine, each with its own
independent test server (tests/servers/envrate_server.py, ENVRATE_LOAD_S = ``--load-s``) on its
own port, the default search space, a budget of ``--trials`` relaunches. Each worker runs
``tuner.cli.main`` in this script's ``--worker`` mode, which counts every SQL statement its
SQLAlchemy engine sends (an ``Engine`` event listener), the heartbeat thread's apart, and the
time spent in each :class:`tuner.study.storage.StudyStore` call, and writes them to a JSON
file at exit. The parent samples ``pg_stat_activity`` for the connections held. Printed: the
relaunches, statements per relaunch (all and by the heartbeat), the connections at peak, the
time per storage call, and the gap between one relaunch's end and the worker's next one.

Part 2 (always): the sampler alone, in this process: a study on the same server holding C
complete and R running trials of the default space; the time of one ``ask`` plus its
suggestions (TPE, multivariate, constant liar: what every proposal costs) and of one
``StudyStore.records()`` (what the runner reads several times per relaunch).

Usage: ``.venv/bin/python benchmarks/storage_scale.py [--workers 20] [--trials 60] [--load-s 5]``
(a few minutes on 2 cores; ``--workers 0`` runs part 2 only).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# -- worker mode: the real CLI, instrumented ---------------------------------------------------

def worker(out: str, argv: list[str]) -> int:
    """Run ``nccl-tune ARGV`` counting SQL statements and timing StudyStore calls; write the
    counts to ``out`` at exit."""
    import sqlalchemy

    from tuner.cli import main
    from tuner.study import storage

    counts: dict[str, Any] = {"statements": 0, "heartbeat_statements": 0, "calls": defaultdict(lambda: [0, 0.0, 0])}

    @sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "before_cursor_execute")
    def _count(*_args: Any) -> None:
        counts["statements"] += 1
        if threading.current_thread().name == "optuna-heartbeat":
            counts["heartbeat_statements"] += 1

    for name in ("ask", "ask_fixed", "start", "finish", "tell_known", "drop", "records", "pending_params",
                 "fail_stale", "silent_running", "undecided", "info", "update_info", "running"):
        original = getattr(storage.StudyStore, name)

        def timed(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            t0, n0 = time.perf_counter(), counts["statements"]
            try:
                return _original(*args, **kwargs)
            finally:
                entry = counts["calls"][_name]
                entry[0] += 1
                entry[1] += time.perf_counter() - t0
                entry[2] += counts["statements"] - n0

        setattr(storage.StudyStore, name, timed)

    def dump() -> None:
        Path(out).write_text(json.dumps({**counts, "calls": dict(counts["calls"])}))

    atexit.register(dump)
    return main(argv)


# -- part 1 --------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, trials: int, load_s: float) -> Path:
    cmd = [sys.executable, str(ROOT / "tests" / "servers" / "envrate_server.py"), "--port", "{port}"]
    cfg = tmp / "scale.toml"
    cfg.write_text(f"""
[server]
command = {json.dumps(cmd)}
port = "${{PORT}}"
ready_timeout_s = 120
teardown_grace_s = 5
env = {{ ENVRATE_LOAD_S = "{load_s}" }}

[probe]
max_tokens = 20
warmup = 1
repeats = 2
stall_timeout_s = 30

[sweep]
space = "{(ROOT / 'search_spaces' / 'default.toml').as_posix()}"
trials = {trials}
""")
    return cfg


def connections(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid()").fetchone()
    return int(row[0]) if row else 0


def part1(url: str, workers: int, trials: int, load_s: float, tmp: Path) -> None:
    from tuner.study import StudyStore, open_study

    cfg = write_config(tmp, trials, load_s)
    procs, outs = [], []
    t0 = time.monotonic()
    for i in range(workers):
        out = tmp / f"worker{i}.json"
        outs.append(out)
        # each worker its own GPUs and this run its own registry: workers sharing a GPU are refused
        env = {**os.environ, "PORT": str(free_port()), "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": str(i),
               "NCCL_TUNE_WORKERS_DIR": str(tmp / "workers")}
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(out), "--", "sweep", str(cfg), "--results", str(tmp / f"host{i}"),
             "--study", "scale", "--storage", url, "--no-confirm"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    peak = 0
    try:
        while any(p.poll() is None for p in procs):
            with contextlib.suppress(Exception):  # a missed sample is not essential
                peak = max(peak, connections(url))
            time.sleep(0.5)
    finally:  # stopped early: every worker tears its server down (SIGTERM), as a user would stop them
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait(timeout=60)
    wall = time.monotonic() - t0
    failed = [(p.returncode, p.stderr.read()[-1500:] if p.stderr else "") for p in procs if p.returncode != 0]
    if failed:
        raise SystemExit(f"{len(failed)} workers failed, e.g. ({failed[0][0]}):\n{failed[0][1]}")
    data = [json.loads(o.read_text()) for o in outs]
    records = StudyStore(open_study("scale", url, create=False), {}).records(relaunched_only=False)
    relaunched = [r for r in records if r.kind.relaunched]
    statements = sum(d["statements"] for d in data)
    beats = sum(d["heartbeat_statements"] for d in data)
    print(f"part 1: {workers} workers, budget {trials}, load {load_s} s, default search space")
    kinds = Counter(("baseline re-measure" if r.recheck else r.kind.value) for r in relaunched)
    print(f"  {len(relaunched)} relaunches ({sum(r.ok for r in relaunched)} ok; "
          f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) and {len(records) - len(relaunched)} "
          f"proposals told without a relaunch, in {wall:.0f} s")
    print(f"  SQL statements: {statements} in all, {statements / len(relaunched):.0f} per relaunch "
          f"(the heartbeat thread's: {beats}, {beats / len(relaunched):.1f} per relaunch)")
    print(f"  PostgreSQL connections at peak: {peak} ({peak / workers:.1f} per worker)")
    calls: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for d in data:
        for name, (n, s, q) in d["calls"].items():
            calls[name][0] += n
            calls[name][1] += s
            calls[name][2] += q
    print("  storage calls (all workers): calls per relaunch, SQL statements per call, ms per call, s per relaunch")
    for name, (n, s, q) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
        print(f"    {name:15s} {n / len(relaunched):6.1f} {q / n:6.1f} {1000 * s / n:8.1f} {s / len(relaunched):8.3f}")
    total = sum(v[1] for v in calls.values())
    print(f"  time in storage calls per relaunch: {total / len(relaunched):.2f} s (all workers together)")
    gaps = []
    by_runner: dict[str, list] = defaultdict(list)
    for r in relaunched:
        by_runner[r.runner].append(r)
    for rs in by_runner.values():
        rs.sort(key=lambda r: r.started_at or 0.0)
        gaps += [b.started_at - a.finished_at for a, b in itertools.pairwise(rs) if a.finished_at and b.started_at]
    if gaps:
        print(f"  gap from a relaunch's end to the same worker's next start: median {statistics.median(gaps):.2f} s, "
              f"max {max(gaps):.2f} s (storage, sampler, planning; on {os.cpu_count()} CPU cores shared by "
              f"{workers} workers and their servers)")


# -- part 2 --------------------------------------------------------------------------------------

def heartbeat_cost(store: Any) -> None:
    """SQL statements of one heartbeat and of one stale-trial check, on a study with 100
    running trials (counted by an Engine event listener)."""
    import sqlalchemy

    count = [0]

    def listener(*_args: Any) -> None:
        count[0] += 1

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", listener)
    try:
        trial, _, _ = store.ask()
        backend = store.study._storage._backend
        results = []
        for action in (lambda: backend.record_heartbeat(trial._trial_id), store.fail_stale,
                       lambda: store.silent_running(60)):
            count[0] = 0
            t0 = time.perf_counter()
            action()
            results.append((count[0], 1000 * (time.perf_counter() - t0)))
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", listener)
    (beat_n, beat_ms), (stale_n, stale_ms), (silent_n, silent_ms) = results
    print(f"  with 100 running trials: one heartbeat {beat_n} statements ({beat_ms:.1f} ms), one fail_stale check "
          f"{stale_n} ({stale_ms:.1f} ms), one silent-runner check {silent_n} ({silent_ms:.1f} ms)")


def part2(server_url: str) -> None:
    import optuna

    from tests.pg import fresh_database
    from tuner.inputs.space import load_space
    from tuner.study import StudyStore, open_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    choices = load_space(ROOT / "search_spaces" / "default.toml").choices()
    print(f"part 2: the sampler alone, default space ({len(choices)} names, "
          f"{__import__('math').prod(len(v) for v in choices.values())} points)")
    print(f"  {'complete':>8} {'running':>7} {'ask+suggest ms':>14} {'records() ms':>12}")
    for complete, running in ((25, 0), (25, 20), (25, 100), (100, 0), (100, 100), (300, 100)):
        with fresh_database(server_url) as url:
            store = StudyStore(open_study("s", url, seed=1), choices)
            for i in range(complete):
                trial, _, _ = store.ask()
                store.study.tell(trial, 100.0 + (i % 7))
            for _ in range(running):
                store.ask()
            asks = []
            for _ in range(5):
                t0 = time.perf_counter()
                trial, _, _ = store.ask()
                asks.append(time.perf_counter() - t0)
                store.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            reads = []
            for _ in range(5):
                t0 = time.perf_counter()
                store.records()
                reads.append(time.perf_counter() - t0)
            print(f"  {complete:>8} {running:>7} {1000 * statistics.median(asks):>14.0f} "
                  f"{1000 * statistics.median(reads):>12.1f}")
            if (complete, running) == (100, 100):
                heartbeat_cost(store)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[4:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=20)
    parser.add_argument("--trials", type=int, default=60, help="relaunch budget of the study")
    parser.add_argument("--load-s", type=float, default=5.0, help="each relaunch's load time (s)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-ups below
    from tests.pg import fresh_database
    from tests.pgserver import PgServer

    server = PgServer()
    server_url = server.start()
    try:
        if args.workers:
            with tempfile.TemporaryDirectory(prefix="nccl-tune-scale-") as tmp, fresh_database(server_url) as url:
                part1(url, args.workers, args.trials, args.load_s, Path(tmp))
        part2(server_url)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
