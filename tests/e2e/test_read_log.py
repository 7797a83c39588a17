"""``nccl-tune read-log`` as a user runs it: the eight real logs at once, and a file that is not there."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.unit.readlog.facts import CHECKS, REALLOGS
from tuner.errors import ExitCode
from tuner.readlog import read_logs


def _read_log(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.cli", "read-log", *args], capture_output=True, text=True,
                          check=False)


def test_one_real_log_as_the_command_prints_it_is_the_function_s_object_and_its_facts():
    name = "05-ncclt321-h20vm-alltoall-2.26.5.log"
    proc = _read_log("--json", str(REALLOGS / name))
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == json.loads(json.dumps(read_logs([REALLOGS / name]).to_dict()))
    CHECKS[name](printed)


def test_all_eight_real_logs_at_once_give_one_object_holding_each():
    # each file alone through the function (the command prints its object: the test above)
    each = {name: json.loads(json.dumps(read_logs([REALLOGS / name]).to_dict())) for name in sorted(CHECKS)}
    proc = _read_log("--json", *(str(REALLOGS / name) for name in sorted(CHECKS)))
    assert proc.returncode == 0, proc.stderr
    whole = json.loads(proc.stdout)
    assert whole["files"] == [str(REALLOGS / name) for name in sorted(CHECKS)]
    assert whole["processes"] == sorted({p for d in each.values() for p in d["processes"]})
    assert whole["nccl_tests"] == [row for name in sorted(CHECKS) for row in each[name]["nccl_tests"]]
    peers = {(p["from"], p["to"], p["via"]) for d in each.values() for p in d["peers"]}
    assert {(p["from"], p["to"], p["via"]) for p in whole["peers"]} == peers
    assert whole["backend"] == "nccl"  # 09's and 13's vLLM
    assert whole["nccl_version"] in {d["nccl_version"] for d in each.values()} - {None}
    assert set(whole["echoes"]) == {name for d in each.values() for name in d["echoes"]}


def test_the_table_names_what_it_read():
    proc = _read_log(str(REALLOGS / "01-ncclt331-a100-sendrecv-2.22.3.log"))
    assert proc.returncode == 0, proc.stderr
    for said in ("2.22.3", "lrdn2296:4063850 (5 threads)", "NCCL_P2P_LEVEL", "NVL (ranks 0-1)",
                 "via P2P/direct pointer/read", "29: 8 B"):
        assert said in proc.stdout


def test_a_missing_file_is_one_paragraph_and_exit_2(tmp_path):
    missing = tmp_path / "gone.log"
    proc = _read_log("--json", str(REALLOGS / "01-ncclt331-a100-sendrecv-2.22.3.log"), str(missing))
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert str(missing) in proc.stderr and "could not be read" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
