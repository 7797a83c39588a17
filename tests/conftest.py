"""Fixtures shared by every test: the simulator (``sim``), a stand-in NVML (``nvml``),
search-space files, and each test's own worker registry folder (``workers_dir``); the
PostgreSQL fixtures come from tests/pg.py. Helpers live in
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


@pytest.fixture(autouse=True)
def workers_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own worker registry (``NCCL_TUNE_WORKERS_DIR``, tuner.study.workers): the
    sweeps of tests running side by side (xdist) or of a night on this machine never refuse
    each other; the workers one test starts see each other."""
    from tuner.study.workers import WORKERS_DIR_VAR

    folder = tmp_path_factory.mktemp("workers")
    monkeypatch.setenv(WORKERS_DIR_VAR, str(folder))
    return folder


@pytest.fixture(autouse=True)
def no_soak(monkeypatch: pytest.MonkeyPatch) -> None:
    """No soak where a test's experiment file sets none (``NCCL_TUNE_SOAK_MINUTES=0``,
    tuner.inputs.config.SOAK_ENV): the product's 10 minutes would make every night's
    confirmation a long one; the soak's tests set ``sweep.soak_minutes`` or ``--soak``."""
    monkeypatch.setenv("NCCL_TUNE_SOAK_MINUTES", "0")


@pytest.fixture(autouse=True)
def no_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No correctness gate where a test's experiment file sets no ``[gates] answers``
    (``NCCL_TUNE_ANSWERS=0``, tuner.inputs.config.ANSWERS_ENV): every launch would answer 4 x 256
    tokens more; the gate's tests set ``answers = true``."""
    monkeypatch.setenv("NCCL_TUNE_ANSWERS", "0")


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    """Factory: ``nvml(gpus, driver="550.54.15", processes=None)`` makes ``import pynvml`` give
    a stand-in NVML that sees ``gpus`` (a list of model names; GPU i has UUID ``GPU-i...``) and
    on GPU i the compute processes of pids ``processes[i]`` (1 GiB each); ``nvml(None)`` makes
    NVML absent (the import fails), as on a machine without the NVIDIA driver."""

    def install(gpus: list[str] | None, driver: str = "550.54.15",
                processes: dict[int, list[int]] | None = None) -> None:
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
        fake.nvmlDeviceGetComputeRunningProcesses = lambda h: [  # type: ignore[attr-defined]
            types.SimpleNamespace(pid=pid, usedGpuMemory=2**30) for pid in (processes or {}).get(h, [])]
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
