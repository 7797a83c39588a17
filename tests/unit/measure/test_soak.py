"""tuner.measure.soak against real servers: the env-dependent test server
(tests/servers/envrate_server.py, its ``hang-load`` fault: streams stop before their first token
after some requests, /health stays 200, PyTorch's watchdog line is printed) as a process whose
log the soak watches (tuner.sweep.soak.LogWatch), and the reference server in a thread for a
stall mid-stream and a server that fails requests under load. Short soaks (seconds), no timing
assertions: only what passed or failed, and why."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.helpers import free_port
from tuner.measure import SoakResult, run_soak
from tuner.record import Kind, TrialRecord
from tuner.servers import KINDS, kind_named
from tuner.sweep.soak import LogWatch, soak_fields

ROOT = Path(__file__).resolve().parents[3]
ENVRATE = ROOT / "tests" / "servers" / "envrate_server.py"
WATCHDOG = "Watchdog caught collective operation timeout"


@pytest.fixture
def envrate(tmp_path):
    """Factory: ``envrate(**env)`` -> (base_url, log path) of a running envrate_server process."""
    procs: list[subprocess.Popen] = []

    def start(**env: str) -> tuple[str, Path]:
        port = free_port()
        log = tmp_path / f"server-{len(procs)}.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen([sys.executable, str(ENVRATE), "--port", str(port)], stdout=fh,
                                    stderr=subprocess.STDOUT, env={**os.environ, "ENVRATE_LOAD_S": "0", **env})
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/health", timeout=1.0)
                return url, log
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"envrate_server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.05)

    yield start
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            children = psutil.Process(p.pid).children(recursive=True)
            p.terminate()
            p.wait(10)
            for child in children:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()


def _soak(url: str, log: Path | None = None, **kw) -> SoakResult:
    args = {"model": "ref-model", "duration_s": 2.0, "concurrency": [1, 2], "max_tokens": 16, "stall_timeout_s": 2.0,
            **kw}
    return run_soak(url, watch=LogWatch(log, kind_named("vllm")) if log else None, **args)


def test_a_healthy_server_passes_every_level(envrate):
    """No fault: every level ran requests to completion, nothing failed, and the soak's rate is
    what its requests carried (tokens / seconds)."""
    url, log = envrate()
    r = _soak(url, log)
    assert r.passed and r.failure == "" and r.log_line == "" and r.health is None
    assert [lv.concurrency for lv in r.levels] == [1, 2] and r.concurrency == (1, 2)
    assert all(lv.requests > 0 and lv.tokens == 16 * lv.requests for lv in r.levels)
    assert r.requests == sum(lv.requests for lv in r.levels)
    assert r.output_tok_s == pytest.approx(r.tokens / r.seconds)


def test_a_server_that_hangs_under_load_fails_with_its_watchdog_line_and_health_200(envrate):
    """hang-load: after 4 requests every new stream stops before its first token while /health
    answers 200 and the server prints PyTorch's watchdog line: the soak fails, quoting the line,
    with the health route's 200 as evidence; the levels after the hang are not run."""
    url, log = envrate(ENVRATE_FAULT="hang-load", ENVRATE_HANG_AFTER="4")
    r = _soak(url, log, duration_s=60.0)
    assert not r.passed
    assert WATCHDOG in r.failure and WATCHDOG in r.log_line
    assert r.health == 200 and "/health still 200" in r.failure
    assert "at concurrency 1" in r.failure
    assert [lv.concurrency for lv in r.levels] == [1] and r.concurrency == (1, 2)
    assert r.levels[0].requests >= 3  # the requests before the hang completed


def test_a_set_named_by_hang_set_hangs_and_the_baseline_does_not(envrate):
    """ENVRATE_HANG_SET: only a launch under that setting hangs under load."""
    url, log = envrate(ENVRATE_HANG_SET="NCCL_PROTO=LL", ENVRATE_HANG_AFTER="3", NCCL_PROTO="LL")
    assert WATCHDOG in _soak(url, log, duration_s=60.0).failure
    url, log = envrate(ENVRATE_HANG_SET="NCCL_PROTO=LL", ENVRATE_HANG_AFTER="3")
    assert _soak(url, log, duration_s=1.0).passed


def test_a_stream_that_stalls_mid_answer_fails_the_soak_with_health_evidence(ref):
    """A stream that stops after 5 tokens and stays open: a stall of the stall timeout, at the
    level it happened, with /health's 200 said (no log watched: the stall alone fails it)."""
    url = ref(stall_after=5)
    r = _soak(url, duration_s=60.0, stall_timeout_s=1.0)
    assert not r.passed
    assert r.failure.startswith("no token for ") and "at concurrency 1" in r.failure
    assert r.health == 200 and "/health still 200" in r.failure
    assert r.requests == 0


def test_a_server_that_refuses_requests_under_load_fails_the_soak(ref):
    """From the 4th request on the server answers HTTP 500: a failed request fails the soak too."""
    url = ref(fail_after_requests=3)
    r = _soak(url, duration_s=60.0)
    assert not r.passed and "500" in r.failure and r.requests == 3


def test_a_dead_health_route_is_said(ref):
    """A server whose health route answers 404 while its stream stalls: the answer is said."""
    url = ref(stall_after=2)
    r = run_soak(url, model="ref-model", duration_s=60.0, max_tokens=16, stall_timeout_s=1.0, health_path="/nowhere")
    assert r.health == 404 and "/nowhere answered 404" in r.failure


@pytest.mark.parametrize("levels, duration", [([0], 1.0), ([1, -2], 1.0), ([1], 0.0), ([1], -1.0)])
def test_bad_levels_or_duration_are_refused(levels, duration):
    with pytest.raises(ValueError):
        run_soak("http://127.0.0.1:9", model="m", duration_s=duration, concurrency=levels)


def test_no_levels_means_one_stream(ref):
    r = run_soak(ref(), model="ref-model", duration_s=0.5, max_tokens=8)
    assert r.passed and r.concurrency == (1,) and [lv.concurrency for lv in r.levels] == [1]


@pytest.mark.parametrize("line", [
    "[rank1]:[E1111 17:10:53.1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=668, OpType=ALLREDUCE) ran for 600097 milliseconds before timing out.",
    "[rank1]:[E1111 17:10:53] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress",
    "[PG ID 0 PG GUID 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
    "RuntimeError: NCCL communicator was aborted on rank 0.",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there "
    "was a network error, NCCL version 2.21.5",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
])
def test_every_kind_sees_the_hang_lines(line):
    """PyTorch's watchdog and heartbeat lines and NCCL's error strings are hang lines of every
    server kind, in the spellings they are printed with."""
    assert all(k.is_hang(line) for k in KINDS), [k.name for k in KINDS if not k.is_hang(line)]


def test_a_kind_sees_its_own_fatal_lines_and_not_healthy_ones():
    assert kind_named("vllm").is_hang("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue")
    assert kind_named("sglang").is_hang("Scheduler hit an exception: Traceback")
    for healthy in ("INFO 12-06 03:12:44 [loggers.py:123] Avg generation throughput: 812.4 tokens/s",
                    "[rank0]:[W1206 03:12:44 ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1",
                    "host:1:1 [0] NCCL INFO comm 0x5555 rank 0 nRanks 2 - Init COMPLETE"):
        assert not any(k.is_hang(healthy) for k in KINDS), healthy


def test_the_log_watch_reads_only_what_came_after_it_and_waits_for_whole_lines(tmp_path):
    """A hang line written before the watch began is not this soak's; a line still being written
    is read once it ends."""
    log = tmp_path / "server.log"
    log.write_text(f"[Rank 0] {WATCHDOG}: an earlier launch's\nready\n")
    watch = LogWatch(log, kind_named("vllm"))
    assert watch() is None
    with open(log, "a") as fh:
        fh.write("INFO serving\n[Rank 0] Watchdog caught collective ")
    assert watch() is None
    with open(log, "a") as fh:
        fh.write("operation timeout: WorkNCCL(SeqNum=1)\n")
    assert watch() == "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"
    assert watch() == "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"
    assert LogWatch(tmp_path / "absent.log", kind_named("vllm"))() is None


def test_the_record_keeps_what_the_soak_saw(envrate):
    url, log = envrate(ENVRATE_FAULT="hang-load", ENVRATE_HANG_AFTER="2")
    rec = TrialRecord(trial=3, kind=Kind.CONFIRM)
    soak_fields(rec, None)
    assert rec.soak_s is None and rec.soak_words() == ""
    soak_fields(rec, _soak(url, log, duration_s=60.0))
    assert rec.soak_s is not None and rec.soak_concurrency == [1, 2] and WATCHDOG in rec.soak_failure
    assert rec.soak_words().startswith(f"{rec.soak_s:.0f} s at concurrency 1,2: failed: ")
