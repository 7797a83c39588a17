"""PostgreSQL fixtures: a real server for the tests marked ``postgres``.

* ``pg_server`` (session): the URL of the server's ``nccl_test`` database, from
  ``NCCL_TUNE_TEST_PG_URL`` (set by ``make test``, which runs pytest inside
  ``python tests/pgserver.py run --``) or, when that is absent, from a throwaway server this
  session starts and stops (tests/pgserver.py). When neither works the test FAILS with the
  reason: a CI without PostgreSQL must not pass by skipping.
* ``pg_url`` (per test): the URL of a fresh database of its own on that server, dropped
  afterwards, so tests run side by side (pytest-xdist) without sharing a study.
* :func:`fresh_database`: the same as a context manager, for tests that need several.

Mark such tests ``@pytest.mark.postgres`` (``-m postgres`` selects them).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.pgserver import URL_VAR, PgError, PgServer


def _libpq(url: str) -> str:
    """``url`` as libpq reads it (SQLAlchemy's ``postgresql+driver://`` prefix removed)."""
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """Create an empty database on the server of ``server_url`` (whose user may create
    databases), yield its URL (same user, password, host and scheme), then drop it, closing
    whatever connections are still open to it."""
    import psycopg

    name = f"t_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}_{uuid.uuid4().hex[:10]}"
    base, _, _ = server_url.partition("?")[0].rpartition("/")
    with psycopg.connect(_libpq(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        # FORCE cannot end a backend of another role (an autovacuum worker that has just started
        # on the new database: "must be a member of the role whose process is being terminated");
        # such a worker ends within seconds, so try again for a while before failing
        deadline = time.monotonic() + 30.0
        while True:
            try:
                with psycopg.connect(_libpq(server_url), autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.errors.InsufficientPrivilege:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of the test server's own database (see the module docstring); fails, never skips."""
    given = os.environ.get(URL_VAR)
    if given:
        yield given
        return
    server, url, problem = PgServer(), "", ""
    try:
        url = server.start()
    except (PgError, OSError) as exc:
        problem = str(exc)
    if problem:  # outside the except block: the reason alone, without a chained traceback
        pytest.fail(f"this test needs PostgreSQL: ${URL_VAR} is not set and no server could be started "
                    f"({problem}); run it under `python tests/pgserver.py run -- pytest ...` or `make test`",
                    pytrace=False)
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """URL of a fresh database for this test alone on the test server, dropped afterwards."""
    with fresh_database(pg_server) as url:
        yield url
