"""The screen's own Optuna study, ``<study>-screen``, in the sweep's storage: every access to it.

One Optuna trial per screen run, its :class:`ScreenRecord` in the trial's user attributes (so a
resume continues the same study and ``nccl-tune report`` finds every run). Each point is a
categorical point of the screened variables (those :func:`tuner.screen.run.screenable` keeps),
``unset`` where absent. The sampler maximises minus the out-of-place time (us) at the decode
size; a run that failed or reported wrong values is told as a violated constraint
(``CONSTRAINT`` > 0) with a penalty value, the sweep's convention
(:mod:`tuner.study.storage`). Sampler: TPE as the main study (same storage, same reasons).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tuner.record import Status, set_key
from tuner.study import CONSTRAINT, StudyStore, host_name, runner_alive, runner_id, write_changed_attrs

__all__ = ["SCREENED", "SUFFIX", "UNSET", "ScreenRecord", "ScreenStore", "known_bad"]

#: Suffix of the screen study's name.
SUFFIX = "-screen"
#: Roles of a screen trial: the untuned set first and last, the sampler's sets, a set screened
#: just before its relaunch (``check``), and bookkeeping that ran nothing (duplicate, invalid).
FIRST, LAST, SEARCH, CHECK = "untuned-first", "untuned-last", "search", "check"
DUPLICATE, INVALID = "duplicate", "invalid"
#: Roles of runs that screened a tuned set.
SCREENED = (SEARCH, CHECK)
#: A row counts as "at" a wanted size when its size is within this factor of it (nccl-tests
#: rounds sizes to whole elements and ``-f`` steps may miss a size).
NEAREST_FACTOR = 2.0
UNSET = "unset"


@dataclass
class ScreenRecord:
    """One screen run: ``number`` (screen trial), ``role`` (:data:`FIRST`, :data:`LAST`,
    :data:`SEARCH`, :data:`CHECK`; :data:`DUPLICATE`/:data:`INVALID` are bookkeeping, never run), ``env`` (the
    set, secrets as ``***``), ``status`` and ``cause`` (:func:`tuner.screen.nccltests.screen_status`),
    ``rows`` (per measured size: ``size``, ``time_us_oop``, ``time_us_ip`` (us), ``algbw_GBps``,
    ``busbw_GBps`` (out-of-place, GB/s), ``wrong_oop``, ``wrong_ip``), ``log``, ``wall_s`` (s),
    ``exit_code``, ``nranks``, ``nccl_version``, ``started_at`` (Unix s), ``duplicate_of``."""

    number: int
    role: str
    env: dict[str, str] = field(default_factory=dict)
    status: Status = Status.RUNNING
    cause: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    wall_s: float | None = None
    exit_code: int | None = None
    nranks: int | None = None
    nccl_version: str = ""
    started_at: float | None = None
    duplicate_of: int | None = None
    runner: str = ""

    @property
    def key(self) -> str:
        """The set's identity (:func:`tuner.record.trial.set_key`)."""
        return set_key(self.env)

    @property
    def ran(self) -> bool:
        """True for a run that was made (not duplicate or invalid bookkeeping)."""
        return self.role in (FIRST, LAST, SEARCH, CHECK)

    def row_at(self, size: int) -> dict[str, Any] | None:
        """The measured row nearest ``size`` (bytes, on a log scale, within :data:`NEAREST_FACTOR`)."""
        rows = [r for r in self.rows if r.get("time_us_oop") is not None and r["size"] > 0]
        if not rows:
            return None
        best = min(rows, key=lambda r: abs(math.log(r["size"] / size)))
        return best if abs(math.log(best["size"] / size)) <= math.log(NEAREST_FACTOR) else None

    def time_at(self, size: int) -> float | None:
        """Out-of-place time (us) at ``size`` (:meth:`row_at`), None when not measured or not ok."""
        row = self.row_at(size) if self.status is Status.OK else None
        return float(row["time_us_oop"]) if row else None


_FIELDS = ("role", "env", "status", "cause", "rows", "log", "wall_s", "exit_code", "nranks", "nccl_version",
           "started_at", "duplicate_of", "runner")


def _attrs(rec: ScreenRecord) -> dict[str, Any]:
    out = {name: getattr(rec, name) for name in _FIELDS}
    out["status"] = rec.status.value
    return out


#: What :func:`_record` reads for a field a trial does not hold, so a field at this value is not
#: written (:func:`tuner.study.write_changed_attrs`). ``role`` is always written: it marks a record.
_DEFAULTS = {k: v for k, v in _attrs(ScreenRecord(number=0, role="")).items() if k != "role"}


def _record(number: int, attrs: Mapping[str, Any], state: TrialState) -> ScreenRecord | None:
    if "role" not in attrs:
        return None
    values = {k: attrs[k] for k in _FIELDS if k in attrs and attrs[k] is not None}
    values["status"] = Status(values.get("status", Status.RUNNING.value))
    if state == TrialState.FAIL and values["status"] is Status.RUNNING:
        values["status"] = Status.INTERRUPTED
    return ScreenRecord(number=number, **values)


class ScreenStore:
    """The screen study of the sweep whose store is ``main``, over ``choices`` (screened name ->
    categorical candidates, ``unset`` first). Raises what Optuna raises for a broken storage."""

    def __init__(self, main: StudyStore, choices: Mapping[str, tuple[str, ...]], seed: int | None = None) -> None:
        self.choices = dict(choices)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True, n_startup_trials=8)
        self.study = optuna.create_study(study_name=main.study.study_name + SUFFIX, storage=main.study._storage,
                                         sampler=sampler, direction="maximize", load_if_exists=True)
        self._dists = {k: CategoricalDistribution(list(v)) for k, v in self.choices.items()}

    # -- reading -------------------------------------------------------------------------
    def records(self) -> list[ScreenRecord]:
        """Every screen trial with a record, in trial order (bookkeeping included)."""
        out = []
        for t in self.study.get_trials(deepcopy=False):
            rec = _record(t.number, t.user_attrs, t.state)
            if rec is not None:
                out.append(rec)
        return out

    def runs(self) -> list[ScreenRecord]:
        """Finished screen runs (not bookkeeping, not running or interrupted)."""
        return [r for r in self.records() if r.ran and r.status not in (Status.RUNNING, Status.INTERRUPTED)]

    def value_of(self, number: int) -> tuple[float | None, float]:
        """``(objective, constraint)`` Optuna holds for screen trial ``number``."""
        t = self.study.get_trials(deepcopy=False)[number]
        return t.value, (t.constraints or {}).get(CONSTRAINT, 0.0) if t.constraints else 0.0

    def get(self, key: str) -> str | None:
        """A study-level note (e.g. whether ``-J`` works), or None."""
        value = self.study.user_attrs.get(key)
        return None if value is None else str(value)

    def put(self, key: str, value: str) -> None:
        """Store a study-level note."""
        self.study.set_user_attr(key, value)

    # -- writing -------------------------------------------------------------------------
    def params_of(self, env: Mapping[str, str]) -> dict[str, str]:
        """The categorical point of a set: every screened name, ``unset`` where absent."""
        return {name: env.get(name, UNSET) for name in self.choices}

    def ask(self, env: Mapping[str, str] | None = None, role: str = SEARCH) -> tuple[optuna.Trial, dict[str, str]]:
        """A new trial: ``env`` fixed (queued first) or, when None, the sampler's proposal."""
        if env is not None:
            self.study.enqueue_trial(self.params_of(env), user_attrs={"role": role}, skip_if_exists=False)
        trial = self.study.ask()
        params = {name: str(trial.suggest_categorical(name, list(values))) for name, values in self.choices.items()}
        return trial, params

    def start(self, trial: optuna.Trial, rec: ScreenRecord) -> None:
        """Write what is known when a run starts (a resume finds and fails it if the runner died)."""
        rec.runner = runner_id()
        write_changed_attrs(trial, _attrs(rec), _DEFAULTS)

    def finish(self, trial: optuna.Trial, rec: ScreenRecord, value: float | None) -> None:
        """Record ``rec`` and tell the sampler ``value`` (minus the decode time, us), or, when
        None, that the set is infeasible (failed, wrong values, NCCL would reject it)."""
        write_changed_attrs(trial, _attrs(rec), _DEFAULTS)
        trial.set_constraint(CONSTRAINT, 0.0 if value is not None else 1.0)
        self.study.tell(trial, value if value is not None else self._penalty())

    def tell_known(self, trial: optuna.Trial, rec: ScreenRecord, value: float | None, constraint: float) -> None:
        """Close a proposal of a set already screened (its known result) without running it."""
        write_changed_attrs(trial, _attrs(rec), _DEFAULTS)
        trial.set_constraint(CONSTRAINT, constraint)
        self.study.tell(trial, value if value is not None else self._penalty())

    def abandon(self, trial: optuna.Trial, rec: ScreenRecord) -> None:
        """A run cut short by a signal: recorded as interrupted, state FAIL (run again on resume)."""
        rec.status, rec.cause = Status.INTERRUPTED, "the runner was interrupted (signal)"
        write_changed_attrs(trial, _attrs(rec), _DEFAULTS)
        self.study.tell(trial, state=TrialState.FAIL)

    def recover(self) -> int:
        """Fail the RUNNING screen trials of dead runners on this host (their runs are redone);
        returns how many."""
        n = 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            runner = str(t.user_attrs.get("runner", ""))
            if runner.rpartition(":")[0] == host_name() and not runner_alive(runner):
                self.study.tell(t.number, state=TrialState.FAIL)
                n += 1
        return n

    def _penalty(self) -> float:
        """Told for an infeasible set: twice the worst feasible value (values are negative times)."""
        done = [t.value for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if t.value is not None and not (t.constraints or {}).get(CONSTRAINT, 0.0)]
        return 2.0 * min(done) if done else -1e9


def known_bad(store: StudyStore) -> dict[str, str]:
    """Sets whose screen reported wrong values, ``{set_key(screened env): cause}``, from the
    screen study of the sweep whose store is ``store`` (empty when it has none). A set proposed
    to the main study whose screened variables match one of these is ``invalid_output`` there
    too: never relaunched, never recommended (:func:`tuner.screen.rank.screen_key`)."""
    name = store.study.study_name + SUFFIX
    try:
        study = optuna.load_study(study_name=name, storage=store.study._storage)
    except KeyError:
        return {}
    out: dict[str, str] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        rec = _record(t.number, t.user_attrs, t.state)
        if rec is not None and rec.ran and rec.status is Status.INVALID_OUTPUT:
            out.setdefault(rec.key, rec.cause)
    return out
