"""The storage module against real Optuna storages (in memory and SQLite): records round-trip,
resume marks, study attributes, the resume fingerprint, penalties and constraints."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from tuner.errors import ResumeRefused
from tuner.inputs.config import load_config
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.study.resume import check_fingerprint
from tuner.study.storage import CONSTRAINT, StudyStore, hide_password, open_study

CHOICES = {"NCCL_PROTO": ("unset", "LL", "Simple")}


def finish(store: StudyStore, env: dict[str, str], kind: Kind, status: Status, tok_s: float | None = None,
           started_at: float = 0.0) -> TrialRecord:
    store.enqueue(store.params_of(env), TrialRecord(trial=-1, kind=kind))
    trial, _, rec = store.ask()
    rec.env, rec.started_at, rec.status = env, started_at, status
    rec.output_tok_s = tok_s
    rec.output_tok_s_runs = [tok_s, tok_s] if tok_s else []
    store.start(trial, rec)
    store.finish(trial, rec, tok_s or 0.0)
    return rec


def test_records_round_trip_through_sqlite(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(open_study("s", url, seed=1), CHOICES)
    finish(store, {}, Kind.BASELINE, Status.OK, 70.0, started_at=1.0)
    finish(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, Status.OK, 75.0, started_at=2.0)
    finish(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.CRASHED, started_at=3.0)
    again = StudyStore(open_study("s", url, create=False), CHOICES)
    recs = again.records()
    assert [(r.trial, r.kind, r.status, r.output_tok_s) for r in recs] == [
        (0, Kind.BASELINE, Status.OK, 70.0), (1, Kind.PRESET, Status.OK, 75.0), (2, Kind.PRESET, Status.CRASHED, None)]
    assert recs[1].env == {"NCCL_PROTO": "LL"} and recs[1].output_tok_s_runs == [75.0, 75.0]
    # A failed set is infeasible for the sampler and never valued as 0 tok/s.
    frozen = again.study.get_trials()
    assert frozen[2].constraints[CONSTRAINT] == 1.0 and frozen[2].value == pytest.approx(35.0)
    assert frozen[1].constraints[CONSTRAINT] == 0.0
    assert [r.trial for r in again.ok_baselines()] == [0]
    assert set(again.measured()) == {recs[1].set_key, recs[2].set_key}


def test_a_field_at_its_default_is_not_written_and_one_set_back_to_it_is(tmp_path: Path):
    """Each attribute is a transaction: a field at its default is left out (read back as it),
    but one the trial already holds is overwritten when it goes back to its default."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    store = StudyStore(open_study("s", url, seed=1), CHOICES)
    store.enqueue(store.params_of({}), TrialRecord(trial=-1, kind=Kind.BASELINE))
    trial, _, rec = store.ask()
    rec.cause = "still loading"
    store.start(trial, rec)
    held = store.study.get_trials(deepcopy=False)[0].user_attrs
    assert held["cause"] == "still loading" and held["kind"] == "baseline" and held["status"] == "running"
    assert "output_tok_s" not in held and "nccl_proof" not in held  # at their defaults
    rec.cause, rec.status, rec.output_tok_s = "", Status.OK, 70.0
    store.finish(trial, rec, 70.0)
    [back] = StudyStore(open_study("s", url, create=False), CHOICES).records()
    assert back == rec and back.cause == ""


def test_running_trial_marked_interrupted(tmp_path: Path):
    store = StudyStore(optuna.create_study(direction="maximize"), CHOICES)
    store.enqueue(store.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    trial, _, rec = store.ask()
    rec.runner = "elsewhere:1"
    store.start(trial, rec)
    [(trial_id, running)] = store.running()
    assert running.status is Status.RUNNING and running.runner == "elsewhere:1"
    assert store.records()[0].status is Status.RUNNING
    store.mark_interrupted(trial_id, running, "runner died mid-trial")
    [after] = store.records()
    assert after.status is Status.INTERRUPTED and after.cause == "runner died mid-trial"
    store.enqueue(store.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET, retry_of_trial=0))
    retry, _, rec = store.ask()
    assert rec.retry_of_trial == 0
    store.start(retry, rec)
    assert store.records()[0].retried_by_trial == retry.number


def test_study_info_and_password_hidden():
    store = StudyStore(optuna.create_study(direction="maximize"), CHOICES)
    store.update_info(min_effect=0.02, stop_reason="budget")
    info = store.info()
    assert (info.min_effect, info.stop_reason, info.target) == (0.02, "budget", None)
    assert hide_password("postgresql://u:s3cret@db:5432/x") == "postgresql://u:***@db:5432/x"


def _config(tmp_path: Path, command: str) -> Path:
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    p = tmp_path / "exp.toml"
    p.write_text(f'[server]\ncommand = ["{sys.executable}", "-c", "{command}"]\n'
                 f'[sweep]\nspace = "{tmp_path / "space.toml"}"\n')
    return p


def test_fingerprint_refuses_a_changed_server_once_a_baseline_exists(tmp_path: Path):
    store = StudyStore(optuna.create_study(direction="maximize"), CHOICES)
    first = load_config(_config(tmp_path, "pass"))
    check_fingerprint(store, first, [], "exp.toml", "s")
    changed = load_config(_config(tmp_path, "import time"))
    # No successful baseline yet: the fix after a failed baseline is allowed and recorded.
    finish(store, {}, Kind.BASELINE, Status.CRASHED)
    check_fingerprint(store, changed, [], "exp.toml", "s")
    assert store.info().fingerprint["server.command"][-1] == "import time"
    finish(store, {}, Kind.BASELINE, Status.OK, 70.0)
    with pytest.raises(ResumeRefused) as err:
        check_fingerprint(store, first, [], "exp.toml", "s")
    text = str(err.value)
    assert "server.command" in text and '"pass"' in text and '"import time"' in text
    assert "[[" not in text and "((" not in text  # shown as written, not doubly nested


def test_a_trials_server_identity_is_found_until_its_runner_finishes_it(tmp_path: Path):
    """The identity a runner records for its trial's server (before and after the spawn) is
    listed while the trial runs or was interrupted, never once the trial finished normally:
    another runner of that host tears down what a dead runner left (tuner.sweep.runner)."""
    from tuner.server import ServerIdentity

    store = StudyStore(open_study("s", f"sqlite:///{tmp_path / 'study.db'}", seed=1), CHOICES)
    done, _, rec = store.ask_fixed(store.params_of({}), TrialRecord(trial=-1, kind=Kind.BASELINE))
    rec.runner = "hostA:11"
    store.start(done, rec)
    store.set_server(done._trial_id, ServerIdentity("m0", pid=5, pgid=5, create_time=1.5, port=8000))
    rec.status = Status.OK
    store.finish(done, rec, 70.0)
    live, _, rec = store.ask_fixed(store.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    rec.runner = "hostA:12"
    store.start(live, rec)
    store.set_server(live._trial_id, ServerIdentity("m1"))  # before the spawn: the marker alone
    assert store.unfinished_servers() == [(1, "hostA:12", ServerIdentity("m1"))]
    full = ServerIdentity("m1", pid=7, pgid=7, create_time=2.5, port=8001)
    store.set_server(live._trial_id, full)
    store.mark_interrupted(live._trial_id, rec, "its runner died")
    assert store.unfinished_servers() == [(1, "hostA:12", full)]
    assert [r.status for r in store.records()] == [Status.OK, Status.INTERRUPTED]  # the attribute is no field
