"""The nodes of a server that spans nodes (``[server.nodes]``), beyond what the head's launch is.

The head (node rank 0) is the launch :class:`tuner.server.process.ServerProcess` starts, serves
and probes. The others:

* local mode: each node R > 0 is its own process in its own session, started here with the
  launch's environment (its :data:`tuner.server.identity.MARKER` included, so the teardown and
  the leftover reaper find every node's processes), plus ``NCCL_TUNE_NODE=<name>`` (nccl-tune's
  own prefix: the simulator's host name) and ``NCCL_HOSTID=<name>`` (NCCL's
  src/misc/utils.cc, ``getHostHash``: NCCL then treats each played node as another host and
  joins them with its NET transport);
* srun mode: one Slurm step runs every node's command (:mod:`tuner.launchers.multiprog`); its
  ``--label``-ed output is split here by task into each node's log.

Node R's output goes to ``<head log stem>.node<R>.log`` beside the head's, whose first line is
``# node R: <name>``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tuner.inputs import ServerConfig
from tuner.launchers import split_label
from tuner.redaction import redact_argv, scrub
from tuner.server.logpump import LogPump

__all__ = ["HOSTID_VAR", "NODE_IDENTITY", "NODE_VAR", "Node", "NodeSet", "node_env", "node_log", "nodes_plan"]

#: The played node's name (nccl-tune's own variable, never NCCL's).
NODE_VAR = "NCCL_TUNE_NODE"
#: NCCL's host identity override (src/misc/utils.cc, getHostHash, NCCL 2.12 and later).
HOSTID_VAR = "NCCL_HOSTID"
#: What nccl-tune sets on each node of a server spanning nodes: its own, never a set's nor the machine's.
NODE_IDENTITY = frozenset({NODE_VAR, HOSTID_VAR})
#: srun's line for a task that ended (src/srun/.../launch.c, ``_task_finish``): "srun: error:
#: HOST: task R: Exited with exit code N".
_TASK_EXIT = re.compile(r"\btask (\d+): (Exited with exit code \d+|Killed|Terminated|Segmentation fault.*)")


def nodes_plan(server: ServerConfig) -> list[str]:
    """The dry run's words for ``[server.nodes]`` (empty on one host): the nodes, how they are
    launched, and the last node's command."""
    nodes = server.nodes
    if not nodes.spans:
        return []
    if nodes.launch == "lws":
        return [f"Nodes: the server spans {nodes.count} nodes as a Kubernetes LeaderWorkerSet per trial "
                f"(launch = lws): {nodes.manifest} with metadata.name nccl-tune-<id>, size {nodes.count}, the set "
                "and NCCL's logging variables in every container's env (logged to the pods' stdout), applied with "
                f"{shlex.join(server.command)} apply -f <trial>.lws.yaml; readiness and the probe through kubectl "
                f"port-forward pod/nccl-tune-<id>-0 {server.port}:{nodes.container_port or server.port}; each "
                "pod's log followed (kubectl logs -f) into the trial's node logs; teardown: kubectl delete lws."]
    names = nodes.names()
    if nodes.launch == "srun" and nodes.hosts is None:
        shown = "the allocation's first nodes (scontrol show hostnames $SLURM_JOB_NODELIST), the first the head"
    else:
        shown = f"{names[0]} (the head: HTTP, readiness and the probe), {', '.join(names[1:])}"
    how = ("played on this machine, each its own process group with NCCL_TUNE_NODE and NCCL_HOSTID its name "
           "(launch = local)" if nodes.launch == "local" else
           "one Slurm step: srun --nodes=N --ntasks-per-node=1 --label --multi-prog <trial>.multiprog.conf "
           "(launch = srun), its labelled output split into each node's log")
    last = server.node_argv(nodes.count - 1, nodes.head(names))
    return [f"Nodes: the server spans {nodes.count} nodes: {shown}; {how}; rendezvous on port {nodes.dist_port}.",
            f"  node {nodes.count - 1}'s command: {shlex.join(redact_argv(last))}"]


def node_log(head_log: Path, rank: int) -> Path:
    """Node ``rank``'s log beside the head's: ``logs/trial-0003.log`` -> ``logs/trial-0003.node1.log``."""
    return head_log.with_name(f"{head_log.stem}.node{rank}{head_log.suffix}")


def node_env(env: dict[str, str], name: str) -> dict[str, str]:
    """``env`` with node ``name``'s identity (:data:`NODE_VAR`, :data:`HOSTID_VAR`)."""
    return {**env, NODE_VAR: name, HOSTID_VAR: name}


@dataclass
class Node:
    """One node R > 0: its ``rank``, ``name``, command ``argv``, ``log``; its process and pump
    once started (local mode), ``ended`` what srun said of its task (srun mode)."""

    rank: int
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    pump: LogPump | None = None
    ended: str = ""

    def status(self) -> str | None:
        """How it ended (``exit status 1``, ``killed by signal 9``, srun's words), None while it runs."""
        if self.ended:
            return self.ended
        code = self.proc.poll() if self.proc is not None else None
        if code is None:
            return None
        return f"exit status {code}" if code >= 0 else f"killed by signal {-code}"

    def tail(self, n: int = 60) -> list[str]:
        """Its last ``n`` lines."""
        return self.pump.tail(n) if self.pump is not None else []


class NodeSet:
    """Every node but the head of one launch: ``names`` (rank order, head first), ``commands``
    (each node's argv, head first), the head's log ``head_log``; logs capped at ``max_bytes``
    each, ``secrets`` scrubbed."""

    def __init__(self, names: list[str], commands: list[list[str]], head_log: Path, *, max_bytes: int,
                 secrets: list[str]) -> None:
        self.names = names
        self.nodes = [Node(r, names[r], commands[r], node_log(head_log, r)) for r in range(1, len(names))]
        self._max = max_bytes
        self._secrets = secrets
        self._splitter: threading.Thread | None = None

    def _open_log(self, node: Node, said: str) -> None:
        node.log.parent.mkdir(parents=True, exist_ok=True)
        with open(node.log, "a") as f:
            f.write(f"# node {node.rank}: {node.name}\n[nccl-tune] {said}\n")

    def _pump(self, node: Node, pipe: IO[bytes]) -> None:
        node.pump = LogPump(pipe, node.log, max_bytes=self._max, secrets=self._secrets)

    def start_local(self, env: dict[str, str]) -> None:
        """Start every node as its own session with ``env`` and its identity (:func:`node_env`).
        A node that cannot start is said in its log and found by :meth:`exited`."""
        for node in self.nodes:
            self._open_log(node, f"argv: {scrub(shlex.join(redact_argv(node.argv)), self._secrets)}")
            try:
                node.proc = subprocess.Popen(node.argv, env=node_env(env, node.name), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                node.ended = f"could not start {node.argv[0]}: {exc.strerror or exc}"
                with open(node.log, "a") as f:
                    f.write(f"[nccl-tune] {node.ended}\n")
                continue
            assert node.proc.stdout is not None
            self._pump(node, node.proc.stdout)

    def split(self, stdout: IO[bytes]) -> IO[bytes]:
        """srun mode: read the step's ``--label``-ed ``stdout`` on a thread, each node's lines
        into its log; returns the pipe of the head's lines (task 0's and srun's own)."""
        pipes: dict[int, int] = {}
        head_r, head_w = os.pipe()
        for node in self.nodes:
            self._open_log(node, "task of the Slurm step (srun --multi-prog)")
            r, w = os.pipe()
            pipes[node.rank] = w
            self._pump(node, os.fdopen(r, "rb"))
        by_rank = {n.rank: n for n in self.nodes}

        def run() -> None:
            try:
                for raw in iter(stdout.readline, b""):
                    task, text = split_label(raw.decode("utf-8", "replace"))
                    m = _TASK_EXIT.search(text) if task is None else None
                    if m and int(m.group(1)) in by_rank:
                        by_rank[int(m.group(1))].ended = f"srun: {m.group(2)}"
                    with contextlib.suppress(OSError):
                        os.write(pipes.get(task, head_w) if task is not None else head_w, text.encode())
            finally:
                for fd in (head_w, *pipes.values()):
                    with contextlib.suppress(OSError):
                        os.close(fd)

        self._splitter = threading.Thread(target=run, name="srun-label-split", daemon=True)
        self._splitter.start()
        return os.fdopen(head_r, "rb")

    def exited(self) -> Node | None:
        """The first node that ended (its process exited, or srun said its task ended), or None."""
        return next((n for n in self.nodes if n.status() is not None), None)

    def close(self, said: str) -> None:
        """After the teardown: reap the node processes, note ``said`` in each log and close it."""
        if self._splitter is not None:
            self._splitter.join(5)  # the step's output read to its end: each node's pipe closed
        for node in self.nodes:
            if node.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(timeout=5)
            if node.pump is not None:
                node.pump.close()
                with open(node.log, "a") as f:
                    f.write(f"[nccl-tune] {said}\n")
