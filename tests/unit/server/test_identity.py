"""The server identity a runner file holds: the same JSON keys as before, old files read back."""

from __future__ import annotations

import json

from tuner.server import ServerIdentity


def test_to_json_keeps_the_runner_file_keys():
    started = ServerIdentity("abc", pid=12, pgid=12, create_time=1700000000.5, port=8000)
    assert started.to_json() == {"pid": 12, "pgid": 12, "create_time": 1700000000.5, "marker": "abc", "port": 8000}
    assert ServerIdentity("abc").to_json() == {"marker": "abc"}  # recorded before the start
    assert ServerIdentity.from_json(json.loads(json.dumps(started.to_json()))) == started


def test_from_json_reads_what_older_runners_wrote():
    assert ServerIdentity.from_json({"marker": "m"}) == ServerIdentity("m")
    old = {"pid": "12", "pgid": "12", "create_time": "1700000000.5", "marker": "m"}  # numbers as text, no port
    assert ServerIdentity.from_json(old) == ServerIdentity("m", pid=12, pgid=12, create_time=1700000000.5)
    junk = {"pgid": "x", "create_time": None, "port": True}
    assert ServerIdentity.from_json(junk) == ServerIdentity("")


def test_the_launcher_handle_is_written_without_a_secret():
    """A container's handle is its client and name (no secret); a word that would be one is
    ``***`` all the same: the runner file and the study never hold a secret."""
    handle = ("sudo", "-n", "docker", "run", "--name", "nccl-tune-abc", "nccl-tune-leftover")
    assert ServerIdentity("m", pid=1, pgid=1, launcher=handle).to_json()["launcher"] == list(handle)
    odd = ServerIdentity("m", pid=1, pgid=1, launcher=("docker", "--config", "/c", "-e", "HF_TOKEN=hf_x123"))
    assert odd.to_json()["launcher"] == ["docker", "--config", "/c", "-e", "HF_TOKEN=***"]
