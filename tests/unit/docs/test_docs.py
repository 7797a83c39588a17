"""The docs stay true: ARCHITECTURE.md names every module and only names that exist, the README's
exit status table is the error tree's list, and nothing cites a file users do not have."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from tests.helpers import ROOT
from tuner.errors import EXIT_MEANINGS

ARCH = ROOT / "docs" / "ARCHITECTURE.md"


def _modules() -> set[str]:
    out = set()
    for path in (ROOT / "tuner").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if rel.name != "__main__":
            out.add(".".join(parts))
    return out


def _rows() -> list[tuple[str, str]]:
    """(module, names cell) of every table row whose first cell is a `tuner/...` path."""
    rows = []
    for line in ARCH.read_text().splitlines():
        m = re.match(r"\|\s*`(tuner/[^`]+)`\s*\|[^|]*\|(.*)\|\s*$", line)
        if m:
            path = m.group(1).removesuffix("/").removesuffix(".py").removesuffix("/__init__")
            rows.append((path.replace("/", "."), m.group(2)))
    return rows


def test_architecture_lists_every_module():
    listed = {module for module, _ in _rows()}
    assert _modules() - listed == set(), "modules missing from docs/ARCHITECTURE.md"
    assert listed - _modules() == set(), "docs/ARCHITECTURE.md lists modules that do not exist"


def test_architecture_names_exist():
    for module, cell in _rows():
        mod = importlib.import_module(module)
        for name in re.findall(r"`([A-Za-z_][\w.]*)", cell):
            obj = mod
            for part in name.split("."):
                assert hasattr(obj, part), f"docs/ARCHITECTURE.md: {module} has no {name}"
                obj = getattr(obj, part)


def test_readme_exit_status_is_the_error_tree():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit status", 1)[1].split("\n#", 1)[0]
    rows = dict(re.findall(r"^\|\s*`?(\d+)`?\s*\|\s*(.+?)\s*\|\s*$", section, re.M))
    assert {int(k): v for k, v in rows.items()} == {int(k): v for k, v in EXIT_MEANINGS.items()}


def test_no_citation_of_files_users_do_not_have():
    offenders = []
    for folder in ("tuner", "docs", "examples", "search_spaces", "benchmarks", "notebooks", "tests"):
        for path in (ROOT / folder).rglob("*"):
            wanted = path.is_file() and path.suffix in {".py", ".md", ".toml", ".ipynb"} and path != Path(__file__)
            if wanted and "REFERENCE.md" in path.read_text(errors="replace"):
                offenders.append(str(path.relative_to(ROOT)))
    assert "REFERENCE.md" not in (ROOT / "README.md").read_text()
    assert offenders == []
