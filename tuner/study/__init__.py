"""The Optuna study: storage, fingerprints, hosts and their runners.

:mod:`~tuner.study.storage` (every Optuna access: records in and out, the study's own
attributes, the stored format's version), :mod:`~tuner.study.resume` (a study's resume policy:
what a sweep run must share with the study it joins, fingerprint, space, metric, and what it
writes into the study's info),
:mod:`~tuner.study.host` (this runner's host and its host type), :mod:`~tuner.study.inflight`
(this host's runners and what they have in flight), :mod:`~tuner.study.state` (whether a night is running, ended or
interrupted), :mod:`~tuner.study.workers` (this host's
live workers of any study and their GPUs: a worker sharing a GPU with another is refused).
"""

from tuner.study.host import Host, command_identity, host_type, this_host
from tuner.study.inflight import RunnerFile, host_name, runner_alive, runner_id
from tuner.study.resume import begin_run, check_fingerprint, check_metric, record_end, record_stop, stored_study
from tuner.study.state import NightState, StudyState, study_state
from tuner.study.storage import (
    CONSTRAINT,
    JOURNAL,
    PHASE_ATTR,
    StudyStore,
    check_format,
    default_storage,
    heartbeat_settings,
    hide_password,
    open_study,
    study_names,
    write_changed_attrs,
)
from tuner.study.workers import (
    WORKERS_DIR_VAR,
    Worker,
    check_processes,
    check_workers,
    dry_run_lines,
    gpus_of,
    register,
    this_worker,
    workers_dir,
)

__all__ = [
    "CONSTRAINT",
    "JOURNAL",
    "PHASE_ATTR",
    "WORKERS_DIR_VAR",
    "Host",
    "NightState",
    "RunnerFile",
    "StudyState",
    "StudyStore",
    "Worker",
    "begin_run",
    "check_fingerprint",
    "check_format",
    "check_metric",
    "check_processes",
    "check_workers",
    "command_identity",
    "default_storage",
    "dry_run_lines",
    "gpus_of",
    "heartbeat_settings",
    "hide_password",
    "host_name",
    "host_type",
    "open_study",
    "record_end",
    "record_stop",
    "register",
    "runner_alive",
    "runner_id",
    "stored_study",
    "study_names",
    "study_state",
    "this_host",
    "this_worker",
    "workers_dir",
    "write_changed_attrs",
]
