"""The screen: nccl-tests under many NCCL sets in seconds each, before any 36-minute relaunch.

:mod:`~tuner.screen.stage` (the stage: runs, conclusions, the summary), :mod:`~tuner.screen.loop`
(the sampler-driven runs, untuned first and last), :mod:`~tuner.screen.limit` (the bound and the
stop check),
:mod:`~tuner.screen.measure` (one run of one set), :mod:`~tuner.screen.run` (process machinery:
environment, session, timeout, tree teardown, the ``-J`` probe), :mod:`~tuner.screen.store`
(the ``<study>-screen`` Optuna study), :mod:`~tuner.screen.rank` (ranking, Spearman agreement),
:mod:`~tuner.screen.sizes` (decode/prefill sizes from ``[model]``), :mod:`~tuner.screen.table`
(screen.csv), :mod:`~tuner.screen.export` (tuner_perf.csv, nccl_tuner.conf).
"""

from tuner.screen.limit import nccl_carries, noise_pct
from tuner.screen.rank import screen_key
from tuner.screen.stage import Stage, deadline, run_stage
from tuner.screen.store import known_bad

__all__ = ["Stage", "deadline", "known_bad", "nccl_carries", "noise_pct", "run_stage", "screen_key"]
