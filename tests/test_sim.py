"""Tests of the simulator (tuner/sim): NCCL env parsing, cost model, server, faults, processes.

Process tests start real servers (``python -m tuner.sim serve``) in their own session on free
127.0.0.1 ports and talk to them with httpx; every server's process group is SIGKILLed at the end
of its test whatever happens.
"""

from __future__ import annotations

import json
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

from tuner.sim import costmodel, ncclenv, textgen
from tuner.sim.costmodel import CostModel, check_init, nccl_model, select
from tuner.sim.faults import FaultError, parse_faults
from tuner.sim.ncclenv import NcclInitError, read_env, settings_from, strtoll, strtoll_checked
from tuner.sim.profiles import BUILTIN, ProfileError, load_profile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PCIE = BUILTIN["pcie-8x-mla"]
NVLINK = BUILTIN["nvlink-8x"]
TUNED = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16",
         "NCCL_BUFFSIZE": "16777216", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def tok_s(profile, env=None, batch=1):
    return CostModel(profile, settings_from(env or {})).breakdown(batch).tok_s


# ---------------------------------------------------------------- NCCL environment reading


@pytest.mark.parametrize("text,value", [
    ("4M", 4), ("abc", 0), ("", 0), ("16777216", 16777216), ("0x10", 16), ("0X1f", 31),
    ("010", 8), ("08", 0), ("0x", 0), ("0xg", 0), ("  42", 42), ("\t-7z", -7), ("+3", 3),
    ("-0x10", -16), ("1e6", 1), ("12 34", 12), ("-", 0), ("0", 0),
])
def test_strtoll_matches_c(text, value):
    assert strtoll(text) == value


def test_strtoll_overflow_clamps_and_flags():
    assert strtoll_checked("99999999999999999999") == (2**63 - 1, True)
    assert strtoll_checked("-99999999999999999999") == (-(2**63), True)
    assert strtoll_checked("-9223372036854775808") == (-(2**63), False)


def test_read_env_logs_and_values_like_nccl():
    rep = read_env({"NCCL_BUFFSIZE": "4M", "NCCL_MAX_NCHANNELS": "abc", "NCCL_PROTO": "LL",
                    "NCCL_MIN_NCHANNELS": "99999999999999999999", "NCCL_NTHREADS": "100",
                    "NCCL_P2P_LEVEL": "sys", "NCCL_P2P_DISABLE": "2"})
    s = rep.settings
    assert s.buffsize == 4
    assert "NCCL_BUFFSIZE set by environment to 4." in rep.info
    assert "NCCL_PROTO set by environment to LL" in rep.info
    assert "NCCL_MAX_NCHANNELS set by environment to 0." in rep.info
    assert s.max_nchannels == 1 and any("maximum of 0 channels" in w for w in rep.warn)
    assert any(m.startswith("Invalid value 99999999999999999999 for NCCL_MIN_NCHANNELS")
               for m in rep.info)
    assert s.min_nchannels == 0
    assert s.nthreads == 512 and any("Invalid NCCL_NTHREADS 100" in w for w in rep.warn)
    assert s.p2p_level is None  # names are case-sensitive in NCCL; unknown ones ignored
    assert s.p2p_disable is False  # only 1 has an effect
    assert read_env({"NCCL_P2P_LEVEL": "4"}).settings.p2p_level == "SYS"
    assert read_env({"NCCL_BUFFSIZE": "-2"}).settings.buffsize == ncclenv.DEFAULT_BUFFSIZE
    assert read_env({"CUDA_DEVICE_MAX_CONNECTIONS": "64"}).settings.cuda_max_connections == 8


def test_conf_file_fills_unset_variables(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_PROTO=Simple\nNCCL_BUFFSIZE=1048576  # comment\n")
    rep = read_env({"NCCL_CONF_FILE": str(conf), "NCCL_PROTO": "LL"})
    assert rep.settings.buffsize == 1048576
    assert rep.settings.selection.proto == {"LL": 1, "LL128": 0, "Simple": 0}


@pytest.mark.parametrize("value,enabled", [
    ("Ring", {"Ring"}), ("^Tree", {"Ring"}), ("ring,TREE", {"Ring", "Tree"}),
    ("allreduce:tree;broadcast:ring", {"Tree"}), ("ring;allreduce:tree", {"Tree"}),
    ("broadcast:tree", {"Tree", "Ring"}),
])
def test_algo_grammar(value, enabled):
    algo = settings_from({"NCCL_ALGO": value}).selection.algo
    assert {a for a in ("Tree", "Ring") if algo[a]} == enabled


@pytest.mark.parametrize("value,message", [
    ("Rung", 'Unrecognized element token "Rung"'),
    ("Ring, Tree", 'Unrecognized element token " Tree"'),
    ("allreduce:ring;ring", "All entries except the first must have a prefix"),
    ("allreduc:ring", 'Unrecognized prefix token "allreduc"'),
])
def test_algo_grammar_errors_like_nccl_2_24(value, message):
    with pytest.raises(NcclInitError) as exc:
        settings_from({"NCCL_ALGO": value})
    assert message in exc.value.warn_lines[0]
    # NCCL <= 2.23 silently ignored unknown tokens
    settings_from({"NCCL_ALGO": value}, strict_lists=False)


@pytest.mark.parametrize("value,forced", [
    ("LL128", True), ("LL,LL128", True), ("^Simple", False), ("LL", False),
    ("allreduce:^LL128", False), ("^LL128;allreduce:LL128", True),
])
def test_ll128_forcing_detection(value, forced):
    assert settings_from({"NCCL_PROTO": value}).selection.ll128_forced is forced


# ---------------------------------------------------------------- cost model


def test_nccl_picks_ll_for_decode_sized_allreduce_and_simple_for_large():
    s = settings_from({})
    table = {(e.algo, e.proto): e.time_us for e in nccl_model(PCIE, s, 14336)}
    assert table[("Ring", "LL")] < table[("Ring", "Simple")]
    assert ("Ring", "LL128") not in table  # LL128 is off by default on PCIe
    assert (select(PCIE, s, 14336).algo, select(PCIE, s, 14336).proto) == ("Ring", "LL")
    assert select(PCIE, s, 64 << 20).proto == "Simple"
    ll = costmodel.realized_allreduce(PCIE, settings_from({"NCCL_PROTO": "LL"}), 14336)
    simple = costmodel.realized_allreduce(PCIE, settings_from({"NCCL_PROTO": "Simple"}), 14336)
    assert ll.time_us < simple.time_us
    # base + 2(n-1) hops: REFERENCE.md section 4 numbers
    entry = [e for e in nccl_model(PCIE, s, 0) if (e.algo, e.proto) == ("Ring", "LL")][0]
    assert entry.latency_us == pytest.approx(6.6 + 14 * 1.0)


def test_pcie_profile_matches_the_motivating_box():
    bd = CostModel(PCIE, settings_from({})).breakdown(1)
    assert 0.65 <= bd.share <= 0.70
    assert 60 <= bd.tok_s <= 80
    assert bd.allreduce.nbytes == 14336
    # concurrency scales roughly like the deployment's table (81, 133, 236, 413 tok/s)
    agg = [tok_s(PCIE, batch=b) * b for b in (1, 2, 4, 8)]
    assert agg == sorted(agg) and 300 < agg[3] < 500


def test_pcie_landscape():
    base = tok_s(PCIE)
    rel = lambda env: tok_s(PCIE, env) / base - 1  # noqa: E731
    assert abs(rel(TUNED)) < 0.01  # the deployment's tuned relaunch: inside the noise
    assert rel({"NCCL_PROTO": "Simple"}) < -0.20
    assert -0.10 < rel({"NCCL_ALGO": "Tree"}) < -0.02
    assert abs(rel({"NCCL_MAX_NCHANNELS": "1"})) < 0.01  # latency-bound: channels hardly matter
    assert rel({"NCCL_BUFFSIZE": "32768"}) < -0.01
    assert rel({"NCCL_BUFFSIZE": "4M"}) < -0.5  # 4 bytes
    assert rel({"NCCL_P2P_DISABLE": "1"}) < -0.05
    assert rel({"NCCL_P2P_LEVEL": "SYS"}) > 0.02  # the one real win: P2P across sockets
    assert 0 < rel({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) < 0.01


def test_nvlink_allreduce_share_small_and_tuning_barely_matters():
    bd = CostModel(NVLINK, settings_from({})).breakdown(1)
    assert bd.share < 0.10 and bd.allreduce.via == "custom"
    assert tok_s(NVLINK, {"NCCL_PROTO": "Simple"}) == pytest.approx(tok_s(NVLINK))
    nccl = BUILTIN["nvlink-8x-nccl"]
    assert CostModel(nccl, settings_from({})).breakdown(1).share < 0.2
    assert abs(tok_s(nccl, TUNED) / tok_s(nccl) - 1) < 0.01


def test_fast_tiny_rate():
    assert 300 <= tok_s(BUILTIN["fast-tiny"]) <= 1000


def test_check_init_refusals():
    with pytest.raises(NcclInitError, match="LL128"):
        check_init(PCIE, settings_from({"NCCL_PROTO": "LL128"}))
    check_init(NVLINK, settings_from({"NCCL_PROTO": "LL128"}))  # fine on NVLink
    with pytest.raises(NcclInitError, match="no algorithm/protocol available"):
        check_init(PCIE, settings_from({"NCCL_ALGO": "NVLS"}))
    with pytest.raises(NcclInitError, match="invalid argument"):
        check_init(PCIE, settings_from({"NCCL_BUFFSIZE": "abc"}))
    check_init(PCIE, settings_from({"NCCL_BUFFSIZE": "-2"}))  # -2 is NCCL's "unset"


def test_profile_toml(tmp_path):
    good = tmp_path / "mine.toml"
    good.write_text('extends = "pcie-8x-mla"\ncompute_ms = 9.0\nload_time_s = 0\n')
    p = load_profile(str(good))
    assert (p.name, p.compute_ms, p.layers) == ("mine", 9.0, 61)
    bad = tmp_path / "bad.toml"
    bad.write_text('extends = "pcie-8x-mla"\ncompute_msec = 9.0\n')
    with pytest.raises(ProfileError, match="compute_msec"):
        load_profile(str(bad))
    partial = tmp_path / "partial.toml"
    partial.write_text('name = "x"\n')
    with pytest.raises(ProfileError, match="missing"):
        load_profile(str(partial))
    with pytest.raises(ProfileError, match="unknown profile"):
        load_profile("no-such-profile")


def test_textgen():
    toks, fin = textgen.plan_tokens("What is the capital of France?", max_tokens=50,
                                    ignore_eos=False)
    assert "Paris" in "".join(t for _, t in toks) and fin == "stop" and len(toks) == 7
    toks, fin = textgen.plan_tokens("Count from 1 to 5.", max_tokens=3, ignore_eos=False)
    assert "".join(t for _, t in toks) == "1, 2, 3" and fin == "length"
    toks, _ = textgen.plan_tokens("Count from 1 to 5.", max_tokens=7, ignore_eos=True)
    assert "".join(t for _, t in toks) == "1, 2, 3, 4, 5, 6, 7"
    toks, _ = textgen.plan_tokens("hello", max_tokens=100, ignore_eos=False)
    assert len(toks) == textgen.NATURAL_LENGTH
    toks, _ = textgen.plan_tokens("What is the capital of France?", max_tokens=20,
                                  ignore_eos=True, reasoning_tokens=4)
    assert [k for k, _ in toks[:5]] == ["reasoning"] * 4 + ["content"] and len(toks) == 20
    wrong, _ = textgen.plan_tokens("What is the capital of France? Count from 1 to 3",
                                   max_tokens=30, ignore_eos=True, wrong=True)
    text = "".join(t for _, t in wrong)
    assert "Paris" not in text and "1, 2" not in text


def test_fault_parsing():
    plan = parse_faults(None, environ={"SIM_FAULT": "hang-mid-stream,slow-teardown",
                                       "SIM_FAULT_AFTER": "3"})
    assert plan.has("hang-mid-stream") and plan.has("slow-teardown") and plan.after_tokens == 3
    assert parse_faults("wrong-output", environ={"SIM_FAULT": "crash-start"}).modes == {
        "wrong-output"}
    with pytest.raises(FaultError, match="accepted"):
        parse_faults("explode")


# ---------------------------------------------------------------- real servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    """One ``python -m tuner.sim serve`` process in its own session; stderr collected."""

    def __init__(self, *args, env=None, profile="fast-tiny", load=0.2, workers=0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "tuner.sim", "serve", "--port", str(self.port),
               "--profile", profile, "--load-time", str(load), "--workers", str(workers),
               "--noise", "0", "--launch-noise", "0", "--seed", "1", *args]
        full_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("NCCL_", "SIM_")) and k != "CUDA_DEVICE_MAX_CONNECTIONS"}
        full_env["SIM_WORKER_MAX_LIFETIME_S"] = "120"  # leak safety net for this test run
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.pgid = self.proc.pid
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("SIM READY"):
                self.ready.set()

    def wait_ready(self, timeout=15.0) -> None:
        assert self.ready.wait(timeout), "server not ready:\n" + self.text()

    def text(self) -> str:
        return "\n".join(self.lines)

    def sim_json(self, tag: str) -> dict:
        for line in self.lines:
            if line.startswith(f"SIM {tag} "):
                return json.loads(line[len(tag) + 5:])
        raise AssertionError(f"no SIM {tag} line:\n{self.text()}")

    def ready_tok_s(self) -> float:
        line = [ln for ln in self.lines if ln.startswith("SIM READY")][0]
        return float(re.search(r" tok_s=([\d.]+)", line).group(1))

    def wait_line(self, needle: str, timeout=5.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in ln for ln in self.lines):
            assert time.monotonic() < deadline, f"{needle!r} not logged:\n{self.text()}"
            time.sleep(0.02)

    def group(self) -> list[int]:
        """Live (non-zombie) processes of the server's process group."""
        out = []
        for p in psutil.process_iter(["status"]):
            try:
                if os.getpgid(p.pid) == self.pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    out.append(p.pid)
            except (ProcessLookupError, psutil.Error):
                pass
        return out

    def signal_group(self, sig) -> None:
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass

    def wait_group_gone(self, timeout=8.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the server itself
            if not self.group():
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.signal_group(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


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


def chat(content, *, max_tokens=16, ignore_eos=False, stream=True, **extra):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "ignore_eos": ignore_eos, "stream": stream, "stream_options": {"include_usage": True},
            **extra}


def stream_chunks(url, body, timeout=10.0, path="/v1/chat/completions"):
    """(list of (t, chunk dict), done flag) of one streamed request."""
    chunks, done = [], False
    with httpx.Client(timeout=timeout) as c, c.stream("POST", url + path, json=body) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append((time.perf_counter(), json.loads(line[6:])))
    return chunks, done


def content_of(chunks):
    return "".join(c["choices"][0]["delta"].get("content", "") for _, c in chunks
                   if c.get("choices"))


def test_server_lifecycle_endpoints_and_rate(sim):
    s = sim(env={"NCCL_PROTO": "LL", "NCCL_BUFFSIZE": "1048576", "NCCL_ALGO": "Ring",
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
    assert re.search(r"^\S+:\d+:\d+ \[0\] NCCL INFO NCCL_BUFFSIZE set by environment to 1048576\.$",
                     s.text(), re.M)
    assert "NCCL INFO NCCL_PROTO set by environment to LL" in s.text()

    chunks, done = stream_chunks(s.url, chat("What is the capital of France?"))
    assert done and chunks[0][1]["choices"][0]["delta"] == {"role": "assistant"}
    assert "Paris" in content_of(chunks)
    assert chunks[-1][1]["usage"]["completion_tokens"] == 7

    # rate: one token per chunk at the cost model's pace
    n = 250
    chunks, _ = stream_chunks(s.url, chat("hi", max_tokens=n, ignore_eos=True))
    times = [t for t, c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")]
    assert len(times) == n and chunks[-1][1]["usage"]["completion_tokens"] == n
    rate = (n - 1) / (times[-1] - times[0])
    assert rate == pytest.approx(s.ready_tok_s(), rel=0.03)

    r = httpx.post(s.url + "/v1/completions", json={"prompt": "Count from 1 to 6", "max_tokens": 40,
                                                    "model": "sim/tiny-tp4"})
    body = r.json()
    assert body["choices"][0]["text"] == "1, 2, 3, 4, 5, 6"
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == 6
    r = httpx.post(s.url + "/v1/chat/completions", json={**chat("x"), "model": "other"})
    assert r.status_code == 404

    workers = s.sim_json("WORKERS")["pids"]
    assert len(workers) == 2
    for pid in workers:
        assert "--sim-worker" in psutil.Process(pid).cmdline()
    assert set(s.group()) == {s.proc.pid, *workers}
    s.signal_group(signal.SIGTERM)
    assert s.proc.wait(timeout=8) == 0
    assert s.wait_group_gone(), s.group()


def test_pcie_profile_streams_at_model_rate_with_reasoning(sim):
    s = sim("--reasoning-tokens", "5", "--reasoning-field", "reasoning_content",
            profile="pcie-8x-mla", load=0.1)
    s.wait_ready()
    assert 60 <= s.ready_tok_s() <= 80
    chunks, _ = stream_chunks(s.url, chat("Count from 1 to 40", max_tokens=30, ignore_eos=True))
    deltas = [c["choices"][0]["delta"] for _, c in chunks if c.get("choices")][1:]
    assert all("reasoning_content" in d for d in deltas[:5]) and "content" in deltas[5]
    times = [t for t, c in chunks if c.get("choices")][1:]
    assert len(times) == 30
    assert (len(times) - 1) / (times[-1] - times[0]) == pytest.approx(s.ready_tok_s(), rel=0.03)


@pytest.mark.parametrize("env,needle", [
    ({"NCCL_PROTO": "LL128"}, "LL128"),
    ({"NCCL_ALGO": "Rung"}, 'Unrecognized element token "Rung"'),
])
def test_nccl_refusals_fail_at_start(sim, env, needle):
    s = sim(env=env, profile="pcie-8x-mla", workers=2)
    assert s.proc.wait(timeout=10) == 1
    s.wait_line("SIM EXIT")
    warn = [ln for ln in s.lines if " NCCL WARN " in ln]
    assert warn and needle in warn[0]
    assert s.wait_group_gone(2)


def test_fault_crash_start(sim):
    s = sim("--fault", "crash-start", load=0.4, workers=1)
    assert s.proc.wait(timeout=10) == 1
    s.wait_line("SIM EXIT")
    assert "NCCL WARN Cuda failure 'out of memory'" in s.text()
    assert not s.ready.is_set()
    assert s.wait_group_gone(3)


def test_fault_hang_start(sim):
    s = sim(env={"SIM_FAULT": "hang-start"}, load=0.1)
    time.sleep(1.0)
    assert s.proc.poll() is None and not s.ready.is_set()
    with pytest.raises(httpx.ConnectError):
        httpx.get(s.url + "/health", timeout=1)
    s.signal_group(signal.SIGTERM)
    assert s.proc.wait(timeout=5) == 0


def content_deltas(url, body, timeout):
    """Content deltas received before the stream ended or failed; re-raises httpx errors
    after recording what arrived (``exc.received``)."""
    received = []
    try:
        with httpx.Client(timeout=timeout) as c, c.stream(
                "POST", url + "/v1/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    d = json.loads(line[6:])
                    if d["choices"] and "content" in d["choices"][0]["delta"]:
                        received.append(d)
    except httpx.HTTPError as exc:
        exc.received = received
        raise
    return received


def test_fault_crash_mid_stream(sim):
    s = sim("--fault", "crash-mid-stream", "--fault-after", "5", "--fault-request", "2",
            workers=1)
    s.wait_ready()
    body = chat("hi", max_tokens=20, ignore_eos=True)
    assert len(content_deltas(s.url, body, 5)) == 20  # request 1 is fine
    with pytest.raises(httpx.HTTPError) as exc:
        content_deltas(s.url, body, 5)
    assert len(exc.value.received) == 5
    assert s.proc.wait(timeout=5) == 1
    s.wait_line("EngineCore encountered a fatal error")
    assert s.wait_group_gone(3)


def test_fault_hang_mid_stream(sim):
    s = sim("--fault", "hang-mid-stream", "--fault-after", "3")
    s.wait_ready()
    with pytest.raises(httpx.ReadTimeout) as exc:
        content_deltas(s.url, chat("hi", max_tokens=20, ignore_eos=True),
                       httpx.Timeout(5, read=1.0))
    assert len(exc.value.received) == 3
    assert httpx.get(s.url + "/health", timeout=2).status_code == 200
    assert s.proc.poll() is None
    s.signal_group(signal.SIGTERM)
    assert s.proc.wait(timeout=5) == 0


def test_fault_healthy_then_500_via_env(sim):
    s = sim(env={"SIM_FAULT": "healthy-then-500"})
    s.wait_ready()
    assert httpx.get(s.url + "/health").status_code == 200
    r = httpx.post(s.url + "/v1/chat/completions", json=chat("What is the capital of France?"))
    assert r.status_code == 500 and r.json() == {"error": "EngineCore encountered an issue"}


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
    t0 = time.monotonic()
    s.signal_group(signal.SIGTERM)
    assert s.proc.wait(timeout=8) == 0
    assert time.monotonic() - t0 >= 1.4
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
                           cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and "error while attempting to bind" in p.stderr


def test_cli_model_and_bad_input():
    out = subprocess.run([sys.executable, "-m", "tuner.sim", "model", "--profile", "pcie-8x-mla",
                          "--env", "NCCL_PROTO=Simple", "--json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0 and json.loads(out.stdout)["proto"] == "Simple"
    from tuner.sim.cli import main

    assert main(["serve", "--profile", "nope"]) == 2
    assert main(["serve", "--fault", "explode"]) == 2
    assert main(["bogus"]) == 2


def test_noise_is_seeded_and_sized():
    from tuner.sim.server import Engine, ServeOptions

    def factors(seed):
        opts = ServeOptions(profile=PCIE, model_name="m", noise=0.02, launch_noise=0.0, seed=seed)
        eng = Engine(opts, CostModel(PCIE, settings_from({})), log=None, workers=None)
        return [eng.new_request(10)[1] for _ in range(400)]

    a, b = factors(7), factors(7)
    assert a == b and a != factors(8)
    mean = sum(a) / len(a)
    sd = (sum((x - mean) ** 2 for x in a) / len(a)) ** 0.5
    assert abs(mean - 1) < 0.005 and 0.015 < sd < 0.025


def test_concurrent_streams_share_the_box(sim):
    s = sim()
    s.wait_ready()
    n, conc = 300, 4
    rates = []
    barrier = threading.Barrier(conc)

    def one():
        times = []
        with httpx.Client(timeout=20) as c:  # client set-up (SSL context) before the barrier
            barrier.wait()
            with c.stream("POST", s.url + "/v1/chat/completions",
                          json=chat("hi", max_tokens=n, ignore_eos=True)) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {") and '"content"' in line:
                        times.append(time.perf_counter())
        # middle of the streams, where all of them run
        rates.append((len(times[50:250]) - 1) / (times[249] - times[50]))

    threads = [threading.Thread(target=one) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(rates) == conc
    expected = tok_s(BUILTIN["fast-tiny"], batch=conc)
    assert all(r == pytest.approx(expected, rel=0.04) for r in rates), (rates, expected)
    assert sum(rates) > 2 * s.ready_tok_s()  # batching: aggregate grows with concurrency
