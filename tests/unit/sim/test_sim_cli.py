"""The simulator's command line: it names itself as invoked, help without markup, bad input."""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.simproc import run_sim
from tuner.sim.cli import main


def help_of(*argv, prog=None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--help"]) if prog is None else main([*argv, "--help"], prog=prog)
    assert code == 0
    return out.getvalue()


@pytest.mark.parametrize("argv", [(), ("serve",), ("model",), ("all-reduce-perf",)])
def test_help_names_nccl_tune_sim_and_has_no_markup(argv):
    text = help_of(*argv)
    assert text.startswith("usage: nccl-tune sim") and "tuner.sim" not in text
    assert "``" not in text and ":func:" not in text and ".. " not in text


def test_serve_help_shows_defaults_and_new_options():
    text = " ".join(help_of("serve").split())
    assert "--ignore-var NAME" in text and "--disable-custom-all-reduce" in text
    assert "(default: 127.0.0.1)" in text and "(default: reasoning)" in text
    assert "first streamed request asking for more than 8 tokens" in text


def test_python_m_names_itself():
    done = run_sim("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m tuner.sim")
    assert done.stdout.count("all-reduce-perf") >= 1


def test_bad_input_is_exit_2():
    assert main(["serve", "--profile", "nope"]) == 2
    assert main(["serve", "--fault", "explode"]) == 2
    assert main(["bogus"]) == 2
    assert main(["model", "--env", "NOEQUALS"]) == 2
