"""What a launch asks NCCL to log: one definition for the sweep's launches and the diagnose launch.

NCCL logs nothing unless ``NCCL_DEBUG`` asks; ``NCCL_DEBUG_SUBSYS`` picks the subsystems
(src/debug.cc, ncclDebugInit). ``INIT,ENV,GRAPH`` gives the init-time lines only (the ``set by
environment to`` echoes of src/misc/param.cc, the communicator and channel lines, and NCCL's model
of the machine: its topology, paths and search graphs, src/graph/topo.cc ncclTopoPrint and
src/graph/search.cc ncclTopoPrintGraph, none of them per operation); ``TUNING``
adds NCCL's tuning table (src/graph/tuning.cc) and one line per collective (src/enqueue.cc).
"""

from __future__ import annotations

__all__ = ["DEBUG_ENV", "LOGGING_ENV", "TUNING_DEBUG_ENV"]

#: Added to every sweep launch so NCCL says what it read (init-time subsystems only: no
#: per-operation lines during the probe); :mod:`tuner.sweep.evidence` reads what it logs.
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH"}
#: Added to the baseline environment for the diagnose launch: :data:`DEBUG_ENV` plus TUNING.
TUNING_DEBUG_ENV = {**DEBUG_ENV, "NCCL_DEBUG_SUBSYS": DEBUG_ENV["NCCL_DEBUG_SUBSYS"] + ",TUNING"}
#: Added to every launch beside NCCL's variables unless ``server.env`` sets them: ``PYTHONUNBUFFERED=1``
#: (CPython then unbuffers C stdio in each Python process it starts, so a process that cannot open its
#: NCCL_DEBUG_FILE still writes whole lines: Python/initconfig.c, config_init_stdio) and
#: ``RAY_DEDUP_LOGS=0`` (a Ray driver then prints every worker line, never ``[repeated Nx across
#: cluster]``: ray/_private/ray_logging.py).
LOGGING_ENV = {"PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"}
