"""notebooks/analysis.ipynb runs top to bottom against a real (simulated) study and draws its plots.

A small sweep of the bundled simulator (fast-tiny profile, 0.2 s loads, 32 tokens, 2 repeats,
concurrency 1 and 2) writes trials.csv: a baseline, a preset the simulated NCCL refuses
(forced LL128, so a failed trial is drawn), two tuned presets and the final baseline
re-measure. The notebook is then executed with nbclient on a kernel spec written here that
points at this interpreter (not whatever ``python3`` a user-level kernel spec names), with
``NCCL_TUNE_TRIALS_CSV`` pointing at the study.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
from nbclient import NotebookClient

from conftest import ROOT, free_port

NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"
KERNEL = "nccl-tune-test-python"

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple", "LL128"]
unsafe = ["LL128"]

[variables.NCCL_MAX_NCHANNELS]
values = [1, 2, 4]

[[presets]]
name = "ll128-forced"
env = { NCCL_PROTO = "LL128" }

[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }

[[presets]]
name = "simple-2ch"
env = { NCCL_PROTO = "Simple", NCCL_MAX_NCHANNELS = "2" }
"""


def _config(tmp: Path) -> Path:
    """examples/sim.toml made small: fast-tiny, 0.2 s load, 32 tokens, 2 repeats, C = 1, 2."""
    (tmp / "space.toml").write_text(SPACE)
    cfg = tmp / "sim-small.toml"
    cmd = [sys.executable, "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}",
           "--load-time", "0.2"]
    cfg.write_text(f"""
[server]
command = {json.dumps(cmd)}
port = {free_port()}
ready_timeout_s = 30
teardown_grace_s = 5

[probe]
prompt = "Count from 1 to 50."
max_tokens = 32
warmup = 1
repeats = 2
stall_timeout_s = 10
check = {{ prompt = "What is the capital of France?", expect = "Paris" }}
concurrency = [1, 2]

[sweep]
space = "{(tmp / 'space.toml').as_posix()}"
trials = 4
seed = 7
""")
    return cfg


def _kernel_spec(tmp: Path) -> Path:
    """A kernel spec running ipykernel on this very interpreter; returns its JUPYTER_PATH root."""
    root = tmp / "jupyter"
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nccl-tune test", "language": "python"}))
    return root


def test_notebook_runs_against_a_simulated_study(tmp_path, monkeypatch):
    results = tmp_path / "results"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "tuner.cli", "sweep", str(_config(tmp_path)), "--results", str(results),
                          "--study", "nb", "--trials", "4", "--allow-unsafe"],
                         capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    sweep_s = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    csv = results / "nb" / "trials.csv"
    df = pd.read_csv(csv)
    assert (df["status"] == "ok").sum() >= 4, df[["trial", "status", "cause"]]
    assert (df["status"] != "ok").sum() == 1  # the forced-LL128 preset
    assert {"tok_s_c1", "tok_s_c2"} <= set(df.columns)

    # Run from a folder other than notebooks/ with the study given by the variable, on our kernel.
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(_kernel_spec(tmp_path)), os.environ.get("JUPYTER_PATH")])))
    monkeypatch.setenv("NCCL_TUNE_TRIALS_CSV", str(csv))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))  # connection files
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile or startup scripts
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    t1 = time.monotonic()
    NotebookClient(nb, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(workdir)}}).execute()
    nb_s = time.monotonic() - t1

    errors, images, texts = [], 0, []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                errors.append(f"{out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr" and "Traceback" in out.text:
                errors.append(out.text)
            if out.output_type in ("display_data", "execute_result"):
                images += "image/png" in out.get("data", {})
                texts.append(out.get("data", {}).get("text/plain", ""))
            elif out.output_type == "stream":
                texts.append(out.text)
    assert not errors, errors
    # trials vs baseline, variable effects, history, baseline drift, concurrency
    assert images == 5, f"expected 5 plots, got {images}"
    joined = "\n".join(texts)
    assert "No tok_s_c* columns" not in joined
    assert "crashed" in joined  # the failed trial is in the table with its status
    print(f"sweep {sweep_s:.1f} s, notebook {nb_s:.1f} s")


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, cell.source[:80]
