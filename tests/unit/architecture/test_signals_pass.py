"""No handler in ``tuner/`` swallows a signal.

A signal raises :class:`tuner.errors.Interrupted` in the main thread at whatever line runs
(:mod:`tuner.server.signals`), and Interrupted is an Exception: an ``except Exception`` (or
``BaseException``, or a bare ``except``, or ``contextlib.suppress(Exception)``) that does not
re-raise would swallow SIGTERM and the night would run on. CI met it once, in the runner's phase
write. Every broad handler must end in a bare ``raise`` or follow an ``except Interrupted: raise``
of the same ``try``; what a caller can live with goes through :func:`tuner.errors.tolerated`.
The simulator (``tuner/sim``) stands in for servers and never runs under the guard.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.architecture.imports import PACKAGE, module_files

BROAD = frozenset({"Exception", "BaseException"})


def _names(node: ast.expr | None) -> set[str]:
    """The class names an except clause (or suppress()'s arguments) names; {"BaseException"} for a bare one."""
    if node is None:
        return {"BaseException"}
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return {n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else "" for n in items}


def _reraises(handler: ast.ExceptHandler) -> bool:
    last = handler.body[-1]
    return isinstance(last, ast.Raise) and last.exc is None


def swallowers(source: str) -> list[int]:
    """Line numbers of the handlers in ``source`` that could swallow an Interrupted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Try | ast.TryStar):
            passed = False  # an earlier clause of this try lets Interrupted out
            for handler in node.handlers:
                names = _names(handler.type)
                if {"Interrupted", "NcclTuneError"} & names and _reraises(handler):
                    passed = True
                if names & BROAD and not passed and not _reraises(handler):
                    found.append(handler.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "suppress" and any(_names(a) & BROAD for a in node.args):
                found.append(node.lineno)
    return found


def test_the_scan_finds_each_spelling():
    src = """
import contextlib
try: f()
except Exception: pass
try: f()
except: log()
try: f()
except (OSError, BaseException) as e: log(e)
with contextlib.suppress(Exception): f()
try: f()
except Interrupted: raise
except Exception: pass
try: f()
except BaseException:
    undo()
    raise
"""
    assert swallowers(src) == [4, 6, 8, 9]


def test_no_handler_in_tuner_swallows_a_signal():
    bad = []
    for name, path in module_files().items():
        if name.startswith("tuner.sim"):
            continue
        rel = Path(path).relative_to(PACKAGE.parent)
        bad += [f"{rel}:{line}" for line in swallowers(Path(path).read_text())]
    assert not bad, ("these handlers would swallow SIGTERM's Interrupted: add `except Interrupted: raise` "
                     "before them or use tuner.errors.tolerated(): " + ", ".join(bad))
