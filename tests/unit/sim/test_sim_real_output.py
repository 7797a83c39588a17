"""``sim serve`` writing its NCCL lines as a real server does: a 4096-byte block buffer per process
on a shared pipe (cut mid-line, mixed, lost on SIGKILL), NCCL_DEBUG_FILE (one whole-line file per
process), and vLLM 0.8.2 on Ray (workers without the launch environment, lines folded by Ray)."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import time

import pytest

from tests.simproc import Sim, run_sim, sim_env
from tuner.sim.allreduceperf import main as all_reduce_perf
from tuner.sim.nccllog import DebugConfig, output_plan
from tuner.sim.ncclstdio import BLOCK_SIZE, BlockSink, FileSink, expand_debug_file, open_sink
from tuner.sim.raycluster import LogDeduplicator, canonical, copied_vars, worker_environ

HOST = socket.gethostname().split(".")[0]
# 64 channels: each worker logs between one and two blocks (checked below), rank 0 more than two
BIG = {"NCCL_DEBUG": "INFO", "NCCL_MIN_NCHANNELS": "64", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
SHUTDOWN = b"INFO:     Shutting down\n"


@pytest.fixture
def sim():
    started: list[Sim] = []

    def start(*args, **kw) -> Sim:
        s = Sim(*args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def prefix(pid: int) -> bytes:
    """How every NCCL line of the process ``pid`` starts (its main thread logs)."""
    return f"{HOST}:{pid}:{pid} [".encode()


def wait_for(s: Sim, needles: list[bytes], timeout=10.0) -> None:
    """Wait until each of ``needles`` reached the pipe (a condition, not a timing)."""
    deadline = time.monotonic() + timeout
    while not all(n in s.raw for n in needles):
        assert time.monotonic() < deadline, f"{needles} never arrived:\n{s.raw.decode(errors='replace')}"
        time.sleep(0.02)


def first_block(raw: bytes, pid: int) -> tuple[int, bytes]:
    """(offset, bytes) of the first 4096-byte write of worker ``pid``: it starts with the
    worker's first line (nothing of the worker can reach the pipe before it)."""
    start = raw.index(prefix(pid))
    return start, raw[start:start + BLOCK_SIZE]


def test_block_mode_cuts_lines_at_4096_bytes_and_mixes_them_with_other_output(sim):
    s = sim("--stdout-buffering", "block", env=BIG, workers=3, pipe=True)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    wait_for(s, [prefix(w) for w in workers])  # each worker's first full block
    s.proc.send_signal(signal.SIGTERM)  # the server alone: it logs, then stops its workers
    assert s.proc.wait(timeout=15) == 0
    raw = s.all_output()
    shutdown = raw.index(SHUTDOWN)
    after = raw[shutdown:].split(b"\n")
    cut = 0
    for pid in workers:
        start, block = first_block(raw, pid)
        assert start + BLOCK_SIZE <= shutdown  # written during the start, one piece
        *whole, head = block.split(b"\n")
        assert whole and all(line.startswith(prefix(pid)) for line in whole)
        # the rest came in one write at the worker's exit (after the server's own line), ending
        # with its last line; a line that straddled byte 4096 has its tail at the start of it
        end = next(i for i, ln in enumerate(after) if ln.startswith(prefix(pid)) and b"Init COMPLETE" in ln)
        first = end
        while after[first - 1].startswith(prefix(pid)):
            first -= 1
        rest = after[first:end + 1]
        if head:
            cut += 1
            tail = after[first - 1]
            assert not tail.startswith(prefix(pid))
            assert re.fullmatch(rb"\S+:%d:%d \[\d\] NCCL INFO .+" % (pid, pid), head + tail)
            rest = [tail, *rest]
        total = len(block) + len(b"\n".join(rest)) + 1
        assert BLOCK_SIZE < total < 2 * BLOCK_SIZE  # the precondition of this test: one cut each
        assert raw.count(prefix(pid)) == block.count(prefix(pid)) + len(rest) - bool(head)
    # Line lengths depend on the pids, so byte 4096 lands on a line end about once in 80; with
    # rank 0's cuts (the server process is block-buffered too) a stream without a single torn
    # line is a 1e-9 event.
    torn = [ln for ln in raw.split(b"\n") if b" NCCL INFO " in ln
            and (not re.match(rb"\S+:\d+:\d+ \[\d\] NCCL INFO ", ln) or ln.count(b"NCCL INFO") > 1
                 or re.search(rb".(\(Worker_TP|SIM |INFO:  )", ln))]
    assert cut or torn


def test_a_sigkill_loses_what_the_buffer_held(sim):
    s = sim("--stdout-buffering", "block", env=BIG, workers=2, pipe=True)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    wait_for(s, [prefix(w) for w in workers])
    s.signal_group(signal.SIGKILL)
    raw = s.all_output()
    for pid in workers:
        _, block = first_block(raw, pid)
        assert raw.count(prefix(pid)) == block.count(prefix(pid))  # nothing but the first block
        assert not re.search(rb"%s[^\n]*Init COMPLETE" % re.escape(prefix(pid)), raw)
    assert b"SIM EXIT" not in raw


def test_stuck_workers_need_the_sigkill_and_their_buffered_lines_are_lost(sim):
    s = sim("--stdout-buffering", "block", "--fault", "stuck-workers",
            env={"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring"}, workers=2, pipe=True)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    s.signal_group(signal.SIGTERM)  # the workers ignore it; the server SIGKILLs them after 5 s
    assert s.proc.wait(timeout=20) == 0
    raw = s.all_output()
    for pid in workers:  # under one block each: nothing of them ever reached the pipe
        assert prefix(pid) not in raw
    assert re.search(rb"%s[^\n]*Init COMPLETE" % re.escape(prefix(s.proc.pid)), raw)  # rank 0 exited
    assert b"SIM EXIT code=0" in raw


def test_nccl_debug_file_one_whole_file_per_process_kept_on_sigkill(sim, tmp_path):
    env = {**BIG, "NCCL_DEBUG_FILE": str(tmp_path / "nccl.%h.%p.log")}
    s = sim("--stdout-buffering", "block", env=env, workers=2, pipe=True)
    s.wait_ready()
    pids = [s.proc.pid, *s.sim_json("WORKERS")["pids"]]
    files = {tmp_path / f"nccl.{HOST}.{pid}.log" for pid in pids}
    deadline = time.monotonic() + 10
    while not all(f.exists() and b"Init COMPLETE" in f.read_bytes() for f in files):
        assert time.monotonic() < deadline, sorted(tmp_path.iterdir())
        time.sleep(0.02)
    s.signal_group(signal.SIGKILL)
    raw = s.all_output()
    assert set(tmp_path.iterdir()) == files
    for rank, pid in enumerate(pids):
        text = (tmp_path / f"nccl.{HOST}.{pid}.log").read_text()
        assert text.endswith("\n")
        for ln in (ln for ln in text.split("\n") if ln):  # whole lines of this process only
            assert ln.startswith(f"{HOST}:{pid}:{pid} [{rank}] NCCL INFO ") or re.match(r" *\w+ \|", ln), ln
        assert f"[{rank}] NCCL INFO NCCL_ALGO set by environment to Ring" in text
        assert f"rank {rank} nranks 4" in text and "Init COMPLETE" in text
    assert b" NCCL INFO " not in raw  # nothing on the pipe


def test_debug_file_expansion_and_fallback(tmp_path):
    assert expand_debug_file("/x/n.%h.%p.%%.%q.log%", "box", 42) == "/x/n.box.42.%.%q.log%"
    plan = output_plan({"NCCL_DEBUG_FILE": str(tmp_path / "f.%p")}, DebugConfig({"NCCL_DEBUG": "WARN"}), "2.26.2")
    assert plan["debug_file"] and plan["line_buffered"] is False
    sink = open_sink(plan, 7)
    assert isinstance(sink, FileSink) and sink.path == str(tmp_path / "f.7")
    assert output_plan({"NCCL_DEBUG_FILE": "f"}, DebugConfig({"NCCL_DEBUG": "INFO"}), "2.27.3")["line_buffered"]
    # NCCL opens no file at NCCL_DEBUG=VERSION, and keeps stdout when fopen fails
    assert output_plan({"NCCL_DEBUG_FILE": "f"}, DebugConfig({"NCCL_DEBUG": "VERSION"}), "2.27.3")["debug_file"] is None
    failing = {"debug_file": str(tmp_path / "no" / "such" / "f"), "stdout": "block", "host": "h"}
    assert isinstance(open_sink(failing, 1), BlockSink)
    assert open_sink({**failing, "stdout": "line"}, 1) is None  # the tidy default stream


def test_block_sink_writes_full_blocks_only(tmp_path):
    path = tmp_path / "out"
    with open(path, "wb") as fh:
        sink = BlockSink(fh.fileno(), size=10)
        sink.write("abcdefgh")  # 9 bytes with the newline: held
        assert path.read_bytes() == b""
        sink.write("ijkl")  # 14 bytes: one block of 10 out, cut mid-line
        assert path.read_bytes() == b"abcdefgh\ni"
        sink.flush()  # a normal exit
        assert path.read_bytes() == b"abcdefgh\nijkl\n"


def ray_lines(s: Sim) -> list[str]:
    return [ln for ln in s.lines if ln.startswith("(RayWorkerWrapper ")]


def test_ray_workers_never_get_the_set_and_ray_folds_their_lines(sim):
    env = {"NCCL_DEBUG": "INFO", "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "VLLM_USE_V1": "0"}
    s = sim("--ray", "--ray-nodes", "2", env=env, workers=3)
    s.wait_ready()
    w1, w2, w3 = s.sim_json("WORKERS")["pids"]
    text = s.text()
    assert re.search(r"^INFO \S+ \S+ \[api_server\.py:\d+\] vLLM API server version 0\.8\.2$", text, re.M)
    assert "Initializing a V0 LLM engine (v0.8.2)" in text
    assert "Copying the following environment variables to workers: ['VLLM_USE_V1']" in text
    driver = f"{HOST}:{s.proc.pid}:{s.proc.pid} [0] NCCL INFO "
    assert driver + "NCCL_ALGO set by environment to Ring" in text  # rank 0 has the launch env
    assert driver + "NCCL_PROTO set by environment to Simple" in text
    ray = ray_lines(s)
    assert not [ln for ln in ray if "set by environment" in ln]  # no worker echoes anything
    # rank 1 (the driver's node) shows first and whole, rank 2 is hidden, rank 3 (node 1, its
    # GPU 1) carries the fold of both
    host = re.escape(HOST)
    assert [ln for ln in ray if re.fullmatch(rf"\(RayWorkerWrapper pid={w1}\) {host}:{w1}:{w1} \[1\] NCCL INFO comm "
                                             r"0x[0-9a-f]+ rank 1 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0", ln)]
    assert not [ln for ln in ray if f"pid={w2}," in ln or f"pid={w2})" in ln]
    folded = [ln for ln in ray if ln.startswith(f"(RayWorkerWrapper pid={w3}, ip=10.0.0.2) ")]
    assert [ln for ln in folded if re.fullmatch(rf".* {host}-node1:{w3}:{w3} \[1\] NCCL INFO comm 0x[0-9a-f]+ rank 3 "
                                                r"nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0 "
                                                r"\[repeated 2x across cluster\]", ln)]
    assert "(Ray deduplicates logs by default." in folded[0] and all("deduplicates" not in ln for ln in folded[1:])
    assert s.sim_json("MODEL")["proto"] == "LL"  # the workers' defaults, not the set
    assert s.finish() == 0


def test_ray_dedup_off_and_start_env(sim):
    s = sim("--ray", "--ray-start-env", "NCCL_DEBUG=INFO", "--ray-start-env", "NCCL_ALGO=Tree",
            env={"NCCL_DEBUG": "WARN", "RAY_DEDUP_LOGS": "0"}, workers=2)
    s.wait_ready()
    ray = ray_lines(s)
    assert not [ln for ln in ray if "[repeated" in ln]
    for rank in (1, 2):  # ray start's NCCL_ALGO is what they echo; each logs in full
        assert [ln for ln in ray if f"[{rank}] NCCL INFO NCCL_ALGO set by environment to Tree" in ln]
    assert not [ln for ln in s.lines if "[0] NCCL INFO" in ln]  # the driver runs at WARN
    assert s.finish() == 0


def test_dedup_rules_of_ray():
    d = LogDeduplicator()
    a, b, c = ("10.0.0.1", 1), ("10.0.0.1", 2), ("10.0.0.2", 3)
    assert canonical("h:12:12 [3] NCCL INFO comm 0x7f rank 3 nRanks 8") == "NCCL INFO comm rank nRanks"
    assert d.deduplicate(a, ["x 1", "x 2"]) == [(a, "x 1"), (a, "x 2")]  # a source's own repeats print
    assert d.deduplicate(b, ["x 3"]) == [] and d.deduplicate(c, ["x 4", "y"]) == [(c, "y")]
    out = d.flush()
    assert out[0][0] == c and out[0][1].startswith("x 4 [repeated 2x across cluster] (Ray deduplicates")
    d.deduplicate(a, ["z"])
    d.deduplicate(b, ["z"])
    assert d.flush() == [(b, "z")]  # a single copy held back prints as itself


def test_vllm_0_8_2_copies_only_its_own_variables():
    launch = {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO", "VLLM_USE_V1": "0", "LD_LIBRARY_PATH": "/l",
              "CUDA_VISIBLE_DEVICES": "0", "VLLM_HOST_IP": "1.2.3.4", "PATH": "/bin",
              "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert copied_vars(launch) == ["LD_LIBRARY_PATH", "VLLM_USE_V1"]
    env = worker_environ(launch, {"NCCL_DEBUG": "INFO"})
    assert env == {"NCCL_DEBUG": "INFO", "VLLM_USE_V1": "0", "LD_LIBRARY_PATH": "/l", "CUDA_VISIBLE_DEVICES": "0",
                   "PATH": "/bin"}


def test_cli_checks_the_new_options():
    assert run_sim("serve", "--ray-start-env", "NOEQUALS").returncode == 2
    assert run_sim("serve", "--stdout-buffering", "full").returncode == 2
    assert run_sim("serve", "--ray-nodes", "0").returncode == 2
    assert run_sim("serve", env={"SIM_STDOUT_BUFFERING": "full"}).returncode == 2
    assert "stuck-workers" in run_sim("faults").stdout


def test_all_reduce_perf_writes_nccl_lines_to_its_debug_file(tmp_path):
    out = io.StringIO()
    env = sim_env({"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL", "NCCL_DEBUG_FILE": str(tmp_path / "%h.%p")})
    assert all_reduce_perf(["-b", "14336", "-e", "14336", "-g", "8"], environ=env, out=out) == 0
    assert " NCCL INFO " not in out.getvalue() and "14336" in out.getvalue()
    text = (tmp_path / f"{HOST}.{os.getpid()}").read_text()  # one process, eight GPUs: one file
    assert text.count("NCCL INFO NCCL_PROTO set by environment to LL") == 8
