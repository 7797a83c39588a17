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


def test_the_log_file_keeps_every_line_and_the_console_the_headlines(tmp_path, capsys):
    """Off a terminal: the phases and the details go to the night's log only, unless verbose; the
    file gets every line, appended (a resumed night adds to it), and its path is said once."""
    from tuner.sweep.progress import NIGHT_LOG, Progress

    log = tmp_path / "study" / NIGHT_LOG
    for verbose in (False, True):
        p = Progress(3, interactive=False, verbose=verbose)
        p.keep(log)
        p.phase(1, "trial 0: baseline", "probing", "run 1/4")
        p.log("trial 0 [baseline] {} -> 70.0 tok/s")
        p.detail("trial 0: NCCL library /x/libnccl.so.2 (version 2.27.3, build ID ab)")
        p.close()
        p.log("sweep ended: budget spent")  # after the runner closed its status: kept too
        err = capsys.readouterr().err
        assert "trial 0 [baseline] {} -> 70.0 tok/s" in err and "sweep ended" in err
        assert ("relaunch 1 of 3 [trial 0: baseline] probing: run 1/4" in err) is verbose
        assert ("NCCL library" in err) is verbose
        assert (f"the night's full log: {log} (-v shows it here too)" in err) is not verbose
    lines = log.read_text().splitlines()
    assert len(lines) == 8 and all(line.startswith("[") for line in lines)
    assert [line.split("] ", 1)[1].split(" ", 2)[:2] for line in lines[:4]] == [
        ["relaunch", "1"], ["trial", "0"], ["trial", "0:"], ["sweep", "ended:"]]


def test_a_relaunch_with_every_variable_confirmed_keeps_its_proof_to_the_details():
    from tuner.sweep.progress import trial_details

    rec = TrialRecord(trial=2, kind=Kind.PRESET, status=Status.OK, env={"NCCL_ALGO": "Ring"}, output_tok_s=70.0,
                      output_tok_s_runs=[70.0, 70.0], nccl_library="/x/libnccl.so.2",
                      nccl_proof=[{"name": "NCCL_ALGO", "status": "confirmed", "ranks": "0-7 (8/8)", "source": "-"}])
    assert trial_lines(rec, "ring") == ['trial 2 [ring] {"NCCL_ALGO": "Ring"} -> 70.0 tok/s (runs 70.0, 70.0)']
    assert trial_details(rec)[0] == "trial 2 proof: NCCL_ALGO confirmed, echoed by 0-7 (8/8)"
    rec.nccl_proof = [{"name": "NCCL_ALGO", "status": "not applied", "ranks": "0 (1/8)", "source": "-",
                       "why": "ranks 1-7 never echoed NCCL_ALGO"}]
    assert trial_lines(rec, "ring")[1].startswith("trial 2 proof: NCCL_ALGO not applied")  # said on the console
    assert trial_details(rec) == ["trial 2: NCCL library /x/libnccl.so.2 (version ?, build ID not read)"]
