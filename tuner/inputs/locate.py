"""Where a path an experiment file names is found, and the search spaces shipped with nccl-tune.

A relative path in an experiment file (``sweep.space``, ``model.config``) is looked up next to
that file first, then in the working directory, so a night's file and what it names travel
together and the installed tool works from any directory; the server command itself runs in
the working directory. A space may also be named by its bundled name (``space = "safe"``), or
by the repository path of a bundled space (``search_spaces/safe.toml``) when no such file is
found on disk: those are package data, ``tuner/inputs/spaces/`` (the repository's
``search_spaces/`` is a link to that folder, the one copy), found through
:func:`importlib.resources.files` wherever the package is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

__all__ = ["BUNDLED_FOLDER", "bundled_space", "bundled_space_names", "find_path", "spaces_folder"]

#: The folder name a bundled space's path carries in the repository (``search_spaces/safe.toml``).
BUNDLED_FOLDER = "search_spaces"


def spaces_folder() -> Path:
    """The folder of the bundled search spaces inside the installed package (a regular
    directory: setuptools installs package data as files, never zipped here)."""
    return Path(str(files("tuner.inputs").joinpath("spaces")))


def bundled_space_names() -> list[str]:
    """The bundled spaces' names (``safe``, ``default``, ...), sorted."""
    return sorted(p.stem for p in spaces_folder().glob("*.toml"))


def bundled_space(raw: str | os.PathLike[str]) -> Path | None:
    """The bundled space ``raw`` names: ``safe``, ``safe.toml`` or ``search_spaces/safe.toml``
    (the repository's path of it); None for anything else."""
    path = Path(raw)
    if path.is_absolute() or path.parent not in (Path("."), Path(BUNDLED_FOLDER)):
        return None
    if path.suffix not in ("", ".toml") or (path.parent == Path(BUNDLED_FOLDER) and path.suffix != ".toml"):
        return None
    found = spaces_folder() / f"{path.stem}.toml"
    return found if path.stem and found.is_file() else None


def find_path(raw: str | os.PathLike[str], file: Path | None, *, exists: Callable[[Path], bool] = Path.is_file,
              bundled: bool = False) -> tuple[Path, str] | None:
    """``(path, where)`` of ``raw`` as an experiment file ``file`` names it: an absolute path
    (``~`` expanded) as it is; a relative one next to ``file`` first, then in the working
    directory (the only place when ``file`` is None: a command-line argument), then, with
    ``bundled``, the bundled space it names (:func:`bundled_space`).
    ``where`` says which, for the line that tells the user; None when none ``exists``."""
    candidate = Path(os.path.expanduser(raw))
    if candidate.is_absolute():
        return (candidate, "as written") if exists(candidate) else None
    beside = file.parent / candidate if file is not None else None
    if beside is not None and exists(beside):
        return beside, f"next to {file}"
    if exists(candidate):
        return candidate, f"in the working directory {Path.cwd()}"
    shipped = bundled_space(raw) if bundled else None
    return (shipped, "bundled with nccl-tune") if shipped is not None else None
