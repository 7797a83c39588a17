"""``sim serve`` as real processes: life cycle, pacing, NCCL and vLLM log lines per rank, dropped
variables, the allreduce backend, failures at start and mid-stream, process handling."""

from __future__ import annotations

import itertools
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from tests.simproc import ROOT, Sim, chat, content_deltas, content_of, run_sim, sim_env, stream_chunks
from tuner.sim.costmodel import CostModel
from tuner.sim.ncclenv import settings_from
from tuner.sim.profiles import BUILTIN

NCCL_LINE = re.compile(r"^\S+:(\d+):\d+ \[(\d+)\] NCCL INFO (.*)$")


def nccl_info(s: Sim) -> list[tuple[int, int, str]]:
    """(pid, rank, message) of every NCCL INFO line."""
    return [(int(m.group(1)), int(m.group(2)), m.group(3)) for ln in s.lines
            if (m := NCCL_LINE.match(ln))]


def test_server_lifecycle_endpoints_and_rate(sim):
    s = sim("--log-schedule", env={"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "1048576", "NCCL_ALGO": "Ring",
                                   "CUDA_DEVICE_MAX_CONNECTIONS": "1"}, load=0.8, workers=2)
    time.sleep(0.3)
    with pytest.raises(httpx.ConnectError):  # loading: port not bound, like vLLM
        httpx.get(s.url + "/health", timeout=1)
    s.wait_ready()
    r = httpx.get(s.url + "/health")
    assert r.status_code == 200 and r.content == b""
    models = httpx.get(s.url + "/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == "sim/tiny-tp4"
    assert s.sim_json("ENV") == {"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "1048576",
                                 "NCCL_ALGO": "Ring", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert not [ln for ln in s.lines if " NCCL " in ln]  # NCCL_DEBUG unset: NCCL prints nothing

    chunks, done = stream_chunks(s.url, chat("What is the capital of France?"))
    assert done and chunks[0][1]["choices"][0]["delta"] == {"role": "assistant"}
    assert "Paris" in content_of(chunks)
    assert chunks[-1][1]["usage"]["completion_tokens"] == 7

    n = 250  # one token per chunk at the cost model's pace: its schedule, and none sent before it
    chunks, _ = stream_chunks(s.url, chat("hi", max_tokens=n, ignore_eos=True))
    times = [t for t, c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")]
    assert len(times) == n and chunks[-1][1]["usage"]["completion_tokens"] == n
    due = s.schedules(2)[1]["due"]
    assert len(due) == n and (n - 1) / (due[-1] - due[0]) == pytest.approx(s.ready_tok_s(), rel=1e-5)
    assert all(t >= d for t, d in zip(times, due, strict=True))

    r = httpx.post(s.url + "/v1/completions", json={"prompt": "Count from 1 to 6", "max_tokens": 40,
                                                    "model": "sim/tiny-tp4"})
    body = r.json()
    assert body["choices"][0]["text"] == "1, 2, 3, 4, 5, 6"
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == 6
    assert httpx.post(s.url + "/v1/chat/completions", json={**chat("x"), "model": "o"}).status_code == 404

    workers = s.sim_json("WORKERS")["pids"]
    assert len(workers) == 2
    for pid in workers:
        assert "--sim-worker" in psutil.Process(pid).cmdline()
    assert set(s.group()) == {s.proc.pid, *workers}
    assert s.finish() == 0
    assert s.wait_group_gone(), s.group()


def test_nccl_info_lines_from_every_rank_process(sim):
    env = {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "0x100000",
           "CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_PROTOCOL": "LL"}
    s = sim(env=env, workers=3)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    for rank in range(4):  # each rank is its own process: their lines come in any order
        s.wait_line(f"[{rank}] NCCL INFO ncclCommInitRank comm")
    lines = nccl_info(s)
    by_rank = {rank: pid for pid, rank, _ in lines}
    assert by_rank == {0: s.proc.pid, 1: workers[0], 2: workers[1], 3: workers[2]}
    for rank in range(4):
        msgs = [m for _, r, m in lines if r == rank]
        assert "NCCL version 2.27.3+cuda12.9" in msgs
        assert "NCCL_BUFFSIZE set by environment to 1048576." in msgs  # strtoll's value
        assert "NCCL_PROTO set by environment to LL" in msgs
        assert any(m.endswith("- Init COMPLETE") for m in msgs)
    all_msgs = " ".join(m for _, _, m in lines)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in all_msgs  # CUDA's variable: NCCL never echoes it
    assert "NCCL_PROTOCOL" not in all_msgs  # a misspelled name is silently ignored
    assert not [m for _, _, m in lines if "Bytes -> Algo" in m]  # no TUNING subsystem
    vllm = [ln for ln in s.lines if "vLLM is using nccl==2.27.3" in ln]
    assert {int(re.search(r"pid=(\d+)", ln).group(1)) for ln in vllm} == {s.proc.pid, *workers}


def test_tuning_lines_for_decode_and_prefill_sizes(sim):
    s = sim(env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}, profile="pcie-8x-mla",
            workers=1)
    s.wait_ready()
    text = s.text()
    assert re.search(r"NCCL INFO     AllReduce \|    20\.8/   2\.9 \|", text)  # the table, rank 0
    assert "NCCL INFO AllReduce: 14336 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}" in text
    assert "NCCL INFO AllReduce: 117440512 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}" in text
    assert not re.search(r"\[1\] NCCL INFO AllReduce:", text)  # per-op lines are rank 0's
    stream_chunks(s.url, chat("What is the capital of France?", max_tokens=4))
    s.wait_line("NCCL INFO AllReduce: 157696 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}")


def test_ignored_variables_never_reach_nccl(sim):
    env = {"NCCL_DEBUG": "INFO", "NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "1048576",
           "SIM_IGNORE_VARS": "NCCL_PROTO"}
    s = sim(env=env, profile="pcie-8x-mla", workers=1)
    s.wait_ready()
    msgs = [m for _, _, m in nccl_info(s)]
    assert "NCCL_BUFFSIZE set by environment to 1048576." in msgs
    assert not [m for m in msgs if m.startswith("NCCL_PROTO")]
    assert s.sim_json("IGNORED") == ["NCCL_PROTO"] and "NCCL_PROTO" not in s.sim_json("ENV")
    assert s.sim_json("MODEL")["proto"] == "LL"  # no effect either
    t = sim("--ignore-var", "NCCL_BUFFSIZE", env=env, profile="pcie-8x-mla")  # the CLI wins
    t.wait_ready()
    assert t.sim_json("MODEL")["proto"] == "Simple"
    assert not [m for _, _, m in nccl_info(t) if m.startswith("NCCL_BUFFSIZE")]


def test_allreduce_backend_messages_and_flag(sim):
    pcie = sim(profile="pcie-8x-mla", workers=1)
    nvl = sim(profile="nvlink-8x", workers=1)
    flag = sim("--disable-custom-all-reduce", profile="nvlink-8x", workers=1)
    for s in (pcie, nvl, flag):
        s.wait_ready()
    veto = ("Custom allreduce is disabled because it's not supported on more than two PCIe-only "
            "GPUs. To silence this warning, specify disable_custom_all_reduce=True explicitly.")
    assert sum(ln.endswith(veto) and "WARNING" in ln for ln in pcie.lines) == 2  # rank 0 and 1
    assert pcie.sim_json("MODEL")["via"] == "nccl"
    assert nvl.sim_json("MODEL")["via"] == "custom" and not any(veto in ln for ln in nvl.lines)
    assert any(re.search(r"\[custom_all_reduce\.py:\d+\] Registering \d+ cuda graph addresses", ln)
               for ln in nvl.lines)
    assert any("disable_custom_all_reduce=False" in ln for ln in nvl.lines)
    assert flag.sim_json("MODEL")["via"] == "nccl"
    assert any("disable_custom_all_reduce=True" in ln for ln in flag.lines)
    assert not any("Registering" in ln or veto in ln for ln in flag.lines)
    assert flag.ready_tok_s() < nvl.ready_tok_s()


@pytest.mark.parametrize("env,needle,result", [
    ({"NCCL_ALGO": "Rung"}, 'Unrecognized element token "Rung"', "invalid usage"),
    ({"NCCL_ALGO": "NVLS"}, "no algorithm/protocol available for function AllReduce", "invalid usage"),
])
def test_nccl_refusals_fail_at_start_like_nccl(sim, env, needle, result):
    quiet = sim(env=env, profile="pcie-8x-mla", workers=1)
    loud = sim(env={**env, "NCCL_DEBUG": "WARN"}, profile="pcie-8x-mla", workers=1)
    for s in (quiet, loud):
        assert s.proc.wait(timeout=15) == 1
        s.wait_line("SIM EXIT")
        assert f"RuntimeError: NCCL error: {result} (run with NCCL_DEBUG=WARN for details)" in s.text()
        assert s.wait_group_gone(3)
    assert not [ln for ln in quiet.lines if "NCCL WARN" in ln]  # WARN needs NCCL_DEBUG >= WARN
    warns = [ln for ln in loud.lines if " NCCL WARN " in ln]
    assert len(warns) == 2 and all(needle in w for w in warns)  # each rank logs its own
    assert "NCCL version 2.27.3+cuda12.9" in loud.lines  # VERSION level: bare, rank 0 only


def test_zero_chunk_crashes_during_load(sim):
    s = sim(env={"NCCL_BUFFSIZE": "4M"}, profile="pcie-8x-mla")  # 4 bytes
    assert s.proc.wait(timeout=15) == 1
    s.wait_line("SIM EXIT")
    assert "Fatal Python error: Floating point exception" in s.text() and not s.ready.is_set()


def test_forced_ll128_on_pcie_serves_wrong_answers(sim):
    s = sim(env={"NCCL_PROTO": "LL128"}, profile="pcie-8x-mla")
    s.wait_ready()
    chunks, done = stream_chunks(s.url, chat("What is the capital of France?", max_tokens=20))
    assert done and "Paris" not in content_of(chunks) and content_of(chunks)


def test_fault_crash_start(sim):
    s = sim("--fault", "crash-start", load=0.4, workers=1)
    assert s.proc.wait(timeout=10) == 1
    s.wait_line("SIM EXIT")
    assert "torch.OutOfMemoryError: CUDA out of memory" in s.text() and not s.ready.is_set()
    assert s.wait_group_gone(3)


def test_fault_hang_start(sim):
    s = sim(env={"SIM_FAULT": "hang-start"}, load=0.1)
    time.sleep(1.0)
    assert s.proc.poll() is None and not s.ready.is_set()
    with pytest.raises(httpx.ConnectError):
        httpx.get(s.url + "/health", timeout=1)
    assert s.finish(5) == 0


def probe_like(s: Sim, max_tokens=20):
    """What nccl-tune's probe sends first: an 8-token readiness stream and a smoke check."""
    assert len(content_deltas(s.url, chat("hi", max_tokens=8, ignore_eos=True), 5)) == 8
    r = httpx.post(s.url + "/v1/chat/completions", timeout=5,
                   json=chat("What is the capital of France?", max_tokens=32, stream=False))
    return r, chat("hi", max_tokens=max_tokens, ignore_eos=True)


def test_mid_stream_faults_fire_on_the_probe_by_default(sim):
    s = sim("--fault", "crash-mid-stream", workers=1)
    s.wait_ready()
    r, body = probe_like(s)
    assert r.status_code == 200 and "Paris" in r.json()["choices"][0]["message"]["content"]
    with pytest.raises(httpx.HTTPError) as exc:
        content_deltas(s.url, body, 5)
    assert len(exc.value.received) == 8  # the default K
    assert s.proc.wait(timeout=5) == 1
    s.wait_line("EngineCore encountered a fatal error")
    assert "Cuda failure 'an illegal memory access was encountered'" in s.text()  # NCCL's last error
    assert not [ln for ln in s.lines if "NCCL WARN" in ln]
    assert s.wait_group_gone(3)


def test_explicit_fault_request_counts_every_request(sim):
    s = sim("--fault", "crash-mid-stream", "--fault-after", "3", "--fault-request", "1", workers=1)
    s.wait_ready()
    with pytest.raises(httpx.HTTPError) as exc:
        content_deltas(s.url, chat("hi", max_tokens=8, ignore_eos=True), 5)
    assert len(exc.value.received) == 3
    assert s.proc.wait(timeout=5) == 1


def test_fault_hang_mid_stream(sim):
    s = sim("--fault", "hang-mid-stream", "--fault-after", "3")
    s.wait_ready()
    _, body = probe_like(s)
    with pytest.raises(httpx.ReadTimeout) as exc:
        content_deltas(s.url, body, httpx.Timeout(5, read=1.0))
    assert len(exc.value.received) == 3
    assert httpx.get(s.url + "/health", timeout=2).status_code == 200
    assert s.proc.poll() is None
    assert s.finish(5) == 0


def test_fault_healthy_then_500_via_env(sim):
    s = sim(env={"SIM_FAULT": "healthy-then-500"})
    s.wait_ready()
    r, body = probe_like(s)
    assert r.status_code == 200  # the engine dies at the first probe request
    for _ in range(2):
        r = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=5)
        assert r.status_code == 500 and r.json() == {"error": "EngineCore encountered an issue"}
    assert httpx.get(s.url + "/health").status_code == 200


def test_fault_wrong_output(sim):
    s = sim("--fault", "wrong-output")
    s.wait_ready()
    chunks, done = stream_chunks(s.url, chat("What is the capital of France?"))
    assert done and "Paris" not in content_of(chunks) and content_of(chunks)


def test_fault_orphan_workers_outlive_sigterm_and_die_on_sigkill(sim):
    s = sim("--fault", "orphan-workers", workers=2)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    os.kill(s.proc.pid, signal.SIGTERM)  # the server only, as a naive launcher would
    assert s.proc.wait(timeout=5) == 0
    s.signal_group(signal.SIGTERM)  # ignored by the workers
    time.sleep(0.4)
    assert sorted(s.group()) == sorted(workers)
    s.signal_group(signal.SIGKILL)
    assert s.wait_group_gone(3)


def test_fault_slow_teardown(sim):
    s = sim("--fault", "slow-teardown", "--teardown-s", "1.5", workers=1)
    s.wait_ready()
    s.signal_group(signal.SIGTERM)
    s.wait_line("INFO:     Shutting down")
    assert s.proc.poll() is None  # SIGTERM seen, and the server still lives on for its 1.5 s of teardown
    assert s.finish(8) == 0
    assert s.wait_group_gone(3)


def test_sigkill_of_server_leaves_workers_like_vllm(sim):
    s = sim(workers=2)
    s.wait_ready()
    workers = s.sim_json("WORKERS")["pids"]
    os.kill(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=5)
    time.sleep(0.3)
    assert sorted(s.group()) == sorted(workers)  # the launcher must kill the group
    s.signal_group(signal.SIGTERM)
    assert s.wait_group_gone(3)


def test_worker_death_takes_server_down(sim):
    s = sim(workers=2)
    s.wait_ready()
    os.kill(s.sim_json("WORKERS")["pids"][0], signal.SIGKILL)
    assert s.proc.wait(timeout=5) == 1
    assert "died unexpectedly" in s.text()
    assert s.wait_group_gone(6)


def test_port_in_use_fails():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "tuner.sim", "serve", "--port", str(port),
                            "--profile", "fast-tiny", "--load-time", "0", "--workers", "0"],
                           cwd=ROOT, env=sim_env(), capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and "error while attempting to bind" in p.stderr


def test_noise_is_seeded_and_sized():
    from tuner.sim.server import Engine, ServeOptions

    pcie = BUILTIN["pcie-8x-mla"]

    def factors(seed):
        opts = ServeOptions(profile=pcie, model_name="m", noise=0.02, launch_noise=0.0, seed=seed)
        eng = Engine(opts, CostModel(pcie, settings_from({})), log=None, workers=None)
        return [eng.new_request(10)[1] for _ in range(400)]

    a, b = factors(7), factors(7)
    assert a == b and a != factors(8)
    mean = sum(a) / len(a)
    sd = (sum((x - mean) ** 2 for x in a) / len(a)) ** 0.5
    assert abs(mean - 1) < 0.005 and 0.015 < sd < 0.025


def test_concurrent_streams_share_the_box(sim):
    """Four streams at once: each step of each stream is the cost model's for the batch decoding
    then (their schedules), the four overlapped, and a batch of four beats one stream twice over."""
    s = sim("--log-schedule")
    s.wait_ready()
    n, conc = 300, 4
    arrivals = []
    barrier = threading.Barrier(conc)

    def one():
        times = []
        with httpx.Client(timeout=20) as c:  # client set-up before the barrier
            barrier.wait()
            with c.stream("POST", s.url + "/v1/chat/completions",
                          json=chat("hi", max_tokens=n, ignore_eos=True)) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {") and '"content"' in line:
                        times.append(time.perf_counter())
        arrivals.append(times)

    threads = [threading.Thread(target=one) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(arrivals) == conc
    schedules = s.schedules(conc)
    model = CostModel(BUILTIN["fast-tiny"], settings_from({}))
    for sched in schedules:
        due, batch = sched["due"], sched["batch"]
        assert len(due) == n and batch[0] == 0 and conc in batch
        for (a, b), k in zip(itertools.pairwise(due), batch[1:], strict=True):
            # due times are running sums on perf_counter's scale: each sum rounds by up to one ulp of b
            step = model.decode_step_ms(k) / 1000
            assert b - a == pytest.approx(step, rel=1e-9, abs=2 * math.ulp(b))
    for times in arrivals:  # each stream's tokens, whichever schedule is its own, never early
        assert len(times) == n and any(all(t >= d for t, d in zip(times, sc["due"], strict=True)) for sc in schedules)
    assert model.breakdown(conc).tok_s * conc > 2 * s.ready_tok_s()  # batching: aggregate grows with concurrency


def test_model_command():
    out = run_sim("model", "--profile", "pcie-8x-mla", "--env", "NCCL_PROTO=Simple", "--json")
    assert out.returncode == 0 and '"proto": "Simple"' in out.stdout
    bad = run_sim("model", "--profile", "pcie-8x-mla", "--env", "NCCL_ALGO=NVLS")
    assert bad.returncode == 1 and "no algorithm/protocol available" in bad.stderr
