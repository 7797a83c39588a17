"""``nccl-tune sim ...``: the bundled simulator (``tuner/sim/``), whose own command line parses
its arguments; the dispatcher hands it the argv after ``sim`` untouched (:func:`run_argv`)."""

from __future__ import annotations

from typing import Any

__all__ = ["add_parser", "run_argv"]


def add_parser(sub: Any) -> None:
    """The ``sim`` entry of ``nccl-tune --help`` (its arguments are the simulator's)."""
    sub.add_parser("sim", help="the bundled simulator: nccl-tune sim serve --port P ...", add_help=False)


def run_argv(argv: list[str]) -> int:
    """Run the simulator's command line on ``argv``; returns its exit status (its own codes)."""
    from importlib import import_module

    code: int = import_module("tuner.sim.cli").main(argv)
    return code
