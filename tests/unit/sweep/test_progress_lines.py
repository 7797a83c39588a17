"""What the runner prints of a finished relaunch and at the night's start (sweep/progress.py): the
lines the e2e nights compare, made by plain functions of the record."""

from __future__ import annotations

from tuner.record import Kind, Status, TrialRecord
from tuner.sweep.progress import start_lines, trial_lines


def test_an_ok_relaunch_says_its_set_runs_and_backend():
    rec = TrialRecord(trial=3, kind=Kind.PRESET, status=Status.OK, env={"NCCL_ALGO": "Ring"}, flags=["--x"],
                      output_tok_s=101.25, output_tok_s_runs=[100.0, 102.5], backend_choice="custom",
                      backend_applied=None, allreduce_backend="nccl", backend_reason="flag")
    assert trial_lines(rec, "ring") == [
        'trial 3 [ring] {"NCCL_ALGO": "Ring"} --x -> 101.2 tok/s (runs 100.0, 102.5)',
        "trial 3 backend: custom not read, nccl carried the decode allreduce: flag"]


def test_a_failed_baseline_says_its_cause_and_what_nccl_read_unset():
    rec = TrialRecord(trial=0, kind=Kind.BASELINE, status=Status.CRASHED, cause="boom",
                      nccl_unlaunched={"NCCL_IB_HCA": "mlx5"})
    assert trial_lines(rec, "baseline") == [
        "trial 0 [baseline] {} -> crashed: boom",
        "trial 0: set behind nccl-tune's back (NCCL read variables this launch did not set): NCCL_IB_HCA=mlx5 (set "
        "where those processes start: `ray start`, the image, a conf file, or the server itself); this baseline is "
        "not untuned on those ranks"]
    rec.nccl_unlaunched_from = {"NCCL_IB_HCA": "/etc/nccl.conf"}
    assert trial_lines(rec, "baseline")[1] == (
        "trial 0: set behind nccl-tune's back (NCCL read variables this launch did not set): NCCL_IB_HCA=mlx5 (from "
        "/etc/nccl.conf); this baseline is not untuned on those ranks")


def test_the_start_says_notices_then_the_inherited_environment():
    assert start_lines(["a note"], ["NCCL_ALGO"], [], None) == [
        "a note", "inherited NCCL_ALGO removed from every trial, the baseline included; variables your cluster "
                  "needs (interfaces, IB HCAs) belong in server.env"]
    assert start_lines([], [], ["NCCL_SOCKET_IFNAME"], None) == [
        "inherited NCCL_SOCKET_IFNAME kept for every trial: they select hardware rather than tune it (vary one in "
        "the space to have it removed)"]
