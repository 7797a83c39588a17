"""notebooks/analysis.ipynb runs top to bottom against a study's trials.csv and draws its plots.

The trials.csv (and the judgement.json beside it) is written by the report's own writer
(``tuner.report.frame.write_trials_csv``) from real trial records of a night with failures, a winner, a baseline re-measure, a
concurrency table and a preset not measured (``tests.helpers.sample_records``), so the notebook reads what ``nccl-tune
report`` writes without running a sweep. The notebook is executed with nbclient on a kernel
spec written here that points at this interpreter (not whatever ``python3`` a user-level kernel
spec names), with ``NCCL_TUNE_TRIALS_CSV`` pointing at the file and this checkout first on the
kernel's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tests.helpers import ROOT, sample_records, trial_record
from tuner.record import Metric
from tuner.report.frame import combine_frames, judged_trials, read_trials_csv, skipped_frame, write_trials_csv

NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"
KERNEL = "nccl-tune-test-python"


def _kernel_spec(tmp: Path) -> Path:
    """A kernel spec running ipykernel on this very interpreter; returns its JUPYTER_PATH root."""
    root = tmp / "jupyter"
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nccl-tune test", "language": "python"}))
    return root


def test_notebook_runs_against_a_study(tmp_path, monkeypatch):
    csv = tmp_path / "trials.csv"
    records = [*sample_records(), trial_record(11, "duplicate", status="skipped", env={"NCCL_PROTO": "LL"}, preset="ll",
                                               duplicate_of=3, cause="the same set to NCCL at 14336 B")]
    relaunches, story = judged_trials(records, metric=Metric.OUTPUT, min_effect=0.01)
    write_trials_csv(combine_frames([relaunches, skipped_frame(records)]), csv, story)  # as nccl-tune report writes it
    df = read_trials_csv(csv)
    assert (df["status"] == "ok").sum() == 6 and (df["status"] == "crashed").sum() == 1
    assert (df["status"] == "skipped").sum() == 1
    assert {"tok_s_c1", "tok_s_c8"} <= set(df.columns)

    # Run from a folder other than notebooks/ with the study given by the variable, on our kernel.
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(_kernel_spec(tmp_path)), os.environ.get("JUPYTER_PATH")])))
    monkeypatch.setenv("NCCL_TUNE_TRIALS_CSV", str(csv))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
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
    # the judgement's numbers, read back from the judgement.json beside trials.csv
    assert "Baseline: 70.9 single-stream output tok/s over 2 launches, drift 1.2 %" in joined
    assert ("Best set: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL (trial 3), +14.1 % (95 % CI +8.4..+20.0 %), faster: "
            "not yet confirmed") in joined
    assert "10 relaunches" in joined  # the set not measured is listed, never drawn nor counted as a relaunch
    assert ("not measured: trial 11 ll, NCCL_PROTO=LL: the same set to NCCL at 14336 B; equal to trial 3 "
            "(preset ll-8ch)") in joined
    print(f"notebook {nb_s:.1f} s")


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, cell.source[:80]
