"""One relaunch of the server under one set, to one :class:`~tuner.record.TrialRecord`.

Launch in a new session, wait until ready, prove readiness with a real request, the optional
smoke check, warm-up and recorded probe runs, the optional concurrency table, then a teardown
that signals cannot cut short, and a check that nothing of the server is left. A failure at
any step becomes the record's status and cause; only a signal (Interrupted) escapes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tuner import bench, gpu, probe, stats
from tuner.config import ExperimentConfig
from tuner.errors import TrialFailed
from tuner.launcher import ServerProcess, TeardownReport, port_holder
from tuner.probe import ProbeConnectError, ProbeDisconnected, ProbeError, ProbeStalled
from tuner.record import Status, TrialRecord
from tuner.sweep.inflight import RunnerFile
from tuner.sweep.signals import SignalGuard

#: ``on_phase(phase, detail)``: progress of the relaunch (launching, loading, warmup, ...).
PhaseCallback = Callable[[str, str], None]


@dataclass
class TrialContext:
    """What every relaunch of a sweep shares: the config, where logs go, the runner's file
    and signal guard, and a progress callback ``log(text)`` for notes."""

    cfg: ExperimentConfig
    study_dir: Path
    runner_file: RunnerFile
    signals: SignalGuard
    log: Callable[[str], None]


def log_path(study_dir: Path, number: int) -> Path:
    """``results/<study>/logs/trial-NNNN.log``: the server's stdout and stderr."""
    return study_dir / "logs" / f"trial-{number:04d}.log"


def relaunch(ctx: TrialContext, record: TrialRecord, *, env: dict[str, str], trial_id: int | None,
             on_phase: PhaseCallback, runs: int) -> TrialRecord:
    """Launch, measure and tear down the server for ``record`` under ``env`` (the set's real
    values; ``record.env`` has secrets as ``***``) and ``record.flags``; returns the record
    completed (status, cause, runs, medians, timings); ``runs``: recorded runs to make.

    Raises Interrupted on SIGHUP/SIGINT/SIGTERM, after the teardown finished.
    """
    server_cfg = ctx.cfg.server
    t0 = time.monotonic()
    server = ServerProcess(server_cfg, env, Path(record.log))
    record.removed_inherited = server.removed
    probe_started: float | None = None
    report: TeardownReport | None = None
    try:
        on_phase("launching", "")
        ctx.runner_file.set_trial(record.trial, trial_id, {"marker": server.marker})  # no window unrecorded
        server.start(gpu.used_bytes())
        ctx.runner_file.set_trial(record.trial, trial_id, server.identity())
        on_phase("loading", "")
        record.load_s = server.wait_ready(server_cfg.ready_timeout_s)
        probe_started = time.monotonic()
        _measure(ctx, server, record, on_phase, runs)
        record.status = Status.OK
    except TrialFailed as exc:
        record.status, record.cause = Status(exc.status), exc.cause
    finally:
        record.probe_s = time.monotonic() - probe_started if probe_started is not None else 0.0
        on_phase("teardown", "")
        with ctx.signals.held():  # a signal now waits until the teardown has finished
            try:
                report = server.teardown()
            finally:
                ctx.runner_file.clear_trial()
    record.teardown_s = report.duration_s
    record.wall_s = time.monotonic() - t0
    record.finished_at = time.time()
    if not report.clean:
        record.teardown_problem = _teardown_problem(report, server_cfg.port)
    return record


def _teardown_problem(report: TeardownReport, port: int) -> str:
    problems = []
    if report.survivors:
        problems.append(f"processes {report.survivors} survived SIGKILL")
    if not report.port_free:
        problems.append(f"port {port} is still held by {port_holder(port)}")
    if report.gpu:
        problems.append(report.gpu)
    return "; ".join(problems)


def _failure(server: ServerProcess, exc: ProbeError, phase: str, stall_timeout_s: float) -> TrialFailed:
    """The status a probe error means for this relaunch: a dead server is ``crashed`` (with the
    log's cause), a stall ``hung``, other request failures ``unhealthy``."""
    if isinstance(exc, ProbeDisconnected | ProbeConnectError):
        server.exited_within(1.0)  # a dropped stream is often a dying server: let it finish
    if not server.alive():
        return TrialFailed(Status.CRASHED, f"{server.crash_cause()} during {phase}")
    if isinstance(exc, ProbeStalled):
        return TrialFailed(Status.HUNG, f"no token for {stall_timeout_s:.0f} s during {phase}")
    if phase == "ready-check":
        return TrialFailed(Status.UNHEALTHY, f"ready but the first request failed: {exc}")
    if isinstance(exc, ProbeDisconnected):
        return TrialFailed(Status.CRASHED, f"stream dropped during {phase}: {exc}")
    return TrialFailed(Status.UNHEALTHY, f"{exc} during {phase}")


def _measure(ctx: TrialContext, server: ServerProcess, record: TrialRecord, on_phase: PhaseCallback,
             want: int) -> None:
    """Readiness proof, smoke check, warm-up and recorded runs, concurrency table."""
    pc = ctx.cfg.probe
    url = ctx.cfg.server.base_url
    with probe.make_client(pc.stall_timeout_s) as client:
        on_phase("ready-check", "")
        try:
            model = ctx.cfg.server.model or probe.discover_model(url, client=client)
            probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=min(8, pc.max_tokens),
                              stall_timeout_s=pc.stall_timeout_s)
            if pc.check is not None:
                ok, answer = probe.smoke_check(client, url, model, pc.check.prompt, pc.check.expect,
                                               timeout_s=pc.stall_timeout_s)
                if not ok:
                    raise TrialFailed(Status.INVALID_OUTPUT, f"smoke check: {pc.check.prompt!r} answered "
                                      f"{answer[:120]!r}, expected {pc.check.expect!r}")
        except ProbeError as exc:
            raise _failure(server, exc, "ready-check", pc.stall_timeout_s) from None
        runs = _probe_runs(ctx, server, client, model, on_phase, want)
        _summarise(record, runs)
        if pc.concurrency:
            on_phase("concurrency", ",".join(map(str, pc.concurrency)))
            levels = bench.run_bench(url, model=model, concurrency=list(pc.concurrency),
                                     requests=pc.concurrency_requests, max_tokens=pc.max_tokens,
                                     prompt=pc.prompt, stall_timeout_s=pc.stall_timeout_s)
            record.concurrency = bench.levels_to_json(levels)


def _probe_runs(ctx: TrialContext, server: ServerProcess, client: httpx.Client, model: str,
                on_phase: PhaseCallback, want: int) -> list[probe.RunMetrics]:
    pc = ctx.cfg.probe
    url = ctx.cfg.server.base_url
    runs: list[probe.RunMetrics] = []
    for i in range(pc.warmup + want):
        phase = "warmup" if i < pc.warmup else "probing"
        detail = f"{i + 1}/{pc.warmup}" if i < pc.warmup else f"run {i - pc.warmup + 1}/{want}"
        on_phase(phase, detail)
        try:
            m = probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=pc.max_tokens,
                                  stall_timeout_s=pc.stall_timeout_s)
        except ProbeError as exc:
            raise _failure(server, exc, phase, pc.stall_timeout_s) from None
        if i >= pc.warmup:
            runs.append(m)
    return runs


def _summarise(record: TrialRecord, runs: list[probe.RunMetrics]) -> None:
    """Medians of the recorded runs into the record (probe.ProbeResult's definitions)."""
    result = probe.ProbeResult(runs)
    record.output_tok_s_runs = [r.output_tok_s for r in runs]
    record.output_tok_s = result.output_tok_s
    record.decode_tok_s_runs = [1.0 / r.tpot_s for r in runs if r.tpot_s]
    record.decode_tok_s = statistics.median(record.decode_tok_s_runs) if record.decode_tok_s_runs else None
    record.ci_halfwidth = stats.median_ci_halfwidth(record.output_tok_s_runs)
    record.ttft_s, record.tpot_s, record.e2e_s = result.ttft_s, result.tpot_s, result.e2e_s
    record.completion_tokens = result.completion_tokens
    record.tokens_counted = result.tokens_counted
    record.reasoning_deltas = runs[-1].reasoning_deltas if runs else 0
