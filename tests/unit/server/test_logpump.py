"""The trial log's byte bound (case 27's kind): over-long lines cut at their head, the tail
bounded in bytes, the marker counting what was left out, secrets never half written."""

from __future__ import annotations

import os

from tuner.server.logpump import LogPump, line_cap


def _pump(tmp_path, chunks: list[bytes], max_bytes: int, secrets: list[str] | None = None):
    r, w = os.pipe()
    path = tmp_path / "t.log"
    seen: list[str] = []
    with open(r, "rb") as pipe:
        pump = LogPump(pipe, path, max_bytes=max_bytes, secrets=secrets or [], watchers=[seen.append])
        with open(w, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        pump.drain(10.0)  # the writer closed: the pipe is read to its end
        pump.note("teardown: done")
        pump.close()
    return pump, path, seen


def test_one_5_mb_line_keeps_its_head_and_says_what_was_cut(tmp_path):
    head = b"ERROR 06-01 [engine.py:1] CUDA out of memory. prompt: "
    pump, path, seen = _pump(tmp_path, [head + b"y" * (5 * 2**20) + b"\nnext line\n"], 2**20)
    text = path.read_text()
    assert path.stat().st_size < 2 * line_cap(2**20)
    assert text.startswith(head.decode()) and "next line" in text
    cut = 5 * 2**20 + len(head) - line_cap(2**20)
    assert f"[... {cut} bytes of this line dropped ...]" in text
    assert seen[0].startswith("ERROR 06-01 [engine.py:1] CUDA out of memory.")  # the cause's words reach the watchers
    assert pump.tail(1) == ["next line"]


def test_long_lines_past_the_cap_stay_within_it_and_the_marker_counts(tmp_path):
    lines = [f"line {i} ".encode() + b"z" * 65_000 + b"\n" for i in range(160)]
    _, path, _ = _pump(tmp_path, [*lines, b"RuntimeError: the last words\n"], 2**20)
    text = path.read_text()
    assert path.stat().st_size <= 2**20
    marker = next(line for line in text.splitlines() if "bytes dropped:" in line)
    printed = sum(map(len, lines)) + len("RuntimeError: the last words\n")
    dropped = int(marker.split("[... ")[1].split(" ")[0])
    assert printed - dropped <= 2**20 and dropped > 9_000_000
    assert "RuntimeError: the last words" in text.split(marker)[1] and "teardown: done" in text


def test_a_cut_never_leaves_the_start_of_a_secret(tmp_path):
    secret = "hf_secretvalue_123"
    cap = line_cap(2**20)
    raw = b"a" * (cap - 5) + secret.encode() + b"b" * 100 + b"\n"
    _, path, _ = _pump(tmp_path, [raw], 2**20, secrets=[secret])
    assert "hf_se" not in path.read_text()


def test_a_line_split_across_writes_is_one_line(tmp_path):
    pump, path, _ = _pump(tmp_path, [b"NCCL INFO NCCL_AL", b"GO set by environment to Ring\n"], 4096)
    assert "NCCL INFO NCCL_ALGO set by environment to Ring\n" in path.read_text()
    assert pump.quiet_s() is not None
