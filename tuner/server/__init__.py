"""One inference-server launch: start it under one environment, wait until it serves, judge a
failure, tear it down completely; its log, its port, its GPUs, the signals that stop it and the
checks before a night. One relaunch::

    wait_port_bindable(cfg.host, cfg.port)            # TIME_WAIT included; PortBusy if held
    with ServerProcess(cfg, env, log_path, flags=flags) as server:
        load_s = server.wait_ready(cfg.ready_timeout_s, ready_check=one_token_request)
        try:
            ...                                      # smoke check, warmup, recorded runs
        except ProbeError as exc:
            raise server.request_failure(exc, "during warmup") from None
    server.teardown_report                           # always set, whatever happened inside

The leaves, one job each: :mod:`~tuner.server.process` (the launch and its lifetime),
:mod:`~tuner.server.env` (its environment), :mod:`~tuner.server.ports` (its port),
:mod:`~tuner.server.readiness` (when it serves), :mod:`~tuner.server.failure` (why it failed), :mod:`~tuner.server.machine` (whether
that may be the machine's, not the set's),
:mod:`~tuner.server.teardown` (ending it), :mod:`~tuner.server.identity` (finding it again),
:mod:`~tuner.server.ownership` (whether the listener on its port is the launched server),
:mod:`~tuner.server.logpump` (its output to a capped file), :mod:`~tuner.server.logtail` (what the
log says), :mod:`~tuner.server.gpu` (NVML), :mod:`~tuner.server.signals` (SIGHUP/SIGINT/SIGTERM),
:mod:`~tuner.server.behind` (NCCL settings the server sees that nccl-tune did not set),
:mod:`~tuner.server.library` (the NCCL library the server mapped),
:mod:`~tuner.server.nodes` (the other nodes of a server that spans nodes: their processes, logs,
the srun step's output split),
:mod:`~tuner.server.preflight` (checks before the wait; its functions are called through the
module, ``preflight.problems(...)``, as are :mod:`~tuner.server.gpu`'s and
:mod:`~tuner.server.p2phost`'s: what the host shows about GPU P2P, ``p2phost.read_host()``).

The leaves import each other by leaf path, never through this face.
"""

from tuner.server import gpu, p2phost, preflight
from tuner.server.behind import behind_lines, settings_behind
from tuner.server.env import build_env, split_inherited
from tuner.server.identity import MARKER, ServerIdentity
from tuner.server.logpump import LINE_CAP_BYTES, LogPump
from tuner.server.nodes import NODE_IDENTITY, node_log, nodes_plan
from tuner.server.ownership import describe_pid
from tuner.server.ports import PORT_WAIT_S, port_holder, port_in_use, wait_port_bindable
from tuner.server.process import ServerProcess
from tuner.server.readiness import WARMUP_SILENCE_S, wait_ready
from tuner.server.signals import HANDLED, SignalGuard
from tuner.server.teardown import TeardownReport, kill_leftover

__all__ = [
    "HANDLED",
    "LINE_CAP_BYTES",
    "MARKER",
    "NODE_IDENTITY",
    "PORT_WAIT_S",
    "WARMUP_SILENCE_S",
    "LogPump",
    "ServerIdentity",
    "ServerProcess",
    "SignalGuard",
    "TeardownReport",
    "behind_lines",
    "build_env",
    "describe_pid",
    "gpu",
    "kill_leftover",
    "node_log",
    "nodes_plan",
    "p2phost",
    "port_holder",
    "port_in_use",
    "preflight",
    "settings_behind",
    "split_inherited",
    "wait_port_bindable",
    "wait_ready",
]
