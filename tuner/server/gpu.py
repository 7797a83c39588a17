"""GPUs via NVML (nvidia-ml-py): memory, to prove a torn-down server freed its GPUs, the
host's GPU model, count and driver for the trial records (:func:`describe`), and which GPUs a
``CUDA_VISIBLE_DEVICES`` names and what already computes on them (:func:`selected_uuids`,
:func:`compute_processes`), so that two workers never share a GPU; what NVML says of P2P between
them (BAR1 sizes, the common-ancestor and P2P-status matrices: :func:`p2p_facts`).

On a machine without NVIDIA GPUs every function degrades to "nothing to check".
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tuner.errors import Interrupted

__all__ = [
    "NO_GPU",
    "P2P_WORDS",
    "TOPOLOGY_WORDS",
    "P2pFacts",
    "compute_processes",
    "count",
    "describe",
    "p2p_facts",
    "selected_uuids",
    "used_bytes",
    "wait_released",
]

_T = TypeVar("_T")

#: ``describe()["gpu"]`` on a machine where NVML (the driver) is absent.
NO_GPU = "no NVIDIA GPU (NVML not available)"


def used_bytes() -> list[int] | None:
    """Used memory per GPU in bytes (NVML ``nvmlDeviceGetMemoryInfo().used``), or None
    when NVML or its driver is absent."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Interrupted:
        raise
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


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _selected(total: int, uuids: list[str], visible: str | None) -> list[int]:
    """Indices of the GPUs ``visible`` (``CUDA_VISIBLE_DEVICES``: indices or UUID prefixes,
    comma-separated) names; every GPU when it is None or names one that does not exist (then
    the count says what the machine has rather than a guess)."""
    if visible is None:
        return list(range(total))
    chosen: list[int] = []
    for item in (v.strip() for v in visible.split(",") if v.strip()):
        if item.isdigit() and int(item) < total:
            chosen.append(int(item))
            continue
        match = [i for i, u in enumerate(uuids) if u.startswith(item) or u.startswith(f"GPU-{item}")]
        if len(match) != 1:
            return list(range(total))
        chosen.append(match[0])
    return chosen


def describe(visible: str | None = None) -> dict[str, Any]:
    """The GPUs a server on this host gets, from NVML: ``{"gpu": model, "gpu_count": n,
    "driver": version}``; ``visible`` (a ``CUDA_VISIBLE_DEVICES`` value) narrows them to those it
    names (NVML itself sees every GPU). Models of mixed boxes are joined with `` + `` in count
    order. Without NVML: ``gpu`` is :data:`NO_GPU`, ``gpu_count`` 0, ``driver`` empty."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Interrupted:
        raise
    except Exception:  # no driver, no library: say so rather than guess
        return {"gpu": NO_GPU, "gpu_count": 0, "driver": ""}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
        names = [_text(pynvml.nvmlDeviceGetName(handles[i])) for i in _selected(len(handles), uuids, visible)]
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    except Interrupted:
        raise
    except Exception as exc:  # a driver that answers init but not the queries
        return {"gpu": f"unknown (NVML: {exc})", "gpu_count": 0, "driver": ""}
    finally:
        pynvml.nvmlShutdown()
    models = " + ".join(name for name, _ in Counter(names).most_common()) or "no GPU selected"
    return {"gpu": models, "gpu_count": len(names), "driver": driver}


def _query(ask: Callable[[Any], _T]) -> _T | None:
    """``ask(pynvml)`` between nvmlInit and nvmlShutdown; None when NVML, its driver or the
    query fails (no GPUs to check)."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Interrupted:
        raise
    except Exception:  # no driver, no library
        return None
    try:
        return ask(pynvml)
    except Interrupted:
        raise
    except Exception:  # a driver that answers init but not the query
        return None
    finally:
        pynvml.nvmlShutdown()


def _is_mig(visible: str | None) -> bool:
    return visible is not None and any(v.strip().upper().startswith("MIG-") for v in visible.split(","))


def _chosen(nvml: Any, visible: str | None) -> list[tuple[int, str, Any]]:
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
    return [(i, uuids[i], handles[i]) for i in _selected(len(handles), uuids, visible)]


def selected_uuids(visible: str | None) -> list[str] | None:
    """NVML's UUIDs (``GPU-5f3c...``) of the GPUs ``visible`` (a ``CUDA_VISIBLE_DEVICES`` value;
    None: unset, every GPU) names, indices read in NVML's order (PCI bus order: CUDA's own with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``); a name that matches no GPU counts as every GPU. None
    without NVML, and for MIG instance names (``MIG-...``), which NVML's GPU list does not hold."""
    if _is_mig(visible):
        return None
    return _query(lambda nvml: [uuid for _, uuid, _ in _chosen(nvml, visible)])


@dataclass(frozen=True)
class ComputeProcess:
    """One compute process NVML lists on a GPU (``nvmlDeviceGetComputeRunningProcesses``):
    ``index`` and ``uuid`` of the GPU, ``pid`` as NVML reports it (the host's pid namespace),
    ``used_bytes`` of GPU memory (None where NVML cannot say)."""

    index: int
    uuid: str
    pid: int
    used_bytes: int | None


def compute_processes(visible: str | None) -> list[ComputeProcess] | None:
    """The compute processes on the GPUs ``visible`` names (as :func:`selected_uuids` reads it);
    None without NVML or for MIG instance names."""
    if _is_mig(visible):
        return None

    def ask(nvml: Any) -> list[ComputeProcess]:
        return [ComputeProcess(i, uuid, int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for i, uuid, handle in _chosen(nvml, visible)
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]

    return _query(ask)


#: nvidia-smi's words for NVML's common ancestor of two GPUs (``nvmlGpuTopologyLevel_t``, nvml.h:
#: INTERNAL 0, SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30, NODE 40, SYSTEM 50), as ``nvidia-smi topo -m`` prints them.
TOPOLOGY_WORDS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: nvidia-smi's words for NVML's P2P status (``nvmlGpuP2PStatus_t``, nvml.h; ``nvidia-smi topo -p2p``'s legend):
#: OK, chipset not supported, GPU not supported, topology not supported, disabled by regkey, not supported, unknown.
P2P_WORDS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DISABLED", 5: "NS", 6: "U"}


@dataclass(frozen=True)
class P2pFacts:
    """What NVML says about P2P between the host's GPUs, in NVML's index order (PCI bus order):
    ``bus_ids`` (``0000:41:00.0``, lower case), ``bar1_bytes`` and ``memory_bytes`` per GPU
    (``nvmlDeviceGetBAR1MemoryInfo().bar1Total``, ``nvmlDeviceGetMemoryInfo().total``; None where
    NVML would not say), and per pair ``(i, j)``, i < j: ``ancestor`` (:data:`TOPOLOGY_WORDS`,
    ``nvmlDeviceGetTopologyCommonAncestor``) and ``read``/``write`` (:data:`P2P_WORDS`,
    ``nvmlDeviceGetP2PStatus`` with ``NVML_P2P_CAPS_INDEX_READ``/``_WRITE``)."""

    bus_ids: tuple[str, ...]
    bar1_bytes: tuple[int | None, ...]
    memory_bytes: tuple[int | None, ...]
    ancestor: dict[tuple[int, int], str]
    read: dict[tuple[int, int], str]
    write: dict[tuple[int, int], str]


def _or_none(ask: Callable[..., Any], *args: Any) -> int | None:
    """``int(ask(*args))``, or None where the driver does not answer it."""
    try:
        return int(ask(*args))
    except Interrupted:
        raise
    except Exception:  # one query a driver does not answer (a vGPU, an old GPU): that fact unknown
        return None


def p2p_facts() -> P2pFacts | None:
    """:class:`P2pFacts` of every GPU NVML sees; None without NVML (no driver, no library)."""
    def ask(nvml: Any) -> P2pFacts:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        bus = tuple(_text(nvml.nvmlDeviceGetPciInfo(h).busId).lower()[-12:] for h in handles)
        bar1 = tuple(_or_none(lambda h: nvml.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total, h) for h in handles)
        memory = tuple(_or_none(lambda h: nvml.nvmlDeviceGetMemoryInfo(h).total, h) for h in handles)
        ancestor: dict[tuple[int, int], str] = {}
        read: dict[tuple[int, int], str] = {}
        write: dict[tuple[int, int], str] = {}
        for i, a in enumerate(handles):
            for j in range(i + 1, len(handles)):
                b = handles[j]
                level = _or_none(nvml.nvmlDeviceGetTopologyCommonAncestor, a, b)
                if level is not None:
                    ancestor[i, j] = TOPOLOGY_WORDS.get(level, str(level))
                for caps, into in ((nvml.NVML_P2P_CAPS_INDEX_READ, read), (nvml.NVML_P2P_CAPS_INDEX_WRITE, write)):
                    status = _or_none(nvml.nvmlDeviceGetP2PStatus, a, b, caps)
                    if status is not None:
                        into[i, j] = P2P_WORDS.get(status, str(status))
        return P2pFacts(bus, bar1, memory, ancestor, read, write)

    return _query(ask)
