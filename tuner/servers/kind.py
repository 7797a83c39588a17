"""What one server kind is and does: a :class:`ServerKind`, one per module of this room.

Everything nccl-tune knows of one server program lives in its kind's module (``vllm.py``,
``sglang.py``, ``tgi.py``, ``trtllm.py``, ``llamacpp.py``, ``openai.py``): how its command names
the tensor-parallel size, the model and the port; its readiness and model-discovery routes; its
version lines; the log lines that are fatal, harmless, the machine's, or a warm-up; its probe
quirks. No module outside ``tuner/servers/`` names a server kind: it asks the kind
(:func:`kind_of`). Adding a server is one module plus its fixtures, and its entry in
``tuner/servers/kinds.py``'s ``KINDS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tuner.nccl import SilentWhy

__all__ = ["HANG_LINES", "ModelRoute", "ServerKind", "option_value"]

#: Lines that say a collective hung or its communicator died, printed by whatever server runs
#: NCCL, so every kind sees them (a kind adds its own to ``hang_lines``). PyTorch's
#: ProcessGroupNCCL watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, ``watchdogHandler``:
#: "[Rank N] Watchdog caught collective operation timeout: WorkNCCL(...) ran for N milliseconds
#: before timing out."; the heartbeat monitor: "ProcessGroupNCCL's watchdog got stuck for N
#: seconds without making progress" and "Heartbeat monitor timed out!"; a communicator aborted
#: after an async error: "NCCL communicator was aborted"); NCCL's own error strings
#: (src/init.cc, ``ncclGetErrorString``: "unhandled cuda error", "unhandled system error",
#: "internal error - please report this issue", "remote process exited or there was a network
#: error") and its result names (``ncclRemoteError``, ...).
HANG_LINES: tuple[str, ...] = (
    r"Watchdog caught collective operation timeout",
    r"watchdog got stuck for \d+ seconds",
    r"Heartbeat monitor timed out",
    r"NCCL communicator was aborted",
    r"unhandled (?:cuda|system) error",
    r"internal error - please report this issue to the NCCL developers",
    r"remote process exited or there was a network error",
    r"\bnccl(?:Internal|System|UnhandledCuda|Remote)Error\b",
)


@dataclass(frozen=True)
class ModelRoute:
    """A route that names the served model: ``GET path``, the name at ``keys`` of its JSON
    (``("data", 0, "id")`` for OpenAI's ``/v1/models``, ``("model_id",)`` for TGI's ``/info``)."""

    path: str
    keys: tuple[str | int, ...]

    def read(self, body: object) -> str | None:
        """The model name in a decoded JSON ``body``, or None when it holds none."""
        value = body
        for key in self.keys:
            try:
                value = value[key]  # type: ignore[index]
            except (LookupError, TypeError):
                return None
        return value if isinstance(value, str) and value else None


def option_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the first of ``names`` given in ``argv`` (``--tp 2`` or ``--tp=2``), the last
    occurrence winning as argparse and clap do; None when absent."""
    found: str | None = None
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            found = argv[i + 1]
        else:
            key, sep, val = a.partition("=")
            if sep and key in names:
                found = val
    return found


def _compiled(kind: object, name: str) -> re.Pattern[str] | None:
    """The regex ``ServerKind.__post_init__`` compiled from the field ``name``."""
    pattern: re.Pattern[str] | None = getattr(kind, f"_{name}")
    return pattern


def _compile(patterns: Sequence[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


@dataclass(frozen=True)
class ServerKind:
    """One server program, as its released source at the versions its module cites behaves.

    Identity: ``name`` (the ``server.kind`` value: ``vllm``, ``sglang``, ``tgi``, ``trtllm``,
    ``llamacpp``, ``openai``), ``title`` (as people write it), ``command`` (regexes, one of which
    finds it in the server command joined with spaces), ``log_marks`` (regexes of lines only it
    prints). Its command: ``tp_options`` (tensor-parallel size), ``model_options`` and
    ``model_after`` (the subcommand whose next word is the model, ``serve``), ``port_options``,
    ``default_port``. Its routes: ``health_path``, ``model_routes`` (tried in order, each a
    :class:`ModelRoute`), ``any_model_name`` (True: it serves whatever ``model`` a request names).
    Its log: ``version_lines`` (a group ``v``), ``nccl_version_lines`` (the NCCL it loaded, a group
    ``v``), ``fatal_lines`` (the engine died), ``benign_lines`` (never a cause), ``machine_lines``
    (a start-up failure that is the machine's: a memory guard measured before NCCL loads),
    ``warmup_lines`` (a kernel compile or CUDA-graph capture: a late first token is waited for),
    ``log_prefixes`` (regexes of its per-process tags, stripped before a line is read),
    ``hang_lines`` (a collective hung or its communicator died while it served: the soak fails on
    one; :data:`HANG_LINES`, which every kind sees, then its own).
    Its probe quirks: ``honours_ignore_eos`` (False: an answer may end before ``max_tokens``);
    several tokens per stream chunk are read from the stream itself, whatever the kind;
    ``takes_seed`` and ``takes_logprobs`` (False: the correctness gate's answers are asked without
    ``seed`` / ``logprobs``; a server that refuses one with a 400 is asked again without it
    anyway); ``reference_flags``: the server flags of the correctness gate's reference
    configuration (its own allreduce path off, so NCCL carries every allreduce: vLLM's and
    SGLang's ``--disable-custom-all-reduce``; empty: the kind has none). Its environment:
    ``env_prefixes`` (its own variables), ``api_key_env`` (the variable it reads its API key
    from), ``nccl_overrides`` (NCCL variables it overwrites itself, with why). ``launch_line``
    (a snippet with ``{tp}``, ``{env}`` and ``{flags}``) is what the report tells a user to paste.
    ``sources``: the files and versions read. ``ray_silent_why``: why its Ray workers did not get a
    variable, by its version (:data:`tuner.nccl.SilentWhy`), None for Ray's generic reason.
    ``wrapper_lines``: its errors that point elsewhere
    ("see root cause above"): a cause only when no root error is in the log. ``port_lines``: lines
    announcing the HTTP port it listens on (a group ``port``).
    ``model_list_note``: why its model list may be
    missing (said when ``GET /v1/models`` answers 404); ``any_model_example``: a name it accepts
    whatever it serves (with ``any_model_name``; said in the message that names ``server.model``).
    ``node_flags``: ``(nnodes, node_rank, head, dist_port) -> argv items`` that make one node of
    a server spanning nodes (:meth:`node_args`); None: the kind has no multi-node mode.
    """

    name: str
    title: str
    command: tuple[str, ...]
    log_marks: tuple[str, ...] = ()
    tp_options: tuple[str, ...] = ()
    model_options: tuple[str, ...] = ()
    model_after: str | None = None
    port_options: tuple[str, ...] = ("--port",)
    default_port: int | None = None
    health_path: str = "/health"
    model_routes: tuple[ModelRoute, ...] = (ModelRoute("/v1/models", ("data", 0, "id")),)
    any_model_name: bool = False
    version_lines: tuple[str, ...] = ()
    nccl_version_lines: tuple[str, ...] = ()
    fatal_lines: tuple[str, ...] = ()
    benign_lines: tuple[str, ...] = ()
    machine_lines: tuple[str, ...] = ()
    warmup_lines: tuple[str, ...] = ()
    log_prefixes: tuple[str, ...] = ()
    honours_ignore_eos: bool = True
    takes_seed: bool = True
    takes_logprobs: bool = True
    reference_flags: tuple[str, ...] = ()
    env_prefixes: tuple[str, ...] = ()
    api_key_env: tuple[str, ...] = ()
    nccl_overrides: dict[str, str] = field(default_factory=dict)
    launch_line: str = ""
    sources: str = ""
    ray_silent_why: SilentWhy | None = None
    wrapper_lines: tuple[str, ...] = ()
    port_lines: tuple[str, ...] = ()
    model_list_note: str = ""
    any_model_example: str = ""
    hang_lines: tuple[str, ...] = HANG_LINES
    node_flags: Callable[[int, int, str, int], tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        for name in ("command", "log_marks", "version_lines", "nccl_version_lines", "fatal_lines", "benign_lines",
                     "machine_lines", "warmup_lines", "log_prefixes", "wrapper_lines", "port_lines", "hang_lines"):
            object.__setattr__(self, f"_{name}", _compile(getattr(self, name)))

    def _match(self, name: str, text: str) -> re.Match[str] | None:
        pattern = _compiled(self, name)
        return pattern.search(text) if pattern is not None else None

    def named_by(self, argv: Sequence[str]) -> bool:
        """True when the server command ``argv`` runs this kind."""
        return self._match("command", " ".join(argv)) is not None

    def node_args(self, nnodes: int, rank: int, head: str, dist_port: int) -> list[str] | None:
        """The flags that make node ``rank`` of ``nnodes`` (head address ``head``, rendezvous
        port ``dist_port``), appended to the head's command; None when the kind has no
        multi-node mode (the command must then write the node placeholders itself)."""
        return None if self.node_flags is None else list(self.node_flags(nnodes, rank, head, dist_port))

    def marks(self, line: str) -> bool:
        """True when a log ``line`` is one only this kind prints."""
        return self._match("log_marks", line) is not None

    def tp_size(self, argv: Sequence[str]) -> int | None:
        """The tensor-parallel size ``argv`` gives, or None (not named, or not a number)."""
        value = option_value(argv, self.tp_options)
        return int(value) if value is not None and value.isdigit() else None

    def model(self, argv: Sequence[str]) -> str | None:
        """The model ``argv`` serves (a path or a hub name), or None when it names none."""
        value = option_value(argv, self.model_options)
        if value is None and self.model_after is not None and self.model_after in argv:
            i = list(argv).index(self.model_after)
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                value = argv[i + 1]
        return value

    def port(self, argv: Sequence[str]) -> int | None:
        """The port ``argv`` names, else the kind's default, else None."""
        value = option_value(argv, self.port_options)
        return int(value) if value is not None and value.isdigit() else self.default_port

    def version(self, line: str) -> str | None:
        """The server version a log ``line`` states, or None."""
        m = self._match("version_lines", line)
        return next((v for k, v in m.groupdict().items() if k.startswith("v") and v), None) if m else None

    def nccl_version(self, line: str) -> str | None:
        """The NCCL version a log ``line`` says the server loaded (``2.21.5``), or None."""
        m = self._match("nccl_version_lines", line)
        return next((v for k, v in m.groupdict().items() if k.startswith("v") and v), None) if m else None

    def is_fatal(self, text: str) -> bool:
        """True when a log line's text says this kind's engine died."""
        return self._match("fatal_lines", text) is not None

    def is_hang(self, text: str) -> bool:
        """True when a log line's text says a collective hung or the engine died (a hang line or
        a fatal line of this kind): what a soak fails on."""
        return self._match("hang_lines", text) is not None or self.is_fatal(text)

    def is_benign(self, text: str) -> bool:
        """True when a log line's text is one this kind prints on healthy starts."""
        return self._match("benign_lines", text) is not None

    def is_wrapper(self, text: str) -> bool:
        """True when a log line's text is an error of this kind that points at another one."""
        return self._match("wrapper_lines", text) is not None

    def is_machine(self, text: str) -> bool:
        """True when a log line's text is a start-up failure that is the machine's, not a set's."""
        return self._match("machine_lines", text) is not None

    def is_warmup(self, text: str) -> bool:
        """True when a log line's text says the server is compiling or capturing (a warm-up)."""
        return self._match("warmup_lines", text) is not None

    def strip_prefix(self, line: str) -> str:
        """``line`` without this kind's process tag at its start."""
        pattern = _compiled(self, "log_prefixes")
        if pattern is None:
            return line
        m = pattern.match(line)
        return line[m.end():] if m else line

    def owns_variable(self, name: str) -> bool:
        """True when an environment variable ``name`` is this kind's own (``VLLM_*``)."""
        return any(name.startswith(p) for p in self.env_prefixes)

    def announced_port(self, line: str) -> int | None:
        """The HTTP port a log ``line`` of this kind says it listens (or will listen) on, else None."""
        m = self._match("port_lines", line)
        return next((int(v) for k, v in m.groupdict().items() if k.startswith("port") and v), None) if m else None
