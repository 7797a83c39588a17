"""NCCL's model of the machine, judged: where it may be wrong, what it costs, the fixes first.

``findings`` reads one launch's :class:`tuner.nccl.machine.NcclMachine` and judges it
(:func:`triage`); ``model`` holds the types (:class:`Triage`, :class:`Finding`, :class:`FixSet`)
and their plain-JSON form, stored in the study and in diagnose.json.
"""

from tuner.triage.findings import MIN_CHANNELS_FIX, NO_GRAPH, triage
from tuner.triage.model import COMBINED, FILES, Finding, FixSet, Triage

__all__ = ["COMBINED", "FILES", "MIN_CHANNELS_FIX", "NO_GRAPH", "Finding", "FixSet", "Triage", "triage"]
