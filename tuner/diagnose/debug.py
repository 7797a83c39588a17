"""What a launch asks NCCL to log: one definition for the sweep's launches and the diagnose launch.

NCCL logs nothing unless ``NCCL_DEBUG`` asks; ``NCCL_DEBUG_SUBSYS`` picks the subsystems
(src/debug.cc, ncclDebugInit). ``INIT,ENV`` gives the init-time lines only (the ``set by
environment to`` echoes of src/misc/param.cc, the communicator and channel lines); ``TUNING``
adds NCCL's tuning table (src/graph/tuning.cc) and one line per collective (src/enqueue.cc).
"""

from __future__ import annotations

__all__ = ["DEBUG_ENV", "TUNING_DEBUG_ENV"]

#: Added to every sweep launch so NCCL says what it read (init-time subsystems only: no
#: per-operation lines during the probe); :mod:`tuner.sweep.evidence` reads what it logs.
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}
#: Added to the baseline environment for the diagnose launch: :data:`DEBUG_ENV` plus TUNING.
TUNING_DEBUG_ENV = {**DEBUG_ENV, "NCCL_DEBUG_SUBSYS": DEBUG_ENV["NCCL_DEBUG_SUBSYS"] + ",TUNING"}
