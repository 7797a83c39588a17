"""Every import of the ``tuner`` package, read with ``ast`` (function-level and TYPE_CHECKING
imports included), and the layer order declared in docs/ARCHITECTURE.md."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "tuner"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


@dataclass(frozen=True)
class Import:
    """One import: ``importer`` (dotted module) imports ``target`` (dotted module) at ``line``;
    ``late`` when the statement is not at module level (inside a function or a block);
    ``typing_only`` inside ``if TYPE_CHECKING:`` (never run, so it closes no cycle at run time,
    but it still may not climb)."""

    importer: str
    target: str
    line: int
    late: bool
    typing_only: bool = False
    written: str = ""  # the module the statement names (``from tuner.nccl.values import x``: tuner.nccl.values)


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> its file, for every ``.py`` under ``package`` (a package's
    ``__init__.py`` is the package's own name)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: frozenset[str]) -> list[tuple[str, str]]:
    """(target, written) of each name the statement imports."""
    if isinstance(node, ast.Import):
        return [(alias.name, alias.name) for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, base] if base else here)
    # ``from tuner.x import y`` imports the module tuner.x.y when there is one, else names of tuner.x.
    return [(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base, base) for a in node.names]


def imports(package: Path = PACKAGE, source: dict[str, str] | None = None) -> list[Import]:
    """Every import between modules of ``package`` (outside imports are left out). ``source``
    overrides a module's text by dotted name (a test adds an import this way)."""
    if source is None:
        return list(_imports_as_written(package))
    return _read_imports(package, source)


@functools.cache
def _imports_as_written(package: Path) -> tuple[Import, ...]:
    return tuple(_read_imports(package, {}))


def _read_imports(package: Path, source: dict[str, str]) -> list[Import]:
    files = module_files(package)
    known = frozenset(files)
    found: list[Import] = []
    for module, path in files.items():
        text = source.get(module)
        found += _file_imports(package, module, path, known) if text is None else _parse_imports(
            package, module, path, text, known)
    return found


@functools.cache
def _file_imports(package: Path, module: str, path: Path, known: frozenset[str]) -> tuple[Import, ...]:
    """The imports of one module as its file has them, parsed once per session (the checks
    that override one module's text re-read only that one)."""
    return tuple(_parse_imports(package, module, path, path.read_text(), known))


def _parse_imports(package: Path, module: str, path: Path, text: str, known: frozenset[str]) -> list[Import]:
    found: list[Import] = []
    tree = ast.parse(text, filename=str(path))
    top = {id(n) for n in tree.body}
    typing = {id(sub) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
              for stmt in n.body for sub in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target, written in _targets(node, module, path.name == "__init__.py", known):
                if target.split(".")[0] == package.name:
                    found.append(Import(module, target, node.lineno, id(node) not in top, id(node) in typing,
                                        written))
    return found


def package_of(module: str) -> str:
    """The room a module belongs to: ``tuner.nccl.log`` -> ``nccl``; a top-level module
    (``tuner.errors``) is its own room; ``tuner`` itself is ``tuner``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


_LAYERS = re.compile(r"```text layers\n(?P<body>.*?)```", re.S)


def declared_layers(text: str | None = None) -> list[list[str]]:
    """The layer order of docs/ARCHITECTURE.md's ```text layers block, top layer first; each
    layer a list of rooms (the words on its line before any ``#``)."""
    m = _LAYERS.search(text if text is not None else ARCHITECTURE.read_text())
    if m is None:
        raise AssertionError("docs/ARCHITECTURE.md has no ```text layers block")
    layers = []
    for line in m.group("body").splitlines():
        words = re.findall(r"[a-z_]+", line.split("#", 1)[0].replace("tuner/", ""))
        if words:
            layers.append(words)
    return layers


def violations(found: list[Import], layers: list[list[str]], independent: tuple[str, ...] = ("sim",)) -> list[str]:
    """Each import that climbs (to a room of a higher layer), crosses to a room of the same
    layer, or touches an independent room (the simulator) from outside it, as a sentence."""
    rank = {room: i for i, layer in enumerate(reversed(layers)) for room in layer}
    out = []
    for imp in found:
        a, b = package_of(imp.importer), package_of(imp.target)
        if a == b or b == "tuner":
            continue
        where = f"{imp.importer} line {imp.line}{' (inside a function)' if imp.late else ''} imports {imp.target}"
        if a in independent or b in independent:
            out.append(f"{where}: {'the simulator' if 'sim' in (a, b) else a} stays independent of the core")
        elif a not in rank or b not in rank:
            out.append(f"{where}: {a if a not in rank else b} is in no layer of docs/ARCHITECTURE.md")
        elif rank[b] > rank[a]:
            out.append(f"{where}: {b} is above {a}")
        elif rank[b] == rank[a]:
            out.append(f"{where}: {a} and {b} are one layer and stay independent")
    return out


def bypasses(found: list[Import], allowed: frozenset[tuple[str, str]] = frozenset(),
             independent: tuple[str, ...] = ("sim",)) -> list[str]:
    """Each import between rooms that names a leaf of the other room instead of its face
    (``from tuner.nccl.values import x`` outside ``nccl``; ``from tuner.server import gpu``
    goes through the face), as a sentence. ``allowed``: (importer's room, leaf named) pairs
    let through."""
    out = []
    for imp in found:
        a, b = package_of(imp.importer), package_of(imp.written or imp.target)
        if a == b or b == "tuner" or a in independent or b in independent:
            continue
        if imp.written.count(".") >= 2 and (a, imp.written) not in allowed:
            face = ".".join(imp.written.split(".")[:2])
            out.append(f"{imp.importer} line {imp.line} imports {imp.written}: import it from {face}, its face")
    return out


def cycles(found: list[Import]) -> list[list[str]]:
    """Cycles among modules (each a list of dotted names, first repeated last), found by
    depth-first search over every import that runs, late ones included."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if imp.typing_only:
            continue
        graph.setdefault(imp.importer, set()).add(imp.target)
    out, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                out.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return out
