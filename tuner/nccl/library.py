"""The NCCL library a server loaded: which file, its version and its GNU build ID.

Two builds of one NCCL version can behave differently (pip ``nvidia-nccl-cu13`` 2.28.9 and a
distribution's ``libnccl2`` 2.28.9: vllm #42354, #41725), so a night names the file and its
build ID beside the version. The version comes from the file name (``libnccl.so.2.21.5``), else
from the ``NCCL version X.Y.Z`` string NCCL keeps for its banner (src/init.cc, ``showVersion``);
the build ID from the ELF note the linker writes (``ld --build-id``): an ``SHT_NOTE`` section or
``PT_NOTE`` segment holding a note of owner ``GNU`` and type ``NT_GNU_BUILD_ID`` (3), read by
:func:`build_id` as the ELF specification lays it out (System V gABI, "ELF Header", "Section
Header" and "Note Section"; the type number from glibc's ``elf.h``).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NEVER_LOADED", "LoadedLibrary", "build_id", "is_nccl_library", "library_version"]

#: What a trial's proof says when no process of the server mapped NCCL and no NCCL line appeared.
NEVER_LOADED = ("NCCL was never loaded by this server (no libnccl mapped, no NCCL line): nothing to prove; the NCCL "
                "variables cannot act")
#: A mapped file that is NCCL: ``libnccl.so``, ``libnccl.so.2``, ``libnccl.so.2.21.5`` (not
#: ``libnccl-net.so``, a plugin, nor ``libnccl-env.so``).
_NCCL_NAME = re.compile(r"^libnccl\.so(?:\.(\d+(?:\.\d+)*))?$")
_BANNER = re.compile(rb"NCCL version (\d+\.\d+\.\d+)")
_NT_GNU_BUILD_ID = 3
_SHT_NOTE = 7
_PT_NOTE = 4
_SCAN_LIMIT = 512 << 20  # bytes of a library searched for the banner (libnccl.so is ~200-400 MB)


@dataclass(frozen=True)
class LoadedLibrary:
    """The NCCL a server's processes mapped: ``path`` as the processes saw it (inside a container:
    the container's path), ``version`` (``""``: not read), ``build_id`` (lower-case hex; ``""``:
    not read), ``pids`` the processes that mapped it."""

    path: str
    version: str = ""
    build_id: str = ""
    pids: tuple[int, ...] = ()


def is_nccl_library(path: str) -> bool:
    """True when the mapped file ``path`` is NCCL's own library (see :data:`_NCCL_NAME`)."""
    return _NCCL_NAME.match(Path(path).name) is not None


def library_version(path: Path, shown: str | None = None) -> str:
    """The NCCL version of the library file at ``path``: from its name (``shown``, default the
    path's, when it has three numbers: ``libnccl.so.2.21.5``), else the first ``NCCL version
    X.Y.Z`` in its first 512 MiB; ``""`` when neither is found or it cannot be read."""
    m = _NCCL_NAME.match(Path(shown or str(path)).name)
    if m and m.group(1) and m.group(1).count(".") == 2:
        return m.group(1)
    try:
        with path.open("rb") as fh:
            tail = b""
            read = 0
            while read < _SCAN_LIMIT and (chunk := fh.read(1 << 20)):
                read += len(chunk)
                found = _BANNER.search(tail + chunk)
                if found:
                    return found.group(1).decode()
                tail = chunk[-32:]
    except OSError:
        return ""
    return ""


def _notes(data: bytes, end: str, start: int, size: int, align: int) -> str | None:
    """The build ID among the notes in ``data[start:start+size]``: each note a header of three
    words (namesz, descsz, type), the name and then the descriptor, each padded to ``align``."""
    pos, stop = start, min(start + size, len(data))
    while pos + 12 <= stop:
        namesz, descsz, kind = struct.unpack_from(end + "III", data, pos)
        name_at = pos + 12
        desc_at = name_at + (-(-namesz // align) * align)
        if desc_at + descsz > stop:
            return None
        if kind == _NT_GNU_BUILD_ID and data[name_at:name_at + namesz].rstrip(b"\0") == b"GNU":
            return data[desc_at:desc_at + descsz].hex()
        pos = desc_at + (-(-descsz // align) * align)
    return None


def build_id(path: Path) -> str:
    """The GNU build ID of the ELF file at ``path`` as lower-case hex (20 bytes for ld's default
    SHA-1), ``""`` when the file is not ELF, has no build-ID note, or cannot be read.

    The ELF header gives the class (byte 4: 1 = 32-bit, 2 = 64-bit) and byte order (byte 5: 1
    little, 2 big); the section headers (``e_shoff``, ``e_shentsize``, ``e_shnum``) are searched
    for ``SHT_NOTE`` sections, and where none holds the note (a stripped file without section
    headers) the program headers for ``PT_NOTE`` segments. Notes are 4-byte aligned
    (``.note.gnu.build-id``'s ``sh_addralign``); only the headers and the note are read."""
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return ""
            end = "<" if head[5] == 1 else ">"
            wide = head[4] == 2
            if wide:
                phoff, shoff = struct.unpack_from(end + "QQ", head, 32)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 54)
            else:
                phoff, shoff = struct.unpack_from(end + "II", head, 28)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 42)
            spans: list[tuple[int, int]] = []
            if shoff and shnum:
                fh.seek(shoff)
                table = fh.read(shentsize * shnum)
                for i in range(len(table) // shentsize if shentsize else 0):
                    at = i * shentsize
                    if struct.unpack_from(end + "I", table, at + 4)[0] != _SHT_NOTE:
                        continue
                    off, size = (struct.unpack_from(end + "QQ", table, at + 24) if wide
                                 else struct.unpack_from(end + "II", table, at + 16))
                    spans.append((off, size))
            if phoff and phnum:
                fh.seek(phoff)
                table = fh.read(phentsize * phnum)
                for i in range(len(table) // phentsize if phentsize else 0):
                    at = i * phentsize
                    if struct.unpack_from(end + "I", table, at)[0] != _PT_NOTE:
                        continue
                    # Elf64_Phdr: p_offset at 8, p_filesz at 32; Elf32_Phdr: p_offset at 4, p_filesz at 16
                    off, size = ((struct.unpack_from(end + "Q", table, at + 8)[0],
                                  struct.unpack_from(end + "Q", table, at + 32)[0]) if wide
                                 else (struct.unpack_from(end + "I", table, at + 4)[0],
                                       struct.unpack_from(end + "I", table, at + 16)[0]))
                    spans.append((off, size))
            for off, size in spans:
                if size > 1 << 20:
                    continue
                fh.seek(off)
                found = _notes(fh.read(size), end, 0, size, 4)
                if found:
                    return found
    except (OSError, struct.error):
        return ""
    return ""
