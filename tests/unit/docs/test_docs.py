"""The docs stay true: ARCHITECTURE.md names every room and cites only files and names that exist, the README's
exit status table is the error tree's list, and nothing cites a file users do not have."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from tests.helpers import ROOT
from tuner.errors import EXIT_MEANINGS

ARCH = ROOT / "docs" / "ARCHITECTURE.md"


#: Folders a cited path may start with; a path of the form ``room/leaf.py`` is under ``tuner/``.
_TOP = ("tuner/", "tests/", "docs/", "examples/", "search_spaces/", "benchmarks/", "notebooks/")
_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")
_ENV_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "SGLANG_")


def _rooms() -> set[str]:
    """The rooms on disk: ``tuner/<room>/`` or ``tuner/<room>.py``."""
    pkg = ROOT / "tuner"
    return ({p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
            | {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"})


def _cited_path(span: str) -> Path | None:
    """The file or folder a code span cites (``tuner/nccl/log.py``, ``nccl/log.py``,
    ``tests/fixtures/server_logs/``), or None when the span is no path of the repository."""
    if "<" in span or " " in span:
        return None
    if span.startswith(_TOP):
        return ROOT / span
    if "/" in span and span.split("/", 1)[0] in _rooms() and span.endswith((".py", "/")):
        return ROOT / "tuner" / span
    return None


def _module_of(path: Path) -> str | None:
    rel = path.relative_to(ROOT)
    if rel.parts[0] != "tuner" or not (path.suffix == ".py" or path.is_dir()):
        return None
    parts = rel.with_suffix("").parts if path.suffix == ".py" else rel.parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _has(obj: object, dotted: str) -> bool:
    """``obj.a.b`` exists: an attribute, or a field a class declares without a default."""
    for part in dotted.split("."):
        fields = {**getattr(obj, "__dataclass_fields__", {}), **getattr(obj, "model_fields", {}),
                  **getattr(obj, "__annotations__", {})} if isinstance(obj, type) else {}
        if not hasattr(obj, part):
            return part in fields
        obj = getattr(obj, part)
    return True


def _anywhere(name: str) -> bool:
    """``name`` (``Planner.confirmation``, ``_COMM``) exists in some module of ``tuner``."""
    for path in (ROOT / "tuner").rglob("*.py"):
        module = _module_of(path)
        if module and not module.startswith("tuner.sim") and _has(importlib.import_module(module), name):
            return True
    return False


def citations(text: str) -> list[tuple[str, str | None]]:
    """What a document cites: ``(span, module)`` for each code span, in order, where ``module``
    is the module the span is read in: the last cited ``.py`` path (or ``tuner/`` folder) of the
    same table cell and clause (a ``|``, ``;`` or a sentence's end ends both), None when there is
    none."""
    out = []
    for line in text.splitlines():
        for clause in re.split(r"[|;]|\.\s", line):
            module = None
            for span in re.findall(r"`([^`]+)`", clause):
                path = _cited_path(span)
                if path is not None:
                    module = _module_of(path) if path.exists() else None
                out.append((span, module))
    return out


def problems(text: str) -> list[str]:
    """Each citation of ``text`` that names a file or a function, class or attribute the tree
    lacks: a path under :data:`_TOP` (or ``room/leaf.py``) that does not exist; a name read in
    the module cited before it that the module lacks; a name cited alone (``Class.attr``,
    ``a_function``, ``_PRIVATE``, ``tuner.x.NAME``) that no module of ``tuner`` has. A lone
    word, a config key (``probe.concurrency``), a file name (``report.md``) or an environment
    variable is no citation."""
    out = []
    for span, module in citations(text):
        path = _cited_path(span)
        if path is not None:
            if not path.exists():
                out.append(f"{span}: no such file or folder")
            continue
        if re.fullmatch(r"\w+\.py", span) and module is not None:  # a leaf of the folder cited before
            if not (ROOT / module.replace(".", "/") / span).exists():
                out.append(f"{span}: {module} has no such leaf")
            continue
        if not _NAME.fullmatch(span):
            continue
        if span.startswith("tuner."):
            head, _, name = span.rpartition(".")
            if not _has(importlib.import_module(head), name):
                out.append(f"{span}: {head} has no {name}")
        elif module is not None:
            if not _has(importlib.import_module(module), span):
                out.append(f"{span}: {module} has no {span}")
        elif span.startswith(_ENV_PREFIXES) or span == "__init__.py":
            continue
        elif (span[0].isupper() or span.startswith("_") or ("_" in span and "." not in span)) and not _anywhere(span):
            out.append(f"{span}: no module of tuner has it")
    return out


def test_architecture_cites_only_what_exists():
    """Every file, function, class and attribute docs/ARCHITECTURE.md cites is in the tree (its
    walk through one trial and its where-to-change table included)."""
    assert problems(ARCH.read_text()) == []


def test_a_stale_citation_is_caught():
    text = ("| x | `tuner/planning/order.py`, `Planner.next_launch_gone` | `tuner/nowhere.py`; `NoSuchClass` |\n"
            "| y | `nccl/log.py`'s `parse_log`; `probe.concurrency`, `NCCL_ALGO`, `report.md` |\n")
    assert problems(text) == ["Planner.next_launch_gone: tuner.planning.order has no Planner.next_launch_gone",
                              "tuner/nowhere.py: no such file or folder", "NoSuchClass: no module of tuner has it"]


def test_architecture_names_every_room():
    """Each room on disk has its row in the rooms table, and the table names no other."""
    section = ARCH.read_text().split("## Rooms", 1)[1].split("\n## ", 1)[0]
    listed = {m.rstrip("/").removesuffix(".py") for m in re.findall(r"^\|\s*`tuner/([^`]+)`", section, re.M)}
    assert listed == _rooms()


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
