"""The error tree drawn in ``tuner/errors.py``'s docstring is the tree of its classes: every
error class once, under its parent, with the exit status it ends with."""

from __future__ import annotations

import inspect
import re
import signal

import tuner.errors as errors
from tuner.errors import ExitCode, Interrupted, NcclTuneError

LINE = re.compile(r"^(?P<indent> *)\* (?P<name>\w+) \(exit (?P<codes>[\d/]+), (?P<names>[\w/]+)\): \S")


def _drawn() -> list[tuple[int, str, str, str]]:
    """(depth, class name, exit codes, ExitCode names) of each line of the drawn tree."""
    rows = []
    for line in (errors.__doc__ or "").splitlines():
        m = LINE.match(line.removeprefix("    "))
        if m:
            rows.append((len(m["indent"]) // 2, m["name"], m["codes"], m["names"]))
    return rows


def test_the_drawn_tree_is_every_error_class_under_its_parent():
    classes = {n: c for n, c in vars(errors).items()
               if inspect.isclass(c) and issubclass(c, NcclTuneError) and c.__module__ == "tuner.errors"}
    rows = _drawn()
    assert sorted(name for _, name, _, _ in rows) == sorted(classes)
    parents: list[str] = []
    for depth, name, _, _ in rows:
        parents = parents[:depth]
        if parents:
            assert classes[name].__bases__ == (classes[parents[-1]],), f"{name} is drawn under {parents[-1]}"
        else:
            assert classes[name] is NcclTuneError
        parents.append(name)


def test_the_drawn_exit_status_is_each_class_own():
    for _, name, codes, names in _drawn():
        cls = getattr(errors, name)
        if cls is Interrupted:
            signums = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
            assert codes == "/".join(str(int(Interrupted(s).exit_code)) for s in signums)
            assert names == "/".join(ExitCode(128 + s).name for s in signums)
        else:
            assert codes == str(int(cls.exit_code)) and names == cls.exit_code.name, name
