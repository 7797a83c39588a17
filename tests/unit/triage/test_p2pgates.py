"""P2P health judged: each gate named where it is, with its documented fix and source, the clean
line, and what could not be read. Host facts from the real fixture trees (tests/fixtures/p2phost/)
and, for what only NVML gives (BAR1, the driver's P2P status), as the reader would fill them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tuner.nccl import parse_log, read_diag
from tuner.server import p2phost
from tuner.triage import AcsPort, HostP2p, P2pHealth, p2p_health
from tuner.triage.p2pgates import CLEAN

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "p2phost"
GIB = 2**30
TWO = ("0000:41:00.0", "0000:61:00.0")


def test_acs_and_iommu_gates_of_the_phb_box():
    health = p2p_health(p2phost.read_host(TREES / "acs_redirect"))
    acs, iommu = health.gates
    assert acs.gate == "ACS redirect (ReqRedir+ CmpltRedir+) on bridges 0000:40:01.1, 0000:60:01.1 between GPUs 0 and 1"
    assert "for b in 0000:40:01.1 0000:60:01.1; do sudo setpci -s $b ECAP_ACS+0x6.w=0000; done" in acs.fix
    assert "`pci=disable_acs_redir=0000:40:01.1;0000:60:01.1`" in acs.fix and "`pci=noacs`" in acs.fix
    assert 'NCCL User Guide, Troubleshooting, "PCI Access Control Services (ACS)"' in acs.source
    assert "NVIDIA/nccl #2079" in acs.source
    assert iommu.gate == "IOMMU in translated mode (DMA-FQ, ivhd0) for GPUs 0, 1"
    assert iommu.fix.startswith("`iommu=pt` on the kernel command line") and "`amd_iommu=off`" in iommu.fix  # AMD-Vi
    lines = health.lines()
    assert lines[0].startswith("P2P gate: ACS redirect") and lines[1].startswith("P2P gate: IOMMU")
    assert CLEAN not in "\n".join(lines)


def test_one_bridge_says_its_own_setpci():
    host = HostP2p(TWO, (AcsPort("0000:40:01.1", 0x0004, True, ((0, 1),)), AcsPort("0000:60:01.1", 0, True, ((0, 1),))))
    [gate] = p2p_health(host).gates
    assert gate.gate == "ACS redirect (ReqRedir+) on bridge 0000:40:01.1 between GPUs 0 and 1"
    assert gate.fix.startswith("`sudo setpci -s 0000:40:01.1 ECAP_ACS+0x6.w=0000` (until reboot)")
    # egress control turns peers away too; SrcValid, TransBlk, UpstreamFwd alone do not
    assert p2p_health(dataclasses.replace(host, bridges=(AcsPort("0000:40:01.1", 0x20, True, ((0, 1),)),))).gates
    assert not p2p_health(dataclasses.replace(host, bridges=(AcsPort("0000:40:01.1", 0x13, True, ((0, 1),)),))).gates


def test_the_clean_switch_box():
    health = p2p_health(p2phost.read_host(TREES / "clean"))
    assert health.gates == ()
    assert health.lines()[0] == CLEAN + " (2 GPUs, ACS redirect off on 2 bridges, IOMMU identity)"
    assert health.lines()[0] == "P2P health: nothing blocks P2P that this host shows (2 GPUs, ACS redirect off on 2 bridges, IOMMU identity)"


def test_unreadable_acs_is_said_with_how_to_read_it():
    lines = p2p_health(p2phost.read_host(TREES / "unreadable")).lines()
    assert lines[0] == CLEAN + " (2 GPUs, IOMMU off)"
    assert ("P2P health: not readable: ACS on 2 bridges above the GPUs (0000:40:01.1, 0000:60:01.1): not readable "
            "(run as root, or `sudo lspci -vvv | grep ACSCtl`)") in lines
    assert "P2P health: not known: BAR1 size and the driver's P2P matrix (NVML not asked: " in "\n".join(lines)


def test_intel_iommu_names_its_own_off_switch():
    host = HostP2p(TWO, iommu_units=("dmar0", "dmar1"), iommu_types={TWO[0]: "DMA", TWO[1]: "DMA"})
    [gate] = p2p_health(host).gates
    assert gate.gate == "IOMMU in translated mode (DMA, dmar0, dmar1) for GPUs 0, 1"
    assert "`intel_iommu=off`" in gate.fix
    assert not p2p_health(dataclasses.replace(host, iommu_types={TWO[0]: "identity", TWO[1]: "identity"})).gates
    assert not p2p_health(dataclasses.replace(host, gpus=TWO[:1], iommu_types={TWO[0]: "DMA"})).gates  # no peer


def test_small_bar1_and_the_drivers_p2p_status():
    host = HostP2p(TWO, bar1_bytes=(256 * 2**20, 32 * GIB), memory_bytes=(24 * GIB, 24 * GIB),
                   p2p_status={(0, 1): "CNS"}, ancestor={(0, 1): "PHB"})
    bar1, status = p2p_health(host).gates
    assert bar1.gate == "small BAR1 (GPU 0 256 MiB of 24 GiB)"
    assert "Resizable BAR on in the BIOS" in bar1.fix and "tinygrad/open-gpu-kernel-modules #13" in bar1.source
    assert status.gate == "the driver reports no P2P (GPUs 0 and 1: CNS (PHB))"
    assert "nvmlDeviceGetP2PStatus" in status.source
    big = dataclasses.replace(host, bar1_bytes=(32 * GIB, 32 * GIB), p2p_status={(0, 1): "OK"})
    health = p2p_health(big)
    assert health.gates == () and health.lines()[0] == CLEAN + " (2 GPUs, IOMMU off, BAR1 32768 MiB)"


def test_nccls_own_check_names_the_pair_and_keeps_its_advice():
    diag = read_diag(parse_log([
        "h:1 NCCL DIAG [INFO] p2p: only 1/2 GPU-to-GPU peer accesses passed verification",
        "h:1 NCCL DIAG [INFO] p2p: read mismatch srcRank=1 srcCudaDev=1 srcNvmlDev=1 dstRank=0 dstCudaDev=0 "
        "dstNvmlDev=0 path=PHB handle=CUMEM_POSIX_FD expected=0x1 got=0x0; check the affected pair with "
        "'nvidia-smi topo -p2p p', then check Linux bare-metal IOMMU mode and PCIe ACS settings"]).diag)
    health = p2p_health(HostP2p(TWO), diag)
    [gate] = health.gates
    assert gate.gate == "NCCL's P2P check: read mismatch from GPU 1 to GPU 0 (ranks 1->0, path PHB)"
    assert "then check Linux bare-metal IOMMU mode and PCIe ACS settings" in gate.fix
    assert "`NCCL_P2P_DISABLE=1`" in gate.fix and "src/diagnostics/p2p.cc" in gate.source
    assert ("P2P health: NCCL's own P2P check (NCCL_RUN_DIAGNOSTICS=1): only 1/2 GPU-to-GPU peer accesses passed "
            "verification") in health.lines()
    ok = read_diag(["[OK]   p2p: verified P2P access in both directions between every GPU pair (2 peer accesses)"])
    assert p2p_health(HostP2p(TWO), ok).lines()[1] == (
        "P2P health: NCCL's own P2P check (NCCL_RUN_DIAGNOSTICS=1): verified P2P access in both directions between "
        "every GPU pair (2 peer accesses)")


def test_no_gpu_and_no_host_say_not_known():
    assert p2p_health(HostP2p(unread=("not known: no NVIDIA GPU on this host's PCI bus (/sys/bus/pci/devices)",))
                      ).lines() == ["P2P health: not known: no NVIDIA GPU on this host's PCI bus (/sys/bus/pci/devices)"]
    assert p2p_health(None).lines() == ["P2P health: not known: the host was not read"]


def test_stored_and_read_back_the_same():
    health = p2p_health(p2phost.read_host(TREES / "unreadable"))
    again = P2pHealth.from_dict(health.to_dict())
    assert again == health and again.lines() == health.lines()
    assert P2pHealth.from_dict({}).lines() == ["P2P health: not known"]
