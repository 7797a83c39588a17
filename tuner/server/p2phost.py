"""What this host shows about GPU peer-to-peer, read from sysfs, procfs and NVML before the night.

:func:`read_host` returns a :class:`tuner.triage.HostP2p` (judged by :func:`tuner.triage.p2p_health`):

* the NVIDIA GPUs on the PCI bus (``/sys/bus/pci/devices/*``: ``vendor`` 0x10de, ``class``
  0x03xxxx), in PCI bus order (NVML's index order), and the bridges above each (the BDF parts of
  the device's sysfs path, ``../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0``);
* each bridge's ACS Control word from its ``config`` file: the extended capability list from
  offset 0x100, each header ``ID[15:0] version[19:16] next[31:20]`` (PCIe Base Spec 6.0 §7.6.3;
  include/uapi/linux/pci_regs.h ``PCI_EXT_CAP_ID``/``PCI_EXT_CAP_NEXT``), the ACS one
  ``PCI_EXT_CAP_ID_ACS`` = 0x0D with its control register at ``PCI_ACS_CTRL`` = +6. Without root
  the kernel gives the first 64 bytes only (drivers/pci/pci-sysfs.c, ``pci_read_config``): then
  the bridge is "not readable";
* the IOMMU: ``/sys/class/iommu/*`` (the units the kernel runs), each GPU's ``iommu_group`` link and
  ``/sys/kernel/iommu_groups/N/type`` (``identity`` = passthrough, ``DMA``/``DMA-FQ`` = translated;
  Documentation/ABI/testing/sysfs-kernel-iommu_groups, Linux 5.11+), and ``/proc/cmdline``'s
  ``iommu=``, ``amd_iommu=``, ``intel_iommu=``, ``pci=noacs``/``disable_acs_redir=`` and
  ``pcie_acs_override=``;
* from NVML (:func:`tuner.server.gpu.p2p_facts`): BAR1 and memory sizes, the driver's P2P status
  and common ancestor per pair; absent NVML leaves them "not known".

Every path is read under a root (``/`` on the host). :data:`ROOT_VAR` names another root, for
tests only: a fixture tree of real files (tests/fixtures/p2phost/), NVML then not asked.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from tuner.server import gpu
from tuner.triage import AcsPort, HostP2p

__all__ = ["ROOT_VAR", "acs_control", "read_host"]

#: Tests only: read sysfs and procfs under this folder instead of ``/`` (and leave NVML out).
ROOT_VAR = "NCCL_TUNE_HOST_ROOT"

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
#: include/uapi/linux/pci_regs.h: PCI_EXT_CAP_ID_ACS, PCI_ACS_CTRL; the extended space starts at PCI_CFG_SPACE_SIZE.
_EXT_CAP_ID_ACS = 0x0D
_ACS_CTRL = 6
_CFG_SPACE_SIZE = 256
#: What pci_read_config gives a reader without CAP_SYS_ADMIN (drivers/pci/pci-sysfs.c).
_UNPRIVILEGED_BYTES = 64
_NVIDIA = "0x10de"
#: Kernel parameters about the IOMMU or ACS (Documentation/admin-guide/kernel-parameters.txt).
_CMDLINE_KEYS = ("iommu=", "amd_iommu=", "intel_iommu=", "pcie_acs_override=")


def acs_control(config: bytes) -> int | None:
    """The ACS Control word (16 bits) in the PCI config space ``config`` (the bytes of a sysfs
    ``config`` file), or None when it has no ACS capability (or no extended space). Walks the
    extended capability list from 0x100, each offset once (a looping list ends)."""
    seen: set[int] = set()
    offset = _CFG_SPACE_SIZE
    while offset >= _CFG_SPACE_SIZE and offset not in seen and offset + 8 <= len(config):
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):  # no capability here, or the device is gone
            return None
        if header & 0xFFFF == _EXT_CAP_ID_ACS:
            return int.from_bytes(config[offset + _ACS_CTRL:offset + _ACS_CTRL + 2], "little")
        offset = (header >> 20) & 0xFFC
    return None


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _chain(entry: Path) -> list[str]:
    """The bridges above a device, top first: the BDF parts of its sysfs path."""
    try:
        target = os.readlink(entry)
    except OSError:
        return []
    parts = [p for p in Path(target).parts if _BDF.match(p)]
    return parts[:-1]


def _port(devices: Path, bdf: str, pairs: tuple[tuple[int, int], ...]) -> AcsPort:
    path = devices / bdf / "config"
    try:
        data = path.read_bytes()
        size = path.stat().st_size
    except OSError:
        return AcsPort(bdf, None, False, pairs)
    if len(data) <= _UNPRIVILEGED_BYTES or len(data) < min(size, 4096):  # the header only: not root
        return AcsPort(bdf, None, False, pairs)
    return AcsPort(bdf, acs_control(data), True, pairs)


def _crossed(a: list[str], b: list[str]) -> list[str]:
    """The bridges peer traffic between two devices crosses: each one's below their lowest common bridge."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return a[k:] + b[k:]


def _iommu(root: Path, devices: Path, gpus: list[str]) -> tuple[tuple[str, ...], dict[str, str], list[str]]:
    units_dir = root / "sys/class/iommu"
    units = tuple(sorted(p.name for p in units_dir.iterdir())) if units_dir.is_dir() else ()
    types: dict[str, str] = {}
    untyped = []
    for bdf in gpus:
        try:
            group = Path(os.readlink(devices / bdf / "iommu_group")).name
        except OSError:
            continue  # no group: the IOMMU does not manage it
        kind = _text(root / "sys/kernel/iommu_groups" / group / "type")
        if kind:
            types[bdf] = kind
        else:
            untyped.append(bdf)
    unread = [f"not known: the IOMMU mode of {', '.join(untyped)} (no /sys/kernel/iommu_groups/N/type before "
              "Linux 5.11; `iommu=pt` on the kernel command line means passthrough)"] if untyped else []
    return units, types, unread


def _cmdline(root: Path) -> tuple[tuple[str, ...], list[str]]:
    text = _text(root / "proc/cmdline")
    if text is None:
        return (), ["not readable: /proc/cmdline (the kernel's IOMMU and ACS parameters)"]
    words = text.split(" -- ")[0].split()  # after "--": the init's arguments, not the kernel's
    kept = [w for w in words if w.startswith(_CMDLINE_KEYS)
            or (w.startswith("pci=") and any(k in w for k in ("noacs", "disable_acs_redir", "config_acs")))]
    return tuple(kept), []


def _nvml_facts(host: HostP2p) -> HostP2p:
    """``host`` with NVML's facts added (:func:`tuner.server.gpu.p2p_facts`), or why they are not known."""
    facts = gpu.p2p_facts()
    if facts is None:
        return dataclasses.replace(host, nvml="no NVML here: no NVIDIA driver or library")
    status = {}
    for pair in set(facts.read) | set(facts.write):
        words = [w for w in (facts.read.get(pair), facts.write.get(pair)) if w is not None]
        status[pair] = next((w for w in words if w != "OK"), "OK")  # the worse of read and write
    return dataclasses.replace(host, gpus=host.gpus or facts.bus_ids, bar1_bytes=facts.bar1_bytes,
                               memory_bytes=facts.memory_bytes, ancestor=dict(facts.ancestor), p2p_status=status)


def read_host(root: Path | None = None, *, nvml: bool | None = None) -> HostP2p:
    """Read this host's P2P facts (module docstring) under ``root`` (default: :data:`ROOT_VAR`'s
    folder, else ``/``); ``nvml``: ask NVML too (default: only when reading the real ``/``).
    Never raises for a missing or unreadable file: what is not readable is said in ``unread``."""
    root = root if root is not None else Path(os.environ.get(ROOT_VAR) or "/")
    real = root.resolve() == Path("/")
    ask_nvml = real if nvml is None else nvml
    devices = root / "sys/bus/pci/devices"
    unread: list[str] = []
    gpus: list[str] = []
    if devices.is_dir():
        gpus = sorted(d.name for d in devices.iterdir()
                      if _text(d / "vendor") == _NVIDIA and (_text(d / "class") or "").startswith("0x03"))
    else:
        unread.append("not readable: the PCI devices (no /sys/bus/pci/devices)")
    chains = {g: _chain(devices / g) for g in gpus}
    crossing: dict[str, list[tuple[int, int]]] = {}
    for i, a in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            for bdf in _crossed(chains[a], chains[gpus[j]]):
                crossing.setdefault(bdf, []).append((i, j))
    bridges = tuple(_port(devices, bdf, tuple(pairs)) for bdf, pairs in sorted(crossing.items())
                    if (devices / bdf).exists())
    units, types, untyped = _iommu(root, devices, gpus)
    cmdline, no_cmdline = _cmdline(root)
    host = HostP2p(tuple(gpus), bridges, units, types, cmdline, root=str(root),
                   nvml="" if ask_nvml else f"NVML not asked: {root} is not this host's root")
    if ask_nvml:
        host = _nvml_facts(host)
    if not host.gpus and not unread:
        unread.append("not known: no NVIDIA GPU on this host's PCI bus (/sys/bus/pci/devices)")
    return dataclasses.replace(host, unread=tuple(unread + untyped + no_cmdline))
