"""Sweep options: time budgets, auto repeats, per-trial concurrency, SIGINT; statistics and
launcher units. Real processes against tests/servers/envrate_server.py."""

from __future__ import annotations

import contextlib
import json
import signal
import sys

import pandas as pd
import psutil
import pytest

from tests.helpers import cli, envrate_command, server_processes, start_cli, wait_for_log, write_config
from tuner.errors import TrialFailed
from tuner.inputs.config import ServerConfig
from tuner.judging import stats
from tuner.server import ServerProcess, build_env

THREE_PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
[[presets]]
name = "tree"
env = { NCCL_ALGO = "Tree" }
"""


def test_timeout_stops_before_a_trial_that_would_not_fit(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(THREE_PRESETS), trials=6,
                       extra_server='env = { ENVRATE_LOAD_S = "2" }')
    # Each trial takes >2 s (load); a 5 s budget admits the baseline and at most one more trial.
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "to", "--timeout", "5s")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "to" / "trials.csv")
    assert 1 <= len(df) <= 2
    assert "--timeout" in res.stderr and "would not fit" in res.stderr


def test_auto_repeats_are_chosen_from_the_baseline_before_each_launch(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(THREE_PRESETS), trials=2,
                       extra_probe="ci_target = 0.02\nmax_repeats = 8", max_tokens=100, extra_sweep='mode = "presets"')
    cfg.write_text(cfg.read_text().replace("repeats = 3", 'repeats = "auto"'))
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "auto", "--no-final-baseline",
                  "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "auto" / "trials.csv")
    base, tuned = (json.loads(r) for r in df["output_tok_s_runs"])
    assert len(base) == 8  # the first baseline launch makes max_repeats runs: the noise to plan with
    # every later launch: the count the baseline's noise asks for, fixed before the launch (no
    # optional stopping on the trial's own interval)
    assert len(tuned) == stats.runs_for_precision([base], 0.02, 8)
    assert stats.MIN_RUNS <= len(tuned) <= 8


def test_concurrency_table_per_trial(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(THREE_PRESETS), trials=2,
                       extra_probe="concurrency = [1, 2, 4]\nconcurrency_requests = 2", max_tokens=40, repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "conc", "--no-final-baseline",
              "--no-confirm", figures=True)
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "conc" / "trials.csv")
    for _, row in df.iterrows():
        levels = {lv["concurrency"]: lv for lv in json.loads(row["concurrency"])}
        assert sorted(levels) == [1, 2, 4]
        for c, lv in levels.items():
            assert lv["ok"] == lv["total"] == 2 * c and lv["completion_tokens"] == 2 * c * 40
            assert row[f"tok_s_c{c}"] == pytest.approx(lv["aggregate_tok_s"])
            assert lv["aggregate_tok_s"] == pytest.approx(lv["completion_tokens"] / lv["wall_s"])
            # never more than C streams at a time: the requests' own time over the level's wall is
            # at most C (that C run at once, one connection each, is tests/unit/measure/test_bench.py's;
            # how much of the wall they fill depends on how busy the machine is)
            in_flight = lv["latency_avg_s"] * lv["ok"] / lv["wall_s"]
            assert 0 < in_flight <= c * (1 + 1e-9), (c, in_flight)
    assert (tmp_path / "r" / "conc" / "concurrency.png").exists()


def test_sigint_exits_130_and_leaves_nothing(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(THREE_PRESETS), trials=5,
                       extra_server='env = { ENVRATE_LOAD_S = "30" }', ready_timeout_s=60)
    proc = start_cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "int")
    wait_for_log(tmp_path / "r" / "int", 0, "SAW_ENV")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not server_processes(cfg)
    assert "Traceback" not in err


def test_build_env_strips_inherited_tuning_and_applies_trial():
    env, removed = build_env({"NCCL_PROTO": "Simple", "CUDA_DEVICE_MAX_CONNECTIONS": "4", "PATH": "/bin",
                              "NCCL_DEBUG": "INFO", "NCCL_TUNE_DB": "postgresql://u:pw@db/x"},
                             {"CUDA_VISIBLE_DEVICES": "0,1"}, {"NCCL_ALGO": "Ring"})
    # nccl-tune's own settings are not passed on (a storage URL may hold a password), nor reported.
    assert removed == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_DEBUG", "NCCL_PROTO"]
    assert env == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ALGO": "Ring"}


def test_launcher_fails_fast_and_kills_session_escapees(tmp_path):
    # A server that spawns a child which leaves the session and ignores SIGTERM, then dies.
    code = ("import os, subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import os, signal, time; os.setsid(); "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); "
            "print('ESCAPEE STARTED', flush=True); time.sleep(0.5); "
            "print('RuntimeError: engine died', flush=True); sys.exit(3)")
    server = ServerConfig(command=(sys.executable, "-c", code), port=18999, teardown_grace_s=1)
    sp = ServerProcess(server, {}, tmp_path / "log.txt")
    sp.start()
    with pytest.raises(TrialFailed) as info:
        sp.wait_ready(timeout_s=60)  # the exit ends the wait: crashed, never a timeout
    assert info.value.status == "crashed" and "RuntimeError: engine died" in info.value.cause
    marker = sp.marker
    report = sp.teardown()
    assert report.clean, report
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            assert p.environ().get("TUNER_SERVER_ID") != marker
    assert "exit status 3" in info.value.cause


def test_log_is_capped_and_secrets_scrubbed(tmp_path):
    code = ("import sys\nfor i in range(20000): print(f'line {i} token hf_secretvalue_123 ' + 'x' * 40)\n"
            "print('RuntimeError: the last words', flush=True)")
    server = ServerConfig(command=(sys.executable, "-c", code), port=18998, teardown_grace_s=1,
                          log_max_bytes=64 * 1024, env={"HF_TOKEN": "hf_secretvalue_123"})
    sp = ServerProcess(server, {}, tmp_path / "log.txt")
    sp.start()
    with pytest.raises(TrialFailed):
        sp.wait_ready(timeout_s=30)
    sp.teardown()
    text = (tmp_path / "log.txt").read_text()
    assert len(text) < 64 * 1024 + 400 * 120
    assert "bytes dropped" in text and "RuntimeError: the last words" in text and "line 0 " in text
    assert "hf_secretvalue_123" not in text and "***" in text


def test_export_lines():
    from tuner.report import export_lines

    lines = export_lines({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, ["vllm", "serve", "m"])
    assert lines[0] == "export NCCL_PROTO=LL NCCL_ALGO=Ring"
    assert any("vllm serve" in ln for ln in lines) and any("sglang.launch_server" in ln for ln in lines)
