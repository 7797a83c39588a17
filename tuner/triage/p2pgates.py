"""P2P health: what on this host can block GPU peer-to-peer, each gate named with its documented fix.

The host's facts (:class:`HostP2p`: ACS control on the PCIe bridges above the GPUs, the IOMMU's
mode, BAR1 sizes and the driver's P2P matrix) are read by :mod:`tuner.server.p2phost`; NCCL's own
P2P check (``NCCL DIAG`` lines of a 2.31+ baseline, :func:`tuner.nccl.read_diag`) is the second
witness. :func:`p2p_health` judges both into a :class:`P2pHealth`: one :class:`Gate` per blocker,
what could not be read, and one clean line when nothing blocks.

The gates and their fixes, with their sources:

* ACS redirect (``ReqRedir``, ``CmpltRedir`` or ``EgressCtrl`` set in the ACS Control register
  of a bridge on the path between two GPUs: PCIe Base Spec 6.0 §7.7.8, Linux
  include/uapi/linux/pci_regs.h ``PCI_ACS_RR``/``PCI_ACS_CR``/``PCI_ACS_EC``) sends every peer
  request up to the root complex: "a significant performance reduction or even a hang" (NCCL
  User Guide, Troubleshooting, "PCI Access Control Services (ACS)"). Fixes: ``setpci -s BDF
  ECAP_ACS+0x6.w=0000`` until the next boot, or disabling IO virtualization/VT-d in the BIOS
  (the same section); ``pci=disable_acs_redir=BDF`` on the kernel command line (Linux 5.1+,
  drivers/pci/pci.c ``pci_setup``, which clears exactly those three bits); ``pci=noacs`` (the
  fix of NVIDIA/nccl #2079, an ncclAllReduce deadlock on a PHB box behind AMD GPP bridges).
* An IOMMU that translates the GPUs' DMA (``/sys/kernel/iommu_groups/N/type`` ``DMA`` or
  ``DMA-FQ``; Linux Documentation/ABI/testing/sysfs-kernel-iommu_groups) "can interfere with
  GPU Direct" (the same NCCL section; NCCL's own P2P check says "check Linux bare-metal IOMMU mode
  and PCIe ACS settings", src/diagnostics/p2p.cc). Fixes: ``iommu=pt`` (passthrough for the
  host's own devices: Documentation/admin-guide/kernel-parameters.txt), ``amd_iommu=off`` /
  ``intel_iommu=off`` (NVIDIA/nccl #257: ``intel_iommu=off`` ended an AllReduce hang), or IO
  virtualization off in the BIOS.
* A BAR1 smaller than the GPU's memory (Resizable BAR off): a P2P path that maps peer memory
  through BAR1 cannot map it all (tinygrad/open-gpu-kernel-modules #13: P2P failed at 256 MiB
  BAR1; noonghunna/club-3090 #734: "BAR1 size gates the P2P path"). Fix: Above 4G Decoding and
  Resizable BAR on in the BIOS (a pre-ReBAR VBIOS may need an update, club-3090 #734).
* The driver's own P2P status between two GPUs not ``OK`` (``nvidia-smi topo -p2p r``/``w``:
  CNS, TNS, ...): CUDA will not map the peer at all, and NCCL goes through host memory. The
  NCCL guide's first check ("GPU-to-GPU communication": ``nvidia-smi topo -p2p p``).
* NCCL's own P2P check failing (``p2p: write mismatch``, ``read mismatch``, ``peer-memory import
  failed``...; docs/diagnostics.rst "P2P Check"): the pair and path NCCL names, with NCCL's advice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.nccl import DIAGNOSTICS_VAR, DiagResult

__all__ = [
    "ACS_GATE_BITS",
    "CLEAN",
    "AcsPort",
    "Gate",
    "HostP2p",
    "P2pHealth",
    "acs_words",
    "p2p_health",
]

#: ACS Control register bits (include/uapi/linux/pci_regs.h ``PCI_ACS_*``; PCIe Base Spec 6.0 §7.7.8.3),
#: in lspci's words (``ACSCtl: SrcValid+ TransBlk- ReqRedir+ ...``).
ACS_BITS = (("SrcValid", 0x01), ("TransBlk", 0x02), ("ReqRedir", 0x04), ("CmpltRedir", 0x08),
            ("UpstreamFwd", 0x10), ("EgressCtrl", 0x20), ("DirectTrans", 0x40))
#: The bits that turn a peer request away from its peer: P2P Request Redirect, P2P Completion
#: Redirect, P2P Egress Control (what ``pci=disable_acs_redir`` clears: drivers/pci/pci.c).
ACS_GATE_BITS = 0x04 | 0x08 | 0x20
#: The line said when nothing this host shows blocks P2P.
CLEAN = "P2P health: nothing blocks P2P that this host shows"
#: How to read ACS where the extended config space is not readable.
ACS_UNREADABLE = "not readable (run as root, or `sudo lspci -vvv | grep ACSCtl`)"

_NCCL_ACS = 'NCCL User Guide, Troubleshooting, "PCI Access Control Services (ACS)"'
_MIB = 2**20


def acs_words(ctrl: int) -> str:
    """The ACS Control word ``ctrl`` as lspci prints it: ``SrcValid+ TransBlk- ReqRedir+ ...``."""
    return " ".join(f"{name}{'+' if ctrl & bit else '-'}" for name, bit in ACS_BITS)


@dataclass(frozen=True)
class AcsPort:
    """One PCIe bridge (a root port or a switch port) above at least one GPU: ``bdf``
    (``0000:40:01.1``); ``ctrl`` its ACS Control word (None: no ACS capability, or not
    readable); ``readable``: its extended config space could be read (False without root:
    drivers/pci/pci-sysfs.c ``pci_read_config`` gives others the first 64 bytes only);
    ``pairs``: the GPU pairs (indices in PCI bus order, NVML's) whose peer traffic crosses it."""

    bdf: str
    ctrl: int | None
    readable: bool
    pairs: tuple[tuple[int, int], ...] = ()

    @property
    def redirects(self) -> bool:
        """True when its ACS Control word turns peer requests away (:data:`ACS_GATE_BITS`)."""
        return self.ctrl is not None and bool(self.ctrl & ACS_GATE_BITS)


@dataclass(frozen=True)
class HostP2p:
    """What this host shows about GPU P2P, read by :func:`tuner.server.p2phost.read_host`.

    ``gpus``: the NVIDIA GPUs on the PCI bus (bus ids, PCI bus order: NVML's index order);
    ``bridges``: the bridges above them (:class:`AcsPort`); ``iommu_units``: the IOMMUs the kernel
    runs (``/sys/class/iommu``: ``dmar0`` Intel VT-d, ``ivhd0`` AMD-Vi); ``iommu_types``: each
    GPU's IOMMU domain type (``identity``, ``DMA``, ``DMA-FQ``, ``unmanaged``; absent: no group);
    ``cmdline``: the kernel parameters about the IOMMU or ACS (``iommu=pt``, ``amd_iommu=off``,
    ``pci=noacs``...); ``bar1_bytes``/``memory_bytes`` per GPU and ``p2p_status`` per pair
    (``{(0, 1): "OK"}``, the worse of read and write) and ``ancestor`` (``PHB``...) from NVML;
    ``nvml``: why NVML's facts are not known (``""``: known); ``unread``: what could not be
    read, one phrase each; ``root``: the root the files were read under (``/`` on a real host)."""

    gpus: tuple[str, ...] = ()
    bridges: tuple[AcsPort, ...] = ()
    iommu_units: tuple[str, ...] = ()
    iommu_types: Mapping[str, str] = field(default_factory=dict)
    cmdline: tuple[str, ...] = ()
    bar1_bytes: tuple[int | None, ...] = ()
    memory_bytes: tuple[int | None, ...] = ()
    p2p_status: Mapping[tuple[int, int], str] = field(default_factory=dict)
    ancestor: Mapping[tuple[int, int], str] = field(default_factory=dict)
    nvml: str = ""
    unread: tuple[str, ...] = ()
    root: str = "/"


@dataclass(frozen=True)
class Gate:
    """One thing that blocks (or may block) P2P: ``gate`` what and where (``ACS redirect on
    bridge 0000:40:01.1 between GPUs 0 and 1``), ``effect`` what it does to P2P, ``fix`` the
    documented fix, ``source`` where the fix is documented."""

    gate: str
    effect: str
    fix: str
    source: str

    def line(self) -> str:
        """One line: the gate, its effect, its fix and the source."""
        return f"{self.gate}: {self.effect}. Fix: {self.fix} ({self.source})"

    def to_dict(self) -> dict[str, str]:
        """Plain JSON."""
        return {"gate": self.gate, "effect": self.effect, "fix": self.fix, "source": self.source}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gate:
        """Read :meth:`to_dict`'s JSON back."""
        return cls(str(d.get("gate", "")), str(d.get("effect", "")), str(d.get("fix", "")), str(d.get("source", "")))


@dataclass(frozen=True)
class P2pHealth:
    """The judgement: ``gates`` (one per blocker), ``unread`` (what could not be read, as
    ``not readable: ...``/``not known: ...`` phrases), ``facts`` (one short line of what was
    read: GPUs, IOMMU, ACS, BAR1), ``diag`` (NCCL's own P2P check, one line; ``""``: not run)."""

    gates: tuple[Gate, ...] = ()
    unread: tuple[str, ...] = ()
    facts: str = ""
    diag: str = ""

    def lines(self) -> list[str]:
        """What the dry run and the report show, each line on its own: one ``P2P gate: ...``
        line per gate, else :data:`CLEAN` (when the host was read) or ``P2P health: not known``;
        then NCCL's check and what was not readable, each after ``P2P health: ``."""
        head = ([f"P2P gate: {g.line()}" for g in self.gates]
                or ([CLEAN + f" ({self.facts})"] if self.facts else [] if self.unread else ["P2P health: not known"]))
        return [*head, *(f"P2P health: {x}" for x in (*([self.diag] if self.diag else []), *self.unread))]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (stored in the study: ``StudyInfo.p2p_health``)."""
        return {"gates": [g.to_dict() for g in self.gates], "unread": list(self.unread), "facts": self.facts,
                "diag": self.diag}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> P2pHealth:
        """Read :meth:`to_dict`'s JSON back."""
        return cls(tuple(Gate.from_dict(g) for g in d.get("gates") or ()), tuple(str(u) for u in d.get("unread") or ()),
                   str(d.get("facts", "")), str(d.get("diag", "")))


def _pairs(pairs: Iterable[tuple[int, int]]) -> str:
    said = [f"{a} and {b}" for a, b in pairs]
    return "GPUs " + "; ".join(said) if said else "the GPUs"


def _acs_gates(host: HostP2p) -> list[Gate]:
    """One gate for every bridge whose ACS redirects peer traffic between two GPUs."""
    ports = [p for p in host.bridges if p.redirects and p.pairs]
    if not ports:
        return []
    ctrl = 0
    for p in ports:
        ctrl |= p.ctrl or 0
    bits = " ".join(f"{n}+" for n, b in ACS_BITS if b & ACS_GATE_BITS and ctrl & b)
    bdfs = [p.bdf for p in ports]
    pairs = sorted({pair for p in ports for pair in p.pairs})
    setpci = (f"`sudo setpci -s {bdfs[0]} ECAP_ACS+0x6.w=0000`" if len(bdfs) == 1 else
              f"`for b in {' '.join(bdfs)}; do sudo setpci -s $b ECAP_ACS+0x6.w=0000; done`")
    return [Gate(
        f"ACS redirect ({bits}) on bridge{'s' if len(bdfs) > 1 else ''} {', '.join(bdfs)} between {_pairs(pairs)}",
        "peer requests go up to the root complex, not to the peer: P2P crawls or hangs",
        f"{setpci} (until reboot), or `pci=disable_acs_redir={';'.join(bdfs)}` or `pci=noacs` on the kernel "
        "command line, or ACS / IO virtualization off in the BIOS",
        f"{_NCCL_ACS}; Linux drivers/pci/pci.c pci_setup; NVIDIA/nccl #2079")]


def _iommu_gates(host: HostP2p) -> list[Gate]:
    translated = {bdf: t for bdf, t in host.iommu_types.items() if t in ("DMA", "DMA-FQ")}
    if not translated or len(host.gpus) < 2:
        return []
    units = ", ".join(host.iommu_units) or "an IOMMU"
    kinds = "/".join(sorted(set(translated.values())))
    amd = any(u.startswith("ivhd") for u in host.iommu_units)
    off = "amd_iommu=off" if amd else "intel_iommu=off" if any(u.startswith("dmar") for u in host.iommu_units) \
        else "amd_iommu=off or intel_iommu=off"
    which = ", ".join(str(host.gpus.index(bdf)) if bdf in host.gpus else bdf for bdf in sorted(translated))
    return [Gate(
        f"IOMMU in translated mode ({kinds}, {units}) for GPUs {which}",
        "every peer access goes through the IOMMU (which turns ACS on: drivers/iommu, pci_request_acs): "
        "P2P crawls, fails or hangs",
        f"`iommu=pt` on the kernel command line (passthrough for the host's own devices), or `{off}`, "
        "or IO virtualization (VT-d / AMD-Vi) off in the BIOS",
        f"{_NCCL_ACS}; Linux Documentation/admin-guide/kernel-parameters.txt (iommu=pt); NVIDIA/nccl #257, #2079")]


def _bar1_gates(host: HostP2p) -> list[Gate]:
    small = [(i, b, m) for i, (b, m) in enumerate(zip(host.bar1_bytes, host.memory_bytes, strict=False))
             if b is not None and m is not None and b < m]
    if not small or len(host.bar1_bytes) < 2:  # one GPU has no peer
        return []
    where = ", ".join(f"GPU {i} {b // _MIB} MiB of {m / 2**30:.0f} GiB" for i, b, m in small)
    return [Gate(
        f"small BAR1 ({where})",
        "Resizable BAR is off: a P2P path that maps the peer's memory through BAR1 cannot map it all, "
        "so P2P may fail between these GPUs",
        "Above 4G Decoding and Resizable BAR on in the BIOS (a pre-ReBAR VBIOS may need an update)",
        "tinygrad/open-gpu-kernel-modules #13; noonghunna/club-3090 #734")]


def _status_gates(host: HostP2p) -> list[Gate]:
    bad = {pair: s for pair, s in sorted(host.p2p_status.items()) if s != "OK"}
    if not bad:
        return []
    said = "; ".join(f"GPUs {a} and {b}: {s}" + (f" ({host.ancestor[a, b]})" if (a, b) in host.ancestor else "")
                     for (a, b), s in bad.items())
    return [Gate(
        f"the driver reports no P2P ({said})",
        "CUDA will not map the peer: NCCL goes through host memory (SHM) between them",
        "the gates above where shown; else a platform or driver limit (CNS: chipset, TNS: topology, "
        "GNS: GPU) that no setting of NCCL changes",
        'NVML nvmlDeviceGetP2PStatus (`nvidia-smi topo -p2p r`); NCCL User Guide, Troubleshooting, '
        '"GPU-to-GPU communication"')]


def _diag(results: Sequence[DiagResult]) -> tuple[str, list[Gate]]:
    """NCCL's P2P check: its summary line and one gate per failed direction."""
    if not results:
        return "", []
    summary = next((r for r in results if r.kind in ("ok", "partial")), None)
    head = (f"NCCL's own P2P check ({DIAGNOSTICS_VAR}=1): "
            + (summary.line.split("p2p: ", 1)[-1] if summary is not None else "no summary printed"))
    gates = [Gate(
        f"NCCL's P2P check: {r.what} from GPU {r.src_gpu} to GPU {r.dst_gpu} (ranks {r.src}->{r.dst}, path {r.path})",
        "data written or read over P2P between them was wrong or never arrived",
        (r.advice or "check the pair with `nvidia-smi topo -p2p p`, then the IOMMU mode and ACS")
        + "; until then `NCCL_P2P_DISABLE=1` keeps NCCL off P2P",
        "NCCL src/diagnostics/p2p.cc; docs/diagnostics.rst \"P2P Check\"")
        for r in results if r.kind == "edge"]
    return head, gates


def p2p_health(host: HostP2p | None, diag: Sequence[DiagResult] = ()) -> P2pHealth:
    """Judge ``host`` (None: not read) and NCCL's P2P check ``diag`` (:func:`tuner.nccl.read_diag`
    of a baseline's DIAG lines; empty: not run) into a :class:`P2pHealth`. Gates come in a fixed
    order: ACS, IOMMU, BAR1, the driver's P2P status, NCCL's check."""
    said, diag_gates = _diag(diag)
    if host is None:
        return P2pHealth(tuple(diag_gates), ("not known: the host was not read",), "", said)
    gates = [*_acs_gates(host), *_iommu_gates(host), *_bar1_gates(host), *_status_gates(host), *diag_gates]
    unread = list(host.unread)
    closed = [p.bdf for p in host.bridges if not p.readable]
    if closed:
        unread.append(f"not readable: ACS on {len(closed)} bridge{'s' if len(closed) != 1 else ''} above the GPUs "
                      f"({', '.join(closed[:4])}{', ...' if len(closed) > 4 else ''}): {ACS_UNREADABLE}")
    if host.nvml and host.gpus:
        unread.append(f"not known: BAR1 size and the driver's P2P matrix ({host.nvml})")
    return P2pHealth(tuple(gates), tuple(unread), _facts(host), said)


def _facts(host: HostP2p) -> str:
    """One short line of what was read (the clean line's parenthesis)."""
    if not host.gpus:
        return ""
    parts = [f"{len(host.gpus)} GPU{'s' if len(host.gpus) != 1 else ''}"]
    readable = [p for p in host.bridges if p.readable]
    if readable:
        parts.append(f"ACS redirect off on {len(readable)} bridge{'s' if len(readable) != 1 else ''}")
    types = sorted(set(host.iommu_types.values()))
    parts.append(f"IOMMU {'/'.join(types)}" if types else "IOMMU off" if not host.iommu_units else "IOMMU on")
    bar1 = [b for b in host.bar1_bytes if b is not None]
    if bar1:
        parts.append(f"BAR1 {min(bar1) // _MIB} MiB" + (" or more" if len(set(bar1)) > 1 else ""))
    return ", ".join(parts)
