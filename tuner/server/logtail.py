"""What the tail of a server's log says: the cause of a failure, the port the server announced.

The tail is kept by :class:`tuner.server.logpump.LogPump`; a failure's cause is read from it.

**Causes.** The cause of a failure is the root error, not a wrapper that points elsewhere and
not a harmless warning printed earlier; what ended the process (a fatal line, a signal) outranks
an ``NCCL WARN``. :func:`find_cause` ranks the lines of a tail by :class:`CauseKind` and takes
the first line of the best kind (the root comes first; later ones are its consequences on other
ranks). What one server kind prints (its tag, its wrappers, fatal and benign lines) is read from
its :class:`tuner.servers.ServerKind` (every kind's when the launch's is unknown); NCCL's harmless
WARNs, by version, from :func:`tuner.nccl.benign_warn`. JSON log lines (tracing's JSON, loguru's
``serialize``, python-json-logger) are read for their message (:func:`unwrap_json`), never their
envelope. Generic shapes here: wrappers that say "see root cause above"; Python warning
categories, lines logged at WARNING level and PyTorch's ``[W... ProcessGroupNCCL.cpp] Warning:``
lines (a cause only when nothing else is found); ``INFO``/``DEBUG`` lines are read only when
nothing else explains the failure (a launcher that re-logs every server line at INFO level).

**Ports.** :func:`announced_port` reads the port a server says it listens on (uvicorn's
``Uvicorn running on http://0.0.0.0:8001``, vLLM's ``Starting vLLM API server 0 on ...`` and
``non-default args: {... 'port': 8001 ...}``, SGLang's ``server_args=ServerArgs(... port=30000``),
so a server listening elsewhere is caught as the line arrives (``watchers`` of
:class:`tuner.server.logpump.LogPump`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from tuner.nccl import NCCL_MARK, NcclVersion, benign_warn, version_in_text
from tuner.servers import GENERIC, KINDS, ServerKind

__all__ = ["Cause", "CauseKind", "announced_port", "extract_cause", "find_cause", "level_and_body", "line_kind",
           "unwrap_json", "warn_keys"]

#: Longest cause text kept (characters).
CAUSE_MAX_CHARS = 300


class CauseKind(IntEnum):
    """What a log line says, best first (a lower value explains a failure better).

    What ended the process outranks what was only warned: a fatal line (a signal, an abort, the
    kind's ``fatal_lines``) outranks any ``NCCL WARN``; a known-benign line is never a cause."""

    ADDRESS_IN_USE = 0  #: a port was taken: a machine problem, not the set's
    MEMORY = 1          #: out of GPU memory (torch, CUDA, vLLM/SGLang memory checks)
    DEVICE = 2          #: a CUDA or NCCL error
    EXCEPTION = 3       #: another Python exception
    FATAL = 4           #: a signal or abort (segfault, core dumped, killed), a usage error, the kind's fatal line
    NCCL_WARN = 5       #: an ``NCCL WARN`` line that is not known to be benign
    WRAPPER = 6         #: an error that points elsewhere ("see root cause above")
    WARNING = 7         #: a harmless warning: a cause only when nothing else is found
    BENIGN = 8          #: a line known to be harmless (NCCL's by version, the kind's): never a cause

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


_JSON_LEVELS = {"WARN": "WARNING", "TRACE": "DEBUG", "SUCCESS": "INFO", "FATAL": "CRITICAL", "ERR": "ERROR"}
#: Fields of a cut JSON envelope, read when it no longer parses (a log cap cut it).
_CUT_LEVEL = re.compile(r'"(?:level|levelname|severity)"\s*:\s*"(\w+)"')
_CUT_MESSAGE = re.compile(r'"(?:message|msg)"\s*:\s*"((?:[^"\\]|\\.)*)')


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _unwrap_cut(body: str) -> tuple[str, str] | None:
    """``(level, message)`` of a JSON envelope that no longer parses (a cap cut its end)."""
    level, found = _CUT_LEVEL.search(body), _CUT_MESSAGE.search(body)
    if found is None:
        return None
    try:
        text = str(json.loads(f'"{found.group(1)}"'))
    except ValueError:
        text = found.group(1)
    name = level.group(1).upper() if level else ""
    return _JSON_LEVELS.get(name, name), text.strip()


def unwrap_json(body: str) -> tuple[str, str] | None:
    """``(level, message)`` of a JSON log line, or None when ``body`` is not one.

    Shapes read: tracing-subscriber's JSON format (TGI's ``--json-output``, launcher/src/main.rs:
    ``{"timestamp", "level": "ERROR", "fields": {"message": ...}, "target"}``, or flattened with
    ``message`` at the top); loguru's ``serialize=True`` (``{"text", "record": {"level": {"name"},
    "message", "exception": {"type", "value"}}}``, loguru/_handler.py, _serialize_record);
    python-json-logger (``{"levelname", "message", "exc_info"}``). The message carries the
    exception's ``type: value`` (loguru) or its traceback's last line (python-json-logger) first,
    the logged message after it in parentheses. ``level`` as :func:`level_and_body` names it."""
    if not (body.startswith("{") and '"' in body[:3]):
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return _unwrap_cut(body)
    if not isinstance(obj, dict):
        return None
    record: dict[str, object] = obj["record"] if isinstance(obj.get("record"), dict) else obj
    fields: dict[str, object] = obj["fields"] if isinstance(obj.get("fields"), dict) else {}
    raw_level = record.get("level", obj.get("levelname", obj.get("severity", "")))
    level = _text(raw_level.get("name") if isinstance(raw_level, dict) else raw_level).upper()
    message = _text(fields.get("message")) or _text(record.get("message")) or _text(obj.get("msg")) \
        or _text(obj.get("text"))
    exc = record.get("exception")
    error = ""
    if isinstance(exc, dict) and (exc.get("type") or exc.get("value")):
        error = ": ".join(_text(exc.get(k)) for k in ("type", "value") if _text(exc.get(k)))
    elif _text(obj.get("exc_info")):
        error = _text(obj.get("exc_info")).splitlines()[-1].strip()
    if not message and not error:
        return None  # a JSON object that is no log record: read as it is
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if len(lines) > 1:  # a traceback in one message: its last line is the error
        message = lines[-1] if lines[0].startswith("Traceback") else " ".join(lines)
    if error and message and error not in message:
        message = f"{error} ({message})"
    return _JSON_LEVELS.get(level, level), message or error


def level_and_body(line: str, kind: ServerKind | None = None) -> tuple[str, str]:
    """``(level, body)`` of one log line: timestamps, process tags (vLLM's ``(APIServer
    pid=1)``, torch's ``[rank0]:``, ``kind``'s own tag) and logger prefixes removed, a JSON
    envelope unwrapped (:func:`unwrap_json`); ``level`` is the logging level they named
    (``"WARNING"``, ``"ERROR"``...) or ``""``."""
    body = _ANSI.sub("", line).rstrip()
    if kind is not None:
        body = kind.strip_prefix(body)
    level = ""
    changed = True
    while changed and body:
        changed = False
        unwrapped = unwrap_json(body)
        if unwrapped is not None:
            level, body = unwrapped[0] or level, unwrapped[1]
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
#: Wrappers any server may print; a kind's own are its ``wrapper_lines``.
_WRAPPER = re.compile(
    r"root cause above|see (?:the )?(?:stack ?trace|traceback|logs?|errors?) (?:\(above\)|above)"
    r"|check the stack trace above|died unexpectedly|This might cause deadlock", _I)
_WARNING = re.compile(r"\b[A-Z]\w*Warning\b:|\bwarnings\.warn\(|^(?:Warning|WARNING)\b:?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")
_EXCEPTION_INSIDE = re.compile(r"\b[A-Z]\w*(?:Error|Exception): \S")
_CODE = re.compile(r"^(?:\s|File \"|raise |\^|~)")  # a traceback's frame and source lines
_FATAL = re.compile(r"Segmentation fault|core dumped|Fatal Python error|terminate called after throwing"
                    r"|^Aborted\b|^Killed$|\bSIG(?:SEGV|ABRT|BUS|FPE|ILL)\b|^Bus error")
#: Fatal lines that say more than the signal: CPython's faulthandler (Python/faulthandler.c,
#: "Fatal Python error: %s"), libstdc++'s verbose terminate handler, argparse's usage error.
_FATAL_SAYS_MORE = re.compile(r"Fatal Python error|terminate called after throwing|: error: ")
#: faulthandler's frame line ("  File \"x.py\", line 246 in ncclAllReduce"), most recent first.
_FAULT_FRAME = re.compile(r'^\s*File "[^"]*", line \d+ in (?P<func>\S+)')
_IGNORED_NEXT = re.compile(r"^Exception ignored in\b")
#: argparse refusing the server's command line (Lib/argparse.py, ArgumentParser.error:
#: "%(prog)s: error: %(message)s"), e.g. "vllm serve: error: unrecognized arguments: --bogus"
_USAGE_ERROR = re.compile(r"^[\w.\-/ ]{1,80}: error: (?:unrecognized arguments|argument |the following arguments "
                          r"are required|invalid choice)")


def _kinds(kind: ServerKind | None) -> tuple[ServerKind, ...]:
    """The kinds whose knowledge reads a line: ``kind``'s, or every kind's when it is unknown."""
    return (kind,) if kind is not None and kind is not GENERIC else KINDS


def _warn_key(message: str) -> str:
    return " ".join(message.split())


def warn_keys(lines: Iterable[str]) -> frozenset[str]:
    """The ``NCCL WARN`` messages of ``lines`` (whitespace folded): what a launch printed before
    it served, passed back to :func:`find_cause` as ``served``."""
    return frozenset(_warn_key(m["msg"]) for line in lines if (m := NCCL_MARK.search(line)) and m["level"] == "WARN")


def line_kind(line: str, *, include_info: bool = False, kind: ServerKind | None = None,
              nccl_version: NcclVersion | None = None, served: Collection[str] = ()) -> CauseKind | None:
    """The :class:`CauseKind` of one log line, or None when it explains nothing.

    ``kind``: the launch's server kind (its prefixes, benign, fatal and wrapper lines; None or the
    generic kind: every kind's). An ``NCCL WARN`` is BENIGN when NCCL ``nccl_version`` prints it
    harmlessly (:func:`tuner.nccl.benign_warn`; None: any release's), when the kind knows it, or
    when its message is in ``served`` (printed before the launch served). Lines logged at INFO or
    DEBUG level count only with ``include_info``.
    """
    kinds = _kinds(kind)
    nccl = NCCL_MARK.search(line)
    if nccl:
        if nccl["level"] != "WARN":
            return None
        msg = nccl["msg"]
        if benign_warn(msg, nccl_version) or _warn_key(msg) in served or any(k.is_benign(msg) for k in kinds):
            return CauseKind.BENIGN
        return CauseKind.NCCL_WARN
    level, body = level_and_body(line, kind)
    if not body or _CODE.match(body) or (level in ("INFO", "DEBUG") and not include_info):
        return None
    if any(k.is_benign(body) for k in kinds):
        return CauseKind.BENIGN
    if level == "WARNING" or _WARNING.search(body):
        return CauseKind.WARNING
    if _ADDRESS_IN_USE.search(body):
        return CauseKind.ADDRESS_IN_USE
    if _MEMORY.search(body):
        return CauseKind.MEMORY
    if _DEVICE.search(body):
        return CauseKind.DEVICE
    if _WRAPPER.search(body) or any(k.is_wrapper(body) for k in kinds):
        return CauseKind.WRAPPER
    if _EXCEPTION.match(body) or _EXCEPTION_INSIDE.search(body):
        return CauseKind.EXCEPTION
    if _FATAL.search(body) or _USAGE_ERROR.match(body) or any(k.is_fatal(body) for k in kinds):
        return CauseKind.FATAL
    return None


def _cause_text(line: str, kind: ServerKind | None = None) -> str:
    nccl = NCCL_MARK.search(line)
    text = f"NCCL WARN {nccl['msg']}" if nccl else level_and_body(line, kind)[1]
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


@dataclass(frozen=True)
class _Reading:
    """What a scan of one tail needs besides its lines."""

    kind: ServerKind | None
    nccl_version: NcclVersion | None
    served: Collection[str]

    def line_kind(self, line: str, include_info: bool = False) -> CauseKind | None:
        return line_kind(line, include_info=include_info, kind=self.kind, nccl_version=self.nccl_version,
                         served=self.served)


def _rank(kind: CauseKind, body: str) -> tuple[CauseKind, int]:
    """Sort key of a line: its kind, then (for fatal lines) one that says more than the signal."""
    return kind, (0 if kind is not CauseKind.FATAL or _FATAL_SAYS_MORE.search(body) else 1)


def _fatal_detail(lines: Sequence[str], i: int, text: str, reading: _Reading) -> str:
    """A fatal line with what follows it: the innermost Python frame of a faulthandler dump
    ("in ncclAllReduce"), the ``what():`` of a C++ terminate."""
    for line in lines[i + 1:i + 12]:
        body = level_and_body(line, reading.kind)[1]
        frame = _FAULT_FRAME.match(body)
        if frame and "Fatal Python error" in text:
            return f"{text} (in {frame['func']})"
        if body.strip().startswith("what():") and "terminate called" in text:
            return f"{text}: {body.strip()}"
    return text


def _scan(lines: Sequence[str], include_info: bool, reading: _Reading) -> Cause | None:
    best: tuple[tuple[CauseKind, int], int] | None = None
    ignore_next_exception = False
    for i, line in enumerate(lines):
        kind = reading.line_kind(line, include_info)
        body = level_and_body(line, reading.kind)[1]
        if _IGNORED_NEXT.match(body):
            ignore_next_exception = True  # "Exception ignored in: <__del__>": the next exception is noise
            continue
        if kind is CauseKind.EXCEPTION and ignore_next_exception:
            ignore_next_exception = False
            kind = CauseKind.WARNING
        if kind is not None and kind is not CauseKind.BENIGN and (best is None or _rank(kind, body) < best[0]):
            best = (_rank(kind, body), i)
    if best is None:
        return None
    (kind, _), i = best
    text = _cause_text(lines[i], reading.kind)
    if kind is CauseKind.FATAL:
        text = _fatal_detail(lines, i, text, reading)
    if (kind is CauseKind.DEVICE and "nccl" in text.lower()) or (kind is CauseKind.FATAL and "NCCL WARN" not in text):
        # NCCL's own WARN before an NCCL error or a signal names the failing call: keep it as the detail.
        warns = [j for j in range(i) if reading.line_kind(lines[j]) is CauseKind.NCCL_WARN]
        if warns:
            text = f"{text} [{_cause_text(lines[warns[-1]])}]"
    port = _port_in(text) if kind is CauseKind.ADDRESS_IN_USE else None
    return Cause(kind, text[:CAUSE_MAX_CHARS], i, port)


def _nccl_version(lines: Sequence[str], kind: ServerKind | None) -> NcclVersion | None:
    """The NCCL release the tail names (the kind's ``is using nccl==`` line, NCCL's version line)."""
    for line in reversed(lines):
        said = next((v for k in _kinds(kind) if (v := k.nccl_version(line))), None)
        if said:
            try:
                return NcclVersion.parse(said)
            except ValueError:
                continue
    return version_in_text("\n".join(line for line in lines if "ccl" in line.lower()))


def find_cause(lines: Sequence[str], kind: ServerKind | None = None, *, served: Collection[str] = (),
               nccl_version: NcclVersion | None = None) -> Cause | None:
    """The line of ``lines`` (a log tail, oldest first) that best explains a failure, or None.

    The first line of the best :class:`CauseKind` wins: an address in use, then out of memory,
    CUDA/NCCL errors, other Python exceptions, fatal lines (a signal, an abort, a usage error,
    ``kind``'s fatal lines; one that says more than the signal first, such as ``Fatal Python
    error``), non-benign NCCL WARN lines, and only then wrappers that point elsewhere and harmless
    warnings. BENIGN lines never are: NCCL's harmless WARNs in ``nccl_version`` (read from the tail
    when not given; unknown: any release's), ``kind``'s ``benign_lines``, and WARNs in ``served``
    (:func:`warn_keys` of what the launch printed before it served). A Python exception printed by
    ``Exception ignored in: ...`` counts as a warning. A CUDA/NCCL error line mentioning NCCL, and
    a fatal line, carry the last non-benign ``NCCL WARN`` before them as their detail. JSON lines
    are read for their message (:func:`unwrap_json`). INFO/DEBUG lines are read only when nothing
    else is found. ``kind``: the launch's server kind; None (or the generic kind) reads every
    kind's lines.
    """
    reading = _Reading(kind, nccl_version or _nccl_version(lines, kind), frozenset(served))
    cause = _scan(lines, False, reading)
    if cause is None or cause.kind is CauseKind.WARNING:
        cause = _scan(lines, True, reading) or cause
    return cause


def extract_cause(lines: Sequence[str], kind: ServerKind | None = None, *, served: Collection[str] = ()) -> str:
    """One-line cause from a log tail (:func:`find_cause`'s text), ``""`` if none."""
    cause = find_cause(lines, kind, served=served)
    return cause.text if cause else ""


# -- ports announced ---------------------------------------------------------------------------
_ANNOUNCED = [
    # uvicorn/server.py, Server._log_started_message (SGLang serves through uvicorn too)
    re.compile(r"Uvicorn running on https?://(?:\[[^\]]*\]|[^\s:/]+):(\d{1,5})"),
    # CPython Lib/http/server.py, test(): "Serving HTTP on 0.0.0.0 port 8000 (http://...)"
    re.compile(r"Serving HTTP on \S+ port (\d{1,5})\b"),
]


def announced_port(line: str) -> int | None:
    """The HTTP port a server line says the server listens (or will listen) on, else None: the
    servers' own HTTP layers (uvicorn, Python's http.server), then each kind's ``port_lines``."""
    for pattern in _ANNOUNCED:
        m = pattern.search(line)
        if m:
            return int(m.group(1))
    return next((port for kind in KINDS if (port := kind.announced_port(line)) is not None), None)
