"""Who uses each name a module of ``tuner`` exports: read with ``ast`` over ``tuner/``,
``tests/``, ``benchmarks/`` and the code cells of ``notebooks/``.

A use is ``from M import name``, ``M.name`` after ``import M`` or ``from P import M``, or the
text ``"M.name"`` in a string (``monkeypatch.setattr("tuner.x.name", ...)``). Run as
``python -m tests.unit.architecture.uses`` for the table of names by the rooms that use them
(issue 31's count: what each face and leaf exports and who uses it).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections import defaultdict
from pathlib import Path

from tests.unit.architecture.imports import PACKAGE, module_files, package_of

ROOT = PACKAGE.parent
HERE = Path(__file__).resolve().parent
#: Where users of ``tuner`` are read, besides ``tuner/`` itself.
USER_FOLDERS = ("tuner", "tests", "benchmarks", "notebooks")
_DOTTED = re.compile(r"\btuner(?:\.\w+)+")


def user_sources() -> dict[str, str]:
    """Source text by a user's name: a dotted module for ``tuner/``, else a path from the root
    (a notebook's code cells joined)."""
    out = {}
    modules = {path: name for name, path in module_files().items()}
    for folder in USER_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if ".ipynb_checkpoints" in path.parts or path.parent == HERE:  # the checks' own lists are no use
                continue
            if path.suffix == ".py":
                out[modules.get(path, str(path.relative_to(ROOT)))] = path.read_text()
            elif path.suffix == ".ipynb":
                cells = json.loads(path.read_text()).get("cells", [])
                code = ["".join(c["source"]) for c in cells if c.get("cell_type") == "code"]
                out[str(path.relative_to(ROOT))] = "\n".join(
                    "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
                    for cell in code)
    return out


def _base(node: ast.ImportFrom, user: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    here = user.split(".") if is_package else user.split(".")[:-1]
    here = here[: len(here) - (node.level - 1)]
    return ".".join([*here, node.module] if node.module else here)


def uses(sources: dict[str, str] | None = None) -> dict[tuple[str, str], set[str]]:
    """``(module, name) -> users``: every use of ``module.name`` (``module`` dotted, a
    ``tuner`` module) by each user (a dotted module or a file path)."""
    files = module_files()
    known = set(files)
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for user, text in (sources or user_sources()).items():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        is_package = user in files and files[user].name == "__init__.py"
        aliases: dict[str, str] = {}  # a local name bound to a tuner module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _base(node, user, is_package)
                if base.split(".")[0] != "tuner":
                    continue
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                        found[(base, a.name)].add(user)
                    else:
                        found[(base, a.name)].add(user)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "tuner":
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for dotted in _DOTTED.findall(node.value):
                    parts = dotted.split(".")
                    for i in range(len(parts) - 1, 0, -1):
                        if ".".join(parts[:i]) in known:
                            found[(".".join(parts[:i]), parts[i])].add(user)
                            break
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain, cur = [node.attr], node.value
                while isinstance(cur, ast.Attribute):
                    chain.append(cur.attr)
                    cur = cur.value
                if isinstance(cur, ast.Name) and cur.id in aliases:
                    dotted = [*aliases[cur.id].split("."), *reversed(chain)]
                    for i in range(len(dotted) - 1, 0, -1):
                        if ".".join(dotted[:i]) in known:
                            found[(".".join(dotted[:i]), dotted[i])].add(user)
                            break
    return found


@functools.cache
def exported() -> dict[str, list[str]]:
    """Each module's ``__all__`` (read from its text), by dotted name; the simulator left out."""
    out = {}
    for name, path in module_files().items():
        if name.startswith("tuner.sim") or name == "tuner":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                out[name] = list(ast.literal_eval(node.value))
    return out


def own_uses(module: str, name: str) -> int:
    """How often ``name`` appears in ``module``'s own text as a loaded name, past its definition."""
    return _loaded(module).get(name, 0)


@functools.cache
def _loaded(module: str) -> dict[str, int]:
    """How often each identifier is loaded (a name or an attribute) in ``module``'s text."""
    out: dict[str, int] = defaultdict(int)
    for n in ast.walk(ast.parse(module_files()[module].read_text())):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out[n.id] += 1
        elif isinstance(n, ast.Attribute):
            out[n.attr] += 1
    return out


def room_of(user: str) -> str:
    """The room of a user: a ``tuner`` module's room, else ``tests/unit/<room>`` -> ``tests``."""
    return package_of(user) if user.startswith("tuner") else user.split("/")[0]


def report() -> list[str]:
    """One line per exported name: module, name, the rooms using it (``-`` for none)."""
    found = uses()
    lines = []
    faces = {n for n, p in module_files().items() if p.name == "__init__.py"}
    for module, names in sorted(exported().items()):
        kind = "face" if module in faces else "leaf"
        for name in names:
            users = found.get((module, name), set())
            # a face's re-export of its own leaf is no use of the leaf
            outside = sorted({room_of(u) for u in users if not (u in faces and package_of(u) == package_of(module))})
            lines.append(f"{kind}\t{module}\t{name}\t{','.join(outside) or '-'}")
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
