"""End-to-end against a real vLLM (CPU build) serving a tiny random Llama.

The venv (~3.5 GB) and the model are built on first use by tests/e2e/vllm_cpu.py and cached
under ~/.cache/nccl-tune/vllm-cpu (env NCCL_TUNE_CACHE overrides): ~3-4 minutes cold on
2 cores, seconds when cached. Each server launch then takes ~40-60 s to /health.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e import vllm_cpu
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "vllm-cpu-tiny.toml"
READY_TIMEOUT_S = 600
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


def _stream_chat(base_url: str, max_tokens: int = 64) -> dict:
    """One streaming chat request; returns usage, text, ttft_s and e2e_s."""
    body = {"model": vllm_cpu.SERVED_MODEL_NAME,
            "messages": [{"role": "user", "content": "Count from 1 to 50."}],
            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = last = None
    usage, text = None, ""
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=120) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices", []):
                if choice.get("delta", {}).get("content"):
                    last = time.perf_counter()
                    ttft = ttft if ttft is not None else last - t0
                    text += choice["delta"]["content"]
    return {"usage": usage, "text": text, "ttft_s": ttft, "e2e_s": (last or time.perf_counter()) - t0}


@pytest.mark.timeout(1200)  # includes the cold venv build (~3-4 min) when not cached
def test_vllm_cpu_serves_and_tears_down(vllm_cpu_env, tmp_path: Path):
    """Without the sweep: start vLLM in its own session, one streamed request, kill the group."""
    port = _free_port()
    log_path = tmp_path / "vllm.log"
    before = _vllm_processes()
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(vllm_cpu.serve_argv(port), env=vllm_cpu.serve_env(), cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert proc.poll() is None, (f"vLLM exited with {proc.returncode} before ready:\n"
                                         + log_path.read_text(errors="replace")[-4000:])
            assert time.monotonic() - t0 < READY_TIMEOUT_S, "vLLM not ready in time"
            try:
                if httpx.get(f"{base_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        load_s = time.monotonic() - t0
        models = httpx.get(f"{base_url}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == vllm_cpu.SERVED_MODEL_NAME

        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        names = [p.name() for p in tree]
        assert any("EngineCore" in n for n in names), names

        result = _stream_chat(base_url)
        assert result["usage"] and result["usage"]["completion_tokens"] == 64, result
        assert result["text"], result
        print(f"\nvLLM CPU: ready in {load_s:.1f} s; 64 tokens in {result['e2e_s']:.3f} s "
              f"({64 / result['e2e_s']:.1f} tok/s, ttft {result['ttft_s'] * 1000:.0f} ms); "
              f"processes {names}")
    finally:
        t1 = time.monotonic()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        # The group may outlive its leader (EngineCore, workers): SIGKILL whatever is left.
        left = _wait_gone(before, timeout_s=15)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait(timeout=10)
        print(f"teardown {time.monotonic() - t1:.1f} s; left after SIGTERM: {list(left.values())}")

    assert not _wait_gone(before, timeout_s=15), "vLLM processes survived the group kill"
    text = log_path.read_text(errors="replace")
    assert any(m in text for m in STARTUP_MARKERS), text[-3000:]


def _experiment_file(tmp_path: Path) -> Path:
    """The example config; a patched copy when the cache or port 8011 differ from its defaults."""
    text = EXAMPLE.read_text()
    default = Path(vllm_cpu.DEFAULT_CACHE_DIR).expanduser()
    if vllm_cpu.CACHE_DIR == default and _port_free(8011):
        return EXAMPLE
    text = text.replace(f'"{vllm_cpu.DEFAULT_CACHE_DIR}/', f'"{vllm_cpu.CACHE_DIR}/')
    text = text.replace("port = 8011", f"port = {_free_port()}")
    text = text.replace('space = "search_spaces/cpu-smoke.toml"',
                        f'space = "{ROOT / "search_spaces" / "cpu-smoke.toml"}"')
    patched = tmp_path / "vllm-cpu-tiny.toml"
    patched.write_text(text)
    return patched


@pytest.mark.timeout(1500)
def test_sweep_on_real_vllm_cpu(vllm_cpu_env, tmp_path: Path):
    """nccl-tune sweep relaunches the real vLLM 3 times (baseline + 2 sets) and cleans up."""
    if not (ROOT / "tuner" / "cli.py").exists():
        pytest.skip("tuner.cli not written yet")
    config = _experiment_file(tmp_path)
    results = tmp_path / "results"
    before = _vllm_processes()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "sweep", str(config), "--trials", "3",
         "--results", str(results), "--study", "vllm-cpu-e2e", "--no-final-baseline"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    print(f"\nsweep took {time.monotonic() - t0:.0f} s\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    with open(results / "vllm-cpu-e2e" / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3, rows
    assert [r["status"] for r in rows] == ["ok"] * 3, [(r["trial"], r["status"], r.get("cause")) for r in rows]
    baselines = [r for r in rows if r["kind"] == "baseline"]
    assert baselines and all(json.loads(r["env"]) == {} for r in baselines), rows
    for r in rows:
        assert float(r["output_tok_s"]) > 0, r
        log = Path(r["log"])
        if not log.is_absolute():
            log = (ROOT / log) if (ROOT / log).exists() else (results / "vllm-cpu-e2e" / log)
        assert log.is_file() and log.stat().st_size > 0, r["log"]
        text = log.read_text(errors="replace")
        assert any(m in text for m in STARTUP_MARKERS), (r["log"], text[-2000:])

    left = _wait_gone(before, timeout_s=30)
    assert not left, f"vLLM processes left after the sweep: {list(left.values())}"
