"""Unit tests' own setting: SQLite studies opened in the test process skip the fsync of each
commit (``PRAGMA synchronous=OFF``). Optuna commits once per attribute, so a screen stage makes
thousands of commits; on a shared disk the fsyncs were most of these tests' time. What the tests
prove is unchanged: other processes still see every commit (the OS has it before the commit
returns); only a power cut could lose one, and no test cuts the power."""

from __future__ import annotations

import sqlite3

import sqlalchemy
from sqlalchemy import event


@event.listens_for(sqlalchemy.engine.Engine, "connect")
def _no_fsync(dbapi_connection: object, _record: object) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.close()
