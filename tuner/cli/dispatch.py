"""The dispatcher of ``nccl-tune``: the parser built from each subcommand module's
``add_parser``, the chosen module's ``run(args)`` called, and every NcclTuneError it raises
turned into one paragraph on stderr and its ``exit_code`` (:class:`tuner.errors.ExitCode`), in
this one place. Bad input exits 2 with the file, key, value and what is accepted; an
interrupted sweep exits 129/130/143 with its server torn down.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
from types import ModuleType

from tuner.cli import bench, check, compare, diagnose, probe, readlog, report, sim, status, studies, sweep
from tuner.cli.common import Help
from tuner.errors import ExitCode, InputError, NcclTuneError, ProbeError, TrialFailed

__all__ = ["COMMANDS", "main", "version_line"]

#: Each subcommand's module, in ``--help``'s order (``sim`` last: its argv is the simulator's).
COMMANDS: dict[str, ModuleType] = {
    "sweep": sweep, "probe": probe, "bench": bench, "report": report, "diagnose": diagnose, "check": check,
    "studies": studies, "status": status, "compare": compare, "read-log": readlog, "sim": sim,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (each module's ``add_parser``)."""
    p = argparse.ArgumentParser(prog="nccl-tune", description="Relaunch an inference server under NCCL environment "
                                "sets and judge each against the untuned baseline.",
                                formatter_class=Help)
    p.add_argument("--version", action=_Version, nargs=0,
                   help="print nccl-tune's version and the Python it runs on, then exit")
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


class _Version(argparse.Action):
    """``--version``: :func:`version_line` as one line (argparse's own action wraps it at the
    terminal's width), exit 0."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    """``nccl-tune 0.1.0 (Python 3.12.3, /path/to/python)``: the installed distribution's version
    (importlib.metadata, i.e. the wheel's METADATA) and the interpreter that runs it; "not
    installed" when the package runs from a source tree pip never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        mine = version("nccl-tune")
    except PackageNotFoundError:
        mine = "(not installed)"
    return f"nccl-tune {mine} (Python {platform.python_version()}, {sys.executable})"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nccl-tune`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return sim.run_argv(argv[1:])
    trailing: list[str] = []
    if argv[:1] == ["check"] and "--" in argv:  # `check ... -- --disable-custom-all-reduce`: the set's flags
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    args.trailing = trailing
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.held = contextlib.ExitStack()  # what a command holds until it ends (its worker registry file)
    try:
        return int(COMMANDS[args.command].run(args))
    except NcclTuneError as exc:
        print(f"nccl-tune: {_prefix(exc, args)}{exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("nccl-tune: interrupted", file=sys.stderr)
        return int(ExitCode.SIGINT)
    except BrokenPipeError:  # `nccl-tune report ... | head`: the reader left; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.OK)
    finally:
        args.held.close()


def _prefix(exc: NcclTuneError, args: argparse.Namespace) -> str:
    """What the one paragraph on stderr starts with, after ``nccl-tune: ``."""
    if isinstance(exc, InputError):
        return "error: "
    if args.command == "diagnose" and isinstance(exc, TrialFailed):
        return "diagnose: the server launch failed: "
    if isinstance(exc, ProbeError):
        return f"{args.command} failed against {getattr(args, 'url', '?')}: "
    return ""
