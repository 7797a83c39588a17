"""What every launch adds for NCCL's log, and the console's proof line."""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.inputs.config import load_config
from tuner.sweep.evidence import debug_env, debug_file, nccl_dir
from tuner.sweep.progress import proof_line


def config(tmp_path: Path, server_env: str = "", nccl: str = "") -> object:
    path = tmp_path / "exp.toml"
    path.write_text(f"""
[server]
command = ["{sys.executable}", "-c", "pass"]
{server_env}
[sweep]
space = "{Path(__file__).resolve().parents[3] / 'search_spaces' / 'safe.toml'}"
{nccl}
""")
    return load_config(path)


def test_every_launch_gets_its_own_nccl_files_and_whole_lines(tmp_path):
    cfg = config(tmp_path)
    log = tmp_path / "logs" / "trial-0003.log"
    (nccl_dir(log)).mkdir(parents=True)
    (nccl_dir(log) / "h.1.log").write_text("a first attempt's file\n")
    env = debug_env(cfg, log)
    assert env == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH", "PYTHONUNBUFFERED": "1",
                   "RAY_DEDUP_LOGS": "0", "NCCL_DEBUG_FILE": str(tmp_path.resolve() / "logs" / "trial-0003.nccl" /
                                                                 "%h.%p.log")}
    assert list(nccl_dir(log).iterdir()) == []  # a retried launch reads no file of the first
    assert debug_file(cfg, log) == env["NCCL_DEBUG_FILE"]


def test_the_users_own_logging_is_kept(tmp_path):
    cfg = config(tmp_path, 'env = { NCCL_DEBUG = "WARN", NCCL_DEBUG_FILE = "/data/n.%h.%p", RAY_DEDUP_LOGS = "1" }')
    log = tmp_path / "trial-0001.log"
    assert debug_env(cfg, log) == {"PYTHONUNBUFFERED": "1"}
    assert debug_file(cfg, log) == "/data/n.%h.%p" and not nccl_dir(log).exists()


def test_debug_false_adds_nothing(tmp_path):
    cfg = config(tmp_path, nccl="[nccl]\ndebug = false")
    assert debug_env(cfg, tmp_path / "t.log") == {} and debug_file(cfg, tmp_path / "t.log") is None


def test_the_proof_line_says_one_outcome_once():
    why = "ranks 1-7 logged communicator init but never echoed {}: 1 echo for 8 ranks."
    rows = [{"name": n, "status": "not applied", "ranks": "0 (1/8)", "source": "NCCL_DEBUG_FILE x1",
             "why": why.format(n)} for n in ("NCCL_ALGO", "NCCL_PROTO")]
    rows.append({"name": "NCCL_BUFFSIZE", "status": "confirmed", "ranks": "0-7 (8/8)", "source": "server log x8",
                 "why": ""})
    assert proof_line(rows) == ("NCCL_ALGO, NCCL_PROTO not applied, echoed by 0 (1/8) [NCCL_DEBUG_FILE x1]: ranks 1-7 logged "
                                "communicator init but never echoed them: 1 echo for 8 ranks; NCCL_BUFFSIZE confirmed, "
                                "echoed by 0-7 (8/8) [server log x8]")


def test_a_users_subsystems_are_kept_with_init_and_env_added(tmp_path):
    cfg = config(tmp_path, 'env = { NCCL_DEBUG_SUBSYS = "GRAPH,init" }')
    assert debug_env(cfg, tmp_path / "t.log")["NCCL_DEBUG_SUBSYS"] == "GRAPH,init,ENV"
