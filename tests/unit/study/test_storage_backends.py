"""The storage module against each storage a user can name: SQLite, the journal file and a real
PostgreSQL server (tests/pg.py): records round-trip, two workers see each other's trials,
heartbeats fail a dead runner's trial only after the grace period, dropped connections heal."""

from __future__ import annotations

import time
from pathlib import Path

import optuna
import psycopg
import pytest
from optuna.trial import TrialState

from tests.helpers import run_cli, write_config
from tuner.errors import ExitCode, StorageUnreadable
from tuner.record import HostRecord, Kind, LevelResult, Status, TrialRecord
from tuner.study.storage import JOURNAL, StudyStore, hide_password, open_study

CHOICES = {"NCCL_PROTO": ("unset", "LL", "Simple"), "NCCL_ALGO": ("unset", "Ring", "Tree")}
POSTGRES = pytest.param("postgresql", marks=pytest.mark.postgres)


@pytest.fixture(params=["sqlite", "journal", POSTGRES])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL of each kind, empty."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    if request.param == "journal":
        return f"{JOURNAL}{tmp_path / 'study.log'}"
    return request.getfixturevalue("pg_url")


def _run(store: StudyStore, env: dict[str, str], kind: Kind, status: Status, runs: tuple[float, ...] = (),
         **fields) -> tuple[optuna.Trial, TrialRecord]:
    """Queue, ask and start one relaunch of ``env``; finish it unless ``status`` is running."""
    store.enqueue(store.params_of(env), TrialRecord(trial=-1, kind=kind))
    trial, _, rec = store.ask()
    rec.env, rec.started_at, rec.runner = env, 1_760_000_000.0 + trial.number, f"host-a:{100 + trial.number}"
    store.start(trial, rec)
    if status is not Status.RUNNING:
        rec.status, rec.output_tok_s_runs = status, list(runs)
        rec.output_tok_s = sorted(runs)[len(runs) // 2] if runs else None
        for name, value in fields.items():
            setattr(rec, name, value)
        store.finish(trial, rec, rec.output_tok_s or 0.0)
    return trial, rec


def test_records_round_trip(storage: str):
    """Every field a sweep writes comes back from a second opening of the storage (another
    process or host would open it the same way), and both see each other's trials."""
    a = StudyStore(open_study("s", storage, seed=1), CHOICES)
    a.update_info(min_effect=0.02, storage_hint=hide_password(storage), server_command=["vllm", "serve", "m"])
    _, base = _run(a, {}, Kind.BASELINE, Status.OK, (70.1, 70.9, 70.4), load_s=12.5, wall_s=40.0,
                   concurrency=[LevelResult(concurrency=2, ok=8, total=8, wall_s=10.0, aggregate_tok_s=131.0)],
                   host=HostRecord(name="host-a", gpu="NVIDIA H100", gpu_count=8, driver="550.54", nccl="2.27.3"))
    _, fast = _run(a, {"NCCL_PROTO": "LL"}, Kind.PRESET, Status.OK, (75.0, 75.5), preset="ll")
    _, crash = _run(a, {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Tree"}, Kind.SEARCH, Status.CRASHED,
                    cause="exited with code 1: NCCL WARN")
    running, _ = _run(a, {"NCCL_ALGO": "Ring"}, Kind.SEARCH, Status.RUNNING)

    b = StudyStore(open_study("s", storage, create=False), CHOICES)
    got = {r.trial: r for r in b.records()}
    assert [got[n].status for n in range(4)] == [Status.OK, Status.OK, Status.CRASHED, Status.RUNNING]
    for want in (base, fast, crash):
        assert got[want.trial] == want, want.trial
    assert got[3].env == {"NCCL_ALGO": "Ring"} and got[3].runner == "host-a:103"
    assert b.info().min_effect == 0.02 and b.info().server_command == ["vllm", "serve", "m"]
    assert [r.trial for r in b.ok_baselines()] == [0]
    assert set(b.measured()) == {fast.set_key, crash.set_key}
    # The in-flight set is visible to the other worker, and its crash is infeasible for the sampler.
    assert b.pending_params() == [{"NCCL_PROTO": "unset", "NCCL_ALGO": "Ring"}]
    assert b.trial_value(2) == (pytest.approx(0.5 * 70.4), 1.0) and b.trial_value(1)[1] == 0.0
    # The second worker's trial is seen by the first, and the first one's dead runner is marked.
    _run(b, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree"}, Kind.SEARCH, Status.OK, (72.0,))
    [(trial_id, rec)] = a.running()
    a.mark_interrupted(trial_id, rec, "runner died mid-trial")
    after = {r.trial: r for r in b.records()}
    assert after[4].output_tok_s == 72.0 and after[4].runner == "host-a:104"
    assert after[3].status is Status.INTERRUPTED and after[3].cause == "runner died mid-trial"
    assert running.number == 3


def test_journal_has_no_heartbeat(tmp_path: Path):
    """A journal study never fails a trial by itself: a dead runner's trial stays RUNNING
    (the runner file on its host is what recovers it)."""
    store = StudyStore(open_study("s", f"{JOURNAL}{tmp_path / 'study.log'}"), CHOICES)
    trial, _ = _run(store, {"NCCL_PROTO": "LL"}, Kind.SEARCH, Status.RUNNING)
    with store.heartbeat(trial):
        pass
    store.fail_stale()
    assert store.study.get_trials()[0].state == TrialState.RUNNING


@pytest.mark.parametrize("url, why", [
    ("journal://", "names a file"),
    ("journal:///no/such/folder/study.log", "/no/such/folder does not exist"),
    ("nosuchdb://u:pw-s3cret@h/db", "nosuchdb"),  # a scheme SQLAlchemy does not know
])
def test_a_storage_that_cannot_be_opened_is_one_input_error(url: str, why: str):
    """A bad ``--storage`` is StorageUnreadable (exit 2): one paragraph naming the flag, the URL
    without its password, what is accepted and why, never the driver's exception."""
    with pytest.raises(StorageUnreadable, match=why) as err:
        open_study("s", url)
    text = str(err.value)
    assert err.value.exit_code == ExitCode.BAD_INPUT and "\n" not in text and "pw-s3cret" not in text
    assert text.startswith(f"(command line): key '--storage' has value '{hide_password(url)}' (")
    assert "accepted: an Optuna storage: sqlite:///" in text
    assert err.value.for_key("--storage-b").key == "--storage-b"


@pytest.mark.postgres
def test_heartbeat_fails_a_dead_runners_trial_after_the_grace_period(pg_url: str):
    """Host A beats every second while it measures; host B's fail_stale leaves that trial alone
    past the 3 s grace period, and fails it once A's beats stop for longer than that."""
    a = StudyStore(open_study("s", pg_url, heartbeat_interval_s=1, grace_period_s=3), CHOICES)
    b = StudyStore(open_study("s", pg_url, create=False, heartbeat_interval_s=1, grace_period_s=3), CHOICES)
    trial, _ = _run(a, {"NCCL_PROTO": "LL"}, Kind.SEARCH, Status.RUNNING)
    with a.heartbeat(trial):
        time.sleep(4.5)
        b.fail_stale()
        assert b.study.get_trials()[0].state == TrialState.RUNNING
    b.fail_stale()  # the last beat is at most 1 s old
    assert b.study.get_trials()[0].state == TrialState.RUNNING
    stopped = time.monotonic()
    while b.study.get_trials()[0].state == TrialState.RUNNING:
        assert time.monotonic() - stopped < 30, "the stale trial was never failed"
        time.sleep(0.5)
        b.fail_stale()
    assert time.monotonic() - stopped >= 1.5  # not before the grace period (3 s after the last beat)
    assert b.study.get_trials()[0].state == TrialState.FAIL
    assert a.study.get_trials()[0].state == TrialState.FAIL


@pytest.mark.postgres
def test_postgres_connection_dropped_during_a_relaunch_heals(pg_url: str):
    """A pooled connection the server dropped while the relaunch ran (36 minutes: an idle
    timeout, a database restart) is replaced when the result is written, not raised."""
    store = StudyStore(open_study("s", pg_url), CHOICES)
    _run(store, {}, Kind.BASELINE, Status.OK, (70.0,))
    trial, rec = _run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, Status.RUNNING)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    assert killed and killed[0] >= 1
    rec.status, rec.output_tok_s, rec.output_tok_s_runs = Status.OK, 75.0, [75.0]
    store.finish(trial, rec, 75.0)
    assert [(r.status, r.output_tok_s) for r in store.records()] == [(Status.OK, 70.0), (Status.OK, 75.0)]


def test_psycopg2_url_is_a_clear_input_error(tmp_path: Path):
    """``postgresql+psycopg2://`` needs a driver the [postgres] extra does not install: exit 2,
    one paragraph naming --storage and the plain URL that works, no traceback, no password."""
    space = tmp_path / "space.toml"
    space.write_text('[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n')
    cfg = write_config(tmp_path / "exp.toml", command=["true", "{port}"], space=space, trials=4)
    res = run_cli("sweep", str(cfg), "--results", str(tmp_path / "r"),
                  "--storage", "postgresql+psycopg2://nccl:pw-s3cret@127.0.0.1:9/db")
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "pw-s3cret" not in res.stderr + res.stdout
    assert "'--storage'" in res.stderr and "postgresql+psycopg2://nccl:***@127.0.0.1:9/db" in res.stderr
    assert "write postgresql://, which uses psycopg 3" in res.stderr
