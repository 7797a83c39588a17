"""What NCCL did in a relaunch, read from its log: proof that each variable reached NCCL, the
NCCL version, ranks, channels, warnings, and who carries the decode allreduce.

NCCL logs nothing unless ``NCCL_DEBUG`` asks (src/debug.cc), so every launch, the baseline
included, gets ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH``: init-time lines only
(the ``set by environment to`` echoes of src/misc/param.cc, the communicator and channel lines),
no per-operation logging during the probe. ``[nccl] debug = false`` turns it off; a
``NCCL_DEBUG`` the user put in ``server.env`` is respected (and then what it logs is used).

NCCL's stdout is block-buffered on a pipe (:mod:`tuner.nccl.files`), so each launch also names a
per-trial ``NCCL_DEBUG_FILE`` (``logs/trial-NNNN.nccl/%h.%p.log``: whole lines, one file per
process, kept at SIGKILL) and is read from those files first; a user's own ``NCCL_DEBUG_FILE``
in ``server.env`` is kept and read where it points. ``PYTHONUNBUFFERED=1`` (CPython then
unbuffers C stdio in each Python process it starts: Python/initconfig.c, config_init_stdio)
keeps the lines of a process that cannot open the file whole, and ``RAY_DEDUP_LOGS=0`` stops a
Ray driver folding its workers' lines (ray/_private/ray_logging.py). None of these is part of
a set, a fingerprint or the "removed inherited" list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.diagnose import DEBUG_ENV, LOGGING_ENV
from tuner.inputs import ExperimentConfig
from tuner.nccl import (
    DEBUG_FILE_VAR,
    NEVER_LOADED,
    TRIAL_PATTERN,
    NcclVersion,
    ParsedLog,
    SettingsSource,
    Topology,
    confirmations,
    node_ranks,
    origin_of,
    read_sources,
    topology_from_log,
    unlaunched_echoes,
)
from tuner.planning import flag_params
from tuner.record import TrialRecord
from tuner.server import NODE_IDENTITY, node_log
from tuner.servers import (
    BACKEND_SERVERS,
    Backend,
    BackendChoice,
    BackendProof,
    ServerName,
    allreduce_backend,
    choice_of,
    kind_of,
    prove,
)

__all__ = ["Evidence", "debug_env", "debug_file", "nccl_dir", "node_logs", "read"]


#: Rank-0 channel lines kept in the record (a TP-8 box logs one per channel per rank).
CHANNEL_LINES = 8


def nccl_dir(log: Path) -> Path:
    """The folder of a trial's NCCL files: ``logs/trial-NNNN.nccl`` beside ``logs/trial-NNNN.log``."""
    return log.with_suffix(".nccl")


def node_logs(log: Path) -> list[Path]:
    """The logs of a server's other nodes beside its head's ``log`` (``trial-0003.node1.log``...,
    :func:`tuner.server.node_log`), in rank order; empty on one host."""
    found: list[Path] = []
    while (path := node_log(log, len(found) + 1)).exists():
        found.append(path)
    return found


def debug_file(cfg: ExperimentConfig, log: Path) -> str | None:
    """The NCCL_DEBUG_FILE a launch whose server log is ``log`` runs with: ``server.env``'s own,
    else ``<nccl_dir>/%h.%p.log``; None when ``[nccl] debug = false`` and ``server.env`` names none."""
    if DEBUG_FILE_VAR in cfg.server.env:
        return cfg.server.env[DEBUG_FILE_VAR]
    return str(nccl_dir(log).resolve() / TRIAL_PATTERN) if cfg.nccl.debug and not _in_pods(cfg) else None


def _in_pods(cfg: ExperimentConfig) -> bool:
    """True when the server runs in Kubernetes pods (launch = "lws"): a file NCCL writes there is
    not readable here, so NCCL logs to the pods' stdout, which nccl-tune follows."""
    return cfg.server.nodes.spans and cfg.server.nodes.launch == "lws"


def debug_env(cfg: ExperimentConfig, log: Path | None = None) -> dict[str, str]:
    """The logging variables to add to a launch whose server log is ``log``: :data:`DEBUG_ENV`
    (unless ``server.env`` sets ``NCCL_DEBUG`` itself; a ``NCCL_DEBUG_SUBSYS`` of ``server.env``
    is kept with INIT, ENV and GRAPH added), a per-trial ``NCCL_DEBUG_FILE`` in
    :func:`nccl_dir` (created empty here: a retried launch leaves no file of the first; unless
    ``server.env`` names one) and :data:`LOGGING_ENV`; nothing when ``[nccl] debug = false``.
    Raises OSError when the folder cannot be made."""
    if not cfg.nccl.debug:
        return {}
    user = cfg.server.env
    env = {} if "NCCL_DEBUG" in user else dict(DEBUG_ENV)
    if env and "NCCL_DEBUG_SUBSYS" in user and not user["NCCL_DEBUG_SUBSYS"].startswith("^"):
        # the user's subsystems kept, INIT, ENV and GRAPH added: the proof needs the echoes and comm lines, the triage the graphs
        theirs = [x.strip() for x in user["NCCL_DEBUG_SUBSYS"].split(",") if x.strip()]
        env["NCCL_DEBUG_SUBSYS"] = ",".join(theirs + [x for x in DEBUG_ENV["NCCL_DEBUG_SUBSYS"].split(",")
                                                    if x not in {t.upper() for t in theirs}])
    if log is not None and DEBUG_FILE_VAR not in user and not _in_pods(cfg):
        folder = nccl_dir(log)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.log"):
            stale.unlink(missing_ok=True)
        env[DEBUG_FILE_VAR] = str(folder.resolve() / TRIAL_PATTERN)
    env.update({k: v for k, v in LOGGING_ENV.items() if k not in user})
    return env


@dataclass
class Evidence:
    """One relaunch's log, parsed (:class:`tuner.nccl.log.ParsedLog`), with the backend and the
    proof of the backend choice its set names (``proof.applied`` None when it names none), the
    server's kind (:data:`tuner.servers.KIND_NAMES`), the version its log names (``""``: none)
    and whether its processes mapped NCCL (``loaded``: :attr:`TrialRecord.nccl_loaded`)."""

    parsed: ParsedLog
    backend: Backend
    proof: BackendProof | None = None
    server_kind: str = ""
    server_version: str = ""
    loaded: bool | None = None

    @property
    def never_loaded(self) -> bool:
        """True when no process of the server mapped NCCL (``loaded`` False) and NCCL logged no line."""
        return self.loaded is False and self.parsed.info_lines == 0

    @property
    def version(self) -> NcclVersion | None:
        """The NCCL version the server ran (NCCL's own line, else the server's)."""
        return self.parsed.nccl_version or self.parsed.server_nccl_version

    def topology(self) -> Topology | None:
        """The topology NCCL reported (ranks, nodes, link), or None when it logged none."""
        return topology_from_log(self.parsed)


def set_choice(server: ServerName | None, launched: Mapping[str, str], flags: list[str]) -> BackendChoice | None:
    """The catalogue entry a set names (:func:`tuner.servers.choice_of` of its variables
    ``launched`` and server ``flags`` in a space's form), for ``server``; with the server not
    known, the first server whose catalogue names one. None when the set names no backend switch."""
    params = {**launched, **flag_params(flags)}
    servers: tuple[ServerName, ...] = (server,) if server is not None else BACKEND_SERVERS
    return next((c for s in servers if (c := choice_of(s, params)) is not None), None)


def read(record: TrialRecord, launched: Mapping[str, str], argv: list[str], server_env: Mapping[str, str],
         version: NcclVersion | None, *, pattern: str | None = None, pids: set[int] | None = None,
         kind: str | None = None, behind: Sequence[SettingsSource] = ()) -> Evidence | None:
    """Parse the trial's NCCL files (``pattern``: the launch's NCCL_DEBUG_FILE; written since
    ``record.started_at``) and ``record.log`` into the record's NCCL fields (``nccl_version``,
    ``nccl_confirmed``, ``nccl_not_applied``, ``nccl_unverifiable``, ``nccl_proof``,
    ``nccl_sources``, ``nccl_ranks``, ``nccl_channels``, ``nccl_warnings``,
    ``allreduce_backend``), comparing what NCCL echoed with ``launched`` (the set's variables as
    launched; those of its backend choice are left to that choice's proof), and the proof of the
    set's backend choice (``backend_choice``, ``backend_applied``, ``backend_reason``:
    :func:`tuner.servers.backend.prove` of :func:`set_choice`, on ``argv`` with the record's flags
    appended, as launched, and ``server_env`` with ``launched`` over it); ``kind``: ``server.kind``,
    forcing the server kind the command and log would name; ``behind``: the sources of NCCL
    settings no launch sets (:func:`tuner.server.settings_behind`), which ``nccl_unlaunched_from``
    names for each echo of a variable the launch did not set. Where the record says no process
    mapped NCCL (``nccl_loaded`` False) and no NCCL line was read, every proof row says NCCL was
    never loaded (:data:`tuner.nccl.NEVER_LOADED`), not that its logging was lost.
    None when the server log cannot be read."""
    path = Path(record.log)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    since = record.started_at - 1.0 if record.started_at else None
    nodes = node_logs(path)
    for node in nodes:  # a server spanning nodes: every node's own log (their NCCL lines)
        try:
            text += "\n" + node.read_text(errors="replace")
        except OSError:
            continue
    parsed = read_sources(text, pattern, since=since, show_from=path.parent.parent, pids=pids or ())
    full_argv = [*argv, *record.flags]
    env = {**server_env, **launched}
    backend = allreduce_backend(lines, full_argv, env, forced=kind)
    proof = prove(set_choice(backend.server, launched, record.flags), lines, full_argv, env)
    # a backend choice's variables are the server's, proven by its log line, not by NCCL's echo
    to_nccl = {k: v for k, v in launched.items() if proof.choice is None or k not in proof.choice.params}
    server = kind_of(argv, lines, forced=kind)
    server_version = next((v for line in lines[:5000] if (v := server.version(line))), None)
    conf = confirmations(to_nccl, parsed, version, server_version=server_version, silent_why=server.ray_silent_why)
    record.nccl_version = str(parsed.nccl_version or parsed.server_nccl_version or "")
    record.nccl_confirmed = dict(conf.confirmed)
    record.nccl_not_applied = dict(conf.not_applied)
    record.nccl_unverifiable = list(conf.unverifiable)
    record.nccl_proof = [{"name": r.name, "value": r.value, "status": r.status, "ranks": r.ranks_text(),
                          "echo": r.echo, "source": r.source_text(), "why": r.why} for r in conf.rows]
    record.nccl_sources = list(parsed.sources)
    record.nccl_unlaunched = unlaunched_echoes({**server_env, **launched}, parsed)
    for own in NODE_IDENTITY if nodes else ():  # each node's identity is nccl-tune's (NCCL_HOSTID: its name)
        record.nccl_unlaunched.pop(own, None)
    record.nccl_unlaunched_from = {k: w for k in record.nccl_unlaunched if (w := origin_of(k, behind))}
    if record.nccl_loaded is False and parsed.info_lines == 0:
        record.nccl_proof = [{**row, "why": NEVER_LOADED} if row["status"] != "confirmed" else row
                             for row in record.nccl_proof]
    record.nccl_ranks = parsed.ranks
    hosts = node_ranks(parsed)
    record.node_ranks = {h: len(rs) for h, rs in hosts.items()} if len(hosts) > 1 else {}
    record.nccl_channels = parsed.ring_lines[:CHANNEL_LINES] + parsed.tree_lines[:2]
    record.nccl_warnings = list(parsed.warnings)
    record.allreduce_backend = proof.ran
    record.backend_choice = proof.choice.name if proof.choice is not None else ""
    record.backend_applied = proof.applied
    record.backend_reason = proof.reason if proof.choice is not None else ""
    return Evidence(parsed, backend, proof, server.name, server_version or "", record.nccl_loaded)
