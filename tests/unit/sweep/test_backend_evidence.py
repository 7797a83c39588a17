"""A trial's record carries the proof of its set's backend choice, read from its launch's log
(sweep.evidence.read), and keeps it through the storage and trials.csv."""

from __future__ import annotations

import time
from pathlib import Path

from tests.unit.servers.test_backend_proof_lines import ENGINE, FI_MISSING
from tuner.record import Kind, Status, TrialRecord, from_user_attrs, to_user_attrs
from tuner.sweep import read

ARGV = ["vllm", "serve", "m", "--tensor-parallel-size", "8"]


def launched(tmp_path: Path, log_lines: list[str], env: dict[str, str] | None = None,
             flags: list[str] | None = None) -> TrialRecord:
    """A record whose launch logged ``log_lines``, its evidence read as the sweep reads it."""
    log = tmp_path / "logs" / "trial-0001.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(log_lines) + "\n")
    record = TrialRecord(1, Kind.PRESET, Status.OK, env=dict(env or {}), flags=list(flags or []), log=str(log),
                         started_at=time.time() - 60)
    assert read(record, dict(env or {}), ARGV, {}, None) is not None
    return record


def test_the_flag_proven_by_the_engine_config_line(tmp_path):
    r = launched(tmp_path, [ENGINE.format(True)], flags=["--disable-custom-all-reduce"])
    assert (r.backend_choice, r.backend_applied, r.allreduce_backend) == ("vllm-custom-allreduce-off", True, "nccl")
    assert r.backend_reason.endswith('the server logged "disable_custom_all_reduce=True,"')


def test_a_flag_the_server_did_not_take_is_not_applied(tmp_path):
    r = launched(tmp_path, [ENGINE.format(False)], flags=["--disable-custom-all-reduce"])
    assert r.backend_choice == "vllm-custom-allreduce-off" and r.backend_applied is False
    assert "is absent from the log" in r.backend_reason


def test_a_variable_the_server_refused_is_not_applied_with_its_words(tmp_path):
    env = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1", "NCCL_PROTO": "LL"}
    r = launched(tmp_path, [ENGINE.format(False), FI_MISSING], env=env)
    assert r.backend_choice == "vllm-flashinfer" and r.backend_applied is False
    assert r.backend_reason.endswith('the server logged "FlashInfer All Reduce is disabled because flashinfer is not available"')
    assert r.allreduce_backend == "custom_allreduce"  # what ran instead


def test_a_set_without_a_backend_switch_records_none(tmp_path):
    r = launched(tmp_path, [ENGINE.format(False)], env={"NCCL_PROTO": "LL"})
    assert (r.backend_choice, r.backend_applied, r.backend_reason) == ("", None, "")
    assert r.allreduce_backend == "custom_allreduce"


def test_the_proof_is_stored_and_a_format_5_trial_reads_as_no_choice(tmp_path):
    r = launched(tmp_path, [ENGINE.format(False)], flags=["--disable-custom-all-reduce"])
    back = from_user_attrs(1, to_user_attrs(r))
    assert (back.backend_choice, back.backend_applied, back.backend_reason) == (
        r.backend_choice, False, r.backend_reason)
    old = {k: v for k, v in to_user_attrs(r).items() if not k.startswith("backend_")}
    assert from_user_attrs(1, old).backend_applied is None and from_user_attrs(1, old).backend_choice == ""


def test_a_backend_choices_variable_is_left_to_its_own_proof_not_to_nccl(tmp_path):
    env = {"VLLM_ALLREDUCE_USE_FLASHINFER": "1", "NCCL_PROTO": "LL"}
    r = launched(tmp_path, [ENGINE.format(False), FI_MISSING], env=env)
    assert [row["name"] for row in r.nccl_proof] == ["NCCL_PROTO"] and "VLLM_ALLREDUCE_USE_FLASHINFER" not in r.nccl_unverifiable
