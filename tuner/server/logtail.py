"""What the tail of a server's log says: the cause of a failure, the port the server announced.

The tail is kept by :class:`tuner.server.logpump.LogPump`; a failure's cause is read from it.

**Causes.** The cause of a failure is the root error, not a wrapper that points elsewhere and
not a harmless warning printed earlier. :func:`find_cause` ranks the lines of a tail by
:class:`CauseKind` and takes the first line of the best kind (the root comes first; later ones
are its consequences on other ranks). Shapes recognised, with their primary sources:

* wrappers that point elsewhere: vLLM's ``RuntimeError: Engine core initialization failed. See
  root cause above`` (vllm/v1/engine/utils.py, ``wait_for_engine_startup``), ``EngineDeadError:
  EngineCore encountered an issue. See stack trace (above) for the root cause``
  (vllm/v1/engine/exceptions.py), ``EngineCore failed to start`` / ``EngineCore encountered a
  fatal error`` (vllm/v1/engine/core.py), ``Engine core proc ... died unexpectedly``
  (vllm/v1/engine/core_client.py); SGLang's ``Scheduler hit an exception`` and ``Received sigquit
  from a child process`` (sglang/srt/managers/scheduler.py, sglang/srt/entrypoints/engine.py);
* harmless warnings: Python warning categories (``UserWarning``, ``DeprecationWarning``...),
  lines logged at WARNING level, PyTorch's ``[W... ProcessGroupNCCL.cpp] Warning:`` lines and
  benign ``NCCL WARN`` lines (``Failed to open libibverbs``: NCCL falls back to sockets; up to
  2.26 ``Invalid NCCL_NTHREADS ...``: NCCL uses another thread count);
* ``INFO``/``DEBUG`` lines are read only when nothing else explains the failure (a launcher that
  re-logs every server line at INFO level).

**Ports.** :func:`announced_port` reads the port a server says it listens on (uvicorn's
``Uvicorn running on http://0.0.0.0:8001``, vLLM's ``Starting vLLM API server 0 on ...`` and
``non-default args: {... 'port': 8001 ...}``, SGLang's ``server_args=ServerArgs(... port=30000``),
so a server listening elsewhere is caught as the line arrives (``watchers`` of
:class:`tuner.server.logpump.LogPump`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from tuner.nccl import NCCL_MARK

__all__ = ["Cause", "CauseKind", "announced_port", "extract_cause", "find_cause", "level_and_body", "line_kind"]

#: Longest cause text kept (characters).
CAUSE_MAX_CHARS = 300


class CauseKind(IntEnum):
    """What a log line says, best first (a lower value explains a failure better)."""

    ADDRESS_IN_USE = 0  #: a port was taken: a machine problem, not the set's
    MEMORY = 1          #: out of GPU memory (torch, CUDA, vLLM/SGLang memory checks)
    DEVICE = 2          #: a CUDA or NCCL error
    EXCEPTION = 3       #: another Python exception
    NCCL_WARN = 4       #: an ``NCCL WARN`` line that is not known to be benign
    FATAL = 5           #: a signal or abort (segfault, core dumped, killed)
    WRAPPER = 6         #: an error that points elsewhere ("see root cause above")
    WARNING = 7         #: a harmless warning

    @property
    def dead(self) -> bool:
        """True when a line of this kind proves the server cannot serve any more, even if its
        main process still runs (vLLM answers 503 on /health once its engine died). A bare
        Python exception or NCCL WARN does not: servers log handled ones."""
        return self in (CauseKind.ADDRESS_IN_USE, CauseKind.MEMORY, CauseKind.DEVICE,
                        CauseKind.FATAL, CauseKind.WRAPPER)


@dataclass(frozen=True)
class Cause:
    """The line that explains a failure: ``kind``, ``text`` (prefixes stripped, at most
    :data:`CAUSE_MAX_CHARS` characters), ``index`` (position in the lines read), ``port`` (the
    port named by an address-in-use line, else None)."""

    kind: CauseKind
    text: str
    index: int
    port: int | None = None


# -- line prefixes ---------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LEVELS = "DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL"
_PREFIXES = [  # each eats one separating space at most, so a traceback's indentation survives
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+Z?\] ?"),                          # [2024-09-05T00:38:34Z]
    re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] ?"),         # SGLang [2025-04-23 21:31:41 TP2]
    re.compile(rf"^\d{{4}}-\d\d-\d\d[ T][\d:.,]+(?: \| | - \S+ - (?P<level>{_LEVELS}) - | )?"),  # logging, journald
    re.compile(r"^\([^()]*pid=\d+[^()]*\) ?"),                                     # vLLM (APIServer pid=100)
    re.compile(r"^\[rank\d+\]: ?"),                                                # torch [rank0]:
    re.compile(rf"^(?P<level>{_LEVELS}) \d\d-\d\d [\d:.]+ \[?[\w./]+:\d+\] ?"),    # vLLM ERROR 01-01 00:00:09 [core.py:708]
    re.compile(rf"^(?P<level>{_LEVELS})(?: [\w.]+:\d+)?:\s+"),                      # uvicorn "INFO:     ", SGLang "INFO x.py:1:"
    re.compile(r"^\[(?P<torch>[WEIF])\d{3,4} [\d:.]+ [^\]]*\] ?"),                 # torch/c10 [W101 00:00:09.0 File.cpp:1]
]


def level_and_body(line: str) -> tuple[str, str]:
    """``(level, body)`` of one log line: timestamps, process tags (vLLM's ``(APIServer
    pid=1)``, torch's ``[rank0]:``) and logger prefixes removed; ``level`` is the logging level
    they named (``"WARNING"``, ``"ERROR"``...) or ``""``."""
    body = _ANSI.sub("", line).rstrip()
    level = ""
    changed = True
    while changed and body:
        changed = False
        for pattern in _PREFIXES:
            m = pattern.match(body)
            if m and m.end() > 0:
                found = m.groupdict()
                if found.get("level"):
                    level = found["level"].upper()
                elif found.get("torch"):
                    level = {"W": "WARNING", "E": "ERROR", "I": "INFO", "F": "CRITICAL"}[found["torch"]]
                body = body[m.end():]
                changed = True
    return ("WARNING" if level == "WARN" else level), body


# -- line kinds ------------------------------------------------------------------------------
_I = re.IGNORECASE
_ADDRESS_IN_USE = re.compile(
    r"\[Errno (?:98|48)\]|\bEADDRINUSE\b|address already in use|error while attempting to bind on address"
    r"|\bport\b.{0,60}\b(?:is )?(?:already )?in use\b|is not available in \d+ seconds", _I)
_MEMORY = re.compile(
    r"OutOfMemoryError|out of memory|No available memory for the cache blocks|Free memory on device"
    r"|less than desired GPU memory utilization|not enough memory|larger than the available KV cache memory"
    r"|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|memory capacity is unbalanced", _I)
_DEVICE = re.compile(
    r"CUDA error|Cuda failure|cudaError\w+|illegal memory access|device-side assert|CUBLAS_STATUS_\w+"
    r"|\bnccl(?:Internal|System|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error\b|NCCL error"
    r"|unhandled (?:system|cuda) error|NCCL communicator was aborted|Watchdog caught collective operation timeout")
_WRAPPER = re.compile(
    r"root cause above|see (?:the )?(?:stack ?trace|traceback|logs?|errors?) (?:\(above\)|above)"
    r"|check the stack trace above|Engine core initialization failed|EngineCore encountered (?:an issue|a fatal error)"
    r"|EngineCore failed to start|EngineCore hit an exception|\b(?:Async)?EngineDeadError\b|died unexpectedly"
    r"|Scheduler hit an exception|Received sigquit from a child proces|It usually means the child failed"
    r"|Error executing method|This might cause deadlock|Initialization failed\. warmup error"
    r"|Worker failed with error|Exception in worker \S+ while processing method", _I)
_WARNING = re.compile(r"\b[A-Z]\w*Warning\b:|\bwarnings\.warn\(|^(?:Warning|WARNING)\b:?")
#: NCCL WARNs that explain no failure: no libibverbs (NCCL falls back to sockets), and up to 2.26
#: a thread count NCCL replaced ("Invalid NCCL_NTHREADS %d (maximum %d).", src/graph/tuning.cc,
#: getNthreads; an INFO from 2.27).
_BENIGN_NCCL = re.compile(r"Failed to open libibverbs|"
                          r"^Invalid NCCL_(?:LL128_)?NTHREADS -?\d+ \((?:must be a multiple of|maximum|minimum) \d+\)")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")
_EXCEPTION_INSIDE = re.compile(r"\b[A-Z]\w*(?:Error|Exception): \S")
_CODE = re.compile(r"^(?:\s|File \"|raise |\^|~)")  # a traceback's frame and source lines
_FATAL = re.compile(r"Segmentation fault|core dumped|Fatal Python error|terminate called after throwing"
                    r"|^Aborted$|^Killed$|\bSIGSEGV\b|\bSIGABRT\b|^Bus error")
_IGNORED_NEXT = re.compile(r"^Exception ignored in\b")
#: argparse refusing the server's command line (Lib/argparse.py, ArgumentParser.error:
#: "%(prog)s: error: %(message)s"), e.g. "vllm serve: error: unrecognized arguments: --bogus"
_USAGE_ERROR = re.compile(r"^[\w.\-/ ]{1,80}: error: (?:unrecognized arguments|argument |the following arguments "
                          r"are required|invalid choice)")


def line_kind(line: str, *, include_info: bool = False) -> CauseKind | None:
    """The :class:`CauseKind` of one log line, or None when it explains nothing.

    Lines logged at INFO or DEBUG level count only with ``include_info``.
    """
    nccl = NCCL_MARK.search(line)
    if nccl:
        if nccl["level"] == "WARN":
            return CauseKind.WARNING if _BENIGN_NCCL.search(nccl["msg"]) else CauseKind.NCCL_WARN
        return None
    level, body = level_and_body(line)
    if not body or _CODE.match(body) or (level in ("INFO", "DEBUG") and not include_info):
        return None
    if level == "WARNING" or _WARNING.search(body):
        return CauseKind.WARNING
    if _ADDRESS_IN_USE.search(body):
        return CauseKind.ADDRESS_IN_USE
    if _MEMORY.search(body):
        return CauseKind.MEMORY
    if _DEVICE.search(body):
        return CauseKind.DEVICE
    if _WRAPPER.search(body):
        return CauseKind.WRAPPER
    if _EXCEPTION.match(body) or _EXCEPTION_INSIDE.search(body):
        return CauseKind.EXCEPTION
    if _FATAL.search(body) or _USAGE_ERROR.match(body):
        return CauseKind.FATAL
    return None


def _cause_text(line: str) -> str:
    nccl = NCCL_MARK.search(line)
    text = f"NCCL WARN {nccl['msg']}" if nccl else level_and_body(line)[1]
    return text.strip()


_PORT_IN_TEXT = [re.compile(r"\(\s*'[^']*'\s*,\s*(\d{1,5})\s*\)"),           # ('0.0.0.0', 8000)
                 re.compile(r"port\b(?: at)?\s*[:=]?\s*(\d{2,5})\b", _I),
                 re.compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|\]):(\d{2,5})\b")]


def _port_in(text: str) -> int | None:
    for pattern in _PORT_IN_TEXT:
        m = pattern.search(text)
        if m:
            return int(m.group(1))
    return None


def _scan(lines: Sequence[str], include_info: bool) -> Cause | None:
    best: tuple[CauseKind, int] | None = None
    ignore_next_exception = False
    for i, line in enumerate(lines):
        kind = line_kind(line, include_info=include_info)
        if _IGNORED_NEXT.match(level_and_body(line)[1]):
            ignore_next_exception = True  # "Exception ignored in: <__del__>": the next exception is noise
            continue
        if kind is CauseKind.EXCEPTION and ignore_next_exception:
            ignore_next_exception = False
            kind = CauseKind.WARNING
        if kind is not None and (best is None or kind < best[0]):
            best = (kind, i)
    if best is None:
        return None
    kind, i = best
    text = _cause_text(lines[i])
    if kind is CauseKind.DEVICE and "nccl" in text.lower():
        # NCCL's own WARN before its error code names the failing call: keep it as the detail.
        warns = [j for j in range(i) if line_kind(lines[j]) is CauseKind.NCCL_WARN]
        if warns:
            text = f"{text} [{_cause_text(lines[warns[-1]])}]"
    port = _port_in(text) if kind is CauseKind.ADDRESS_IN_USE else None
    return Cause(kind, text[:CAUSE_MAX_CHARS], i, port)


def find_cause(lines: Sequence[str]) -> Cause | None:
    """The line of ``lines`` (a log tail, oldest first) that best explains a failure, or None.

    The first line of the best :class:`CauseKind` wins: an address in use, then out of memory,
    CUDA/NCCL errors, other Python exceptions, non-benign NCCL WARN lines, signals, and only then
    wrappers that point elsewhere and harmless warnings. A Python exception printed by
    ``Exception ignored in: ...`` counts as a warning. A CUDA/NCCL error line mentioning NCCL
    carries the last non-benign ``NCCL WARN`` before it as its detail. INFO/DEBUG lines are read
    only when nothing else is found.
    """
    cause = _scan(lines, include_info=False)
    if cause is None or cause.kind is CauseKind.WARNING:
        cause = _scan(lines, include_info=True) or cause
    return cause


def extract_cause(lines: Sequence[str]) -> str:
    """One-line cause from a log tail (:func:`find_cause`'s text), ``""`` if none."""
    cause = find_cause(lines)
    return cause.text if cause else ""


# -- ports announced ---------------------------------------------------------------------------
_ANNOUNCED = [
    # uvicorn/server.py, Server._log_started_message (SGLang serves through uvicorn too)
    re.compile(r"Uvicorn running on https?://(?:\[[^\]]*\]|[^\s:/]+):(\d{1,5})"),
    # vllm/entrypoints/openai/api_server.py, run_server_worker
    re.compile(r"Starting vLLM API server(?: \d+)? on https?://(?:\[[^\]]*\]|[^\s:/]+):(\d{1,5})"),
    # vllm/entrypoints/utils.py, log_non_default_args (older: cli_args.py)
    re.compile(r"non-default args: \{.*'port': (\d{1,5})\b"),
    # vLLM before 0.6: "args: Namespace(host=None, port=8000, ..."
    re.compile(r"\bargs: Namespace\(.*?[(,\s]port=(\d{1,5})\b"),
    # sglang/srt/entrypoints/engine.py logs "server_args=ServerArgs(..., port=30000, ...)"
    re.compile(r"ServerArgs\(.*?[(,\s]port=(\d{1,5})\b"),
    # CPython Lib/http/server.py, test(): "Serving HTTP on 0.0.0.0 port 8000 (http://...)"
    re.compile(r"Serving HTTP on \S+ port (\d{1,5})\b"),
]


def announced_port(line: str) -> int | None:
    """The HTTP port a server line says the server listens (or will listen) on, else None."""
    for pattern in _ANNOUNCED:
        m = pattern.search(line)
        if m:
            return int(m.group(1))
    return None
