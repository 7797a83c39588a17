"""One relaunch of the server under one set, to one :class:`~tuner.record.TrialRecord`.

Launch in a new session, wait until ready, prove readiness with a real request, the optional
smoke check, warm-up and recorded probe runs, the optional concurrency table, then a teardown
that signals cannot cut short, and a check that nothing of the server is left. A failure at
any step becomes the record's status and cause; only a signal (Interrupted) escapes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tuner import bench, gpu, probe, stats
from tuner.config import ExperimentConfig
from tuner.errors import TrialFailed
from tuner.launcher import ServerProcess, TeardownReport, port_holder
from tuner.nccl_types import NcclVersion
from tuner.probe import ProbeConnectError, ProbeDisconnected, ProbeError, ProbeStalled
from tuner.record import Status, TrialRecord
from tuner.sweep import evidence
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
    nccl_version: NcclVersion | None = None


def log_path(study_dir: Path, number: int) -> Path:
    """``results/<study>/logs/trial-NNNN.log``: the server's stdout and stderr."""
    return study_dir / "logs" / f"trial-{number:04d}.log"


def relaunch(ctx: TrialContext, record: TrialRecord, *, env: dict[str, str], trial_id: int | None,
             on_phase: PhaseCallback, runs: int) -> tuple[TrialRecord, evidence.Evidence | None]:
    """Launch, measure and tear down the server for ``record`` under ``env`` (the set's real
    values; ``record.env`` has secrets as ``***``) and ``record.flags``; returns the record
    completed (status, cause, runs, medians, timings, what NCCL echoed: :mod:`evidence`) and
    the parsed log; ``runs``: recorded runs to make. NCCL's init-time logging is added to the
    launch (:func:`tuner.sweep.evidence.debug_env`), never to the record's set.

    Raises Interrupted on SIGHUP/SIGINT/SIGTERM, after the teardown finished.
    """
    server_cfg = ctx.cfg.server
    t0 = time.monotonic()
    server = ServerProcess(server_cfg, {**env, **evidence.debug_env(ctx.cfg)}, Path(record.log))
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
    found = evidence.read(record, env, server_cfg.argv(), server_cfg.env, ctx.nccl_version)
    return record, found


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
    """Readiness proof, smoke and counting checks, warm-up and recorded runs (one probe loop,
    :func:`tuner.probe.run_probe`), the concurrency table."""
    pc, url = ctx.cfg.probe, ctx.cfg.server.base_url
    key = probe.find_api_key(ctx.cfg.server.api_key, os.environ, ctx.cfg.server.env)
    phase = ["ready-check"]

    def on_event(name: str, detail: str) -> None:
        phase[0] = name
        on_phase(name, detail)

    with probe.make_client(pc.stall_timeout_s, api_key=key) as client:
        on_phase("ready-check", "")
        try:
            model = ctx.cfg.server.model or probe.discover_model(url, client=client)
            probe.stream_once(client, url, model=model, prompt=pc.prompt, max_tokens=min(8, pc.max_tokens),
                              stall_timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint)
            if pc.check is not None:
                _checks(ctx, client, model, record)
            result = probe.run_probe(url, model=model, prompt=pc.prompt, max_tokens=pc.max_tokens,
                                     warmup=pc.warmup, repeats=want, stall_timeout_s=pc.stall_timeout_s,
                                     endpoint=pc.endpoint, client=client, on_event=on_event)
        except ProbeError as exc:
            raise _failure(server, exc, phase[0], pc.stall_timeout_s) from None
        _summarise(record, result)
        if pc.concurrency:
            on_phase("concurrency", ",".join(map(str, pc.concurrency)))
            levels = bench.run_bench(url, model=model, concurrency=list(pc.concurrency),
                                     requests=pc.concurrency_requests, max_tokens=pc.max_tokens,
                                     prompt=pc.prompt, stall_timeout_s=pc.stall_timeout_s,
                                     endpoint=pc.endpoint, api_key=key)
            record.concurrency = bench.levels_to_json(levels)


def counted_in_order(text: str, n: int) -> bool:
    """True when ``text`` holds the numbers 1..n in order (other text between them allowed)."""
    wanted = 1
    for number in re.findall(r"\d+", text):
        if int(number) == wanted:
            wanted += 1
            if wanted > n:
                return True
    return False


def _checks(ctx: TrialContext, client: httpx.Client, model: str, record: TrialRecord) -> None:
    """The smoke question and the opt-in counting check (:class:`tuner.config.SmokeCheck`):
    a wrong answer is ``invalid_output``; an answer cut off by its token budget (a reasoning
    model still thinking) is said in the log, never judged wrong."""
    check, url, pc = ctx.cfg.probe.check, ctx.cfg.server.base_url, ctx.cfg.probe
    assert check is not None
    if check.prompt is not None and check.expect is not None:
        res = probe.smoke_check(client, url, model, check.prompt, check.expect, max_tokens=check.max_tokens,
                                timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint)
        if res.wrong:
            raise TrialFailed(Status.INVALID_OUTPUT, f"smoke check: {check.prompt!r} {res.describe(check.expect)}")
        if res.cut_off:
            ctx.log(f"trial {record.trial}: smoke check {res.describe(check.expect)}")
    if check.count_to is not None:
        n = check.count_to
        res = probe.smoke_check(client, url, model, f"Count from 1 to {n}.", "1", max_tokens=8 * n + 16,
                                timeout_s=pc.stall_timeout_s, endpoint=pc.endpoint, retry_max_tokens=16 * n + 64)
        if res.cut_off:
            ctx.log(f"trial {record.trial}: counting check cut off at max_tokens={res.max_tokens}: not judged")
        elif not counted_in_order(res.answer, n):
            raise TrialFailed(Status.INVALID_OUTPUT, f"counting check: 'Count from 1 to {n}.' answered "
                              f"{res.answer[:120]!r}, not 1..{n} in order (corrupted output?)")


def _summarise(record: TrialRecord, result: probe.ProbeResult) -> None:
    """The recorded runs and their medians into the record (probe.ProbeResult's definitions)."""
    runs = result.runs
    record.output_tok_s_runs = result.output_tok_s_runs
    record.output_tok_s = result.output_tok_s
    record.decode_tok_s_runs = [v for v in result.decode_tok_s_runs if v is not None]
    record.decode_tok_s = result.decode_tok_s
    record.ttft_s, record.tpot_s, record.e2e_s = result.ttft_s, result.tpot_s, result.e2e_s
    record.completion_tokens = result.completion_tokens
    record.tokens_counted = result.tokens_counted
    record.timing_measurable = result.timing_measurable
    record.reasoning_deltas = runs[-1].reasoning_deltas if runs else 0
    record.ci_halfwidth = stats.median_ci_halfwidth(record.output_tok_s_runs)
