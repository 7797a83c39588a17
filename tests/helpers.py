"""Test helpers shared by every test module: free ports, experiment files around the independent
test servers, running the CLI (in process or as a real process), finding server processes."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build`` fills once for the whole run, whichever xdist worker
    asks first (the others wait on a lock, then read it): pytest-xdist's own recipe for a
    fixture made once for every worker, with fcntl for its lock. A module-scoped fixture alone is
    made again on each worker that runs one of the module's tests."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # what every worker's basetemp is under
    folder = root / f"once-{name}"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def free_port() -> int:
    """A TCP port nothing listens on right now (bound to 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The correctness gate's answer length in the tests' nights (the product's 256 would add
#: about 15 s of answers to every launch of a ``check``, which runs the gate).
TEST_GATE_TOKENS = 32


def write_config(path: Path, *, command: list[str], space: Path, trials: int = 4, port: int | None = None,
                 max_tokens: int = 60, repeats: int = 3, extra_server: str = "", extra_probe: str = "",
                 extra_sweep: str = "", ready_timeout_s: float = 20, stall_timeout_s: float = 5,
                 baseline_every: int = 0) -> Path:
    """Write an experiment TOML for a test server; returns its path. ``trials`` counts every
    relaunch (the checks' slots included); ``baseline_every`` is 0 unless a test asks for
    re-measures (the product's default is 5: these nights are counted by their sets). Unless
    ``extra_sweep`` holds a ``[gates]`` table, the correctness gate's answers are 32 tokens
    (:data:`TEST_GATE_TOKENS`) where a check turns the gate on."""
    port = port or free_port()
    if "[gates]" not in extra_sweep:
        extra_sweep += f"\n[gates]\nmax_tokens = {TEST_GATE_TOKENS}\n"
    cmd = ", ".join(f'"{a}"' for a in command)
    path.write_text(f"""
[server]
command = [{cmd}]
port = {port}
ready_timeout_s = {ready_timeout_s}
teardown_grace_s = 3
{extra_server}
[probe]
prompt = "Count from 1 to 50."
max_tokens = {max_tokens}
warmup = 1
repeats = {repeats}
stall_timeout_s = {stall_timeout_s}
{extra_probe}
[sweep]
space = "{space}"
trials = {trials}
baseline_every = {baseline_every}
{extra_sweep}
""")
    return path


def example_text(name: str, *, gates: bool = False) -> str:
    """The text of ``examples/NAME`` for a test's night: its soak (``sweep.soak_minutes``) and
    its correctness gate (``[gates] answers``) off unless ``gates``, since they add about 45 s of
    sustained load and 2 s of answers a launch to a night that tests something else (the gates'
    own tests keep them)."""
    text = (ROOT / "examples" / name).read_text()
    if not gates:
        text = re.sub(r"^soak_minutes = .*$", "soak_minutes = 0", text, flags=re.M)
        text = re.sub(r"^answers = true", "answers = false", text, flags=re.M)
    return text


def envrate_command() -> list[str]:
    """argv of the independent env-dependent test server (tests/servers/envrate_server.py)."""
    return [sys.executable, str(SERVERS / "envrate_server.py"), "--port", "{port}"]


def standin_command(*extra: str) -> list[str]:
    """argv of the independent all_reduce_perf stand-in (tests/servers/allreduce_standin.py) for a
    ``[screen] command``: every size from ``{min_size}`` to ``{max_size}`` by factors of 2."""
    return [sys.executable, str(SERVERS / "allreduce_standin.py"), "-b", "{min_size}", "-e", "{max_size}", "-f", "2",
            "-g", "8", "-d", "bfloat16", *extra]


#: The subcommands that write a study's report, and so draw its figures unless told not to.
REPORTING = ("sweep", "check", "report")


def night_args(args: tuple[str, ...], figures: bool) -> list[str]:
    """``args`` with ``--no-figures`` added to a command that writes a report, unless
    ``figures``: drawing is most of a night's CPU time (about 1.7 s of a short night's 2 s on
    these machines), and most tests read the numbers and words, not the pictures. The tests
    that look at a figure ask for it (``figures=True``)."""
    if figures or not args or args[0] not in REPORTING or "--no-figures" in args:
        return list(args)
    return [*args, "--no-figures"]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None,
            figures: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m tuner.cli ARGS`` as a real process (figures as :func:`night_args` says);
    returns the completed process."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONPATH", str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuner.cli", *night_args(args, figures)], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or ROOT)


def assert_rate_from_e2e(df, ceiling_tok_s: float) -> None:
    """Every row's output tok/s is the median of its runs' completion tokens over E2E latency,
    never above ``ceiling_tok_s`` (the server's own rate). How fast the machine is sets the value,
    so no test bounds it from below (CI runs on 2 busy cores); the definition and the ceiling hold
    anywhere."""
    for index, row in df.iterrows():
        trial = row.get("trial", index)
        rate = float(row["output_tok_s"])
        assert 0 < rate < ceiling_tok_s, (trial, rate)
        runs = json.loads(row["output_tok_s_runs"]) if isinstance(row["output_tok_s_runs"], str) else row["output_tok_s_runs"]
        assert rate == pytest.approx(statistics.median(runs)), (trial, rate, runs)
        # tokens over the median E2E is the same rate for an odd count of runs; for an even
        # count it is the harmonic mean of the middle two (under load they part by several %),
        # which still lies between the runs' rates
        derived = row["completion_tokens"] / row["e2e_s"]
        assert min(runs) * (1 - 1e-9) <= derived <= max(runs) * (1 + 1e-9), (trial, derived, runs)


def processes_with(text: str) -> list[psutil.Process]:
    """Live processes whose command line contains ``text`` (zombies excluded)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and text in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def server_processes(config: Path) -> list[psutil.Process]:
    """Live processes of the test server started for ``config`` (matched by its port), so
    tests running side by side never see each other's servers."""
    import tomllib

    port = tomllib.loads(config.read_text())["server"]["port"]
    return [p for p in processes_with("--port") if f"--port {port}" in " ".join(p.info["cmdline"] or [])]


def start_cli(*args: str, env: dict[str, str] | None = None, stdout=subprocess.PIPE,
              figures: bool = False) -> subprocess.Popen:
    """Start ``python -m tuner.cli ARGS`` in the background (stderr piped, text mode; figures
    as :func:`night_args` says)."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONPATH", str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", *night_args(args, figures)], cwd=ROOT, env=full_env,
                            stdout=stdout, stderr=subprocess.PIPE, text=True)


def wait_for_log(study_dir: Path, number: int, needle: str, timeout: float = 60) -> None:
    """Wait until trial ``number``'s server log contains ``needle``; AssertionError on timeout."""
    import time

    log = study_dir / "logs" / f"trial-{number:04d}.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{log} never showed {needle!r}")


def alive_pids(pids) -> list[int]:
    """The pids of ``pids`` that are still running (zombies count as gone)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


def cli(*args: str, env: dict[str, str] | None = None, figures: bool = False) -> subprocess.CompletedProcess:
    """Run ``nccl-tune ARGS`` in this process (``tuner.cli.main``), capturing stdout and stderr;
    returns a CompletedProcess like :func:`run_cli`. For tests that send no signal to the runner:
    the servers it launches are still real processes. ``env`` replaces os.environ meanwhile;
    figures as :func:`night_args` says."""
    import contextlib
    import io

    from tuner.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(night_args(args, figures))
            except SystemExit as exc:  # argparse errors
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        if env is not None:
            os.environ.clear()
            os.environ.update(saved)
    return subprocess.CompletedProcess(["nccl-tune", *args], code, out.getvalue(), err.getvalue())


# -- trial records as the sweep writes them (report and notebook tests) ----------------------

T0 = 1_760_000_000.0  # Unix s: when the sample study started


def trial_record(trial: int, kind: str = "preset", runs: list[float] | None = None, *, status: str = "ok",
                 env: dict[str, str] | None = None, concurrency: dict[int, float] | None = None, **fields):
    """A real ``TrialRecord`` as the sweep writes it: median tok/s of ``runs`` when ok, relaunch
    ``trial`` started 2400 s after the previous one, and a bench level per ``concurrency`` item
    (C -> aggregate tok/s)."""
    from tuner.record import Kind, LevelResult, Status, TrialRecord

    runs = list(runs or [])
    ok = status == "ok"
    values = {"output_tok_s": statistics.median(runs) if ok and runs else None, "output_tok_s_runs": runs,
              "started_at": T0 + 2400 * trial, "load_s": 2160.0, "probe_s": 95.0, "teardown_s": 12.0,
              "wall_s": 2290.0 if ok else 900.0, "log": f"results/s/logs/trial-{trial:04d}.log",
              "concurrency": [LevelResult(concurrency=c, ok=4 * c, total=4 * c, wall_s=10.0, aggregate_tok_s=t)
                              for c, t in (concurrency or {}).items()]}
    values.update(fields)
    return TrialRecord(trial=trial, kind=Kind(kind), status=Status(status), env=dict(env or {}), **values)


def sample_records():
    """A night of ten relaunches and one sampler duplicate: the baseline, a preset in the noise,
    a crash, a clearly faster and a clearly slower preset, an interrupted search trial and its
    retry, a hang, the baseline re-measure, and a search trial still running."""
    conc = {1: 70.0, 2: 132.0, 4: 240.0, 8: 410.0}
    tuned = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216",
             "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return [
        trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6], concurrency=conc),
        trial_record(1, "preset", [70.0, 70.9, 69.5, 70.4], env=tuned, preset="deployment-tuned",
                     concurrency={1: 70.2, 2: 131.0, 4: 236.0, 8: 395.0}),
        trial_record(2, "preset", status="crashed", env={"NCCL_PROTO": "LL128"}, preset="ll128",
                     cause="exited with code 1: NCCL WARN [LL128] protocol disabled"),
        trial_record(3, "preset", [80.2, 80.9, 81.4, 80.5], env={"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"},
                     preset="ll-8ch", concurrency={1: 80.6, 2: 150.0, 4: 262.0, 8: 402.0}),
        trial_record(4, "preset", [42.1, 42.6, 41.9, 42.4], env={"NCCL_PROTO": "Simple"}, preset="simple",
                     concurrency={1: 42.3, 2: 83.0, 4: 160.0, 8: 300.0}),
        trial_record(5, "search", status="interrupted", env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
                     cause="the runner died mid-trial", retried_by_trial=6),
        trial_record(6, "search", [69.0, 71.0, 70.2, 70.8], env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
                     retry_of_trial=5, concurrency={1: 70.4, 2: 128.0, 4: 230.0, 8: 380.0}),
        trial_record(7, "search", status="hung", env={"NCCL_MAX_NCHANNELS": "2"}, cause="no token for 120 s"),
        trial_record(8, "baseline", [71.0, 71.9, 70.8, 71.5], recheck=True,
                     concurrency={1: 71.2, 2: 133.0, 4: 243.0, 8: 415.0}),
        trial_record(9, "search", status="running", env={"NCCL_BUFFSIZE": "4194304"}, wall_s=None),
        trial_record(10, "duplicate", status="skipped", env={"NCCL_PROTO": "Simple"}, duplicate_of=4),
    ]


# -- stores an earlier nccl-tune wrote (tests/fixtures/stores/) ---------------------------------

STORES = ROOT / "tests" / "fixtures" / "stores"


def old_store(study: str, results: Path, *, commit: str = "f0e244d") -> Path:
    """Unpack the study ``study`` that nccl-tune at ``commit`` wrote (tests/fixtures/stores/,
    see its README) into ``results/<study>/``: its ``study.db`` and, for a screen study, its
    ``screen.csv``. Returns that folder; the old trials.csv and report.md stay in the fixture."""
    import gzip
    import shutil

    src = STORES / commit / study
    out = results / study
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.db").write_bytes(gzip.decompress((src / "study.db.gz").read_bytes()))
    if (src / "screen.csv").exists():
        shutil.copy(src / "screen.csv", out / "screen.csv")
    return out
