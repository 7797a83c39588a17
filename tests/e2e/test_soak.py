"""Soak: an 18-relaunch unattended search sweep on the project's simulator with random faults.

SIM_FAULT is one of the search variables, so the sampler itself injects crashes, hangs, HTTP
500s, orphaned workers, slow teardowns and wrong answers (each mode once more as a preset, so
every one is played whatever the sampler proposes). The runner is SIGKILLed mid-trial and the
same command resumes the sweep. Afterwards: every budgeted trial recorded exactly once with the
status its fault implies, the killed trial recorded as interrupted and retried once, and no
process of any server left. The figures the issue asks for are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.helpers import ROOT, alive_pids, free_port, processes_with, run_cli, start_cli, write_config

pytestmark = pytest.mark.slow

TRIALS = 18  # the baseline, one preset per fault, then sampled sets: every fault is played
KILL_AT_LOG = 11  # SIGKILL the runner once the 11th relaunch's server is up (a sampled set's)

EXPECTED = {
    "crash-start": "crashed",
    "hang-start": "timeout",
    "crash-mid-stream": "crashed",
    "hang-mid-stream": "hung",
    "healthy-then-500": "unhealthy",
    "wrong-output": "invalid_output",
    "orphan-workers": "ok",
    "slow-teardown": "ok",
    None: "ok",
}
FAULTS = [f for f in EXPECTED if f]

# Every NCCL combination below initialises on the fast-tiny profile (no LL128, no exotic
# algorithm), so a trial's status depends on its SIM_FAULT alone.
SPACE = """
[variables.SIM_FAULT]
values = [{faults}]
[variables.SIM_FAULT_AFTER]
values = ["2", "16"]
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring", "Tree"]
[variables.NCCL_MAX_NCHANNELS]
values = ["4", "8", "16"]
{presets}
"""


def _space_text() -> str:
    presets = []
    for i, fault in enumerate(FAULTS):
        proto = ("LL", "Simple")[i % 2]
        presets.append(f'[[presets]]\nname = "fault-{fault}"\nenv = {{ SIM_FAULT = "{fault}", NCCL_PROTO = "{proto}" }}\n')
    return SPACE.format(faults=", ".join(f'"{f}"' for f in FAULTS), presets="\n".join(presets))


def _wait_mid_trial(proc: subprocess.Popen, study_dir: Path, nth_log: int, timeout: float = 240) -> int:
    """Block until the runner, at or past its ``nth_log``-th relaunch, has a server in flight
    that is serving and not yet being torn down; return that trial's number."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the runner ended early: {proc.communicate()[1][-3000:]}"
        logs = sorted((study_dir / "logs").glob("trial-*.log")) if (study_dir / "logs").exists() else []
        if len(logs) >= nth_log:
            for inflight in study_dir.glob("runners/*.json"):  # tuner/study/inflight.py
                try:
                    number = int(json.loads(inflight.read_text())["trial"])
                    text = (study_dir / "logs" / f"trial-{number:04d}.log").read_text(errors="replace")
                except (OSError, ValueError, KeyError):
                    continue
                if (number >= int(logs[nth_log - 1].stem[len("trial-"):]) and "SIM READY" in text
                        and "[nccl-tune] teardown" not in text):
                    return number
        time.sleep(0.01)
    raise AssertionError(f"the runner never reached its {nth_log}th relaunch")


def _tagged(tag: str, *, marked_only: bool = False) -> list[psutil.Process]:
    """Live processes started for this soak: they inherit SOAK_TAG from the runner. With
    ``marked_only``, those that also carry the launcher's TUNER_SERVER_ID marker. (The machine
    is shared: other people's simulators and sweeps may be running, so untagged ones are
    not ours to judge.)"""
    found = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
            if (env.get("SOAK_TAG") == tag and (not marked_only or "TUNER_SERVER_ID" in env)
                    and p.status() != psutil.STATUS_ZOMBIE):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def _logged_pids(study_dir: Path) -> list[int]:
    """Worker pids and process groups the simulator printed (``SIM WORKERS {...}``)."""
    pids = []
    for log in (study_dir / "logs").glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("SIM WORKERS "):
                info = json.loads(line[len("SIM WORKERS "):])
                pids += [*list(info.get("pids", [])), info.get("pgid")]
    return [p for p in pids if p]


def test_soak_random_faults_killed_and_resumed(tmp_path):
    t0 = time.monotonic()
    port = free_port()
    space = tmp_path / "space.toml"
    space.write_text(_space_text())
    command = [sys.executable, "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}",
               "--load-time", "0.2", "--workers", "1"]
    # Mid-stream faults hit the first timed request (1: ready-check, 2: smoke check, 3: warmup).
    cfg = write_config(tmp_path / "exp.toml", command=command, space=space, trials=TRIALS, port=port,
                       max_tokens=32, repeats=2, ready_timeout_s=6, stall_timeout_s=4,
                       extra_server='env = { SIM_FAULT_REQUEST = "3", SIM_TEARDOWN_S = "1" }',
                       extra_probe='check = { prompt = "What is the capital of France?", expect = "Paris" }')
    study_dir = tmp_path / "r" / "soak"
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "soak", "--seed", "7",
            "--trials", str(TRIALS)]
    tag = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH=str(ROOT), SOAK_TAG=tag)

    # Run 1: killed (SIGKILL, no chance to clean up) while its 11th server is in flight.
    proc = start_cli(*args, env=env)
    try:
        killed_trial = _wait_mid_trial(proc, study_dir, KILL_AT_LOG)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, _err1 = proc.communicate(timeout=30)
    t_kill = time.monotonic()
    assert proc.returncode == -signal.SIGKILL

    # Run 2: the same command resumes and finishes the budget.
    res = run_cli(*args, env=env, timeout=400)
    wall_s = time.monotonic() - t0
    assert res.returncode == 0, res.stderr[-5000:]
    assert f"died during trial {killed_trial}" in res.stderr

    df = pd.read_csv(study_dir / "trials.csv")
    df = df[df["status"] != "skipped"]  # the sets not measured (rows of their own) are not relaunches
    df["env_d"] = df["env"].map(json.loads)
    assert df["trial"].is_unique
    assert not (df["status"] == "running").any(), df[["trial", "status"]]

    # The killed trial: one interrupted row, retried exactly once.
    interrupted = df[df["status"] == "interrupted"]
    assert list(interrupted["trial"]) == [killed_trial], df[["trial", "status", "cause"]]
    done = df[df["status"] != "interrupted"]
    retries = done[done["retry_of_trial"].notna()]
    assert retries["retry_of_trial"].astype(int).tolist() == [killed_trial]
    assert retries.iloc[0]["env"] == interrupted.iloc[0]["env"]

    # Exactly the budget: every relaunch counts (the baseline, its re-measures, the sets, the
    # confirmations; the interrupted one not, its retry does). Stage 1 spends all but the 3
    # slots kept for the checks (2 confirmations from 10 relaunches, the final baseline); a
    # confirmation slot no finalist fills stays unused.
    bases = done[done["kind"] == "baseline"].sort_values("trial")
    assert len(bases) >= 2 and (bases["status"] == "ok").all()
    assert bases.iloc[0]["trial"] == 0
    confirms = done[done["kind"] == "confirm"]
    budgeted = done
    expected = TRIALS - 3 + len(confirms) + 1
    assert len(budgeted) == expected, budgeted[["trial", "kind", "status", "env"]]
    tuned = done[~done["kind"].isin(["baseline", "confirm"])]
    assert tuned["env"].is_unique, "an env set was measured twice"
    assert (tuned["env"] != "{}").all()

    # Every row's status follows from its fault.
    wrong = []
    for _, row in done.iterrows():
        fault = row["env_d"].get("SIM_FAULT")
        if row["status"] != EXPECTED[fault]:
            wrong.append((int(row["trial"]), fault, row["status"], row["cause"]))
        elif row["status"] != "ok":
            assert isinstance(row["cause"], str) and row["cause"].strip(), row["trial"]
            assert pd.isna(row["output_tok_s"]), row["trial"]
    assert not wrong, wrong
    assert set(FAULTS) <= {e.get("SIM_FAULT") for e in done["env_d"]}

    # Nothing of any server survives: no simulator on our port, no process of this soak, none
    # carrying a launch marker, and no pid the simulators printed.
    ours = [p for p in processes_with("tuner.sim") if f"--port {port}" in " ".join(p.info["cmdline"] or [])]
    tagged = _tagged(tag)
    marked = _tagged(tag, marked_only=True)
    leftovers = {p.pid for p in ours + tagged + marked} | set(alive_pids(_logged_pids(study_dir)))

    # The figures: faults injected = relaunches with a SIM_FAULT (the interrupted one included)
    # plus the runner's SIGKILL; survived = recorded with the status the fault implies, the
    # SIGKILL counting when the killed trial was recorded and retried (its server torn down:
    # no leftovers).
    injected = int(df["env_d"].map(lambda e: "SIM_FAULT" in e).sum()) + 1
    survived = sum(1 for _, r in done.iterrows()
                   if "SIM_FAULT" in r["env_d"] and r["status"] == EXPECTED[r["env_d"]["SIM_FAULT"]])
    if not leftovers:
        survived += 1 + int("SIM_FAULT" in interrupted.iloc[0]["env_d"])
    lost = expected - len(budgeted)
    by_status = done["status"].value_counts().to_dict()
    print(f"\nSOAK trials={len(budgeted)} relaunches={len(df)} (incl. {len(bases) - 1} baseline re-measure, "
          f"1 interrupted) faults_injected={injected} faults_survived={survived} orphans={len(leftovers)} "
          f"trials_lost={lost} wall_s={wall_s:.1f} (killed at {t_kill - t0:.1f} s during trial {killed_trial}) "
          f"statuses={by_status}")
    assert not leftovers, f"processes left: {sorted(leftovers)}"
    assert lost == 0
    assert survived == injected, f"{injected - survived} of {injected} faults were not survived"
