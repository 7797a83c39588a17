"""``sim all-reduce-perf`` prints nccl-tests output (github.com/NVIDIA/nccl-tests src/common.cu,
src/util.cu) under the same cost model, environment and faults as ``sim serve``."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.simproc import ROOT, run_sim, sim_env
from tuner.sim.allreduceperf import float_str, main, parse_size

ROW = re.compile(r"^\s+\d+\s+\d+\s+\w+\s+\w+")


def arp(*args, env=None):
    """(exit status, stdout lines) of an in-process run."""
    out = io.StringIO()
    code = main(list(args), environ=sim_env({"SIM_SEED": "3", **(env or {})}), out=out)
    return code, out.getvalue().split("\n")


def rows(lines):
    return [ln.split() for ln in lines if ROW.match(ln)]


def test_parse_size_and_float_format_as_nccl_tests():
    assert [parse_size(s) for s in ("8", "14336", "1K", "128M", "1G", "1.5k")] == [
        8, 14336, 1024, 128 << 20, 1 << 30, 1536]
    with pytest.raises(ValueError):
        parse_size("x")
    assert (float_str(45.678, 7), float_str(11884.73, 7), float_str(123456789.0, 7)) == (
        "  45.68", "11884.7", "1.2e+08")


def test_default_layout_and_bandwidth_formula():
    code, lines = arp("-b", "8", "-e", "128M", "-f", "2", "-g", "8", "-d", "bfloat16")
    assert code == 0
    assert lines[0] == "# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703"
    assert lines[1] == "# Collective test starting: all_reduce_perf"
    assert lines[2].startswith("# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) "
                               "warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0")
    devices = [ln for ln in lines if ln.startswith("#  Rank ")]
    assert len(devices) == 8 and re.match(r"#  Rank  7 Group  0 Pid +\d+ on +\S+ device  7 "
                                          r"\[0000:88:00\] NVIDIA RTX PRO 6000", devices[7])
    header = next(ln for ln in lines if "#wrong" in ln)
    assert header.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw",
                              "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
    table = rows(lines)
    assert [int(r[0]) for r in table] == [8 << i for i in range(25)]
    for r in table:
        size, t, algbw, busbw = int(r[0]), float(r[5]), float(r[6]), float(r[7])
        assert r[2:5] == ["bfloat16", "sum", "-1"] and int(r[1]) == size // 2
        assert r[8] == "0" and r[12] == "0"
        assert algbw == pytest.approx(size / 1e3 / t, abs=0.006, rel=0.01)
        assert busbw == pytest.approx(size / 1e3 / t * 2 * 7 / 8, abs=0.006, rel=0.01)
    assert 35 < float(table[0][5]) < 50  # 8 B on 8 PCIe GPUs: ~42 us (NVIDIA/nccl#1530)
    assert lines[-7:] == ["# Out of bounds values : 0 OK", lines[-6], "#",
                          "# Collective test concluded: all_reduce_perf", "#", "", ""]
    avg = float(lines[-6].split(":")[1])
    assert avg == pytest.approx(sum(float(r[7]) + float(r[11]) for r in table) / 50, rel=1e-3)


def test_older_layouts():
    code, lines = arp("-b", "14336", "-e", "14336", "-g", "8", "--format", "2.13")
    assert code == 0 and not lines[0].startswith("# nccl-tests version")
    assert "warmup iters: 5" in lines[0] and re.match(r"#  Rank  0 Group  0 Pid +\d+ on +\S+ device  0 "
                                                      r"\[0x18\] ", lines[3])
    assert next(ln for ln in lines if "#wrong" in ln).split()[6:] == [
        "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"]
    assert rows(lines)[0][2:5] == ["float", "sum", "-1"] and lines[-3:] == ["#", "", ""]
    code, lines = arp("-b", "14336", "-e", "14336", "-g", "8", "--format", "2.11")
    header = next(ln for ln in lines if " error" in ln)
    assert header.split() == ["#", "size", "count", "type", "redop", "time", "algbw", "busbw",
                              "error", "time", "algbw", "busbw", "error"]
    assert re.match(r"#   Rank  0 Pid +\d+ on +\S+ device  0 \[0x18\] ", lines[3])
    row = rows(lines)[0]
    assert len(row) == 12 and row[7] == "0e+00" and row[11] == "0e+00"
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", "--format", "2.13", "-J", "x.json")
    assert code == 0 and lines[0] == "invalid option 'J'" and not rows(lines)  # -J came in 2.18


def test_per_iteration_columns_and_json(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("taken")  # nccl-tests then tries out.json.0
    code, lines = arp("-b", "14336", "-e", "28672", "-f", "2", "-g", "8", "-d", "bfloat16",
                      "-n", "50", "-I", "1", "-J", str(target))
    assert code == 0 and lines[0] == f"# Writing JSON output to {target}.0"
    assert any(ln.startswith("# Per-Iteration Report: CUDA event timing") for ln in lines)
    header = next(ln for ln in lines if "i_cv%" in ln).split()
    assert header[10:14] == ["i_min", "i_max", "i_p99", "i_cv%"] and len(header) == 22
    table = rows(lines)
    assert len(table[0]) == 21
    i_min, i_max, i_p99 = (float(v) for v in table[0][9:12])
    assert i_min <= float(table[0][5]) <= i_max and i_p99 <= i_max
    data = json.loads((tmp_path / "out.json.0").read_text())
    assert list(data) == ["version", "start_time", "args", "env", "nccl_version", "config", "results",
                          "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"]
    assert data["version"] == 3 and data["nccl_version"] == 22703
    assert data["config"]["ngpus"] == 8 and len(data["config"]["devices"]) == 1
    first = data["results"][0]
    assert (first["size"], first["type"], first["root"]) == (14336, "bfloat16", "    -1")
    assert first["out_of_place"]["time"] == pytest.approx(float(table[0][5]), abs=0.006)
    assert first["out_of_place"]["nwrong"] == 0
    assert len(first["out_of_place_per_iter"]["times_us"]) == 50
    assert data["out_of_bounds"] == {"count": 0, "okay": "true"}  # jsonBool writes strings


def test_corrupting_set_reports_wrong_values():
    env = {"NCCL_PROTO": "LL128"}  # forced on PCIe, where NCCL keeps it off
    code, lines = arp("-b", "8", "-e", "1M", "-f", "4", "-g", "8", env=env)
    assert code == 7 and all(int(r[8]) > 0 and int(r[12]) > 0 for r in rows(lines))
    assert f"# Out of bounds values : {2 * len(rows(lines))} FAILED" in lines  # each half counts
    assert lines[-2].startswith(" .. ") and "Test failure common.cu:1454" in lines[-2]
    code, lines = arp("-b", "64K", "-e", "64M", "-f", "32", "-g", "8", "--format", "2.13",
                      env={"NCCL_PROTO": "^Simple"})  # LL128 only where it wins: large sizes
    wrong = [float(r[8]) for r in rows(lines)]  # %5g: 5.59241e+06 as nccl-tests prints it
    assert code == 1 and wrong[0] == 0 and wrong[-1] > 0
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", "-c", "0", env=env)
    assert code == 0 and rows(lines)[0][8] == "N/A"


def test_same_landscape_as_serve():
    def t(env):
        return float(rows(arp("-b", "14336", "-e", "14336", "-g", "8", "--noise", "0", env=env)[1])[0][5])

    base = t({})
    assert t({"NCCL_P2P_LEVEL": "SYS"}) < base * 0.9 < base < t({"NCCL_PROTO": "Simple"})
    assert t({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) == pytest.approx(base, rel=0.03)


def test_nccl_lines_only_when_asked():
    code, lines = arp("-b", "14336", "-e", "14336", "-g", "8")
    assert not [ln for ln in lines if " NCCL " in ln]
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING", "NCCL_PROTO": "LL,Simple"}
    code, lines = arp("-b", "14336", "-e", "14336", "-g", "8", env=env)
    ranks = {int(m.group(1)) for ln in lines if (m := re.match(r"\S+:\d+:\d+ \[(\d)\] NCCL INFO", ln))}
    assert code == 0 and ranks == set(range(8))
    assert sum("NCCL INFO NCCL_PROTO set by environment to LL,Simple" in ln for ln in lines) == 8
    assert any(ln.endswith("NCCL INFO AllReduce: 14336 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}")
               for ln in lines)


def test_refusals_and_faults_in_process():
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", env={"NCCL_ALGO": "Rung"})
    assert code == 3 and re.search(r"Test NCCL failure common\.cu:\d+ 'invalid usage \(run with "
                                   r"NCCL_DEBUG=WARN for details\) / Unrecognized element token", "\n".join(lines))
    assert not rows(lines)
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", env={"NCCL_ALGO": "NVLS", "NCCL_DEBUG": "WARN"})
    assert code == 3 and any("NCCL WARN Error : no algorithm/protocol available for function AllReduce "
                             "with datatype ncclFloat32. NCCL_ALGO was set to NVLS." in ln for ln in lines)
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", "--fault", "crash-start")
    assert code == 2 and any("Test CUDA failure" in ln for ln in lines)
    code, lines = arp("-b", "8", "-e", "8", "-g", "16")
    assert code == 5
    code, lines = arp("-b", "8", "-e", "8", "-g", "8", "-d", "float8")
    assert lines[0] == "invalid type float8, defaulting to float .. " and rows(lines)[0][2] == "float"
    assert arp("-b", "2M", "-e", "1M")[0] == 2


def test_hang_start_and_zero_chunk_in_real_processes():
    proc = subprocess.Popen([sys.executable, "-m", "tuner.sim", "all-reduce-perf", "-b", "8",
                             "-e", "8", "-g", "8", "--fault", "hang-start"], cwd=ROOT, env=sim_env(),
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(1.5)
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    assert "# Using devices" in out and "#wrong" not in out
    done = run_sim("all-reduce-perf", "-b", "64M", "-e", "64M", "-g", "8", env={"NCCL_BUFFSIZE": "4M"})
    assert done.returncode == -signal.SIGFPE  # Simple's chunk rounds down to 0 bytes


def test_cli_entry_names_itself():
    done = run_sim("all-reduce-perf", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m tuner.sim all-reduce-perf")
