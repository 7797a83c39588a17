"""What happens between a server's start and its first request, and what every rank logs.

The sequence follows vLLM's multi-process start: each TP worker loads NCCL (``vLLM is using
nccl==X``), initialises its communicator (NCCL's init lines, filtered by NCCL_DEBUG), builds the
custom allreduce (or says why not), runs pynccl's one-element warm-up allreduce, the memory
profiling forward (one prefill-sized allreduce of ``profile_run_tokens``) and the CUDA-graph
capture of the decode sizes. A failure anywhere stops the start the way NCCL fails: at init (a
refused NCCL_ALGO / NCCL_PROTO, a buffer that cannot be allocated) or at the first collective
that needs what is missing (no algorithm/protocol, a zero-byte chunk).
"""

from __future__ import annotations

import dataclasses

from . import vllmlog
from .costmodel import CollectiveCrash, CostModel, check_init
from .ncclconst import ERROR_STRINGS
from .ncclenv import EnvReport, Message, NcclInitError
from .nccllog import (
    DebugConfig,
    format_line,
    host_name,
    init_messages,
    matrix_message,
    node_layout,
    op_message,
    split_echoes,
    tuning_table,
    version_message,
)
from .profiles import Profile

PID, TID = "@@PID@@", "@@TID@@"  # filled in by each worker process


@dataclasses.dataclass
class Outcome:
    """The start's result: ``failure`` None when the server can serve, else ``(stage, exc)``
    with stage ``"init"`` or ``"collective"`` and an NcclInitError or CollectiveCrash."""

    failure: tuple[str, Exception] | None
    op_messages: list  # rank 0's TUNING per-operation messages of the start-up collectives


def startup_collectives(profile: Profile) -> list[tuple[int, str, bool]]:
    """(bytes, dtype, via NCCL only) of the start-up allreduces, in order: pynccl's warm-up of
    one float32 (pynccl.py ``PyNcclCommunicator.__init__``), the profiling forward, the captured
    decode sizes (custom allreduce where it applies)."""
    out = [(4, "float", True), (profile.profile_run_tokens * profile.decode_bytes, "bfloat16", False)]
    out += [(profile.decode_bytes * b, "bfloat16", False) for b in vllmlog.CAPTURE_SIZES]
    return out


def run_startup(profile: Profile, report: EnvReport | None, model: CostModel | None,
                init_error: NcclInitError | None) -> Outcome:
    """Play the start against the cost model; nothing is printed here."""
    if init_error is not None:
        return Outcome(("init", init_error), [])
    assert model is not None and report is not None
    try:
        check_init(profile, report.settings)
    except NcclInitError as exc:
        return Outcome(("init", exc), [])
    ops: list[Message] = []
    tm = model.tune()
    for nbytes, dtype, nccl_only in startup_collectives(profile):
        try:
            cost = model.nccl(nbytes, None, dtype) if nccl_only else model.allreduce(nbytes)
        except (NcclInitError, CollectiveCrash) as exc:
            return Outcome(("collective", exc), ops)
        if cost.via == "nccl":
            msg = op_message(tm, report.settings.version, nbytes, cost.nchannels)
            if msg is not None:
                ops.append(msg)
    return Outcome(None, ops)


NCCL, LOG = "nccl", "log"  # the two kinds of a rank's lines: NCCL's own, and vLLM's logging


def rank_lines(profile: Profile, model_name: str, debug: DebugConfig, report: EnvReport | None,
               model: CostModel | None, outcome: Outcome, rank: int, comm_id: int,
               pid=PID, tid=TID, host: str | None = None, nodes: int = 1,
               plain_vllm: bool = False) -> list[tuple[str, str]]:
    """Every line rank ``rank`` prints during the start, in order, as ``(kind, text)`` with
    kind ``NCCL`` (filtered by NCCL_DEBUG; they go where NCCL writes) or ``LOG`` (vLLM's
    logging); rank 0 also prints the tuning table and the per-operation lines. ``host`` and
    ``nodes`` place the rank on a node of a multi-node cluster (its GPU is the local one);
    ``plain_vllm``: vLLM lines without the ``(process pid=N)`` prefix (vLLM 0.8 format)."""
    host = host or host_name()
    version = profile.nccl_version
    proc = f"Worker_TP{rank}"
    dev = node_layout(profile.tp, nodes, rank)[1] if nodes > 1 else rank
    out: list[tuple[str, str]] = []

    def vllm(entry: tuple[str, str, str]) -> None:
        out.append((LOG, vllmlog.plain(*entry) if plain_vllm else vllmlog.text(*entry, proc, pid)))

    def nccl(msg: Message) -> None:
        text = format_line(msg, debug, dev, version, pid, tid, host)
        if text is not None:
            out.append((NCCL, text))

    vllm(vllmlog.using_nccl(profile))
    vmsg = version_message(profile, debug, rank)
    if vmsg is not None:
        nccl(vmsg)
    failure = outcome.failure
    init_failed = failure is not None and failure[0] == "init"
    early, late = split_echoes(report.messages if report is not None else [])
    for m in (report.messages if init_failed and report is not None else early):
        nccl(m)
    if init_failed or report is None:
        exc = failure[1] if failure is not None else None
        if isinstance(exc, NcclInitError):  # without a report it holds what was read before
            for m in exc.messages:
                nccl(m)
        return out
    assert model is not None
    tm = model.tune()
    for m in init_messages(profile, report.settings, tm, rank, comm_id, nodes, late):
        nccl(m)
    if rank == 0:
        matrix = matrix_message(report.settings, tm.algos)
        if matrix is not None:
            nccl(matrix)
        for m in tuning_table(tm):
            nccl(m)
    plan = model.plan
    for entry in plan.init_lines:  # CudaCommunicator.__init__: symm mem, FlashInfer, custom AR
        vllm(entry)
    if rank == 0:
        for entry in plan.rank0_lines:
            vllm(entry)
    if rank == 0:
        for m in outcome.op_messages:
            nccl(m)
    if failure is not None:
        exc = failure[1]
        if isinstance(exc, NcclInitError):
            for m in exc.messages:
                nccl(m)
        return out
    for entry in plan.lazy_lines:
        vllm(entry)
    if rank == 0:
        for entry in plan.warmup_lines:
            vllm(entry)
    for entry in vllmlog.custom_allreduce_capture(profile, plan.has("CUSTOM") and plan.registers_info):
        vllm(entry)
    vllm(vllmlog.graph_capture_done())
    return out


def failure_lines(outcome: Outcome) -> list[str]:
    """vLLM's traceback tail for a failed start (rank 0 reports it)."""
    assert outcome.failure is not None
    stage, exc = outcome.failure
    if isinstance(exc, CollectiveCrash):
        return ["Fatal Python error: Floating point exception",
                f"(simulated: {exc.reason}; {exc.proto} allreduce of {exc.nbytes} bytes)",
                "RuntimeError: Engine core initialization failed. See root cause above. "
                "Failed core proc(s): {}"]
    assert isinstance(exc, NcclInitError)
    where = "__init__" if stage == "init" else "all_reduce"
    return ["Traceback (most recent call last):",
            f'  File "vllm/distributed/device_communicators/pynccl.py", line 99, in {where}',
            f"RuntimeError: NCCL error: {ERROR_STRINGS.get(exc.result, exc.result)}"]
