"""Several runners on one study in a real PostgreSQL server (tests/pg.py), each a real
``nccl-tune sweep`` process with its own independent test server (tests/servers/envrate_server.py)
on its own port, from one experiment file whose port is ``${PORT}``: one runner SIGKILLed in
the middle of a trial, and two runners of different studies side by side on one host. Each runner
gets its own CUDA_VISIBLE_DEVICES, as on a real box (runners sharing a GPU are refused).

Heartbeats every second and a 3 s grace period (``NCCL_TUNE_HEARTBEAT_S``/``NCCL_TUNE_GRACE_S``),
short loads and few tokens, so the whole study takes seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import envrate_command, free_port, processes_with, run_cli, start_cli, write_config
from tuner.planning import counts_in_budget
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.server.gpu import NO_GPU
from tuner.study.storage import StudyStore, open_study

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_MAX_NCHANNELS]
values = ["1", "2", "4", "8"]
[variables.CUDA_DEVICE_MAX_CONNECTIONS]
values = ["1", "32"]
"""


def _config(tmp_path: Path, trials: int, load_s: float) -> Path:
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=trials, max_tokens=20,
                       repeats=2, port=1, extra_server=f'env = {{ ENVRATE_LOAD_S = "{load_s}" }}')
    cfg.write_text(cfg.read_text().replace("port = 1\n", 'port = "${PORT}"\n'))  # one file for every runner
    return cfg


def _worker_env(port: int, gpus: str) -> dict[str, str]:
    """A worker's environment: its port and its own GPUs (workers on one host sharing a GPU are refused)."""
    return {**os.environ, "PORT": str(port), "CUDA_VISIBLE_DEVICES": gpus, "NCCL_TUNE_HEARTBEAT_S": "1",
            "NCCL_TUNE_GRACE_S": "3"}


def _servers(port: int) -> list:
    # the command line processes_with read: a server gone since then is not asked again
    return [p for p in processes_with("--port") if f"--port {port}" in " ".join(p.info["cmdline"] or [])]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _mid_trial(results: Path, study: str, port: int, after: int) -> bool:
    """True when the runner of ``port`` is in a relaunch other than its first ``after`` ones,
    with its server up (its runner file names the server's pid)."""
    logs = sorted((results / study / "logs").glob("trial-*.log"))
    if len(logs) <= after or "SAW_ENV" not in logs[-1].read_text():
        return False
    files = list((results / study / "runners").glob(f"*-port{port}.json"))
    return bool(files) and '"pid"' in files[0].read_text() and '"server"' in files[0].read_text()


def _records(url: str, study: str) -> list[TrialRecord]:
    return StudyStore(open_study(study, url, create=False), {}).records()


def _finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return err


@pytest.mark.postgres
def test_three_workers_one_killed_mid_trial(tmp_path: Path, pg_url: str):
    """Three runners on one study of 9 budgeted relaunches (one host, each its own results
    folder); one SIGKILLed while its server measures a tuned set. The others fail its trial
    through the heartbeat and retry it, tearing down the server it left (found by the identity
    its trial recorded) before they end; every budgeted relaunch ends complete exactly once and
    no set is measured twice."""
    cfg = _config(tmp_path, trials=10, load_s=1.0)
    ports = [free_port() for _ in range(3)]
    results = [tmp_path / f"host{i}" for i in range(3)]

    def start(i: int) -> subprocess.Popen:
        return start_cli("sweep", str(cfg), "--results", str(results[i]), "--study", "multi", "--storage", pg_url,
                         "--no-confirm", env=_worker_env(ports[i], str(i)))

    procs = [start(i) for i in range(3)]

    def tuned_in_flight() -> bool:
        """Runner 0 measures a tuned set (a lost baseline is not retried: the loop re-measures
        it when owed), its server up: the trial's own log shows the server's start."""
        try:
            records = _records(pg_url, "multi")
        except KeyError:  # the runners have not created the study yet
            return False
        running = [r.trial for r in records if r.status is Status.RUNNING
                   and r.kind in (Kind.PRESET, Kind.SEARCH) and r.runner.endswith(f":{procs[0].pid}")]
        log = results[0] / "multi" / "logs" / f"trial-{running[0]:04d}.log" if running else None
        return log is not None and log.exists() and "SAW_ENV" in log.read_text() and _mid_trial(
            results[0], "multi", ports[0], after=1)

    _wait_for(tuned_in_flight, 90, "runner 0 measuring a tuned set")
    killed_pid = procs[0].pid
    left = _servers(ports[0])
    procs[0].send_signal(signal.SIGKILL)
    procs[0].communicate(timeout=30)
    assert left, "the killed runner's server was up"
    errs = [_finish(p) for p in procs[1:]]
    # the study ended: the survivors tore down the killed runner's server (it ran in its own session)
    assert not _servers(ports[0]), "the study ended with the killed runner's server still running"
    assert any("tore down the server it left" in e for e in errs), errs[0][-3000:]
    again = _finish(start(0))  # the killed runner's next start finds nothing of it left running
    assert "tore down its server (0 processes)" in again

    records = _records(pg_url, "multi")
    relaunched = [r for r in records if r.kind.relaunched]
    assert not [r.trial for r in relaunched if r.status is Status.RUNNING]
    # every relaunch counts (re-measures too): stage 1's 9 and the final baseline's slot, never one more
    budgeted = [r for r in relaunched if counts_in_budget(r)]
    assert len(budgeted) == 10 and all(r.status is Status.OK for r in budgeted), "\n".join(
        f"{r.trial} {r.kind.value} {r.status.value} {r.preset!r} {r.env} retry_of={r.retry_of_trial} recheck={r.recheck} "
        f"runner={r.runner} budget={counts_in_budget(r)}" for r in relaunched)
    interrupted = [r for r in relaunched if r.status is Status.INTERRUPTED]
    assert len(interrupted) == 1, [(r.trial, r.kind, r.cause) for r in interrupted]
    lost = interrupted[0]
    assert lost.runner.endswith(f":{killed_pid}") and f":{killed_pid}" in lost.cause
    retry = next((r for r in relaunched if r.retry_of_trial == lost.trial), None)
    assert retry is not None, [(r.trial, r.kind, r.status, r.retry_of_trial, r.env, r.cause) for r in records]
    assert lost.retried_by_trial == retry.trial and retry.status is Status.OK and retry.set_key == lost.set_key
    assert not retry.runner.endswith(f":{killed_pid}")
    firsts = [r.set_key for r in relaunched if r.kind in (Kind.PRESET, Kind.SEARCH) and r.status is not Status.INTERRUPTED]
    assert len(firsts) == len(set(firsts)), "a set was measured twice"
    assert any("retrying trial" in e for e in errs)
    assert len({r.runner for r in relaunched}) >= 3  # every runner measured
    assert {r.host_type for r in relaunched} == {relaunched[0].host_type}  # one file, one host type
    assert relaunched[0].host_type.startswith(NO_GPU) and "{port}" not in relaunched[0].host_type
    assert all(r.host is not None and r.host.gpu == NO_GPU and r.host.gpu_count == 0 and r.host.name for r in relaunched)
    for port in ports:
        assert not _servers(port)


@pytest.mark.postgres
def test_two_runners_on_one_host_never_disturb_each_other(tmp_path: Path, pg_url: str):
    """Runners of two studies on one host (one results folder, one database), different ports:
    one is SIGKILLed mid-trial and started again while the other still runs. Its restart tears
    down its own leftover server and retries its own trial; the other runner's trials and server
    are untouched. A second runner of the same study, host and port is refused."""
    cfg = _config(tmp_path, trials=4, load_s=1.0)
    cfg.write_text(cfg.read_text().replace("ready_timeout_s = 20", "ready_timeout_s = 300"))
    results = tmp_path / "r"
    px, py = free_port(), free_port()
    hold = tmp_path / "hold-x"  # x's first server stays in its load until y's part is done: x is certainly alive
    hold.touch()
    x = start_cli("sweep", str(cfg), "--results", str(results), "--study", "sx", "--storage", pg_url,
                  "--no-confirm", "--no-final-baseline", env={**_worker_env(px, "0"), "ENVRATE_HOLD_FILE": str(hold)})

    def start_y() -> subprocess.Popen:
        return start_cli("sweep", str(cfg), "--results", str(results), "--study", "sy", "--storage", pg_url,
                         "--trials", "2", "--no-confirm", "--no-final-baseline", env=_worker_env(py, "1"))

    y = start_y()
    try:
        _wait_for(lambda: _mid_trial(results, "sy", py, after=1), 60, "runner y's second relaunch")
    except AssertionError:
        y.kill()
        raise AssertionError(y.communicate()[1][-3000:] + str(list((results / "sy").rglob("*")))) from None
    y.send_signal(signal.SIGKILL)
    y.communicate(timeout=30)
    assert x.poll() is None, "runner x should still be sweeping when y restarts"
    twin = run_cli("sweep", str(cfg), "--results", str(results), "--study", "sx", "--storage", pg_url,
                   env=_worker_env(px, "0"))  # a second runner of x's study, host, port and GPUs
    assert twin.returncode == 3 and f"pid {x.pid}" in twin.stderr, twin.stderr[-2000:]
    hold.unlink()
    y_again = _finish(start_y())
    ys = _records(pg_url, "sy")
    (lost,) = [r.trial for r in ys if r.status is Status.INTERRUPTED]
    assert "tore down its server" in y_again and f"resume: retrying trial {lost}" in y_again, y_again[-3000:]
    x_err = _finish(x)
    assert "resume" not in x_err and "tore down" not in x_err

    xs, ys = _records(pg_url, "sx"), _records(pg_url, "sy")
    assert [r.status for r in xs] == [Status.OK] * 4
    # the baseline, the killed trial, its retry (numbers as asked: a proposal dropped between them is no record)
    assert [r.status for r in ys] == [Status.OK, Status.INTERRUPTED, Status.OK], ys
    assert ys[0].trial == 0 and ys[2].retry_of_trial == ys[1].trial == lost
    assert {r.runner for r in xs} == {f"{xs[0].runner}"}
    assert not _servers(px) and not _servers(py)


@pytest.mark.postgres
def test_a_worker_with_nothing_left_stays_to_retry_a_dead_runners_trial(tmp_path: Path, pg_url: str):
    """Two runners, a budget of 4 (every relaunch counts: both runners' first baselines too):
    runner A is SIGKILLed in its tuned relaunch, the study's last. Runner B, whose own work is done, does not end: it waits for the heartbeat's grace
    period to fail A's trial, then retries it."""
    cfg = _config(tmp_path, trials=4, load_s=1.5)
    ports = [free_port(), free_port()]
    results = [tmp_path / "a", tmp_path / "b"]
    procs = [start_cli("sweep", str(cfg), "--results", str(results[i]), "--study", "last", "--storage", pg_url,
                       "--no-confirm", "--no-final-baseline", env=_worker_env(ports[i], str(i))) for i in range(2)]
    _wait_for(lambda: _mid_trial(results[0], "last", ports[0], after=1), 60, "runner A's tuned relaunch")
    killed = procs[0].pid
    procs[0].send_signal(signal.SIGKILL)
    procs[0].communicate(timeout=30)
    err = _finish(procs[1])
    assert "tore down the server it left" in err and not _servers(ports[0]), err[-3000:]
    # B either waits out the heartbeat's grace ("no heartbeat") or, slower on a busy machine,
    # finds A's trial already failed when its own work ends: either way B retries it.
    assert "retrying trial" in err, err[-3000:]
    records = [r for r in _records(pg_url, "last") if r.kind.relaunched]
    [lost] = [r for r in records if r.status is Status.INTERRUPTED]
    assert lost.runner.endswith(f":{killed}")
    retry = next(r for r in records if r.retry_of_trial == lost.trial)
    assert retry.status is Status.OK and retry.runner.endswith(f":{procs[1].pid}")
    budgeted = [r for r in records if counts_in_budget(r)]
    assert len(budgeted) == 4
    again = _finish(start_cli("sweep", str(cfg), "--results", str(results[0]), "--study", "last", "--storage",
                              pg_url, "--no-confirm", "--no-final-baseline", env=_worker_env(ports[0], "0")))
    assert "tore down its server" in again and "relaunch budget of 4 spent" in again
    assert len([r for r in _records(pg_url, "last") if r.kind.relaunched]) == len(records)
    assert not _servers(ports[0]) and not _servers(ports[1])
