"""A study read for the views (``nccl-tune studies``, ``status``, ``compare``): found in its
storage, its records, its night's state and its judgement as the report makes it.

Where a study lives is what ``sweep`` and ``report`` use: ``--storage URL``, else the SQLite
file ``results/<study>/study.db`` (:func:`tuner.study.default_storage`); without a name, every
``*/study.db`` under ``--results``. The judgement is the report's
(:func:`tuner.report.outputs.write_outputs`): per host type, every concurrency level judged
(:func:`tuner.judging.judge_levels`) on the study's metric with its stored minimum effect and
cannot-act reasons, the headline at ``StudyInfo.judge_concurrency``, and its
:class:`tuner.report.story.Story` (the best set first). Nothing is written to a storage here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import InputError, StorageUnreadable
from tuner.judging import (
    DEFAULT_MIN_EFFECT,
    SINGLE_STREAM,
    UNKNOWN_TYPE,
    Judgement,
    cannot_act_on,
    host_type_groups,
    judge_levels,
    measured_levels,
    stats,
)
from tuner.record import Kind, StudyInfo, TrialRecord, Verdict
from tuner.report.decision import Decision, decide
from tuner.report.story import SetFigures, Story, story_of
from tuner.screen import SUFFIX as SCREEN_SUFFIX
from tuner.study import (
    StudyState,
    StudyStore,
    check_format,
    default_storage,
    hide_password,
    open_study,
    study_names,
    study_state,
)

__all__ = [
    "HostJudgement",
    "Night",
    "best_words",
    "find_nights",
    "judge_night",
    "night_baselines",
    "open_night",
    "study_listing",
]

_CLI = "(command line)"  # as tuner.cli names the command line in an error


@dataclass(frozen=True)
class HostJudgement:
    """One host type of a study, judged as the report judges it: ``host_type`` (``""`` when its
    records have none), ``judgement`` (the headline level's, "use it" rests on it), ``story``
    (the single stream's numbers with the headline's best set), ``records`` (its relaunches),
    ``decision``: what the report says first (:func:`tuner.report.decision.decide`), the line
    every view shows."""

    host_type: str
    judgement: Judgement
    story: Story
    records: tuple[TrialRecord, ...]
    decision: Decision = field(default_factory=lambda: decide(None, StudyInfo()))

    def best(self) -> SetFigures | None:
        """The set the verdict names, else the first in the judgement's order; None without one."""
        s = self.story
        return (s.find(s.best) if s.best is not None else None) or (s.sets[0] if s.sets else None)


@dataclass
class Night:
    """One study as the views read it: ``name``, ``storage`` (URL, password hidden where shown),
    ``study_dir`` (``results/<study>/``, this host's runner files and logs), ``store``, ``info``,
    ``records`` (every trial with a record), ``state`` and ``judged`` (one per host type)."""

    name: str
    storage: str
    study_dir: Path
    store: StudyStore
    info: StudyInfo
    records: list[TrialRecord]
    state: StudyState
    judged: list[HostJudgement] = field(default_factory=list)

    @property
    def min_effect(self) -> float:
        """The judging threshold the sweep stored (fraction), else the default."""
        return self.info.min_effect if self.info.min_effect is not None else DEFAULT_MIN_EFFECT

    def relaunches(self) -> list[TrialRecord]:
        """Every relaunch (the sets not launched left out)."""
        return [r for r in self.records if r.kind.relaunched]


def judge_night(records: Sequence[TrialRecord], info: StudyInfo, study: str = "") -> list[HostJudgement]:
    """``records`` judged per host type as :func:`tuner.report.outputs.write_outputs` judges them
    (the module docstring), each with its decision; one entry, with no set, for a study without
    a relaunch. ``study``: its name (for the check a not-decided night proposes)."""
    min_effect = info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT
    relaunches = [r for r in records if r.kind.relaunched]
    out = []
    for host_type, group in (host_type_groups(relaunches) or {UNKNOWN_TYPE: []}).items():
        wanted = info.judge_concurrency
        level = wanted if wanted in measured_levels(group) else SINGLE_STREAM
        levels = judge_levels(group, metric=info.metric, min_effect=min_effect, judged_level=level,
                              cannot_act=cannot_act_on(info, group))
        single = levels.judgements[SINGLE_STREAM]
        decision = decide(levels.headline, info, records=group, min_effect=min_effect, study=study)
        out.append(HostJudgement(host_type, levels.headline, story_of(single, headline=levels.headline), tuple(group),
                                 decision))
    return out


def best_words(judged: HostJudgement, min_effect: float) -> str:
    """The best set's verdict as the listing says it: its verdict words
    (:func:`tuner.judging.stats.verdict_words`), then whether its gain held on fresh launches
    (``use it``), failed there, or was not confirmed yet; ``no tuned set judged`` without one."""
    best = judged.best()
    if best is None:
        return "no tuned set judged"
    words = stats.verdict_words(best.verdict, min_effect)
    if judged.story.best != best.key or best.verdict is Verdict.FAILED_CONFIRMATION:
        return words
    confirmed = judged.story.confirmed
    return words + ("; use it (held on fresh launches)" if confirmed
                    else "; its confirmation failed" if confirmed is False else "; not confirmed yet")


def _sqlite_missing(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL when it does not exist (opening it would create it)."""
    if not url.startswith("sqlite:///"):
        return None
    path = Path(url[len("sqlite:///"):])
    return None if path.is_file() else path


def _names(url: str) -> list[str]:
    """The sweeps' studies of ``url`` (the screen's own ``<study>-screen`` studies left out)."""
    if (missing := _sqlite_missing(url)) is not None:
        raise InputError(_CLI, "--storage", url, "an existing SQLite file (or another Optuna storage)",
                         f"{missing} does not exist")
    names = study_names(url)  # StorageUnreadable (exit 2) for a driver, host or scheme problem
    return [n for n in names if not (n.endswith(SCREEN_SUFFIX) and n[:-len(SCREEN_SUFFIX)] in names)]


def _storages(storage: str | None, results: Path) -> list[tuple[str, Path | None]]:
    """The storages to read: ``storage``, else every ``results/*/study.db``, each with the
    folder it lies in (None for ``--storage``)."""
    if storage:
        return [(storage, None)]
    if not results.is_dir():
        return []
    return [(default_storage(d), d) for d in sorted(results.iterdir()) if (d / "study.db").is_file()]


def study_listing(storage: str | None, results: Path) -> str:
    """The studies of ``storage`` (else of every ``results/*/study.db``) as an error's
    "accepted" text: ``one of the studies in WHERE: a, b``, or what to do when there is none."""
    found = []
    for url, _ in _storages(storage, results):
        try:
            found += _names(url)
        except InputError:
            continue
    where = hide_password(storage) if storage else f"{results}/*/study.db"
    return (f"one of the studies in {where}: {', '.join(found)}" if found
            else f"a study name; {where} holds none (run a sweep first, or pass --storage or --results)")


def open_night(name: str, storage: str | None, results: Path, *, study_key: str = "--study",
               storage_key: str = "--storage") -> Night:
    """The study ``name`` read from ``storage`` (else ``results/<name>/study.db``), judged.
    Raises InputError (exit 2) when it does not exist there (naming the studies there are), when
    the storage cannot be read, or when a newer nccl-tune wrote it
    (:func:`tuner.study.check_format`); ``study_key`` / ``storage_key``: how the command line
    names the two (``compare``'s STUDY_B, ``--storage-b``)."""
    study_dir = results / name
    url = storage or default_storage(study_dir)
    if not storage and not (study_dir / "study.db").exists():
        raise InputError(_CLI, study_key, name, study_listing(None, results), f"{study_dir / 'study.db'} does not exist")
    if storage and (missing := _sqlite_missing(storage)) is not None:
        raise InputError(_CLI, storage_key, storage, "an existing SQLite file (or another Optuna storage)",
                         f"{missing} does not exist")
    try:
        study = open_study(name, url, create=False)
    except KeyError:
        raise InputError(_CLI, study_key, name, study_listing(storage, results),
                         f"no study of that name in {hide_password(url)}") from None
    except StorageUnreadable as exc:  # driver, host or scheme problems
        raise exc.for_key(storage_key) from None
    store = StudyStore(study, {})
    check_format(store, url, name)
    return _night(name, url, study_dir, store)


def _night(name: str, url: str, study_dir: Path, store: StudyStore) -> Night:
    info = store.info()
    records = store.records(relaunched_only=False)
    state = study_state(store, study_dir, records=records)
    return Night(name, hide_password(url), study_dir, store, info, records, state, judge_night(records, info, name))


def find_nights(storage: str | None, results: Path) -> list[Night]:
    """Every study of ``storage`` (else of each ``results/*/study.db``), judged, by name. A study
    a newer nccl-tune wrote is refused as :func:`open_night` refuses it. Raises InputError for a
    storage that cannot be read."""
    nights = []
    for url, folder in _storages(storage, results):
        for name in _names(url):
            try:
                study = open_study(name, url, create=False)
            except KeyError:
                continue  # deleted between the listing and now
            store = StudyStore(study, {})
            check_format(store, url, name)
            nights.append(_night(name, url, folder if folder is not None else results / name, store))
    return sorted(nights, key=lambda n: n.name)


def night_baselines(night: Night) -> list[TrialRecord]:
    """The night's ok baseline launches, oldest first."""
    return [r for r in night.relaunches() if r.kind is Kind.BASELINE and r.ok]
