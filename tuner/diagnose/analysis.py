"""The :class:`~tuner.diagnose.model.Diagnosis` of one server log: NCCL's version, topology,
TUNING table, its choice per collective size, and the decode allreduce.

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
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.diagnose.model import DecodeInfo, DecodeSize, Diagnosis, SizeRow, TuningRow
from tuner.nccl import (
    Operation,
    ParsedLog,
    Topology,
    TuningTable,
    launch,
    machine_from_log,
    parse_log,
    read_network,
    topology_from_log,
)
from tuner.redaction import is_secret
from tuner.servers import Backend, allreduce_backend
from tuner.triage import Triage, network_triage, triage, with_network

__all__ = ["PROBE_MARK", "build_diagnosis"]

#: Written into the server log when the server is ready: lines after it were logged during the probe.
PROBE_MARK = "diagnose: probe starts"


def build_diagnosis(lines: Sequence[str], *, argv: Sequence[str] = (), env: Mapping[str, str] | None = None,
                    study: str = "", decode_size: DecodeSize | None = None,
                    probe_info: Mapping[str, Any] | None = None,
                    space_files: Mapping[str, Sequence[str]] | None = None) -> Diagnosis:
    """The :class:`Diagnosis` of one server log (every rank interleaved).

    Lines after the ``[nccl-tune] diagnose: probe starts`` mark count as the probe's; without
    it every line counts as start-up. ``argv``/``env``: the server command and environment
    (for :func:`tuner.servers.backend.allreduce_backend`); ``decode_size``: from the model's config,
    else inferred from the log (module docstring); ``probe_info``: what the probe did;
    ``space_files``: the graph/topology files the space offers (:meth:`tuner.inputs.space.SearchSpace.files`),
    proposed by the triage where they can help.
    """
    lines = [line.rstrip("\n") for line in lines]
    mark = next((i for i, line in enumerate(lines) if PROBE_MARK in line and "[nccl-tune]" in line), None)
    parsed = parse_log(lines)
    probe_ops = parse_log(lines[mark + 1:]).operations if mark is not None else {}
    backend = allreduce_backend(lines, list(argv), dict(env or {}))
    topo = topology_from_log(parsed)
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
                if not is_secret(name)},
        invalid=dict(parsed.invalid),
        warnings=list(dict.fromkeys(parsed.warnings)),
        tuning=_tuning_rows(parsed.tuning),
        sizes=sizes, decode=decode, prefill_bytes=prefill, notes=notes,
        probe=dict(probe_info or {}), created_at=time.time(),
        triage=with_network(_triage(parsed, topo, nbytes, prefill, env, space_files),
                            network_triage(read_network(parsed), parsed.echoes)).to_dict())


def _triage(parsed: ParsedLog, topo: Topology | None, nbytes: int | None, prefill: Sequence[int],
            env: Mapping[str, str] | None, files: Mapping[str, Sequence[str]] | None = None) -> Triage:
    """NCCL's model of the machine, judged at the decode size and the largest prefill size seen."""
    machine = machine_from_log(parsed, parsed.nccl_version)
    nranks = topo.nranks if topo is not None else (machine.local_gpus or 0) if machine is not None else 0
    if machine is None or nranks < 2:
        return triage(None, version=parsed.nccl_version, nranks=2)
    disabled = (env or {}).get("NCCL_P2P_DISABLE", "") not in ("", "0")
    return triage(machine, version=parsed.nccl_version, nranks=nranks, decode_bytes=[nbytes] if nbytes else [],
                  prefill_bytes=max(prefill) if prefill else None, nnodes=topo.nnodes if topo is not None else 1,
                  p2p_disabled=disabled, files=files)


@dataclass(frozen=True)
class _Inferred:
    nbytes: int
    source: str
    reason: str


def _infer_decode_size(ops: Mapping[tuple[str, int], Operation],
                       probe_ops: Mapping[tuple[str, int], Operation], has_probe: bool) -> _Inferred | None:
    """The decode size from the log alone (module docstring), or None."""
    startup = {n for (f, n), op in ops.items() if f == "AllReduce"
               and op.count > (probe_ops[(f, n)].count if (f, n) in probe_ops else 0)}
    for s in sorted(startup):
        if 2 * s in startup and 4 * s in startup:
            series = [s * k for k in (1, 2, 4, 8, 16) if s * k in startup]
            return _Inferred(s, "capture", (
                f"the smallest of the sizes {', '.join(map(str, series))} B logged at start-up: the CUDA-graph "
                "capture of decode batches 1, 2, 4, ... (as servers capture them); a batch-1 decode step replays the graph "
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


def _pick_at_decode(decode: DecodeInfo, parsed: ParsedLog, notes: list[str]) -> None:
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


def _choices_text(op: Operation) -> str:
    return ", ".join(f"{a}/{p}" + (f" {c} ch" if c else "") + f" x{n}" for (a, p, c), n in op.choices.most_common())


def _size_row(op: Operation, probe_ops: Mapping[tuple[str, int], Operation],
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


def _tuning_rows(table: TuningTable | None) -> list[TuningRow]:
    if table is None:
        return []
    return [TuningRow(a, p, lat, bw, table.max_threads.get((a, p)))
            for (a, p), (lat, bw) in table.entries.get("AllReduce", {}).items()]


def _notes(parsed: ParsedLog, backend: Backend, decode: DecodeInfo, sizes: list[SizeRow],
           lines: Sequence[str], notes: list[str]) -> None:
    """What the reader must know to trust the tables, in plain sentences."""
    if parsed.info_lines == 0:
        notes.append("The log holds no NCCL INFO line: NCCL_DEBUG=INFO did not reach NCCL (a server that sets its "
                     "own NCCL_DEBUG, or workers that never receive the environment).")
    elif parsed.tuning is None:
        notes.append("No TUNING table in the log: NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,TUNING did not reach NCCL's init.")
    elif "AllReduce" not in parsed.tuning.entries:
        notes.append("The TUNING table in the log has no AllReduce row (cut short?).")
    if parsed.info_lines and not sizes:
        notes.append("No per-operation TUNING line: NCCL logs them from 2.20 on (src/enqueue.cc), and only for "
                     "collectives NCCL itself runs.")
    if any("bytes dropped: " in line and "log cap" in line for line in lines):
        notes.append("The log reached server.log_max_bytes and its middle was dropped: call counts are partial.")
    if backend.nccl_on_decode_path is False:
        notes.append(f"NCCL does not carry the decode allreduce ({backend.name}): no NCCL variable can act on "
                     "decode. " + backend.reason)
    elif decode.nbytes is not None and decode.algorithm is None:
        notes.append(f"NCCL logged no choice at the decode size {decode.nbytes} B and no TUNING table to compute it.")
    elif decode.nbytes is not None and not any(r.role == "decode" for r in sizes) and decode.algorithm:
        notes.append(f"NCCL logged no AllReduce of exactly {decode.nbytes} B; its pick there is read from the "
                     "TUNING table's cost model.")
