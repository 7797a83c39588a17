"""Checks before the first launch: what can be found wrong in seconds is not found after a
45-minute ``ready_timeout_s``.

Each check returns a :class:`Check` (what it looked at, and a sentence when it refuses);
:func:`checks` gathers them all so one run reports every one, and the sweep and ``--dry-run``
both read that list (:func:`problems` is its refusals). Refused: a command that passes another
port than ``server.port``, a local model path that does not exist, GPUs named in
``CUDA_VISIBLE_DEVICES`` that NVML does not see, a ``NCCL_TOPO_FILE``/``NCCL_GRAPH_FILE`` in
``server.env`` that NCCL could not read, a results folder that cannot be created or written,
too little free disk for the logs, a command that fixes a variable itself (``env NAME=VALUE``,
``docker run -e NAME=VALUE`` or ``--env-file``, ``srun --export=...,NAME=VALUE``:
:meth:`tuner.launchers.Launcher.env_fixes`) that the space varies or that hides NCCL's INFO
lines from the proof (:func:`command_env_checks`). Refused later, after a dead runner's server was torn down:
a port that already answers (:func:`port_held`). Only warned (:func:`warnings`): a command with
neither ``{port}`` nor the port number (the server may default to it; the launcher stops at
once when its log shows it listening elsewhere).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import InputError, LauncherRefused
from tuner.inputs import PROGRAM_ACCEPTED, ExperimentConfig, ServerConfig, program_problem
from tuner.launchers import launcher_of
from tuner.nccl import FILE_VARS, read_xml_file
from tuner.redaction import REDACTED, is_secret, redact_argv
from tuner.server import gpu
from tuner.server.logpump import file_bound
from tuner.server.ports import port_holder, port_in_use

__all__ = [
    "RESULTS_ACCEPTED",
    "Check",
    "check",
    "checks",
    "command_env_checks",
    "disk_problem",
    "launcher_check",
    "model_path_check",
    "nccl_file_check",
    "port_check",
    "port_held",
    "port_warning",
    "problems",
    "program_checks",
    "results_check",
    "warnings",
]

#: Flags whose value is a model path for vLLM (``vllm serve MODEL``, ``--model``) and SGLang
#: (``--model-path``); vLLM: vllm/entrypoints/cli/serve.py, SGLang: sglang/srt/server_args.py.
MODEL_FLAGS = ("--model", "--model-path", "--tokenizer")
#: Free disk wanted for a night of logs: a few trial logs, each at most its bound
#: (:func:`tuner.server.logpump.file_bound`: the cap in bytes, long lines and all).
LOG_FILES_PER_NIGHT = 4
#: The "file" an error about a flag names (the CLI's own words for it).
COMMAND_LINE = "(command line)"
#: What ``--results`` accepts (the sweep's words when creating it fails too).
RESULTS_ACCEPTED = "a folder nccl-tune can create and write"


@dataclass(frozen=True)
class Check:
    """One check before the first launch, as the sweep and ``--dry-run`` read it.

    ``what``: what it looked at, in words (``the model path /models/m: it exists``); ``file``,
    ``key``, ``value``, ``accepted``: the :class:`tuner.errors.InputError` it makes (``file``
    None: the experiment file); ``problem``: why the sweep refuses to start (None: it passed or
    could not run); ``unchecked``: why it could not run here (None: it ran); ``on_host``: its
    answer belongs to the machine (the model's files, its GPUs, its disk, its port), not to the
    files, so ``--dry-run`` on another machine reports it without refusing."""

    what: str
    key: str
    value: object = None
    accepted: str = ""
    problem: str | None = None
    unchecked: str | None = None
    on_host: bool = True
    file: str | None = None
    refused: type[InputError] = InputError

    def error(self, config_file: str) -> InputError:
        """The refusal as an input error (``refused``) naming the file (``config_file`` unless ``file``)."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return self.refused(self.file or config_file, self.key, value, self.accepted, self.problem or "")


def port_check(server: ServerConfig) -> Check:
    """Whether the server would listen on ``server.port``, by its argv: ``{port}``, or a
    ``--port``/``-p`` value equal to it (another value is refused)."""
    def made(what: str, problem: str | None = None) -> Check:
        return Check(f"server.command's port: {what}", "server.command", redact_argv(server.command),
                     "a command that listens on server.port", problem, on_host=False)

    launcher = launcher_of(server.argv())
    published = launcher.host_ports()
    if published is not None:  # a container's -p HOST:CTR: the host side is the port
        if str(server.port) in published:
            return made(f"publishes host port {server.port}, server.port")
        return made(f"publishes {', '.join(published) or 'no host port'}",
                    f"server.command publishes {'host port ' + ', '.join(p or '(random)' for p in published) if published else 'no port'}"
                    f", but server.port is {server.port}: nccl-tune would wait for a server it cannot reach; write "
                    "\"-p\", \"{port}:<the server's port in the container>\" (or --network host)")
    if any("{port}" in a for a in server.command):
        return made(f"{{port}} is filled with server.port {server.port}")
    argv = launcher.server_argv()
    for i, arg in enumerate(argv):
        if arg in ("--port", "-p") and i + 1 < len(argv):
            if argv[i + 1] != str(server.port):
                return made(f"{arg} {argv[i + 1]}",
                            f"server.command passes {arg} {argv[i + 1]}, but server.port is {server.port}: "
                            "nccl-tune would wait for a server that listens elsewhere; write \"{port}\" in the "
                            "command")
            return made(f"{arg} {argv[i + 1]}, server.port")
        if arg.startswith("--port="):
            if arg.split("=", 1)[1] != str(server.port):
                return made(arg, f"server.command passes {arg}, but server.port is {server.port}; "
                                 "write \"--port={port}\"")
            return made(f"{arg}, server.port")
    return made("none passed (see the warning)")


def port_warning(server: ServerConfig) -> str | None:
    """A command with neither ``{port}`` nor the port number: it may listen on its default (the
    server kind's, :meth:`tuner.servers.ServerKind.port`, when it names one)."""
    if any("{port}" in a for a in server.command) or str(server.port) in " ".join(server.argv()):
        return None
    if server.nodes.spans and server.nodes.launch == "lws":
        return None  # the command is kubectl: port-forward takes server.port, the template its container port
    kind = server.server_kind()
    default = kind.port(launcher_of(server.argv()).server_argv())
    if default is not None and default != server.port:
        return (f"server.command passes no port, and {kind.title} listens on {default} by default, not on "
                f"server.port {server.port}: write \"--port\", \"{{port}}\" in the command")
    return (f"server.command has neither \"{{port}}\" nor the port {server.port}: unless the server listens "
            "there by default, write \"--port\", \"{port}\" in the command")


def port_held(server: ServerConfig) -> str | None:
    """Why the first launch cannot have ``server.host:server.port``: something already answers
    there (named by :func:`tuner.server.ports.port_holder`: pid, name, command line); None when
    nothing does. The sweep raises it as MachineNotClean (exit 3) after its recovery. A
    ``server.host`` this machine cannot resolve is the file's: InputError (exit 2)."""
    host, port = server.host, server.port
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:  # a name this machine cannot resolve: the file's, not the machine's
        nodes = server.nodes
        head = (" (in srun mode it defaults to the first of server.nodes.hosts, the head: set server.host to the "
                "address the head answers on from this machine)") if nodes is not None and nodes.count > 1 else ""
        raise InputError("the experiment file", "server.host", host,
                         f"a host name or address this machine resolves, where the server (the head) answers{head}",
                         str(getattr(exc, "strerror", None) or exc)) from None
    if not port_in_use(host, port):
        return None
    return (f"port {port} on {host} already answers, held by {port_holder(port)}; "
            "stop that server or choose another server.port before sweeping")


def program_checks(cfg: ExperimentConfig) -> list[Check]:
    """Whether each program nccl-tune starts (``server.command[0]``, ``screen.command[0]``, srun
    for ``server.nodes.launch = "srun"``) is
    an executable file or on PATH (:func:`tuner.inputs.config.program_problem`, what loading the
    experiment file refuses unless ``check_program=False``)."""
    commands = [("server.command", cfg.server.command)] + ([("screen.command", cfg.screen.command)]
                                                          if cfg.screen is not None else [])
    if cfg.server.nodes.spans and cfg.server.nodes.launch == "srun":  # the step nccl-tune starts itself
        commands.append(("server.nodes.launch", ("srun",)))
    out = []
    for key, command in commands:
        program = command[0]
        why = program_problem(program)
        shown = Path(program).name if os.sep in program else program
        out.append(Check(f"{key}'s program {shown}: " + ("found" if why is None else why), f"{key}[0]", program,
                         PROGRAM_ACCEPTED, why))
    return out


def _model_paths(argv: list[str]) -> list[str]:
    """The model arguments of the server's command ``argv`` given as local paths (``/``, ``./``, ``../``)."""
    candidates = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in MODEL_FLAGS]
    if len(argv) > 2 and argv[1] == "serve":  # vllm serve MODEL
        candidates.append(argv[2])
    return [path for path in candidates if re.match(r"^(/|\./|\.\./)", path)]


def model_path_check(server: ServerConfig) -> Check:
    """Whether every model given as a local path exists (a hub model id is not looked up). The
    path is the server's: its launcher says where it is on this host (a container's through its
    -v mount; a Slurm step's on its node: :meth:`tuner.launchers.Launcher.host_path`), and one
    not known to be here is not checked."""
    launcher = launcher_of(server.argv())
    paths = _model_paths(launcher.server_argv())
    accepted = "an existing local model path, or a hub model id"
    if not paths:
        return Check("the model: no local path in server.command (a hub id is the server's to fetch)",
                     "server.command", redact_argv(server.command), accepted)
    hosts = [launcher.host_path(p) for p in paths]
    notes = [note for _host, note in hosts if note]
    if notes:
        return Check(f"the model path{'s' if len(paths) > 1 else ''} {', '.join(paths)}", "server.command",
                     redact_argv(server.command), accepted, unchecked="; ".join(notes), on_host=True)
    missing = next((p for p, (host, _) in zip(paths, hosts, strict=True) if host and not Path(host).exists()), None)
    if missing is not None:
        return Check(f"the model path {missing}: it does not exist here", "server.command", redact_argv(server.command), accepted,
                     f"the model path {missing} in server.command does not exist")
    return Check(f"the model path{'s' if len(paths) > 1 else ''} {', '.join(paths)}: found", "server.command",
                 redact_argv(server.command), accepted)


def launcher_check(server: ServerConfig) -> Check:
    """Whether the command's launcher can pass the set to the server, and how
    (:meth:`tuner.launchers.Launcher.plan`, :meth:`tuner.launchers.Launcher.refusal`): refused
    with :class:`tuner.errors.LauncherRefused` where it cannot (``docker run -d``, ``docker
    compose``, ``env -i``)."""
    launcher = launcher_of(server.argv())
    said = launcher.plan(sorted(server.env)) or "server.command runs the server as a plain process"
    refusal = launcher.refusal()
    if refusal is None and server.nodes.spans and launcher.name != "a plain process":
        # each node is started here (local) or by one srun step (srun): a launcher inside would nest
        refusal = (f"server.nodes spans {server.nodes.count} nodes and server.command starts {launcher.name}: "
                   "with [server.nodes] nccl-tune starts each node's command itself (launch = local: a process "
                   "group per node here; launch = srun: one srun --multi-prog step), so server.command is the "
                   "server's own command; remove the launcher from it")
    return Check(said, "server.command", redact_argv(server.command), "a command whose launcher passes the set to the server",
                 refusal, on_host=False, refused=LauncherRefused)


#: The subsystems whose INFO lines the proof reads: ``NAME set by environment to VALUE`` is an
#: ENV line, the communicator's lines INIT ones (NCCL src/debug.cc, ncclDebugInit; src/misc/param.cc).
_PROOF_SUBSYS = ("INIT", "ENV")
#: The logging variables nccl-tune sets for the proof (:func:`tuner.sweep.evidence.debug_env`).
_LOGGING_ACCEPTED = ("a command that leaves NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE to nccl-tune "
                     "(NCCL_DEBUG=INFO or TRACE, NCCL_DEBUG_SUBSYS with INIT and ENV, no NCCL_DEBUG_FILE of its own)")


def _hides(name: str, value: str | None, server_env: Mapping[str, str]) -> str | None:
    """Why the command's ``name=value`` (None: unset) keeps NCCL's INFO lines from the proof,
    None when it does not (NCCL src/debug.cc, ncclDebugInit: NCCL_DEBUG read case-insensitively,
    INFO and TRACE print INFO lines; NCCL_DEBUG_SUBSYS a comma list, ``^`` excludes)."""
    if name == "NCCL_DEBUG":
        if value is None:
            return "without NCCL_DEBUG NCCL prints no INFO line"
        return None if value.strip().upper() in ("INFO", "TRACE") else \
            f"NCCL prints INFO lines only at NCCL_DEBUG=INFO or TRACE, not {value}"
    if name == "NCCL_DEBUG_SUBSYS" and value is not None:
        words = {w.strip().upper() for w in value.lstrip("^").split(",")}
        shown = [w for w in _PROOF_SUBSYS if (w in words or "ALL" in words) != value.startswith("^")]
        missing = [w for w in _PROOF_SUBSYS if w not in shown]
        return f"it leaves out the {' and '.join(missing)} lines the proof reads" if missing else None
    if name == "NCCL_DEBUG_FILE" and value is not None and value != server_env.get(name):
        return f"NCCL would write its lines to {value}, not to the file nccl-tune reads"
    return None


def command_env_checks(server: ServerConfig, varied: Collection[str] = (), space: str = "the search space",
                       environ: Mapping[str, str] | None = None) -> list[Check]:
    """Whether the variables the command itself sets for the server
    (:meth:`tuner.launchers.Launcher.env_fixes`: ``env NAME=VALUE``, ``docker run -e NAME=VALUE``
    or ``--env-file``, ``srun --export=...,NAME=VALUE``) leave the set and the proof alone:
    refused when one fixes a variable ``varied`` names (the space's, whose name ``space`` is;
    every trial's value would be overridden, the baseline not untuned), hides NCCL's INFO lines
    (:func:`_hides`) or contradicts ``server.env``. An env file that cannot be read is said as
    not checked (``environ``: srun's environment, default ``os.environ``)."""
    launcher = launcher_of(server.argv(), environ)
    last = {fix.name: fix for fix in launcher.env_fixes()}
    out = []
    for name, fix in sorted(last.items()):
        secret = is_secret(name)  # its value is never shown, nor compared: the study records it as ***
        shown = REDACTED if secret else fix.value
        sets = f"sets {name}={shown}" if fix.value is not None else f"unsets {name}"
        if secret:
            fix = dataclasses.replace(fix, said=" ".join(redact_argv(fix.said.split(" "))))
        if name in varied:
            out.append(Check(f"server.command {sets}", "server.command", fix.said,
                             f"a command that fixes no variable {space} varies (nccl-tune gives the server each "
                             "set's value itself; remove it)",
                             f"the command's own `{fix.said}` {sets}, which {space} varies: the server would get "
                             f"the command's {name} in every trial, so no set's {name} would be applied and the "
                             "baseline would not be untuned", on_host=False, refused=LauncherRefused))
        elif (why := _hides(name, fix.value, server.env)) is not None:
            out.append(Check(f"server.command {sets}", "server.command", fix.said, _LOGGING_ACCEPTED,
                             f"the command's own `{fix.said}` {sets}, which hides NCCL's INFO lines from nccl-tune: "
                             f"{why}, so no set could be proven to have reached NCCL", on_host=False,
                             refused=LauncherRefused))
        elif name in server.env and fix.value != server.env[name] and not secret:
            out.append(Check(f"server.command {sets}", "server.command", fix.said,
                             "a command that leaves server.env's variables as server.env sets them",
                             f"server.env sets {name}, but the command's own `{fix.said}` {sets}: the server "
                             "would run with the command's, not what the study records", on_host=False,
                             refused=LauncherRefused))
    if not out:
        fixed = ", ".join(sorted(last))
        out.append(Check(f"server.command's own variables ({fixed or 'none'}): none that {space} varies, none "
                         "that hides NCCL's INFO lines", "server.command", server.command,
                         "a command that fixes no variable the set varies", on_host=False))
    out += [Check("server.command's env files", "server.command", server.command, "an env file nccl-tune can read",
                  unchecked=why) for why in launcher.env_unread()]
    return out


def gpu_check(server: ServerConfig, environ: dict[str, str] | None = None) -> Check:
    """Whether the GPUs named in CUDA_VISIBLE_DEVICES (server.env, else the runner's) are GPUs
    NVML sees; not checked (``unchecked`` says why) without NVML or with UUID/MIG names."""
    env = {**(environ if environ is not None else os.environ), **server.env}
    visible = env.get("CUDA_VISIBLE_DEVICES")

    def made(what: str, problem: str | None = None, unchecked: str | None = None) -> Check:
        return Check(what, "server.env.CUDA_VISIBLE_DEVICES", server.env.get("CUDA_VISIBLE_DEVICES"),
                     "GPU indices this host has", problem, unchecked)

    if visible is None:
        return made("the GPUs: no CUDA_VISIBLE_DEVICES, the server gets every GPU")
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(v.isdigit() for v in wanted):
        return made(f"CUDA_VISIBLE_DEVICES={visible}", unchecked="UUID and MIG names are not checked")
    count = gpu.count()
    if count is None:
        return made(f"CUDA_VISIBLE_DEVICES={visible}", unchecked="NVML does not answer here (no NVIDIA driver)")
    missing = [v for v in wanted if int(v) >= count]
    if missing:
        return made(f"CUDA_VISIBLE_DEVICES={visible}: {count} GPU(s) here",
                    f"CUDA_VISIBLE_DEVICES names GPU {', '.join(missing)}, but this host has {count} GPU(s)")
    return made(f"CUDA_VISIBLE_DEVICES={visible}: GPUs this host has ({count})")


def nccl_file_check(server: ServerConfig) -> list[Check]:
    """Whether each NCCL_TOPO_FILE/NCCL_GRAPH_FILE that ``server.env`` fixes is a file NCCL can
    read (:func:`tuner.nccl.read_xml_file`; a relative path from the runner's folder, where the
    server starts). NCCL only warns about a file it cannot open and goes on without it
    ("Could not open XML topology file", src/graph/xml.cc, ncclTopoGetXmlFromFile), so every
    trial, the baseline included, would run without it."""
    out = []
    for name in FILE_VARS:
        value = server.env.get(name)
        if value is None:
            continue
        _file, why = read_xml_file(name, os.path.abspath(os.path.expanduser(value)))
        out.append(Check(f"server.env {name}={value}: " + ("read as NCCL reads it" if why is None else "unreadable"),
                         f"server.env.{name}", value, f"a {FILE_VARS[name][0]} XML file NCCL can read",
                         None if why is None else f"{why}; NCCL would go on without it"))
    return out


def _nearest_existing(path: Path) -> Path:
    where = path.absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    return where


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it (as a user would write it)."""
    try:
        return str(path.relative_to(Path.cwd())) if path != Path.cwd() else "the working folder"
    except ValueError:
        return str(path)


def results_check(results: Path) -> Check:
    """Whether the results folder exists as a writable folder, or can be created (its nearest
    existing parent is a writable folder); nothing is created here."""
    where = _nearest_existing(results)
    shown = "writable" if where == results.absolute() else f"can be created in {_shown(where)}"
    if not where.is_dir():
        why: str | None = f"{where} is a file, not a folder"
    elif not os.access(where, os.W_OK | os.X_OK):
        why = f"{where} is not writable by this user"
    else:
        why = None
    return Check(f"--results {results}: " + (shown if why is None else why), "--results", str(results),
                 RESULTS_ACCEPTED, why, file=COMMAND_LINE)


def disk_check(server: ServerConfig, results: Path) -> Check:
    """Whether the free disk under ``results`` (or its nearest existing parent) holds a few
    capped server logs (:data:`LOG_FILES_PER_NIGHT`)."""
    need = LOG_FILES_PER_NIGHT * file_bound(server.log_max_bytes)
    free = shutil.disk_usage(_nearest_existing(results)).free
    why = (f"only {free / 2**20:.0f} MiB free under {results}; the server logs may need "
           f"{need / 2**20:.0f} MiB (lower server.log_max_bytes or free space)") if free < need else None
    return Check(f"free disk under {results}: {free / 2**30:.1f} GiB, the server logs may need {need / 2**20:.0f} MiB",
                 "server.log_max_bytes", server.log_max_bytes, "a cap the free disk can hold", why)


def disk_problem(server: ServerConfig, results: Path) -> str | None:
    """Less free disk under ``results`` (or its nearest existing parent: nothing is created
    here) than a few capped server logs need."""
    return disk_check(server, results).problem


def checks(cfg: ExperimentConfig, results: Path, environ: dict[str, str] | None = None,
           varied: Collection[str] = (), space: str = "the search space") -> list[Check]:
    """Every check above, in the order they are reported (``environ``: the runner's, default
    ``os.environ``; ``varied``: the names the space ``space`` varies); writes nothing."""
    server = cfg.server
    return [launcher_check(server), *command_env_checks(server, varied, space, environ), port_check(server),
            model_path_check(server), gpu_check(server, environ), *nccl_file_check(server),
            results_check(results), disk_check(server, results)]


def problems(cfg: ExperimentConfig, results: Path, varied: Collection[str] = (),
             space: str = "the search space") -> list[InputError]:
    """Every problem the checks above find, as input errors naming the file and key (empty: go
    ahead)."""
    return [c.error(str(cfg.path)) for c in checks(cfg, results, varied=varied, space=space) if c.problem]


def check(cfg: ExperimentConfig, results: Path, varied: Collection[str] = (),
          space: str = "the search space") -> None:
    """Raise InputError (exit 2) with every problem :func:`problems` finds; writes nothing, so
    the CLI runs it before a storage or results folder exists."""
    found = problems(cfg, results, varied, space)
    if found:
        raise InputError.combine(found)


def warnings(server: ServerConfig) -> list[str]:
    """Things worth saying before the wait that do not stop the sweep."""
    return [w for w in (port_warning(server),) if w]
