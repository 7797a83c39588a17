"""Two workers on one box's GPUs, end to end on the simulator: the experiment file copied and only
its port changed (the 2 a.m. fix for a busy port) starts a second worker of the same study with
the same CUDA_VISIBLE_DEVICES while the first runs; it is refused before it launches anything,
naming the first. Disjoint GPUs are allowed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.helpers import ROOT, example_text, free_port, run_cli, server_processes, start_cli, wait_for_log
from tuner.study.inflight import host_name


def _sim(path: Path, port: int, load: str = "1", ready_timeout_s: int = 60) -> Path:
    """examples/sim.toml on ``port`` with a ``load``-second load (its space path made absolute)."""
    text = example_text("sim.toml").replace("port = 8477", f"port = {port}")
    text = text.replace('"--load-time", "1"]', f'"--load-time", "{load}"]')
    text = text.replace("ready_timeout_s = 60", f"ready_timeout_s = {ready_timeout_s}")
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT / "search_spaces" / "default.toml"}"')
    path.write_text(text)
    return path


def test_a_copy_with_only_the_port_changed_is_refused_while_the_first_runs(tmp_path: Path, workers_dir: Path):
    first_port, copy_port = free_port(), free_port()
    # the first worker's baseline loads for 10 minutes: it is certainly alive until the test stops it
    first_cfg = _sim(tmp_path / "night.toml", first_port, load="600", ready_timeout_s=900)
    copy = tmp_path / "night-copy.toml"
    copy.write_text(first_cfg.read_text().replace(f"port = {first_port}", f"port = {copy_port}"))
    results = tmp_path / "results"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    first = start_cli("sweep", str(first_cfg), "--results", str(results), "--study", "night", env=env)
    try:
        wait_for_log(results / "night", 0, "SIM ENV")  # registered, and its baseline's server loading
        res = run_cli("sweep", str(copy), "--results", str(results), "--study", "night", env=env)
        assert res.returncode == 3, res.stderr
        assert res.stdout == "" and "Traceback" not in res.stderr
        assert (f"this worker's GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3 from the environment) overlap those of a live "
                f"nccl-tune worker on this host: pid {first.pid} (nccl-tune sweep, study 'night', config {first_cfg}, "
                f"port {first_port}, CUDA_VISIBLE_DEVICES=0,1,2,3 from the environment, started ") in res.stderr
        assert f"stop the other worker (kill {first.pid}" in res.stderr
        # nothing launched or written: no server on its port, no trial of its own, the first's file alone
        assert not server_processes(copy)
        assert [p.name for p in (results / "night" / "logs").glob("trial-*.log")] == ["trial-0000.log"]
        assert [p.name for p in workers_dir.glob("*.json")] == [f"{host_name()}-{first.pid}.json"]

        dry = run_cli("sweep", str(copy), "--dry-run", "--results", str(results), "--study", "night", env=env)
        # the dry run refuses what the sweep refuses, with its exit status and message
        assert dry.returncode == 3 and dry.stdout == "", dry.stdout + dry.stderr
        assert f"pid {first.pid} (nccl-tune sweep, study 'night'" in dry.stderr, dry.stderr
        diag = run_cli("diagnose", str(copy), "--results", str(results), "--study", "night", env=env)
        assert diag.returncode == 3 and f"pid {first.pid} (nccl-tune sweep, study 'night'" in diag.stderr, diag.stderr

        # other GPUs of the same box: allowed, a whole (short) sweep beside the first
        other = _sim(tmp_path / "other.toml", free_port())
        ok = run_cli("sweep", str(other), "--results", str(results), "--study", "other", "--trials", "2",
                     "--no-confirm", "--no-final-baseline", env={**env, "CUDA_VISIBLE_DEVICES": "4,5,6,7"})
        assert ok.returncode == 0, ok.stderr[-3000:]
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err[-3000:]
    assert list(workers_dir.glob("*.json")) == []  # each worker removed its file at its end
