"""The dispatcher's table (tuner/cli/dispatch.py, COMMANDS) is every subcommand module of
tuner/cli/, each offering add_parser and run (sim: run_argv), sim last; --help names them all."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

import tuner.cli
from tuner.cli.dispatch import COMMANDS, main

CLI_DIR = Path(tuner.cli.__file__).parent
NOT_COMMANDS = {"__init__", "__main__", "dispatch", "common"}


def test_every_subcommand_module_is_in_the_table_and_offers_the_protocol():
    modules = {p.stem for p in CLI_DIR.glob("*.py")} - NOT_COMMANDS
    assert {m.__name__.rsplit(".", 1)[1] for m in COMMANDS.values()} == modules
    assert all(name.replace("-", "") == m.__name__.rsplit(".", 1)[1] for name, m in COMMANDS.items())  # read-log
    assert list(COMMANDS)[-1] == "sim"  # its argv is the simulator's: parsed apart, listed last
    for name, module in COMMANDS.items():
        assert callable(module.add_parser), name
        assert callable(module.run_argv if name == "sim" else module.run), name


def test_help_lists_every_subcommand():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    for name in COMMANDS:
        assert name in out.getvalue(), name


def test_version_through_the_cli(tmp_path):
    """``nccl-tune --version``: the installed distribution's version and the Python running it,
    exit 0, from any directory; a subcommand is not needed."""
    from importlib.metadata import version

    from tests.helpers import run_cli

    res = run_cli("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.startswith(f"nccl-tune {version('nccl-tune')} (Python ") and sys.executable in res.stdout
