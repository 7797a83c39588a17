"""nccl-tune: does an NCCL environment make an inference server decode faster, and which one?

The pipeline, one module per stage: :mod:`tuner.config` (experiment file),
:mod:`tuner.space` (search space and presets), :mod:`tuner.launcher` (server process),
:mod:`tuner.probe` (single-stream measurement), :mod:`tuner.stats` (confidence intervals),
:mod:`tuner.study` (the Optuna-driven sweep) and :mod:`tuner.report` (CSV, plots, report.md).
The simulator lives in :mod:`tuner.sim`, which the core never imports.
"""

__version__ = "0.1.0"
