"""The stored record: what a sweep writes into the Optuna storage and the report reads back.

:mod:`~tuner.record.trial` (one relaunch, :class:`TrialRecord`; its docstring is the schema
trials.csv follows), :mod:`~tuner.record.study` (what a study stores about itself,
:class:`StudyInfo`), :mod:`~tuner.record.format` (the format's version, what each version
stores and how older ones read), :mod:`~tuner.record.metric` (the judged metric), and the
typed parts they hold: :mod:`~tuner.record.levels` (a concurrency level),
:mod:`~tuner.record.host` (a relaunch's host), :mod:`~tuner.record.screen` (the screen's
summary); :mod:`~tuner.record.plain` reads them back from plain JSON.
"""

from tuner.record.format import FORMAT_VERSION, UNVERSIONED, newer_than_known, stored_version
from tuner.record.host import HostRecord
from tuner.record.levels import LevelResult
from tuner.record.metric import Metric
from tuner.record.screen import RankedEntry, ScreenBound, ScreenExport, ScreenSummary, TopSet
from tuner.record.study import StudyInfo, TopologyRecord, study_from_user_attrs, study_to_user_attrs
from tuner.record.trial import (
    CSV_COLUMNS,
    DEFAULT_ATTRS,
    FIELDS,
    JSON_FIELDS,
    Kind,
    Status,
    TrialRecord,
    Verdict,
    field_json,
    from_user_attrs,
    set_key,
    to_user_attrs,
)

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_ATTRS",
    "FIELDS",
    "FORMAT_VERSION",
    "JSON_FIELDS",
    "UNVERSIONED",
    "HostRecord",
    "Kind",
    "LevelResult",
    "Metric",
    "RankedEntry",
    "ScreenBound",
    "ScreenExport",
    "ScreenSummary",
    "Status",
    "StudyInfo",
    "TopSet",
    "TopologyRecord",
    "TrialRecord",
    "Verdict",
    "field_json",
    "from_user_attrs",
    "newer_than_known",
    "set_key",
    "stored_version",
    "study_from_user_attrs",
    "study_to_user_attrs",
    "to_user_attrs",
]
