"""One home per server kind: no module outside tuner/servers/ (the simulator excepted) names one.

A server kind named in code outside its home (a string or a name such as ``"vllm"``,
``SGLANG_``, ``text-generation-launcher``) is knowledge that the next spelling of a case will
miss; the module asks :func:`tuner.servers.kind_of` and the kind's fields instead. Docstrings
and comments may cite a server's source file: only code is read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import ROOT

#: How code names a server kind.
KIND_WORDS = re.compile(r"vllm|sglang|\btgi\b|text.generation|trtllm|tensorrt|llama[._-]?cpp|llama.server", re.I)
#: The rooms allowed to name them: the kinds' home, and the simulator, which imitates them.
HOMES = ("servers", "sim")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function, attribute)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if isinstance(body, list):
                for stmt in body:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                            and isinstance(stmt.value.value, str):
                        found.add(id(stmt.value))
    return found


def kinds_named(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string constant or name in ``source`` that names a server kind."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.alias):
            text = node.name
        elif isinstance(node, ast.ImportFrom):
            text = node.module
        if text is not None and KIND_WORDS.search(text):
            hits.append((node.lineno if hasattr(node, "lineno") else 0, text[:80]))
    return hits


def test_no_module_outside_the_servers_room_names_a_server_kind():
    found = []
    for path in sorted((ROOT / "tuner").rglob("*.py")):
        room = path.relative_to(ROOT / "tuner").parts[0]
        if room in HOMES:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in kinds_named(path.read_text())]
    assert found == [], "server kinds named outside tuner/servers/ (ask the kind instead):\n" + "\n".join(found)


def test_the_check_bites_on_a_string_a_name_and_an_import_but_not_a_docstring():
    source = ('"""Read vllm/entrypoints/openai/api_server.py."""\n'
              'import re\nfrom tuner.servers.vllm import VLLM\n'
              'def f(argv):\n    """As vLLM does."""\n    _SGLANG_MARK = 1\n    return "vllm" in argv\n')
    assert {text for _, text in kinds_named(source)} == {"tuner.servers.vllm", "VLLM", "_SGLANG_MARK", "vllm"}


def test_every_kind_has_a_module_of_its_own():
    from tuner.servers import KINDS
    modules = {p.stem for p in Path(ROOT / "tuner" / "servers").glob("*.py")}
    assert all(kind.name in modules for kind in KINDS), [k.name for k in KINDS if k.name not in modules]
