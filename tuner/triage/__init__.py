"""NCCL's model of the machine, judged: where it may be wrong, what it costs, the fixes first.

``findings`` reads one launch's :class:`tuner.nccl.machine.NcclMachine` and judges it
(:func:`triage`); ``model`` holds the types (:class:`Triage`, :class:`Finding`, :class:`FixSet`)
and their plain-JSON form, stored in the study and in diagnose.json; ``bound`` says how many
fix sets the triage can propose for a space before any log (:func:`fix_bound`, the dry run's bound);
``p2pgates`` judges what the host shows about GPU P2P and NCCL's own P2P check (:func:`p2p_health`:
each gate that blocks P2P with its documented fix; the host's facts, :class:`HostP2p`, are read
by :mod:`tuner.server.p2phost`); ``network`` judges the network across nodes from NCCL's NET lines
(:func:`network_triage`: the transport of each cross-node pair, a fallback to sockets with its
likely cause, no GPU Direct RDMA, a RoCE GID problem), joined to the triage by :func:`with_network`.
"""

from tuner.triage.bound import FixBound, fix_bound
from tuner.triage.findings import triage
from tuner.triage.model import Finding, FixSet, Triage
from tuner.triage.network import network_triage, with_network
from tuner.triage.p2pgates import AcsPort, HostP2p, P2pHealth, acs_words, p2p_health

__all__ = [
    "AcsPort",
    "Finding",
    "FixBound",
    "FixSet",
    "HostP2p",
    "P2pHealth",
    "Triage",
    "acs_words",
    "fix_bound",
    "network_triage",
    "p2p_health",
    "triage",
    "with_network",
]
