"""``nccl-tune``: sweep, probe, bench, report, diagnose, check, studies, status, compare, sim.

One module per subcommand (as vLLM's ``benchmarks/sweep`` keeps an ``(args, main)`` pair per
subcommand): :mod:`~tuner.cli.sweep`, :mod:`~tuner.cli.probe`, :mod:`~tuner.cli.bench`,
:mod:`~tuner.cli.report`, :mod:`~tuner.cli.diagnose`, :mod:`~tuner.cli.check`,
:mod:`~tuner.cli.studies`, :mod:`~tuner.cli.status`, :mod:`~tuner.cli.compare` and
:mod:`~tuner.cli.sim` each expose ``add_parser(subparsers)``, the subcommand's arguments, and
``run(args) -> int``, its body, which parses and calls the room that owns the work (``sim``:
``run_argv``, the simulator parses its own). :mod:`~tuner.cli.dispatch` builds the parser from
them and maps every error to its exit status in one place (:func:`main`, the console script
``nccl-tune = tuner.cli:main`` and ``python -m tuner.cli``); :mod:`~tuner.cli.common` holds the
argument types the subcommands share. A new subcommand is a new module here and one entry in
:data:`~tuner.cli.dispatch.COMMANDS`.
"""

from tuner.cli.dispatch import main

__all__ = [
    "main",
]
