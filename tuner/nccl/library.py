"""The NCCL library a server loaded: which file, its version and its GNU build ID.

Two builds of one NCCL version can behave differently (pip ``nvidia-nccl-cu13`` 2.28.9 and a
distribution's ``libnccl2`` 2.28.9: vllm #42354, #41725), so a night names the file and its
build ID beside the version. The version comes from the file name (``libnccl.so.2.21.5``), else
from the ``NCCL version X.Y.Z`` string NCCL keeps for its banner (src/init.cc, ``showVersion``);
the build ID from the ELF note the linker writes (``ld --build-id``): an ``SHT_NOTE`` section or
``PT_NOTE`` segment holding a note of owner ``GNU`` and type ``NT_GNU_BUILD_ID``, read by
:func:`build_id` with pyelftools.
"""

from __future__ import annotations

import functools
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
        stat = path.stat()
    except OSError:
        return ""
    return _banner_version(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _banner_version(path: str, size: int, mtime_ns: int) -> str:
    """The banner's version in the file at ``path``, searched once per file version (``size`` and
    ``mtime_ns`` key the cache: a night's every trial maps the same few hundred MB)."""
    try:
        with open(path, "rb") as fh:
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


def build_id(path: Path) -> str:
    """The GNU build ID of the ELF file at ``path`` as lower-case hex (20 bytes for ld's default
    SHA-1), ``""`` when the file is not ELF, has no build-ID note, or cannot be read.

    Read with pyelftools: the ``NT_GNU_BUILD_ID`` note of owner ``GNU`` in an ``SHT_NOTE``
    section (``.note.gnu.build-id``), or, in a file stripped of its section headers, in a
    ``PT_NOTE`` segment (System V gABI, "Note Section"). Only the headers and the notes are read,
    never the whole library."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.notes import iter_notes

    try:
        with path.open("rb") as fh:
            elf = ELFFile(fh)
            spans = [(s["sh_offset"], s["sh_size"]) for s in elf.iter_sections() if s["sh_type"] == "SHT_NOTE"]
            spans += [(g["p_offset"], g["p_filesz"]) for g in elf.iter_segments() if g["p_type"] == "PT_NOTE"]
            for offset, size in spans:
                for note in iter_notes(elf, offset, size):
                    if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                        return str(note["n_desc"]).lower()
    except (OSError, ELFError, ValueError, KeyError, struct.error):
        return ""
    return ""
