"""Whether the listener on the server's port is the server nccl-tune launched.

On a shared machine the port can be taken by someone else's server: a colleague's, or a
production vLLM that systemd restarts on its port. A launch whose own server failed to bind
would then be measured on the stranger's answers. So readiness and the recorded runs count only
while the listener is ours, recognised one of two ways:

* **seen**: a process of the launched tree (:class:`tuner.server.teardown.LaunchProcesses`: the
  leader, its descendants, every process carrying the launch's marker) holds the listening
  socket, as ``psutil.net_connections`` (or, where the system's list is not readable, each of our
  processes' own ``Process.net_connections``) shows it;
* **unseen**: a listener whose holder cannot be seen into (a launcher whose server listens
  outside the launched tree, :attr:`tuner.launchers.Launcher.listener_outside`: a container's
  docker-proxy, a Slurm step's task; a socket whose pid the system hides), accepted only when
  the port was free at the launch, the same listening socket stays (its inode in
  ``/proc/net/tcp``, Linux: net/ipv4/tcp_ipv4.c ``get_tcp4_sock``) and it goes at our teardown.

Anything else (a visible process outside the tree, a second listener next to ours) raises
:class:`tuner.errors.ForeignListener`. How the listener was recognised is said once in the server
log (``[nccl-tune] listener on port ...``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tuner.errors import ForeignListener
from tuner.redaction import redact_argv
from tuner.server.ports import port_in_use

__all__ = ["ListenerCheck", "Listening", "describe_pid", "socket_owners"]

#: /proc/net/tcp's state column for LISTEN (include/net/tcp_states.h: TCP_LISTEN = 10).
_TCP_LISTEN = "0A"


@dataclass(frozen=True)
class Listening:
    """One listening TCP socket on the port as psutil shows it: ``pid`` (None when the system
    hides its holder) and the local address ``ip``."""

    pid: int | None
    ip: str


def listening(port: int) -> list[Listening] | None:
    """The listening TCP sockets (IPv4 and IPv6) on ``port``; None when the system's list cannot
    be read (psutil.AccessDenied: macOS without root)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, PermissionError):
        return None
    return [Listening(c.pid, c.laddr.ip) for c in conns
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN]


def socket_owners(port: int, proc_net: Path = Path("/proc/net")) -> dict[int, int] | None:
    """``{inode: uid}`` of the sockets listening on ``port``, from ``tcp`` and ``tcp6`` under
    ``proc_net`` (columns: sl, local_address ``HEXIP:HEXPORT``, rem_address, st, queues, tr,
    retrnsmt, uid, timeout, inode; net/ipv4/tcp_ipv4.c ``get_tcp4_sock``); None where those
    files do not exist (not Linux). They show the holder's uid even when its pid is hidden."""
    found: dict[int, int] = {}
    read_any = False
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != _TCP_LISTEN:
                continue
            try:
                if int(cols[1].rpartition(":")[2], 16) == port:
                    found[int(cols[9])] = int(cols[7])
            except ValueError:
                continue
    return found if read_any else None


def describe_pid(pid: int) -> str:
    """``pid 4242 (python3: python3 -m http.server 8000)``: the pid, name and command line
    (160 characters at most, secrets as ``***``) as far as psutil can read them."""
    try:
        p = psutil.Process(pid)
        return f"pid {pid} ({p.name()}: {' '.join(redact_argv(p.cmdline()))[:160]})"
    except psutil.Error:
        return f"pid {pid}"


class ListenerCheck:
    """The ownership of ``host:port`` over one launch; ``outside``: the launcher's words for a
    listener held outside the launched tree (:attr:`tuner.launchers.Launcher.listener_outside`;
    None: a visible holder outside the tree is a stranger).

    Call :meth:`before_launch` just before the spawn, :meth:`check` at each point where answers
    are about to count, :meth:`after_teardown` once the launch is torn down. ``proc_net``: where
    ``tcp``/``tcp6`` are read (tests point it elsewhere)."""

    def __init__(self, host: str, port: int, outside: str | None = None, proc_net: Path = Path("/proc/net")) -> None:
        self.host, self.port = host, port
        self.outside = outside
        self.proc_net = proc_net
        self.busy_at_launch = False
        self.unseen: frozenset[int] | None = None  # the inodes of the unseen listener accepted
        self.said = ""

    def before_launch(self) -> None:
        """Note whether something already answers on the port (then no unseen listener can be ours)."""
        self.busy_at_launch = port_in_use(self.host, self.port)

    def check(self, tree: Iterable[psutil.Process], launched: int | None, when: str) -> str | None:
        """Judge the listener now; ``tree``: the launch's live processes, ``launched``: its pid
        (named in errors), ``when``: which check this is ("at readiness", ...).

        Returns the sentence saying how the listener was recognised when it differs from the last
        one returned (for the server log), else None; ``""`` when nothing listens yet. Raises
        :class:`tuner.errors.ForeignListener` for a listener that is not ours."""
        procs = list(tree)
        pids = {p.pid for p in procs}
        socks = listening(self.port)
        if socks is None:  # the system's list is unreadable: look at our own processes' sockets
            mine = [p.pid for p in procs if _listens(p, self.port)]
            if mine:
                return self._say(f"listener on port {self.port}: {describe_pid(mine[0])} of the launched tree "
                                 "holds it (seen in its own sockets)")
            socks = []
        ours = [s for s in socks if s.pid in pids]
        others = [s for s in socks if s.pid not in pids]
        visible = [s for s in others if s.pid is not None]
        if ours and not others:
            return self._say(f"listener on port {self.port}: {describe_pid(ours[0].pid or 0)} of the launched "
                             "tree holds it")
        if ours:  # a second listener beside ours (SO_REUSEPORT): the kernel would share the requests
            raise ForeignListener(self.port, self._who(others), launched, f"{when}, beside our own listener")
        if visible and not self.outside:
            raise ForeignListener(self.port, self._who(visible), launched, when)
        if not others and not port_in_use(self.host, self.port):
            return ""  # nothing listens yet
        return self._unseen(others, launched, when)

    def _unseen(self, others: list[Listening], launched: int | None, when: str) -> str | None:
        """A listener we cannot see into: accepted while it is the one that appeared after our launch."""
        if self.busy_at_launch:
            raise ForeignListener(self.port, self._who(others), launched, f"{when}; it answered before our launch")
        owners = socket_owners(self.port, self.proc_net)
        inodes = frozenset(owners) if owners is not None else frozenset()
        if self.unseen is None:
            self.unseen = inodes
        elif inodes != self.unseen:
            raise ForeignListener(self.port, self._who(others), launched,
                                  f"{when}; the listening socket changed since it was accepted")
        what = self.outside or "a listener whose holder the system hides"
        holder = self._who(others) if others else "no visible socket (an iptables forward?)"
        return self._say(f"listener on port {self.port}: {what} ({holder}), appeared after our launch; "
                         "accepted while it stays the same socket, and it must go at our teardown")

    def after_teardown(self, port_free: bool, launched: int | None) -> None:
        """Raise :class:`tuner.errors.ForeignListener` when an unseen listener accepted during
        the launch is still there after our teardown (it was not ours); ``port_free``: the
        teardown found the port free (:class:`tuner.server.teardown.TeardownReport`)."""
        if self.unseen is None:
            return
        owners = socket_owners(self.port, self.proc_net)
        stayed = bool(self.unseen & set(owners)) if owners is not None and self.unseen else not port_free
        if stayed:
            socks = listening(self.port) or []
            raise ForeignListener(self.port, self._who(socks), launched,
                                  "after teardown: the listener accepted as ours outlived our server")

    def _say(self, sentence: str) -> str | None:
        if sentence == self.said:
            return None
        self.said = sentence
        return sentence

    def _who(self, socks: list[Listening]) -> str:
        visible = [s.pid for s in socks if s.pid is not None]
        if visible:
            return ", ".join(describe_pid(pid) for pid in dict.fromkeys(visible))
        owners = socket_owners(self.port, self.proc_net) or {}
        uids = sorted(set(owners.values()))
        if uids:
            return "a socket of uid " + ", ".join(map(str, uids)) + " (its process is hidden from this user)"
        return "an unknown process"


def _listens(p: psutil.Process, port: int) -> bool:
    try:
        return any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                   for c in p.net_connections(kind="tcp"))
    except psutil.Error:
        return False
