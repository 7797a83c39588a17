"""The correctness gate's answers (tuner/measure/answers.py) from a real server process
(tests/servers/answers_server.py): token texts in order, logprobs when the server sends them,
none when it ignores the field; the kind's quirks decide what is asked."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from tests.helpers import SERVERS, free_port
from tuner.measure import answers_from_json, answers_to_json, make_client, take_answers
from tuner.servers import KINDS

VLLM = next(k for k in KINDS if k.name == "vllm")
PROMPTS = ("Recite the alphabet.", "Count in French.")


@pytest.fixture
def server():
    """Start the answers server with extra environment; yields its base URL."""
    procs = []

    def start(**env: str) -> str:
        port = free_port()
        proc = subprocess.Popen([sys.executable, str(SERVERS / "answers_server.py"), "--port", str(port)],
                                env={**os.environ, "ENVRATE_BASE": "5000", **env}, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("serving on"):
                return f"http://127.0.0.1:{port}"
        raise AssertionError("the answers server did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_answers_hold_each_token_in_order_with_its_logprobs(server, endpoint):
    url = server()
    with make_client(10.0) as client:
        answers = take_answers(client, url, model="m", prompts=PROMPTS, max_tokens=24, kind=VLLM, endpoint=endpoint)
    assert [a.prompt for a in answers] == list(PROMPTS)
    for a in answers:
        assert len(a.tokens) == 24 and len(a.logprobs) == 24
        assert [lp.token for lp in a.logprobs] == list(a.tokens)
        assert all(lp.margin == pytest.approx(5.0) for lp in a.logprobs)
    assert answers[0].text != answers[1].text  # per prompt
    assert answers_from_json(answers_to_json(answers)) == answers


def test_the_same_prompts_give_the_same_answers_on_another_launch_and_corruption_shows(server):
    clean, corrupt = server(), server(ANSWERS_CORRUPT_WHEN="ENVRATE_BASE=5000", ANSWERS_CORRUPT_AT="3")
    with make_client(10.0) as client:
        a = take_answers(client, clean, model="m", prompts=PROMPTS, max_tokens=16, kind=VLLM)
        b = take_answers(client, clean, model="m", prompts=PROMPTS, max_tokens=16, kind=VLLM)
        c = take_answers(client, corrupt, model="m", prompts=PROMPTS, max_tokens=16, kind=VLLM)
    assert a == b
    assert [x.tokens[:3] for x in c] == [x.tokens[:3] for x in a]
    assert all(x.tokens[3] != y.tokens[3] for x, y in zip(a, c, strict=True))


def test_a_server_that_sends_no_logprobs_gives_the_stream_chunks(server):
    url = server(ANSWERS_LOGPROBS="0")
    with make_client(10.0) as client:
        answers = take_answers(client, url, model="m", prompts=PROMPTS[:1], max_tokens=12, kind=VLLM)
    assert len(answers[0].tokens) == 12 and answers[0].logprobs == ()


def test_a_kind_that_takes_no_logprobs_is_not_asked_for_them(server):
    url = server()
    quiet = dataclasses.replace(VLLM, takes_logprobs=False, takes_seed=False)
    with make_client(10.0) as client:
        answers = take_answers(client, url, model="m", prompts=PROMPTS[:1], max_tokens=12, kind=quiet)
    assert answers[0].logprobs == () and len(answers[0].tokens) == 12
