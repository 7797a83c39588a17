"""Which commands run the bundled simulator (tuner/servers/kinds.py, simulated): the spellings of
the examples and of `nccl-tune sim`, and none of a real server's."""

from __future__ import annotations

import pytest

from tuner.servers import simulated


@pytest.mark.parametrize("argv", [
    ("{python}", "-m", "tuner.sim", "serve", "--port", "{port}"),
    ("/usr/bin/python3", "-m", "tuner.sim", "serve"),
    ("nccl-tune", "sim", "serve", "--port", "8000"),
    ("/opt/venv/bin/nccl-tune", "sim", "serve"),
])
def test_the_simulator(argv):
    assert simulated(argv)


@pytest.mark.parametrize("argv", [
    ("vllm", "serve", "m", "--tensor-parallel-size", "8"),
    ("{python}", "-m", "sglang.launch_server"),
    ("{python}", "-m", "tuner.simulator"),
    ("nccl-tune", "sweep", "sim.toml"),
    ("bash", "-c", "python -m tuner.sim serve"),  # a wrapper: a real server for all nccl-tune knows
    (),
])
def test_not_the_simulator(argv):
    assert not simulated(argv)
