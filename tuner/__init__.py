"""nccl-tune: does an NCCL environment make an inference server decode faster, and which one?

The pipeline, one module per stage: :mod:`tuner.inputs.config` (experiment file),
:mod:`tuner.inputs.space` (search space and presets), :mod:`tuner.server` (server process),
:mod:`tuner.measure` (single-stream measurement), :mod:`tuner.judging.stats` (confidence intervals),
:mod:`tuner.study` (the Optuna-driven sweep) and :mod:`tuner.report` (CSV, plots, report.md).
The simulator lives in :mod:`tuner.sim`, which the core never imports.
"""

__version__ = "0.1.0"
