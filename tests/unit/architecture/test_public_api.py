"""Each package face says what it exports, exactly (as httpx tests its own ``__all__``); every
error the core defines derives from the one root, ``tuner.errors.NcclTuneError``."""

from __future__ import annotations

import importlib
import inspect
import pickle
import types
from pathlib import Path

import pytest

from tests.helpers import built_once
from tests.unit.architecture.imports import module_files

MODULES = {name: path for name, path in module_files().items() if name != "tuner"}
FACES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")
LEAVES = sorted(name for name, path in MODULES.items() if path.name != "__init__.py")
CORE = sorted(name for name in MODULES if not name.startswith("tuner.sim"))


def _public_namespace(module: types.ModuleType) -> set[str]:
    """The public names a module holds, less ``annotations`` (``from __future__ import
    annotations``) and ``TYPE_CHECKING``, and its own leaves, which are attributes once imported
    (a leaf the face exports as a module, such as ``tuner.server.gpu``, counts). A name that
    loads on first use (PEP 562 ``__getattr__``, listed by the module's ``__dir__``) counts."""
    exported = set(getattr(module, "__all__", ()))
    out = set()
    held = vars(module)
    for name in {*held, *dir(module)}:
        value = held.get(name)
        if name.startswith("_") or name in ("annotations", "TYPE_CHECKING"):
            continue
        if (isinstance(value, types.ModuleType) and value.__name__.startswith(f"{module.__name__}.")
                and name not in exported):
            continue
        out.add(name)
    return out


@pytest.mark.parametrize("name", FACES)
def test_a_face_exports_exactly_its_all(name):
    face = importlib.import_module(name)
    exported = getattr(face, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    assert set(exported) == _public_namespace(face), f"{name}: public names vs __all__"


@pytest.mark.parametrize("name", [n for n in FACES if n != "tuner.sim"])  # the simulator's face is its entry point
def test_a_face_reexports_only_its_leaves(name):
    face = importlib.import_module(name)
    leaves = [n for n in MODULES if n.startswith(f"{name}.") and n.count(".") == name.count(".") + 1]
    offered = set()
    for leaf in leaves:
        offered |= set(getattr(importlib.import_module(leaf), "__all__", ()))
    sub = {leaf.rsplit(".", 1)[1] for leaf in leaves}
    assert set(face.__all__) - sub <= offered, f"{name} exports names no leaf's __all__ offers"


@pytest.mark.parametrize("name", [n for n in LEAVES if n.count(".") == 1 or not n.startswith("tuner.sim")])
def test_a_leaf_declares_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it lacks"


def test_every_core_error_derives_from_the_root():
    from tuner.errors import NcclTuneError

    strays = []
    for name in CORE:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name
                    and not issubclass(value, NcclTuneError)):
                strays.append(f"{name}.{attr}")
    assert strays == []


def test_errors_live_in_errors_py():
    elsewhere = []
    for name in CORE:
        if name == "tuner.errors":
            continue
        module = importlib.import_module(name)
        elsewhere += [f"{name}.{a}" for a, v in vars(module).items()
                      if inspect.isclass(v) and issubclass(v, BaseException) and v.__module__ == name]
    assert elsewhere == [], "define the core's errors in tuner/errors.py"



#: Rooms whose faces are cut to what other rooms use (issue 31): every room but the simulator,
#: whose face is its entry point.
NARROW_FACES = ("nccl", "screen", "measure", "server", "record", "inputs", "servers", "triage", "diagnose",
                "report", "judging", "sweep", "planning", "study", "cli")
#: What every subcommand module of tuner/cli/ offers the dispatcher (tuner/cli/dispatch.py).
SUBCOMMAND_PROTOCOL = {"add_parser", "run", "run_argv"}


@pytest.fixture(scope="module")
def used(tmp_path_factory):
    from tests.unit.architecture.uses import uses

    def build(folder: Path) -> None:
        (folder / "uses.pickle").write_bytes(pickle.dumps(uses()))

    return pickle.loads((built_once(tmp_path_factory, "uses", build) / "uses.pickle").read_bytes())


@pytest.mark.parametrize("room", NARROW_FACES)
def test_a_face_exports_only_what_other_rooms_use(room, used):
    """A name the face offers is used outside the room: by another room, or by a test, benchmark
    or notebook other than the room's own unit tests (which import internal names from leaves)."""
    from tests.unit.architecture.uses import exported, room_of

    face = f"tuner.{room}"
    own_tests = f"tests/unit/{room}/"
    unused = []
    for name in exported()[face]:
        users = set().union(*(us for (module, n), us in used.items()
                              if n == name and (module == face or module.startswith(f"{face}."))),
                            *(us for (module, _), us in used.items() if module == f"{face}.{name}"))
        if not any(room_of(u) != room and not u.startswith(own_tests) for u in users):
            unused.append(name)
    assert unused == [], f"{face} exports names no other room uses: keep them to their leaf"


def test_no_exported_name_is_dead(used):
    """Every name a module exports is used by another module, or at least by its own."""
    from tests.unit.architecture.uses import exported, own_uses

    dead = []
    for module, names in exported().items():
        face = module.rsplit(".", 1)[0]
        if module in FACES:
            continue
        for name in names:  # a face's re-export is no use; a use of the face's name is
            users = (used.get((module, name), set()) - {module, face}) | used.get((face, name), set())
            if module.startswith("tuner.cli.") and name in SUBCOMMAND_PROTOCOL:
                continue  # called through tuner.cli.dispatch.COMMANDS, a table of modules
            if not users and own_uses(module, name) == 0:
                dead.append(f"{module}.{name}")
    assert dead == [], "delete what nothing uses"
