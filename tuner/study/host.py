"""Which host measured a trial, and which trials may be compared with each other: host types.

Every trial records its host (``TrialRecord.host``, a :class:`tuner.record.HostRecord`): the
name, the GPUs its server gets (model, count, driver, from NVML via
:func:`tuner.server.gpu.describe`; on a machine without NVIDIA GPUs the GPU fields say so), and
the NCCL and server versions its log names where it names them. A
*host type* (``TrialRecord.host_type``) is the GPU model and count plus the server command as
the experiment file writes it: without the port and with ``${NAME}`` references unexpanded, so
identical hosts sharing one file are one type whatever port and GPUs each was given. Each host
type is measured against its own baseline and judged on its own (:func:`tuner.judging.judge.judge_by_host_type`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.inputs import ExperimentConfig
from tuner.record import HostRecord
from tuner.redaction import redact_argv, scrub, secret_values
from tuner.server import gpu
from tuner.servers import KINDS
from tuner.study.inflight import host_name

__all__ = ["Host", "command_identity", "host_type", "this_host"]

#: Bytes of a server log read for its version (the start-up lines come first).
_HEAD_BYTES = 256 * 1024


def command_identity(argv: list[str]) -> str:
    """A server command as the host type names it: ``{port}`` and the option before it
    dropped (``--port {port}``, ``--port={port}``), ``{python}`` as ``python``, the program
    by its file name (its folder differs between hosts), ``${NAME}`` kept as written, each
    secret it passes as ``***`` (:func:`tuner.redaction.redact_argv`)."""
    out: list[str] = []
    argv = redact_argv(argv)
    for i, arg in enumerate(argv):
        if "{port}" in arg:
            if arg == "{port}" and out and out[-1].startswith("-") and i > 0 and argv[i - 1] == out[-1]:
                out.pop()
            continue
        arg = arg.replace("{python}", "python")
        out.append(Path(arg).name if i == 0 else arg)
    return shlex.join(out)


def host_type(gpus: Mapping[str, Any], argv: list[str]) -> str:
    """``8 x NVIDIA H100 80GB HBM3 | vllm serve M --tensor-parallel-size 8``: the GPUs of
    :func:`tuner.server.gpu.describe` and :func:`command_identity` of the command as written."""
    count = int(gpus.get("gpu_count") or 0)
    model = str(gpus.get("gpu", gpu.NO_GPU))
    return f"{f'{count} x ' if count else ''}{model} | {command_identity(argv)}"


def server_version(log: str | os.PathLike[str]) -> str:
    """The server's version its log names, as ``<kind> <version>`` (``vllm 0.11.0``: the first
    line a server kind reads a version from, :meth:`tuner.servers.ServerKind.version`), or ``""``."""
    try:
        with open(log, "rb") as fh:
            head = fh.read(_HEAD_BYTES).decode(errors="replace")
    except OSError:
        return ""
    for line in head.splitlines():
        for kind in KINDS:
            if version := kind.version(line):
                return f"{kind.name} {version}"
    return ""


@dataclass(frozen=True)
class Host:
    """This runner's host: ``name``, ``gpus`` (:func:`tuner.server.gpu.describe` of the GPUs its
    server is given) and ``host_type``."""

    name: str
    gpus: dict[str, Any] = field(default_factory=dict)
    host_type: str = ""

    def record(self, nccl_version: str = "", log: str = "") -> HostRecord:
        """``TrialRecord.host`` of a relaunch: name, ``gpu``, ``gpu_count``, ``driver``, and
        ``nccl`` and ``server`` versions where its log (``log``) names them."""
        return HostRecord(name=self.name, gpu=str(self.gpus.get("gpu", "")),
                          gpu_count=int(self.gpus.get("gpu_count") or 0), driver=str(self.gpus.get("driver", "")),
                          nccl=nccl_version, server=server_version(log) if log else "")


def this_host(cfg: ExperimentConfig, environ: Mapping[str, str] | None = None) -> Host:
    """The host this runner measures on: its GPUs are those ``CUDA_VISIBLE_DEVICES`` gives
    the server (``server.env`` first, else the runner's environment ``environ``), all of the
    machine's when unset. Secrets in the command (a token passed as an argument) are ``***``
    in the host type, as everywhere nccl-tune writes."""
    env = os.environ if environ is None else environ
    visible = cfg.server.env.get("CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES"))
    gpus = gpu.describe(visible)
    secrets = secret_values({**env, **cfg.server.env}) + ([cfg.server.api_key] if cfg.server.api_key else [])
    return Host(host_name(), gpus, host_type(gpus, [scrub(a, secrets) for a in cfg.written_command()]))
