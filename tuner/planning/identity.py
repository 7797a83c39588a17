"""A set's identity: which sets are one set to NCCL, and so are relaunched once.

A set is its canonical form for the NCCL version and topology the night runs on (``ring`` is
``Ring``, ``0x400000`` is ``4194304``, a value equal to NCCL's default is unset:
:func:`tuner.nccl.canonical_set`). With a ``nccl-tune diagnose`` of the study
(``results/<study>/diagnose.json``), the variables that cannot act on the decode allreduce
under NCCL's pick there are dropped too (:func:`tuner.nccl.decode.decode_effect`): sets that
differ only by those are one set at the decode size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tuner.diagnose import JSON_NAME, decode_pick, load_diagnosis
from tuner.nccl import DecodeChoice, NcclVersion, Topology, canonical_set, decode_effect
from tuner.record import set_key

__all__ = ["DecodeContext", "Facts", "load_decode_context", "set_identity"]


@dataclass(frozen=True)
class Facts:
    """What the rules read about the machine: the NCCL ``version`` and ``topology`` (None
    while unknown; the sweep learns both from the first baseline's log), and ``cpu_vendor``,
    the CPU ``[nccl] cpu_vendor`` names (None if not given). A topology whose log named no CPU
    takes ``cpu_vendor``; one that named it keeps NCCL's own (what NCCL's P2P default reads,
    src/graph/paths.cc ncclTopoCheckP2p)."""

    version: NcclVersion | None = None
    topology: Topology | None = None
    cpu_vendor: str | None = None

    def __post_init__(self) -> None:
        if self.topology is not None and self.topology.cpu_vendor is None and self.cpu_vendor is not None:
            object.__setattr__(self, "topology", replace(self.topology, cpu_vendor=self.cpu_vendor))

    @property
    def cpu(self) -> str | None:
        """The CPU the rules judge by: the topology's (NCCL's GRAPH lines), else ``cpu_vendor``."""
        return self.topology.cpu_vendor if self.topology is not None else self.cpu_vendor


@dataclass(frozen=True)
class DecodeContext:
    """The decode allreduce as ``nccl-tune diagnose`` found it: ``nbytes`` (B), NCCL's
    ``choice`` there, the diagnosis' own ``version``/``topology`` (used where the night's are
    unknown), the communicator's ``search_channels`` and ``transports``, and the ``source`` file."""

    nbytes: int
    choice: DecodeChoice
    version: NcclVersion | None
    topology: Topology | None
    search_channels: int | None
    transports: tuple[str, ...]
    source: Path

    def sentence(self) -> str:
        """What this means for the plan, in one line (the sweep's log, the dry run)."""
        return (f"{self.source}: the decode allreduce ({self.nbytes} B) runs {self.choice.algorithm}/"
                f"{self.choice.protocol}; sets that differ only by variables that cannot act there are "
                "relaunched once")


def load_decode_context(study_dir: Path) -> DecodeContext | None:
    """The decode context of ``study_dir/diagnose.json``, or None when there is no usable
    diagnosis (none, unreadable, no decode size, no NCCL pick there, NCCL not on the decode path)."""
    diag = load_diagnosis(study_dir)
    pick = decode_pick(diag) if diag is not None else None
    choice = diag.decode_choice() if diag is not None else None
    if diag is None or pick is None or choice is None:
        return None
    return DecodeContext(pick[0], choice, diag.version(), diag.topology_info(), diag.topology.get("coll_channels"),
                         tuple(diag.topology.get("transports", ())), Path(study_dir) / JSON_NAME)


def set_identity(env: dict[str, str], flags: list[str], facts: Facts, decode: DecodeContext | None = None) -> str:
    """The key of a set (:func:`tuner.record.set_key` of its canonical form, see the
    module docstring): two sets with one key are one relaunch."""
    canon = canonical_set(env, facts.version, facts.topology)
    if decode is not None:
        topo = facts.topology or decode.topology
        canon = decode_effect(canon, decode.nbytes, (decode.topology or facts.topology or Topology(8)).nranks,
                              decode.choice, version=facts.version or decode.version, topology=topo,
                              search_channels=decode.search_channels, transports=decode.transports).effective
    return set_key(canon, flags)
