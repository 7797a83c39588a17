"""Every command the README shows in a console block, run exactly as printed from a checkout's
root (a temporary copy of ``examples/`` and ``search_spaces/``, so the commands' own default
``results/`` folder is used and nothing lands in the checkout), prints what the README shows
under it, numbers masked: the decision words included. How commands are found, run and
checked: tests/readme_commands.py, whose ``--write`` regenerates the README's outputs.

Not run here: ``make demo`` and ``make test`` (``sh`` blocks: ``make demo`` is the night
``nccl-tune sweep examples/sim.toml --study demo`` that a console block shows and this test runs,
``make test`` is this suite), and the real vLLM night, which tests/e2e/test_vllm_cpu.py runs as
printed.

The commands use the examples' own ports (8477 for examples/sim.toml): a night of the same
example running on this machine meanwhile (a `make demo`) fails it with exit 3, naming that night."""

from __future__ import annotations

import pytest

from tests import readme_commands

# A simulated night's verdict rests on timed launches, which a busy machine shrinks.
pytestmark = [pytest.mark.slow, pytest.mark.alone]


@pytest.mark.timeout(1200)
def test_readme_commands_print_what_the_readme_shows(tmp_path):
    runs = readme_commands.results(tmp_path / "repo")
    assert runs, "the README shows no console command this test runs"
    bad = readme_commands.problems(runs)
    assert not bad, "\n\n".join(bad)
