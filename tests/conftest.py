"""Fixtures shared by every test (helpers live in tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

# Kept importable as ``conftest`` for modules not yet moved to ``tests.helpers``.
from tests.helpers import (  # noqa: F401
    ROOT,
    SERVERS,
    alive_pids,
    envrate_command,
    free_port,
    processes_with,
    run_cli,
    server_processes,
    start_cli,
    wait_for_log,
    write_config,
)
from tests.pg import pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures, see tests/pg.py)


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
