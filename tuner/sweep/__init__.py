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
    WINNER,
    Against,
    CheckedSet,
    CheckVerdict,
    check_space,
    design,
    judge_check,
    open_against,
    resolve_set,
    run_check,
)
from tuner.sweep.dryrun import backend_lines, plan_lines
from tuner.sweep.evidence import CHANNEL_LINES, Evidence, debug_env, debug_file, nccl_dir, read, set_choice
from tuner.sweep.prelaunch import StartChecks, start_checks
from tuner.sweep.progress import Progress, proof_line
from tuner.sweep.runner import Sweep, SweepOptions, SweepOutcome
from tuner.sweep.trial import PhaseCallback, TrialContext, counted_in_order, log_path, relaunch

__all__ = [
    "CHANNEL_LINES",
    "CHECK_TRIALS",
    "PRIOR_WORDS",
    "WINNER",
    "Against",
    "CheckVerdict",
    "CheckedSet",
    "Evidence",
    "PhaseCallback",
    "Progress",
    "StartChecks",
    "Sweep",
    "SweepOptions",
    "SweepOutcome",
    "TrialContext",
    "backend_lines",
    "check_space",
    "counted_in_order",
    "debug_env",
    "debug_file",
    "design",
    "judge_check",
    "log_path",
    "nccl_dir",
    "open_against",
    "plan_lines",
    "proof_line",
    "read",
    "relaunch",
    "resolve_set",
    "run_check",
    "set_choice",
    "start_checks",
]
