"""NCCL's model of the machine, judged: where it may be wrong, what it costs, the fixes first.

``findings`` reads one launch's :class:`tuner.nccl.machine.NcclMachine` and judges it
(:func:`triage`); ``model`` holds the types (:class:`Triage`, :class:`Finding`, :class:`FixSet`)
and their plain-JSON form, stored in the study and in diagnose.json; ``bound`` says how many
fix sets the triage can propose for a space before any log (:func:`fix_bound`, the dry run's bound).
"""

from tuner.triage.bound import FixBound, fix_bound
from tuner.triage.findings import triage
from tuner.triage.model import Finding, FixSet, Triage

__all__ = [
    "Finding",
    "FixBound",
    "FixSet",
    "Triage",
    "fix_bound",
    "triage",
]
