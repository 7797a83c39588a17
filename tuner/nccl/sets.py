"""Rules for a whole set of variables: problems and surprises between them, one spelling per behaviour.

:func:`cross_problems` and :func:`cross_warnings` judge combinations whatever the machine;
:func:`canonical_set` gives the set as NCCL sees it, the key that tells two sets apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tuner.nccl.choice import allreduce_choices, no_algorithm_warn, starvation_note, starvation_versions
from tuner.nccl.lists import FUNCS, PER_COLLECTIVE_SINCE, read_list
from tuner.nccl.p2p import default_p2p_level
from tuner.nccl.thresholds import default_thread_thresholds, read_thread_thresholds
from tuner.nccl.types import OLDEST_SUPPORTED, NcclVersion, Topology
from tuner.nccl.values import RULED_NAMES, canonical_value, check_value, since_text, value_since

__all__ = ["canonical_set", "cross_problems", "cross_warnings", "local_gpus", "set_since", "topology_p2p_default",
           "version_doubts", "version_problems"]

def set_since(env: Mapping[str, str]) -> NcclVersion:
    """The oldest release that reads every value of ``env`` as meant (:func:`value_since`; a value
    no release reads counts as :data:`OLDEST_SUPPORTED`: it is refused on its own). A set is
    judged by this release while the version is not known: ``NCCL_PROTO=AllReduce:LL`` by 2.24's
    per-collective grammar, not as the one unmatched item 2.18 would skip."""
    return max((value_since(n, v) or OLDEST_SUPPORTED for n, v in env.items()), default=OLDEST_SUPPORTED)


def _judged(env: Mapping[str, str], version: NcclVersion | None) -> NcclVersion:
    """``version``, or while it is unknown the oldest release reading all of ``env``."""
    return version if version is not None else set_since(env)


def _needs(env: Mapping[str, str]) -> list[tuple[str, NcclVersion]]:
    """The variables of ``env`` whose value needs a release newer than the oldest supported."""
    return [(n, since) for n, v in env.items() if (since := value_since(n, v)) is not None and since > OLDEST_SUPPORTED]


def version_problems(env: Mapping[str, str], version: NcclVersion | None) -> list[tuple[str, str]]:
    """Values of ``env`` that need a newer NCCL than the known ``version``, as ``(key, reason)``
    (none while it is unknown: :func:`version_doubts`)."""
    if version is None:
        return []
    out = []
    for name, since in _needs(env):
        why = check_value(name, env[name], version)
        if why:
            out.append((name, f"{name}={env[name]} needs NCCL {since_text(since)} and the baseline's NCCL is "
                              f"{version}: {why}"))
    return out


def version_doubts(env: Mapping[str, str], version: NcclVersion | None) -> list[tuple[str, str]]:
    """While ``version`` is unknown, the values of ``env`` only a newer NCCL than the oldest
    supported reads: one ``(key, "needs NCCL 2.24+: launched once the baseline shows an NCCL that new")``
    for the newest release any of them needs, or nothing."""
    needs = _needs(env) if version is None else []
    if not needs:
        return []
    name, since = max(needs, key=lambda n: n[1])
    return [(name, f"needs NCCL {since_text(since)}: launched once the baseline shows an NCCL that new")]


_PAIRS = (("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"), ("NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS"),
          ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"))


def cross_problems(env: Mapping[str, str], version: NcclVersion | None = None) -> list[tuple[str, str]]:
    """Problems between variables of one set, whatever the machine, as ``(key, reason)``.

    MIN channels above MAX is not one (NCCL allows it, see :func:`cross_warnings`). A problem is
    an NCCL_ALGO/NCCL_PROTO pair that leaves AllReduce nothing on any hardware where NCCL
    ``version`` does not fall back (2.18, 2.24+): e.g. ``NCCL_ALGO=NVLS`` with ``NCCL_PROTO=LL``
    (NVLS runs Simple only, src/graph/tuning.cc). An unknown version is judged by the strictest
    releases for this rule (:func:`tuner.nccl.choice.starvation_versions`).
    """
    v = _judged(env, version)
    names = [n for n in ("NCCL_ALGO", "NCCL_PROTO") if n in env]
    if not names or any(read_list(n, env[n], v).fails_init for n in names) or version_problems(env, version):
        return []
    shown = " with ".join(f"{n}={env[n]}" for n in names)
    failing = [j for j in _starvation_versions(env, version)
               if all(allreduce_choices(env, topo, j).fails for topo in _GENEROUS)]
    if failing:
        who = f"NCCL {failing[0]}" if version is not None else starvation_note(failing, "AllReduce")
        return [(names[-1], f"{shown} leaves no algorithm/protocol pair for AllReduce on any machine: {who} "
                            f"fails: {no_algorithm_warn(failing[0], 'AllReduce')}")]
    return []


def _starvation_versions(env: Mapping[str, str], version: NcclVersion | None) -> tuple[NcclVersion, ...]:
    """:func:`starvation_versions`, none older than the release that reads ``env`` at all."""
    if version is not None:
        return (version,)
    floor = set_since(env)
    return tuple(sorted({max(j, floor) for j in starvation_versions(None)}, reverse=True))


#: Machines on which every algorithm can run: a set failing on all of them fails everywhere.
_GENEROUS = (Topology(nranks=8, nnodes=1, link="nvswitch", has_nvls=True, gpu_arch=90),
             Topology(nranks=16, nnodes=2, link="nvswitch", has_nvls=True, gpu_arch=90, collnet=True))


def _int_of(env: Mapping[str, str], name: str, version: NcclVersion) -> int | None:
    if name not in env:
        return None
    text = canonical_value(name, env[name], version)
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else None


def cross_warnings(env: Mapping[str, str], version: NcclVersion | None = None) -> list[tuple[str, str]]:
    """What NCCL does with combinations it accepts but may surprise, as ``(key, reason)``."""
    v = _judged(env, version)
    out: list[tuple[str, str]] = []
    for lo_name, hi_name in _PAIRS:
        lo, hi = _int_of(env, lo_name, v), _int_of(env, hi_name, v)
        if lo is not None and hi is not None and lo > hi:
            if "CTAS" in lo_name:
                out.append((lo_name, f"{lo_name}={lo} is above {hi_name}={hi}: NCCL WARNs and sets both to {hi} "
                                     "(src/init.cc, envConfigOverride)"))
            else:
                out.append((lo_name, f"{lo_name}={lo} is above {hi_name}={hi}: NCCL keeps {hi} channels, then "
                                     f"duplicates them up to {lo} (\"max, then min\", src/graph/connect.cc, ncclTopoPostset)"))
    for legacy, new in (("NCCL_MAX_NRINGS", "NCCL_MAX_NCHANNELS"), ("NCCL_MIN_NRINGS", "NCCL_MIN_NCHANNELS")):
        if legacy in env and new in env:
            out.append((legacy, f"{new} overrides the legacy {legacy} (src/graph/connect.cc)"))
    if "NCCL_P2P_LEVEL" in env and canonical_value("NCCL_P2P_DISABLE", env.get("NCCL_P2P_DISABLE", "0"), v) == "1":
        out.append(("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE=1 takes precedence: NCCL ignores NCCL_P2P_LEVEL "
                                      "(src/graph/paths.cc, ncclGetLevel)"))
    names = [n for n in ("NCCL_ALGO", "NCCL_PROTO") if n in env]
    if names and not any(read_list(n, env[n], v).fails_init for n in names) and not version_problems(env, version):
        out += _starved_warnings(env, names, version)
    return out


def _starved_warnings(env: Mapping[str, str], names: list[str], version: NcclVersion | None) -> list[tuple[str, str]]:
    """Collectives other than AllReduce that the set leaves nothing (2.24+ only: 2.18 keeps Ring
    for them, src/graph/tuning.cc at v2.18.6-1; 2.19-2.23 fall back to Ring)."""
    judged = _starvation_versions(env, version)
    starved = [f for f in FUNCS[:-1] if any(allreduce_choices(env, _GENEROUS[0], j, f).fails for j in judged)]
    if not starved:
        return []
    first = "AllGather" if "AllGather" in starved else starved[0]  # the one vLLM V1 runs every step
    failing = [j for j in judged if allreduce_choices(env, _GENEROUS[0], j, first).fails]
    hint = "; 'AllReduce:<algo>' limits an algorithm to allreduce" if failing[0] >= PER_COLLECTIVE_SINCE else ""
    who = f"NCCL {failing[0]}" if version is not None else starvation_note(failing, first)
    shown = " with ".join(f"{n}={env[n]}" for n in names)
    return [(names[0], f"{shown} leaves {', '.join(starved)} without an algorithm/protocol: {who} fails the "
                       f"first such call the server makes: {no_algorithm_warn(failing[0], first)}{hint}")]


def local_gpus(topology: Topology) -> int:
    """GPUs per node of ``topology`` (``nranks // nnodes``, at least 1): the count NCCL's P2P
    default reads (src/graph/paths.cc, ncclTopoCheckP2p, ``system->nodes[GPU].count``)."""
    return max(1, topology.nranks // max(1, topology.nnodes))


def topology_p2p_default(version: NcclVersion | None, topology: Topology | None) -> str | None:
    """NCCL's default P2P level on ``topology`` (:func:`tuner.nccl.p2p.default_p2p_level`), None if
    not known (no topology, or a CPU or version it depends on unknown)."""
    if topology is None:
        return None
    return default_p2p_level(version, topology.cpu_vendor, local_gpus(topology))


def _default_equivalent(name: str, canonical: str, version: NcclVersion, topology: Topology | None,
                        given: NcclVersion | None = None) -> bool:
    """Whether a canonical value does exactly what leaving ``name`` unset does on ``topology``
    (``given``: the version as given, None when unknown, for the rules judged by every release)."""
    if canonical == "":
        return True
    if topology is None:
        return False
    if name == "NCCL_P2P_LEVEL":
        return canonical == topology_p2p_default(given, topology)
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        env = {name: canonical}
        return all(allreduce_choices(env, topology, version, f) == allreduce_choices({}, topology, version, f)
                   for f in FUNCS)
    if name == "NCCL_NVLS_ENABLE" and canonical == "0":
        return not topology.has_nvls
    if name == "NCCL_THREAD_THRESHOLDS":
        overrides, _problem, _warnings = read_thread_thresholds(canonical)
        defaults = default_thread_thresholds(topology.nranks)
        return all(o is None or o == d for o, d in zip(overrides, defaults, strict=True))
    return False


def canonical_set(env: Mapping[str, str], version: NcclVersion | None = None,
                  topology: Topology | None = None) -> dict[str, str]:
    """``env`` as NCCL ``version`` sees it on ``topology``: one spelling per behaviour.

    Values are canonicalised (:func:`canonical_value`) and variables whose value does what
    leaving them unset does are dropped (``NCCL_BUFFSIZE=4194304``,
    ``CUDA_DEVICE_MAX_CONNECTIONS=8``, ``NCCL_P2P_DISABLE=0``, ``NCCL_MAX_NCHANNELS=64`` on
    2.25+, and with a topology e.g. ``NCCL_ALGO=Ring,Tree`` on one PCIe node, or an
    ``NCCL_P2P_LEVEL`` equal to NCCL's default for its CPU and GPUs per node when that default is
    known, :func:`topology_p2p_default`). Two sets with
    equal results launch the same NCCL behaviour. Unknown variables are kept as given. While
    ``version`` is unknown a set is judged by the oldest release that reads it
    (:func:`set_since`): ``NCCL_PROTO=AllReduce:LL`` stays apart from ``NCCL_PROTO=LL``, which
    changes the other collectives too.
    """
    v = _judged(env, version)
    out = {}
    for name, value in env.items():
        canonical = canonical_value(name, value, v)
        if name in RULED_NAMES and _default_equivalent(name, canonical, v, topology, version):
            continue
        out[name] = canonical
    return dict(sorted(out.items()))
