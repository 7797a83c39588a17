#!/usr/bin/env python3
"""An independent stand-in for one node of a server that spans nodes (stdlib, imports nothing
from ``tuner``), taking vLLM's multi-node flags (vllm/engine/arg_utils.py: ``--nnodes``,
``--node-rank``, ``--master-addr``, ``--master-port``; ``--headless`` on every node but the head).

    python tests/servers/node_server.py --port P --nnodes N --node-rank R --master-addr A
        --master-port M [--headless] [--rate TOK_S]

The head (rank 0) listens on A:M (a real TCP socket) and waits for the N-1 other nodes to
connect; only then does it serve HTTP on P (tests/refserver.py: /health 200, streamed
completions at ``--rate``). Every node prints, when NCCL_DEBUG is INFO, NCCL 2.21.5's lines with
its host (``NCCL_TUNE_NODE``, else the machine's name) in the ``host:pid:tid`` prefix: the
version, ``NAME set by environment to VALUE`` for each NCCL_* variable, and ``comm 0x.. rank R
nRanks N nNodes N`` (src/init.cc); to NCCL_DEBUG_FILE (``%h`` the host, ``%p`` the pid) when given.
A headless node exits 1 with ``RuntimeError: ... head node ... closed`` when the head goes away;
the head exits 1 when a node's connection drops. Faults by environment: NODE_FAIL_RANK=R makes
node R print ``RuntimeError: node_fail: injected`` and exit 1 at start; NODE_SERVER_PIDFILE
appends ``host pid`` of every node (a test checks nothing of any node is left); NODE_SERVER_LOAD_S
(s) is each node's "model load" before the rendezvous, printed as ``loading``.
"""

import argparse
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import refserver


def nccl_lines(host: str, rank: int, nranks: int) -> list[str]:
    pid = os.getpid()
    pre = f"{host}:{pid}:{pid} [{rank}] NCCL INFO "
    lines = [f"{pre}NCCL version 2.21.5+cuda12.4"]
    # NCCL_TUNE_NODE is nccl-tune's, never read by NCCL; NCCL_HOSTID is echoed (src/misc/utils.cc, getHostHash)
    for name in sorted(k for k in os.environ if k.startswith("NCCL_") and k not in ("NCCL_DEBUG_FILE",)):
        if name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_TUNE_NODE"):
            continue
        lines.append(f"{pre}{name} set by environment to {os.environ[name]}")
    lines.append(f"{pre}comm 0x{0x5550 + rank:x} rank {rank} nRanks {nranks} nNodes {nranks} localRanks 1 "
                 f"localRank 0 MNNVL 0")
    lines.append(f"{pre}Init COMPLETE")
    return lines


def log_nccl(host: str, rank: int, nranks: int) -> None:
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return
    text = "\n".join(nccl_lines(host, rank, nranks)) + "\n"
    target = os.environ.get("NCCL_DEBUG_FILE")
    if target:
        path = target.replace("%h", host).replace("%p", str(os.getpid()))
        with open(path, "a") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def die(msg: str) -> None:
    print(msg, flush=True)
    os._exit(1)


def watch(conn: socket.socket, what: str) -> None:
    """Exit 1 once the peer's connection drops."""
    while True:
        try:
            data = conn.recv(1)
        except OSError:
            data = b""
        if not data:
            die(what)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=29555)
    ap.add_argument("--headless", action="store_true")
    ap.add_argument("--rate", type=float, default=500.0)
    args = ap.parse_args()
    host = os.environ.get("NCCL_TUNE_NODE") or socket.gethostname()
    if os.environ.get("NODE_SERVER_PIDFILE"):
        with open(os.environ["NODE_SERVER_PIDFILE"], "a") as f:
            f.write(f"{host} {os.getpid()}\n")
    print(f"node {args.node_rank}/{args.nnodes} on {host} starting", flush=True)
    if os.environ.get("NODE_FAIL_RANK") == str(args.node_rank):
        die("RuntimeError: node_fail: injected")
    if float(os.environ.get("NODE_SERVER_LOAD_S", "0")) > 0:
        print(f"node {args.node_rank} loading", flush=True)
        time.sleep(float(os.environ["NODE_SERVER_LOAD_S"]))
    if args.node_rank > 0:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = socket.create_connection((args.master_addr, args.master_port), timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    die(f"RuntimeError: could not reach the head node at {args.master_addr}:{args.master_port}")
                time.sleep(0.1)
        conn.settimeout(None)
        conn.sendall(f"{args.node_rank}\n".encode())
        log_nccl(host, args.node_rank, args.nnodes)
        print(f"node {args.node_rank} joined {args.master_addr}:{args.master_port} (headless)", flush=True)
        watch(conn, "RuntimeError: the connection to the head node was closed")
        return
    listener = socket.create_server((args.master_addr, args.master_port), reuse_port=False)
    peers = []
    while len(peers) < args.nnodes - 1:
        conn, _ = listener.accept()
        conn.recv(16)
        peers.append(conn)
    log_nccl(host, 0, args.nnodes)
    for conn in peers:
        threading.Thread(target=watch, args=(conn, "RuntimeError: a node's connection dropped"), daemon=True).start()
    server = refserver.make_server("127.0.0.1", args.port, rate=args.rate)
    print(f"all {args.nnodes} nodes joined; serving on http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
