"""The rendezvous of a simulated server that spans nodes, over real TCP sockets.

vLLM's multi-node mode (``vllm serve ... --nnodes N --node-rank R --master-addr A --master-port P``,
``--headless`` on R > 0; vllm/config/parallel.py ``ParallelConfig``: master_addr 127.0.0.1,
master_port 29501, for the mp executor) starts one process tree per node; the head (node rank 0)
serves HTTP. Here the head listens on ``A:P`` before anything else; every other node connects
(retrying while the head is not up yet), sends one JSON line ``{"node_rank": R, "host": H}`` and
waits; once all N - 1 have joined, the head answers each with ``{"comm_id": C, "hosts": {...}}``
(one NCCL communicator id for every rank's lines) and only then plays NCCL's init, loads and binds
its HTTP port, so ``/health`` answers only after every node joined. The connections stay open:
a node whose peer's end closes (the head for a node, any node for the head) has lost it, and its
server exits with a fatal line (server.py). A launcher never relies on that: it kills every node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import socket
import threading
import time

__all__ = ["DEFAULT_MASTER_PORT", "Head", "Member", "NodeSpec", "rendezvous_timeout_s"]

DEFAULT_MASTER_PORT = 29501  # vllm/config/parallel.py ParallelConfig.master_port
RETRY_S = 0.1  # a node's next try to reach a head that is not listening yet
DEFAULT_RENDEZVOUS_TIMEOUT_S = 600.0  # chosen: torch's default process-group timeout (10 min)


def rendezvous_timeout_s() -> float:
    """Seconds a node waits for the head, and the head for every node (``SIM_RENDEZVOUS_TIMEOUT_S``,
    else 600)."""
    try:
        return float(os.environ.get("SIM_RENDEZVOUS_TIMEOUT_S") or DEFAULT_RENDEZVOUS_TIMEOUT_S)
    except ValueError:
        return DEFAULT_RENDEZVOUS_TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """This process's place in a server across ``nnodes`` nodes; ``headless``: no HTTP."""

    nnodes: int
    node_rank: int
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_MASTER_PORT
    headless: bool = False

    @property
    def where(self) -> str:
        """``addr:port`` of the head's rendezvous."""
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"{host}:{self.master_port}"


def _send(conn: socket.socket, payload: dict) -> None:
    conn.sendall(json.dumps(payload).encode() + b"\n")


def _read_line(conn: socket.socket, deadline: float, stop: threading.Event) -> dict | None:
    """One JSON line from ``conn``; None on EOF, a bad line, ``stop`` or the deadline."""
    data = b""
    while b"\n" not in data:
        if stop.is_set() or time.monotonic() > deadline:
            return None
        conn.settimeout(0.2)
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    conn.settimeout(None)
    try:
        value = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Watched:
    """Connections watched for their peer's end: ``lost`` is the first peer's node rank."""

    def __init__(self) -> None:
        self.lost: int | None = None
        self.closing = False
        self.conns: dict[int, socket.socket] = {}

    def watch(self, on_lost) -> None:
        """One thread per connection: EOF or an error while not closing sets ``lost`` and
        calls ``on_lost(node_rank)``."""
        for rank, conn in self.conns.items():
            threading.Thread(target=self._wait_end, args=(rank, conn, on_lost), daemon=True,
                             name=f"sim-node-{rank}").start()

    def _wait_end(self, rank: int, conn: socket.socket, on_lost) -> None:
        conn.settimeout(None)
        while True:
            try:
                if conn.recv(4096):
                    continue
            except OSError:
                pass
            break
        if not self.closing and self.lost is None:
            self.lost = rank
            on_lost(rank)

    def close(self) -> None:
        """Close every connection (the peers see their end); no loss is reported after this."""
        self.closing = True
        for conn in self.conns.values():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()


class Head(_Watched):
    """Node rank 0: listens, gathers every node, hands out the communicator id."""

    def __init__(self, spec: NodeSpec):
        super().__init__()
        self.spec = spec
        self.listener: socket.socket | None = None
        self.hosts: dict[int, str] = {}

    def listen(self) -> OSError | None:
        """Bind ``master_addr:master_port``; the error when it cannot."""
        family = socket.AF_INET6 if ":" in self.spec.master_addr else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.spec.master_addr, self.spec.master_port))
            sock.listen(max(8, self.spec.nnodes))
        except OSError as exc:
            sock.close()
            return exc
        self.listener = sock
        return None

    def gather(self, host: str, stop: threading.Event, timeout_s: float) -> int | None:
        """Wait until every other node joined; answer them; the communicator id, or None on
        ``stop`` or the timeout. Each connection says who it is on a thread of its own, so a
        stranger that connects and says nothing (a port probe) holds nobody up."""
        assert self.listener is not None
        self.hosts = {0: host}
        deadline = time.monotonic() + timeout_s
        lock = threading.Lock()
        self.listener.settimeout(0.2)

        def hello(conn: socket.socket) -> None:
            said = _read_line(conn, deadline, stop)
            rank = said.get("node_rank") if said else None
            with lock:
                if said and isinstance(rank, int) and 0 < rank < self.spec.nnodes and rank not in self.conns:
                    self.conns[rank] = conn
                    self.hosts[rank] = str(said.get("host") or f"node{rank}")
                    return
            conn.close()  # not one of ours, or a rank that already joined

        while True:
            with lock:
                if len(self.conns) >= self.spec.nnodes - 1:
                    break
            if stop.is_set() or time.monotonic() > deadline:
                return None
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=hello, args=(conn,), daemon=True, name="sim-node-hello").start()
        comm_id = random.getrandbits(44) << 4
        hosts = {str(k): v for k, v in sorted(self.hosts.items())}
        for conn in self.conns.values():
            with contextlib.suppress(OSError):  # a node gone already: its watcher reports it
                _send(conn, {"comm_id": comm_id, "hosts": hosts})
        return comm_id

    def close(self) -> None:
        super().close()
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()


class Member(_Watched):
    """Node rank R > 0: joins the head."""

    def __init__(self, spec: NodeSpec):
        super().__init__()
        self.spec = spec

    def join(self, host: str, stop: threading.Event, timeout_s: float) -> dict | None:
        """Connect (retrying until the head listens), say who we are, wait for the head's answer
        (every node joined); None on ``stop``, the timeout or a head that went away."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn = socket.create_connection((self.spec.master_addr, self.spec.master_port), timeout=1.0)
            except OSError:
                stop.wait(RETRY_S)
                continue
            try:
                _send(conn, {"node_rank": self.spec.node_rank, "host": host})
            except OSError:
                conn.close()
                continue
            answer = _read_line(conn, deadline, stop)
            if answer is None:
                conn.close()
                return None
            self.conns[0] = conn
            return answer
        return None
