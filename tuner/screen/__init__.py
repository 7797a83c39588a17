"""The screen: nccl-tests under many NCCL sets in seconds each, before any 36-minute relaunch.

:mod:`~tuner.screen.stage` (the sampler-driven loop, the bound, the stop check),
:mod:`~tuner.screen.measure` (one run of one set), :mod:`~tuner.screen.run` (process machinery:
environment, session, timeout, tree teardown, the ``-J`` probe), :mod:`~tuner.screen.store`
(the ``<study>-screen`` Optuna study), :mod:`~tuner.screen.rank` (ranking, Spearman agreement),
:mod:`~tuner.screen.sizes` (decode/prefill sizes from ``[model]``), :mod:`~tuner.screen.table`
(screen.csv), :mod:`~tuner.screen.export` (tuner_perf.csv, nccl_tuner.conf).
"""

from tuner.screen.rank import screen_key
from tuner.screen.stage import Stage, deadline, nccl_carries, noise_pct, run_stage
from tuner.screen.store import known_bad

__all__ = ["Stage", "deadline", "known_bad", "nccl_carries", "noise_pct", "run_stage", "screen_key"]
