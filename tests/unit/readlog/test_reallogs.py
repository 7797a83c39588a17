"""The eight real logs of tests/fixtures/reallogs/ (users' pastes, unedited) read as their README says."""

from __future__ import annotations

import json

import pytest

from tests.unit.readlog.facts import CHECKS, REALLOGS
from tuner.readlog import read_logs


def test_every_file_has_its_check():
    assert sorted(p.name for p in REALLOGS.glob("*.log")) == sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_read_log_json_gives_the_readme_facts(name):
    """What ``read-log --json`` prints is this object (tests/e2e/test_read_log.py runs the command
    and holds its output to it, JSON and all)."""
    CHECKS[name](json.loads(json.dumps(read_logs([REALLOGS / name]).to_dict())))
