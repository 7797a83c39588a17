"""Whether a failed launch is plainly the set's, or may be the machine's ("machine-suspect").

The one home of this classification; :func:`tuner.server.failure.crash_failure` asks it and
raises :class:`tuner.errors.MachineFault` for a suspect launch, and the sweep
(:func:`tuner.sweep.trial.relaunch`, :class:`tuner.sweep.Sweep`) then waits, relaunches the same
set once and, if that fails too, relaunches the baseline: only a baseline that runs blames the set.
A launch is machine-suspect when its log (NCCL's WARNs from its own files included) shows:

* a start-up line the server kind knows as the machine's (:meth:`tuner.servers.ServerKind.is_machine`:
  vLLM's memory guard "Free memory on device ... on startup is less than desired GPU memory
  utilization", vllm/v1/worker/gpu_worker.py ``init_device``, measured before NCCL loads;
  SGLang's "The memory capacity is unbalanced. Some GPUs may be occupied by other processes");
* a line of :data:`MACHINE_LINES`, whatever the server: a busy or exclusive-mode device, a
  container name still in use, a container engine that cannot be reached;
* an address already in use (:class:`tuner.server.logtail.CauseKind` ``ADDRESS_IN_USE``; the
  caller waits for the port, :func:`tuner.server.failure.crash_failure`);
* no NCCL line at all (:func:`before_nccl`): the set holds NCCL variables only and no server flag,
  NCCL was asked to log at INFO, and the crash came before NCCL's first line in the log or its
  NCCL_DEBUG_FILE files. NCCL reads its variables once loaded (src/init.cc, ``ncclInit`` ->
  ``initEnv``), so none of them can have caused it. A usage error from a flag of the set stays the set's.

A launcher's own such lines (docker's name conflict, srun's busy nodes) are the launcher's:
``Launcher.machine_lines``, passed in by :func:`tuner.server.failure.crash_failure`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from tuner.servers import KINDS

__all__ = ["MACHINE_LINES", "before_nccl", "machine_line"]

#: ``(pattern, what it is in words)``: lines that are the machine's whatever the server and the set.
MACHINE_LINES: tuple[tuple[re.Pattern[str], str], ...] = (
    # CUDA runtime cudaErrorDevicesUnavailable (46): "all CUDA-capable devices are busy or unavailable"
    # (CUDA 10-11 wording), "CUDA-capable device(s) is/are busy or unavailable" (CUDA 11.x+, as torch
    # prints it); driver API CUDA_ERROR_DEVICE_UNAVAILABLE (cuda.h): an exclusive-process GPU held by another process
    (re.compile(r"all CUDA-capable devices are busy or unavailable|CUDA-capable device\(s\) is/are busy or unavailable"
                r"|\bcudaErrorDevicesUnavailable\b|\bCUDA_ERROR_DEVICE_UNAVAILABLE\b", re.I), "a busy device"),
    # the launcher's own (a container name still in use, no Slurm allocation) are its own:
    # tuner.launchers' Launcher.machine_lines
)


def machine_line(lines: Iterable[str], launcher_lines: Sequence[tuple[str, str]] = ()) -> tuple[str, str] | None:
    """``(what, line)`` for the first of ``lines`` that is the machine's: a server kind's
    machine line (:meth:`tuner.servers.ServerKind.is_machine`, every kind: a wrapper may hide
    which one runs), one of :data:`MACHINE_LINES`, or one of the launcher's
    ``launcher_lines`` (``(regex, what)``: :attr:`tuner.launchers.Launcher.machine_lines`);
    None when no line is."""
    patterns = [*MACHINE_LINES, *((re.compile(p, re.I), what) for p, what in launcher_lines)]
    for line in lines:
        text = line.strip()
        if any(kind.is_machine(text) for kind in KINDS):
            return "a start-up memory guard", text
        for pattern, what in patterns:
            if pattern.search(text):
                return what, text
    return None


def before_nccl(env: Mapping[str, str], flags: Sequence[str], *, nccl_logging: bool, nccl_seen: bool) -> bool:
    """True when a crash cannot be the set's because NCCL never loaded: the set ``env`` is not
    empty and holds NCCL variables only (``NCCL_*``), it adds no server ``flags``, NCCL was
    asked to log at INFO (``nccl_logging``: without it no line proves anything) and it printed
    no line (``nccl_seen`` False). The baseline (no set) is never exonerated this way: a crash
    of the untuned command before NCCL is the command's."""
    return (bool(env) and all(name.startswith("NCCL_") for name in env) and not flags
            and nccl_logging and not nccl_seen)
