"""Checks before the first launch: what can be found wrong in seconds is not found after a
45-minute ``ready_timeout_s``.

Each check returns a sentence or None; :func:`problems` gathers them all so one run reports
every one. Refused: a command that passes another port than ``server.port``, a local model path
that does not exist, GPUs named in ``CUDA_VISIBLE_DEVICES`` that NVML does not see, too little
free disk for the logs. Only warned (:func:`warnings`): a command with neither ``{port}`` nor
the port number (the server may default to it; the launcher stops at once when its log shows it
listening elsewhere).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from tuner.errors import InputError
from tuner.inputs.config import ExperimentConfig, ServerConfig
from tuner.server import gpu
from tuner.server.logpump import file_bound

__all__ = [
    "LOG_FILES_PER_NIGHT",
    "MODEL_FLAGS",
    "check",
    "disk_problem",
    "gpu_problem",
    "model_path_problem",
    "port_problem",
    "port_warning",
    "problems",
    "warnings",
]

#: Flags whose value is a model path for vLLM (``vllm serve MODEL``, ``--model``) and SGLang
#: (``--model-path``); vLLM: vllm/entrypoints/cli/serve.py, SGLang: sglang/srt/server_args.py.
MODEL_FLAGS = ("--model", "--model-path", "--tokenizer")
#: Free disk wanted for a night of logs: a few trial logs, each at most its bound
#: (:func:`tuner.server.logpump.file_bound`: the cap in bytes, long lines and all).
LOG_FILES_PER_NIGHT = 4


def port_problem(server: ServerConfig) -> str | None:
    """Why the server would not listen on ``server.port``, or None when its argv says it will."""
    if any("{port}" in a for a in server.command):
        return None
    argv = server.argv()
    for i, arg in enumerate(argv):
        if arg in ("--port", "-p") and i + 1 < len(argv):
            if argv[i + 1] != str(server.port):
                return (f"server.command passes {arg} {argv[i + 1]}, but server.port is {server.port}: "
                        "nccl-tune would wait for a server that listens elsewhere; write \"{port}\" in the "
                        "command")
            return None
        if arg.startswith("--port=") and arg.split("=", 1)[1] != str(server.port):
            return f"server.command passes {arg}, but server.port is {server.port}; write \"--port={{port}}\""
        if arg.startswith("--port="):
            return None
    return None


def port_warning(server: ServerConfig) -> str | None:
    """A command with neither ``{port}`` nor the port number: it may listen on its default."""
    if any("{port}" in a for a in server.command) or str(server.port) in " ".join(server.argv()):
        return None
    return (f"server.command has neither \"{{port}}\" nor the port {server.port}: unless the server listens "
            "there by default, write \"--port\", \"{port}\" in the command")


def model_path_problem(server: ServerConfig) -> str | None:
    """A model given as a local path (``/``, ``~``, ``./``) that does not exist."""
    argv = server.argv()
    candidates = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in MODEL_FLAGS]
    if len(argv) > 2 and argv[1] == "serve":  # vllm serve MODEL
        candidates.append(argv[2])
    for path in candidates:
        if re.match(r"^(/|\./|\.\./)", path) and not Path(path).exists():
            return f"the model path {path} in server.command does not exist"
    return None


def gpu_problem(server: ServerConfig, environ: dict[str, str] | None = None) -> str | None:
    """GPUs named in CUDA_VISIBLE_DEVICES (server.env, else the runner's) that NVML does not
    see; None without NVML or with UUID/MIG names (not checked)."""
    env = {**(environ if environ is not None else os.environ), **server.env}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    count = gpu.count()
    if visible is None or count is None:
        return None
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(v.isdigit() for v in wanted):
        return None
    missing = [v for v in wanted if int(v) >= count]
    if missing:
        return f"CUDA_VISIBLE_DEVICES names GPU {', '.join(missing)}, but this host has {count} GPU(s)"
    return None


def disk_problem(server: ServerConfig, results: Path) -> str | None:
    """Less free disk under ``results`` (or its nearest existing parent: nothing is created
    here) than a few capped server logs need."""
    where = results.absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    need = LOG_FILES_PER_NIGHT * file_bound(server.log_max_bytes)
    free = shutil.disk_usage(where).free
    if free < need:
        return (f"only {free / 2**20:.0f} MiB free under {results}; the server logs may need "
                f"{need / 2**20:.0f} MiB (lower server.log_max_bytes or free space)")
    return None


def problems(cfg: ExperimentConfig, results: Path) -> list[InputError]:
    """Every problem the checks above find, as input errors naming the file and key (empty: go
    ahead)."""
    file, server = str(cfg.path), cfg.server
    found = [
        ("server.command", server.command, "a command that listens on server.port", port_problem(server)),
        ("server.command", server.command, "an existing local model path, or a hub model id", model_path_problem(server)),
        ("server.env.CUDA_VISIBLE_DEVICES", server.env.get("CUDA_VISIBLE_DEVICES"), "GPU indices this host has",
         gpu_problem(server)),
        ("server.log_max_bytes", server.log_max_bytes, "a cap the free disk can hold", disk_problem(server, results)),
    ]
    return [InputError(file, key, list(value) if isinstance(value, tuple) else value, accepted, why)
            for key, value, accepted, why in found if why]


def check(cfg: ExperimentConfig, results: Path) -> None:
    """Raise InputError (exit 2) with every problem :func:`problems` finds; writes nothing, so
    the CLI runs it before a storage or results folder exists, ``--dry-run`` included."""
    found = problems(cfg, results)
    if found:
        raise InputError.combine(found)


def warnings(server: ServerConfig) -> list[str]:
    """Things worth saying before the wait that do not stop the sweep."""
    return [w for w in (port_warning(server),) if w]
