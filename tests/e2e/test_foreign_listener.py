"""Only our own server is measured: a stranger's server (tests/servers/foreign_server.py, fast
and carrying no nccl-tune marker) takes the port while a trial's own server (the env-rate server,
held in its load by ENVRATE_HOLD_FILE) is still starting. The sweep stops with exit 3 naming the
stranger's pid and command, the trial is not recorded ok (interrupted, retried on resume), and
what was recorded before stays."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from tests.helpers import SERVERS, envrate_command, server_processes, start_cli, wait_for_log, write_config
from tuner.record.trial import Status
from tuner.study.storage import StudyStore, default_storage, open_study

PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""


def _config(tmp_path: Path, space_file, hold: Path) -> Path:
    return write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=2,
                        max_tokens=100, repeats=3, ready_timeout_s=60,
                        extra_server=f'env = {{ ENVRATE_LOAD_S = "0.5", ENVRATE_HOLD_FILE = "{hold}" }}')


def _foreign(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(SERVERS / "foreign_server.py"), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("READY"), "the foreign server did not start"
    return proc


def _port(cfg: Path) -> int:
    import tomllib

    return int(tomllib.loads(cfg.read_text())["server"]["port"])


def _run_with_stranger(tmp_path: Path, space_file, number: int) -> tuple[subprocess.CompletedProcess, int, Path]:
    """Sweep until trial ``number``'s own server is held in its load, start the stranger on the
    port, let the sweep end; returns (the sweep's result, the stranger's pid, the study dir)."""
    hold = tmp_path / "hold"
    cfg = _config(tmp_path, space_file, hold)
    study = tmp_path / "r" / "own"
    if number == 0:
        hold.touch()
    proc = start_cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "own", "--no-confirm",
                     "--no-final-baseline")
    stranger = None
    try:
        if number > 0:  # the baseline serves; hold the next launch in its load
            wait_for_log(study, number - 1, "serving on")
            hold.touch()
        wait_for_log(study, number, "SAW_ENV")
        stranger = _foreign(_port(cfg))
        out, err = proc.communicate(timeout=120)
        hold.unlink(missing_ok=True)
        time.sleep(0.2)
        assert not [p for p in server_processes(cfg) if "envrate_server.py" in " ".join(p.info["cmdline"] or [])], \
            "our own server outlived the sweep"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), stranger.pid, study
    finally:
        hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
        if stranger is not None:
            stranger.terminate()
            stranger.wait(10)


def _check(res: subprocess.CompletedProcess, stranger: int, study: Path, number: int) -> list:
    print(res.stderr)
    assert res.returncode == 3, res.stderr[-3000:]
    assert f"pid {stranger} " in res.stderr and "foreign_server.py" in res.stderr, res.stderr[-3000:]
    assert "not by the server nccl-tune launched" in res.stderr and "Traceback" not in res.stderr
    records = StudyStore(open_study("own", default_storage(study), create=False), {}).records()
    trial = next(r for r in records if r.trial == number)
    assert trial.status is Status.INTERRUPTED and trial.output_tok_s is None and not trial.output_tok_s_runs
    assert "foreign_server.py" in trial.cause
    assert not [r for r in records if r.status is Status.OK and r.trial >= number]
    return records


def test_a_stranger_on_the_port_is_never_the_baseline(tmp_path, space_file):
    res, stranger, study = _run_with_stranger(tmp_path, space_file, 0)
    _check(res, stranger, study, 0)


def test_a_stranger_on_the_port_is_never_a_tuned_trial(tmp_path, space_file):
    res, stranger, study = _run_with_stranger(tmp_path, space_file, 1)
    records = _check(res, stranger, study, 1)
    baseline = next(r for r in records if r.trial == 0)
    assert baseline.status is Status.OK and 0 < (baseline.output_tok_s or 0) < 1000  # ours: ~400 tok/s, kept
    log = (study / "logs" / "trial-0000.log").read_text()
    assert "[nccl-tune] listener on port" in log and "of the launched tree holds it (at readiness)" in log
    csv = pd.read_csv(study / "trials.csv").set_index("trial") if (study / "trials.csv").exists() else None
    if csv is not None:
        assert csv.loc[1, "status"] != "ok"
