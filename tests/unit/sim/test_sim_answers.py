"""Greedy answers of ``sim serve`` for the correctness and soak gates: the same text on every launch
of a set, OpenAI logprobs (chat and completions, streamed or not), late parting at the stated rate
when a set changes the reduction order, a set that corrupts answers early, a set that hangs after
some (scaled) minutes of load, and the pcie-8x-gates profile's three sets."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.simproc import chat, content_deltas, run_sim, stream_chunks
from tuner.sim import greedy
from tuner.sim.faults import FaultError, parse_faults, parse_when
from tuner.sim.profiles import ProfileError, profile_from_mapping

PROMPTS = [f"Tell me about collective number {k} and its reduction order." for k in range(12)]


@pytest.fixture
def fast_profile(tmp_path):
    """fast-tiny with 2 layers and little compute: thousands of tok/s, the same NCCL choices."""
    path = tmp_path / "fast.toml"
    path.write_text('extends = "fast-tiny"\nlayers = 2\ncompute_ms = 0.1\nop_overhead_us = 1.0\n')
    return str(path)


def complete(url, prompt, n=300, **extra) -> dict:
    body = {"prompt": prompt, "max_tokens": n, "ignore_eos": True, "temperature": 0, **extra}
    r = httpx.post(url + "/v1/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def words(choice) -> list[str]:
    return choice["logprobs"]["tokens"]


def first_difference(a: list[str], b: list[str]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)


# ------------------------------------------------------------------ determinism and logprobs
def test_a_set_answers_alike_on_every_launch(sim, fast_profile):
    env = {"NCCL_PROTO": "LL"}  # another reduction order than the untuned launch's
    answers = []
    for seed in ("1", "2"):
        s = sim("--seed", seed, "--divergence-rate", "0.5", "--launch-divergence-rate", "0",
                profile=fast_profile, env=env)
        s.wait_ready()
        assert s.sim_json("MODEL")["reduction_order"] == "changed"
        answers.append([complete(s.url, p, logprobs=1) for p in PROMPTS[:6]])
        assert s.finish() == 0
    assert [a["text"] for a in answers[0]] == [a["text"] for a in answers[1]]
    assert [a["logprobs"] for a in answers[0]] == [a["logprobs"] for a in answers[1]]
    assert all(len(words(a)) == 300 and a["finish_reason"] == "length" for a in answers[0])


def test_logprobs_shapes_streamed_and_not(sim, fast_profile):
    s = sim(profile=fast_profile)
    s.wait_ready()
    # chat, not streamed: one entry per token, the chosen token first among its top_logprobs
    r = httpx.post(s.url + "/v1/chat/completions", json=chat(
        "Tell me about rings", max_tokens=20, stream=False, logprobs=True, top_logprobs=3, seed=7))
    choice = r.json()["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == 20 and "".join(c["token"] for c in content) == choice["message"]["content"]
    for c in content:
        assert set(c) == {"token", "logprob", "bytes", "top_logprobs"}
        assert c["bytes"] == list(c["token"].encode()) and c["logprob"] < 0
        assert len(c["top_logprobs"]) == 3 and c["top_logprobs"][0]["token"] == c["token"]
        lps = [t["logprob"] for t in c["top_logprobs"]]
        assert lps == sorted(lps, reverse=True) and set(c["top_logprobs"][1]) == {"token", "logprob", "bytes"}
    # chat, streamed: each chunk has its own token's entry; together the same as above
    chunks, done = stream_chunks(s.url, chat("Tell me about rings", max_tokens=20, logprobs=True,
                                             top_logprobs=3))
    token_chunks = [c for _, c in chunks if c["choices"] and "content" in c["choices"][0]["delta"]]
    assert done and chunks[0][1]["choices"][0]["logprobs"] is None  # the role-only chunk
    assert [c["choices"][0]["logprobs"]["content"][0] for c in token_chunks] == content
    # chat, logprobs without top_logprobs: empty lists; no logprobs: null
    c0 = httpx.post(s.url + "/v1/chat/completions", json=chat("x", max_tokens=3, stream=False,
                                                              logprobs=True)).json()["choices"][0]
    assert [c["top_logprobs"] for c in c0["logprobs"]["content"]] == [[], [], []]
    plain = httpx.post(s.url + "/v1/chat/completions", json=chat("x", max_tokens=3, stream=False)).json()
    assert plain["choices"][0]["logprobs"] is None
    # completions, not streamed and streamed
    one = complete(s.url, "Tell me about trees", n=12, logprobs=2)
    lp = one["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert "".join(lp["tokens"]) == one["text"] and len(lp["token_logprobs"]) == 12
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(12)]
    assert all(len(t) == 2 and t[tok] == p for t, tok, p in zip(
        lp["top_logprobs"], lp["tokens"], lp["token_logprobs"], strict=True))
    chunks, done = stream_chunks(s.url, {"prompt": "Tell me about trees", "max_tokens": 12,
                                         "ignore_eos": True, "stream": True, "logprobs": 2},
                                 path="/v1/completions")
    parts = [c["choices"][0]["logprobs"] for _, c in chunks if c["choices"]]
    assert done and [p["text_offset"][0] for p in parts] == lp["text_offset"]
    assert [p["tokens"][0] for p in parts] == lp["tokens"]
    zero = complete(s.url, "y", n=2, logprobs=0)["logprobs"]  # logprobs 0: the chosen token alone
    assert [list(t) for t in zero["top_logprobs"]] == [[w] for w in zero["tokens"]]
    # bad requests, as vLLM refuses them
    for path, body in (("/v1/chat/completions", chat("x", top_logprobs=2)),
                       ("/v1/chat/completions", chat("x", logprobs=True, top_logprobs=21)),
                       ("/v1/chat/completions", chat("x", logprobs=3)),
                       ("/v1/completions", {"prompt": "x", "logprobs": True}),
                       ("/v1/completions", {"prompt": "x", "logprobs": 25})):
        r = httpx.post(s.url + path, json=body)
        assert r.status_code == 400 and "logprobs" in r.json()["error"]["message"], body
    assert s.finish() == 0


# ------------------------------------------------------------------ late parting at a rate
def test_late_parting_rate_over_many_prompts():
    """3000 prompts of 300 tokens under a set that changes the reduction order: the share that
    parts is the stated 3 % within a band, never before token 64; the untuned order never parts
    when the launch's own nondeterminism is off."""
    changed = greedy.LaunchPaths("order-b", 0.03, 0.0, False)
    untuned = greedy.LaunchPaths(None, 0.03, 0.0, False)
    parted = []
    for k in range(3000):
        question = f"Question {k}: explain a tree allreduce."
        pos = changed.first_part(question, 0, 300)
        if pos is not None:
            parted.append(pos)
        assert untuned.first_part(question, 0, 300) is None
    share = len(parted) / 3000
    assert 0.018 <= share <= 0.042, share
    assert min(parted) >= greedy.ONSET and max(parted) < 300
    assert greedy.eps_for_rate(0.0) == 0.0 < greedy.eps_for_rate(0.03) < greedy.eps_for_rate(0.3)


def test_parting_point_is_a_near_tie_visible_in_logprobs(sim, fast_profile):
    base = sim("--launch-divergence-rate", "0", profile=fast_profile)
    tuned = sim("--divergence-rate", "0.6", "--launch-divergence-rate", "0", profile=fast_profile,
                env={"NCCL_PROTO": "LL"})
    base.wait_ready()
    tuned.wait_ready()
    parts = 0
    for p in PROMPTS:
        a, b = complete(base.url, p, logprobs=5), complete(tuned.url, p, logprobs=5)
        i = first_difference(words(a), words(b))
        if i is None:
            continue
        parts += 1
        assert i >= greedy.ONSET
        top = b["logprobs"]["top_logprobs"][i]
        assert words(a)[i] in top  # the baseline's token is the runner-up...
        assert b["logprobs"]["token_logprobs"][i] - top[words(a)[i]] < 0.05  # ...a near-tie behind
        assert b["text"] != a["text"] and b["text"][:20] == a["text"][:20]
    assert parts >= 3  # 0.6 of 12 answers: expected 7
    assert base.finish() == 0 and tuned.finish() == 0


# ------------------------------------------------------------------ a corrupting set
def test_corrupting_set_answers_wrong_early_but_passes_the_smoke_check(sim, fast_profile):
    rule = "NCCL_P2P_LEVEL=SYS => corrupt,speed=1.2"
    base = sim("--fault-when", rule, profile=fast_profile)
    bad = sim("--fault-when", rule, profile=fast_profile, env={"NCCL_P2P_LEVEL": "SYS"})
    base.wait_ready()
    bad.wait_ready()
    assert bad.sim_json("MODEL")["set_effects"] == {"corrupt": True, "hang_after_load_s": None, "speed": 1.2}
    assert bad.ready_tok_s() > base.ready_tok_s()
    smoke = httpx.post(bad.url + "/v1/chat/completions",
                       json=chat("What is the capital of France?", stream=False)).json()
    assert "Paris" in smoke["choices"][0]["message"]["content"]
    for p in PROMPTS[:6]:
        a, b = complete(base.url, p, n=40, logprobs=20), complete(bad.url, p, n=40, logprobs=20)
        i = first_difference(words(a), words(b))
        assert i is not None and greedy.CORRUPT_FROM[0] <= i < greedy.CORRUPT_FROM[1]
        assert all(w not in top for w, top in zip(words(a)[i:], b["logprobs"]["top_logprobs"][i:],
                                                   strict=True))
    assert base.finish() == 0 and bad.finish() == 0


# ------------------------------------------------------------------ a set that hangs under load
def test_hang_after_load_with_a_time_scale(sim, fast_profile):
    s = sim("--fault-when", "CUDA_DEVICE_MAX_CONNECTIONS=1 => hang-after-load=90", "--time-scale", "300",
            "--watchdog-s", "600", profile=fast_profile, env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    s.wait_ready()
    model = s.sim_json("MODEL")
    assert model["set_effects"]["hang_after_load_s"] == 90 and model["time_scale"] == 300
    body = chat("Tell me a long story", max_tokens=8000, ignore_eos=True)  # ~2 s of load at full pace
    with pytest.raises(httpx.ReadTimeout) as exc:
        content_deltas(s.url, body, httpx.Timeout(10, read=3.0))
    assert 0 < len(exc.value.received) < 8000  # 90 s / 300 = 0.3 s of load, then nothing
    assert httpx.get(s.url + "/health", timeout=5).status_code == 200
    with pytest.raises(httpx.ReadTimeout) as exc:  # a new stream gets its headers, then nothing
        content_deltas(s.url, chat("hi", max_tokens=20), httpx.Timeout(10, read=2.0))
    assert exc.value.received == []
    s.wait_line("Watchdog caught collective operation timeout", timeout=60)  # 600 s / 300 later
    dog = [ln for ln in s.lines if "Watchdog caught" in ln]
    assert len(dog) == 4 and dog[0].startswith("[rank0]:[E") and "ProcessGroupNCCL.cpp:" in dog[0]
    assert "] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" in dog[0]
    assert "OpType=ALLREDUCE" in dog[0] and "Timeout(ms)=600000) ran for 6000" in dog[0]
    assert dog[0].endswith(" milliseconds before timing out.")
    assert httpx.get(s.url + "/health", timeout=5).status_code == 200 and s.proc.poll() is None
    assert s.finish() == 0


# ------------------------------------------------------------------ the gates profile and parsing
def model_json(*args) -> dict:
    out = run_sim("model", "--profile", "pcie-8x-gates", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_gates_profile_three_sets():
    base = model_json()
    assert base["set_effects"] == {"corrupt": False, "hang_after_load_s": None, "speed": 1.0}
    corrupt = model_json("--env", "NCCL_P2P_LEVEL=SYS")
    hang = model_json("--env", "CUDA_DEVICE_MAX_CONNECTIONS=1", "--env", "NCCL_MAX_NCHANNELS=16")
    for alone in ("CUDA_DEVICE_MAX_CONNECTIONS=1", "NCCL_MAX_NCHANNELS=16"):  # the hang needs both
        assert model_json("--env", alone)["set_effects"]["hang_after_load_s"] is None
    clean = model_json("--env", "NCCL_PROTO=LL")
    ratio = {k: v["tok_s_per_stream"] / base["tok_s_per_stream"] for k, v in
             (("corrupt", corrupt), ("hang", hang), ("clean", clean))}
    assert ratio["corrupt"] > ratio["hang"] > ratio["clean"] == pytest.approx(1.10, abs=0.005)
    assert corrupt["set_effects"]["corrupt"] and not clean["set_effects"]["corrupt"]
    assert hang["set_effects"]["hang_after_load_s"] == 90 and clean["set_effects"]["hang_after_load_s"] is None
    assert clean["reduction_order"] == "changed" and base["reduction_order"] == "untuned"
    both = model_json("--env", "NCCL_P2P_LEVEL=SYS", "--env", "NCCL_PROTO=LL")
    assert both["set_effects"]["corrupt"] and both["set_effects"]["speed"] == pytest.approx(1.08 * 1.10)
    extra = model_json("--fault-when", "NCCL_PROTO=LL&!NCCL_ALGO => hang-after-load=30",
                       "--env", "NCCL_PROTO=LL")
    assert extra["set_effects"]["hang_after_load_s"] == 30
    # custom-allreduce: where vLLM's custom allreduce carries the decode allreduce (club-3090 #922)
    rule = ("--fault-when", "custom-allreduce => corrupt")
    on = run_sim("model", "--profile", "nvlink-8x", "--json", *rule)
    off = run_sim("model", "--profile", "nvlink-8x", "--json", "--disable-custom-all-reduce", *rule)
    assert json.loads(on.stdout)["set_effects"]["corrupt"] and json.loads(on.stdout)["via"] == "custom"
    assert not json.loads(off.stdout)["set_effects"]["corrupt"]


@pytest.mark.parametrize("text, needle", [
    ("NCCL_P2P_LEVEL=SYS", "must look like"),
    ("NCCL_P2P_LEVEL=SYS => explode", "unknown effect 'explode'"),
    ("NCCL_P2P_LEVEL=SYS => hang-after-load=soon", "must be a number"),
    ("NCCL_P2P_LEVEL=SYS => speed=0", "must be >= 0.01"),
    ("two words => corrupt", "bad condition"),
    (" => corrupt", "must look like"),
])
def test_bad_fault_when_entries_are_named(text, needle):
    with pytest.raises(FaultError, match=needle):
        parse_when(text)


def test_fault_when_sources_and_the_command_line():
    plan = parse_faults(None, environ={"SIM_FAULT_WHEN": "A=1 => corrupt; custom-allreduce => speed=2",
                                       "SIM_TIME_SCALE": "60", "SIM_FAULT": "hang-after-load=5"})
    assert plan.time_scale == 60 and plan.hang_after_load_s == 5 and len(plan.when) == 2
    assert plan.effects({"A": "1"}, custom_allreduce=True).as_dict() == {
        "corrupt": True, "hang_after_load_s": 5, "speed": 2.0}
    assert plan.effects({"A": "2"}).as_dict() == {"corrupt": False, "hang_after_load_s": 5, "speed": 1.0}
    with pytest.raises(FaultError, match="hang-after-load=90"):
        parse_faults("hang-after-load")
    with pytest.raises(FaultError, match="time-scale"):
        parse_faults(None, environ={"SIM_TIME_SCALE": "0"})
    with pytest.raises(ProfileError, match="set_faults"):
        profile_from_mapping({"extends": "fast-tiny", "set_faults": "X=1 => melt"}, "box.toml")
    with pytest.raises(ProfileError, match="divergence_rate"):
        profile_from_mapping({"extends": "fast-tiny", "divergence_rate": 1.5}, "box.toml")
    bad = run_sim("serve", "--divergence-rate", "2", "--port", "0")
    assert bad.returncode == 2 and "--divergence-rate must be within [0, 1)" in bad.stderr
    bad = run_sim("serve", "--fault-when", "X=1 => melt", "--port", "0")
    assert bad.returncode == 2 and "unknown effect 'melt'" in bad.stderr
    helptext = run_sim("serve", "--help").stdout
    for flag in ("--fault-when", "--time-scale", "--watchdog-s", "--divergence-rate",
                 "--launch-divergence-rate", "hang-after-load=S", "corrupt"):
        assert flag in helptext
