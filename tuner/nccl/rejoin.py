"""NCCL lines cut by stdout's block buffering, put back together.

NCCL writes its log to C ``stdout`` with ``fwrite``/``vfprintf`` and never flushes it (src/debug.cc,
``ncclDebugLog``). On a pipe glibc buffers each process's stdout in 4096-byte blocks: a full
block reaches the pipe in one ``write`` cut at byte 4096, mostly mid-line; the rest of that
line comes at the start of the same process's next block (or at a normal exit), or never when
the process is SIGKILLed. Other writers (the API server's logging, uvicorn, nccl-tune's notes)
write whole lines, so a log read line by line shows a cut line's head with another writer's
line glued to it, and the tail later on a line of its own. :func:`rejoin` gives back the whole
lines and the heads whose tail never came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuner.nccl.lines import strip_wrappers

__all__ = ["LINE_STARTS", "MAX_PENDING", "CutLine", "rejoin"]

#: Most cut heads waiting for their tail at once; the oldest beyond it goes to ``cut``.
MAX_PENDING = 64

_HOST = r"[^\s:\[\]()]+"  # as tuner.nccl.lines.NCCL_LINE's host
# NCCL_DEBUG_TIMESTAMP_FORMAT's default "[%F %T] " (2.26+, on WARN lines by default).
_STAMP = r"(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] )?"
# Between "[dev] " and "NCCL": WARN's "file.cc:123 ", TRACE's "12.345 func:123 " (no ':' in the
# name, so that another process's "host:pid:tid" is not taken for one).
_MID = r"(?:(?:[\d.]+ )?[^\s:\[\]()]+:\d+ )?"
_LEVEL = r"NCCL (?:INFO|WARN|TRACE|ABORT)\b"

#: What a line of each writer starts with, one ``(writer, regex)`` each; a new writer's format is
#: one more row. Matched at a position (the start of a log line, or where another writer's line
#: landed inside a cut NCCL line). Non-capturing groups only: the rows are joined into one regex
#: whose named groups say which row matched. NCCL's formats: src/debug.cc, ncclDebugLog.
LINE_STARTS: tuple[tuple[str, str], ...] = (
    ("nccl", _STAMP + _HOST + r":\d+:\d+ \[\d+\] " + _MID + _LEVEL),  # host:pid:tid [dev] NCCL INFO
    ("nccl-2.30-warn", _STAMP + r"\[\d+\] \S+:\d+ \([^()\s]*\) NCCL WARN\b"),  # [dev] file.cc:1 (func) NCCL WARN
    ("nccl-version", r"NCCL version 2\."),  # src/init.cc, showVersion
    ("ray", r"\([\w.-]+ pid=\d+(?:, ip=[\w.:-]+)?\) "),  # (RayWorkerWrapper pid=2101, ip=10.0.0.1)
    ("worker-tag", r"\([\w.-]+ [^()\n]*?\bpid=\d+[^()\n]*\) "),  # (Worker_TP3 pid=1) (VllmWorker rank=3 pid=1)
    ("bracket-time", r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"),  # [2026-06-28 13:34:12 TP3]
    ("level-date", r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"),
    ("uvicorn", r"(?:INFO:     |WARNING:  |ERROR:    |DEBUG:    |CRITICAL: )"),
    ("python-logging", r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"),
    ("traceback", r"Traceback \(most recent call last\):"),
    ("nccl-tune", r"\[nccl-tune\] "),
)
_NAMES = {f"s{i}": name for i, (name, _) in enumerate(LINE_STARTS)}
_START = re.compile("|".join(f"(?P<s{i}>{p})" for i, (_, p) in enumerate(LINE_STARTS)))

# An NCCL line's prefix at the start of a text whose wrappers are stripped.
_HEAD = re.compile(_STAMP + rf"(?:(?P<host>{_HOST}):(?P<pid>\d+):\d+ \[\d+\] {_MID}|\[\d+\] \S+:\d+ \([^()\s]*\) )"
                   r"(?P<level>NCCL (?:INFO|WARN|TRACE|ABORT))\b ?")
# A text that could be the start of "host:pid:tid [dev] NCCL INFO ...": each part optional once
# the one before it is whole, so a prefix of a match also matches.
_PARTIAL = re.compile(_STAMP + rf"(?P<host>{_HOST})(?P<colon>:(?:\d+(?::(?:\d+(?: (?:\[(?:\d+(?:\](?: .*)?)?)?)?)?)?)?)?)?")
_PROCESS = re.compile(_STAMP + rf"(?P<host>{_HOST}):(?P<pid>\d+):")
_HOST_AT = re.compile(_HOST)


@dataclass(frozen=True)
class CutLine:
    """A piece of an NCCL line left without the rest: a head whose tail never came (lost at a
    SIGKILL), or a piece that could belong to more than one line (ambiguous: a head with another
    process's tail on it, or a tail whose head was given up)."""

    text: str  # the fragment as it reached the log (no newline)
    process: str | None  # "host:pid" when the fragment shows NCCL's host:pid:tid prefix, else None


@dataclass
class Rejoined:
    """What :func:`rejoin` made of a log."""

    lines: list[str]  # every whole line, in order: cut lines rejoined, other writers' lines split out
    joined: int = 0  # how many cut lines were rejoined
    cut: list[CutLine] = field(default_factory=list)  # pieces left without their tail
    rejoined: set[int] = field(default_factory=set)  # indices in ``lines`` of the lines made by a join


@dataclass
class _Piece:
    text: str
    fragment: bool  # a head cut before its end
    open_end: bool = False  # the log's last text, without its newline


class _Log:
    """The hosts of a log and the pieces its lines are cut into."""

    def __init__(self, physical: list[str]):
        pids: dict[str, dict[str, int]] = {}
        for line in physical:
            m = _HEAD.match(line, _body_start(line))
            if m and m.group("host"):
                hosts = pids.setdefault(m.group("pid"), {})
                hosts[m.group("host")] = hosts.get(m.group("host"), 0) + 1
        # A tail cut inside the host name ("st:4242:4242 ...") shows a suffix of the real host,
        # a head cut there with another line glued on ("gpu-" + "gpu-node7:...") a longer name,
        # a head "n1" with another's tail ":103:103 ..." a name seen once; each with the pid of
        # a process that prints more lines under its real name.
        self.processes: set[str] = set()
        for pid, counts in pids.items():
            kept: list[str] = []
            most = max(counts.values())
            for h in sorted(counts, key=lambda h: -counts[h]):
                if not any(k.endswith(h) or h.endswith(k) for k in kept) and (counts[h] > 1 or most < 3):
                    kept.append(h)
            self.processes.update(f"{h}:{pid}" for h in kept)
        self.hosts = {p.rsplit(":", 1)[0] for p in self.processes}

    def cut_at(self, s: str) -> int | None:
        """Where another writer's line begins inside ``s``, an NCCL line or a start of one."""
        off = _body_start(s)
        head = _HEAD.match(s, off)
        if head:
            host = head.group("host")
            if host and host not in self.hosts:  # "gpu-" cut, then "gpu-node7:1:1 [0] NCCL INFO"
                k = self._unswallow(s, off)
                if k > off and self._partial(s, off, k):
                    return k
            pos, message, limit = head.start("level"), head.end(), len(s)
        else:
            part = _PARTIAL.match(s, off)
            if not part:
                return None
            pos, message, limit = off + 1, -1, part.end()
        while True:
            m = _START.search(s, pos)
            if not m or m.start() > limit:
                return None
            k, name = m.start(), _NAMES[m.lastgroup or ""]
            if (head is None and not self._partial(s, off, k)) or (k == message and name == "nccl-version"):
                pos = k + 1  # "NCCL INFO NCCL version 2.x" is one line
                continue
            return self._unswallow(s, k) if name == "nccl" else k

    def _partial(self, s: str, off: int, k: int) -> bool:
        """``s[off:k]`` could begin an NCCL line of a host of this log."""
        m = _PARTIAL.fullmatch(s, off, k)
        if not m:
            return False
        host = m.group("host")
        return host in self.hosts if m.group("colon") else any(h.startswith(host) for h in self.hosts)

    def _unswallow(self, s: str, k: int) -> int:
        """In ``...to Rivm:1:1 [0] NCCL INFO`` the host regex takes ``Rivm``: start at the known
        host it ends with."""
        host = _HOST_AT.match(s, k)
        if not host or host.group() in self.hosts:
            return k
        ends = [h for h in self.hosts if host.group().endswith(h)]
        return host.end() - len(max(ends, key=len)) if ends else k

    def split(self, s: str) -> list[str]:
        """``s`` cut where other writers' lines begin: every part but the last is a cut head."""
        parts = []
        while (k := self.cut_at(s)) is not None:
            parts.append(s[:k])
            s = s[k:]
        parts.append(s)
        return parts

    def nccl_like(self, s: str) -> bool:
        """``s`` is an NCCL line or could begin one of a host of this log."""
        off = _body_start(s)
        return bool(_HEAD.match(s, off)) or self._partial(s, off, len(s))

    def starts_with_host(self, s: str) -> bool:
        """``s`` begins with the whole name of a host of this log."""
        m = _HOST_AT.match(s, _body_start(s))
        return m is not None and m.group() in self.hosts

    def head(self, s: str) -> tuple[bool, bool]:
        """(``s`` is an NCCL line, of a process this log knows or of none named)."""
        m = _HEAD.match(s, _body_start(s))
        if m is None:
            return False, False
        return True, not m.group("host") or f"{m.group('host')}:{m.group('pid')}" in self.processes

    def process(self, s: str) -> str | None:
        """``host:pid`` of a text that shows ``host:pid:``, a process of this log."""
        m = _PROCESS.match(s, _body_start(s))
        p = f"{m.group('host')}:{m.group('pid')}" if m else None
        return p if p in self.processes else None


def _body_start(s: str) -> int:
    """Where ``s`` begins after the wrapper prefixes (tuner.nccl.lines.strip_wrappers)."""
    body = strip_wrappers(s + "\x00")[0]  # the sentinel keeps a Ray "[repeated Nx ...]" tail on
    return len(s) + 1 - len(body)


def _pieces(log: _Log, physical: list[str], open_end: bool) -> list[_Piece]:
    pieces = []
    for n, line in enumerate(physical):
        parts = log.split(line)
        pieces += [_Piece(p, True) for p in parts[:-1]]
        last = open_end and n == len(physical) - 1
        # NCCL ends every line with "\n": an NCCL text at the end without one is cut.
        pieces.append(_Piece(parts[-1], last and log.nccl_like(parts[-1]), last))
    return pieces


def rejoin(text: str) -> Rejoined:
    """The whole lines of a server log whose NCCL lines may be cut by block buffering.

    ``text`` is the whole log (``\\n`` line ends; a last line without one is known). Rules:

    * split: a line that is an NCCL line, or could begin one of a host seen in the log, and holds
      another writer's line start (:data:`LINE_STARTS`) after NCCL's prefix is cut there; the
      head waits for its tail, the rest is a line of its own (split again if need be). When the
      host regex swallows text before a known host (``...to Rivm:1:1``) the cut moves to it;
    * tails: a line that is no line start and shows no known host, or an NCCL line of a process
      the log does not know (a cut inside the host name), joins the oldest waiting head of
      process P when the next line is P's (a block goes on with its own process's lines), else
      the only waiting head when the joined text is an NCCL line of a known process and the
      head's process writes nothing later (a tail alone in the block written at exit). A
      rejoined line stands where its tail was;
    * ambiguity: P's line arriving while P's head still waits means P's tail landed on the cut
      line just before (another process's head): that line, and P's head, go to ``cut``, and
      the other process's own tail, when it comes, too;
    * heads still waiting at the end, an unjoined NCCL-looking tail of an unknown process, and
      the oldest head beyond :data:`MAX_PENDING`, go to ``cut``.

    Known processes (``host:pid``) come from a first pass over the lines that begin with an NCCL
    prefix, leaving out names that are a cut of another name with the same pid (a suffix, a
    longer name ending in it, or a name seen once). Then one pass; 50 MB take about 16 s.
    NCCL's line format: src/debug.cc, ncclDebugLog. Raises nothing.
    """
    physical = text.split("\n")
    open_end = not text.endswith("\n")
    if not open_end or text == "":
        physical.pop()
    log = _Log(physical)
    pieces = _pieces(log, physical, open_end)
    procs = [log.process(p.text) for p in pieces]
    last_of = {p: i for i, p in enumerate(procs) if p}
    out = Rejoined([])
    pending: list[CutLine] = []
    waiting: dict[str | None, int] = {}
    orphans: set[str] = set()  # processes whose head was cut off with a tail still to come
    plain_prev = False  # the previous piece went to lines unjoined and is an NCCL text

    def wait(t: str, process: str | None) -> None:
        pending.append(CutLine(t, process))
        waiting[process] = waiting.get(process, 0) + 1
        if len(pending) > MAX_PENDING:
            take(0, to_cut=True)

    def take(k: int, to_cut: bool = False) -> CutLine:
        c = pending.pop(k)
        waiting[c.process] -= 1
        if to_cut:
            out.cut.append(c)
        return c

    def is_warn(i: int) -> bool:
        return i < len(pieces) and " NCCL WARN" in pieces[i].text and log.head(pieces[i].text)[0]

    for i, piece in enumerate(pieces):
        t, proc = piece.text, procs[i]
        if proc and (waiting.get(proc) or proc in orphans):
            # Its block goes on and its tail was not seen: the tail went onto the cut line just
            # before (another process's head), or is lost with it.
            while waiting.get(proc):
                take(next(k for k, c in enumerate(pending) if c.process == proc), to_cut=True)
            orphans.discard(proc)
            if plain_prev and out.lines:
                out.cut.append(CutLine(out.lines.pop(), procs[i - 1]))
                if procs[i - 1]:
                    orphans.add(procs[i - 1] or "")
        plain_prev = False
        if piece.fragment:
            wait(t, proc)
            continue
        is_nccl, known = log.head(t)
        unknown = is_nccl and not known
        # Not a tail: a text that shows a known process or host ("n2:102:102 [2] NCC" or "n1",
        # then another process's tail).
        ours = proc is not None or log.starts_with_host(t)
        tail = unknown or (not _START.match(t) and not ours)
        if t == "" and is_warn(i + 1):
            tail = False  # WARN's own leading "\n" (src/debug.cc)
        if tail:
            j = i + 2 if pieces[i + 1:i + 2] and pieces[i + 1].text == "" and is_warn(i + 2) else i + 1
            nxt = procs[j] if j < len(pieces) else None
            k = None
            if nxt:  # a head that shows the process, or one that makes an NCCL line of it with t
                k = next((n for n, c in enumerate(pending) if c.process == nxt or
                          (c.process is None and log.process(c.text + t) == nxt)), None)
            if k is None and nxt and nxt in orphans:  # the tail of a head already given up
                orphans.discard(nxt)
                out.cut.append(CutLine(t, nxt))
                continue
            if k is None and len(pending) == 1 and last_of.get(pending[0].process or "", -1) < i \
                    and all(log.head(pending[0].text + t)):
                k = 0  # a tail alone in the block its process wrote at exit
            if k is not None:
                head = take(k)
                out.joined += 1
                parts = log.split(head.text + t)
                for p in parts[:-1]:
                    wait(p, log.process(p))
                if piece.open_end:  # the joined line's end is not in the log yet
                    wait(parts[-1], log.process(parts[-1]))
                else:
                    out.rejoined.add(len(out.lines))
                    out.lines.append(parts[-1])
                continue
            if unknown:  # a process that does not exist
                out.cut.append(CutLine(t, None))
                continue
        out.lines.append(t)
        plain_prev = ours or log.nccl_like(t)
    while pending:
        take(0, to_cut=True)
    return out
