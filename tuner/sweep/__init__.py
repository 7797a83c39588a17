"""The night: one Optuna study, one server relaunch per trial, every trial against the baseline.

:mod:`~tuner.sweep.runner` (the loop: plan, launch, measure, judge, record; the reserved checks),
:mod:`~tuner.sweep.runners` (the study's other runners: who asked first, recovery after dead ones),
:mod:`~tuner.sweep.lessons` (what the first baseline teaches the night: triage, the backend check),
:mod:`~tuner.sweep.check` (``nccl-tune check``: a deployed set relaunched beside the baseline and judged),
:mod:`~tuner.sweep.trial` (one relaunch to one record), :mod:`~tuner.sweep.evidence` (what NCCL
did in a relaunch, from its log, and whether its backend choice ran), :mod:`~tuner.sweep.dryrun` (``--dry-run``: planning's plan in
words), :mod:`~tuner.sweep.prelaunch` (``--dry-run``: the sweep's checks before its first launch),
:mod:`~tuner.sweep.progress` (what the runner shows). What to relaunch next is
:mod:`tuner.planning`'s; the Optuna storage is :mod:`tuner.study`'s.
"""

from tuner.sweep.check import (
    CHECK_TRIALS,
    PRIOR_WORDS,
    judge_check,
    never_confirmed,
    open_against,
    resolve_set,
    run_check,
)
from tuner.sweep.dryrun import plan_lines
from tuner.sweep.evidence import read
from tuner.sweep.prelaunch import start_checks
from tuner.sweep.progress import NIGHT_LOG, Progress
from tuner.sweep.runner import Sweep, SweepOptions, SweepOutcome

__all__ = [
    "CHECK_TRIALS",
    "NIGHT_LOG",
    "PRIOR_WORDS",
    "Progress",
    "Sweep",
    "SweepOptions",
    "SweepOutcome",
    "judge_check",
    "never_confirmed",
    "open_against",
    "plan_lines",
    "read",
    "resolve_set",
    "run_check",
    "start_checks",
]
