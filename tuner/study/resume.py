"""A study's resume policy: what a sweep's run must share with the study it joins, what it
writes into the study's :class:`~tuner.record.StudyInfo`, and what a dry run reads of it.

A sweep run either starts a study or resumes one (the same ``--study`` again, on this host or
another). :func:`begin_run` is the one place that decides whether it may: the stored format
(:func:`tuner.study.storage.check_format`), the config's fingerprint (:func:`check_fingerprint`),
the space's variables (:func:`check_space`) and the judged metric (:func:`check_metric`) are held
to what the study began with, each refusal a :class:`tuner.errors.ResumeRefused` (or
:class:`~tuner.errors.NewerFormat`), exit 2, before anything is launched. Then it records what this
run brings (server command and environment, redacted; the target, the smallest effect, the
space's notes) and :func:`record_end` / :func:`record_stop` write why the run ended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna
import sqlalchemy

from tuner.errors import InputError, ResumeRefused
from tuner.inputs import ExperimentConfig, SearchSpace, as_written
from tuner.nccl import is_tuning_variable
from tuner.record import FORMAT_VERSION, Metric, StudyInfo, TrialRecord
from tuner.redaction import redact, redact_argv, scrub
from tuner.study.storage import StudyStore, check_format, default_storage, hide_password, open_study

__all__ = ["begin_run", "check_fingerprint", "check_metric", "record_end", "record_stop", "stored_study"]


@dataclass(frozen=True)
class Begun:
    """What :func:`begin_run` settled: ``min_effect`` (fraction) the run judges with, and
    ``fixed`` the NCCL tuning variables ``server.env`` fixes for every trial (redacted; empty
    when none), which the runner says once."""

    min_effect: float
    fixed: dict[str, str]


class Ended(Protocol):
    """Why a sweep run ended, as its loop reports it (:class:`tuner.sweep.SweepOutcome`)."""

    stop_reason: str
    target_met_untuned: bool
    target_reached_by: int | None
    final_baseline_skipped: str
    confirm_skipped: str
    next_run: str


def begin_run(store: StudyStore, cfg: ExperimentConfig, space: SearchSpace, *, config_path: str, study: str,
              storage_url: str, secrets: list[str], target: float | None, min_effect: float | None,
              default_min_effect: float) -> Begun:
    """Admit this run into ``store`` (a study just created, or one resumed) and record it.

    Refuses, in this order and before anything is written but the checks' own first records: a
    study a newer nccl-tune wrote (NewerFormat), a changed server or probe once a baseline was
    measured (ResumeRefused, :func:`check_fingerprint`), a changed space (:func:`check_space`),
    another metric once a trial exists (:func:`check_metric`); all exit 2. ``secrets``: values
    scrubbed from what is stored (:func:`tuner.redaction.secret_values`); ``target`` (tok/s) the
    run's; ``min_effect`` (fraction) the flag's, else the study's stored one, else
    ``default_min_effect``. Returns the settled :class:`Begun`."""
    check_format(store, storage_url, study)
    check_fingerprint(store, cfg, secrets, config_path, study)
    check_space(store, space.choices(), str(space.path), study)
    check_metric(store, cfg.probe.metric, config_path, study)
    stored = store.info().min_effect
    effect = min_effect if min_effect is not None else (stored if stored is not None else default_min_effect)
    # where NCCL writes its log (NCCL_DEBUG_FILE) changes no measurement: not called "fixed tuning"
    fixed = {k: v for k, v in cfg.server.env.items() if is_tuning_variable(k) and k != "NCCL_DEBUG_FILE"}
    store.update_info(server_command=[scrub(a, secrets) for a in redact_argv(cfg.server.argv())], target=target,
                      storage_hint=hide_password(storage_url), server_env=redact(cfg.server.env),
                      fixed_tuning_env=redact(fixed), min_effect=effect, space_notes=space.notes,
                      judge_concurrency=cfg.probe.judge_concurrency, config_path=str(config_path))
    return Begun(effect, redact(fixed))


def record_end(store: StudyStore, outcome: Ended) -> StudyInfo:
    """Write why the run ended (``outcome``) into the study's info; returns the info."""
    return store.update_info(stop_reason=outcome.stop_reason, target_met_untuned=outcome.target_met_untuned,
                             target_reached_by=outcome.target_reached_by,
                             final_baseline_skipped=outcome.final_baseline_skipped,
                             confirm_skipped=outcome.confirm_skipped, next_run=outcome.next_run)


def record_stop(store: StudyStore, reason: str) -> StudyInfo:
    """Write that the run stopped on an error (``reason``, its one paragraph); returns the info."""
    return store.update_info(stop_reason=reason)


def stored_study(study_dir: Path | None, storage: str | None) -> tuple[list[TrialRecord], StudyInfo | None]:
    """What study ``study_dir.name`` already stored (its relaunches, its info) in ``storage``, else
    in ``study_dir/study.db``, for a dry run to time its night by; ``([], None)`` without a study,
    when it does not exist or when its storage cannot be read (a dry run writes nothing, and
    never fails for a storage it only reads)."""
    if study_dir is None or (not storage and not (study_dir / "study.db").exists()):
        return [], None
    url = storage or default_storage(study_dir)
    try:
        store = StudyStore(open_study(study_dir.name, url, create=False), {})
        check_format(store, url, study_dir.name)
        return store.records(), store.info()
    # no such study, an unreadable storage, a newer format, a server gone mid-read
    except (KeyError, InputError, sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.OptunaError):
        return [], None


def _as_written(value: Any) -> str:
    """A value as a user wrote it in TOML: lists as ``["a", "b"]``, strings quoted."""
    return str(as_written(value))


def check_fingerprint(store: StudyStore, cfg: ExperimentConfig, secrets: list[str], config_path: str,
                      study_name: str) -> None:
    """Refuse to resume a study whose server or probe changed: old trials would be judged
    against a baseline measured under other conditions (ResumeRefused, exit 2). The command and
    environment are compared as written, before ``${NAME}`` expansion, so every host of a
    study may fill in its own port and GPUs.

    While the study has no successful baseline nothing was judged yet, so a changed command
    or environment (the fix after a failed baseline) is allowed and the new one recorded.
    """
    now = {"server.command": [scrub(a, secrets) for a in redact_argv(cfg.written_command())],
           "server.env": redact(cfg.written_env()),
           "probe.prompt": cfg.probe.prompt, "probe.max_tokens": cfg.probe.max_tokens}
    stored = store.info().fingerprint
    before = dict(stored or {})
    if isinstance(before.get("server.command"), list):  # a study stored before commands were redacted
        before["server.command"] = redact_argv(before["server.command"])
    changed = [k for k in now if before and json.dumps(now[k]) != json.dumps(before.get(k))]
    if changed and store.ok_baselines():
        was = "; ".join(f"{k} = {_as_written(before.get(k))}" for k in changed)
        raise ResumeRefused(config_path, ", ".join(changed), "; ".join(_as_written(now[k]) for k in changed),
                            f"the settings study '{study_name}' was measured with ({was}), or a new --study name",
                            "resuming would judge new trials against a baseline measured under other conditions")
    if changed or not before or before != stored:  # a secret stored before is rewritten away
        store.update_info(fingerprint=now)


def check_metric(store: StudyStore, metric: Metric, config_path: str, study_name: str) -> None:
    """Record the study's metric and format version when it has none (a new study, or a
    version-1 study, which is upgraded in place: :mod:`tuner.record.format`), and refuse
    (ResumeRefused, exit 2) a resume whose ``probe.metric`` differs from the study's once it holds
    a trial (finished, running on another runner, or interrupted): the sampler was told, or is
    being told, the other metric's values, and the verdicts would change metric between two
    runs of the same study. Before any trial the new metric is recorded."""
    info = store.info()
    if info.metric is not metric and store.records(relaunched_only=False):
        raise ResumeRefused(config_path, "probe.metric", metric.value,
                            f'"{info.metric.value}", the metric study \'{study_name}\' is judged on, or a new '
                            "--study name (the old study and its results stay as they are)",
                            f"study '{study_name}' was swept on {info.metric.words}: its sampler was told those "
                            "values and its report judges on them")
    if info.metric is not metric or info.format_version != FORMAT_VERSION or "metric" not in store.study.user_attrs:
        store.update_info(metric=metric, format_version=FORMAT_VERSION)


def check_space(store: StudyStore, choices: Mapping[str, tuple[str, ...]], space_path: str, study_name: str) -> None:
    """Refuse (ResumeRefused, exit 2) a resume whose search space changed what the study samples:
    an Optuna study keeps one categorical distribution per name, so a value added or removed,
    or a variable renamed, cannot join it (Optuna raises on ``suggest_categorical`` with other
    choices). The paragraph names the change and what to do; the first run records the space."""
    now = {name: list(values) for name, values in choices.items()}
    before = store.info().space_choices
    if not before:
        store.update_info(space_choices=now)
        return
    if before == now:
        return
    changes = []
    for name in sorted(set(before) | set(now)):
        old, new = before.get(name), now.get(name)
        if old is None:
            changes.append(f"{name} is new")
        elif new is None:
            changes.append(f"{name} is no longer varied")
        else:
            added = [v for v in new if v not in old]
            dropped = [v for v in old if v not in new]
            if added:
                changes.append(f"{name} gained {', '.join(added)}")
            if dropped:
                changes.append(f"{name} lost {', '.join(dropped)}")
            if not added and not dropped and old != new:
                changes.append(f"{name} lists its values in another order")
    raise ResumeRefused(space_path, "variables", "; ".join(changes),
                        f"the space study '{study_name}' began with ({'; '.join(f'{k}: {v}' for k, v in before.items())}), "
                        "or a new --study name for the new space (the old study and its results stay as they are)",
                        "an Optuna study samples each variable from the candidates it began with, so a changed space "
                        "cannot join it; nothing was launched and no trial was left running")
