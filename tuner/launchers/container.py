"""``docker run`` and ``podman run`` (and nerdctl, the same command line): the server in a
container that the daemon starts, not the client nccl-tune launches.

* The set: a container gets the image's ENV plus ``-e``/``--env-file`` variables only, and
  ``-e NAME`` without a value copies the caller's (docker run reference, "Set environment
  variables (-e, --env, --env-file)"; podman-run(1), ``--env``). So ``-e NAME`` is added right
  after ``run`` for each variable of the launch, and NCCL_DEBUG_FILE's folder is mounted at the
  same path (``-v DIR:DIR``) so NCCL's own log reaches the proof. ``-d`` (the client returns at
  once; also ``-d=true``, ``--detach=1``: pflag's bool spellings) and a subcommand other than
  ``run`` (``compose``, ``start``, ``exec``: a container or a file nccl-tune does not make) are
  refused before the first launch.
* The command's own fixes (:meth:`Container.env_fixes`): ``-e NAME=VALUE``, ``--env=NAME=VALUE``
  and the ``NAME=VALUE`` lines of an ``--env-file`` (read when it opens: ``#`` comments and blank
  lines skipped, the value taken as written; a ``NAME`` line copies the caller's). The client
  reads the files first and the ``-e`` flags over them (docker/cli
  cli/command/container/opts.go, ``ReadKVEnvStrings``; podman-run(1), ``--env-file``).
* Teardown: the client forwards SIGTERM to the container (``--sig-proxy``, default true), but a
  SIGKILLed client, or one run with ``--sig-proxy=false``, leaves it running (moby/moby #3793,
  #35647; docker/cli #5489). So the container is named (``--name``, added when the command has
  none) and, after the client is gone, stopped and removed by name (``stop -t``, ``rm -f``)
  until ``ps -a --filter name=^NAME$`` no longer lists it (bounded).
* The host's paths: a path in the container is the host's only through a bind mount
  (``-v /host:/ctr``, ``--mount type=bind,source=,target=``); the host's ports are the ``-p``
  ones, or the server's own with ``--network host``. The listener on the host port is
  docker-proxy, rootlessport or a container process, never a process of the launched tree.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from tuner.launchers.base import EnvFix, Launcher, Stopped, Wrappers, run_quiet

__all__ = ["GONE_WAIT_S", "PROGRAMS", "Container", "is_container"]

#: The container clients with docker's command line.
PROGRAMS = frozenset({"docker", "podman", "nerdctl"})
#: Global options before the subcommand that take no value (docker(1), podman(1)).
_GLOBAL_FLAGS = frozenset({"-D", "--debug", "--tls", "--tlsverify", "--remote", "-r", "--syslog", "--help"})
#: ``run`` options that take no value (docker run reference; podman-run(1)).
_RUN_FLAGS = frozenset({"--rm", "--detach", "--interactive", "--tty", "--init", "--privileged", "--read-only",
                        "--publish-all", "--sig-proxy", "--no-healthcheck", "--oom-kill-disable", "--quiet",
                        "--disable-content-trust", "--help", "--use-api-socket", "--replace", "--rmi",
                        "--env-host", "--http-proxy", "--no-hosts", "--read-only-tmpfs", "--tls-verify"})
#: ``run``'s one-letter options that take no value (``-d -i -t -P -q``, also clustered: ``-it``).
_SHORT_FLAGS = frozenset("ditPq")
#: What pflag reads as true for a bool flag given a value (Go's strconv.ParseBool).
_TRUE = frozenset({"1", "t", "true"})
#: How long the container may take to be gone after ``stop`` and ``rm -f`` (s).
GONE_WAIT_S = 15.0


class Container(Launcher):
    """``docker run``/``podman run``: see the module docstring. ``program`` is the client's
    name (``docker``, ``podman``)."""

    machine_lines = (
        # docker run exits 125 when "the error is with Docker daemon itself" (docker run reference,
        # Exit status); a name still held by a container a slow --rm has not removed:
        # 'Conflict. The container name "/x" is already in use by container "..."' (docker/moby),
        # 'the container name "x" is already in use by ...' (podman, libpod/runtime_ctr.go)
        (r"container name \S+ is already in use", "a container name still in use"),
        # no daemon: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock"
        (r"Cannot connect to the Docker daemon", "the container engine unreachable"),
    )
    listener_outside = "a container's listener (docker-proxy, rootlessport or a container process)"

    def __init__(self, argv: Sequence[str], wrappers: Wrappers) -> None:
        super().__init__(argv, wrappers)
        self.program = os.path.basename(argv[self.start])
        self.name = f"`{self.program} run`"
        self.sub, self.run_at = self._subcommand()
        self.image_at: int | None = None
        self.detach = ""
        self.given_name: str | None = None
        self.copied: set[str] = set()
        self.fixed: set[str] = set()
        self.flag_fixes: list[EnvFix] = []
        self.env_files: list[str] = []
        self.mounts: list[tuple[str, str]] = []
        self.publish: list[str] = []
        self.host_network = False
        if self.sub == "run":
            self._read_run()
        self.container: str | None = None  # the name the launch used, after prepare

    # -- reading the command --------------------------------------------------------------------
    def _subcommand(self) -> tuple[str, int]:
        """``(subcommand, index of its last word)``: ``run`` for ``docker run`` and ``docker
        container run``, else the word found."""
        i = self.start + 1
        while i < len(self.argv) and self.argv[i].startswith("-"):
            arg = self.argv[i]
            i += 1 if "=" in arg or arg in _GLOBAL_FLAGS else 2
        if i >= len(self.argv):
            return "", i
        if self.argv[i] == "container" and i + 1 < len(self.argv):
            return self.argv[i + 1], i + 1
        return self.argv[i], i

    def _read_run(self) -> None:
        """Read ``run``'s options up to the image."""
        argv, i = self.argv, self.run_at + 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            arg = argv[i]
            if arg.startswith("--"):
                key, eq, value = arg.partition("=")
                if not eq and key not in _RUN_FLAGS:
                    value, i = (argv[i + 1] if i + 1 < len(argv) else ""), i + 1
                self._option(key, value, bool(eq) or key not in _RUN_FLAGS)
            else:
                i = self._short(i)
            i += 1
        if i < len(argv) and argv[i] == "--":
            i += 1
        self.image_at = i if i < len(argv) else None

    def _short(self, i: int) -> int:
        """Read the one-letter options at ``argv[i]`` as pflag does: flags cluster (``-dit``), a
        flag may be given a value (``-d=true``), an option taking a value takes the rest of the
        word (``-eA=B``, ``-e=A=B``) or the next word; returns the index of the last word read."""
        arg = self.argv[i]
        for j in range(1, len(arg)):
            letter, rest = arg[j], arg[j + 1:]
            if letter in _SHORT_FLAGS:
                given = rest[1:] if rest.startswith("=") else None
                if letter == "d" and (given is None or given.lower() in _TRUE):
                    self.detach = arg
                if given is not None:
                    return i
                continue
            if rest:
                self._option(f"-{letter}", rest[1:] if rest.startswith("=") else rest, True)
                return i
            self._option(f"-{letter}", self.argv[i + 1] if i + 1 < len(self.argv) else "", True)
            return i + 1
        return i

    def _option(self, key: str, value: str, has_value: bool) -> None:
        if key == "--detach" and (not has_value or value.lower() in _TRUE):
            self.detach = "--detach"
        elif key in ("--name",):
            self.given_name = value
        elif key in ("-e", "--env"):
            name, eq, fixed = value.partition("=")
            (self.fixed if eq else self.copied).add(name)
            if eq:
                self.flag_fixes.append(EnvFix(name, fixed, f"{key} {value}"))
        elif key == "--env-file":
            self.env_files.append(value)
        elif key in ("-v", "--volume"):
            parts = value.split(":")
            if len(parts) >= 2:
                self.mounts.append((parts[0], parts[1]))
        elif key == "--mount":
            fields = dict(f.partition("=")[::2] for f in value.split(","))
            src = fields.get("source") or fields.get("src")
            dst = fields.get("target") or fields.get("destination") or fields.get("dst")
            if fields.get("type", "volume") == "bind" and src and dst:
                self.mounts.append((src, dst))
        elif key in ("-p", "--publish"):
            self.publish.append(value)
        elif key in ("--network", "--net"):
            self.host_network = value == "host"

    # -- how the set reaches the server ---------------------------------------------------------
    def refusal(self) -> str | None:
        base = super().refusal()
        if base:
            return base
        prog = self.program
        if self.sub != "run":
            return (f"server.command runs `{prog} {self.sub}`: nccl-tune passes the set only into a container it "
                    f"starts itself with `{prog} run` (a container gets only -e/--env-file variables, and "
                    f"`{prog} {self.sub}` runs one nccl-tune does not create); write the command as "
                    f"`{prog} run [OPTIONS] IMAGE [ARGS]` and nccl-tune adds -e NAME for each variable")
        if self.image_at is None:
            return f"server.command runs `{prog} run` without an image; write `{prog} run [OPTIONS] IMAGE [ARGS]`"
        if self.detach:
            return (f"server.command runs `{prog} run {self.detach}`: the client returns at once, so nccl-tune "
                    "could follow neither the server's log nor its end; remove -d (nccl-tune stops and removes "
                    "the container at teardown itself)")
        return None

    def env_fixes(self) -> list[EnvFix]:
        out = super().env_fixes()
        for path in self.env_files:
            lines, _why = _env_file(path)
            for line in lines:
                name, eq, value = line.partition("=")
                if eq:
                    out.append(EnvFix(name, value, f"--env-file {path}: {line}"))
        return out + self.flag_fixes

    def env_unread(self) -> list[str]:
        unread = []
        for path in self.env_files:
            _lines, why = _env_file(path)
            if why:
                as_root = " (the client runs through sudo: root may read it)" if self.wrappers.sudo is not None else ""
                unread.append(f"--env-file {path} cannot be read here ({why}){as_root}: its variables are not "
                              "checked against the set")
        return unread

    def prepare(self, forward: Collection[str], mounts: Collection[str] = (), token: str = "") -> list[str]:
        argv = list(self.argv)
        added: list[str] = []
        for name in sorted(forward):
            if name not in self.copied and name not in self.fixed:
                added += ["-e", name]
        targets = {dst for _src, dst in self.mounts}
        for folder in sorted(set(mounts)):
            if folder not in targets:
                added += ["-v", f"{folder}:{folder}"]
        self.container = self.given_name or f"nccl-tune-{token or os.getpid()}"
        if self.given_name is None:
            added += ["--name", self.container]
        at = self.run_at + 1
        return self._sudo(argv[:at] + added + argv[at:], forward)

    def plan(self, fixed: Collection[str], varied: Collection[str] = ()) -> str | None:
        prog = self.program
        names = " ".join(f"-e {n}" for n in sorted((set(fixed) | set(varied)) - self.fixed - self.copied))
        named = (f"stops and removes the container {self.given_name} by name at teardown" if self.given_name else
                 "names the container nccl-tune-<launch id> (--name) to stop and remove it at teardown")
        overridden = sorted(self.fixed & set(varied))
        listed = ", ".join([w for w in (names, "" if varied else "each variable of the set") if w])
        return (f"server.command runs `{prog} run`, whose container gets only -e/--env-file variables: nccl-tune "
                f"adds -e NAME after `run` for each variable of the launch{f' ({listed})' if listed else ''}, "
                "mounts NCCL_DEBUG_FILE's folder "
                f"at the same path (-v DIR:DIR) so NCCL's own log reaches the proof, and {named}"
                + (f"; the command's own -e {', -e '.join(overridden)} fixes a value the set varies" if overridden
                   else ""))

    # -- the host's paths and ports -------------------------------------------------------------
    def server_argv(self) -> list[str]:
        return self.argv[self.image_at + 1:] if self.image_at is not None else []

    def host_path(self, path: str) -> tuple[str | None, str]:
        best: tuple[str, str] | None = None
        for src, dst in self.mounts:
            dst = dst.rstrip("/") or "/"
            if (path == dst or path.startswith(dst.rstrip("/") + "/")) and (best is None or len(dst) > len(best[1])):
                best = (src, dst)
        if best is None:
            return None, f"{path} is the container's own (no -v mount holds it): not checked here"
        src, dst = best
        if not src.startswith(("/", ".", "~")):
            return None, f"{path} is in the volume {src}: not checked here"
        host = os.path.expanduser(src).rstrip("/") + path[len(dst.rstrip("/")):]
        return host, ""

    def host_ports(self) -> list[str] | None:
        if self.host_network:
            return None
        ports = []
        for value in self.publish:
            parts = value.split("/")[0].split(":")
            ports.append(parts[-2] if len(parts) >= 2 else "")  # IP:HOST:CTR, HOST:CTR; CTR alone: a random one
        return ports

    # -- what the server sees besides the launch's environment ----------------------------------
    def image_env(self) -> tuple[dict[str, str] | None, str]:
        """The image's ``Config.Env`` (``docker image inspect --format '{{json .Config.Env}}'``;
        podman answers the same), a ``NAME=VALUE`` list; the container gets it under ``-e``."""
        if self.image_at is None:
            return None, ""
        image = self.argv[self.image_at]
        what = f"image {image}'s environment (Config.Env)"
        code, out = run_quiet([*self._client(), "image", "inspect", "--format", "{{json .Config.Env}}", image], 30.0)
        if code != 0:
            return None, f"{what} not read: `{self.program} image inspect` failed ({_last(out) or f'exit {code}'})"
        try:
            pairs = json.loads(out.strip().splitlines()[-1]) if out.strip() else []
        except ValueError:
            return None, f"{what} not read: `{self.program} image inspect` printed {_last(out)!r}"
        env = dict(p.split("=", 1) for p in pairs or [] if isinstance(p, str) and "=" in p)
        return env, what

    def root_pids(self) -> list[int]:
        """The container's main process on this host (``inspect --format '{{.State.Pid}}'``)."""
        if self.container is None:
            return []
        code, out = run_quiet([*self._client(), "inspect", "--format", "{{.State.Pid}}", self.container], 15.0)
        word = _last(out)
        return [int(word)] if code == 0 and word.isdigit() and int(word) > 0 else []

    # -- teardown -------------------------------------------------------------------------------
    def _client(self) -> list[str]:
        """The client as the command runs it: a ``sudo`` in front kept, global options kept."""
        sudo = ["sudo", "-n"] if self.wrappers.sudo is not None else []
        sub_at = self.run_at - (1 if self.argv[self.run_at - 1] == "container" else 0)
        return sudo + self.argv[self.start:sub_at]

    def listed(self) -> tuple[bool | None, str]:
        """``(listed, words)``: whether ``ps -a`` still lists the container (None: ps failed)."""
        assert self.container is not None
        code, out = run_quiet([*self._client(), "ps", "-a", "--filter", f"name=^{self.container}$", "--format", "{{.Names}}"], 15.0)
        if code != 0:
            return None, f"`{self.program} ps` failed ({out.splitlines()[-1] if out else f'exit {code}'})"
        # the last word of a line is the name (the names only, or a table whose last column is NAMES)
        return any(line.split()[-1:] == [self.container] for line in out.splitlines()), ""

    def handle(self) -> list[str]:
        if self.container is None:
            return []
        return [*self._client(), "run", "--name", self.container, "nccl-tune-leftover"]

    def stop(self, grace_s: float) -> Stopped:
        if self.container is None:
            return Stopped()
        name, client = self.container, self._client()
        run_quiet([*client, "stop", "-t", str(max(1, round(grace_s))), name], grace_s + 15.0)
        deadline = time.monotonic() + GONE_WAIT_S
        while True:
            listed, why = self.listed()
            if listed is None:
                return Stopped(f"container {name}: not known whether it is gone: {why}",
                               (f"container {name} maybe still running ({why})",))
            if not listed:
                return Stopped(f"container {name} stopped and removed")
            if time.monotonic() >= deadline:
                return Stopped(f"container {name} still running", (f"container {name} still running after "
                                                                  f"`{self.program} stop` and `rm -f`",))
            run_quiet([*client, "rm", "-f", name], 15.0)
            time.sleep(0.2)


def _last(out: str) -> str:
    """The last line of a client's output, stripped."""
    lines = out.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _env_file(path: str) -> tuple[list[str], str]:
    """``(lines, why)``: the variable lines of the env file ``path`` (as the client reads it, from
    the runner's folder: comments and blank lines left out, a name's leading blanks trimmed),
    or why it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return [], str(exc.strerror or exc)
    lines = [line.lstrip() for line in text.splitlines()]
    return [line for line in lines if line.strip() and not line.startswith("#")], ""


def is_container(argv: Sequence[str], start: int) -> bool:
    """True when ``argv[start]`` is a container client (docker, podman, nerdctl)."""
    return start < len(argv) and re.sub(r"\.exe$", "", os.path.basename(argv[start])) in PROGRAMS
