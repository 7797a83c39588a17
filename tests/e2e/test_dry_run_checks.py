"""``--dry-run`` makes the checks the sweep makes before its first launch, with the sweep's own
functions: the same refusals with the same exit statuses and words, the same warning, a list
of what ran and what did not; and off the night's host (the server's program not on PATH) it
says what it could not check instead of failing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT, cli, free_port
from tuner.study import open_study

SPACE = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n'
TOPO = ROOT / "tests" / "fixtures" / "nccl_xml" / "topo8-2cpu.xml"


def _config(tmp_path: Path, command: list[str], *, port: int | None = None, env: str = "") -> Path:
    (tmp_path / "space.toml").write_text(SPACE)
    path = tmp_path / "night.toml"
    argv = ", ".join(f'"{a}"' for a in command)
    path.write_text(f"[server]\ncommand = [{argv}]\nport = {port or free_port()}\nready_timeout_s = 20\n"
                    f"teardown_grace_s = 3\n{env}\n[sweep]\nspace = \"{tmp_path / 'space.toml'}\"\ntrials = 4\n")
    return path


def _error_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("nccl-tune: "))


def test_the_checks_that_ran_are_listed_and_nothing_is_written(tmp_path):
    cfg = _config(tmp_path, [sys.executable, "-c", "pass", "--port", "{port}"],
                  env=f'env = {{ NCCL_TOPO_FILE = "{TOPO}" }}')
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    at = lines.index("Checks the sweep makes before its first launch, made here:")
    checks = lines[at:]
    port = cfg.read_text().split("port = ")[1].split()[0]
    for expected in (f"  passed: the experiment file and {tmp_path / 'space.toml'}: every key, the command's "
                     "placeholders and every value as NCCL reads it (above)",
                     "  passed: server.env fixes no variable the space varies; the budget of 4 relaunches holds the "
                     "baseline, up to 1 set and the reserved checks",
                     f"  passed: server.command's program {Path(sys.executable).name}: found",
                     f"  passed: server.command's port: {{port}} is filled with server.port {port}",
                     f"  passed: server.env NCCL_TOPO_FILE={TOPO}: read as NCCL reads it",
                     f"  passed: --results {tmp_path / 'r'}: can be created in {tmp_path}",
                     f"  passed: no other runner sweeps study 'night' on this host and port {port}",
                     f"  passed: port {port} on 127.0.0.1: nothing answers"):
        assert expected in checks, "\n".join(checks)
    assert checks[-1] in ("Nothing failed: the night can start.",
                          "Nothing failed; what could not be checked here is listed above.")  # NVML or not
    assert not any(line.startswith("  warning:") for line in checks)
    assert not (tmp_path / "r").exists()


def test_a_command_without_a_port_gets_the_sweeps_warning(tmp_path):
    cfg = _config(tmp_path, [sys.executable, "-c", "raise SystemExit(1)"])
    dry = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert dry.returncode == 0, dry.stderr
    warned = [line.strip() for line in dry.stdout.splitlines() if line.startswith("  warning:")]
    port = cfg.read_text().split("port = ")[1].split()[0]
    assert warned == [f'warning: server.command has neither "{{port}}" nor the port {port}: unless the server '
                      'listens there by default, write "--port", "{port}" in the command'], dry.stdout
    assert "  passed: server.command's port: none passed (see the warning)" in dry.stdout
    # the sweep says the same words before its first launch (whose server then exits at once: exit 4)
    night = cli("sweep", str(cfg), "--results", str(tmp_path / "r"))
    assert night.returncode == 4, night.stdout + night.stderr
    assert warned[0] in night.stderr, night.stderr


def test_a_busy_port_is_refused_as_the_sweep_refuses_it_naming_the_holder(tmp_path):
    port = free_port()
    cfg = _config(tmp_path, [sys.executable, "-c", "pass", "--port", "{port}"], port=port)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        dry = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
        night = cli("sweep", str(cfg), "--results", str(tmp_path / "night"))
    assert dry.returncode == 3 and night.returncode == 3, dry.stderr + night.stderr
    said = _error_line(dry.stderr)
    assert said.startswith(f"nccl-tune: port {port} on 127.0.0.1 already answers, held by pid {os.getpid()} (")
    assert said.endswith("stop that server or choose another server.port before sweeping"), said
    assert said == _error_line(night.stderr)
    assert dry.stdout == "" and "Traceback" not in dry.stderr and not (tmp_path / "r").exists()


def test_paths_are_checked_all_at_once_as_the_sweep_checks_them(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    cfg = _config(tmp_path, [sys.executable, "-c", "pass", "--model", str(tmp_path / "no-model"), "--port", "{port}"],
                  env=f'env = {{ NCCL_GRAPH_FILE = "{tmp_path / "no-graph.xml"}" }}')
    results = tmp_path / "a-file" / "r"
    dry = cli("sweep", str(cfg), "--dry-run", "--results", str(results))
    night = cli("sweep", str(cfg), "--results", str(results))
    assert dry.returncode == 2 and night.returncode == 2, dry.stderr + night.stderr
    err = dry.stderr
    assert err == night.stderr and err.startswith("nccl-tune: error: 3 problems:"), err
    assert f"the model path {tmp_path / 'no-model'} in server.command does not exist" in err
    assert (f"key 'server.env.NCCL_GRAPH_FILE' has value '{tmp_path / 'no-graph.xml'}' (file not found: "
            f"{tmp_path / 'no-graph.xml'}; NCCL would go on without it)") in err
    assert (f"(command line): key '--results' has value '{results}' ({tmp_path / 'a-file'} is a file, not a folder); "
            "accepted: a folder nccl-tune can create and write.") in err
    assert dry.stdout == "" and "Traceback" not in err


def test_a_live_runner_of_the_study_is_refused_as_its_claim_is(tmp_path):
    port = free_port()
    cfg = _config(tmp_path, [sys.executable, "-c", "pass", "--port", "{port}"], port=port)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom tuner.study import RunnerFile\n"
         f"held = RunnerFile(Path(sys.argv[1]), {port})\nheld.claim('night')\nprint('held', flush=True)\n"
         "time.sleep(120)\n",
         str(tmp_path / "r" / "night")], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        dry = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
        night = cli("sweep", str(cfg), "--results", str(tmp_path / "r"))
    finally:
        holder.kill()
        holder.wait()
    assert dry.returncode == 3 and night.returncode == 3, dry.stderr + night.stderr
    said = _error_line(dry.stderr)
    assert said == (f"nccl-tune: another nccl-tune runner (pid {holder.pid}) is sweeping study 'night' on this host and "
                    f"port {port}; wait for it, stop it, or use another server.port"), said
    assert said == _error_line(night.stderr) and dry.stdout == ""
    # killed, the runner leaves its file but no lock: not a live runner, as the sweep's claim finds
    left = next((tmp_path / "r" / "night" / "runners").glob("*.json"))
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert f"  passed: no other runner sweeps study 'night' on this host and port {port}" in res.stdout
    assert left.exists()


def test_a_stored_study_is_named_as_not_compared_and_left_untouched(tmp_path):
    cfg = _config(tmp_path, [sys.executable, "-c", "pass", "--port", "{port}"])
    db = tmp_path / "r" / "night" / "study.db"
    db.parent.mkdir(parents=True)
    open_study("night", f"sqlite:///{db}")
    before = db.read_bytes()
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert (f"  not checked: study 'night' in {db}: its stored settings (format version, server command and env, "
            "space, metric) were not compared, since the dry run opens no storage (it writes nothing); the sweep "
            "compares them when it opens it and refuses a change (exit 2)") in res.stdout, res.stdout
    assert db.read_bytes() == before and sorted(p.name for p in db.parent.iterdir()) == ["study.db"]


def test_without_vllm_on_path_it_says_what_it_could_not_check(tmp_path):
    bare = tmp_path / "bin"  # a PATH without vllm
    bare.mkdir()
    env = {**os.environ, "PATH": str(bare)}
    assert shutil.which("vllm", path=str(bare)) is None
    config = str(ROOT / "examples" / "vllm-tp8.toml")
    res = cli("sweep", config, "--dry-run", "--results", str(tmp_path / "r"), env=env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Relaunches in order: 1. the untuned baseline" in out  # the plan, as with vllm
    assert ("  not checked: vllm is not on PATH: the server's version and flags were not checked; the sweep will: it "
            "refuses to start where vllm is not found (exit 2), and its baseline launch tries the flags and logs the "
            "version") in out, out
    assert ("  not judged here (vllm is not on PATH, so this is not taken for the night's host; the sweep checks these "
            "there before its first launch):") in out
    if not Path("/models/kimi-k2.5-int4").exists():
        assert "    - the model path /models/kimi-k2.5-int4: it does not exist here" in out
    assert "    - port 8000 on 127.0.0.1: " in out
    assert "  passed: server.command's port: {port} is filled with server.port 8000" in out
    assert out.splitlines()[-1] == "Nothing that can be checked off the night's host failed."
    assert not (tmp_path / "r").exists()
    # the sweep itself refuses to start there, as the line says
    night = cli("sweep", config, "--results", str(tmp_path / "r"), env=env)
    assert night.returncode == 2 and """key 'server.command[0]' has value "vllm" (not on PATH)""" in night.stderr


def test_with_vllm_on_path_a_missing_model_path_is_refused(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"  # a real executable of that name: this is taken for the night's host
    vllm.write_text("#!/bin/sh\nexit 1\n")
    vllm.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if Path("/models/kimi-k2.5-int4").exists():
        return  # the model is here: nothing to refuse
    res = cli("sweep", str(ROOT / "examples" / "vllm-tp8.toml"), "--dry-run", "--results", str(tmp_path / "r"), env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "the model path /models/kimi-k2.5-int4 in server.command does not exist" in res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
