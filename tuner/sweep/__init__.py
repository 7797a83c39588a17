"""The sweep: one Optuna study, one server relaunch per trial, every trial against the baseline.

:mod:`~tuner.study.storage` (every Optuna access), :mod:`~tuner.planning` (what to relaunch
next), :mod:`~tuner.sweep.trial` (one relaunch to one record), :mod:`~tuner.sweep.runner` (the
loop, budget, recovery), :mod:`~tuner.study.inflight` (this host's runners and what they have in
flight), :mod:`~tuner.server.signals` (SIGHUP/SIGINT/SIGTERM).
"""

from tuner.sweep.runner import Sweep, SweepOptions, SweepOutcome

__all__ = ["Sweep", "SweepOptions", "SweepOutcome"]
