"""Whole sweeps through the CLI on the storages several hosts share: a real PostgreSQL server
(tests/pg.py) and a journal file, against the independent test server
(tests/servers/envrate_server.py). Two relaunches each, few tokens."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd
import psycopg
import pytest
from optuna.storages._heartbeat import is_heartbeat_enabled

from tests.helpers import SERVERS, cli, envrate_command, server_processes, write_config
from tuner.study.storage import JOURNAL, hide_password, open_study

LL = '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n'


def _config(tmp_path: Path, command: list[str]) -> Path:
    """Baseline, LL, baseline: the sweeps here pass --no-confirm, so whatever LL's verdict (5 %
    faster, within the noise of 2 runs) no confirmation relaunch is added."""
    space = tmp_path / "space.toml"
    space.write_text(LL)
    return write_config(tmp_path / "exp.toml", command=command, space=space, trials=3, max_tokens=20, repeats=2,
                        extra_sweep='mode = "presets"')


def _without_test_server_vars() -> dict[str, str]:
    """The environment a user's runner has: no test variable holding the URL."""
    return {k: v for k, v in os.environ.items() if not k.startswith("NCCL_TUNE_TEST_PG")}


@pytest.mark.postgres
def test_sweep_on_postgres_never_writes_the_password(tmp_path: Path, pg_url: str):
    """A sweep and a report with ``--storage postgresql://nccl:PASSWORD@...``: both work, the
    study has heartbeats, and the password is in no results file, no server log (the server
    prints its whole environment and argv), no terminal output and no row of the database."""
    password = urlsplit(pg_url).password
    assert password and len(password) >= 16
    script = str(SERVERS / "envrate_server.py")
    code = (f"import os,sys,runpy; print('ENVIRON', dict(os.environ), flush=True); "
            f"print('ARGV', sys.argv, flush=True); runpy.run_path({script!r}, run_name='__main__')")
    cfg = _config(tmp_path, [sys.executable, "-c", code, "--port", "{port}"])
    results = tmp_path / "r"
    env = _without_test_server_vars()
    sweep = cli("sweep", str(cfg), "--results", str(results), "--study", "pg", "--storage", pg_url, "--no-confirm",
                env=env)
    assert sweep.returncode == 0, sweep.stderr[-4000:]
    report = cli("report", "--results", str(results), "--study", "pg", "--storage", pg_url, env=env)
    assert report.returncode == 0, report.stderr[-4000:]

    study_dir = results / "pg"
    df = pd.read_csv(study_dir / "trials.csv")
    assert list(df["kind"]) == ["baseline", "preset", "baseline"] and (df["status"] == "ok").all()
    assert not (study_dir / "study.db").exists()  # the study lives in PostgreSQL only
    # Failures name where the password leaked, never the password (pytest would print it).
    streams = {"sweep stdout": sweep.stdout, "sweep stderr": sweep.stderr, "report stdout": report.stdout,
               "report stderr": report.stderr}
    assert not [name for name, text in streams.items() if password in text]
    files = [p for p in study_dir.rglob("*") if p.is_file()]
    assert {"trials.csv", "report.md", "trial-0000.log"} <= {p.name for p in files}
    assert not [str(p) for p in files if any(password.encode(c) in p.read_bytes() for c in ("utf-8", "utf-16-le"))]
    log = (study_dir / "logs" / "trial-0000.log").read_text()
    assert "ENVIRON {" in log and "ARGV [" in log  # the server did print what it was given

    study = open_study("pg", pg_url, create=False)
    assert is_heartbeat_enabled(study._storage)
    assert study.user_attrs["storage_hint"] == hide_password(pg_url)
    attrs = [study.user_attrs, study._storage.get_study_system_attrs(study._study_id)]
    attrs += [a for t in study.get_trials() for a in (t.user_attrs, t.system_attrs, t.params)]
    in_attrs = password in json.dumps(attrs)
    assert not in_attrs, "the password is in a study or trial attribute"
    with psycopg.connect(pg_url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'").fetchall()]
        assert {"studies", "trials", "trial_user_attributes", "study_user_attributes"} <= set(tables)
        for table in tables:
            rows = conn.execute(f'SELECT row_to_json(t)::text FROM "{table}" t').fetchall()
            assert sum(password in r[0] for r in rows) == 0, f"the password is in table {table}"
    assert not server_processes(cfg)


def test_sweep_on_a_journal_file(tmp_path: Path):
    """``--storage journal:///...`` runs a sweep whose study is the journal file alone, and
    ``report`` rebuilds the same table from it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    url = f"{JOURNAL}{shared / 'study.log'}"
    cfg = _config(tmp_path, envrate_command())
    results = tmp_path / "r"
    sweep = cli("sweep", str(cfg), "--results", str(results), "--study", "j", "--storage", url, "--no-confirm")
    assert sweep.returncode == 0, sweep.stderr[-4000:]
    first = (results / "j" / "trials.csv").read_text()
    (results / "j" / "trials.csv").unlink()
    report = cli("report", "--results", str(results), "--study", "j", "--storage", url)
    assert report.returncode == 0, report.stderr[-4000:]
    assert (results / "j" / "trials.csv").read_text() == first
    df = pd.read_csv(results / "j" / "trials.csv")
    assert list(df["kind"]) == ["baseline", "preset", "baseline"] and (df["status"] == "ok").all()
    assert not (results / "j" / "study.db").exists() and (shared / "study.log").stat().st_size > 1000
    assert not is_heartbeat_enabled(open_study("j", url, create=False)._storage)
    assert not server_processes(cfg)
