"""No import climbs the layers of docs/ARCHITECTURE.md, none crosses a layer, no cycle, and an
import between rooms goes through the other room's face."""

from __future__ import annotations

from tests.unit.architecture.imports import (
    PACKAGE,
    bypasses,
    cycles,
    declared_layers,
    imports,
    module_files,
    violations,
)


def test_every_room_is_in_a_layer():
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    declared = {room for layer in declared_layers() for room in layer}
    assert rooms - {"sim"} == declared, "rooms on disk vs docs/ARCHITECTURE.md's layers"


def test_no_import_climbs_or_crosses():
    assert violations(imports(), declared_layers()) == []


def test_no_import_cycle():
    assert cycles(imports()) == []


def test_an_upward_import_inside_a_function_is_caught():
    """The check itself: a late import from the NCCL layer into the sweep must fail."""
    path = module_files()["tuner.nccl.decode"]
    text = path.read_text() + "\n\ndef _late():\n    from tuner.sweep import runner\n    return runner\n"
    found = violations(imports(source={"tuner.nccl.decode": text}), declared_layers())
    assert any("tuner.nccl.decode" in v and "(inside a function)" in v and "sweep is above nccl" in v for v in found)


def test_a_cycle_is_caught():
    text = module_files()["tuner.nccl.types"].read_text() + "\nfrom tuner.nccl import decode\n"
    assert any("tuner.nccl.types" in c for c in cycles(imports(source={"tuner.nccl.types": text})))


def test_the_simulator_stays_independent():
    text = module_files()["tuner.sim.costmodel"].read_text() + "\nfrom tuner.nccl import values\n"
    found = violations(imports(source={"tuner.sim.costmodel": text}), declared_layers())
    assert any("simulator stays independent" in v for v in found)


def test_imports_between_rooms_go_through_faces():
    """Every import between rooms names the other room's face, never one of its leaves."""
    assert bypasses(imports(), frozenset()) == []


def test_an_import_around_a_face_is_caught():
    """The check itself: the triage importing NCCL's leaf ``values`` (inside a function) fails;
    the same name through the face, or a leaf module named through the face, passes."""
    path = module_files()["tuner.triage.bound"]
    leaf = path.read_text() + "\n\ndef _late():\n    from tuner.nccl.values import check_value\n    return check_value\n"
    found = bypasses(imports(source={"tuner.triage.bound": leaf}), frozenset())
    assert found == [f"tuner.triage.bound line {leaf.count(chr(10)) - 1} imports tuner.nccl.values: "
                     "import it from tuner.nccl, its face"]
    face = path.read_text() + "\nfrom tuner.nccl import check_value\nfrom tuner.server import gpu\n"
    assert bypasses(imports(source={"tuner.triage.bound": face}), frozenset()) == []
    sweep = module_files()["tuner.sweep.check"].read_text() + "\nimport tuner.nccl.values\n"
    assert bypasses(imports(source={"tuner.sweep.check": sweep}), frozenset()) != []
