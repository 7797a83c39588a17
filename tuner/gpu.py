"""GPU memory via NVML (nvidia-ml-py), to prove a torn-down server freed its GPUs.

On a machine without NVIDIA GPUs every function degrades to "nothing to check".
"""

from __future__ import annotations

import time


def used_bytes() -> list[int] | None:
    """Used memory per GPU in bytes (NVML ``nvmlDeviceGetMemoryInfo().used``), or None
    when NVML or its driver is absent."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:  # no driver, no library: no GPUs to check
        return None
    try:
        return [int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used)
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def wait_released(before: list[int] | None, timeout_s: float = 60.0,
                  slack_bytes: int = 512 * 1024 * 1024) -> str | None:
    """Wait until each GPU's used memory is back within ``slack_bytes`` of ``before``.

    Returns None when released (or nothing to check), else a message naming the GPUs still
    holding memory after ``timeout_s`` seconds.
    """
    if before is None:
        return None
    deadline = time.monotonic() + timeout_s
    while True:
        now = used_bytes()
        if now is None:
            return None
        held = [(i, n - b) for i, (b, n) in enumerate(zip(before, now, strict=False)) if n - b > slack_bytes]
        if not held:
            return None
        if time.monotonic() > deadline:
            return ", ".join(f"GPU {i} still holds {d / 2**20:.0f} MiB more than before launch" for i, d in held)
        time.sleep(1.0)


def count() -> int | None:
    """Number of GPUs NVML sees, or None when NVML or its driver is absent."""
    used = used_bytes()
    return None if used is None else len(used)
