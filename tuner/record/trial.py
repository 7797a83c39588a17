"""The trial record: one relaunch of the server, as the sweep writes it and the report reads it.

This docstring is the schema (docs/USAGE.md links here). A :class:`TrialRecord` is stored as the
user attributes of one Optuna trial, one attribute per field (:func:`to_user_attrs` /
:func:`from_user_attrs`, the only code that knows the keys), so ``nccl-tune report`` and
optuna-dashboard read everything from the storage alone. ``trials.csv`` has one column per
field (:data:`CSV_COLUMNS`, list, mapping and typed fields as JSON text in the file only, the
typed ones as the JSON objects of their fields: :func:`field_json`), plus the judging columns
the report computes (``vs_baseline``, its CI, ``verdict``, ``verdict_note``), in trial order:
one row per relaunch and one per set recorded without a launch (status ``skipped``, ``cause``
why, verdict ``not measured``, ``verdict_note`` the set it equals: ``trial 3 (preset ll)``).
Which metric a study is judged on, its format version and what the study stores about itself
are :mod:`tuner.record.study` and :mod:`tuner.record.format`.

Fields (units in the names: ``_s`` seconds, ``_tok_s`` output tokens per second, ``_at`` Unix
time in seconds):

===================== ======================================================================
``trial``             Optuna trial number (relaunch order within the study)
``kind``              :class:`Kind`: baseline, preset, search, confirm (duplicate/invalid: a
                      set recorded without a launch, told to the sampler, never relaunched;
                      trials.csv and report.md's "Sets not measured" list each one)
``preset``            the preset's name, or ``""``
``status``            :class:`Status`
``cause``             one line: why it failed (log tail, probe), or why it was not launched
                      (a duplicate: ``the same set to NCCL at 14336 B``; an invalid set: why)
``env``               the set: variable -> value as launched (secrets as ``***``)
``flags``             server flags of the set, appended to the command (argv items)
``output_tok_s``      median output tok/s of the recorded runs (None unless ok)
``output_tok_s_runs`` per recorded run: completion tokens / E2E (tok/s)
``decode_tok_s``      median 1 / TPOT (tok/s, prefill excluded); None when not measurable
``decode_tok_s_runs`` per recorded run: 1 / TPOT (tok/s)
``ttft_s``            median time to first token (s)
``tpot_s``            median time per output token after the first (s)
``e2e_s``             median end-to-end latency (s)
``completion_tokens`` median completion tokens per run
``tokens_counted``    True when a run's token count is a guess (no usage chunk, counted from
                      chunks: a lower bound)
``timing_measurable`` False when tokens arrived in bursts, so TTFT/TPOT (and decode tok/s) are
                      not measurable; output tok/s stays right
``reasoning_deltas``  reasoning chunks in the last run (reasoning models)
``ci_halfwidth``      with ``repeats = "auto"``: 95 % CI half-width of the median (fraction)
``concurrency``       bench levels: :class:`tuner.record.levels.LevelResult`, one per level measured
``load_s``            launch to ready (s)
``warmup_s``          of ``load_s``, health's first 200 to the first request answered (s): a
                      warm-up behind a green /health (first requests held without headers or
                      answered 503); None when not ready, or stored before this field
``probe_s``           ready to end of probe (s)
``teardown_s``        SIGTERM to nothing left (s)
``wall_s``            whole relaunch (s)
``started_at``        when the relaunch started (Unix s)
``finished_at``       when it ended (Unix s)
``retry_of_trial``    trial number this one retries (its runner died), or None
``retried_by_trial``  trial number that retried this interrupted one, or None (derived from
                      the retry's ``retry_of_trial`` when read: a finished trial is immutable)
``recheck``           a baseline re-measure (drift check), not counted in the budget
``duplicate_of``      (duplicate kind only) the trial whose result the sampler was told: the
                      measured set (or the baseline) this one is to NCCL the same as
``removed_inherited`` inherited NCCL_*/CUDA_DEVICE_MAX_CONNECTIONS names removed from the env
``nccl_version``      NCCL version the server's log names (``2.21.5``), or ``""``
``nccl_confirmed``    variable -> value as NCCL echoed it (``set by environment to``)
``nccl_not_applied``  variable -> why: set for the trial but echoed by no rank, or with
                      another value; such a trial gets no speed verdict
``nccl_unverifiable`` variables of the set NCCL never echoes (CUDA_DEVICE_MAX_CONNECTIONS)
``nccl_proof``        one row per launched variable: ``name``, ``value``, ``status``
                      (confirmed / not applied / unverifiable), ``ranks`` that echoed it
                      (``0-7 (8/8)``), ``echo`` (the value as echoed), ``source``
                      (``NCCL_DEBUG_FILE x8``, ``server log x1``), ``why``
``nccl_sources``      where NCCL's lines were read: NCCL_DEBUG_FILE paths, ``server log``
``nccl_unlaunched``   NCCL variables NCCL echoed that the launch did not set -> ``VALUE on
                      ranks 1-7`` (set where the processes start: ``ray start``, an image, the server)
``nccl_unlaunched_from`` variable of ``nccl_unlaunched`` -> where it came from (a conf file,
                      a plugin, the image's environment: :mod:`tuner.nccl.conf`); a variable
                      absent: not known (or stored before this field)
``nccl_loaded``       True when a process of the server mapped an NCCL library, False when
                      none did (every map read), None when not known (or stored before it)
``nccl_library``      the NCCL library file mapped (``/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5``;
                      inside a container the container's path), ``""``: not known
``nccl_library_version`` its version (file name, else its ``NCCL version`` string), ``""``: not known
``nccl_build_id``     its GNU build ID (hex), ``""``: not known
``nccl_ranks``        ranks (CUDA devices) that logged NCCL lines
``node_ranks``        a server spanning nodes: host (NCCL's ``%h``, a played node's name) -> how
                      many ranks of NCCL's largest communicator it stated; ``{}``: one host, or
                      stored before this field
``nccl_channels``     NCCL's channel/ring/tree lines of rank 0, as logged
``nccl_warnings``     every ``NCCL WARN`` line
``allreduce_backend`` who carries the decode allreduce (``nccl``, ``custom_allreduce``, ...), or
                      ``""``; with a backend choice, what the launch's log shows ran
``backend_choice``    the backend choice the set's params name (a catalogue entry,
                      :data:`tuner.servers.CATALOGUE`: ``vllm-custom-allreduce-off``), or
                      ``""`` (the set names none; or stored before format 6)
``backend_applied``   True when the launch's log proves the choice ran, False when the server
                      ignored it, fell back from it or logged no proving line (such a trial
                      gets no speed verdict), None without a choice (or before format 6)
``backend_reason``    the evidence: the proving or refusing line quoted, or which proving line
                      is absent (:func:`tuner.servers.backend.prove`)
``host``              :class:`tuner.record.host.HostRecord`: name, GPU model and count, driver,
                      NCCL and server versions (where known); None before hosts were recorded
``host_type``         GPU model x count + server command: trials are judged within one type
``log``               path of the server's log (stdout and stderr)
``runner``            ``host:pid`` of the runner that launched it
``teardown_problem``  what survived the teardown (empty when clean)
``launches``          server launches this trial made: 2 when a launch failed in a way not
                      plainly the set's and was relaunched (the budget counts the trial once,
                      as it counts an interrupted trial's retry only); 1 when stored before it
``probe_notes``       how the probe adapted, one line each: a model name not from the model list,
                      answers that ended before max_tokens, multi-token chunks (empty: none, or
                      stored before this field)
``soak_s``            seconds of sustained load the launch ran after its probe (a finalist's
                      confirmation, the final baseline: tuner.measure.soak), None: no soak
                      (not asked, or stored before this field)
``soak_failure``      why the soak failed, one line (a stall, the server's watchdog line, /health
                      answering while requests were stuck); ``""``: passed, or no soak
``soak_concurrency``  the concurrency levels the soak cycled (empty: no soak)
``soak_requests``     requests the soak completed
``soak_tok_s``        output tok/s under the soak's load (completion tokens / its seconds), None
                      when it completed nothing or made none
``answers_checked``   True when the correctness gate compared this launch's greedy answers with
                      the reference answers (:mod:`tuner.judging.answers`); False: not checked
                      (the gate off, the baseline's own reference, or stored before this field)
``answers_diverge``   the gate's finding in one line: ``prompt 2 parted at token 14: baseline
                      ' Paris' vs set ' Lyon'`` (beyond tolerance: status ``wrong_output``;
                      within: the fork it tolerated), ``""``: identical, or not checked
===================== ======================================================================
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tuner.record.host import HostRecord
from tuner.record.levels import LevelResult
from tuner.record.metric import Metric

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_ATTRS",
    "FIELDS",
    "JSON_FIELDS",
    "Kind",
    "Status",
    "TrialRecord",
    "Verdict",
    "field_json",
    "from_user_attrs",
    "set_key",
    "to_csv_row",
    "to_user_attrs",
]


class Kind(StrEnum):
    """Why a trial exists."""

    BASELINE = "baseline"    #: the untuned server (every inherited tuning variable removed)
    PRESET = "preset"        #: a preset of the search space, tried in order
    SEARCH = "search"        #: proposed by the sampler
    CONFIRM = "confirm"      #: the winner relaunched to confirm its gain
    DUPLICATE = "duplicate"  #: proposed again by the sampler: told the known result, not launched
    INVALID = "invalid"      #: NCCL would reject the set: told infeasible, not launched

    @property
    def relaunched(self) -> bool:
        """True for kinds that launched the server (not duplicate/invalid bookkeeping)."""
        return self not in (Kind.DUPLICATE, Kind.INVALID)


class Status(StrEnum):
    """How a relaunch ended."""

    OK = "ok"                          #: measured
    CRASHED = "crashed"                #: exited during start-up or probe
    TIMEOUT = "timeout"                #: not ready within ready_timeout_s
    HUNG = "hung"                      #: no token for stall_timeout_s
    UNHEALTHY = "unhealthy"            #: ready, but requests fail (e.g. HTTP 500)
    INVALID_OUTPUT = "invalid_output"  #: the smoke or counting check failed
    WRONG_OUTPUT = "wrong_output"      #: measured, but its greedy answers part from the baseline's beyond tolerance
    FAILED_SOAK = "failed_soak"        #: measured, but it hung or failed under the soak's sustained load
    INTERRUPTED = "interrupted"        #: the runner died mid-trial (retried once on resume)
    MACHINE_FAULT = "machine_fault"    #: the machine, not the set, failed (port held): not the set's fault
    RUNNING = "running"                #: in flight (seen mid-sweep)
    SKIPPED = "skipped"                #: not launched (duplicate or invalid set)

    @property
    def failed(self) -> bool:
        """True for a finished relaunch that gave no measurement."""
        return self not in (Status.OK, Status.RUNNING, Status.SKIPPED)

    @property
    def gated(self) -> bool:
        """True for a failed relaunch a gate failed after its probe (wrong output, failed soak):
        its measured tok/s stay in the record and in trials.csv, for the report, never judged."""
        return self in (Status.WRONG_OUTPUT, Status.FAILED_SOAK)

    @property
    def measured(self) -> bool:
        """True when the relaunch's probe figures stand and are judged: ``ok``, or ``failed_soak``
        (the soak runs after the probe, so the speed was measured before the set hung; the set is
        never recommended, :func:`tuner.judging.judge.judge`). A wrong-output launch's figures are
        not judged: its answers say the server computed something else."""
        return self in (Status.OK, Status.FAILED_SOAK)

    @property
    def blames_set(self) -> bool:
        """True when the failure is the set's (told to the sampler as infeasible)."""
        return self.failed and self not in (Status.INTERRUPTED, Status.MACHINE_FAULT)


class Verdict(StrEnum):
    """A trial against the baseline (computed by the report, never stored in the trial)."""

    BASELINE = "baseline"                                   #: the baseline itself
    FASTER = "faster"                                       #: CI above 1, gain >= min effect
    SLOWER = "slower"                                       #: CI below 1, loss >= min effect
    NO_DIFFERENCE = "no significant difference"             #: CI contains 1
    FASTER_BELOW_MIN = "faster, below the minimum effect"   #: CI above 1, gain < min effect
    SLOWER_BELOW_MIN = "slower, below the minimum effect"   #: CI below 1, loss < min effect
    INCONCLUSIVE = "inconclusive"                           #: the baseline drifted as much
    NOT_APPLIED = "not applied"                             #: NCCL did not confirm a variable
    CANNOT_ACT = "measured ratio only"                      #: its variables cannot change the speed here
    UNVERIFIABLE = "unverifiable"                           #: a variable NCCL does not echo
    FAILED_CONFIRMATION = "failed confirmation"             #: the gain did not hold on relaunch
    NOT_ENOUGH_RUNS = "not enough runs to judge"            #: fewer than 2 runs on a side
    FAILED = "failed"                                       #: the relaunch failed
    PENDING = "pending"                                     #: running or interrupted
    NOT_MEASURED = "not measured"                           #: a set not launched (duplicate or invalid)


@dataclass
class TrialRecord:
    """One relaunch (or one sampler bookkeeping entry); the schema is the module docstring."""

    trial: int
    kind: Kind
    status: Status = Status.RUNNING
    preset: str = ""
    cause: str = ""
    env: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    output_tok_s: float | None = None
    output_tok_s_runs: list[float] = field(default_factory=list)
    decode_tok_s: float | None = None
    decode_tok_s_runs: list[float] = field(default_factory=list)
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    completion_tokens: float | None = None
    tokens_counted: bool = False
    timing_measurable: bool = True
    reasoning_deltas: int = 0
    ci_halfwidth: float | None = None
    concurrency: list[LevelResult] = field(default_factory=list)
    load_s: float | None = None
    warmup_s: float | None = None
    probe_s: float | None = None
    teardown_s: float | None = None
    wall_s: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    retry_of_trial: int | None = None
    retried_by_trial: int | None = None
    recheck: bool = False
    duplicate_of: int | None = None
    removed_inherited: list[str] = field(default_factory=list)
    nccl_version: str = ""
    nccl_confirmed: dict[str, str] = field(default_factory=dict)
    nccl_not_applied: dict[str, str] = field(default_factory=dict)
    nccl_unverifiable: list[str] = field(default_factory=list)
    nccl_proof: list[dict[str, str]] = field(default_factory=list)
    nccl_sources: list[str] = field(default_factory=list)
    nccl_unlaunched: dict[str, str] = field(default_factory=dict)
    nccl_unlaunched_from: dict[str, str] = field(default_factory=dict)
    nccl_loaded: bool | None = None
    nccl_library: str = ""
    nccl_library_version: str = ""
    nccl_build_id: str = ""
    nccl_ranks: list[int] = field(default_factory=list)
    node_ranks: dict[str, int] = field(default_factory=dict)
    nccl_channels: list[str] = field(default_factory=list)
    nccl_warnings: list[str] = field(default_factory=list)
    allreduce_backend: str = ""
    backend_choice: str = ""
    backend_applied: bool | None = None
    backend_reason: str = ""
    host: HostRecord | None = None
    host_type: str = ""
    log: str = ""
    runner: str = ""
    teardown_problem: str = ""
    launches: int = 1
    probe_notes: list[str] = field(default_factory=list)
    soak_s: float | None = None
    soak_failure: str = ""
    soak_concurrency: list[int] = field(default_factory=list)
    soak_requests: int = 0
    soak_tok_s: float | None = None
    answers_checked: bool = False
    answers_diverge: str = ""

    @property
    def ok(self) -> bool:
        """True when the relaunch was measured."""
        return self.status is Status.OK

    @property
    def set_key(self) -> str:
        """Canonical text of the set (env and flags): the identity that is never measured twice."""
        return set_key(self.env, self.flags)

    def soak_words(self) -> str:
        """The soak in words: ``10 min at concurrency 1,4: passed (812 requests, 1520 tok/s)`` or
        ``... : failed: <why>``; ``""`` when the launch made none."""
        if self.soak_s is None:
            return ""
        s = self.soak_s
        length = f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min"
        levels = ",".join(map(str, self.soak_concurrency)) or "1"
        head = f"{length} at concurrency {levels}"
        if self.soak_failure:
            return f"{head}: failed: {self.soak_failure}"
        rate = f", {self.soak_tok_s:.0f} tok/s" if self.soak_tok_s is not None else ""
        return f"{head}: passed ({self.soak_requests} requests{rate})"

    def concurrency_tok_s(self) -> dict[int, float]:
        """Aggregate tok/s per measured concurrency level C."""
        return {lv.concurrency: lv.aggregate_tok_s for lv in self.concurrency}

    def median(self, metric: Metric) -> float | None:
        """The median of ``metric`` over the recorded runs (tok/s), None when not measured."""
        return self.output_tok_s if metric is Metric.OUTPUT else self.decode_tok_s

    def runs(self, metric: Metric) -> list[float]:
        """The recorded per-run values of ``metric`` (tok/s), as stored."""
        return self.output_tok_s_runs if metric is Metric.OUTPUT else self.decode_tok_s_runs


def set_key(env: dict[str, str], flags: list[str] | tuple[str, ...] = ()) -> str:
    """Canonical JSON of a set: sorted env, then flags in order (``{"env":..,"flags":..}`` only
    when there are flags, so env-only keys stay the plain sorted mapping)."""
    env_json = dict(sorted(env.items()))
    if flags:
        return json.dumps({"env": env_json, "flags": list(flags)}, separators=(",", ":"))
    return json.dumps(env_json, separators=(",", ":"))


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TrialRecord))
#: Fields stored as JSON text in trials.csv (lists, mappings and typed parts).
JSON_FIELDS: frozenset[str] = frozenset({"env", "flags", "output_tok_s_runs", "decode_tok_s_runs",
                                         "concurrency", "removed_inherited", "nccl_confirmed",
                                         "nccl_not_applied", "nccl_unverifiable", "nccl_proof",
                                         "nccl_sources", "nccl_unlaunched", "nccl_unlaunched_from", "nccl_ranks", "node_ranks",
                                         "nccl_channels", "nccl_warnings", "host", "probe_notes",
                                         "soak_concurrency"})
#: Columns of trials.csv: the record's fields (``trial`` first), then the report's judgement.
JUDGEMENT_COLUMNS: tuple[str, ...] = ("vs_baseline", "vs_baseline_ci_low", "vs_baseline_ci_high",
                                      "verdict", "verdict_note")
CSV_COLUMNS: tuple[str, ...] = FIELDS + JUDGEMENT_COLUMNS

_ENUMS: dict[str, type[StrEnum]] = {"kind": Kind, "status": Status}


def field_json(name: str, value: Any) -> Any:
    """Field ``name``'s ``value`` with its typed parts as plain JSON: concurrency levels and the
    host as the JSON objects of their fields (no host as ``{}``, as records before hosts have
    it); other values (enums included) as they are."""
    if name == "concurrency":
        return [lv.to_json() for lv in value]
    if name == "host":
        return {} if value is None else value.to_json()
    return value


def _typed_field(name: str, value: Any) -> Any:
    """Inverse of :func:`field_json` for one stored value (not None)."""
    if name in _ENUMS:
        return _ENUMS[name](value)
    if name == "concurrency":
        return [LevelResult.from_json(lv) for lv in value]
    if name == "host":
        return HostRecord.from_json(value) if value else None
    return value


def to_user_attrs(record: TrialRecord, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Optuna user attributes of ``record`` (JSON-able; ``trial`` is Optuna's own number).

    ``only``: a subset of field names (e.g. what is known when a trial starts).
    """
    out: dict[str, Any] = {}
    for name in only or FIELDS:
        if name == "trial":
            continue
        value = field_json(name, getattr(record, name))
        if isinstance(value, StrEnum):
            value = value.value
        elif isinstance(value, float) and not math.isfinite(value):
            value = None  # JSON has no NaN/inf; None reads back as "unknown"
        out[name] = value
    return out


def from_user_attrs(trial: int, attrs: dict[str, Any], *, default_status: Status = Status.RUNNING) -> TrialRecord:
    """The record stored in ``attrs`` (an Optuna trial's user attributes).

    Unknown keys are ignored (an older or newer nccl-tune wrote them); missing ones keep the
    field's default, and a missing status is ``default_status`` (the storage module derives it
    from Optuna's trial state). Raises ValueError for an attrs dict without ``kind``.
    """
    if "kind" not in attrs:
        raise ValueError(f"trial {trial} has no nccl-tune record (no 'kind' attribute)")
    values: dict[str, Any] = {"trial": trial}
    for name in FIELDS:
        if name == "trial" or name not in attrs:
            continue
        value = attrs[name]
        if name in JSON_FIELDS and value is None:
            continue
        values[name] = _typed_field(name, value)
    values.setdefault("status", default_status)
    return TrialRecord(**values)


#: The attribute of each field at its default, ``kind`` and ``status`` excepted (always written):
#: :func:`from_user_attrs` reads a missing attribute as its field's default, so a writer may leave
#: these out (:mod:`tuner.study.storage` does: each attribute is a storage transaction, and most
#: of a record is at its defaults when its relaunch starts).
DEFAULT_ATTRS: dict[str, Any] = {k: v for k, v in to_user_attrs(TrialRecord(trial=0, kind=Kind.BASELINE)).items()
                                 if k not in ("kind", "status")}


def to_csv_row(record: TrialRecord) -> dict[str, Any]:
    """One trials.csv row: every field, list, mapping and typed fields as JSON text
    (:func:`field_json`), None as empty."""
    row: dict[str, Any] = {}
    for name in FIELDS:
        value = field_json(name, getattr(record, name))
        if name in JSON_FIELDS:
            value = json.dumps(value, sort_keys=name == "env")
        elif isinstance(value, StrEnum):
            value = value.value
        row[name] = value
    return row
