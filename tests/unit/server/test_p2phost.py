"""The host's P2P facts read from real sysfs/procfs trees (tests/fixtures/p2phost/, made by its
make.py) and from files written here: ACS control parsed from config bytes, the bridges between
GPU pairs, the IOMMU's mode per GPU, the kernel's parameters, and NVML's absence on this machine."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tests.fixtures.p2phost.make import config, device
from tuner.server import p2phost
from tuner.triage import acs_words

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "p2phost"


def test_the_acs_control_word_is_found_by_walking_the_extended_list():
    acs_control = p2phost.acs_control
    assert acs_control(config(0x1022, 0x001D)) == 0x001D  # after an AER capability
    assert acs_words(0x001D) == ("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- "
                                 "DirectTrans-")
    assert acs_control(config(0x1022, 0x0000)) == 0
    assert acs_control(config(0x10DE, None)) is None  # no extended capability at all
    assert acs_control(config(0x1022, 0x001D, 256)) is None  # no extended space
    assert acs_control(b"") is None


def test_a_list_that_loops_or_reads_all_ones_ends():
    data = bytearray(4096)
    struct.pack_into("<I", data, 0x100, 0x0001 | (0x100 << 20))  # AER whose next is itself
    assert p2phost.acs_control(bytes(data)) is None
    struct.pack_into("<I", data, 0x100, 0xFFFFFFFF)  # a device gone from the bus reads all ones
    assert p2phost.acs_control(bytes(data)) is None


def test_acs_redirect_tree_gpus_bridges_and_iommu():
    host = p2phost.read_host(TREES / "acs_redirect")
    assert host.gpus == ("0000:41:00.0", "0000:61:00.0")
    assert [(b.bdf, b.ctrl, b.readable, b.pairs) for b in host.bridges] == [
        ("0000:40:01.1", 0x001D, True, ((0, 1),)), ("0000:60:01.1", 0x001D, True, ((0, 1),))]
    assert all(b.redirects for b in host.bridges)
    assert host.iommu_units == ("ivhd0",)
    assert dict(host.iommu_types) == {"0000:41:00.0": "DMA-FQ", "0000:61:00.0": "DMA-FQ"}
    assert host.cmdline == ()  # nothing about the IOMMU or ACS on this kernel's command line
    assert "NVML not asked" in host.nvml and host.bar1_bytes == ()  # a fixture root is not this host


def test_clean_tree_a_bridge_above_both_gpus_is_not_crossed():
    host = p2phost.read_host(TREES / "clean")
    assert host.gpus == ("0000:03:00.0", "0000:04:00.0")
    # the root port 00:01.0 and the switch's upstream port are above both: their ACS never sees the peer traffic
    assert [(b.bdf, b.ctrl) for b in host.bridges] == [("0000:02:08.0", 0x0000), ("0000:02:10.0", 0x0001)]
    assert not any(b.redirects for b in host.bridges)  # SrcValid alone redirects nothing
    assert dict(host.iommu_types) == {"0000:03:00.0": "identity", "0000:04:00.0": "identity"}
    assert host.cmdline == ("intel_iommu=on", "iommu=pt") and host.iommu_units == ("dmar0",)


def test_unreadable_tree_is_what_a_reader_without_root_gets():
    host = p2phost.read_host(TREES / "unreadable")
    assert [(b.bdf, b.readable, b.ctrl) for b in host.bridges] == [("0000:40:01.1", False, None),
                                                                   ("0000:60:01.1", False, None)]
    assert host.iommu_units == () and dict(host.iommu_types) == {} and host.cmdline == ("amd_iommu=off",)


@pytest.mark.parametrize("line, kept", [
    ("BOOT_IMAGE=/vmlinuz ro quiet", ()),
    ("ro iommu=pt amd_iommu=on", ("iommu=pt", "amd_iommu=on")),
    ("ro intel_iommu=off iommu=off", ("intel_iommu=off", "iommu=off")),
    ("ro pci=noacs pcie_acs_override=downstream", ("pci=noacs", "pcie_acs_override=downstream")),
    ("ro pci=disable_acs_redir=0000:40:01.1;0000:60:01.1 pci=realloc", ("pci=disable_acs_redir=0000:40:01.1;0000:60:01.1",)),
    ("ro quiet -- iommu=pt", ()),  # after "--": the init's arguments, not the kernel's
])
def test_kernel_parameters_about_the_iommu_and_acs(tmp_path, line, kept):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text(line + "\n")
    assert p2phost.read_host(tmp_path).cmdline == kept


def test_an_empty_root_says_what_it_could_not_read(tmp_path):
    host = p2phost.read_host(tmp_path)
    assert host.gpus == () and host.bridges == ()
    assert host.unread == ("not readable: the PCI devices (no /sys/bus/pci/devices)",
                           "not readable: /proc/cmdline (the kernel's IOMMU and ACS parameters)")


def test_a_group_without_a_type_file_is_an_unknown_mode(tmp_path):
    device(tmp_path, "pci0000:00/0000:00:01.0", 0x8086, "0x060400", config(0x8086, 0))
    for n, gpu in enumerate(("0000:01:00.0", "0000:02:00.0")):
        where = f"pci0000:00/0000:00:01.0/{gpu}" if n == 0 else f"pci0000:00/{gpu}"
        device(tmp_path, where, 0x10DE, "0x030000", config(0x10DE, None), group=7 + n)  # groups, no type (Linux < 5.11)
    host = p2phost.read_host(tmp_path)
    assert host.gpus == ("0000:01:00.0", "0000:02:00.0")
    assert [(b.bdf, b.pairs) for b in host.bridges] == [("0000:00:01.0", ((0, 1),))]  # one GPU below it, one beside
    assert dict(host.iommu_types) == {}
    assert any(u.startswith("not known: the IOMMU mode of 0000:01:00.0, 0000:02:00.0") for u in host.unread)


def test_other_vendors_and_classes_are_not_gpus(tmp_path):
    device(tmp_path, "pci0000:00/0000:00:02.0", 0x10DE, "0x040300", config(0x10DE, None))  # an NVIDIA audio function
    device(tmp_path, "pci0000:00/0000:00:03.0", 0x1002, "0x030000", config(0x1002, None))  # another vendor's GPU
    device(tmp_path, "pci0000:00/0000:00:04.0", 0x10DE, "0x030200", config(0x10DE, None))
    assert p2phost.read_host(tmp_path).gpus == ("0000:00:04.0",)


def test_the_root_comes_from_the_variable_for_tests(monkeypatch):
    monkeypatch.setenv(p2phost.ROOT_VAR, str(TREES / "clean"))
    assert p2phost.read_host().gpus == ("0000:03:00.0", "0000:04:00.0")


def test_this_host_is_read_without_nvml_and_without_raising():
    monkey = os.environ.pop(p2phost.ROOT_VAR, None)
    try:
        host = p2phost.read_host()
    finally:
        if monkey is not None:
            os.environ[p2phost.ROOT_VAR] = monkey
    assert host.root == "/"
    if not host.gpus:  # this machine: no NVIDIA GPU, no NVML
        assert "not known: no NVIDIA GPU on this host's PCI bus (/sys/bus/pci/devices)" in host.unread
        assert host.nvml == "no NVML here: no NVIDIA driver or library" and host.bar1_bytes == ()
