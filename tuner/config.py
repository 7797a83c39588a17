"""The experiment file (TOML): which server to relaunch, how to probe it, what to sweep.

Validated whole on load, before anything is launched: every problem is an
:class:`~tuner.errors.InputError` naming the file, the key, the value and what is accepted.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner import nccl_env
from tuner.errors import InputError


@dataclass(frozen=True)
class SmokeCheck:
    """A question whose answer must contain ``expect`` before any timing (e.g. Paris)."""

    prompt: str
    expect: str


@dataclass(frozen=True)
class ServerConfig:
    """How to start the server: ``command`` is an argv list with ``{port}`` substituted.

    ``ready_timeout_s`` (s) bounds launch-to-ready; ``env`` is applied to every trial,
    baseline included; ``teardown_grace_s`` (s) is SIGTERM-to-SIGKILL.
    """

    command: tuple[str, ...]
    port: int = 8000
    host: str = "127.0.0.1"
    ready_timeout_s: float = 2700.0
    env: dict[str, str] = field(default_factory=dict)
    health_path: str = "/health"
    model: str | None = None
    teardown_grace_s: float = 30.0
    log_max_bytes: int = 50 * 1024 * 1024

    def argv(self, port: int | None = None) -> list[str]:
        """The command with ``{port}`` replaced, ``{python}`` replaced by this interpreter
        (sys.executable: the simulator runs in nccl-tune's own venv) and a leading ``~`` expanded."""
        p = str(self.port if port is None else port)
        out = []
        for a in self.command:
            a = a.replace("{port}", p).replace("{python}", sys.executable)
            out.append(os.path.expanduser(a) if a.startswith("~") else a)
        return out

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class ProbeConfig:
    """The fixed single-stream probe: ``warmup`` unrecorded runs, then ``repeats`` recorded.

    ``repeats`` may be ``"auto"``: add runs up to ``max_repeats`` until the 95 % CI
    half-width of the median is below ``ci_target`` (fraction, 0.01 = 1 %).
    ``stall_timeout_s`` (s): a stream with no token for that long is ``hung``.
    """

    prompt: str = "Count from 1 to 50."
    max_tokens: int = 512
    warmup: int = 1
    repeats: int | str = 3
    max_repeats: int = 15
    ci_target: float = 0.01
    stall_timeout_s: float = 120.0
    check: SmokeCheck | None = None
    concurrency: tuple[int, ...] = ()
    concurrency_requests: int = 4


@dataclass(frozen=True)
class SweepConfig:
    """What to try: ``space`` file, relaunch budget ``trials`` (baseline included), mode."""

    space: Path
    trials: int = 12
    mode: str = "search"
    seed: int | None = None
    baseline_every: int = 0
    target: float | None = None


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment file: ``server``, ``probe``, ``sweep`` and where it came from."""

    path: Path
    server: ServerConfig
    probe: ProbeConfig
    sweep: SweepConfig


_SERVER_KEYS = {"command", "port", "host", "ready_timeout_s", "env", "health_path", "model",
                "teardown_grace_s", "log_max_bytes"}
_PROBE_KEYS = {"prompt", "max_tokens", "warmup", "repeats", "max_repeats", "ci_target",
               "stall_timeout_s", "check", "concurrency", "concurrency_requests"}
_SWEEP_KEYS = {"space", "trials", "mode", "seed", "baseline_every", "target"}
MODES = ("search", "presets")


class _Reader:
    """Typed access to one TOML table, raising InputError with the file and dotted key."""

    def __init__(self, file: str, table: dict[str, Any], prefix: str, known: set[str]) -> None:
        self.file, self.table, self.prefix = file, table, prefix
        for key in table:
            if key not in known:
                raise InputError(file, f"{prefix}.{key}" if prefix else key, table[key],
                                 f"the keys {', '.join(sorted(known))}", "unknown key")

    def _err(self, key: str, accepted: str, why: str = "") -> InputError:
        return InputError(self.file, f"{self.prefix}.{key}", self.table.get(key), accepted, why)

    def int(self, key: str, default: int | None, low: int, high: int | None = None) -> int | None:
        v = self.table.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
            raise self._err(key, f"an integer in [{low}, {high if high is not None else 'inf'}]")
        return v

    def num(self, key: str, default: float | None, low: float = 0.0) -> float | None:
        v = self.table.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= low:
            raise self._err(key, f"a number above {low}")
        return float(v)

    def text(self, key: str, default: str | None) -> str | None:
        v = self.table.get(key, default)
        if v is not None and (not isinstance(v, str) or not v):
            raise self._err(key, "a non-empty string")
        return v


def env_table(file: str, key: str, table: Any, allow_unsafe: bool) -> dict[str, str]:
    """Validate a ``{NAME = value}`` table of environment variables as NCCL would read it.

    Integers are converted to their decimal string; floats and booleans are refused. Each
    NCCL value is checked by :func:`tuner.nccl_env.check_value`; forcing LL128 (or another
    unsafe setting) is refused unless ``allow_unsafe``. Raises InputError.
    """
    if not isinstance(table, dict):
        raise InputError(file, key, table, "a table such as { NCCL_PROTO = \"LL\" }")
    env: dict[str, str] = {}
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(file, f"{key}.{name}", nccl_env.redact({name: str(value)})[name],
                             "a string or an integer")
        text = str(value)
        shown = nccl_env.redact({name: text})[name]
        problem = nccl_env.check_value(name, text)
        if problem:
            raise InputError(file, f"{key}.{name}", shown, nccl_env.accepted(name), problem)
        unsafe = nccl_env.unsafe_reason(name, text)
        if unsafe and not allow_unsafe:
            raise InputError(file, f"{key}.{name}", text,
                             "a safe-ish value, or pass --allow-unsafe", unsafe)
        env[name] = text
    for name, reason in nccl_env.cross_problems(env):
        raise InputError(file, f"{key}.{name}", env[name], "MIN channels <= MAX channels", reason)
    return env


def _resolve_program(file: str, argv: list[str]) -> None:
    program = os.path.expanduser(argv[0])
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise InputError(file, "server.command[0]", argv[0],
                             "an existing executable file or a program on PATH", "not found or not executable")
    elif shutil.which(program) is None:
        raise InputError(file, "server.command[0]", argv[0],
                         "an existing executable file or a program on PATH", "not on PATH")


def _resolve_space(file: Path, value: str) -> Path:
    candidate = Path(os.path.expanduser(value))
    for path in ([candidate] if candidate.is_absolute() else [candidate, file.parent / candidate]):
        if path.is_file():
            return path
    raise InputError(str(file), "sweep.space", value,
                     "a search-space TOML file, relative to the current directory or to the config file",
                     "file not found")


def read_toml(file: Path, what: str) -> dict[str, Any]:
    """Parse a TOML file; InputError naming the file for a missing, unreadable or invalid one."""
    try:
        return tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise InputError(str(file), "(file)", str(file), f"an existing {what} TOML file", "file not found") from None
    except OSError as exc:
        raise InputError(str(file), "(file)", str(file), f"a readable {what} TOML file", exc.strerror or str(exc)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(file), "(file)", str(file), "valid TOML", str(exc)) from None


def load_config(path: str | os.PathLike[str], *, allow_unsafe: bool = False,
                check_program: bool = True, resolve_space: bool = True) -> ExperimentConfig:
    """Read and validate an experiment file.

    Raises :class:`InputError` for a missing or unparsable file, unknown keys, wrong types,
    a port outside 1-65535, a command whose program does not exist, NCCL values NCCL would
    misread, or unsafe NCCL settings in ``server.env`` without ``allow_unsafe``.
    """
    file = Path(path)
    name = str(file)
    data = read_toml(file, "experiment")
    _Reader(name, data, "", {"server", "probe", "sweep"})  # refuses unknown top-level keys
    for section in ("server", "probe", "sweep"):
        if section in data and not isinstance(data[section], dict):
            raise InputError(name, section, data[section], f"a [{section}] table")
    if "server" not in data:
        raise InputError(name, "server", None, "a [server] table with at least 'command'", "missing")

    s = _Reader(name, data["server"], "server", _SERVER_KEYS)
    command = data["server"].get("command")
    if isinstance(command, str):
        command = shlex.split(command)
    if (not isinstance(command, list) or not command
            or not all(isinstance(a, str) and a for a in command)):
        raise InputError(name, "server.command", data["server"].get("command"),
                         "a non-empty list of strings (argv), or a string split with shlex")
    if check_program:
        _resolve_program(name, [command[0].replace("{python}", sys.executable)])
    health = s.text("health_path", "/health")
    if not health.startswith("/"):
        raise InputError(name, "server.health_path", health, "a path starting with '/', e.g. /health")
    server = ServerConfig(
        command=tuple(command),
        port=s.int("port", 8000, 1, 65535),
        host=s.text("host", "127.0.0.1"),
        ready_timeout_s=s.num("ready_timeout_s", 2700.0),
        env=env_table(name, "server.env", data["server"].get("env", {}), allow_unsafe),
        health_path=health,
        model=s.text("model", None),
        teardown_grace_s=s.num("teardown_grace_s", 30.0),
        log_max_bytes=s.int("log_max_bytes", 50 * 1024 * 1024, 4096),
    )

    probe_table = data.get("probe", {})
    p = _Reader(name, probe_table, "probe", _PROBE_KEYS)
    repeats = probe_table.get("repeats", 3)
    if repeats != "auto":
        repeats = p.int("repeats", 3, 2, 1000)  # one run gives no interval: nothing could be judged
    check = probe_table.get("check")
    if check is not None:
        if (not isinstance(check, dict) or set(check) != {"prompt", "expect"}
                or not all(isinstance(v, str) and v for v in check.values())):
            raise InputError(name, "probe.check", check,
                             '{ prompt = "What is the capital of France?", expect = "Paris" }')
        check = SmokeCheck(check["prompt"], check["expect"])
    conc = probe_table.get("concurrency", [])
    if not isinstance(conc, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 1024 for c in conc):
        raise InputError(name, "probe.concurrency", conc, "a list of integers in [1, 1024], e.g. [1, 2, 4, 8]")
    ci_target = p.num("ci_target", 0.01)
    if ci_target >= 0.5:
        raise InputError(name, "probe.ci_target", ci_target, "a fraction in (0, 0.5), e.g. 0.01 for 1 %")
    probe = ProbeConfig(
        prompt=p.text("prompt", "Count from 1 to 50."),
        max_tokens=p.int("max_tokens", 512, 2, 1_000_000),
        warmup=p.int("warmup", 1, 0, 100),
        repeats=repeats,
        max_repeats=p.int("max_repeats", 15, 2, 1000),
        ci_target=ci_target,
        stall_timeout_s=p.num("stall_timeout_s", 120.0),
        check=check,
        concurrency=tuple(conc),
        concurrency_requests=p.int("concurrency_requests", 4, 1, 10_000),
    )

    sweep_table = data.get("sweep", {})
    w = _Reader(name, sweep_table, "sweep", _SWEEP_KEYS)
    space_value = w.text("space", "search_spaces/default.toml")
    mode = w.text("mode", "search")
    if mode not in MODES:
        raise InputError(name, "sweep.mode", mode, " or ".join(MODES))
    sweep = SweepConfig(
        space=_resolve_space(file, space_value) if resolve_space else Path(space_value),
        trials=w.int("trials", 12, 1, 10_000),
        mode=mode,
        seed=w.int("seed", None, 0),
        baseline_every=w.int("baseline_every", 0, 0, 10_000),
        target=w.num("target", None),
    )
    return ExperimentConfig(path=file, server=server, probe=probe, sweep=sweep)
