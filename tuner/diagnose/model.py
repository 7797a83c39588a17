"""The diagnosis data model: what one diagnose launch showed, and ``diagnose.json``.

:class:`Diagnosis` holds the tables (:class:`TuningRow`, :class:`SizeRow`) and the decode
allreduce (:class:`DecodeInfo`); :meth:`Diagnosis.to_json`/:meth:`Diagnosis.from_json` are the
``diagnose.json`` object (``schema`` :data:`SCHEMA`); :class:`DecodeSize` is a decode size given
from outside the log (the model's config.json); :func:`decode_pick` is NCCL's pick at decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.nccl import DecodeChoice, NcclVersion, Topology

__all__ = ["SCHEMA", "DecodeInfo", "DecodeSize", "Diagnosis", "SizeRow", "TuningRow", "decode_pick"]

SCHEMA = 1


@dataclass
class TuningRow:
    """One (algorithm, protocol) cell of NCCL's AllReduce TUNING table: base latency (us),
    bandwidth (GB/s; 0 = disabled) and the "Max NThreads" row (None if not logged)."""

    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_gbps: float
    max_threads: int | None = None


@dataclass
class SizeRow:
    """One collective size NCCL logged per-operation lines for.

    ``algorithm``/``protocol``/``channels``: the most frequent choice at that size (channels
    None before NCCL 2.24's ``channel{Lo..Hi}`` format); ``choices``: every distinct choice with
    its calls when they differ; ``calls``: lines logged in all (rank 0), ``probe_calls`` of them
    during the probe; ``role``: ``decode``, ``prefill``, ``start-up`` (warm-up, profiling,
    graph capture) or ``probe``.
    """

    func: str
    nbytes: int
    algorithm: str | None
    protocol: str | None
    channels: int | None
    calls: int
    probe_calls: int
    role: str
    choices: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DecodeInfo:
    """The decode allreduce: ``nbytes`` (None if unknown) and ``size_source`` (``model``,
    ``capture``, ``probe``, ``log`` or ``none``) with ``size_reason``; NCCL's pick there
    (``algorithm``, ``protocol``, ``channels``) with ``pick_source``; ``nccl_on_decode_path``
    from the backend (True, False, None unknown)."""

    nbytes: int | None
    size_source: str
    size_reason: str
    nccl_on_decode_path: bool | None
    algorithm: str | None = None
    protocol: str | None = None
    channels: int | None = None
    pick_source: str = ""


@dataclass
class Diagnosis:
    """What one diagnose launch showed; :meth:`to_json`/:meth:`from_json` are ``diagnose.json``.

    ``echoed``: variable -> ``{value: processes that echoed it}``; ``backend``: ``name``,
    ``nccl_on_decode_path``, ``reason``, ``server`` (:class:`tuner.servers.backend.Backend`);
    ``topology``: ``nranks``, ``nnodes``, ``link``, ``has_nvls`` (:class:`tuner.nccl.types.Topology`)
    plus ``ranks_logged``, ``coll_channels``, ``nvls_channels``, ``thread_thresholds``,
    ``transports``; ``probe``: ``requests``, ``max_tokens``, ``completion_tokens``;
    ``triage``: NCCL's model of the machine judged (:meth:`tuner.triage.Triage.to_dict`; ``{}``
    in a diagnose.json written before it).
    """

    study: str
    nccl_version: str | None
    server_nccl_version: str | None
    cuda_version: str | None
    topology: dict[str, Any]
    backend: dict[str, Any]
    echoed: dict[str, dict[str, int]]
    invalid: dict[str, str]
    warnings: list[str]
    tuning: list[TuningRow]
    sizes: list[SizeRow]
    decode: DecodeInfo
    prefill_bytes: list[int]
    notes: list[str] = field(default_factory=list)
    probe: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    triage: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to ``diagnose.json`` (``schema`` 1)."""
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Diagnosis:
        """Read :meth:`to_json`'s object; raises KeyError/TypeError when it is not one."""
        d = {k: v for k, v in data.items() if k != "schema"}
        d["tuning"] = [TuningRow(**r) for r in d["tuning"]]
        d["sizes"] = [SizeRow(**r) for r in d["sizes"]]
        d["decode"] = DecodeInfo(**d["decode"])
        return cls(**d)

    def version(self) -> NcclVersion | None:
        """The NCCL version NCCL itself logged, else the one the server named, else None."""
        text = self.nccl_version or self.server_nccl_version
        return NcclVersion.parse(text) if text else None

    def topology_info(self) -> Topology | None:
        """The :class:`tuner.nccl.types.Topology` the log showed (None if no communicator size)."""
        t = self.topology
        if not t.get("nranks"):
            return None
        return Topology(nranks=t["nranks"], nnodes=t.get("nnodes") or 1, link=t.get("link"),
                        has_nvls=bool(t.get("has_nvls")))

    def decode_choice(self) -> DecodeChoice | None:
        """NCCL's pick at the decode size as :class:`tuner.nccl.decode.DecodeChoice` (the input of
        :func:`tuner.nccl.decode.decode_effect`), or None (see :func:`decode_pick`)."""
        pick = decode_pick(self)
        return DecodeChoice(pick[1], pick[2], self.decode.pick_source) if pick else None


def decode_pick(result: Diagnosis) -> tuple[int, str, str, int | None] | None:
    """``(nbytes, algorithm, protocol, channels)`` NCCL picks for the decode allreduce, or None.

    None when the decode size is unknown, when NCCL logged no choice there and the TUNING table
    is missing, or when the backend says NCCL does not carry the decode allreduce (vLLM's custom
    allreduce: then no NCCL variable can act on decode). ``channels`` is None when the log does
    not show it (per-operation lines before NCCL 2.24 and no channel count to compute it from).
    """
    d = result.decode
    if d.nbytes is None or d.algorithm is None or d.protocol is None or d.nccl_on_decode_path is False:
        return None
    return d.nbytes, d.algorithm, d.protocol, d.channels


@dataclass(frozen=True)
class DecodeSize:
    """A decode size from outside the log: ``nbytes`` and the sentence saying where it came from."""

    nbytes: int
    reason: str
