"""The NCCL library file: its version and GNU build ID, read from real ELF files of this system."""

from __future__ import annotations

import ctypes.util
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tuner.nccl import build_id, is_nccl_library, library_version


def _system_library() -> Path:
    """A real shared object of this system (zlib's), as the dynamic loader's cache names it."""
    name = ctypes.util.find_library("z") or ctypes.util.find_library("c")
    for folder in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
                   "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"):
        if name and (Path(folder) / name).exists():
            return (Path(folder) / name).resolve()
    pytest.skip("no zlib or libc found in the usual folders")


def test_the_build_id_of_a_real_library_is_the_one_readelf_prints():
    lib = _system_library()
    found = build_id(lib)
    assert len(found) == 40 and int(found, 16) >= 0  # ld's default: a SHA-1
    if shutil.which("readelf"):
        notes = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True).stdout
        assert f"Build ID: {found}" in notes


def test_a_stripped_copy_without_section_headers_is_read_from_its_note_segment(tmp_path):
    lib = _system_library()
    data = bytearray(lib.read_bytes())
    if data[4] != 2 or data[5] != 1:
        pytest.skip("the copy is edited as a 64-bit little-endian ELF file")
    struct.pack_into("<Q", data, 40, 0)  # e_shoff: no section header table
    struct.pack_into("<H", data, 60, 0)  # e_shnum
    copy = tmp_path / "libnccl.so.2"
    copy.write_bytes(bytes(data))
    assert build_id(copy) == build_id(lib)


def test_not_elf_or_no_note_gives_nothing(tmp_path):
    (tmp_path / "text").write_text("NCCL version 2.21.5+cuda12.4\n")
    assert build_id(tmp_path / "text") == "" and build_id(tmp_path / "missing") == ""
    (tmp_path / "short").write_bytes(b"\x7fELF\x02\x01")
    assert build_id(tmp_path / "short") == ""


def test_the_version_from_the_name_else_from_the_banner_string(tmp_path):
    assert library_version(tmp_path / "nope", "/usr/lib/libnccl.so.2.21.5") == "2.21.5"
    wheel = tmp_path / "libnccl.so.2"  # a wheel's name holds the major only: the banner is read
    wheel.write_bytes(b"\0" * (3 << 20) + b"junk NCCL version 2.28.9+cuda13.0 more")
    assert library_version(wheel) == "2.28.9"
    assert library_version(tmp_path / "libnccl.so") == ""


@pytest.mark.parametrize(("path", "nccl"), [
    ("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", True), ("/venv/nvidia/nccl/lib/libnccl.so.2", True),
    ("/opt/libnccl.so", True), ("/opt/libnccl-net.so", False), ("/opt/libnccl-env.so", False),
    ("/opt/libnccl.so.2.bak", False), ("/opt/libnccl_static.a", False),
])
def test_which_mapped_files_are_nccl(path, nccl):
    assert is_nccl_library(path) is nccl
