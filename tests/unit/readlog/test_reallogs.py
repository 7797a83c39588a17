"""The eight real logs of tests/fixtures/reallogs/ (users' pastes, unedited) read as their README says."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.readlog.facts import CHECKS, REALLOGS
from tuner.readlog import read_logs


def test_every_file_has_its_check():
    assert sorted(p.name for p in REALLOGS.glob("*.log")) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_read_log_json_gives_the_readme_facts(name):
    proc = subprocess.run([sys.executable, "-m", "tuner.cli", "read-log", "--json", str(REALLOGS / name)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    CHECKS[name](json.loads(proc.stdout))


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_read_logs_function_gives_the_same(name):
    CHECKS[name](read_logs([REALLOGS / name]).to_dict())
