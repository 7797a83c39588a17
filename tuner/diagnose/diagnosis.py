"""``nccl-tune diagnose``: one launch with NCCL's TUNING log, and what NCCL chose per allreduce size.

One extra launch of the server under the sweep's untuned baseline environment (inherited
``NCCL_*``/CUDA_DEVICE_MAX_CONNECTIONS removed, ``server.env`` applied: :func:`tuner.server.build_env`)
plus ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING``; a short probe (a few
streamed completions of the configured prompt); teardown. From the server log
(:func:`tuner.nccl.log.parse_log`):

* the NCCL version, ranks, topology, channels, the variables NCCL echoed, its WARNs;
* the backend carrying the decode allreduce (:func:`tuner.nccl.log.allreduce_backend`);
* NCCL's TUNING table for AllReduce (latency in us, bandwidth in GB/s per algorithm x protocol,
  src/graph/tuning.cc ncclTopoTuneModel);
* per collective size, the algorithm, protocol and channels NCCL logged (per-operation lines of
  src/enqueue.cc, deduplicated by size, with the count of calls), decode and prefill sizes marked.

The decode size (bytes of one batch-1 decode allreduce) comes from, in order: the model's
``config.json`` (``[model] config`` or ``--model-config``: hidden_size x activation bytes x
tokens per step, :func:`tuner.inputs.model.decode_allreduce_bytes`); the CUDA-graph capture sizes logged
at start-up (vLLM captures decode batches 1, 2, 4, then multiples of 8: ``cudagraph_capture_sizes``
in ``VllmConfig._set_cudagraph_sizes``, vllm/config; SGLang's ``cuda_graph_bs`` starts 1, 2, 4, 8,
sglang/srt/server_args.py; so the sizes hold a series s, 2s, 4s whose s is batch 1, and a decode
step replays the captured graph, which NCCL does not log again); the most
frequent AllReduce size during the probe when the probe logged several sizes (an eager server
logs every decode step beside the prompt's prefill; a probe that logged one size logged only
the prefill); for a log without a probe, a unique most frequent size, called a guess. When
the backend says NCCL does not carry the decode allreduce, NCCL's sizes are not used. The
report says which rule gave the size.

Results go to ``results/<study>/diagnose.md`` and ``diagnose.json`` (:meth:`Diagnosis.to_json`),
the server log to ``results/<study>/logs/diagnose.log``. A later sweep of the same study reads
them with :func:`load_diagnosis` and :func:`decode_pick`.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.errors import MachineNotClean, ProbeError, TrialFailed
from tuner.inputs.config import ExperimentConfig
from tuner.inputs.model import decode_allreduce_bytes, load_model_shape
from tuner.measure import RunMetrics, find_api_key, make_client, run_probe
from tuner.nccl import env as nccl_env
from tuner.nccl import log as nccl_log
from tuner.nccl.decode import DecodeChoice, launch
from tuner.nccl.env import NcclVersion, Topology
from tuner.server import ServerProcess, build_env, port_holder, port_in_use

if TYPE_CHECKING:  # tuner.sweep imports the runner, which may import this module: import it late
    from tuner.server.signals import SignalGuard

#: Added to the baseline environment for the diagnose launch (src/debug.cc, ncclDebugInit).
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}
#: Written into the server log when the server is ready: lines after it were logged during the probe.
PROBE_MARK = "diagnose: probe starts"
JSON_NAME, MD_NAME, LOG_NAME = "diagnose.json", "diagnose.md", "diagnose.log"
SCHEMA = 1
_PROTOS = ("LL", "LL128", "Simple")


@dataclass
class TuningRow:
    """One (algorithm, protocol) cell of NCCL's AllReduce TUNING table: base latency (us),
    bandwidth (GB/s; 0 = disabled) and the "Max NThreads" row (None if not logged)."""

    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbps: float
    max_threads: int | None = None


@dataclass
class SizeRow:
    """One collective size NCCL logged per-operation lines for.

    ``algorithm``/``protocol``/``channels``: the most frequent choice at that size (channels
    None before NCCL 2.24's ``channel{Lo..Hi}`` format); ``choices``: every distinct choice with
    its calls when they differ; ``calls``: lines logged in all (rank 0), ``probe_calls`` of them
    during the probe; ``role``: ``decode``, ``prefill``, ``start-up`` (warm-up, profiling,
    graph capture) or ``probe``.
    """

    func: str
    nbytes: int
    algorithm: str | None
    protocol: str | None
    channels: int | None
    calls: int
    probe_calls: int
    role: str
    choices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DecodeInfo:
    """The decode allreduce: ``nbytes`` (None if unknown) and ``size_source`` (``model``,
    ``capture``, ``probe``, ``log`` or ``none``) with ``size_reason``; NCCL's pick there
    (``algorithm``, ``protocol``, ``channels``) with ``pick_source``; ``nccl_on_decode_path``
    from the backend (True, False, None unknown)."""

    nbytes: int | None
    size_source: str
    size_reason: str
    nccl_on_decode_path: bool | None
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = None
    pick_source: str = ""


@dataclass
class Diagnosis:
    """What one diagnose launch showed; :meth:`to_json`/:meth:`from_json` are ``diagnose.json``.

    ``echoed``: variable -> ``{value: processes that echoed it}``; ``backend``: ``name``,
    ``nccl_on_decode_path``, ``reason``, ``server`` (:class:`tuner.nccl.log.Backend`);
    ``topology``: ``nranks``, ``nnodes``, ``link``, ``has_nvls`` (:class:`tuner.nccl.env.Topology`)
    plus ``ranks_logged``, ``coll_channels``, ``nvls_channels``, ``thread_thresholds``,
    ``transports``; ``probe``: ``requests``, ``max_tokens``, ``completion_tokens``.
    """

    study: str
    nccl_version: str | None
    server_nccl_version: str | None
    cuda_version: str | None
    topology: dict[str, Any]
    backend: dict[str, Any]
    echoed: dict[str, dict[str, int]]
    invalid: dict[str, str]
    warnings: list[str]
    tuning: list[TuningRow]
    sizes: list[SizeRow]
    decode: DecodeInfo
    prefill_bytes: list[int]
    notes: list[str] = field(default_factory=list)
    probe: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``diagnose.json`` (``schema`` 1)."""
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Diagnosis:
        """Read :meth:`to_json`'s object; raises KeyError/TypeError when it is not one."""
        d = {k: v for k, v in data.items() if k != "schema"}
        d["tuning"] = [TuningRow(**r) for r in d["tuning"]]
        d["sizes"] = [SizeRow(**r) for r in d["sizes"]]
        d["decode"] = DecodeInfo(**d["decode"])
        return cls(**d)

    def version(self) -> NcclVersion | None:
        """The NCCL version NCCL itself logged, else the one the server named, else None."""
        text = self.nccl_version or self.server_nccl_version
        return NcclVersion.parse(text) if text else None

    def topology_info(self) -> Topology | None:
        """The :class:`tuner.nccl.env.Topology` the log showed (None if no communicator size)."""
        t = self.topology
        if not t.get("nranks"):
            return None
        return Topology(nranks=t["nranks"], nnodes=t.get("nnodes") or 1, link=t.get("link"),
                        has_nvls=bool(t.get("has_nvls")))

    def decode_choice(self) -> DecodeChoice | None:
        """NCCL's pick at the decode size as :class:`tuner.nccl.decode.DecodeChoice` (the input of
        :func:`tuner.nccl.decode.decode_effect`), or None (see :func:`decode_pick`)."""
        pick = decode_pick(self)
        return DecodeChoice(pick[1], pick[2], self.decode.pick_source) if pick else None


def decode_pick(result: Diagnosis) -> tuple[int, str, str, int | None] | None:
    """``(nbytes, algorithm, protocol, channels)`` NCCL picks for the decode allreduce, or None.

    None when the decode size is unknown, when NCCL logged no choice there and the TUNING table
    is missing, or when the backend says NCCL does not carry the decode allreduce (vLLM's custom
    allreduce: then no NCCL variable can act on decode). ``channels`` is None when the log does
    not show it (per-operation lines before NCCL 2.24 and no channel count to compute it from).
    """
    d = result.decode
    if d.nbytes is None or d.algorithm is None or d.protocol is None or d.nccl_on_decode_path is False:
        return None
    return d.nbytes, d.algorithm, d.protocol, d.channels


def load_diagnosis(study_dir: str | Path) -> Diagnosis | None:
    """The :class:`Diagnosis` in ``study_dir/diagnose.json``, or None when there is none or it
    cannot be read (another schema, a truncated file)."""
    path = Path(study_dir) / JSON_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA:
            return None
        return Diagnosis.from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# -- the report builder ----------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeSize:
    """A decode size from outside the log: ``nbytes`` and the sentence saying where it came from."""

    nbytes: int
    reason: str


def build_diagnosis(lines: Sequence[str], *, argv: Sequence[str] = (), env: Mapping[str, str] | None = None,
                    study: str = "", decode_size: DecodeSize | None = None,
                    probe_info: Mapping[str, Any] | None = None) -> Diagnosis:
    """The :class:`Diagnosis` of one server log (every rank interleaved).

    Lines after the ``[nccl-tune] diagnose: probe starts`` mark count as the probe's; without
    it every line counts as start-up. ``argv``/``env``: the server command and environment
    (for :func:`tuner.nccl.log.allreduce_backend`); ``decode_size``: from the model's config,
    else inferred from the log (module docstring); ``probe_info``: what the probe did.
    """
    lines = [line.rstrip("\n") for line in lines]
    mark = next((i for i, line in enumerate(lines) if PROBE_MARK in line and "[nccl-tune]" in line), None)
    parsed = nccl_log.parse_log(lines)
    probe_ops = nccl_log.parse_log(lines[mark + 1:]).operations if mark is not None else {}
    backend = nccl_log.allreduce_backend(lines, list(argv), dict(env or {}))
    topo = nccl_log.topology_from_log(parsed)
    notes: list[str] = []
    inferred = _infer_decode_size(parsed.operations, probe_ops, mark is not None)
    if inferred and backend.nccl_on_decode_path is False and inferred.source != "capture":
        inferred = None  # NCCL never sees the decode allreduce: its sizes say nothing about it
    size = decode_size or inferred
    if decode_size and inferred and inferred.nbytes != decode_size.nbytes:
        notes.append(f"The model gives a decode size of {decode_size.nbytes} B; the log alone suggests "
                     f"{inferred.nbytes} B ({inferred.reason}).")
    source = "model" if decode_size else size.source if isinstance(size, _Inferred) else "none"
    nbytes = size.nbytes if size else None
    reason = size.reason if size else (
        f"not in NCCL's lines: {backend.name} carries it" if backend.nccl_on_decode_path is False else
        "unknown: no model config, and no capture series, probe size or repeated size in NCCL's lines")
    prefill = sorted(n for (f, n) in probe_ops if f == "AllReduce" and n != nbytes)
    decode = DecodeInfo(nbytes, source, reason, backend.nccl_on_decode_path)
    _pick_at_decode(decode, parsed, notes)
    sizes = [_size_row(op, probe_ops, nbytes, prefill) for op in sorted(
        parsed.operations.values(), key=lambda o: (o.func != "AllReduce", o.func, o.nbytes))]
    _notes(parsed, backend, decode, sizes, lines, notes)
    return Diagnosis(
        study=study,
        nccl_version=str(parsed.nccl_version) if parsed.nccl_version else None,
        server_nccl_version=str(parsed.server_nccl_version) if parsed.server_nccl_version else None,
        cuda_version=parsed.cuda_version,
        topology={"nranks": topo.nranks if topo else parsed.nranks, "nnodes": topo.nnodes if topo else parsed.nnodes,
                  "link": topo.link if topo else None, "has_nvls": topo.has_nvls if topo else False,
                  "ranks_logged": parsed.ranks, "coll_channels": parsed.coll_channels,
                  "nvls_channels": parsed.nvls_channels,
                  "thread_thresholds": list(parsed.thread_thresholds) if parsed.thread_thresholds else None,
                  "transports": sorted(parsed.transports)},
        backend={"name": backend.name, "nccl_on_decode_path": backend.nccl_on_decode_path,
                 "reason": backend.reason, "server": backend.server},
        echoed={name: dict(Counter(values.values())) for name, values in sorted(parsed.echoes.items())
                if not nccl_env.is_secret(name)},
        invalid=dict(parsed.invalid),
        warnings=list(dict.fromkeys(parsed.warnings)),
        tuning=_tuning_rows(parsed.tuning),
        sizes=sizes, decode=decode, prefill_bytes=prefill, notes=notes,
        probe=dict(probe_info or {}), created_at=time.time())


@dataclass(frozen=True)
class _Inferred:
    nbytes: int
    source: str
    reason: str


def _infer_decode_size(ops: Mapping[tuple[str, int], nccl_log.Operation],
                       probe_ops: Mapping[tuple[str, int], nccl_log.Operation], has_probe: bool) -> _Inferred | None:
    """The decode size from the log alone (module docstring), or None."""
    startup = {n for (f, n), op in ops.items() if f == "AllReduce"
               and op.count > (probe_ops[(f, n)].count if (f, n) in probe_ops else 0)}
    for s in sorted(startup):
        if 2 * s in startup and 4 * s in startup:
            series = [s * k for k in (1, 2, 4, 8, 16) if s * k in startup]
            return _Inferred(s, "capture", (
                f"the smallest of the sizes {', '.join(map(str, series))} B logged at start-up: the CUDA-graph "
                "capture of decode batches 1, 2, 4, ... (vLLM, SGLang); a batch-1 decode step replays the graph "
                f"captured for {s} B, which NCCL does not log again"))
    probe_sizes = Counter({n: op.count for (f, n), op in probe_ops.items() if f == "AllReduce"})
    if len(probe_sizes) >= 2:  # eager decode logs every step next to the prompt's prefill
        n, calls = probe_sizes.most_common(1)[0]
        return _Inferred(n, "probe", f"the most frequent AllReduce size during the probe ({_calls(calls)}); "
                                     "no model config and no CUDA-graph capture series at start-up")
    every = Counter({n: op.count for (f, n), op in ops.items() if f == "AllReduce"}).most_common(2)
    if not has_probe and every and every[0][1] >= 2 and (len(every) == 1 or every[0][1] > every[1][1]):
        n, calls = every[0]
        return _Inferred(n, "log", f"a guess: the most frequent AllReduce size in the log ({_calls(calls)}); "
                                   "give the model's config.json to know it")
    return None


def _pick_at_decode(decode: DecodeInfo, parsed: nccl_log.ParsedLog, notes: list[str]) -> None:
    """NCCL's choice at the decode size: its per-operation line, else the TUNING table's model."""
    if decode.nbytes is None:
        return
    op = parsed.operations.get(("AllReduce", decode.nbytes))
    if op and op.algorithm and op.protocol:
        decode.algorithm, decode.protocol, decode.channels = op.algorithm, op.protocol, op.channels
        decode.pick_source = f"per-operation TUNING line, {_calls(op.count)}"
        if len(op.choices) > 1:
            notes.append(f"NCCL chose differently between calls at {decode.nbytes} B: " + _choices_text(op))
        return
    best = parsed.tuning.best("AllReduce", decode.nbytes) if parsed.tuning else None
    if best is None:
        return
    decode.algorithm, decode.protocol = best[0], best[1]
    decode.pick_source = f"TUNING table cost model, {best[2]:.1f} us; no per-operation line at this size"
    if parsed.nranks and parsed.coll_channels and best[0] in ("Ring", "Tree"):
        shape = launch(decode.nbytes, best[0], best[1], parsed.nranks, parsed.coll_channels, {},
                       version=parsed.nccl_version)
        decode.channels = shape.nchannels
        decode.pick_source += (f"; {shape.nchannels} channel(s) x {shape.nthreads} threads from NCCL's launch rule "
                               "(src/enqueue.cc, topoGetAlgoInfo)")


def _calls(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


def _choices_text(op: nccl_log.Operation) -> str:
    return ", ".join(f"{a}/{p}" + (f" {c} ch" if c else "") + f" x{n}" for (a, p, c), n in op.choices.most_common())


def _size_row(op: nccl_log.Operation, probe_ops: Mapping[tuple[str, int], nccl_log.Operation],
              decode: int | None, prefill: list[int]) -> SizeRow:
    in_probe = probe_ops.get((op.func, op.nbytes))
    probe_calls = in_probe.count if in_probe else 0
    if op.func == "AllReduce" and op.nbytes == decode:
        role = "decode"
    elif op.func == "AllReduce" and op.nbytes in prefill:
        role = "prefill"
    else:
        role = "probe" if probe_calls else "start-up"
    choices = [{"algorithm": a, "protocol": p, "channels": c, "calls": n} for (a, p, c), n in op.choices.most_common()]
    return SizeRow(op.func, op.nbytes, op.algorithm, op.protocol, op.channels, op.count, probe_calls, role,
                   choices if len(choices) > 1 else [])


def _tuning_rows(table: nccl_log.TuningTable | None) -> list[TuningRow]:
    if table is None:
        return []
    return [TuningRow(a, p, lat, bw, table.max_threads.get((a, p)))
            for (a, p), (lat, bw) in table.entries.get("AllReduce", {}).items()]


def _notes(parsed: nccl_log.ParsedLog, backend: nccl_log.Backend, decode: DecodeInfo, sizes: list[SizeRow],
           lines: Sequence[str], notes: list[str]) -> None:
    """What the reader must know to trust the tables, in plain sentences."""
    if parsed.info_lines == 0:
        notes.append("The log holds no NCCL INFO line: NCCL_DEBUG=INFO did not reach NCCL (a server that sets its "
                     "own NCCL_DEBUG, or workers that never receive the environment).")
    elif parsed.tuning is None:
        notes.append("No TUNING table in the log: NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING did not reach NCCL's init.")
    elif "AllReduce" not in parsed.tuning.entries:
        notes.append("The TUNING table in the log has no AllReduce row (cut short?).")
    if parsed.info_lines and not sizes:
        notes.append("No per-operation TUNING line: NCCL logs them from 2.20 on (src/enqueue.cc), and only for "
                     "collectives NCCL itself runs.")
    if any("bytes dropped: log cap" in line for line in lines):
        notes.append("The log reached server.log_max_bytes and its middle was dropped: call counts are partial.")
    if backend.nccl_on_decode_path is False:
        notes.append(f"NCCL does not carry the decode allreduce ({backend.name}): no NCCL variable can act on "
                     "decode. " + backend.reason)
    elif decode.nbytes is not None and decode.algorithm is None:
        notes.append(f"NCCL logged no choice at the decode size {decode.nbytes} B and no TUNING table to compute it.")
    elif decode.nbytes is not None and not any(r.role == "decode" for r in sizes) and decode.algorithm:
        notes.append(f"NCCL logged no AllReduce of exactly {decode.nbytes} B; its pick there is read from the "
                     "TUNING table's cost model.")


# -- text ------------------------------------------------------------------------------------

def _fmt_bytes(n: int | None) -> str:
    return "-" if n is None else f"{n:,} B"


def _pick_text(d: DecodeInfo) -> str:
    if d.algorithm is None:
        return "unknown (no per-operation line at this size, no TUNING table)"
    ch = f", {d.channels} channel{'s' if d.channels != 1 else ''}" if d.channels else ""
    return f"{d.algorithm}/{d.protocol}{ch}"


def summary_rows(diag: Diagnosis) -> list[tuple[str, str]]:
    """``(what, value)`` lines of the report's head: version, ranks, topology, channels, backend,
    decode size and pick, prefill sizes, echoed variables, warnings."""
    t, b, d = diag.topology, diag.backend, diag.decode
    version = diag.nccl_version or (f"{diag.server_nccl_version} (named by the server)"
                                    if diag.server_nccl_version else "not logged")
    if diag.cuda_version:
        version += f" (CUDA {diag.cuda_version})"
    ranks = t.get("ranks_logged") or []
    rank_text = f"{t.get('nranks') or '?'} ranks" + (f", {len(ranks)} logged" if ranks else "")
    link = f"{t.get('link') or 'link unknown'}, {t.get('nnodes') or '?'} node(s)"
    if t.get("has_nvls"):
        link += ", NVLS"
    channels = f"{t['coll_channels']} coll" if t.get("coll_channels") is not None else "not logged"
    if t.get("nvls_channels"):
        channels += f", {t['nvls_channels']} nvls"
    thr = t.get("thread_thresholds")
    rows = [("NCCL version", version), ("ranks", rank_text), ("topology", link), ("channels", channels)]
    if thr:
        rows.append(("thread thresholds", f"Tree {thr[0]}/{thr[1]}/{thr[2]} | Ring {thr[3]}/{thr[4]}/{thr[5]} "
                                          "(LL/LL128/Simple)"))
    if t.get("transports"):
        rows.append(("transports", ", ".join(t["transports"])))
    rows.append(("decode backend", f"{b['name']}: {b['reason']}"))
    rows.append(("decode size", f"{_fmt_bytes(d.nbytes)} ({d.size_reason})"))
    if b["nccl_on_decode_path"] is False:
        rows.append(("decode pick", f"not NCCL: {b['name']} carries it; NCCL variables cannot act on decode"))
    else:
        rows.append(("decode pick", f"NCCL {_pick_text(d)}" + (f" ({d.pick_source})" if d.pick_source else "")))
    rows.append(("prefill size(s)", ", ".join(_fmt_bytes(n) + _rows_of(n, d.nbytes) for n in diag.prefill_bytes)
                 or ("none logged during the probe" if diag.probe else "no probe in this log")))
    echoed = [f"{name}={'|'.join(vals)}" for name, vals in diag.echoed.items()]
    rows.append(("echoed by NCCL", ", ".join(echoed) or "none"))
    rows += [("NCCL refused", f"{k}={v}") for k, v in diag.invalid.items()]
    rows += [("NCCL WARN", w) for w in diag.warnings[:10]]
    return rows


def _rows_of(n: int, decode: int | None) -> str:
    return f" ({n // decode} tokens)" if decode and n % decode == 0 and n > decode else ""


def tuning_table(diag: Diagnosis) -> Table:
    """NCCL's AllReduce TUNING table: one row per algorithm, ``latency us / bandwidth GB/s`` per
    protocol ("off" where the bandwidth is 0), and the model time at the decode size."""
    table = Table(title="AllReduce TUNING table (latency us / bandwidth GB/s)", box=None, header_style="bold",
                  title_justify="left", pad_edge=False)
    nbytes = diag.decode.nbytes
    for col in ("algorithm", *_PROTOS, *([f"time at {nbytes} B"] if nbytes else [])):
        table.add_column(col, no_wrap=True)
    by_algo: dict[str, dict[str, TuningRow]] = {}
    for r in diag.tuning:
        by_algo.setdefault(r.algorithm, {})[r.protocol] = r
    for algo, cells in by_algo.items():
        if not any(c.bandwidth_gbps > 0 for c in cells.values()):
            continue
        texts = [_cell(cells.get(p)) for p in _PROTOS]
        extra = [_model_time(diag, algo, nbytes)] if nbytes else []
        table.add_row(algo, *texts, *extra)
    return table


def _cell(r: TuningRow | None) -> str:
    if r is None or r.bandwidth_gbps <= 0:
        return "off"
    return f"{r.latency_us:.1f} / {r.bandwidth_gbps:.1f}"


def _model_time(diag: Diagnosis, algo: str, nbytes: int) -> str:
    table = nccl_log.TuningTable({"AllReduce": {(r.algorithm, r.protocol): (r.latency_us, r.bandwidth_gbps)
                                                for r in diag.tuning}})
    times = [(t, p) for p in _PROTOS if (t := table.time_us("AllReduce", algo, p, nbytes)) is not None]
    return ", ".join(f"{p} {t:.1f} us" for t, p in times) or "-"


def sizes_table(diag: Diagnosis) -> Table:
    """Per collective size: bytes, NCCL's algorithm/protocol/channels, calls (during the probe),
    role (decode, prefill, start-up, probe)."""
    table = Table(title="What NCCL chose per size (per-operation TUNING lines)", box=None, header_style="bold",
                  title_justify="left", pad_edge=False)
    for col in ("collective", "bytes", "algorithm", "protocol", "channels", "calls", "in probe", "role"):
        table.add_column(col, justify="right" if col in ("bytes", "channels", "calls", "in probe") else "left",
                         no_wrap=True)
    for r in diag.sizes:
        role = "<- decode" if r.role == "decode" else r.role
        if r.choices:
            role += "  (varied: " + ", ".join(f"{c['algorithm']}/{c['protocol']} x{c['calls']}" for c in r.choices) + ")"
        table.add_row(r.func, f"{r.nbytes:,}", r.algorithm or "?", r.protocol or "?",
                      "-" if r.channels is None else str(r.channels), str(r.calls), str(r.probe_calls), Text(role))
    return table


def print_diagnosis(diag: Diagnosis, console: Console | None = None) -> None:
    """Print the report: the summary, the TUNING table, the per-size table, the notes. On a
    terminal rich lays tables out; piped, every row is one whole line."""
    from tuner.plaintext import plain_table

    console = console or Console()
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column("what", no_wrap=True, style="bold")
    head.add_column("value", overflow="fold")
    for what, value in summary_rows(diag):
        head.add_row(what, Text(value))
    tables = [head] + ([tuning_table(diag)] if diag.tuning else []) + ([sizes_table(diag)] if diag.sizes else [])
    for table in tables:
        if console.is_terminal:
            console.print(table)
        else:
            console.out(plain_table(table), highlight=False)
        console.out("")
    for note in diag.notes:
        console.out(f"note: {note}", highlight=False)


def markdown(diag: Diagnosis) -> str:
    """``diagnose.md``: the same content as :func:`print_diagnosis`, as GitHub markdown."""
    def esc(text: object) -> str:
        return str(text).replace("|", "\\|")

    out = [f"# What NCCL chose: {diag.study}", "", "| | |", "|---|---|"]
    out += [f"| {esc(k)} | {esc(v)} |" for k, v in summary_rows(diag)]
    if diag.tuning:
        nb = diag.decode.nbytes
        out += ["", "## AllReduce TUNING table (latency us / bandwidth GB/s)", "",
                "| algorithm | " + " | ".join(_PROTOS) + (f" | time at {nb} B |" if nb else " |"),
                "|---" * (len(_PROTOS) + 1 + bool(nb)) + "|"]
        for algo in dict.fromkeys(r.algorithm for r in diag.tuning):
            cells = {r.protocol: r for r in diag.tuning if r.algorithm == algo}
            if any(c.bandwidth_gbps > 0 for c in cells.values()):
                out.append(f"| {algo} | " + " | ".join(_cell(cells.get(p)) for p in _PROTOS)
                           + (f" | {_model_time(diag, algo, nb)} |" if nb else " |"))
    if diag.sizes:
        out += ["", "## What NCCL chose per size", "",
                "| collective | bytes | algorithm | protocol | channels | calls | in probe | role |",
                "|---|---:|---|---|---:|---:|---:|---|"]
        for r in diag.sizes:
            role = f"**{r.role}**" if r.role == "decode" else r.role
            out.append(f"| {r.func} | {r.nbytes:,} | {r.algorithm or '?'} | {r.protocol or '?'} | "
                       f"{'-' if r.channels is None else r.channels} | {r.calls} | {r.probe_calls} | {role} |")
    if diag.notes:
        out += ["", "## Notes", ""] + [f"- {esc(n)}" for n in diag.notes]
    if diag.launch:
        out += ["", f"Server log: `{diag.launch.get('log', '')}`"]
    return "\n".join(out) + "\n"


def write_diagnosis(diag: Diagnosis, study_dir: Path) -> tuple[Path, Path]:
    """Write ``diagnose.json`` and ``diagnose.md`` into ``study_dir``; returns both paths."""
    study_dir.mkdir(parents=True, exist_ok=True)
    js, md = study_dir / JSON_NAME, study_dir / MD_NAME
    tmp = js.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(diag.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(js)  # a sweep reading it never sees half a file
    md.write_text(markdown(diag), encoding="utf-8")
    return js, md


# -- the launch ------------------------------------------------------------------------------

def model_decode_size(cfg: ExperimentConfig, override: Path | None = None) -> DecodeSize | None:
    """The decode allreduce size from ``override`` or the config's ``[model] config`` (with its
    ``tokens_per_step``, default 1), or None when neither is given. Raises InputError (exit 2)
    for an unreadable config.json (:func:`tuner.inputs.model.load_model_shape`)."""
    table = getattr(cfg, "model", None)  # [model] arrives with the screen stage
    path = override or getattr(table, "config", None)
    if path is None:
        return None
    size = decode_allreduce_bytes(load_model_shape(path), int(getattr(table, "tokens_per_step", 1) or 1))
    return DecodeSize(size.bytes, f"from {path}: {size.reason}")


@contextmanager
def _serving(cfg: ExperimentConfig, env: Mapping[str, str], log_path: Path,
             signals: SignalGuard) -> Iterator[ServerProcess]:
    """Start the server and always tear it down, a signal waiting for the teardown; a teardown
    that left something behind after a successful run is MachineNotClean (exit 3)."""
    server = ServerProcess(cfg.server, env, log_path)
    window = signals.teardown_window()
    with window.closing(), server, window.opening():
        yield server
    report = server.teardown_report
    if report is not None and not report.clean:
        raise MachineNotClean(f"the diagnose server was not torn down cleanly: survivors {report.survivors}, "
                              f"port free {report.port_free}, GPU {report.gpu or 'released'}")


def run(cfg: ExperimentConfig, study_dir: Path, *, study: str, max_tokens: int = 64, repeats: int = 2,
        decode_size: DecodeSize | None = None, log: Callable[[str], None] = lambda _t: None) -> Diagnosis:
    """Launch the server once with NCCL's TUNING log, probe it, tear it down, build the report.

    ``max_tokens`` per completion and ``repeats`` completions of ``cfg.probe.prompt``; the
    server log is kept as ``study_dir/logs/diagnose.log``. Raises TrialFailed (exit 1: the
    server did not start or failed the probe, with status and cause), MachineNotClean (exit 3:
    the port is held, or the teardown left something), Interrupted on a signal (after teardown).
    Does not write the report (:func:`write_diagnosis`).
    """
    from tuner.measure import ready_check
    from tuner.server.signals import SignalGuard

    server_cfg = cfg.server
    if port_in_use(server_cfg.host, server_cfg.port):
        raise MachineNotClean(f"port {server_cfg.port} is already in use by {port_holder(server_cfg.port)}")
    log_path = study_dir / "logs" / LOG_NAME
    full_env, removed = build_env(os.environ, server_cfg.env, DEBUG_ENV)
    overridden = {k: server_cfg.env[k] for k in DEBUG_ENV if k in server_cfg.env and server_cfg.env[k] != DEBUG_ENV[k]}
    info: dict[str, Any] = {"requests": 0, "max_tokens": max_tokens, "completion_tokens": 0}
    try:
        with SignalGuard() as signals, _serving(cfg, DEBUG_ENV, log_path, signals) as server:
            log(f"diagnose: launched {' '.join(server_cfg.argv())[:160]} (log {log_path})")
            load_s = server.wait_ready(server_cfg.ready_timeout_s, ready_check=ready_check(cfg))
            log(f"diagnose: ready after {load_s:.1f} s; probing ({repeats} x {max_tokens} tokens)")
            time.sleep(0.2)  # let the log pump write the start-up lines before the mark
            if server.pump is not None:
                server.pump.note(PROBE_MARK)
            _probe(cfg, server, max_tokens, repeats, info)
    except TrialFailed as exc:
        raise TrialFailed(exc.status, f"{exc.cause} (server log: {log_path})") from None
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    diag = build_diagnosis(lines, argv=server_cfg.argv(), env=full_env, study=study, decode_size=decode_size,
                           probe_info=info)
    secrets = nccl_env.secret_values(full_env)
    diag.launch = {"config": str(cfg.path), "log": str(log_path), "load_s": round(load_s, 2),
                   "server_command": [nccl_env.scrub(a, secrets) for a in server_cfg.argv()],
                   "env": nccl_env.redact({**{k: v for k, v in server_cfg.env.items() if nccl_env.is_tuning_variable(k)},
                                           **DEBUG_ENV}),
                   "removed_inherited": removed}
    for name, value in overridden.items():
        diag.notes.append(f"server.env sets {name}={value}; this launch used {name}={DEBUG_ENV[name]} instead.")
    if "NCCL_DEBUG_FILE" in full_env:
        diag.notes.append("NCCL_DEBUG_FILE is set: NCCL wrote its lines to that file, not to the server log.")
    return diag


def _probe(cfg: ExperimentConfig, server: ServerProcess, max_tokens: int, repeats: int, info: dict[str, Any]) -> None:
    """``repeats`` streamed completions, none recorded as a measurement (TUNING logging is on)."""
    pc, url = cfg.probe, cfg.server.base_url
    key = find_api_key(cfg.server.api_key, os.environ, cfg.server.env)

    def count(_i: int, run: RunMetrics) -> None:
        info["requests"] += 1
        info["completion_tokens"] += run.completion_tokens

    try:
        with make_client(pc.stall_timeout_s, api_key=key) as client:
            run_probe(url, model=cfg.server.model, prompt=pc.prompt, max_tokens=max_tokens, warmup=0,
                      repeats=repeats, stall_timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint,
                      client=client, on_run=count)
    except ProbeError as exc:
        raise server.request_failure(exc, "during the diagnose probe") from None


def check_inputs(cfg: ExperimentConfig, results: Path) -> None:
    """The sweep's pre-launch checks (:func:`tuner.server.preflight.problems`): InputError (exit 2)."""
    from tuner.server import preflight

    preflight.check(cfg, results)

