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

from tuner.screen.bound import Bound
from tuner.screen.nccltests import parse_output
from tuner.screen.rank import Spearman, predicted_gain_pct, screen_key, spearman
from tuner.screen.stage import RANKING_KEPT, Stage, run_stage
from tuner.screen.store import SUFFIX, ScreenRecord
from tuner.screen.table import SCREEN_CSV, read_screen_csv, write_screen_csv

__all__ = [
    "RANKING_KEPT",
    "SCREEN_CSV",
    "SUFFIX",
    "Bound",
    "ScreenRecord",
    "Spearman",
    "Stage",
    "parse_output",
    "predicted_gain_pct",
    "read_screen_csv",
    "run_stage",
    "screen_key",
    "spearman",
    "write_screen_csv",
]
