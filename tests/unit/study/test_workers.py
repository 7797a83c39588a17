"""This host's worker registry (tuner.study.workers): real worker processes registering in a real
folder, a second one on the same GPUs refused naming the first, disjoint GPUs allowed, the file
a SIGKILLed worker left ignored and removed, and NVML's compute processes on the GPUs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers import ROOT
from tuner.errors import ExitCode, GpusInUse
from tuner.inputs.config import load_config
from tuner.study.inflight import host_name
from tuner.study.workers import (
    Gpus,
    Worker,
    check_processes,
    dry_run_lines,
    gpus_of,
    live_workers,
    register,
    this_worker,
)

SIM = ROOT / "examples" / "sim.toml"

#: A worker process: registers itself as nccl-tune's CLI does, says so, then waits to be killed.
WORKER = """
import sys, time
from pathlib import Path
from tuner.inputs.config import load_config
from tuner.study.workers import register, this_worker, workers_dir
cfg = load_config(sys.argv[1], resolve_space=False)
register(this_worker(cfg, study=sys.argv[2], results=Path("results"), storage=None), workers_dir())
print("REGISTERED", flush=True)
time.sleep(600)
"""


@pytest.fixture
def start_worker() -> Iterator:
    """Factory: ``start_worker(gpus, study="a", config=SIM)`` -> a live registered worker process
    whose environment has ``CUDA_VISIBLE_DEVICES=gpus`` (None: unset); killed afterwards."""
    procs: list[subprocess.Popen] = []

    def start(gpus: str | None, study: str = "a", config: Path = SIM) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        env["PYTHONPATH"] = str(ROOT)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        proc = subprocess.Popen([sys.executable, "-c", WORKER, str(config), study], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "REGISTERED", proc.communicate()[1]
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.communicate()


def _copy(tmp_path: Path, port: int, gpus: str | None = None, simulator: bool = True) -> Path:
    """examples/sim.toml copied with only its port changed (the 2 a.m. fix for a busy port), and
    with ``gpus`` its ``server.env`` CUDA_VISIBLE_DEVICES; not ``simulator``: a command that is not
    the bundled simulator (a real server's, never launched here)."""
    text = SIM.read_text().replace("port = 8477", f"port = {port}")
    if not simulator:
        text = text.replace('"-m", "tuner.sim", "serve"', '"-m", "my_server", "serve"')
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT / "search_spaces" / "default.toml"}"')
    if gpus is not None:
        text = text.replace("teardown_grace_s = 10\n", f'teardown_grace_s = 10\nenv = {{ CUDA_VISIBLE_DEVICES = "{gpus}" }}\n')
    path = tmp_path / f"sim-{port}.toml"
    path.write_text(text)
    return path


def _me(tmp_path: Path, gpus: str | None, port: int = 8478, study: str = "a", simulator: bool = True) -> Worker:
    cfg = load_config(_copy(tmp_path, port, gpus, simulator), resolve_space=False)
    return this_worker(cfg, study=study, results=tmp_path / "r", storage=None, environ={})


def test_which_gpu_lists_share_a_gpu_without_nvml():
    """CUDA's reading of the list: indices (leading zeros dropped), UUID prefixes, the list cut
    at its first invalid name; unset is every GPU and an empty list none."""
    def shared(a: str | None, b: str | None) -> bool:
        return Gpus(a).overlaps(Gpus(b)) and Gpus(b).overlaps(Gpus(a))

    assert shared(None, None) and shared(None, "3") and shared("0,1", "1,2") and shared("00", "0")
    assert not shared("0,1", "2,3") and not shared(None, "") and not shared("", "")
    assert not shared("0,-1,1", "1")  # CUDA sees only GPU 0 of "0,-1,1"
    assert shared("GPU-5f3c", "GPU-5f3c0e2a-1111-2222-3333-444444444444") and not shared("GPU-5f3c", "GPU-77")
    assert shared("0", "GPU-5f3c")  # an index and a UUID cannot be told apart without NVML
    assert shared("MIG-1234", "MIG-1234") and not shared("MIG-1234", "MIG-5678")
    assert Gpus("0, 2 ,2,x,3").names() == ["0", "2"]
    assert Gpus("", "the environment").text() == 'no GPU (CUDA_VISIBLE_DEVICES="" from the environment)'


def test_with_nvml_an_index_and_its_uuid_are_one_gpu(tmp_path: Path, nvml):
    nvml(["NVIDIA H100 80GB HBM3"] * 4)
    assert _me(tmp_path, "1").gpus.uuids == ("GPU-1aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",)
    assert _me(tmp_path, "GPU-1aaa").gpus.overlaps(_me(tmp_path, "1").gpus)
    assert not _me(tmp_path, "GPU-1aaa").gpus.overlaps(_me(tmp_path, "0,2,3").gpus)
    assert len(_me(tmp_path, None).gpus.uuids or ()) == 4  # unset: every GPU NVML sees


def test_a_copy_with_only_the_port_changed_is_refused_naming_the_live_worker(tmp_path: Path, workers_dir: Path,
                                                                             start_worker):
    first = start_worker("0,1")
    [live] = live_workers(workers_dir)
    assert live.pid == first.pid and live.port == 8477 and live.study == "a" and live.gpus.visible == "0,1"
    with pytest.raises(GpusInUse) as err:
        register(_me(tmp_path, "1,2"), workers_dir)
    text = str(err.value)
    assert err.value.exit_code is ExitCode.MACHINE_NOT_CLEAN and err.value.pids == [first.pid]
    assert f"pid {first.pid} (nccl-tune sweep, study 'a', config examples/sim.toml, port 8477, CUDA_VISIBLE_DEVICES=0,1 " \
           "from the environment, started " in text
    assert "this worker's GPUs (CUDA_VISIBLE_DEVICES=1,2 from server.env)" in text
    assert f"kill {first.pid}" in text and "CUDA_VISIBLE_DEVICES in server.env" in text
    assert [w.pid for w in live_workers(workers_dir)] == [first.pid]  # the refused one wrote nothing
    with pytest.raises(GpusInUse):
        register(_me(tmp_path, None, simulator=False), workers_dir)  # unset: every GPU, 0 and 1 included


def test_the_simulator_told_no_gpus_on_a_host_without_nvml_holds_none(tmp_path: Path, workers_dir: Path,
                                                                      start_worker):
    """make demo beside a night elsewhere on a host without a GPU: the simulator, CUDA_VISIBLE_DEVICES
    unset, shares no GPU with a live worker on every GPU (nor that one with it); told GPUs, it stands
    in for a server on them and is refused as one."""
    real = tmp_path / "real.toml"
    real.write_text(_copy(tmp_path, 8490, simulator=False).read_text())
    first = start_worker(None, config=real)
    demo = _me(tmp_path, None)
    assert demo.gpus.simulated and demo.gpus.text() == "no GPU (the simulator, on a host without NVML)"
    held = register(demo, workers_dir)
    assert held.path is not None and json.loads(held.path.read_text())["gpus"]["simulated"] is True
    assert [w.pid for w in live_workers(workers_dir)] == [first.pid, os.getpid()]
    assert not _me(tmp_path, None, simulator=False).gpus.overlaps(live_workers(workers_dir)[1].gpus)
    held.release()
    for spelled in ("0", "0,1"):
        with pytest.raises(GpusInUse):
            register(_me(tmp_path, spelled), workers_dir)


def test_with_nvml_the_simulator_told_no_gpus_is_on_every_gpu(tmp_path: Path, nvml):
    nvml(["NVIDIA H100 80GB HBM3"] * 2)
    assert not _me(tmp_path, None).gpus.simulated


def test_disjoint_gpus_are_allowed_and_the_file_goes_at_the_end(tmp_path: Path, workers_dir: Path, start_worker):
    first = start_worker("0,1")
    held = register(_me(tmp_path, "2,3"), workers_dir)
    assert held.path is not None and held.path.name == f"{host_name()}-{os.getpid()}.json"
    data = json.loads(held.path.read_text())
    assert data["gpus"]["visible"] == "2,3" and data["port"] == 8478 and data["config"].endswith("sim-8478.toml")
    assert [w.pid for w in live_workers(workers_dir)] == [first.pid, os.getpid()]
    held.release()
    held.release()  # again: nothing left to remove
    assert [w.pid for w in live_workers(workers_dir)] == [first.pid]


def test_a_killed_workers_file_is_ignored_and_removed(tmp_path: Path, workers_dir: Path, start_worker):
    killed = start_worker("0,1")
    stale = workers_dir / f"{host_name()}-{killed.pid}.json"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert stale.exists() and live_workers(workers_dir) == []  # left behind, and not live
    held = register(_me(tmp_path, "0,1"), workers_dir)
    assert not stale.exists() and held.path is not None and held.path.exists()
    held.release()


def test_a_reused_pid_or_another_hosts_file_is_not_a_live_worker(tmp_path: Path, workers_dir: Path, start_worker):
    """A file whose pid now runs another process (its start time differs) is dead and removed;
    a file of another host (a home shared over NFS) is neither live nor removed."""
    other = start_worker("5")
    me = _me(tmp_path, "0")
    reused = workers_dir / "reused.json"
    reused.write_text(json.dumps({**me.to_json(), "pid": other.pid, "create_time": time.time() - 3600}))
    elsewhere = workers_dir / "gpu99-1.json"
    elsewhere.write_text(json.dumps({**me.to_json(), "host": "gpu99"}))
    (workers_dir / "junk.json").write_text("{not json")
    assert [w.pid for w in live_workers(workers_dir)] == [other.pid]
    register(me, workers_dir).release()
    assert not reused.exists() and elsewhere.exists()


def test_a_registry_file_holds_no_secret(tmp_path: Path, workers_dir: Path):
    cfg = load_config(_copy(tmp_path, 8478), resolve_space=False)
    url = "postgresql://nccl:hunter2-pass@db:5432/nccl_tune"
    held = register(this_worker(cfg, study="a", results=tmp_path / "r", storage=url,
                                environ={"HF_TOKEN": "hf_abcdefgh"}), workers_dir)
    assert held.path is not None
    text = held.path.read_text()
    assert "hunter2" not in text and "postgresql://nccl:***@db:5432/nccl_tune" in text and "hf_abc" not in text
    held.release()


def test_a_compute_process_on_the_gpus_that_is_not_ours_refuses(tmp_path: Path, workers_dir: Path, nvml,
                                                                start_worker):
    """NVML lists a stranger's process on GPU 1, a live worker's on GPU 2 and a child of this
    process on GPU 0: the stranger and the worker's are reported (pid, GPU, memory, whose);
    our own child never is."""
    # the stranger is no descendant of this process: started by a parent that exits at once
    spawn = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
             "start_new_session=True, stdin=subprocess.DEVNULL, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)")
    stranger = psutil.Process(int(subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True,
                                                 check=True).stdout))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        worker = start_worker("2", study="night")
        nvml(["NVIDIA H100 80GB HBM3"] * 4, processes={0: [child.pid], 1: [stranger.pid], 2: [worker.pid]})
        check_processes(gpus_of(load_config(_copy(tmp_path, 8478, "0,3"), resolve_space=False)), workers_dir)
        with pytest.raises(GpusInUse) as err:
            check_processes(gpus_of(load_config(_copy(tmp_path, 8478, "0,1"), resolve_space=False)), workers_dir)
        text = str(err.value)
        assert err.value.pids == [stranger.pid] and f"GPU 1 (GPU-1aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee) runs pid " \
            f"{stranger.pid} (python" in text and "1024 MiB" in text and f"stop that process (pid {stranger.pid})" in text
        with pytest.raises(GpusInUse) as err:
            check_processes(gpus_of(load_config(_copy(tmp_path, 8478, "2"), resolve_space=False)), workers_dir)
        assert f"the server of nccl-tune worker pid {worker.pid} (nccl-tune sweep, study 'night'" in str(err.value)
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()  # a pid this host no longer shows (as a process of another container): still reported
        nvml(["NVIDIA H100 80GB HBM3"] * 4, processes={3: [gone.pid]})
        with pytest.raises(GpusInUse) as err:
            check_processes(gpus_of(load_config(_copy(tmp_path, 8478, "3"), resolve_space=False)), workers_dir,
                            settle_s=0)
        assert f"runs pid {gone.pid} (not visible here: another container's?)" in str(err.value)
    finally:
        stranger.kill()
        child.kill()
        child.wait()


def test_the_dry_run_says_which_gpus_and_who_holds_them(tmp_path: Path, workers_dir: Path, start_worker):
    cfg = load_config(_copy(tmp_path, 8478, "0,1"), resolve_space=False)
    assert dry_run_lines(cfg, dict(os.environ)) == [
        "GPUs: CUDA_VISIBLE_DEVICES=0,1 from server.env; no other live nccl-tune worker on this host."]
    start_worker("4")
    assert dry_run_lines(cfg, dict(os.environ)) == [
        "GPUs: CUDA_VISIBLE_DEVICES=0,1 from server.env; 1 other live nccl-tune worker on this host, on other GPUs."]
    first = start_worker("1")
    head, line = dry_run_lines(cfg, dict(os.environ))
    assert head == "GPUs: CUDA_VISIBLE_DEVICES=0,1 from server.env; the sweep would be refused (exit 3) while they are in use:"
    assert line.startswith(f"  - by nccl-tune worker pid {first.pid} (nccl-tune sweep, study 'a', config examples/sim.toml, port 8477")
    assert line.endswith(f"give this worker other GPUs (CUDA_VISIBLE_DEVICES) or stop that one (kill {first.pid})")
    assert psutil.pid_exists(first.pid)
