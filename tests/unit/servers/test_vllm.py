"""vLLM's kind: its Ray rule for ranks that never saw a variable, by version."""

from __future__ import annotations

from tests.unit.nccl.test_proof_ranks import RAY, SET, rank_lines
from tuner.nccl import confirmations, parse_log
from tuner.servers import kind_named


def _proof(lines: list[str]):
    vllm = kind_named("vllm")
    version = next((v for line in lines if (v := vllm.version(line))), None)
    return confirmations(SET, parse_log(lines), server_version=version, silent_why=vllm.ray_silent_why)


def test_ray_workers_that_completed_init_silently_get_the_cause_for_their_vllm_version():
    base = rank_lines(0, echoes=SET) + rank_lines(1, wrapper=RAY) + rank_lines(2, wrapper=RAY) + rank_lines(3, wrapper=RAY)
    old = ["INFO 06-01 12:00:00 [api_server.py:912] vLLM API server version 0.8.2", *base]
    c = _proof(old)
    assert "vLLM 0.8.2 copies only its own variables" in c.not_applied["NCCL_ALGO"]
    assert "runtime_env" in c.not_applied["NCCL_ALGO"]
    new = ["INFO 06-01 12:00:00 [api_server.py:912] vLLM API server version 0.17.1", *base]
    c = _proof(new)
    assert "vLLM 0.17.1 copies NCCL_* to its Ray workers" in c.not_applied["NCCL_ALGO"]
    c = _proof(base)
    assert "vLLM before 0.17.0 (this log names no vLLM version)" in c.not_applied["NCCL_ALGO"]
