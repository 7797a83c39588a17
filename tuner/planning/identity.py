"""A set's identity: which sets are one set to NCCL, and so are relaunched once.

A set is its canonical form for the NCCL version and topology the night runs on (``ring`` is
``Ring``, ``0x400000`` is ``4194304``, a value equal to NCCL's default is unset:
:func:`tuner.nccl.canonical_set`). With a ``nccl-tune diagnose`` of the study
(``results/<study>/diagnose.json``), the variables that cannot act on any allreduce the night
measures are dropped too (:func:`night_inert`): decode at every ``probe.concurrency`` level and
the prompt's prefill (:mod:`tuner.planning.sizes`), each judged under NCCL's pick there
(:func:`tuner.nccl.decode.decode_effect`). A variable is dropped only when it cannot act at
every size; where NCCL's pick at a size, or the size itself, is not known, nothing is dropped.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tuner.diagnose import JSON_NAME, Diagnosis, decode_pick, load_diagnosis
from tuner.inputs import ExperimentConfig
from tuner.nccl import DecodeChoice, NcclVersion, Topology, TuningTable, canonical_set, decode_effect
from tuner.planning.sizes import NightSize, night_sizes
from tuner.record import StudyInfo, TrialRecord, set_key

__all__ = ["DecodeContext", "Facts", "StudyFacts", "load_decode_context", "night_inert", "set_identity"]


@dataclass(frozen=True)
class Facts:
    """What the rules read about the machine: the NCCL ``version`` and ``topology`` (None
    while unknown; the sweep learns both from the first baseline's log), and ``cpu_vendor``,
    the CPU ``[nccl] cpu_vendor`` names (None if not given). A topology whose log named no CPU
    takes ``cpu_vendor``; one that named it keeps NCCL's own (what NCCL's P2P default reads,
    src/graph/paths.cc ncclTopoCheckP2p). ``server`` (``vllm``, ``sglang``, None: not known),
    ``server_version`` (``0.11.0``, None: not logged) and ``backend`` (who carried the first
    baseline's decode allreduce, ``""``: not known) are what the baseline's log named too."""

    version: NcclVersion | None = None
    topology: Topology | None = None
    cpu_vendor: str | None = None
    server: str | None = None
    server_version: str | None = None
    backend: str = ""

    def __post_init__(self) -> None:
        if self.topology is not None and self.topology.cpu_vendor is None and self.cpu_vendor is not None:
            object.__setattr__(self, "topology", replace(self.topology, cpu_vendor=self.cpu_vendor))

    @property
    def cpu(self) -> str | None:
        """The CPU the rules judge by: the topology's (NCCL's GRAPH lines), else ``cpu_vendor``."""
        return self.topology.cpu_vendor if self.topology is not None else self.cpu_vendor


class StudyFacts:
    """The :class:`Facts` a study holds, as a callable the rules read: the NCCL version, topology
    and decode backend its first baseline's log showed (``info()``, the study's info), else
    ``[nccl] nccl_version`` and ``cpu_vendor`` of ``cfg``; the server's version from
    ``first_baseline()`` (None before one). Kept once the study learned them (it records them
    once): every set key and check reads them, thousands of times per proposal, and each read
    would be a storage query."""

    def __init__(self, info: Callable[[], StudyInfo], first_baseline: Callable[[], TrialRecord | None],
                 cfg: ExperimentConfig) -> None:
        self._info, self._first_baseline, self._cfg = info, first_baseline, cfg
        self._learned: Facts | None = None

    def __call__(self) -> Facts:
        """The facts now (a storage read until they are learned)."""
        if self._learned is not None:
            return self._learned
        info = self._info()
        base = self._first_baseline() if info.nccl_learned else None
        version = NcclVersion.parse(info.nccl_version) if info.nccl_version else self._cfg.nccl.nccl_version
        server_version = base.host.server.partition(" ")[2] if base is not None and base.host is not None else ""
        topology = Topology(**dataclasses.asdict(info.topology)) if info.topology is not None else None
        facts = Facts(version, topology, self._cfg.nccl.cpu_vendor, server=info.allreduce_server or None,
                      server_version=server_version or None, backend=info.allreduce_backend)
        if info.nccl_learned:
            self._learned = facts
        return facts


@dataclass(frozen=True)
class SizePick:
    """NCCL's pick at one size of the night: ``choices`` (every pair the diagnosis saw there;
    empty when not known) and ``source`` (a per-operation line, the TUNING table's cost model)."""

    size: NightSize
    choices: tuple[DecodeChoice, ...]
    source: str

    def text(self) -> str:
        """``"114688 B (decode, C=8) Ring/LL"``, or ``"... not known"``."""
        pairs = " or ".join(f"{c.algorithm}/{c.protocol}" for c in self.choices) or "pick not known"
        return f"{self.size.label()} {pairs}"


@dataclass(frozen=True)
class DecodeContext:
    """The night's allreduces as ``nccl-tune diagnose`` found them: ``nbytes`` (B, batch-1 decode)
    and NCCL's ``choice`` there, the diagnosis' own ``version``/``topology`` (used where the
    night's are unknown), the communicator's ``search_channels`` and ``transports``, the
    ``source`` file; ``picks``: NCCL's pick at every size the night measures (empty: the
    batch-1 decode alone), ``unknown``: allreduces measured whose size is not known, ``why``:
    where the sizes came from (:func:`tuner.planning.sizes.night_sizes`)."""

    nbytes: int
    choice: DecodeChoice
    version: NcclVersion | None
    topology: Topology | None
    search_channels: int | None
    transports: tuple[str, ...]
    source: Path
    picks: tuple[SizePick, ...] = ()
    unknown: tuple[str, ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        if not self.picks:
            object.__setattr__(self, "picks", (SizePick(NightSize(self.nbytes, "decode", 1), (self.choice,),
                                                        self.choice.source),))

    @property
    def judged(self) -> bool:
        """True when NCCL's pick is known at every size the night measures (else nothing is dropped)."""
        return not self.unknown and all(p.choices for p in self.picks)

    def sizes_text(self) -> str:
        """The sizes judged at, in words for a skip: ``"14336 B and 114688 B"``."""
        sizes = [str(n) for n in dict.fromkeys(p.size.nbytes for p in self.picks)]
        return (", ".join(sizes[:-1]) + " and " + sizes[-1] if len(sizes) > 1 else sizes[0]) + " B"

    def sentence(self) -> str:
        """What this means for the plan, in one line (the sweep's log): the source, then :meth:`judgement`."""
        return f"{self.source}: {self.judgement()}"

    def judgement(self) -> str:
        """The sizes judged at with NCCL's pick at each, and what that does to identities (the dry run)."""
        head = ("sets are judged at every allreduce the night measures: "
                + "; ".join(p.text() for p in self.picks))
        if not self.judged:
            missing = [*self.unknown, *(p.size.label() + "'s pick" for p in self.picks if not p.choices)]
            return (head + f"; not known: {', '.join(missing)}, so no variable is left out of a set's identity "
                    "(sets are told apart by canonical form only)")
        return head + ("; a variable that cannot act at all of them is left out of a set's identity, so sets "
                       "that differ only by such variables are relaunched once")


def load_decode_context(study_dir: Path, cfg: ExperimentConfig | None = None) -> DecodeContext | None:
    """The context of ``study_dir/diagnose.json`` for ``cfg``'s night, or None when there is no
    usable diagnosis (none, unreadable, no decode size, no NCCL pick there, NCCL not on the
    decode path). ``cfg`` gives the sizes (:func:`tuner.planning.sizes.night_sizes`; None: the
    diagnosis' own decode and prefill). Raises InputError for an unreadable ``[model] config``."""
    diag = load_diagnosis(study_dir)
    pick = decode_pick(diag) if diag is not None else None
    choice = diag.decode_choice() if diag is not None else None
    if diag is None or pick is None or choice is None:
        return None
    sizes = night_sizes(cfg, diag)
    picks = tuple(SizePick(s, *_pick_at(diag, s.nbytes, pick[0], choice)) for s in sizes.sizes)
    return DecodeContext(pick[0], choice, diag.version(), diag.topology_info(), diag.topology.get("coll_channels"),
                         tuple(diag.topology.get("transports", ())), Path(study_dir) / JSON_NAME, picks,
                         sizes.unknown, sizes.why)


def _pick_at(diag: Diagnosis, nbytes: int, decode_bytes: int,
             decode: DecodeChoice) -> tuple[tuple[DecodeChoice, ...], str]:
    """NCCL's pairs at ``nbytes``: the diagnosis' decode pick, its per-operation lines there,
    else the TUNING table's cost model (:meth:`tuner.nccl.tuning.TuningTable.best`), else none."""
    if nbytes == decode_bytes:
        return (decode,), decode.source
    row = next((r for r in diag.sizes if r.func == "AllReduce" and r.nbytes == nbytes and r.algorithm), None)
    if row is not None and row.protocol:
        pairs = dict.fromkeys((c["algorithm"], c["protocol"]) for c in row.choices if c.get("algorithm")
                              and c.get("protocol")) or {(row.algorithm, row.protocol): None}
        return tuple(DecodeChoice(a, p, "per-operation line") for a, p in pairs), "per-operation line"
    table = TuningTable(entries={"AllReduce": {(r.algorithm, r.protocol): (r.latency_us, r.bandwidth_gbps)
                                               for r in diag.tuning}})
    best = table.best("AllReduce", nbytes) if diag.tuning else None
    if best is None:
        return (), "no per-operation line and no TUNING table"
    return (DecodeChoice(best[0], best[1], "TUNING table"),), f"TUNING table cost model, {best[2]:.1f} us"


def night_inert(canon: dict[str, str], facts: Facts, decode: DecodeContext) -> dict[str, str]:
    """The variables of ``canon`` (a canonical set) that cannot change any allreduce the night
    measures, each with why: ``{name: "cannot act at 14336 B (decode, C=1), ...: <reasons>"}``.

    A name is in it only when :func:`tuner.nccl.decode.decode_effect` finds it inert at every
    size of ``decode.picks`` under every pair NCCL was seen to pick there; empty when a size or
    its pick is not known (:attr:`DecodeContext.judged`): never merged on a guess.
    """
    if not decode.judged:
        return {}
    return dict(_inert(tuple(sorted(canon.items())), facts, decode))


@functools.lru_cache(maxsize=65536)
def _inert(items: tuple[tuple[str, str], ...], facts: Facts, decode: DecodeContext) -> tuple[tuple[str, str], ...]:
    canon = dict(items)
    topo = facts.topology or decode.topology
    nranks = (decode.topology or facts.topology or Topology(8)).nranks
    reasons: dict[str, list[str]] = {name: [] for name in canon}
    for pick in decode.picks:
        for choice in pick.choices:
            inert = decode_effect(canon, pick.size.nbytes, nranks, choice, version=facts.version or decode.version,
                                  topology=topo, search_channels=decode.search_channels,
                                  transports=decode.transports).inert
            for name in list(reasons):
                if name in inert:
                    reasons[name].append(inert[name])
                else:
                    del reasons[name]
    at = ", ".join(p.size.label() for p in decode.picks)
    return tuple((name, f"{name} cannot act at {at}: " + "; ".join(dict.fromkeys(why)))
                 for name, why in reasons.items())


def set_identity(env: dict[str, str], flags: list[str], facts: Facts, decode: DecodeContext | None = None) -> str:
    """The key of a set (:func:`tuner.record.set_key` of its canonical form, see the
    module docstring): two sets with one key are one relaunch."""
    canon = canonical_set(env, facts.version, facts.topology)
    if decode is not None:
        inert = night_inert(canon, facts, decode)
        remaining = {k: v for k, v in canon.items() if k not in inert}
        canon = canonical_set(remaining, facts.version or decode.version, facts.topology or decode.topology)
    return set_key(canon, flags)
