"""What ``nccl-tune read-log FILE...`` reads from logs it did not launch, and how it prints it.

One :class:`LogSummary` for all the files given: NCCL's lines through :mod:`tuner.nccl`
(:func:`tuner.nccl.parse_sources`, one source per file), the version a server says it loaded and
its decode-allreduce backend through :mod:`tuner.servers` (each kind's ``nccl_version_lines``,
:func:`tuner.servers.allreduce_backend`), nccl-tests rows through the screen's table reader
(:func:`tuner.screen.parse_output`), and NCCL's model of the machine judged by
:func:`tuner.triage.triage`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from tuner.errors import InputError
from tuner.nccl import LogSource, NcclVersion, machine_from_log, parse_sources, read_network, version_in_text
from tuner.plaintext import plain_table
from tuner.screen import parse_output
from tuner.server import LINE_CAP_BYTES
from tuner.servers import KINDS, allreduce_backend
from tuner.triage import network_triage, triage, with_network

__all__ = ["LogSummary", "read_logs", "render"]


@dataclass
class LogSummary:
    """What the files hold, every key of :meth:`to_dict` (the ``--json`` object).

    ``ranks``: ranks whose own lines are in the logs (an init or comm line of their thread, or a
    connection they logged), never a rank only named as a peer or in a topology dump;
    ``processes``: each logging thread, ``host:pid:tid`` as NCCL printed it; ``echoes``: name ->
    ``{"value": str, "ranks": [int]}`` (an echo a process printed once holds for all its ranks);
    ``peers``: ``{"from", "to", "via"}`` once per pair and transport, channels folded;
    ``nccl_tests``: ``{"size": bytes, "busbw": out-of-place GB/s}`` per row; ``backend``: the
    server's decode-allreduce backend (``nccl``, ``custom_allreduce``...), None without a server;
    ``triage``: the findings on NCCL's model of the machine (and on the network across nodes);
    ``network``: across nodes, each cross-node pair of hosts and its transport; ``diag``: NCCL DIAG messages (2.31+);
    ``nccl_versions``: every NCCL version the files name (more than one: ranks or files that ran
    different NCCLs); ``empty``: the files held no NCCL, nccl-tests or server line at all.
    """

    files: list[str]
    nccl_version: str | None = None
    ranks: list[int] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    echoes: dict[str, dict[str, Any]] = field(default_factory=dict)
    peers: list[dict[str, Any]] = field(default_factory=list)
    nccl_tests: list[dict[str, Any]] = field(default_factory=list)
    backend: str | None = None
    triage: list[dict[str, Any]] = field(default_factory=list)
    triage_summary: str = ""
    network: list[str] = field(default_factory=list)
    diag: list[str] = field(default_factory=list)
    nccl_versions: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing was read: no NCCL line, version, nccl-tests row nor server backend."""
        return not (self.processes or self.nccl_version or self.echoes or self.peers or self.nccl_tests
                    or self.backend or self.diag)

    def to_dict(self) -> dict[str, Any]:
        """The one JSON object ``read-log --json`` prints."""
        return {"files": self.files, "nccl_version": self.nccl_version, "ranks": self.ranks,
                "processes": self.processes, "echoes": self.echoes, "peers": self.peers,
                "nccl_tests": self.nccl_tests, "backend": self.backend, "triage": self.triage,
                "triage_summary": self.triage_summary, "network": self.network, "diag": self.diag, "nccl_versions": self.nccl_versions,
                "empty": self.empty}


def _cut(line: str) -> str:
    """A line cut to the sweep's own cap (:data:`tuner.server.LINE_CAP_BYTES`, in characters), as
    the server log a night keeps is: a 50 MB line neither fills the JSON nor takes seconds."""
    if len(line) <= LINE_CAP_BYTES:
        return line
    return f"{line[:LINE_CAP_BYTES]} [... {len(line) - LINE_CAP_BYTES} characters of this line dropped ...]"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(str(path), "FILE", str(path), "a log file this user can read (NCCL's lines, nccl-tests' "
                         "output or a server's log)", f"it could not be read: {exc.strerror or exc}") from None


def _server_nccl_version(lines: list[str]) -> str | None:
    """The NCCL a server says it loaded (each kind's ``nccl_version_lines``), the last one said."""
    found = None
    for line in lines:
        if "nccl==" not in line:
            continue
        for kind in KINDS:
            if (v := kind.nccl_version(line)) is not None:
                found = v
    return found


def read_logs(paths: list[Path]) -> LogSummary:
    """Read every file of ``paths`` into one :class:`LogSummary`; launches nothing.

    Raises :class:`tuner.errors.InputError` (exit 2) naming the first file that cannot be read.
    """
    texts = {str(p): _read(p) for p in paths}
    summary = LogSummary(files=list(texts))
    lines_of = {name: [_cut(line) for line in text.splitlines()] for name, text in texts.items()}
    parsed = parse_sources([LogSource(name, lines) for name, lines in lines_of.items()])
    all_lines = [line for lines in lines_of.values() for line in lines]
    version: NcclVersion | None = parsed.nccl_version
    server_v = _server_nccl_version(all_lines)
    summary.nccl_version = str(version) if version else server_v
    seen = {str(v) for line in all_lines if "nccl" in line.lower() and (v := version_in_text(line)) is not None}
    summary.nccl_versions = sorted(seen, key=NcclVersion.parse)
    summary.ranks = sorted({r for rs in parsed.thread_ranks.values() for r in rs})
    summary.processes = sorted(parsed.threads)
    for name, by_process in sorted(parsed.echoes.items()):
        values = Counter(by_process.values())
        value = values.most_common(1)[0][0]
        ranks = sorted({r for p, v in by_process.items() if v == value for r in parsed.ranks_of_process(p)})
        entry: dict[str, Any] = {"value": value, "ranks": ranks}
        if len(values) > 1:
            entry["others"] = {v: sorted({r for p, e in by_process.items() if e == v
                                          for r in parsed.ranks_of_process(p)}) for v in values if v != value}
        summary.echoes[name] = entry
    summary.peers = [{"from": s, "to": d, "via": via} for s, d, via in sorted(parsed.peers)]
    for lines in lines_of.values():
        result = parse_output("\n".join(lines))
        summary.nccl_tests += [{"size": row.size_bytes, "busbw": row.out_of_place.busbw_GBps}
                               for row in result.rows if row.out_of_place is not None]
    backend = allreduce_backend(all_lines, ())
    summary.backend = backend.name if backend.server is not None and backend.name != "unknown" else None
    machine = machine_from_log(parsed, version)
    judged = triage(machine, version=version or (NcclVersion.parse(server_v) if server_v else None),
                    nranks=parsed.nranks or max(1, len(summary.ranks)), nnodes=parsed.nnodes or max(1, len(parsed.hosts)))
    judged = with_network(judged, network_triage(read_network(parsed), parsed.echoes))
    summary.triage = [f.to_dict() for f in judged.findings]
    summary.triage_summary = judged.summary
    summary.network = list(judged.network)
    summary.diag = list(parsed.diag)
    return summary


def render(summary: LogSummary, console: Console | None = None, *, as_json: bool = False) -> None:
    """Print ``summary``: one JSON object, or a two-column table and the triage's findings;
    ``console``: where (default stdout; off a terminal each row is one line)."""
    console = console or Console()
    if as_json:
        console.out(json.dumps(summary.to_dict(), indent=2), highlight=False)
        return
    console.out(f"read {len(summary.files)} file{'s' if len(summary.files) != 1 else ''}: "
                f"{', '.join(summary.files)}", highlight=False)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("what")
    table.add_column("read")
    versions = summary.nccl_versions
    table.add_row("NCCL version", (f"{', '.join(versions)} (different NCCLs in these logs)" if len(versions) > 1
                                   else summary.nccl_version or "not logged"))
    table.add_row("ranks", _ranks(summary.ranks) or "none stated")
    table.add_row("processes", _processes(summary.processes) or "none")
    for name, echo in summary.echoes.items():
        others = "".join(f"; {v} (ranks {_ranks(r) or '?'})" for v, r in echo.get("others", {}).items())
        table.add_row(name, f"{echo['value']} (ranks {_ranks(echo['ranks']) or '?'})" + others
                      + (" — the processes disagree" if others else ""))
    pairs: dict[str, list[str]] = {}
    for p in summary.peers:
        pairs.setdefault(p["via"], []).append(f"{p['from']}->{p['to']}")
    for via, said in pairs.items():
        table.add_row(f"via {via}", " ".join(said))
    if summary.nccl_tests:
        first, last = summary.nccl_tests[0], summary.nccl_tests[-1]
        table.add_row("nccl-tests rows", f"{len(summary.nccl_tests)}: {first['size']} B {first['busbw']:.2f} GB/s"
                      f" .. {last['size']} B {last['busbw']:.2f} GB/s (out-of-place busbw)")
    table.add_row("allreduce backend", summary.backend or "no server")
    for message in summary.diag:
        table.add_row("NCCL DIAG", message)
    if console.is_terminal:
        console.print(table)
    else:
        console.out(plain_table(table), highlight=False)
    if summary.empty:
        console.out("note: no NCCL line, NCCL version, nccl-tests row or server line was found in "
                    f"{', '.join(summary.files)} (a log of another program, compressed or binary?)", highlight=False)
        return
    console.out(f"triage: {summary.triage_summary}", highlight=False)
    for finding in summary.triage:
        console.out(f"- {finding.get('sentence', '')}", highlight=False)
    for line in summary.network:
        console.out(f"- {line}", highlight=False)


def _processes(threads: list[str]) -> str:
    """``host:pid:tid`` threads as their processes, each with its thread count (a row a person
    reads; the JSON keeps every thread)."""
    by_process: dict[str, int] = {}
    for thread in threads:
        host_pid = thread.rsplit(":", 1)[0] if thread.count(":") >= 2 else thread
        by_process[host_pid] = by_process.get(host_pid, 0) + 1
    return ", ".join(f"{p} ({n} thread{'s' if n != 1 else ''})" for p, n in by_process.items())


def _ranks(ranks: list[int]) -> str:
    out: list[str] = []
    for r in ranks:
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out)
