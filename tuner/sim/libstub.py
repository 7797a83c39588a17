"""A stand-in NCCL library the simulated server maps, so the tool's reading of ``/proc/PID/maps``
(which file, its version, its GNU build ID) is tested on a real mapping of a real ELF file.

A real server's processes map ``libnccl.so.2`` (or ``libnccl.so.2.21.5``, a wheel's
``nvidia/nccl/lib/libnccl.so.2``). Here a small real shared object of this system that carries
a build ID (zlib's, found as the dynamic loader finds it: ``ctypes.util.find_library``; this
Python's executable where there is none) is copied to a folder of its own as
``libnccl.so.<the profile's NCCL version>`` and mapped read-only with :mod:`mmap`: the kernel
lists the mapping with that path (proc(5), ``/proc/PID/maps``). Nothing of it is executed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import shutil
import sys
import tempfile

__all__ = ["map_stand_in"]

_KEPT: list[mmap.mmap] = []  # the mappings live as long as the process


def _real_library() -> str:
    """The path of a small real ELF shared object with a build ID (zlib's), else this Python."""
    name = ctypes.util.find_library("z")
    if name:
        try:
            ctypes.CDLL(name)
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    path = line.split(maxsplit=5)[5].strip() if len(line.split(maxsplit=5)) == 6 else ""
                    if os.path.basename(path).startswith("libz.so") and os.path.exists(path):
                        return path
        except OSError:
            pass
    return os.path.realpath(sys.executable)


def map_stand_in(version: str) -> str | None:
    """Map a copy of a real shared object named ``libnccl.so.<version>``; returns its path, or
    None when no copy could be made (the simulated server runs on without it). The copy lives in
    one folder per user and version under the temporary folder (made once, replaced atomically),
    so every simulated night of one NCCL version maps the same file, as a real box does."""
    try:
        folder = os.path.join(tempfile.gettempdir(), f"nccl-sim-lib-{os.getuid()}", version)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"libnccl.so.{version}")
        if not os.path.exists(path):
            part = f"{path}.{os.getpid()}.part"
            shutil.copyfile(_real_library(), part)
            os.replace(part, path)
        with open(path, "rb") as fh:
            _KEPT.append(mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ))
        return path
    except (OSError, ValueError):
        return None
