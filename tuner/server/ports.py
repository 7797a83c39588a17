"""The server's TCP port: who listens on it, whether a new server could bind it, waiting until it can.

A closed connection keeps its port in TIME_WAIT for a while after the server is gone; a server
that does not set ``SO_REUSEADDR`` cannot bind it until then, which a connect test cannot see
(:func:`port_bindable`).
"""

from __future__ import annotations

import socket
import time

import psutil

from tuner.errors import PortBusy
from tuner.redaction import redact_argv

__all__ = ["PORT_WAIT_S", "port_bindable", "port_holder", "port_in_use", "port_users", "wait_port_bindable"]

#: Linux keeps a closed TCP connection in TIME_WAIT for TCP_TIMEWAIT_LEN = 60 s
#: (include/net/tcp.h); the default wait for a bindable port covers it with a margin.
PORT_WAIT_S = 90.0


def port_in_use(host: str, port: int) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def port_bindable(port: int, *, reuse_address: bool = False) -> bool:
    """True when a new server could bind TCP ``port`` on every IPv4 address right now.

    The test binds ``0.0.0.0:port`` as a server would. WITHOUT ``SO_REUSEADDR`` (the default)
    it fails (EADDRINUSE) while anything listens on the port on any address, and also while
    closed connections of the port wait in TIME_WAIT (about 60 s on Linux), which a plain
    connect test cannot see; ``reuse_address=True`` tests as a server that sets the option
    (uvicorn, Python's http.server do), which only a listener blocks.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse_address:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def port_users(port: int) -> str:
    """Who holds TCP ``port``: the listener (pid, name, command line) and how many connections
    of the port wait in TIME_WAIT, as far as psutil can see; ``"nothing visible"`` otherwise."""
    parts: list[str] = []
    try:
        conns = [c for c in psutil.net_connections(kind="tcp") if c.laddr and c.laddr.port == port]
    except (psutil.AccessDenied, PermissionError):
        conns = []
    if any(c.status == psutil.CONN_LISTEN for c in conns):
        parts.append(f"listened on by {port_holder(port)}")
    waiting = sum(1 for c in conns if c.status == psutil.CONN_TIME_WAIT)
    if waiting:
        parts.append(f"{waiting} closed connection(s) in TIME_WAIT (the kernel keeps them about 60 s; "
                     "a server that does not set SO_REUSEADDR cannot bind until they expire)")
    return "; ".join(parts) or "nothing visible holds it (another network namespace or an IPv6 socket?)"


def wait_port_bindable(host: str, port: int, timeout_s: float = PORT_WAIT_S, poll_s: float = 0.5, *,
                       reuse_address: bool = False) -> float:
    """Wait until :func:`port_bindable` (``port``, any address, ``reuse_address`` as there) is
    true; return the seconds waited (0.0 when it was bindable at once). A sweep waits with
    ``reuse_address=True`` (only a listener blocks most servers) until a server of the study fails
    with "address in use", then without it (TIME_WAIT too) for the rest of the sweep.

    Raises :class:`tuner.errors.PortBusy` (a :class:`tuner.errors.MachineNotClean`, exit 3)
    naming the holder (:func:`port_users`) when still busy after ``timeout_s`` seconds. ``host``
    is only named in the message. Call it before every launch.
    """
    t0 = time.monotonic()
    while not port_bindable(port, reuse_address=reuse_address):
        waited = time.monotonic() - t0
        if waited >= timeout_s:
            raise PortBusy(host, port, waited, port_users(port))
        time.sleep(poll_s)
    return time.monotonic() - t0


def port_holder(port: int) -> str:
    """Describe who listens on ``port`` (pid, name, command line with secrets as ``***``), as
    far as psutil can see."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    p = psutil.Process(conn.pid)
                    return f"pid {p.pid} ({p.name()}: {' '.join(redact_argv(p.cmdline()))[:160]})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.AccessDenied, PermissionError):
        pass
    return "an unknown process"
