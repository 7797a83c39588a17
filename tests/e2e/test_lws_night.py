"""A two-node night with each trial's server a Kubernetes LeaderWorkerSet (``[server.nodes]
launch = "lws"``), through the CLI, against the stand-in kubectl (tests/launchers/kubectl, which
plays the LWS's pods on this machine): examples/sim-2node-lws.toml with free ports, the runner
SIGKILLed mid-trial and resumed (the resumed run deletes the dead runner's LWS), the ranks of
both pods proven, the network fix measured, nothing left: no pod process, no LWS listed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import psutil
import yaml

from tests.helpers import ROOT, cli, free_port, start_cli, wait_for_log

LAUNCHERS = ROOT / "tests" / "launchers"


def _pods_running(state: Path) -> list[str]:
    """Processes of the stand-in's pods (their working folder is under its state) still running."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.cwd().startswith(str(state)) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    return found


def _lws_listed(env: dict[str, str]) -> str:
    done = subprocess.run(["kubectl", "get", "lws"], env=env, capture_output=True, text=True, timeout=60, check=False)
    return done.stdout + done.stderr


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The example and its template with free ports; the pods run this checkout's simulator."""
    cport, mport = free_port(), free_port()
    template = yaml.safe_load((ROOT / "examples" / "k8s" / "sim-server-lws.yaml").read_text())
    lwt = template["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        (c,) = lwt[key]["spec"]["containers"]
        c["command"] = [sys.executable if w == "python" else w for w in c["command"]]
        c["args"] = [{"18491": str(cport), "29591": str(mport)}.get(w, w) for w in c["args"]]
        c["env"] = [{"name": "PYTHONPATH", "value": str(ROOT)}]
    (tmp_path / "lws.yaml").write_text(yaml.safe_dump(template))
    text = (ROOT / "examples" / "sim-2node-lws.toml").read_text()
    text = re.sub(r"^port = \d+", f"port = {free_port()}", text, flags=re.M)
    text = re.sub(r"^container_port = \d+", f"container_port = {cport}", text, flags=re.M)
    text = text.replace('manifest = "k8s/sim-server-lws.yaml"', f'manifest = "{tmp_path / "lws.yaml"}"')
    text = text.replace('space = "search_spaces/network.toml"', f'space = "{ROOT / "search_spaces" / "network.toml"}"')
    cfg = tmp_path / "sim-2node-lws.toml"
    cfg.write_text(text)
    env = {**os.environ, "PATH": f"{LAUNCHERS}{os.pathsep}{os.environ.get('PATH', '')}",
           "FAKE_KUBECTL_STATE": str(tmp_path / "kube"), "PYTHONPATH": str(ROOT)}
    return cfg, env


def test_a_two_node_lws_night_survives_a_runner_kill_and_leaves_nothing(tmp_path):
    cfg, env = _setup(tmp_path)
    study = tmp_path / "r" / "lws"
    args = ["sweep", str(cfg), "--results", str(study.parent), "--study", study.name, "--trials", "4",
            "--no-confirm"]
    proc = start_cli(*args, env=env)
    try:
        wait_for_log(study, 2, "SIM ENV", timeout=180)  # trial 2's LWS applied, its leader logging
    finally:
        proc.kill()  # the runner, SIGKILLed mid-trial: no teardown of its own
        proc.communicate(timeout=60)
    assert "nccl-tune-" in _lws_listed(env), "the dead runner's LWS should still be there"
    assert _pods_running(tmp_path / "kube"), "the dead runner's pods should still run"

    res = cli(*args, "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert "died during trial 2" in res.stderr
    assert _lws_listed(env).startswith("No resources found")
    assert _pods_running(tmp_path / "kube") == []

    df = pd.read_csv(study / "trials.csv")
    assert list(df[df["status"] == "interrupted"]["trial"]) == [2]
    ok = df[df["status"] == "ok"]
    assert len(ok) >= 3
    for trial, stored in zip(ok["trial"], ok["node_ranks"], strict=True):
        ranks = json.loads(stored)
        lws = re.search(r"name: (nccl-tune-[0-9a-f]+)\n",
                        (study / "logs" / f"trial-{trial:04d}.lws.yaml").read_text())
        assert lws is not None
        assert ranks == {f"{lws[1]}-0": 1, f"{lws[1]}-0-1": 1}  # both pods' ranks, by the pod names
    assert ok["nccl_proof"].str.contains("2 of 2 ranks on 2 nodes").any()
    fix = ok[ok["env"].str.contains('"NCCL_IB_GID_INDEX": "3"', regex=False)]
    assert not fix.empty and (fix["vs_baseline"] > 1.3).all()  # off the socket fallback, onto IB
    for manifest in (study / "logs").glob("trial-*.lws.yaml"):
        text = manifest.read_text()
        assert "NCCL_DEBUG_FILE" not in text and "nccl-tune/launch" in text
    node1 = next((study / "logs").glob("trial-0001.node1.log")).read_text()
    assert node1.startswith("# node 1: nccl-tune-") and " NCCL INFO " in node1
