"""How a launch is found again: the marker in its processes' environment and its recorded identity.

Every process of a launch carries :data:`MARKER` with the launch's own value, whatever session
or name it moves to; a runner records the :class:`ServerIdentity` of the server it runs (in its
runner file, :mod:`tuner.study.inflight`) so the next runner can tear down a server a dead runner
left behind (:func:`tuner.server.teardown.kill_leftover`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tuner.redaction import redact_argv

__all__ = ["MARKER", "ServerIdentity"]

#: Set in every server's environment; its value identifies the launch across session changes.
MARKER = "TUNER_SERVER_ID"


@dataclass(frozen=True)
class ServerIdentity:
    """What a later runner needs to find a launch again.

    ``marker``: the launch's value of :data:`MARKER` (``""``: none recorded); ``pid``: the main
    process, ``pgid``: its process group (the same number: it starts a session), ``create_time``:
    its start (s since the epoch, as psutil reads it, so a reused pid is never taken for it);
    ``port``: ``server.port``. Before the process started only ``marker`` is known (the others
    None).
    """

    marker: str
    pid: int | None = None
    pgid: int | None = None
    create_time: float | None = None
    port: int | None = None
    launcher: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The runner file's ``server`` object: ``{"pid", "pgid", "create_time", "marker",
        "port", "launcher"}``, or ``{"marker"}`` alone before the start. The launcher's handle
        is a client and a name (:meth:`tuner.launchers.Launcher.handle`), no secret; redacted
        all the same (:func:`tuner.redaction.redact_argv`): a file must never hold one."""
        if self.pid is None and self.pgid is None and not self.launcher:
            return {"marker": self.marker}
        found: dict[str, object] = {"pid": self.pid, "pgid": self.pgid, "create_time": self.create_time,
                                    "marker": self.marker, "port": self.port}
        if self.launcher:
            found["launcher"] = redact_argv(self.launcher)
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ServerIdentity:
        """The identity :meth:`to_json` wrote, or one an older runner wrote as a plain dict
        (numbers possibly as text, keys missing). Never raises: a value that does not read as
        its type is None (``marker``: ``""``)."""
        handle = data.get("launcher")
        launcher = tuple(str(a) for a in handle) if isinstance(handle, list) else ()
        return cls(marker=str(data.get("marker") or ""), pid=_int(data.get("pid")), pgid=_int(data.get("pgid")),
                   create_time=_float(data.get("create_time")), port=_int(data.get("port")), launcher=launcher)


def _float(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(str(value))
    except ValueError:
        return None


def _int(value: object) -> int | None:
    number = _float(value)
    return int(number) if number is not None and number.is_integer() else None
