"""One screen command as real processes: output to the log and the callback, secrets scrubbed,
the whole tree gone after a timeout or an exit (a setsid'd grandchild ignoring SIGTERM too),
the -h probe for -J, the private JSON folder."""

from __future__ import annotations

import os
import stat
import sys

import psutil
import pytest

from tests.helpers import SERVERS, alive_pids
from tuner.screen import run as screen_run
from tuner.screen.run import private_json_path, program_index, run_command, screen_env, screenable, supports_json

PY = sys.executable
# A child that leaves the group (setsid), ignores SIGTERM and prints its pid, then the parent waits.
ESCAPE = ("import os, signal, subprocess, sys, time\n"
          "code = 'import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
          "print(os.getpid(), flush=True); time.sleep(60)'\n"
          "p = subprocess.Popen([sys.executable, '-c', code])\n"
          "time.sleep(0.5)\n"
          "print('parent', os.getpid(), flush=True)\n"
          "time.sleep(float(sys.argv[1]))\n")


def _pids(text: str) -> list[int]:
    return [int(w) for line in text.splitlines() for w in line.split() if w.isdigit()]


def test_output_goes_to_the_log_and_the_callback_with_secrets_scrubbed(tmp_path):
    seen: list[str] = []
    env = {**os.environ, "HF_TOKEN": "hf_abcdef123456"}
    done = run_command([PY, "-c", "import os; print('row', os.environ['HF_TOKEN']); print('second')"], env,
                       tmp_path / "s" / "0001.log", 10, on_line=seen.append, header=("set: {}",))
    assert done.exit_code == 0 and not done.killed_at_timeout and done.survivors == ()
    assert seen == ["row ***", "second"] and done.text == "row ***\nsecond\n"
    log = (tmp_path / "s" / "0001.log").read_text()
    assert log.startswith("[nccl-tune] argv: ") and "[nccl-tune] set: {}" in log and "hf_abcdef123456" not in log
    assert log.rstrip().endswith("exit status 0; 0 process(es) survived the teardown")


def test_a_hang_is_killed_at_the_timeout_tree_and_all(tmp_path):
    done = run_command([PY, "-c", ESCAPE, "60"], dict(os.environ), tmp_path / "hang.log", 2.0)
    assert done.killed_at_timeout and done.exit_code is not None and done.exit_code < 0
    # ended by the kill at 2 s, not by the command's own exit after 60 s
    assert "killed at the timeout of 2 s; 0 process(es) survived" in (tmp_path / "hang.log").read_text()
    assert done.survivors == ()
    assert not alive_pids(_pids(done.text))


def test_what_a_finished_command_left_behind_is_torn_down(tmp_path):
    done = run_command([PY, "-c", ESCAPE, "0"], dict(os.environ), tmp_path / "exit.log", 20.0)
    assert done.exit_code == 0 and not done.killed_at_timeout
    pids = _pids(done.text)
    assert len(pids) == 2 and not alive_pids(pids)


def test_a_program_that_cannot_start(tmp_path):
    done = run_command(["/no/such/all_reduce_perf"], {}, tmp_path / "x.log", 5)
    assert done.exit_code is None and "could not start /no/such/all_reduce_perf" in done.start_error
    assert "could not start" in (tmp_path / "x.log").read_text()


def test_the_screen_environment_follows_the_servers_rules():
    env, removed = screen_env({"NCCL_PROTO": "Simple", "CUDA_DEVICE_MAX_CONNECTIONS": "4", "PATH": "/bin"},
                              {"NCCL_DEBUG": "WARN"}, {"NCCL_ALGO": "Ring"})
    assert env == {"PATH": "/bin", "NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring"}
    assert removed == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_PROTO"]
    assert screenable("NCCL_PROTO") and not screenable("CUDA_DEVICE_MAX_CONNECTIONS")
    assert not screenable("--disable-custom-all-reduce")


def test_the_json_probe(tmp_path, monkeypatch):
    standin = [PY, str(SERVERS / "allreduce_standin.py"), "-b", "8", "-e", "8"]
    ok, why = supports_json(standin, dict(os.environ), tmp_path / "h1.log")
    assert ok and "2.17.3" in why
    old = [PY, "-c", "print('USAGE: all_reduce_perf\\n\\t[-t,--nthreads <num threads>]')"]
    assert supports_json(old, dict(os.environ), tmp_path / "h2.log") == (False, "-h does not list -J (nccl-tests "
                                                                                 "before 2.17.3)")
    monkeypatch.setattr(screen_run, "PROBE_TIMEOUT_S", 1.0)
    ok, why = supports_json([PY, "-c", "import time; time.sleep(30)"], dict(os.environ), tmp_path / "h3.log")
    assert not ok and "did not finish" in why


def test_program_index_skips_wrappers():
    assert program_index(["mpirun", "-np", "8", "/opt/nccl-tests/build/all_reduce_perf_mpi", "-b", "8"]) == 3
    assert program_index(["{python}", "-m", "tuner.sim", "all-reduce-perf"]) == 3
    assert program_index(["python", "x.py"]) is None


def test_the_json_folder_is_private_and_removed():
    with private_json_path() as path:
        folder = path.parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        path.write_text('{"env": ["HF_TOKEN=x"]}')
    assert not folder.exists()


@pytest.fixture(autouse=True)
def _nothing_left():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    after = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not alive_pids(after)
