"""``nccl-tune diagnose`` against the bundled simulator: one real launch, real NCCL-format logs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers import cli, example_text, free_port, server_processes, start_cli
from tuner.diagnose import decode_pick, load_diagnosis


def sim_config(tmp_path: Path, profile: str = "pcie-8x-mla", extra: str = "") -> Path:
    """examples/sim.toml with a free port (and another profile or extra server flags)."""
    text = example_text("sim.toml")
    text = text.replace("port = 8477", f"port = {free_port()}").replace("pcie-8x-mla", profile)
    text = text.replace('"--load-time", "1"]', f'"--load-time", "0.5"{extra}]')
    path = tmp_path / "sim.toml"
    path.write_text(text)
    return path


def test_pcie_profile_nccl_carries_decode_on_ring_ll_one_channel(tmp_path):
    cfg = sim_config(tmp_path)
    res = cli("diagnose", str(cfg), "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    decode_row = next(line for line in res.stdout.splitlines() if line.rstrip().endswith("<- decode"))
    assert decode_row.split()[:5] == ["AllReduce", "14,336", "Ring", "LL", "1"]
    assert "decode pick        NCCL Ring/LL, 1 channel" in res.stdout
    study = tmp_path / "r" / "sim"
    diag = load_diagnosis(study)
    assert diag is not None and decode_pick(diag) == (14336, "Ring", "LL", 1)
    assert diag.backend["name"] == "nccl" and diag.nccl_version == "2.27.3"
    assert diag.topology["nranks"] == 8 and diag.topology["link"] == "pcie"
    assert diag.decode.size_source == "capture" and diag.probe["requests"] == 2
    assert diag.prefill_bytes and all(n % 14336 == 0 for n in diag.prefill_bytes)
    assert {(r.algorithm, r.protocol) for r in diag.tuning if r.bandwidth_gbps > 0} >= {("Ring", "LL")}
    log = Path(diag.launch["log"]).read_text()
    assert "teardown:" in log and "NCCL INFO" not in log  # NCCL wrote to its own files, one per process
    files = [Path(f) for f in diag.launch["nccl_files"]]
    assert len(files) == 8 and all(f.parent == study / "logs" / "diagnose.nccl" for f in files)
    assert any("NCCL INFO AllReduce: 14336 Bytes -> Algo RING proto LL" in f.read_text() for f in files)
    assert "**decode**" in (study / "diagnose.md").read_text()
    assert server_processes(cfg) == []


def test_nvlink_profile_custom_allreduce_is_not_nccl(tmp_path):
    cfg = sim_config(tmp_path, "nvlink-8x")
    res = cli("diagnose", str(cfg), "--results", str(tmp_path / "r"), "--study", "nv", "--json",
                  "--max-tokens", "16", "--repeats", "1")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["backend"]["name"] == "custom_allreduce" and data["backend"]["nccl_on_decode_path"] is False
    assert data["probe"]["requests"] == 1
    diag = load_diagnosis(tmp_path / "r" / "nv")
    assert diag is not None and decode_pick(diag) is None
    assert any("no NCCL variable can act on decode" in n for n in diag.notes)
    assert server_processes(cfg) == []


def test_a_server_that_fails_to_start_exits_1_with_its_cause(tmp_path):
    cfg = sim_config(tmp_path, extra=', "--fault", "crash-start"')
    res = cli("diagnose", str(cfg), "--results", str(tmp_path / "r"))
    assert res.returncode == 1, res.stderr
    assert "the server launch failed: crashed:" in res.stderr and "out of memory" in res.stderr.lower()
    assert "diagnose.log" in res.stderr and (tmp_path / "r" / "sim" / "logs" / "diagnose.log").exists()
    assert not (tmp_path / "r" / "sim" / "diagnose.json").exists()


def test_bad_input_exits_2(tmp_path):
    res = cli("diagnose", str(tmp_path / "missing.toml"), "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "missing.toml" in res.stderr and "Traceback" not in res.stderr
    cfg = sim_config(tmp_path)
    res = cli("diagnose", str(cfg), "--model-config", str(tmp_path / "nope.json"), "--results",
                  str(tmp_path / "r"))
    assert res.returncode == 2 and "nope.json" in res.stderr and "Traceback" not in res.stderr


def test_interrupted_while_loading_tears_the_server_down(tmp_path):
    cfg = sim_config(tmp_path, extra=', "--fault", "hang-start"')
    proc = start_cli("diagnose", str(cfg), "--results", str(tmp_path / "r"))
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "diagnose: launched" in line, line
        deadline = time.monotonic() + 30
        while not server_processes(cfg) and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        try:
            _out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"diagnose outlived SIGINT by 60 s; its stderr:\n{proc.communicate()[1][-4000:]}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert server_processes(cfg) == []
    assert not (tmp_path / "r" / "sim" / "diagnose.json").exists()
