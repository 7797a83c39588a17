"""The diagnose launch: the server once under the sweep's untuned baseline environment plus
NCCL's TUNING log (:data:`tuner.diagnose.debug.TUNING_DEBUG_ENV`), a short probe, teardown, and
the :class:`~tuner.diagnose.model.Diagnosis` of its log (:func:`run`); the decode size from the
model's config.json (:func:`model_decode_size`); the sweep's pre-launch checks (:func:`check_inputs`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuner.diagnose.analysis import PROBE_MARK, build_diagnosis
from tuner.diagnose.debug import LOGGING_ENV, TUNING_DEBUG_ENV
from tuner.diagnose.model import DecodeSize, Diagnosis
from tuner.errors import MachineNotClean, ProbeError, TrialFailed
from tuner.inputs import ExperimentConfig, decode_allreduce_bytes, load_model_shape
from tuner.measure import RunMetrics, find_api_key, make_client, ready_check, run_probe
from tuner.nccl import (
    DEBUG_FILE_VAR,
    TRIAL_PATTERN,
    DebugFile,
    find_debug_files,
    has_pid,
    is_tuning_variable,
    server_log_source,
)
from tuner.redaction import redact, redact_argv, scrub, secret_values
from tuner.server import ServerProcess, SignalGuard, build_env, port_holder, port_in_use, preflight

__all__ = ["check_inputs", "model_decode_size", "run"]

LOG_NAME = "diagnose.log"


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
        decode_size: DecodeSize | None = None, log: Callable[[str], None] = lambda _t: None,
        space_files: Mapping[str, Sequence[str]] | None = None) -> Diagnosis:
    """Launch the server once with NCCL's TUNING log, probe it, tear it down, build the report.

    ``max_tokens`` per completion and ``repeats`` completions of ``cfg.probe.prompt``; the
    server log is kept as ``study_dir/logs/diagnose.log``. Raises TrialFailed (exit 1: the
    server did not start or failed the probe, with status and cause), MachineNotClean (exit 3:
    the port is held, or the teardown left something), Interrupted on a signal (after teardown).
    ``space_files``: the graph/topology files the space offers, for the triage. Does not write the
    report (:func:`tuner.diagnose.store.write_diagnosis`).
    """
    server_cfg = cfg.server
    if port_in_use(server_cfg.host, server_cfg.port):
        raise MachineNotClean(f"port {server_cfg.port} is already in use by {port_holder(server_cfg.port)}")
    log_path = study_dir / "logs" / LOG_NAME
    launch_env = dict(TUNING_DEBUG_ENV)
    pattern = server_cfg.env.get(DEBUG_FILE_VAR)
    if pattern is None:  # NCCL's own files: whole lines, kept at SIGKILL (tuner.nccl.files)
        folder = log_path.with_suffix(".nccl")
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.log"):
            old.unlink()
        pattern = launch_env[DEBUG_FILE_VAR] = str(folder.resolve() / TRIAL_PATTERN)
    launch_env.update({k: v for k, v in LOGGING_ENV.items() if k not in server_cfg.env})
    full_env, removed = build_env(os.environ, server_cfg.env, launch_env)
    overridden = {k: server_cfg.env[k] for k in TUNING_DEBUG_ENV
                  if k in server_cfg.env and server_cfg.env[k] != TUNING_DEBUG_ENV[k]}
    info: dict[str, Any] = {"requests": 0, "max_tokens": max_tokens, "completion_tokens": 0}
    started = time.time() - 1.0
    at_mark: dict[Path, int] = {}
    own_pids: set[int] = set()
    try:
        with SignalGuard() as signals, _serving(cfg, launch_env, log_path, signals) as server:
            log(f"diagnose: launched {' '.join(redact_argv(server_cfg.argv()))[:160]} (log {log_path})")
            load_s = server.wait_ready(server_cfg.ready_timeout_s, ready_check=ready_check(cfg))
            log(f"diagnose: ready after {load_s:.1f} s; probing ({repeats} x {max_tokens} tokens)")
            time.sleep(0.2)  # let the log pump write the start-up lines before the mark
            if server.pump is not None:
                server.pump.note(PROBE_MARK)
            at_mark = {f.path: _size(f.path) for f in find_debug_files(pattern, since=started)}
            _probe(cfg, server, max_tokens, repeats, info)
            # a user's NCCL_DEBUG_FILE place may be shared with another server: only this launch's files
            own_pids = server.pids() if DEBUG_FILE_VAR in server_cfg.env else set()
    except TrialFailed as exc:
        raise TrialFailed(exc.status, f"{exc.cause} (server log: {log_path})") from None
    files = find_debug_files(pattern, since=started, pids=own_pids)
    lines = _startup_then_probe(log_path, files, at_mark)
    diag = build_diagnosis(lines, argv=server_cfg.argv(), env=full_env, study=study, decode_size=decode_size,
                           probe_info=info, space_files=space_files)
    secrets = secret_values(full_env)
    diag.launch = {"config": str(cfg.path), "log": str(log_path), "nccl_files": [str(f.path) for f in files],
                   "load_s": round(load_s, 2),
                   "server_command": [scrub(a, secrets) for a in redact_argv(server_cfg.argv())],
                   "env": redact({**{k: v for k, v in server_cfg.env.items() if is_tuning_variable(k)},
                                           **launch_env}),
                   "removed_inherited": removed}
    for name, value in overridden.items():
        diag.notes.append(f"server.env sets {name}={value}; this launch used {name}={TUNING_DEBUG_ENV[name]} instead.")
    if DEBUG_FILE_VAR in server_cfg.env:
        diag.notes.append(f"server.env sets NCCL_DEBUG_FILE={server_cfg.env[DEBUG_FILE_VAR]}: NCCL's lines were read "
                          "from the files it names" + ("" if has_pid(server_cfg.env[DEBUG_FILE_VAR]) else
                          " (no %p in it: every process opened the same file with fopen(..., \"w\") and overwrote "
                          "the others' lines; add %p)") + ".")
    return diag


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _startup_then_probe(log_path: Path, files: list[DebugFile], at_mark: Mapping[Path, int]) -> list[str]:
    """Every line the launch logged, in an order :func:`build_diagnosis` splits at its probe
    mark: the NCCL files' lines written before the mark, the server log (cut lines rejoined)
    up to and with the mark, the files' lines written after it, then the rest of the server log."""
    server = server_log_source(log_path.read_text(encoding="utf-8", errors="replace")).lines
    mark = next((i for i, line in enumerate(server) if PROBE_MARK in line and "[nccl-tune]" in line), len(server))
    before: list[str] = []
    after: list[str] = []
    for found in files:
        try:
            data = found.path.read_bytes()
        except OSError:
            continue
        cut = at_mark.get(found.path, len(data))
        before += data[:cut].decode(errors="replace").splitlines()
        after += data[cut:].decode(errors="replace").splitlines()
    return [*before, *server[:mark + 1], *after, *server[mark + 1:]]


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
    preflight.check(cfg, results)
