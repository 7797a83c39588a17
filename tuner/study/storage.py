"""Every access to Optuna's storage: the study, trial records, study attributes, heartbeats.

One Optuna trial per relaunch. A trial's :class:`~tuner.record.trial.TrialRecord` lives in its user
attributes (written through :func:`tuner.record.trial.to_user_attrs`), the study's
:class:`~tuner.record.study.StudyInfo` in the study's, with the stored format's version
(:mod:`tuner.record.format`; a newer one is refused by :func:`check_format`) and the judged
metric (recorded, and a resume with another refused, by :func:`check_metric`). Every trial,
whatever its kind, is a point of one categorical space (each variable's candidates plus
"unset"), so presets and baselines teach the sampler too; a failed set is told as a violated constraint (``CONSTRAINT`` > 0), never as
0 tok/s.

Sampler: TPE (``multivariate=True``, ``constant_liar=True``), not GPSampler. The space is all
categorical (a few thousand points), where TPE's per-category densities are natural and
GPSampler's kernel gains little at 10-30 trials; GPSampler would also pull PyTorch onto every
runner host, and the constant liar keeps workers sharing one PostgreSQL study from proposing
the same point (Optuna docs, TPESampler).

Storages (the ``--storage`` value; :func:`open_study`):

* ``sqlite:///path/study.db`` (the default, one host) and ``postgresql://user:pass@host:5432/db``
  (several hosts; the ``[postgres]`` extra installs psycopg 3, which SQLAlchemy 2 uses for a
  plain ``postgresql://``; ``postgresql+psycopg2://`` needs psycopg2, which nccl-tune does not
  install): Optuna's RDBStorage, with heartbeats.
* ``journal://`` followed by a file path, ``journal:///shared/nccl/study.log`` (absolute) or
  ``journal://results/study.log`` (relative to the working directory): Optuna's
  ``JournalStorage(JournalFileBackend(path))``, an append-only log for hosts that share only a
  filesystem (NFS included: it locks with a symlink, not ``fcntl``). Its folder must exist.

Heartbeats: RDB storages (SQLite, PostgreSQL) record one per running trial, from the moment it
is asked; a trial whose runner died is failed by ``optuna.storages.fail_stale_trials`` after
the grace period (every runner of the study calls it before each trial), and reads as
interrupted, retried once by any runner. Optuna records heartbeats only inside
``Study.optimize``; with ask/tell the storage's own ``record_heartbeat`` is called from
:meth:`StudyStore.heartbeat` (Optuna: optuna/storages/_heartbeat.py). Every runner of a study
should use the same interval and grace period: the grace is applied by whichever runner checks.
For tests only, ``NCCL_TUNE_HEARTBEAT_S`` and ``NCCL_TUNE_GRACE_S`` override the defaults of
30 s and 120 s (:func:`heartbeat_settings`).

Several runners (workers) share one study without a scheduler of their own: the sampler's
proposals come from ``Study.ask`` (TPE's constant liar counts the other runners' RUNNING trials
as bad, so it rarely proposes them), planned sets (baseline, retry, preset, confirmation) are
created as RUNNING trials with their parameters in one write (:meth:`StudyStore.ask_fixed`,
so no other runner's ``ask`` can take them), and before a launch the runner checks the
parameters of every earlier RUNNING trial (:meth:`StudyStore.pending_params`).

The journal storage has no heartbeat: a trial whose runner died (SIGKILL, power loss) stays
RUNNING until a runner of the same study on the same host starts, finds the dead runner's file
or the trial's ``host:pid`` and marks it interrupted (then it is retried once). Runners on other hosts cannot tell a dead runner from a slow one and
never fail its trial, so a host that never comes back leaves its trial RUNNING (shown as
running in the report, not retried).
"""

from __future__ import annotations

import random
import re
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from optuna.distributions import CategoricalDistribution
from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.errors import InputError, NewerFormat, StorageUnreadable, tolerated
from tuner.record import (
    DEFAULT_ATTRS,
    FORMAT_VERSION,
    UNVERSIONED,
    Kind,
    Metric,
    Status,
    StudyInfo,
    TrialRecord,
    from_user_attrs,
    newer_than_known,
    stored_version,
    study_from_user_attrs,
    study_to_user_attrs,
    to_user_attrs,
)
from tuner.server import ServerIdentity

__all__ = [
    "CONSTRAINT",
    "JOURNAL",
    "PHASE_ATTR",
    "SETTLE_S",
    "StudyStore",
    "check_format",
    "default_storage",
    "heartbeat_settings",
    "hide_password",
    "open_study",
    "study_names",
    "write_changed_attrs",
]

#: Name of the constraint told to the sampler: > 0 means the set failed or is invalid.
CONSTRAINT = "server_failed"
HEARTBEAT_INTERVAL_S = 30
GRACE_PERIOD_S = 120
#: For tests: environment variables that override the heartbeat interval and grace period (s).
HEARTBEAT_VAR, GRACE_VAR = "NCCL_TUNE_HEARTBEAT_S", "NCCL_TUNE_GRACE_S"
#: How long :meth:`StudyStore.pending_params` waits for another runner's just-asked trial to get
#: all its parameters (one storage write per parameter) before it reads it (s).
SETTLE_S = 2.0
#: Prefix of a journal-file storage: ``journal://`` + the file's path.
JOURNAL = "journal://"


#: The trial user attribute holding its server's identity (:meth:`tuner.server.ServerIdentity.to_json`),
#: written by its runner before and after the spawn: another runner of that host tears the server
#: down if the runner dies (:meth:`StudyStore.unfinished_servers`).
SERVER_ATTR = "server"

#: The trial user attribute holding where its relaunch is now, written by its runner once per
#: phase change (:meth:`StudyStore.set_phase`): ``phase`` (launching, loading, check, warmup,
#: probing, concurrency, teardown: :mod:`tuner.sweep.trial`'s phases), ``detail``, ``since``
#: (Unix s), ``relaunch`` and ``of`` (the night's count and its planned total), ``end_at`` (the
#: runner's expected end of the night, Unix s, or None: :attr:`tuner.planning.NightClock.end_at`).
PHASE_ATTR = "phase"


def default_storage(study_dir: Path) -> str:
    """SQLite storage URL under the study directory (``results/<study>/study.db``)."""
    return f"sqlite:///{(study_dir / 'study.db').resolve()}"


def heartbeat_settings(environ: Mapping[str, str]) -> tuple[int, int]:
    """``(heartbeat interval, grace period)`` in whole seconds: the defaults, or for tests
    :data:`HEARTBEAT_VAR` / :data:`GRACE_VAR` from ``environ``. Raises InputError for a value
    that is not a whole number above 0, or a grace period not above the interval."""
    values = {}
    for var, default in ((HEARTBEAT_VAR, HEARTBEAT_INTERVAL_S), (GRACE_VAR, GRACE_PERIOD_S)):
        text = environ.get(var)
        if text is None:
            values[var] = default
        elif text.strip().isdigit() and int(text) > 0:
            values[var] = int(text)
        else:
            raise InputError("(environment)", var, text, "a whole number of seconds above 0",
                             "it sets the heartbeat for tests; unset it for the defaults")
    interval, grace = values[HEARTBEAT_VAR], values[GRACE_VAR]
    if grace <= interval:
        raise InputError("(environment)", GRACE_VAR, str(grace), f"more seconds than {HEARTBEAT_VAR} ({interval})",
                         "a live runner's trial would be failed between two of its heartbeats")
    return interval, grace


#: What a storage URL Optuna cannot open raises (a driver not installed, a scheme SQLAlchemy does
#: not know, a host that does not answer, a schema of another Optuna); each becomes StorageUnreadable.
_UNREADABLE = (ImportError, ValueError, RuntimeError, sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.OptunaError)


def _unreadable(storage: str, exc: BaseException) -> StorageUnreadable:
    """The StorageUnreadable of ``storage`` for ``exc``: its first line, and what to do when known."""
    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if "+psycopg2" in storage:  # SQLAlchemy's plain postgresql:// means psycopg 3
        why += " (psycopg2 is not what the [postgres] extra installs: write postgresql://, which uses psycopg 3)"
    elif isinstance(exc, ImportError):
        why += " (install the driver: pip install -e '.[postgres]')"
    return StorageUnreadable(hide_password(storage), why)


@contextmanager
def _opening(storage: str) -> Iterator[None]:
    """Turn what Optuna or a driver raises while opening ``storage`` into StorageUnreadable."""
    try:
        yield
    except _UNREADABLE as exc:
        raise _unreadable(storage, exc) from None


def open_storage(storage: str, *, heartbeat_interval_s: int = HEARTBEAT_INTERVAL_S,
                 grace_period_s: int = GRACE_PERIOD_S) -> optuna.storages.BaseStorage | str:
    """The Optuna storage of the URL ``storage`` (one of the module docstring's): a journal file's
    ``JournalStorage``, an RDB URL's ``RDBStorage`` with heartbeats every ``heartbeat_interval_s``
    s and a grace period of ``grace_period_s`` s (whole seconds, > 0), any other URL as given
    (Optuna reads it). Raises StorageUnreadable (exit 2) for a journal path without a file name,
    whose folder is missing or that cannot be opened, and for an RDB URL that cannot be opened
    (driver, host, scheme)."""
    # Heartbeats outside Study.optimize only warn; they work (see the module docstring).
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    if storage.startswith(JOURNAL):
        path = storage[len(JOURNAL):]
        if not path or path.endswith("/"):
            raise StorageUnreadable(hide_password(storage), f"a journal storage names a file: {JOURNAL}/shared/nccl/study.log")
        if not Path(path).parent.is_dir():  # never made here: a missing mount would split the study
            raise StorageUnreadable(hide_password(storage), f"the journal's folder {Path(path).parent} does not exist")
        try:
            return optuna.storages.JournalStorage(JournalFileBackend(path))
        except OSError as exc:  # not the --results folder's problem: say whose it is
            raise StorageUnreadable(hide_password(storage),
                                    f"cannot open the journal file {path}: {exc.strerror or exc}") from None
    if storage.startswith(("sqlite", "postgresql", "mysql")):
        # SQLite: wait for a writer's lock. A server: test pooled connections before use, since
        # one idle through a 36-minute relaunch may have been dropped (server restart, idle timeout).
        engine = {"connect_args": {"timeout": 30}} if storage.startswith("sqlite") else {"pool_pre_ping": True}
        with _opening(storage):
            return _rdb_storage(storage, heartbeat_interval_s, grace_period_s, engine)
    return storage


def write_changed_attrs(trial: optuna.Trial, attrs: Mapping[str, Any],
                        defaults: Mapping[str, Any] = DEFAULT_ATTRS) -> None:
    """Set the user attributes of ``trial`` that differ from what it holds already, leaving out
    a field at its value in ``defaults`` that it does not hold (its reader fills it in: by default
    the trial record's, :data:`tuner.record.DEFAULT_ATTRS`). Each attribute is its own storage
    transaction (several ms on SQLite, a round trip on PostgreSQL), a record written at a run's
    start and again at its end mostly repeats itself, and most of it is at its defaults when it
    starts. Raises what Optuna raises for a broken storage."""
    held = trial.user_attrs
    for key, value in attrs.items():
        if key in held:
            if held[key] != value:
                trial.set_user_attr(key, value)
        elif key not in defaults or defaults[key] != value:
            trial.set_user_attr(key, value)


def open_study(name: str, storage: str, seed: int | None = None, *, create: bool = True,
               heartbeat_interval_s: int = HEARTBEAT_INTERVAL_S, grace_period_s: int = GRACE_PERIOD_S) -> optuna.Study:
    """Create (or load) the study, maximising the objective, with the TPE sampler above.

    ``storage`` is one of the storages of the module docstring (:func:`open_storage`); RDB URLs get
    a heartbeat every ``heartbeat_interval_s`` s, and a RUNNING trial without one for
    ``grace_period_s`` s is failed by :meth:`StudyStore.fail_stale` (both whole seconds, > 0:
    Optuna's types). ``create=False`` only loads and raises KeyError when the study does not
    exist. A storage that cannot be opened (a journal path without a file name or whose folder
    is missing, a driver, host or scheme problem) raises StorageUnreadable (exit 2), its URL
    shown without its password.
    """
    store = open_storage(storage, heartbeat_interval_s=heartbeat_interval_s, grace_period_s=grace_period_s)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True, n_startup_trials=5)
    with _opening(storage):
        if not create:
            return optuna.load_study(study_name=name, storage=store, sampler=sampler)
        return optuna.create_study(study_name=name, storage=store, sampler=sampler, direction="maximize",
                                   load_if_exists=True)


def study_names(storage: str) -> list[str]:
    """The names of every study in the storage URL ``storage``, sorted (Optuna's
    ``get_all_study_names``; the screen's ``<study>-screen`` studies included). Raises what
    :func:`open_storage` raises."""
    opened = open_storage(storage)
    with _opening(storage):
        return sorted(optuna.get_all_study_names(storage=opened))


#: Attempts at opening an RDB storage whose tables another runner is creating at that moment.
SCHEMA_ATTEMPTS = 6


#: How each database words the loss of a race to create Optuna's tables or stamp their version
#: (PostgreSQL "duplicate key value", MySQL "Duplicate entry", SQLite "UNIQUE constraint failed"
#: on alembic_version, any "table ... already exists").
_SCHEMA_RACE = ("already exists", "duplicate key", "duplicate entry", "unique constraint failed")


def _lost_schema_race(exc: sqlalchemy.exc.SQLAlchemyError) -> bool:
    """Whether ``exc``, raised while opening an RDB storage, is a lost race to create the schema:
    any integrity error (a unique row of Optuna's tables or of alembic_version written twice), or
    a duplicate table or type in any database's words (:data:`_SCHEMA_RACE`)."""
    return isinstance(exc, sqlalchemy.exc.IntegrityError) or any(w in str(exc).lower() for w in _SCHEMA_RACE)


def _rdb_storage(url: str, interval_s: int, grace_s: int, engine: dict[str, Any]) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage of ``url``. Processes opening an empty database together all create
    Optuna's tables and stamp their version at once, and all but one fail (optuna/optuna#1092):
    runners started together, or a runner and a ``status`` reading the study.db it just made. The
    tables exist once the winner committed, so a loser opens again after a short random wait."""
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=interval_s, grace_period=grace_s,
                                              engine_kwargs=engine)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError, sqlalchemy.exc.OperationalError) as exc:
            if attempt == SCHEMA_ATTEMPTS or not _lost_schema_race(exc):
                raise
            time.sleep(random.uniform(0.2, 1.0) * attempt)
    raise AssertionError("unreachable")


def _status_of(frozen: FrozenTrial) -> Status:
    """A trial's status when its record has none: running, or interrupted (failed by a
    heartbeat or a dead runner before it could write one)."""
    if frozen.state == TrialState.RUNNING:
        return Status.RUNNING
    if frozen.state == TrialState.FAIL:
        return Status.INTERRUPTED
    return Status.SKIPPED


class StudyStore:
    """The sweep's view of one Optuna study: records in, records out.

    ``choices`` maps each searched name (variable or flag) to its categorical candidates.
    """

    def __init__(self, study: optuna.Study, choices: Mapping[str, tuple[str, ...]]) -> None:
        self.study = study
        self.choices = dict(choices)
        #: names planned sets may hold that the sampler never proposes (:meth:`plan_also`)
        self.planned_only: dict[str, tuple[str, ...]] = {}
        self._dists = {k: CategoricalDistribution(list(v)) for k, v in self.choices.items()}

    # -- reading -------------------------------------------------------------------------
    def records(self, *, relaunched_only: bool = True) -> list[TrialRecord]:
        """Every trial with an nccl-tune record, in trial order (WAITING ones excluded)."""
        out = []
        for t in self.study.get_trials(deepcopy=False):
            if t.state == TrialState.WAITING:
                continue
            try:
                rec = from_user_attrs(t.number, t.user_attrs, default_status=_status_of(t))
            except ValueError:
                continue
            if t.state == TrialState.RUNNING:
                rec.status = Status.RUNNING
            elif t.state == TrialState.FAIL and rec.status is Status.RUNNING:
                # failed by Optuna's heartbeat check: its runner died (on any host)
                rec.status = Status.INTERRUPTED
                rec.cause = rec.cause or f"its runner ({rec.runner or '?'}) stopped sending heartbeats"
            if relaunched_only and not rec.kind.relaunched:
                continue
            out.append(rec)
        retried_by = {r.retry_of_trial: r.trial for r in out if r.retry_of_trial is not None}
        for r in out:  # derived: a finished Optuna trial cannot be updated afterwards
            r.retried_by_trial = retried_by.get(r.trial)
        return out

    def finished(self) -> list[TrialRecord]:
        """Relaunches that ended (any status but running and interrupted)."""
        return [r for r in self.records() if r.status not in (Status.RUNNING, Status.INTERRUPTED)]

    def ok_baselines(self, host_type: str | None = None) -> list[TrialRecord]:
        """Successful baseline measurements, oldest first; with ``host_type``, those of that
        host type only (a record without one, written before host types, counts for any)."""
        return sorted((r for r in self.finished() if r.kind is Kind.BASELINE and r.ok
                       and (host_type is None or r.host_type in ("", host_type))),
                      key=lambda r: (r.started_at or 0.0, r.trial))

    def measured(self) -> dict[str, TrialRecord]:
        """First finished measurement of each tuned set (failed ones included), by set key."""
        out: dict[str, TrialRecord] = {}
        for r in self.finished():
            if r.kind is not Kind.BASELINE and r.status is not Status.MACHINE_FAULT:
                out.setdefault(r.set_key, r)
        return out

    def trial_value(self, number: int) -> tuple[float | None, float]:
        """``(objective value, constraint)`` Optuna holds for trial ``number``."""
        t = self.study.get_trials(deepcopy=False)[number]
        return t.value, t.constraints.get(CONSTRAINT, 0.0) if t.constraints else 0.0

    def pending_params(self, *, before: int | None = None, settle_s: float = SETTLE_S) -> list[dict[str, Any]]:
        """Params of trials waiting in the queue or running (on any worker).

        ``before``: only trials numbered below it (asked earlier than the caller's own trial
        ``before``); then a RUNNING trial whose params are still being written (another
        runner's ``ask``, one write per name) is read again until complete, for up to
        ``settle_s`` s (a runner that died there leaves it incomplete: it is then skipped).
        """
        deadline = time.monotonic() + settle_s
        while True:
            out, incomplete = [], False
            for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
                if before is not None and t.number >= before:
                    continue
                if "fixed_params" in t.system_attrs and not t.params:  # queued (Optuna's queue)
                    out.append(dict(t.system_attrs["fixed_params"]))
                elif before is not None and self.choices and len(t.params) < len(self.choices):
                    incomplete = True
                elif t.params:
                    out.append(dict(t.params))
            if not incomplete or time.monotonic() > deadline:
                return out
            time.sleep(0.05)

    def undecided(self, before: int, *, beating_within_s: float | None = None) -> int:
        """RUNNING trials numbered below ``before`` that hold no record yet: asked by a runner
        that has not yet written what it launches (or dropped it; milliseconds). With
        ``beating_within_s``, only those whose last heartbeat is at most that old (s): their
        runner is alive (the first beat is recorded at the ask); without heartbeats (the journal
        file) none is known alive, so none is counted."""
        ages = self.heartbeat_ages() if beating_within_s is not None else None
        if beating_within_s is not None and ages is None:
            return 0
        return sum(1 for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                   if t.number < before and "kind" not in t.user_attrs
                   and (ages is None or ages.get(t.number, float("inf")) <= (beating_within_s or 0.0)))

    def beat(self, trial: optuna.Trial) -> None:
        """Record one heartbeat for ``trial`` now (RDB storages; nothing for the journal file)."""
        self._beat(trial._trial_id)

    def heartbeat_ages(self) -> dict[int, float] | None:
        """Seconds since the last heartbeat of each RUNNING trial that has one, by trial number
        (the clock being the database's); None when the storage keeps no heartbeats (the journal
        file). Reads Optuna's heartbeat table (optuna/storages/_rdb/models.py, TrialHeartbeatModel)."""
        storage = getattr(self.study._storage, "_backend", self.study._storage)  # under Optuna's cache
        if not (isinstance(storage, optuna.storages.RDBStorage) and is_heartbeat_enabled(storage)):
            return None
        with _create_scoped_session(storage.scoped_session) as session:
            now = session.execute(sqlalchemy.func.now()).scalar()
            assert now is not None
            now = now.replace(tzinfo=None)  # as Optuna compares them (RDBStorage._get_stale_trial_ids)
            rows = (session.query(models.TrialModel.number, models.TrialHeartbeatModel.heartbeat)
                    .join(models.TrialHeartbeatModel, models.TrialHeartbeatModel.trial_id == models.TrialModel.trial_id)
                    .filter(models.TrialModel.state == TrialState.RUNNING)
                    .filter(models.TrialModel.study_id == self.study._study_id).all())
        return {number: (now - beat).total_seconds() for number, beat in rows}

    def heartbeat_interval(self) -> int | None:
        """The storage's heartbeat interval (s), None without heartbeats."""
        storage = self.study._storage
        if isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage):
            return storage.get_heartbeat_interval() or HEARTBEAT_INTERVAL_S
        return None

    def silent_running(self, quiet_s: float) -> list[int]:
        """Numbers of RUNNING trials whose last heartbeat is more than ``quiet_s`` s old (their
        runner may have died: they are failed once the grace period passes); empty without
        heartbeats (the journal file). Reads :meth:`heartbeat_ages`."""
        ages = self.heartbeat_ages() or {}
        return sorted(number for number, age in ages.items() if age > quiet_s)

    def running(self) -> list[tuple[int, TrialRecord]]:
        """``(storage trial id, record)`` of every RUNNING trial (any worker)."""
        out = []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            try:
                out.append((t._trial_id, from_user_attrs(t.number, t.user_attrs)))
            except ValueError:
                out.append((t._trial_id, TrialRecord(trial=t.number, kind=Kind.SEARCH)))
        return out

    def unfinished_servers(self) -> list[tuple[int, str, ServerIdentity]]:
        """``(trial number, runner "host:pid", server identity)`` of every trial that recorded
        its server (:data:`SERVER_ATTR`) and that its runner did not finish: RUNNING, or FAIL
        (interrupted: its runner died, or a signal cut it short)."""
        out = []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.FAIL)):
            server = t.user_attrs.get(SERVER_ATTR)
            if isinstance(server, dict):
                out.append((t.number, str(t.user_attrs.get("runner") or ""), ServerIdentity.from_json(server)))
        return out

    def set_phase(self, trial_id: int, phase: Mapping[str, Any]) -> None:
        """Record where a RUNNING trial's relaunch is now (:data:`PHASE_ATTR`: one write; call it
        when the phase changes, not per run)."""
        self.study._storage.set_trial_user_attr(trial_id, PHASE_ATTR, dict(phase))

    def phases(self) -> dict[int, dict[str, Any]]:
        """:data:`PHASE_ATTR` of every RUNNING trial that stored one, by trial number."""
        return {t.number: dict(t.user_attrs[PHASE_ATTR]) for t in self.study.get_trials(
            deepcopy=False, states=(TrialState.RUNNING,)) if isinstance(t.user_attrs.get(PHASE_ATTR), dict)}

    def set_server(self, trial_id: int, identity: ServerIdentity) -> None:
        """Record the identity of the server a RUNNING trial launched (:data:`SERVER_ATTR`)."""
        self.study._storage.set_trial_user_attr(trial_id, SERVER_ATTR, identity.to_json())

    def info(self) -> StudyInfo:
        """The study's own attributes. A version-1 study (stored without a version) did not
        store its metric: it is the one its sweep told the sampler (:meth:`told_metric`).
        Raises ValueError for attributes a newer format wrote (:func:`check_format` first)."""
        attrs = dict(self.study.user_attrs)
        info = study_from_user_attrs(attrs)
        if "metric" not in attrs:
            info = replace(info, metric=self.told_metric())
        return info

    def told_metric(self) -> Metric:
        """The metric whose median a version-1 sweep told Optuna as each ok relaunch's value
        (its ``probe.metric``): decode tok/s when the first ok relaunch whose two medians
        differ was told its ``decode_tok_s``, else output tok/s (also without an ok relaunch:
        what that version's ``nccl-tune report`` judged on)."""
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            rec = t.user_attrs
            if rec.get("status") != Status.OK.value or t.value is None or not rec.get("kind"):
                continue
            out, dec = rec.get("output_tok_s"), rec.get("decode_tok_s")
            if out is None or dec is None or out == dec:
                continue
            return Metric.DECODE if t.value == dec else Metric.OUTPUT
        return Metric.OUTPUT

    def update_info(self, **fields: Any) -> StudyInfo:
        """Write the named StudyInfo fields (those whose stored attribute differs: each is a
        storage transaction); returns the updated info."""
        held = self.study.user_attrs
        info = replace(self.info(), **fields)
        for key, value in study_to_user_attrs(info, tuple(fields)).items():
            if key not in held or held[key] != value:
                self.study.set_user_attr(key, value)
        return info

    # -- writing -------------------------------------------------------------------------
    def params_of(self, env: Mapping[str, str], flags: Mapping[str, str] | None = None) -> dict[str, str]:
        """The categorical point of a set: every searched name (and every planned-only name,
        :meth:`plan_also`), ``unset`` where absent."""
        given = {**env, **(flags or {})}
        return {name: given.get(name, "unset") for name in [*self.choices, *self.planned_only]}

    def plan_also(self, choices: Mapping[str, tuple[str, ...]]) -> list[str]:
        """Let planned sets (:meth:`ask_fixed`) also hold the names of ``choices`` (a second
        space's presets, each name with its candidates, ``unset`` first) that the sampler does
        not propose; every runner of a study must pass the same (Optuna keeps one distribution
        per name). Returns ``name=value`` for each value of a name the study already searches
        with other candidates: a set holding it cannot join the study."""
        refused: list[str] = []
        for name, values in choices.items():
            if name in self.choices:
                refused += [f"{name}={v}" for v in values if v not in self.choices[name]]
            elif name not in self.planned_only:
                self.planned_only[name] = tuple(values)
                self._dists[name] = CategoricalDistribution(list(values))
        return refused

    def enqueue(self, params: dict[str, str], record: TrialRecord) -> None:
        """Queue a planned set (retry, preset, baseline) so the next ask() takes it."""
        self.study.enqueue_trial(params, user_attrs=to_user_attrs(record, ("kind", "preset", "retry_of_trial",
                                                                          "recheck")),
                                 skip_if_exists=False)

    def ask(self) -> tuple[optuna.Trial, dict[str, str], TrialRecord]:
        """The next trial (queued first, else the sampler's proposal), its params and the record
        its queue entry carried (kind search when the sampler proposed it). Its first heartbeat
        is recorded at once, so a runner that dies before launching it leaves no trial that
        stays RUNNING for ever."""
        trial = self.study.ask()
        self._beat(trial._trial_id)
        params = {name: str(trial.suggest_categorical(name, list(values))) for name, values in self.choices.items()}
        attrs = dict(trial.user_attrs)
        attrs.setdefault("kind", Kind.SEARCH.value)
        return trial, params, from_user_attrs(trial.number, attrs)

    def ask_fixed(self, params: dict[str, str], record: TrialRecord) -> tuple[optuna.Trial, dict[str, str], TrialRecord]:
        """A RUNNING trial of the planned set ``params`` (:meth:`params_of`) created with its
        params in one storage write: no other runner's ``ask`` can take it, and none sees it
        half-written. Returns what :meth:`ask` returns, the record being a copy of ``record``
        (kind, preset, retry, recheck) numbered; nothing of it is stored before
        :meth:`start`, so a trial dropped (:meth:`drop`) or left by a runner that died before
        launching holds no record. Its first heartbeat is recorded at once."""
        template = create_trial(state=TrialState.RUNNING, params=params,
                                distributions={name: self._dists[name] for name in params})
        trial_id = self.study._storage.create_new_trial(self.study._study_id, template_trial=template)
        self._beat(trial_id)
        trial = optuna.Trial(self.study, trial_id)
        return trial, dict(params), replace(record, trial=trial.number)

    def _beat(self, trial_id: int) -> None:
        storage = self.study._storage
        if isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage):
            storage.record_heartbeat(trial_id)

    def start(self, trial: optuna.Trial, record: TrialRecord) -> None:
        """Write what is known when a relaunch starts (so a resume can find and retry it)."""
        write_changed_attrs(trial, to_user_attrs(record))

    def finish(self, trial: optuna.Trial, record: TrialRecord, value: float) -> None:
        """Record the finished relaunch and tell the sampler: ``value`` for an ok one; a failed
        one is told as infeasible (constraint 1) with a penalty value it never shows; a
        ``machine_fault`` (the machine's failure, not the set's) as state FAIL, which the sampler
        ignores (optuna's samplers learn from COMPLETE and PRUNED trials only), so a resume relaunches the set."""
        write_changed_attrs(trial, to_user_attrs(record))
        if record.status is Status.MACHINE_FAULT:
            self.study.tell(trial, state=TrialState.FAIL)
            return
        feasible = record.ok or not record.status.blames_set
        trial.set_constraint(CONSTRAINT, 0.0 if feasible else 1.0)
        self.study.tell(trial, value if record.ok else self.penalty())

    def tell_known(self, trial: optuna.Trial, record: TrialRecord, value: float | None, constraint: float) -> None:
        """Close a proposal without relaunching: a duplicate (the known result) or an invalid set."""
        write_changed_attrs(trial, to_user_attrs(record))
        trial.set_constraint(CONSTRAINT, constraint)
        self.study.tell(trial, value if value is not None else self.penalty())

    def drop(self, trial: optuna.Trial, note: str) -> None:
        """Close a trial that was asked but is not a relaunch nor sampler bookkeeping (its set
        is in flight on an earlier trial): state FAIL, no record (``note`` for the dashboard)."""
        trial.set_user_attr("not_launched", note)
        self.study.tell(trial, state=TrialState.FAIL)

    def abandon(self, trial: optuna.Trial, record: TrialRecord) -> None:
        """A relaunch cut short by a signal: recorded as interrupted, state FAIL."""
        write_changed_attrs(trial, to_user_attrs(record))
        self.study.tell(trial, state=TrialState.FAIL)

    def mark_interrupted(self, trial_id: int, record: TrialRecord, cause: str) -> None:
        """A RUNNING trial whose runner died: status interrupted, state FAIL (retried once)."""
        storage = self.study._storage
        rec = replace(record, status=Status.INTERRUPTED, cause=cause)
        for key, v in to_user_attrs(rec, ("status", "cause")).items():
            storage.set_trial_user_attr(trial_id, key, v)
        storage.set_trial_state_values(trial_id, TrialState.FAIL)

    def fail_stale(self) -> None:
        """Fail trials whose heartbeat stopped (their runner died on another host)."""
        if is_heartbeat_enabled(self.study._storage):
            optuna.storages.fail_stale_trials(self.study)

    def penalty(self) -> float:
        """Objective value told for a failed or invalid set, with its constraint violated:
        half the worst measured value (never shown as tok/s anywhere)."""
        done = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.value is not None and not t.constraints.get(CONSTRAINT, 0.0)]
        return 0.5 * min(done) if done else 0.0

    @contextmanager
    def heartbeat(self, trial: optuna.Trial) -> Iterator[None]:
        """Record Optuna heartbeats for ``trial`` on a thread while the block runs (RDB only)."""
        storage = self.study._storage
        if not (isinstance(storage, BaseHeartbeat) and is_heartbeat_enabled(storage)):
            yield
            return
        stop = threading.Event()
        trial_id = trial._trial_id
        interval = storage.get_heartbeat_interval() or HEARTBEAT_INTERVAL_S

        def beat() -> None:
            while not stop.wait(interval):
                with tolerated():  # a missed beat must not kill a measurement
                    storage.record_heartbeat(trial_id)

        storage.record_heartbeat(trial_id)
        thread = threading.Thread(target=beat, daemon=True, name="optuna-heartbeat")
        thread.start()
        try:
            yield
        finally:
            stop.set()


def hide_password(url: str) -> str:
    """A storage URL with its password replaced by ``***``, for anything written or shown."""
    return re.sub(r"(//[^:/@]+:)[^@/]*@", r"\1***@", url)


def check_format(store: StudyStore, storage: str, study_name: str) -> None:
    """Refuse (NewerFormat, exit 2) a study whose stored format is newer than this nccl-tune's
    (:data:`tuner.record.format.FORMAT_VERSION`): it could be misread, or written into with
    fields its writer would misread. Older versions pass (they read as
    :mod:`tuner.record.format` says)."""
    where = f"{hide_password(storage)}, study '{study_name}'"
    accepted = f"a format version from {UNVERSIONED} to {FORMAT_VERSION}, the ones this nccl-tune reads"
    try:
        found = stored_version(store.study.user_attrs)
    except ValueError as exc:
        raise NewerFormat(where, "format_version", store.study.user_attrs.get("format_version"), accepted,
                          str(exc)) from None
    if newer_than_known(found):
        raise NewerFormat(where, "format_version", found, accepted,
                          f"a newer nccl-tune wrote this study in format version {found}; this one writes version "
                          f"{FORMAT_VERSION} and would misread it, so nothing was read or written: use a nccl-tune "
                          f"that reads version {found}")
