"""What a study records about itself: :class:`StudyInfo`, one Optuna study user attribute per field.

Written by the sweep (:meth:`tuner.study.storage.StudyStore.update_info`) and read by the
report. Each field is stored as plain JSON (:func:`study_to_user_attrs`: typed parts as the
JSON objects of their fields, the metric as its value) and read back typed by
:func:`study_from_user_attrs`, the only code that knows the keys. Which version of this format a
study holds, and how an older one reads, is :mod:`tuner.record.format`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.record.format import FORMAT_VERSION, stored_version
from tuner.record.metric import Metric
from tuner.record.plain import known_fields
from tuner.record.screen import ScreenSummary

__all__ = ["StudyInfo", "TopologyRecord", "study_from_user_attrs", "study_to_user_attrs"]


@dataclass(frozen=True)
class TopologyRecord:
    """The communicator the first ok baseline's log showed, as stored: the fields of
    :class:`tuner.nccl.types.Topology` (``nranks``, ``nnodes``, ``link``: ``pcie``,
    ``nvlink``, ``nvswitch`` or None, ``has_nvls``, ``gpu_arch``: compute capability x 10 or
    None, ``collnet``, ``cpu_vendor``: ``Intel``, ``AMD``... or None, from format version 3;
    None before it). Kept apart from that type so the stored format changes only when this
    one does; the sweep converts between them (``Topology(**dataclasses.asdict(record))``)."""

    nranks: int
    nnodes: int = 1
    link: str | None = None
    has_nvls: bool = False
    gpu_arch: int | None = None
    collnet: bool = False
    cpu_vendor: str | None = None


@dataclass
class StudyInfo:
    """What a study records about itself (Optuna study user attributes, one per field).

    ``format_version``: the stored format's version (:mod:`tuner.record.format`; 1 for a study
    stored without one); ``metric``: what the study is judged on (:class:`tuner.record.metric.Metric`,
    the sweep's ``probe.metric`` when the study began; a version-1 study's is inferred, see
    :mod:`tuner.record.format`).
    ``server_command``: the argv as launched (secrets scrubbed); ``server_env``: the fixed
    ``server.env`` (secrets as ``***``); ``fixed_tuning_env``: its NCCL/CUDA tuning variables;
    ``fingerprint``: the settings a resume must not change; ``storage_hint``: the storage URL
    without its password; ``target`` (tok/s) and how it ended; ``stop_reason``: why the last
    sweep stopped; ``final_baseline_skipped``: why the drift re-measure owed at the end was not
    made (a time budget), or empty; ``confirm_skipped``: why a finalist's confirmation was not
    made or gave nothing (no time, the budget, its relaunch failed), or empty; ``next_run``: what
    the next run of the same command makes first when a check is owed, or empty (both of the last
    sweep; a study stored before format version 5 reads them empty); ``min_effect`` (fraction):
    the judging threshold the sweep used.
    ``space_choices``: every searched name and its candidates when the study began (an Optuna
    study keeps one distribution per name, so a resume must not change them).
    Learned from the first ok baseline's log (``nccl_learned``): ``nccl_version``, ``topology``
    (:class:`TopologyRecord`, None when not logged), ``allreduce_backend`` and the evidence for
    it, ``allreduce_nccl_on_decode_path`` (False: NCCL variables cannot change decode speed;
    None: unknown), ``server_kind``: the server kind the first ok baseline ran (``tuner.servers``'
    ``KIND_NAMES``; ``""``: not known), ``launcher``: how it was launched (``a plain process``,
    ``docker run``, ``a Slurm step (srun)``; ``""``: not known), ``allreduce_server``: the server the command or log names (``vllm``,
    ``sglang``; ``""``: not known, or a study stored before format version 6), which decides
    the backend space the night measures when NCCL does not carry the decode allreduce.
    ``screen``: what the screen stage found (:class:`tuner.record.screen.ScreenSummary`), None
    without a ``[screen]``.
    ``space_notes``: each searched variable's ``note`` in the space file (one line each), shown
    beside a set the report says to use.
    ``triage``: NCCL's model of the machine judged after the first ok baseline, as
    :meth:`tuner.triage.Triage.to_dict` writes it (``{}``: not judged, or a study stored before
    format version 3); every runner of the study plans its fixes first.
    ``judge_concurrency``: the concurrency level "Use it" rests on (``probe.judge_concurrency``
    of the last sweep; 1, the single-stream probe, for a study stored before format version 4).
    ``trials``: the relaunch budget of the last sweep (``--trials`` or ``sweep.trials``, every
    relaunch counted), written when it starts; None for a study stored before format version 6.
    ``p2p_health``: what the host of the first ok baseline showed about GPU P2P and what NCCL's
    own P2P check said (:meth:`tuner.triage.P2pHealth.to_dict`: gates with their fixes, what was
    not readable); ``{}``: not judged, or a study stored before this field.
    ``config_path``: the experiment file the last sweep was given, as typed (for the ``nccl-tune
    check`` a not-decided night proposes); ``""``: not known, or stored before this field.
    A sweep also empties ``stop_reason`` when it starts, so a study whose runners are all gone
    and whose ``stop_reason`` is empty was stopped without an end mark (killed, a crash).
    """

    format_version: int = FORMAT_VERSION
    metric: Metric = Metric.OUTPUT
    server_command: list[str] = field(default_factory=list)
    server_env: dict[str, str] = field(default_factory=dict)
    fixed_tuning_env: dict[str, str] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    storage_hint: str = ""
    target: float | None = None
    target_met_untuned: bool = False
    target_reached_by: int | None = None
    stop_reason: str = ""
    final_baseline_skipped: str = ""
    confirm_skipped: str = ""
    next_run: str = ""
    min_effect: float | None = None
    space_choices: dict[str, list[str]] = field(default_factory=dict)
    nccl_learned: bool = False
    nccl_version: str = ""
    topology: TopologyRecord | None = None
    allreduce_backend: str = ""
    allreduce_backend_reason: str = ""
    allreduce_nccl_on_decode_path: bool | None = None
    allreduce_server: str = ""
    server_kind: str = ""
    launcher: str = ""
    screen: ScreenSummary | None = None
    space_notes: dict[str, str] = field(default_factory=dict)
    triage: dict[str, Any] = field(default_factory=dict)
    judge_concurrency: int = 1
    trials: int | None = None
    config_path: str = ""
    p2p_health: dict[str, Any] = field(default_factory=dict)


STUDY_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StudyInfo))


def _plain(name: str, value: Any) -> Any:
    """One field's stored JSON: typed parts as their objects (``{}`` for none, as version 1
    stored "none"), the metric as its value."""
    if name in ("topology", "screen"):
        return {} if value is None else dataclasses.asdict(value)
    if isinstance(value, Metric):
        return value.value
    return value


def study_to_user_attrs(info: StudyInfo, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Optuna study user attributes of ``info`` (all fields, or ``only`` those named)."""
    return {name: _plain(name, getattr(info, name)) for name in only or STUDY_FIELDS}


def study_from_user_attrs(attrs: Mapping[str, Any]) -> StudyInfo:
    """The :class:`StudyInfo` stored in a study's user attributes (unknown keys ignored; a
    missing ``format_version`` is 1 and a missing ``metric`` output tok/s, the defaults of
    :mod:`tuner.record.format`). Raises ValueError for a metric or version this format does
    not know (check the version first: :func:`tuner.study.storage.check_format`)."""
    values = known_fields(StudyInfo, attrs)
    values["format_version"] = stored_version(attrs)
    values["metric"] = Metric(attrs.get("metric") or Metric.OUTPUT)
    topology = values.pop("topology", None)
    if topology:
        values["topology"] = TopologyRecord(**known_fields(TopologyRecord, topology))
    screen = values.pop("screen", None)
    if screen:
        values["screen"] = ScreenSummary.from_json(screen)
    return StudyInfo(**values)
