"""Fixtures shared by every test: the simulator (``sim``), a stand-in NVML (``nvml``) and
search-space files; the PostgreSQL fixtures come from tests/pg.py. Helpers live in
tests/helpers.py; the probe's servers have their fixtures in tests/unit/measure/conftest.py."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.simproc import Sim

pytest_plugins = ["tests.pg"]  # pg_server, pg_url


@pytest.fixture
def sim() -> Iterator:
    """Factory: ``sim(*args, env=None, profile="fast-tiny", load=0.2, workers=0)`` -> a started
    :class:`tests.simproc.Sim` (``python -m tuner.sim serve``; ``.wait_ready()``, ``.url``), its
    process group killed afterwards."""
    started: list[Sim] = []

    def start(*args, **kw) -> Sim:
        s = Sim(*args, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    """Factory: ``nvml(gpus, driver="550.54.15")`` makes ``import pynvml`` give a stand-in NVML
    that sees ``gpus`` (a list of model names; GPU i has UUID ``GPU-i...``); ``nvml(None)``
    makes NVML absent (the import fails), as on a machine without the NVIDIA driver."""

    def install(gpus: list[str] | None, driver: str = "550.54.15") -> None:
        if gpus is None:
            monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
            return
        fake = types.ModuleType("pynvml")
        fake.nvmlInit = lambda: None  # type: ignore[attr-defined]
        fake.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
        fake.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
        fake.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
        fake.nvmlDeviceGetName = lambda h: gpus[h]  # type: ignore[attr-defined]
        fake.nvmlDeviceGetUUID = lambda h: f"GPU-{h}aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"  # type: ignore[attr-defined]
        fake.nvmlSystemGetDriverVersion = lambda: driver.encode()  # type: ignore[attr-defined]
        fake.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=0)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pynvml", fake)

    return install


@pytest.fixture
def space_file(tmp_path: Path):
    """Factory: write a search-space TOML into tmp_path and return its path."""
    def make(text: str, name: str = "space.toml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spread the tests evenly over the xdist workers, long ones (marked slow) first in each.

    ``--dist worksteal`` first hands each worker one contiguous block of the collection, and a
    worker runs its own block's head itself. In collection order the end-to-end tests would all
    land in the first block, one after another; dealt round-robin, every block gets a like mix.
    Without xdist (one worker) this only puts the slow tests first.
    """
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    ordered = sorted(items, key=lambda item: item.get_closest_marker("slow") is None)
    items[:] = [item for k in range(workers) for item in ordered[k::workers]]
