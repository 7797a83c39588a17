"""NCCL's lines in a server log: the wrappers in front of them, the line prefix, the version lines.

A server log interleaves every rank. NCCL's lines look like ``host:pid:tid [cudaDev] NCCL INFO
msg`` (WARN: ``host:pid:tid [dev] file.cc:123 NCCL WARN msg`` up to 2.30.4, src/debug.cc
ncclDebugLog ``"[%d] %s:%d NCCL WARN "``; from 2.30.7 with the function, ``host:pid:tid [dev]
enqueue.cc:2063 (topoGetAlgoInfo) NCCL WARN msg``, ncclDebugLogV ``"[%d] %s:%d (%s) NCCL WARN
%s"``, a plugin's WARN through ncclDebugLog keeping the old form; TRACE adds a time before the
file; from 2.26 an optional ``[timestamp] `` leads), possibly behind
a wrapper's prefix: vLLM's ``(VllmWorker rank=3 pid=123)``/``(Worker_TP3 pid=123)``, Ray's
``(RayWorkerWrapper pid=539, ip=10.0.0.1)`` (plus a ``[repeated 15x across cluster]`` tail when
Ray folds duplicate lines), SGLang's ``[2026-06-28 13:34:12 TP3]``. Before those, a launcher may add its own prefix
(:func:`strip_launcher`). :data:`NCCL_LINE` is the one definition of NCCL's line prefix in the
core (the simulator keeps its own); the host may be bracketed (``[pod-name]:4773:4773 [1] NCCL
INFO``, a log whose host was redacted). Every release since 2.18 prints the thread id
(src/debug.cc, ncclDebugLog ``"%s:%d:%d [%d] "``): a ``host:pid`` without one is a fragment of a cut line.

"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.nccl.types import NcclVersion

__all__ = ["NCCL_LINE", "NCCL_MARK", "NCCL_VERSION", "RAY_COPIED_ENV", "SERVER_NCCL_VERSION",
           "NcclLine", "line_pid", "read_line", "strip_ansi", "strip_launcher", "strip_wrappers",
           "version_in_text"]

_RAY = re.compile(r"^\((?P<actor>[\w.-]+) pid=(?P<pid>\d+)(?:, ip=[\w.:-]+)?\)\s?")
_WORKER = re.compile(r"^\((?P<actor>[\w.-]+)(?P<inner>[^()]*?\bpid=\d+[^()]*)\)\s?")
_BRACKET_TIME = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<tags>(?: [A-Z]+\d+)*)\]\s?")
#: Terminal colour codes (Ray colours its worker prefixes and the "[repeated Nx ...]" tag), also
#: as the literal text ``ESC[36m`` a paste into an issue turns them into (vllm #5405).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|ESC\[[0-9;]*m")
#: Ray's fold of duplicate lines and the note after it, which a paste may cut
#: (ray/_private/ray_logging.py, LogDeduplicator: "[repeated %dx across cluster]").
_RAY_DEDUP = re.compile(r"\s*\[repeated (\d+)x across cluster\](?:\s*\(Ray deduplicates logs[^)\x00]*\)?)?\s*$")
_DATE = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"  # ctime(3), Open MPI's --timestamp-output
#: What a launcher puts before each line a rank prints, one pattern per launcher:
#: Open MPI ``mpirun --tag-output`` ``[1,0]<stdout>:`` and ``--timestamp-output``
#: ``Thu Jul 18 15:41:05 2024<stdout>:`` (both: ``...2024[1,0]<stdout>:``; orte/mca/iof/base
#: iof_base_output.c, ``orte_iof_base_write_output``); Slurm ``srun --label`` ``0: `` (the task id
#: right-aligned to the widest; src/common/io_hdr.c and srun's ``_label``); MPICH/Hydra
#: ``-prepend-rank`` ``[0] `` (not NCCL's own ``[dev]`` of a line without host, ``[1] NCCL INFO`` or
#: TRACE's ``[1] 15269.938482 topoGetAlgoInfo:1535 NCCL TRACE``); torchrun ``--tee``/``--redirects``
#: ``[default0]:`` and PyTorch 2.2+'s ``[rank3]:`` (torch/distributed/elastic/multiprocessing/
#: api.py, tail_log prefixes; not a bracketed host, which a pid follows); docker ``logs -t`` and
#: ``kubectl logs --timestamps`` RFC 3339 times ``2024-06-07T10:19:28.123456789Z ``.
_LAUNCHER = re.compile(
    rf"^(?:(?:{_DATE})?(?:\[\d+,\d+\])?<(?:stdout|stderr|stddiag)>:"
    r"|\s*\d+: "
    r"|\[\d+\] (?=\S+:\d+(?::\d+)? \[\d+\]|(?!.*\bNCCL (?:INFO|WARN|TRACE|ABORT|DIAG)\b))"
    r"|\[[A-Za-z_]*\d+\]:(?!\d+(?::\d+)? \[)"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? )")

# NCCL prints INFO, WARN and TRACE (src/debug.cc); ABORT, NCCL_DEBUG's last level, in case a build does;
# from 2.31 the init diagnostics (NCCL_RUN_DIAGNOSTICS=1, the DIAG subsystem) report under "NCCL DIAG".
_LEVEL_AND_MESSAGE = r"NCCL (?P<level>INFO|WARN|TRACE|ABORT|DIAG)\b ?(?P<msg>.*)$"
#: One NCCL line, searched for (a wrapper or a table row may precede it): groups ``host``,
#: ``pid``, ``tid`` (absent when NCCL printed none), ``dev``, ``mid`` (WARN's ``file.cc:123``,
#: TRACE's time and function), ``level``, ``msg``.
NCCL_LINE = re.compile(  # the host begins a run of host characters: linear, not quadratic, in a long line
    r"(?:(?<![^\s:\[\]()])(?P<host>[^\s:\[\]()]+|\[[^\s\[\]]+\]):(?P<pid>\d+):(?P<tid>\d+) )?"
    r"\[(?P<dev>\d+)\](?P<mid>[^\n]*?) " + _LEVEL_AND_MESSAGE)
#: NCCL's init-diagnostics line (2.31+), which has no thread and no device: ``<host>:<pid> NCCL DIAG
#: <body>`` (src/include/diagnostics_log.h, ``DIAG_PRINT``: ``"%s:%d " fmt``, to stdout): ``host``, ``pid``, ``msg``.
DIAG_LINE = re.compile(r"(?:(?<![^\s:\[\]()])(?P<host>[^\s:\[\]()]+):(?P<pid>\d+) )?NCCL DIAG\b ?(?P<msg>.*)$")
#: NCCL's level and message anywhere in a text, prefix or not (an exception quoting a WARN):
#: groups ``level``, ``msg``.
NCCL_MARK = re.compile(r"\b" + _LEVEL_AND_MESSAGE)
#: NCCL's version line, ``NCCL version 2.21.5+cuda12.4`` (src/init.cc, showVersion): ``v``, ``suffix``.
NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?P<suffix>\S*)")
#: A server's ``<server> is using nccl==2.21.5`` (the NCCL it loaded; vLLM's and SGLang's pynccl.py,
#: PyNcclCommunicator.__init__, print it so): ``server``, ``v``. Which servers print it is theirs to
#: say (``tuner.servers``' kinds, ``nccl_version_lines``); the line's shape is read here.
SERVER_NCCL_VERSION = re.compile(r"\b(?P<server>[A-Za-z][\w.-]*) is using nccl==(?P<v>\d+\.\d+\.\d+)")
#: vLLM's Ray executor naming what it passes to Ray workers (vllm/executor/ray_distributed_executor.py
#: up to 0.16: "Copying the following environment variables to workers: %s"): ``names``, a Python list.
RAY_COPIED_ENV = re.compile(r"Copying the following environment variables to workers: \[(?P<names>[^\]]*)\]")


@dataclass(frozen=True)
class NcclLine:
    """One NCCL log line: who printed it and the message after ``NCCL INFO``/``WARN``."""

    process: str  # "host:pid", or "?" when the host:pid:tid part is missing
    dev: int  # the CUDA device of the thread that logged: not the rank
    level: str
    message: str
    prefix_rank: int | None  # from a wrapper prefix (vLLM rank=3, SGLang TP3), if any
    thread: str = "?"  # "host:pid:tid" as NCCL printed it ("host:pid" without a tid), "?" as process

    @property
    def host(self) -> str | None:
        """The host that printed the line, None when the line named none."""
        return None if self.process == "?" else self.process.rsplit(":", 1)[0]


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (``ESC[36m`` ... ``ESC[0m``)."""
    return _ANSI.sub("", text)


def strip_launcher(line: str) -> str:
    """``line`` without the prefixes launchers put before it (:data:`_LAUNCHER`: mpirun's tags and
    times, srun's label, MPICH's rank, torchrun's, docker's and Kubernetes' times), in any order."""
    for _ in range(6):
        m = _LAUNCHER.match(line)
        if not m or not m.end():
            break
        line = line[m.end():]
    return line


def strip_wrappers(line: str) -> tuple[str, int | None, int]:
    """``(line without wrapper prefixes, rank named by a prefix, Ray's fold count)``.

    Launchers' prefixes go first (:func:`strip_launcher`), then up to three wrappers: Ray's
    ``(Actor pid=N, ip=...)`` (vLLM's older ``(RayWorkerVllm pid=N)`` too, coloured or not), a
    vLLM worker's ``(VllmWorker rank=3 pid=N)``, SGLang's ``[date time TP3]``. A Ray ``[repeated Nx across
    cluster]`` tail (with or without Ray's "(Ray deduplicates logs by default ...)" note) is
    removed and its N returned: the line stands for N copies, numbers in them possibly differing
    (ray/_private/ray_logging.py, LogDeduplicator); 0 when the line is not folded.
    """
    rank: int | None = None
    folded = 0
    if "\x1b" in line or "ESC[" in line:
        line = strip_ansi(line)
    m = _RAY_DEDUP.search(line)
    if m:
        folded, line = int(m.group(1)), line[:m.start()]
    for _ in range(4):
        line = strip_launcher(line)
        m = _RAY.match(line) or _WORKER.match(line) or _BRACKET_TIME.match(line)
        if not m:
            break
        text = m.group(0)
        tp = re.search(r"(?:\brank=|\bTP_?|_TP)(\d+)", text)
        if tp:
            rank = int(tp.group(1))
        line = line[m.end():]
    return line, rank, folded


def read_line(body: str, prefix_rank: int | None = None) -> NcclLine | None:
    """The NCCL part of one log line whose wrappers are stripped (:func:`strip_wrappers`), or None
    if it is not an NCCL line; ``prefix_rank`` is the rank the wrapper named."""
    m = NCCL_LINE.search(body) if "NCCL " in body else None  # most lines of a log are not NCCL's
    if not m:
        d = DIAG_LINE.search(body) if "NCCL DIAG" in body else None
        if d is None:
            return None
        process = f"{d.group('host')}:{d.group('pid')}" if d.group("host") else "?"
        return NcclLine(process, -1, "DIAG", d.group("msg"), prefix_rank, process)  # -1: DIAG names no device
    process = f"{m.group('host')}:{m.group('pid')}" if m.group("host") else "?"
    thread = f"{process}:{m.group('tid')}" if m.group("host") and m.group("tid") else process
    return NcclLine(process, int(m.group("dev")), m.group("level"), m.group("msg"), prefix_rank, thread)


def line_pid(line: str) -> int | None:
    """The pid of NCCL's ``host:pid:tid`` prefix on ``line``, None when it has none."""
    m = NCCL_LINE.search(line) if "NCCL " in line else None
    return int(m.group("pid")) if m and m.group("pid") else None


def version_in_text(text: str) -> NcclVersion | None:
    """The NCCL version ``text`` names last: a server's ``is using nccl==`` line first, else
    NCCL's own ``NCCL version`` line; None when it names none."""
    versions = [m.group("v") for m in SERVER_NCCL_VERSION.finditer(text)] or \
        [m.group("v") for m in NCCL_VERSION.finditer(text)]
    return NcclVersion.parse(versions[-1]) if versions else None
