"""Proof that a set reached NCCL: what every rank echoed against what the trial launched.

NCCL echoes ``NAME set by environment to VALUE`` the first time it reads an integer or string
parameter (src/misc/param.cc, ncclLoadParam). :func:`confirmations` sorts each launched
variable into confirmed, not applied, or unverifiable from a :class:`~tuner.nccl.log.ParsedLog`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from tuner.nccl.log import SERVER_LOG, ParsedLog
from tuner.nccl.names import is_hardware_selector
from tuner.nccl.p2p import LEVEL_VARIABLES, read_level
from tuner.nccl.types import NcclVersion, judged_version
from tuner.nccl.values import canonical_value
from tuner.nccl.variables import VARIABLES

__all__ = ["SilentWhy", "confirmations", "node_ranks", "rank_list", "unlaunched_echoes"]

P2P_DISABLE_ECHO_FROM = NcclVersion(2, 23, 0)  # src/graph/paths.cc ncclGetLevel echoes the disable env
#: ``why(name, server_version, copied)``: a server kind's reason its Ray workers never saw ``name``
#: (``copied``: the names its Ray executor said it copies, None when not said), or None to keep the
#: generic reason (:attr:`tuner.servers.ServerKind.ray_silent_why`).
SilentWhy = Callable[[str, str | None, list[str] | None], str | None]

#: Variables NCCL reads, and so echoes, during every communicator init when they are set (the record).
_ECHOED_AT_INIT = frozenset(v.name for v in VARIABLES.values() if v.echoed_at_init)


class ProofRow(NamedTuple):
    """One launched variable's proof, rank by rank: ``status`` (``confirmed``, ``not applied``,
    ``unverifiable``), ``echoed`` the ranks whose own line echoed the launched value, ``nranks``
    the communicator size NCCL logged (None when it logged none), ``sources`` how many of those
    ranks each source gave (:data:`tuner.nccl.log.SERVER_LOG` or an NCCL_DEBUG_FILE path),
    ``echo`` the value as echoed, ``why`` the reason for anything but a full confirmation;
    ``nodes``: on ranks of several hosts (a server spanning nodes), ``(host, echoed there, ranks
    there)`` per host, head's first (empty on one host)."""

    name: str
    value: str
    status: str
    echoed: tuple[int, ...]
    nranks: int | None
    sources: tuple[tuple[str, int], ...]
    echo: str
    why: str
    nodes: tuple[tuple[str, int, int], ...] = ()

    def ranks_text(self) -> str:
        """``"0-7 (8/8)"``, ``"0, 3 (2/8)"``, ``"none (0/8)"``; ``"-"`` when NCCL logged no ranks;
        across nodes ``"2 of 2 ranks on 2 nodes (spark-a 1/1, spark-b 1/1)"``."""
        if not self.nranks:
            return rank_list(self.echoed) or "-"
        if len(self.nodes) > 1:
            each = ", ".join(f"{host} {n}/{of}" for host, n, of in self.nodes)
            return f"{len(self.echoed)} of {self.nranks} ranks on {len(self.nodes)} nodes ({each})"
        return f"{rank_list(self.echoed) or 'none'} ({len(self.echoed)}/{self.nranks})"

    def source_text(self) -> str:
        """``"NCCL_DEBUG_FILE x8"``, ``"server log x1"``, both joined by ``+``."""
        kinds: dict[str, int] = {}
        for label, n in self.sources:
            kind = label if label == SERVER_LOG else "NCCL_DEBUG_FILE"
            kinds[kind] = kinds.get(kind, 0) + n
        return " + ".join(f"{k} x{n}" for k, n in kinds.items()) or "-"


def node_ranks(parsed: ParsedLog) -> dict[str, list[int]]:
    """``{host: ranks}``: the ranks of the largest communicator each host's processes stated
    (the host of NCCL's ``host:pid:tid`` prefix; with ``%h`` a node's name), hosts in the
    order of their lowest rank; empty when NCCL stated no rank."""
    found: dict[str, set[int]] = {}
    for process, pairs in parsed.comm_ranks.items():
        host = process.rsplit(":", 1)[0] if ":" in process else ""
        mine = {r for r, n in pairs if n == parsed.nranks}
        if host and mine:
            found.setdefault(host, set()).update(mine)
    return {h: sorted(rs) for h, rs in sorted(found.items(), key=lambda kv: min(kv[1]))}


def rank_list(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``"0-2, 5, 7-8"``."""
    out: list[str] = []
    for r in sorted(set(ranks)):
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)


class Confirmations(NamedTuple):
    """``confirmed`` name -> value NCCL echoed; ``not_applied`` name -> why; ``unverifiable``
    names; ``rows`` the per-rank :class:`ProofRow` of every launched variable."""

    confirmed: dict[str, str]
    not_applied: dict[str, str]
    unverifiable: list[str]
    rows: tuple[ProofRow, ...] = ()


def _why_unverifiable(name: str, value: str, parsed: ParsedLog) -> str:
    """The reason :func:`confirmations` could not verify ``name=value``."""
    if not name.startswith("NCCL_"):
        return f"{name} is read by CUDA or the server, not NCCL: NCCL never echoes it"
    if parsed.info_lines == 0:
        return ("the log holds no NCCL INFO line: NCCL_DEBUG=INFO was not in effect, or every line was lost (NCCL's "
                "stdout is block-buffered on a pipe and lost when a worker is SIGKILLed: give NCCL a NCCL_DEBUG_FILE "
                "it can open)")
    if name == "NCCL_P2P_DISABLE":
        return "NCCL echoes NCCL_P2P_DISABLE only when it is 1 (src/graph/paths.cc, ncclGetLevel)"
    if name == "NCCL_SHM_DISABLE":
        return ("NCCL reads NCCL_SHM_DISABLE only for peers P2P cannot serve (src/transport/shm.cc); "
                "no SHM connection was needed")
    if name == "NCCL_DEBUG_SUBSYS":
        return "NCCL does not echo NCCL_DEBUG_SUBSYS"
    var = VARIABLES.get(name)
    if var is not None and var.read_when:  # a network variable: say whether the log shows its path
        nets = sorted({t.split("/")[0] + "/" + t.split("/")[1] for t in parsed.transports
                       if t.startswith("NET/") and "/" in t[4:]} | {t for t in parsed.transports if t == "NET"})
        seen = (f"this log shows connections via {', '.join(nets)}, so the echo was hidden (NCCL_DEBUG_SUBSYS "
                "without ENV) or lost" if nets else "this log shows no connection over NET")
        return f"not proven: NCCL reads {name} {var.read_when}; no rank echoed it, and {seen}"
    return f"NCCL echoes {name} only when it reads it, which this run may not have needed"


CONFIRMED, NOT_APPLIED, UNVERIFIABLE = "confirmed", "not applied", "unverifiable"


def confirmations(launched_env: Mapping[str, str], parsed: ParsedLog, version: NcclVersion | None = None, *,
                  server_version: str | None = None, silent_why: SilentWhy | None = None) -> Confirmations:
    """Compare the set a trial launched with what NCCL echoed, rank by rank.

    Each rank of the largest communicator NCCL logged (``comm ... rank R nRanks N``) is
    accounted for. A variable is *confirmed* when every one of the N ranks echoed it with the
    launched value on its own line (compared canonically: ``ring`` = ``Ring``, ``0x400000`` =
    ``4194304``, ``2`` = ``PXB``); a variable NCCL reads only on some paths is confirmed by the
    ranks that read it. It is *not applied* when a rank echoed another value, NCCL refused it
    ("Invalid value"), or ranks whose init reached the log in full (``Init COMPLETE``, after
    every init-time echo) echoed nothing while fewer than N echoes exist, Ray-folded copies
    counted; the reason names those ranks and the likely cause (Ray workers keep the
    environment of ``ray start``). It is *unverifiable* when NCCL never echoes it
    (CUDA_DEVICE_MAX_CONNECTIONS, ``NCCL_P2P_DISABLE=0``), the log holds no NCCL INFO line, or
    the ranks left over could not be read (``server_version`` and ``silent_why``: the server's
    version and its kind's reason Ray workers were not given a variable): their lines stop before ``Init COMPLETE`` (a buffer
    lost at SIGKILL), were never seen (another host's files), are hidden in Ray's ``[repeated Nx
    across cluster]`` (a fold is never proof for the ranks it hides), or their echo was cut by
    the pipe. NCCL_DEBUG itself is confirmed by the presence of INFO lines.
    """
    v = parsed.nccl_version or parsed.server_nccl_version or version
    ranks = _Ranks(parsed)
    confirmed: dict[str, str] = {}
    not_applied: dict[str, str] = {}
    unverifiable: list[str] = []
    rows: list[ProofRow] = []
    for name, value in launched_env.items():
        why = _silent_cause(parsed, server_version, silent_why)
        row = _prove(name, value, launched_env, parsed, ranks, v, why)
        rows.append(row)
        if row.status == CONFIRMED:
            confirmed[name] = row.echo
        elif row.status == NOT_APPLIED:
            not_applied[name] = row.why
        else:
            unverifiable.append(name)
    return Confirmations(confirmed, not_applied, unverifiable, tuple(rows))


class _Ranks:
    """Which process runs which ranks of the largest communicator, and whose lines are whole.

    A process (``host:pid``) may run several ranks, one thread each (nccl-tests ``-t``/``-g``):
    ``rank_of[process]`` holds them all. NCCL reads a parameter once per process (src/misc/param.cc,
    ncclLoadParam caches it), so one echo by any of its threads holds for every rank of it."""

    def __init__(self, parsed: ParsedLog) -> None:
        self.parsed = parsed
        self.n = parsed.nranks
        self.rank_of: dict[str, tuple[int, ...]] = {}
        for process, pairs in parsed.comm_ranks.items():
            mine = sorted({r for r, n in pairs if n == self.n})
            if mine and process != "?":
                self.rank_of[process] = tuple(mine)
        self.init_logged = bool(parsed.comm_ranks)
        self.hidden_by_folds = max(sum(f.count - 1 for f in parsed.folds if f.kind == kind)
                                   for kind in ("comm", "complete"))

    def complete(self, process: str) -> bool:
        """Whether every init-time line of ``process`` reached the log (none lost or cut)."""
        if self.parsed.cut.get(process):
            return False
        return process in self.parsed.complete if self.init_logged else True

    def processes(self) -> list[str]:
        """The processes that count: the ranks' (when NCCL logged ranks), else every one named."""
        if self.rank_of:
            return sorted(self.rank_of, key=lambda p: self.rank_of[p][0])
        return sorted(p for p in self.parsed.processes if p != "?")

    def who(self, processes: Iterable[str]) -> str:
        """``"ranks 1, 7"`` or ``"processes host:1, host:2"``."""
        ps = list(processes)
        ranked = self.ranks(ps)
        if all(p in self.rank_of for p in ps) and ranked:
            return f"rank{'s' if len(ranked) > 1 else ''} {rank_list(ranked)}"
        return f"process{'es' if len(ps) > 1 else ''} {', '.join(ps)}"


    def ranks(self, processes: Iterable[str]) -> list[int]:
        """The ranks ``processes`` ran, sorted, each once."""
        return sorted({r for p in processes for r in self.rank_of.get(p, ())})

    def weight(self, processes: Iterable[str]) -> int:
        """How many ranks ``processes`` stand for (a process of unknown rank counts one)."""
        return sum(len(self.rank_of.get(p, ())) or 1 for p in processes)

    def seen(self) -> set[int]:
        """Every rank of the largest communicator some process stated."""
        return {r for rs in self.rank_of.values() for r in rs}


def _row(name: str, value: str, status: str, why: str = "", echo: str = "", ok: Iterable[str] = (),
         ranks: _Ranks | None = None) -> ProofRow:
    ok = list(ok)
    echoed = tuple(ranks.ranks(ok)) if ranks else ()
    counts: dict[str, int] = {}
    if ranks:
        for p in ok:
            label = ranks.parsed.echo_source.get(name, {}).get(p, SERVER_LOG)
            counts[label] = counts.get(label, 0) + 1
    nodes: tuple[tuple[str, int, int], ...] = ()
    hosts = node_ranks(ranks.parsed) if ranks else {}
    if len(hosts) > 1:
        nodes = tuple((h, len(set(rs) & set(echoed)), len(rs)) for h, rs in hosts.items())
    return ProofRow(name, value, status, echoed, ranks.n if ranks else None, tuple(sorted(counts.items())),
                    echo, why, nodes)


def _prove(name: str, value: str, env: Mapping[str, str], parsed: ParsedLog, ranks: _Ranks,
           v: NcclVersion | None, why_silent: Callable[[str], str] = lambda name: "") -> ProofRow:
    if name == "NCCL_DEBUG":
        if parsed.info_lines:
            return _row(name, value, CONFIRMED, echo="INFO", ranks=ranks)
        if value.upper() in ("INFO", "TRACE"):
            return _row(name, value, NOT_APPLIED, "no NCCL INFO line in the log: NCCL never saw NCCL_DEBUG")
        return _row(name, value, UNVERIFIABLE, _why_unverifiable(name, value, parsed))
    if not name.startswith("NCCL_") or parsed.info_lines == 0 or name == "NCCL_DEBUG_SUBSYS":
        return _row(name, value, UNVERIFIABLE, _why_unverifiable(name, value, parsed))
    if name in parsed.invalid:
        return _row(name, value, NOT_APPLIED,
                    f"NCCL refused {parsed.invalid[name]!r} (\"Invalid value\") and used its default")
    want = _canonical(name, value, v)
    echoes = _echoes_for(name, want, parsed, v)
    ok = {p: e for p, e in echoes.items() if _canonical(name, e, v) == want}
    rejoined = parsed.joined_echoes.get(name, set())
    garbled = {p: e for p, e in echoes.items()
               if p not in ok and (p in rejoined or _garbled(e, value, want, parsed.cut.get(p, 0)))}
    wrong = {p: e for p, e in echoes.items() if p not in ok and p not in garbled}
    if wrong:
        by_value: dict[str, list[str]] = {}
        for p, e in sorted(wrong.items()):
            by_value.setdefault(e, []).append(p)
        said = "; ".join(f"{ranks.who(ps)} echoed {name}={got}" for got, ps in by_value.items())
        return _row(name, value, NOT_APPLIED, f"{said} but the trial launched {value}",
                    next(iter(ok.values()), next(iter(by_value))), ok, ranks)
    always = _always_read(name, env, parsed, v)
    echo = next(iter(ok.values()), "")
    if not always:
        if ok:
            return _row(name, value, CONFIRMED, echo=echo, ok=ok, ranks=ranks)
        if name == "NCCL_SHM_DISABLE" and want == "1" and "SHM" in parsed.transport_kinds:
            return _row(name, value, NOT_APPLIED, "NCCL connected peers over SHM, yet no rank echoed NCCL_SHM_DISABLE=1")
        if name == "NCCL_IB_DISABLE" and want == "1" and any(t.startswith("NET/IB") for t in parsed.transports):
            return _row(name, value, NOT_APPLIED, "NCCL connected peers over NET/IB, yet no rank echoed "
                        "NCCL_IB_DISABLE=1 (src/transport/net_ib/init.cc, ncclIbInitDevices returns before any IB "
                        "device when it is set)")
        return _row(name, value, UNVERIFIABLE, _why_unverifiable(name, value, parsed), ranks=ranks)
    counted = ranks.processes()
    silent = [p for p in counted if p not in echoes and ranks.complete(p)]
    hidden_echoes = sum(f.count - 1 for f in parsed.folds if f.kind == "echo" and f.name == name)
    # several communicators of the largest size (TP groups under PP or DP) repeat rank numbers
    n = max(ranks.n or 0, ranks.weight(counted)) if ranks.rank_of else len(counted)
    if ranks.rank_of and ranks.n and all(p in ok for p in counted) and len(ranks.ranks(ok)) == ranks.n:
        return _row(name, value, CONFIRMED, echo=echo, ok=ok, ranks=ranks)
    if not ranks.rank_of and counted and all(p in ok for p in counted):
        return _row(name, value, CONFIRMED, echo=echo, ok=ok, ranks=ranks)
    if not counted and not ok and not parsed.cut and not parsed.cut_unknown:
        return _row(name, value, NOT_APPLIED, "no rank echoed it, though NCCL reads it at every communicator init",
                    ranks=ranks)
    if silent and ranks.weight(ok) + ranks.weight(garbled) + hidden_echoes < n:
        why = (f"{ranks.who(silent)} logged {'communicator init through Init COMPLETE' if ranks.init_logged else 'NCCL lines'}"
               f" but never echoed {name}")
        unseen = sorted(set(range(ranks.n or 0)) - ranks.seen())
        if ranks.hidden_by_folds and unseen:
            why += (f"; ranks {rank_list(unseen)} are hidden in Ray-folded lines ('[repeated Nx across cluster]'), "
                    + (f"with {hidden_echoes} folded echoes of {name}" if hidden_echoes else f"and no echo of {name} "
                       "was folded"))
        held = ranks.weight(ok) + hidden_echoes
        why += f": {held} echo{'es' if held != 1 else ''} for {n} ranks. "
        return _row(name, value, NOT_APPLIED, why + why_silent(name), echo, ok, ranks)
    return _row(name, value, UNVERIFIABLE, _unaccounted(name, ranks, ok, garbled, silent, hidden_echoes), echo, ok, ranks)


def _canonical(name: str, value: str, version: NcclVersion | None) -> str:
    """``value`` as NCCL reads it: a level variable's path name (src/graph/paths.cc, ncclGetLevel:
    ``NCCL_NET_GDR_LEVEL=1`` is echoed ``PIX``), else :func:`tuner.nccl.values.canonical_value`."""
    if name in LEVEL_VARIABLES:
        level, _problem, _warning = read_level(name, value.strip(), judged_version(version))
        if level is not None:
            return level
    return canonical_value(name, value, version)


def _garbled(echo: str, launched: str, want: str, cuts: int) -> bool:
    """An echo that is no proof of another value: another writer's text stuck to it (whitespace
    inside), or a cut (a prefix of, or longer than, the launched value) from a process whose lines
    the pipe cut."""
    e = echo.strip()
    if re.search(r"\s", e):
        return True
    return bool(cuts) and any(w and e != w and (e.startswith(w) or w.startswith(e)) for w in {launched, want})


def _unaccounted(name: str, ranks: _Ranks, ok: Mapping[str, str], garbled: Mapping[str, str],
                 silent: list[str], hidden_echoes: int) -> str:
    """Why the ranks without a whole echo cannot be judged, kind by kind."""
    parts: list[str] = []
    if garbled:
        parts.append(f"the echo of {ranks.who(garbled)} was cut by the pipe (a cut or rejoined line proves no other "
                     "value)")
    incomplete = [p for p in ranks.processes() if p not in ok and p not in garbled and p not in silent]
    if incomplete:
        parts.append(f"the lines of {ranks.who(incomplete)} stop before Init COMPLETE (the rest was lost: a buffer "
                     "that never reached the pipe, e.g. a worker killed with SIGKILL)")
    if silent:
        parts.append(f"{ranks.who(silent)} did not echo it, but Ray-folded echoes may be theirs")
    if ranks.n and ranks.rank_of:
        unseen = sorted(set(range(ranks.n)) - ranks.seen())
        if unseen and ranks.hidden_by_folds:
            parts.append(f"ranks {rank_list(unseen)} are hidden in Ray-folded lines ('[repeated Nx across cluster]'"
                         f"{f', {hidden_echoes} folded echoes' if hidden_echoes else ''}); a fold does not say which "
                         "rank printed it: run with RAY_DEDUP_LOGS=0")
        elif unseen and (ranks.parsed.ray_workers or ranks.parsed.ray_copied_env is not None):
            parts.append(f"no line of ranks {rank_list(unseen)} reached the log: on Ray the workers keep the "
                         "environment of `ray start`, so they log nothing unless NCCL_DEBUG=INFO was exported there "
                         "(their files, if any, are on their own nodes)")
        elif unseen:
            parts.append(f"no line of ranks {rank_list(unseen)} reached the log (lost at SIGKILL, or written on "
                         "another host)")
    return "; ".join(parts) or "no rank's echo could be read"


def _silent_cause(parsed: ParsedLog, server_version: str | None,
                  silent_why: SilentWhy | None) -> Callable[[str], str]:
    """``why(name)``: the likely reason ranks never saw ``name``: a launcher or container that
    did not pass it on, or, on Ray, the server kind's reason (``silent_why`` with its
    ``server_version``), else Ray's own rule (its workers keep the environment of ``ray start``)."""
    def why(name: str) -> str:
        copied = parsed.ray_copied_env
        if not (parsed.ray_workers or copied is not None):
            return ("Those processes never got the variable: a launcher or container that does not pass the server's "
                    "environment on to its workers.")
        said = silent_why(name, server_version, copied) if silent_why is not None else None
        if said:
            return said
        listed = f" (this log: 'Copying the following environment variables to workers: {copied}')" if copied else ""
        return (f"Ray workers keep the environment of `ray start`{listed}. Export {name} before `ray start` on every "
                f"node, or put {name} in Ray's runtime_env={{'env_vars': {{...}}}}.")
    return why


def _always_read(name: str, env: Mapping[str, str], parsed: ParsedLog, version: NcclVersion | None) -> bool:
    """Whether NCCL reads ``name`` at every communicator init in this run (so silence means dropped)."""
    if name not in _ECHOED_AT_INIT:
        return False
    if name == "NCCL_SOCKET_IFNAME" and len(env.get(name, "")) <= 1:
        return False  # src/misc/socket.cc, ncclFindInterfaces reads it only when longer than one character
    if name == "NCCL_P2P_LEVEL" and _p2p_disabled(env, version):
        return False  # NCCL_P2P_DISABLE=1 wins before the level is read (src/graph/paths.cc, ncclGetLevel)
    # builds before CUDA 12.1 compile src/transport/nvls.cc's stubs, which never read NCCL_NVLS_ENABLE
    return not (name == "NCCL_NVLS_ENABLE" and (parsed.cuda_version or "").startswith("11."))


def _p2p_disabled(env: Mapping[str, str], version: NcclVersion | None) -> bool:
    return "NCCL_P2P_DISABLE" in env and canonical_value("NCCL_P2P_DISABLE", env["NCCL_P2P_DISABLE"], version) == "1"


def _echoes_for(name: str, want: str, parsed: ParsedLog, version: NcclVersion | None) -> dict[str, str]:
    """Echoes of ``name``; up to 2.22 NCCL_P2P_DISABLE=1 is echoed as ``NCCL_P2P_LEVEL ... LOC``."""
    echoes = dict(parsed.echoed(name))
    if name == "NCCL_P2P_DISABLE" and not echoes and want == "1" and (
            version is None or version < P2P_DISABLE_ECHO_FROM):
        echoes = {p: "1" for p, e in parsed.echoed("NCCL_P2P_LEVEL").items() if e == "LOC"}
    return echoes


#: What nccl-tune adds to a launch to make NCCL say things, never part of a set (the init
#: diagnostics: :mod:`tuner.nccl.diagnostics`).
_LOGGING = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_RUN_DIAGNOSTICS"})


def unlaunched_echoes(launched_env: Mapping[str, str], parsed: ParsedLog) -> dict[str, str]:
    """NCCL variables NCCL echoed that the launch did not set: ``{name: "VALUE on ranks 1-7"}``.

    Each came from where the processes were started (a Ray node's ``ray start``, a container's
    image, the server itself: vLLM sets NCCL_CUMEM_ENABLE, SGLang NCCL_CUMEM_ENABLE and
    NCCL_NVLS_ENABLE); in a baseline they mean it is not untuned on those ranks. The variables that
    name the machine's devices (:data:`tuner.nccl.names.HARDWARE_SELECTORS`: NCCL_SOCKET_IFNAME,
    NCCL_IB_HCA, NCCL_HOSTID, ...) are kept from the runner's environment on purpose and tune
    nothing, so their echoes are not counted."""
    ranks = _Ranks(parsed)
    out: dict[str, str] = {}
    for name, by_process in sorted(parsed.echoes.items()):
        if name in launched_env or name in _LOGGING or not name.startswith("NCCL_") or is_hardware_selector(name):
            continue
        values: dict[str, list[str]] = {}
        for process, value in by_process.items():
            values.setdefault(value, []).append(process)
        said = "; ".join(f"{value} on {ranks.who(ps)}" for value, ps in sorted(values.items()))
        folded = sum(f.count - 1 for f in parsed.folds if f.kind == "echo" and f.name == name)
        out[name] = said + (f", and {folded} more ranks in Ray-folded lines" if folded else "")
    return out
