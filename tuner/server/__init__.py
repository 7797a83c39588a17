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
:mod:`~tuner.server.readiness` (when it serves), :mod:`~tuner.server.failure` (why it failed),
:mod:`~tuner.server.teardown` (ending it), :mod:`~tuner.server.identity` (finding it again),
:mod:`~tuner.server.ownership` (whether the listener on its port is the launched server),
:mod:`~tuner.server.logpump` (its output to a capped file), :mod:`~tuner.server.backend` (which
code carries its decode allreduce), :mod:`~tuner.server.logtail` (what the
log says), :mod:`~tuner.server.gpu` (NVML), :mod:`~tuner.server.signals` (SIGHUP/SIGINT/SIGTERM),
:mod:`~tuner.server.preflight` (checks before the wait; its functions are called through the
module, ``preflight.problems(...)``, as are :mod:`~tuner.server.gpu`'s).

The leaves import each other by leaf path, never through this face.
"""

from tuner.server import gpu, preflight
from tuner.server.backend import SERVER_OVERRIDES, Backend, BackendName, BackendProof, allreduce_backend, prove
from tuner.server.env import build_env, split_inherited
from tuner.server.failure import (
    DEATH_GRACE_S,
    ELSEWHERE_GRACE_S,
    Launch,
    LaunchWatch,
    crash_cause,
    crash_failure,
    daemon_cause,
    log_cause,
    request_failure,
)
from tuner.server.identity import MARKER, ServerIdentity
from tuner.server.logpump import LINE_CAP_BYTES, LogPump, file_bound, line_cap
from tuner.server.logtail import (
    CAUSE_MAX_CHARS,
    Cause,
    CauseKind,
    announced_port,
    extract_cause,
    find_cause,
    level_and_body,
    line_kind,
)
from tuner.server.ownership import (
    CONTAINER_LAUNCHERS,
    ListenerCheck,
    Listening,
    describe_pid,
    listening,
    socket_owners,
)
from tuner.server.ports import (
    PORT_WAIT_S,
    port_bindable,
    port_holder,
    port_in_use,
    port_users,
    wait_port_bindable,
)
from tuner.server.process import ServerProcess
from tuner.server.readiness import WARMUP_SILENCE_S, Starting, says_loading, wait_ready
from tuner.server.signals import HANDLED, SignalGuard, TeardownWindow
from tuner.server.teardown import LaunchProcesses, TeardownReport, kill_leftover, marked_processes, tear_down

__all__ = [
    "CAUSE_MAX_CHARS",
    "CONTAINER_LAUNCHERS",
    "DEATH_GRACE_S",
    "ELSEWHERE_GRACE_S",
    "HANDLED",
    "LINE_CAP_BYTES",
    "MARKER",
    "PORT_WAIT_S",
    "SERVER_OVERRIDES",
    "WARMUP_SILENCE_S",
    "Backend",
    "BackendName",
    "BackendProof",
    "Cause",
    "CauseKind",
    "Launch",
    "LaunchProcesses",
    "LaunchWatch",
    "ListenerCheck",
    "Listening",
    "LogPump",
    "ServerIdentity",
    "ServerProcess",
    "SignalGuard",
    "Starting",
    "TeardownReport",
    "TeardownWindow",
    "allreduce_backend",
    "announced_port",
    "build_env",
    "crash_cause",
    "crash_failure",
    "daemon_cause",
    "describe_pid",
    "extract_cause",
    "file_bound",
    "find_cause",
    "gpu",
    "kill_leftover",
    "level_and_body",
    "line_cap",
    "line_kind",
    "listening",
    "log_cause",
    "marked_processes",
    "port_bindable",
    "port_holder",
    "port_in_use",
    "port_users",
    "preflight",
    "prove",
    "request_failure",
    "says_loading",
    "socket_owners",
    "split_inherited",
    "tear_down",
    "wait_port_bindable",
    "wait_ready",
]
