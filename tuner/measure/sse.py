"""Server-Sent Events: the lines of a byte stream, the payloads they frame, the errors a server
sends in them.

The stream is read as Server-Sent Events (WHATWG HTML "Server-sent events", the event stream
interpretation): lines end in CRLF, LF or CR (only those: a U+2028 inside a token is text);
``data:`` with or without the space; several ``data:`` lines of one event are joined with "\\n";
comments (``:``) and ``id:``/``retry:`` fields are ignored; ``event: error`` carries the
server's error. A payload is handled as soon as its data lines parse as JSON, so the arrival time
is the data line's (when its bytes were read: :func:`timed_lines`), and servers that omit the
blank line between events still work.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tuner.errors import ProbeError
from tuner.measure.client import body_excerpt

__all__ = ["DONE", "SseFramer", "server_error", "timed_lines"]

_LINE_END = re.compile(rb"\r\n|\r|\n")
#: What :meth:`SseFramer.feed` gives for ``data: [DONE]``.
DONE = object()


def timed_lines(chunks: Iterable[bytes], clock: Callable[[], float]) -> Iterator[tuple[str, float]]:
    """``(line, t)`` for each line of an SSE byte stream, split on CRLF, LF or CR only (not on
    U+2028 and kin, which ``str.splitlines`` and httpx ``iter_lines`` also split on), decoded as
    UTF-8. ``t`` is the ``clock()`` reading (s) when the bytes ending the line were read: the
    lines of one read share its time, however long the client then takes over each of them (a
    busy client would otherwise spread a burst it received at once over the time it spent
    parsing it: :func:`tuner.measure.results.is_burst`)."""
    buf, t = b"", 0.0
    for data in chunks:
        t = clock()
        buf = buf + data if buf else data
        start = 0
        for m in _LINE_END.finditer(buf):
            if m.end() == len(buf) and m.group() == b"\r":
                break  # maybe the first half of a CRLF: wait for the next byte
            yield buf[start:m.start()].decode("utf-8", "replace"), t
            start = m.end()
        buf = buf[start:]
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace"), t


class SseFramer:
    """Turns SSE lines into payloads: ``None`` (nothing complete yet) or ``(event, obj)``, with
    ``obj`` the parsed JSON of the event's data lines, or ``DONE`` for ``data: [DONE]``."""

    def __init__(self) -> None:
        self.event = ""
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, Any] | None:
        """Take one line (no line end); the payload it completes, or None. Raises ProbeError
        when an event ends with data that is not JSON (an ``event: error`` gives its text)."""
        if not line:  # blank line: the event ends
            pending, event = self.data, self.event
            self.data, self.event = [], ""
            text = "\n".join(pending).strip()
            if not text:
                return None
            if event == "error":
                return event, text  # an error event whose data is plain text
            raise ProbeError(f"bad SSE data (not JSON): {text[:200]!r}")
        if line[0] == ":":
            return None  # comment (keep-alive ping)
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "event":
            self.event = value.strip()
            return None
        if name != "data":
            return None  # id:, retry:, unknown fields
        self.data.append(value)
        text = value if len(self.data) == 1 else "\n".join(self.data)
        if text.strip() == "[DONE]":
            self.data = []
            return self.event, DONE
        try:
            obj = json.loads(text)
        except ValueError:
            return None  # maybe the first line of a multi-line event: wait for the rest
        self.data = []
        return self.event, obj

    def flush(self) -> tuple[str, Any] | None:
        """At the end of the body: the event left open, if any (unparsed data is an error)."""
        return self.feed("") if self.data else None


def server_error(obj: Any, event: str) -> str | None:
    """The server's message when ``obj`` reports an error, else None."""
    if not isinstance(obj, dict):
        if event != "error":
            return None
        return body_excerpt(obj if isinstance(obj, str) else json.dumps(obj))
    err = obj.get("error")
    if err:
        msg = err.get("message") or json.dumps(err) if isinstance(err, dict) else str(err)
        return body_excerpt(str(msg))
    if obj.get("object") == "error" or event == "error":  # vLLM's ErrorResponse, or event: error
        return body_excerpt(str(obj.get("message") or obj.get("detail") or json.dumps(obj)))
    return None
