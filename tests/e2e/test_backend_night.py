"""A backend night, end to end: on the simulator's `pcie-4x-backends` box (4 PCIe GPUs, vLLM
0.30.0, NCCL carrying decode because the custom allreduce is refused), FlashInfer's PCIe IPC
allreduce decodes about 10 % faster than NCCL. A night over search_spaces/vllm-backends.toml of
6 relaunches, as --trials counts them, finds it, confirms it on fresh launches and says "Use it"
with the switch (the choices that cannot act there are never launched: tests/unit/planning/
test_backend_sets.py); with
FlashInfer's package missing the same switch is `not applied`, the server's own warning quoted,
and gets no speed verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import cli, free_port

ROOT = Path(__file__).resolve().parents[2]
IPC = "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC"


def _config(tmp_path: Path, *extra: str, trials: int = 6) -> Path:
    args = "".join(f', "{a}"' for a in extra)
    path = tmp_path / "backends.toml"
    path.write_text(f"""
[server]
command = ["{{python}}", "-m", "tuner.sim", "serve", "--profile", "pcie-4x-backends", "--port", "{{port}}",
           "--load-time", "0.3"{args}]
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 5
[probe]
max_tokens = 64
repeats = 4
[sweep]
space = "{ROOT / 'search_spaces' / 'vllm-backends.toml'}"
trials = {trials}
""")
    return path


@pytest.mark.alone  # a confirmation on fresh launches: its subject is launch noise (see test_verdicts.py)
def test_a_backend_night_of_six_relaunches_finds_confirms_and_recommends_the_faster_backend(tmp_path):
    res = cli("sweep", str(_config(tmp_path)), "--results", str(tmp_path / "r"), "--study", "be", "--seed", "1")
    assert res.returncode == 0, res.stderr
    every = pd.read_csv(tmp_path / "r" / "be" / "trials.csv")
    launched = every[every["status"] != "skipped"]
    assert len(launched) <= 6, launched[["trial", "kind", "preset"]]
    confirm = launched[launched["kind"] == "confirm"]
    assert len(confirm) == 1 and IPC in confirm.iloc[0]["env"], launched[["trial", "kind", "env"]]
    assert confirm.iloc[0]["backend_applied"] == True  # noqa: E712  (proven from that launch's log)
    assert confirm.iloc[0]["backend_choice"] == "vllm-flashinfer-pcie-ipc"
    out = res.stdout
    use = out[out.index("Use it:"):]
    assert f"{IPC}=1 vllm serve MODEL --tensor-parallel-size" in use, out
    assert "sglang" not in use.split("\n\n")[0]  # a vLLM variable: no SGLang line
    report = (tmp_path / "r" / "be" / "report.md").read_text()
    assert "flashinfer (vllm-flashinfer-pcie-ipc)" in report  # the backend column: what ran


def test_a_backend_whose_package_is_missing_is_not_applied(tmp_path):
    cfg = _config(tmp_path, "--sim-missing", "flashinfer", trials=3)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "miss", "--seed", "1",
              "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "miss" / "trials.csv")
    row = df[df["preset"] == "vllm-flashinfer-pcie-ipc"].iloc[0]
    assert row["status"] == "ok" and row["backend_applied"] == False  # noqa: E712
    assert "does not provide PcieIpcAllReduceWorkspace" in row["backend_reason"]
    assert row["verdict"] == "not applied" and row["allreduce_backend"] == "nccl"
    assert "vllm-flashinfer-pcie-ipc NOT APPLIED (no speed verdict)" in res.stderr
    assert "Use it:" not in res.stdout
