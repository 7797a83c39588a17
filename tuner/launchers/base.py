"""What every launcher is: how a set reaches the server, how the launch ends, what it can leave
behind and which paths and ports are the host's. The plain process is this base class as it is;
a container and a Slurm step override what differs (:mod:`tuner.launchers.container`,
:mod:`tuner.launchers.slurm`).

Wrappers in front of the launcher program (``env``, ``sudo``, ``nice``, ``taskset`` ...) are
skipped by :func:`skip_wrappers`; ``sudo`` without ``-E`` resets the environment (sudoers
``env_reset``, on by default: sudo's sudoers(5) manual), so the names are added with
``--preserve-env=NAME,...`` (sudo 1.8.21 and later, sudo(8) manual); ``env -i`` empties it,
and is refused. ``env NAME=VALUE``, ``sudo NAME=VALUE`` (sudo(8): "Environment variables to be
set for the command may also be passed on the command line") and ``env -u NAME`` are the
command's own fixes (:meth:`Launcher.env_fixes`): they win over what nccl-tune gives the wrapper.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EnvFix", "Launcher", "Stopped", "Wrappers", "fixed_of", "run_quiet", "skip_wrappers"]

#: Wrapper programs and their options that take a value in the next argument (coreutils
#: env(1), nice(1), stdbuf(1), timeout(1), nohup(1); util-linux taskset(1), ionice(1),
#: chrt(1); numactl(8); sudo(8)).
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host",
                       "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U",
                       "--other-user"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}),
    "taskset": frozenset(),
    "numactl": frozenset({"-C", "-N", "-m", "-p", "-i", "-l"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "nohup": frozenset(),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "chrt": frozenset(),
}
#: Wrappers whose first operand is theirs, not the command (a mask, a duration, a priority).
_OPERAND = frozenset({"taskset", "timeout", "chrt"})


@dataclass(frozen=True)
class EnvFix:
    """One variable the command itself sets for the server: ``name``, ``value`` (None: it
    unsets it, ``env -u NAME``) and ``said``, the words of the command that do it
    (``-e NCCL_PROTO=Simple``, ``--env-file vars.env: NCCL_PROTO=Simple``)."""

    name: str
    value: str | None
    said: str


def fixed_of(fixes: Sequence[EnvFix]) -> dict[str, str]:
    """``{name: value}`` the fixes leave, in order (a later one wins; an unset removes)."""
    out: dict[str, str] = {}
    for fix in fixes:
        if fix.value is None:
            out.pop(fix.name, None)
        else:
            out[fix.name] = fix.value
    return out


def _assignment(word: str) -> tuple[str, str] | None:
    """``(NAME, VALUE)`` for a ``NAME=VALUE`` word (a shell name before the ``=``), else None."""
    name, eq, value = word.partition("=")
    if eq and name and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name):
        return name, value
    return None


def _unset(argv: Sequence[str], i: int) -> str | None:
    """The name ``env``'s option at ``argv[i]`` unsets (``-u NAME``, ``-uNAME``, ``--unset=NAME``)."""
    arg = argv[i]
    if arg in ("-u", "--unset"):
        return argv[i + 1] if i + 1 < len(argv) else None
    if arg.startswith("--unset="):
        return arg.partition("=")[2]
    return arg[2:] if arg.startswith("-u") and len(arg) > 2 else None


@dataclass
class Wrappers:
    """The wrappers in front of the launcher program: ``start`` (the program's index in the
    argv), ``sudo`` (the index of a ``sudo`` that resets the environment, None when there is none
    or it keeps it), ``cleared`` (an ``env -i`` or ``env --ignore-environment`` empties it),
    ``fixes`` (``env NAME=VALUE``, ``sudo NAME=VALUE``, ``env -u NAME``: what they set or unset)."""

    start: int = 0
    sudo: int | None = None
    sudo_keeps: bool = True
    cleared: str = ""
    names: list[str] = field(default_factory=list)
    fixes: list[EnvFix] = field(default_factory=list)


def skip_wrappers(argv: Sequence[str]) -> Wrappers:
    """Where the launcher program starts in ``argv`` after any wrappers, and what they do to the
    environment."""
    found = Wrappers()
    i = 0
    while i < len(argv) and Path(argv[i]).name in _WRAPPERS:
        prog = Path(argv[i]).name
        found.names.append(prog)
        takes = _WRAPPERS[prog]
        if prog == "sudo":
            found.sudo, found.sudo_keeps = i, False
        i += 1
        operand = prog in _OPERAND
        while i < len(argv):
            arg = argv[i]
            if arg == "--":
                i += 1
                break
            assigned = _assignment(arg) if prog in ("env", "sudo") else None
            if assigned is not None:
                found.fixes.append(EnvFix(*assigned, f"{prog} {arg}"))
                i += 1
                continue
            if not arg.startswith("-") or arg == "-":
                if prog == "env" and arg == "-":
                    found.cleared = "env -"
                    i += 1
                    continue
                if operand:
                    operand, i = False, i + 1
                    continue
                break
            if prog == "env" and arg in ("-i", "--ignore-environment"):
                found.cleared = f"env {arg}"
            unset = _unset(argv, i) if prog == "env" else None
            if unset:
                found.fixes.append(EnvFix(unset, None, f"env -u {unset}"))
            if prog == "sudo" and (arg in ("-E", "--preserve-env") or (len(arg) > 1 and arg[1] != "-" and "E" in arg)):
                found.sudo_keeps = True
            i += 2 if arg in takes else 1
    found.start = i
    return found


@dataclass(frozen=True)
class Stopped:
    """What the launcher's own teardown did: ``said`` in words for the teardown line (empty:
    nothing to say) and ``left`` what it could not end (empty: nothing stays)."""

    said: str = ""
    left: tuple[str, ...] = ()


class Launcher:
    """A plain process: the command is the server, a child of nccl-tune in its own session; the
    set reaches it through the environment nccl-tune gives it, its teardown is the process
    group's (:mod:`tuner.server.teardown`), its paths and ports are the host's.

    ``argv``: the command as launched (placeholders filled). A launcher is made per launch
    (:func:`tuner.launchers.launcher_of`): :meth:`prepare` remembers what it added."""

    #: The launcher's name in messages.
    name = "a plain process"
    #: ``(regex, what)``: lines of the launcher's own that say the machine, not the set, failed the
    #: launch (:func:`tuner.server.machine.machine_line`).
    machine_lines: tuple[tuple[str, str], ...] = ()
    #: Words for a listener held by a process outside the launched tree, when this launcher's
    #: server listens from one (None: the launched tree holds it).
    listener_outside: str | None = None

    def __init__(self, argv: Sequence[str], wrappers: Wrappers | None = None) -> None:
        self.argv = list(argv)
        self.wrappers = wrappers or skip_wrappers(argv)
        self.start = self.wrappers.start

    # -- how the set reaches the server ---------------------------------------------------------
    def refusal(self) -> str | None:
        """Why the set cannot reach the server through this command (one paragraph naming what
        to change), None when it can."""
        if self.wrappers.cleared:
            return (f"server.command starts with `{self.wrappers.cleared}`, which empties the environment: no "
                    "variable of the set would reach the server; remove -i (nccl-tune gives the server its "
                    "environment itself)")
        return None

    def prepare(self, forward: Collection[str], mounts: Collection[str] = (), token: str = "") -> list[str]:
        """The argv to launch so that the variables named in ``forward`` (the launch's NCCL and
        server variables) and the folders in ``mounts`` (NCCL_DEBUG_FILE's) reach the server;
        ``token``: a short unique id of the launch (for names)."""
        return self._sudo(list(self.argv), forward)

    def _sudo(self, argv: list[str], forward: Collection[str]) -> list[str]:
        """``--preserve-env=NAME,...`` after a ``sudo`` that would reset the environment."""
        at = self.wrappers.sudo
        if at is None or self.wrappers.sudo_keeps or not forward:
            return argv
        return [*argv[:at + 1], "--preserve-env=" + ",".join(sorted(forward)), *argv[at + 1:]]

    def plan(self, fixed: Collection[str], varied: Collection[str] = ()) -> str | None:
        """What the launcher adds so that ``fixed`` (every launch's variables) and ``varied``
        (the set's) reach the server, in one sentence for the plan; None: nothing to say."""
        if self.wrappers.sudo is not None and not self.wrappers.sudo_keeps:
            return ("server.command runs through sudo, which resets the environment: nccl-tune adds "
                    "--preserve-env=NAME,... for each variable of the launch")
        return None

    def env_fixes(self) -> list[EnvFix]:
        """The variables the command itself sets (or unsets) for the server, in the order they
        apply: they win over the set nccl-tune gives the command. Here the wrappers' (``env
        NAME=VALUE``, ``sudo NAME=VALUE``, ``env -u NAME``); a launcher adds its own."""
        return list(self.wrappers.fixes)

    def fixed_env(self) -> dict[str, str]:
        """The assignments the command itself makes: ``{name: value}`` (:meth:`env_fixes`)."""
        return fixed_of(self.env_fixes())

    def env_unread(self) -> list[str]:
        """Where the command reads variables nccl-tune could not read (an ``--env-file`` that
        does not open), in words; empty when every one was read."""
        return []

    # -- the host's paths and ports ---------------------------------------------------------------
    def server_argv(self) -> list[str]:
        """The server's own command, the launcher's and wrappers' words left out."""
        return self.argv[self.start:]

    def host_path(self, path: str) -> tuple[str | None, str]:
        """``(host path, note)``: where ``path`` (as the server sees it) is on this host, None
        when it is not known to be here; ``note`` says why it is not checked (empty: checked)."""
        return path, ""

    def host_ports(self) -> list[str] | None:
        """The host ports the launcher publishes for the server, None when the server's own
        listening port is the host's."""
        return None

    # -- what the server sees besides the launch's environment ----------------------------------
    def image_env(self) -> tuple[dict[str, str] | None, str]:
        """``(env, what)``: the environment the launcher's image gives the server before any
        variable of the launch (a container image's ``ENV``), named ``what``; ``(None, "")`` when
        the launcher has no image, ``(None, why)`` when it could not be read."""
        return None, ""

    def root_pids(self) -> list[int]:
        """After :meth:`prepare`, while the server runs: the pids of the server's processes that
        are not in the launched command's tree (a container's main process, on this host's
        pid namespace); empty when the launched tree is the server."""
        return []

    # -- teardown -------------------------------------------------------------------------------
    def handle(self) -> list[str]:
        """After :meth:`prepare`: a short argv from which :func:`tuner.launchers.launcher_of`
        makes a launcher that can :meth:`stop` what this one started (a container's client and
        name, a step's name), no secret in it; empty when there is nothing outside the process
        tree to stop. A later runner stops a dead runner's server with it."""
        return []

    def stop(self, grace_s: float) -> Stopped:
        """After the launched command was signalled and is gone: end what the launcher started
        outside it (within about ``grace_s`` s plus a bounded wait), and say what stays."""
        return Stopped()


def run_quiet(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
    """Run a launcher's helper command (``docker stop``, ``scancel``): ``(exit status, its
    output)``; 127 with the reason when it cannot start, 124 when it outlives ``timeout_s`` s."""
    try:
        done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except OSError as exc:
        return 127, str(exc.strerror or exc)
    except subprocess.TimeoutExpired:
        return 124, f"no answer in {timeout_s:.0f} s"
    return done.returncode, (done.stdout + done.stderr).strip()
