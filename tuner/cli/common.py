"""What several subcommands share: the argument types (each refusal an argparse error, exit 2,
naming what is accepted), the help formatter, the study name a config gives, and the worker
registry a command holds its GPUs in."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tuner.errors import InputError

__all__ = [
    "CLI",
    "VIEW_STORAGE_HELP",
    "Help",
    "csv_ints",
    "duration",
    "figures_argument",
    "fraction",
    "hold_gpus",
    "nonneg_int",
    "positive",
    "request_arguments",
    "result_files",
    "server_arguments",
    "soak_minutes",
    "study_name",
    "study_name_from",
    "until",
    "url",
    "with_soak",
]

#: The "file" an error names for a flag.
CLI = "(command line)"
#: ``--storage``'s help in the views of every study (studies, status).
#: The environment variable a ``--storage`` left out is read from: a shared study's URL (its
#: password) need not be on a worker's command line, where ``ps`` on the host shows it.
STORAGE_ENV = "NCCL_TUNE_STORAGE"
VIEW_STORAGE_HELP = ("Optuna storage URL (default: $NCCL_TUNE_STORAGE, else every SQLite results/<study>/study.db "
                     "under --results)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def storage_default() -> str | None:
    """``--storage``'s default: ``$NCCL_TUNE_STORAGE`` (:data:`STORAGE_ENV`) when set and not
    empty, else None (the study's own SQLite file)."""
    return os.environ.get(STORAGE_ENV) or None


def duration(text: str) -> float:
    """``8h``, ``90m``, ``3600s``, ``1.5d`` in seconds; a bare number or 0 is refused."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not m:
        hint = f" (did you mean {text.strip()}h or {text.strip()}m?)" if re.fullmatch(r"\s*\d+(\.\d+)?\s*", text) else ""
        raise argparse.ArgumentTypeError(f"{text!r}: give a unit: s, m, h or d, e.g. 8h, 90m or 3600s{hint}")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the time budget must be above 0")
    return seconds


def until(text: str) -> datetime:
    """``HH:MM`` as the next such wall-clock time (tomorrow when it has passed today)."""
    try:
        t = datetime.strptime(text.strip(), "%H:%M")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use a wall-clock time HH:MM, e.g. 07:00") from None
    now = datetime.now()
    when = now.replace(hour=t.hour, minute=t.minute, second=0, microsecond=0)
    return when if when > now else when + timedelta(days=1)


def csv_ints(text: str) -> list[int]:
    """``1,2,4,8``: concurrency levels, each an integer >= 1."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: use a comma list of integers, e.g. 1,2,4,8") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: concurrency levels must be integers >= 1")
    return values


def nonneg_int(text: str) -> int:
    """An integer in [0, 2**32) (a seed, a count)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= v < 2**32:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 2**32)")
    return v


def positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """The type of a value of ``kind`` (int or float) above 0 and finite."""
    what = "a whole number above 0" if kind is int else "a finite number above 0"

    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: accepted is {what}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: accepted is {what}")
        return v
    return parse


def url(text: str) -> str:
    """A server base URL with its scheme (httpx needs one), without a trailing slash."""
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r}: accepted is a base URL with its scheme, "
                                         f"such as http://{text.split('://')[-1] or '127.0.0.1:8000'}")
    return text.rstrip("/")


def server_arguments(p: argparse.ArgumentParser) -> None:
    """``--url`` and ``--model`` on ``p``: the running server a probe or bench measures."""
    p.add_argument("--url", required=True, type=url, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", help="model id (default: first of /v1/models)")


def request_arguments(p: argparse.ArgumentParser, stall_help: str) -> None:
    """``--prompt``, ``--stall-timeout`` (s; ``stall_help`` says what it ends), ``--endpoint`` and
    ``--json`` on ``p``: how a probe or bench asks and what it prints."""
    p.add_argument("--prompt", default="Count from 1 to 50.", help="the prompt")
    p.add_argument("--stall-timeout", type=positive(float), default=120.0, help=stall_help)
    p.add_argument("--endpoint", choices=("chat", "completions"), default="chat",
                   help="chat completions, or completions for a base model without a chat template")
    p.add_argument("--json", action="store_true", help="print JSON")


def result_files(study_dir: Path, *, figures: bool = True) -> dict[str, str]:
    """The report's files in ``study_dir`` by name (``trials_csv``, ``report_md``,
    ``report_html``, ``judgement_json``, then each figure's PNG by its stem when ``figures``),
    those that exist: the ``files`` of ``sweep --json`` and ``check --json``."""
    named = {"trials_csv": "trials.csv", "report_md": "report.md", "report_html": "report.html",
             "judgement_json": "judgement.json"}
    out = {key: str(study_dir / name) for key, name in named.items() if (study_dir / name).is_file()}
    if figures:
        out.update({p.stem: str(p) for p in sorted(study_dir.glob("*.png"))})
    return out


def figures_argument(p: argparse.ArgumentParser, *, later: bool = True) -> None:
    """``--no-figures``, for every command that writes a study's report (sweep, check, report):
    ``args.no_figures`` True leaves the figures out (drawing them is most of a report's time).
    ``later``: the help says that ``nccl-tune report`` draws them afterwards (not in report's own)."""
    p.add_argument("--no-figures", action="store_true",
                   help="write trials.csv, report.md and report.html without the figures (drawing them is most of "
                        "the report's time; those of an earlier report are removed)"
                        + ("; nccl-tune report draws them later from the study" if later else ""))


def fraction(text: str) -> float:
    """A fraction in [0, 0.5) (the smallest effect worth calling faster)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < 0.5:
        raise argparse.ArgumentTypeError(f"{text!r}: a fraction in [0, 0.5), e.g. 0.01 for 1 %")
    return v


def soak_minutes(text: str) -> float:
    """``--soak MINUTES``: a number of minutes in [0, 1440] (0: no soak; 0.5 = 30 s)."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v <= 24 * 60:
        raise argparse.ArgumentTypeError(f"{text!r}: accepted is a number of minutes in [0, 1440] "
                                         "(0: no soak; fractions allowed, 0.5 = 30 s)")
    return v


def with_soak(cfg: Any, minutes: float | None) -> Any:
    """``cfg`` with ``--soak MINUTES`` in place of ``sweep.soak_minutes`` (None: as it is)."""
    if minutes is None:
        return cfg
    import dataclasses

    return dataclasses.replace(cfg, sweep=cfg.sweep.model_copy(update={"soak_minutes": minutes}))


def study_name(text: str) -> str:
    """A study name: a folder name under ``--results``."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, '.', '_' and '-' (a folder name under "
                                         "--results), starting with a letter or digit")
    return text


def study_name_from(config: str) -> str:
    """The study name a config file's stem gives; InputError (exit 2) when it is not one."""
    name = Path(config).stem
    try:
        return study_name(name)
    except argparse.ArgumentTypeError:
        raise InputError(CLI, "--study", name, "letters, digits, '.', '_' and '-'",
                         "the config file's name is not a usable study name; pass --study") from None


class Help(argparse.HelpFormatter):
    """Help that shows an option's default when it has a real one and its text does not say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            value = ",".join(map(str, action.default)) if isinstance(action.default, list) else action.default
            text += f" (default: {value})"
        return text


def hold_gpus(args: argparse.Namespace, cfg: Any, study: str, command: str) -> None:
    """Register this worker on its GPUs until the command ends (``args.held``), or raise
    GpusInUse (exit 3) naming the live worker of this host that shares one. A registry folder
    that cannot be written leaves the GPUs unchecked, said on stderr."""
    from tuner.study import register, this_worker, workers_dir

    where = workers_dir()
    try:
        held = register(this_worker(cfg, study=study, results=args.results, storage=getattr(args, "storage", None),
                                    command=command), where)
    except OSError as exc:
        print(f"warning: the worker registry {where} cannot be written ({exc.strerror or exc}): GPUs shared with "
              "another nccl-tune worker are not checked; set NCCL_TUNE_WORKERS_DIR to a writable folder",
              file=sys.stderr)
        return
    args.held.callback(held.release)
