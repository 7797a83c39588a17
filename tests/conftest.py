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
    """Long tests (marked slow) first, so parallel workers overlap them with the short ones
    instead of ending the run on them; otherwise collection order is kept."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
