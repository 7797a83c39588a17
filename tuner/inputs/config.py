"""The experiment file (TOML): which server to relaunch, how to probe it, what to sweep.

Validated whole on load, before anything is launched, by the pydantic models below: every
problem of the file is reported at once, in one :class:`~tuner.errors.InputError` naming the
file, the key, the value as written and what is accepted (see :mod:`tuner.inputs.schema`).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tuner.inputs import envexpand
from tuner.inputs.locate import bundled_space_names, find_path
from tuner.inputs.nodes import NODE_PLACEHOLDERS, NodesConfig, fill_node, uses_node_placeholders
from tuner.inputs.schema import (
    FileModel,
    LoadContext,
    ServerEnv,
    detail,
    input_error,
    load_context,
    problem,
    raise_all,
)
from tuner.inputs.schema import read_toml as read_toml
from tuner.nccl import CPU_KINDS, NcclVersion
from tuner.record import Metric
from tuner.redaction import is_secret
from tuner.servers import KIND_NAMES, KINDS, ServerKind, kind_of

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "PROGRAM_ACCEPTED",
    "ExperimentConfig",
    "GatesConfig",
    "ProbeConfig",
    "ServerConfig",
    "SmokeCheck",
    "load_config",
    "program_problem",
    "server_tls",
]

MODES = ("search", "presets")
PROGRAM_ACCEPTED = "an existing executable file or a program on PATH"
#: An argument that is only a placeholder (``{port}``, ``--port={port}``); braces inside longer
#: arguments (``python -c`` code, JSON) are passed as written.
PLACEHOLDER = re.compile(r"(?:--[\w-]+=)?\{([a-z_]+)\}")
PLACEHOLDERS = ("port", "python", *NODE_PLACEHOLDERS)
#: The space of a file that names none: the bundled ``default`` (tuner/inputs/spaces/default.toml).
DEFAULT_SPACE = Path("default")
#: The bundled spaces' names, for the accepted values of ``sweep.space``.
BUNDLED_SPACES = tuple(bundled_space_names())
#: Tokens per probe run unless the experiment file sets ``probe.max_tokens`` (also
#: :func:`tuner.measure.run_probe`'s default).
DEFAULT_MAX_TOKENS = 512


def _int(low: int, high: int | None = None) -> Any:
    """An integer field in [low, high] whose description says so."""
    return Field(ge=low, le=high, description=f"an integer in [{low}, {high if high is not None else 'inf'}]")


def _above(low: float, below: float | None = None, example: str = "") -> Any:
    """A number field in (low, below) whose description says so."""
    text = f"a number above {low}" + (f" and below {below}" if below is not None else "") + example
    return Field(gt=low, lt=below, description=text)


_TEXT = Field(min_length=1, description="a non-empty string")


class SmokeCheck(FileModel):
    """Checks of the server's answers before any timing: a question whose greedy answer must
    contain ``expect`` (e.g. Paris), answered within ``max_tokens`` (a reasoning model that runs
    out while reasoning is asked again with room, never judged wrong for it); and, opt-in,
    ``count_to = N``: the greedy answer to "Count from 1 to N." holds 1..N in order (a set that
    corrupts data answers garbage). A failed check is ``invalid_output``: never recommended."""

    prompt: Annotated[str | None, _TEXT] = None
    expect: Annotated[str | None, _TEXT] = None
    max_tokens: Annotated[int, _int(1, 100_000)] = 32
    count_to: Annotated[int | None, _int(2, 1000)] = None

    @model_validator(mode="after")
    def _something_to_check(self) -> SmokeCheck:
        if (self.prompt is None) != (self.expect is None) or (self.prompt is None and self.count_to is None):
            raise problem('{ prompt = "What is the capital of France?", expect = "Paris" } and/or count_to = 50',
                          "prompt and expect go together; give them, count_to, or both")
        return self


class ServerConfig(FileModel):
    """How to start the server: ``command`` is an argv list with ``{port}`` substituted.

    ``ready_timeout_s`` (s) bounds launch-to-ready; ``warmup_timeout_s`` (s, default 600) bounds
    the warm-up after health answers 200 while the first request gets no response headers and
    the server keeps logging (SGLang holds every POST during its CUDA-graph warm-up, sgl-project/
    sglang #33719: 264 s there; a silent server is ``hung`` after the stall timeout, at least
    :data:`tuner.server.readiness.WARMUP_SILENCE_S` s, so a set that hangs NCCL's first
    collective costs that, or at most this bound, never the whole ``ready_timeout_s``);
    ``env`` is applied to every trial, baseline included; ``teardown_grace_s`` (s) is
    SIGTERM-to-SIGKILL; ``log_max_bytes`` (bytes) bounds each trial log file in bytes (over-long
    lines cut, the middle dropped: :class:`tuner.server.logpump.LogPump`). A string ``command`` is split with :func:`shlex.split`.
    ``api_key``: sent as ``Authorization: Bearer`` (else ``OPENAI_API_KEY`` of the runner, else
    a ``VLLM_API_KEY`` in ``env``); passed on, never written anywhere. ``expected_load_s`` (s):
    how long one launch takes to be ready, for the night's clock before a launch measured it
    (:mod:`tuner.planning.clock`; measured loads replace it). ``kind``: the server kind
    (:data:`tuner.servers.KIND_NAMES`), forcing the one the command and log would name.
    ``nodes``: ``[server.nodes]``, a server that spans nodes (:mod:`tuner.inputs.nodes`;
    ``command`` is then the head's, :meth:`node_argv` each node's).
    """

    command: Annotated[tuple[str, ...], Field(
        description="a non-empty list of strings (argv), or a string split with shlex")]
    port: Annotated[int, _int(1, 65535)] = 8000
    host: Annotated[str, _TEXT] = "127.0.0.1"
    ready_timeout_s: Annotated[float, _above(0)] = 2700.0
    warmup_timeout_s: Annotated[float, _above(0)] = 600.0
    env: Annotated[ServerEnv, Field(description='a table such as { NCCL_PROTO = "LL" }')] = Field(
        default_factory=dict)
    health_path: Annotated[str, Field(pattern="^/", description="a path starting with '/', e.g. /health")] = "/health"
    model: Annotated[str | None, _TEXT] = None
    teardown_grace_s: Annotated[float, _above(0)] = 30.0
    log_max_bytes: Annotated[int, _int(4096)] = 50 * 1024 * 1024
    api_key: Annotated[str | None, _TEXT] = None
    expected_load_s: Annotated[float | None, _above(0, example=" (s), e.g. 2160 for a 36-minute load")] = None
    kind: Annotated[Literal[KIND_NAMES] | None, Field(  # type: ignore[valid-type]
        description=f"one of {', '.join(KIND_NAMES)}")] = None
    nodes: Annotated[NodesConfig, Field(description="a [server.nodes] table")] = Field(default_factory=NodesConfig)

    @model_validator(mode="after")
    def _nodes(self, info: ValidationInfo) -> ServerConfig:
        nodes = self.nodes
        if not nodes.spans:
            return self
        if nodes.launch == "srun" and load_context(info).check_program and (why := program_problem("srun")):
            raise_all("server", [detail(("nodes", "launch"), nodes.launch, "srun on PATH (the runner starts each "
                                        "trial's step itself, inside the allocation)", f"srun is {why}")])
        if nodes.launch != "lws" and not uses_node_placeholders(self.command) and self.server_kind().node_flags is None:
            kind = self.server_kind()
            raise_all("server", [detail(("command",), list(self.command),
                                        "the node placeholders {node_rank}, {nnodes}, {head} and {dist_port} in "
                                        "the command, or a kind with a multi-node mode (server.kind = "
                                        + " or ".join(f'"{k.name}"' for k in KINDS if k.node_flags) + ")",
                                        f"server.nodes.count = {nodes.count} but {kind.title} has no multi-node "
                                        "flags nccl-tune knows")])
        if nodes.launch != "lws" and nodes.dist_port == self.port:  # the head would bind its rendezvous on its own HTTP port
            raise_all("server", [detail(("nodes", "dist_port"), nodes.dist_port,
                                        f"a port other than server.port ({self.port}): the head listens on both",
                                        "the head's rendezvous and its HTTP server would take the same port")])
        secret = sorted(k for k in self.env if is_secret(k))
        if nodes.launch == "lws" and secret:
            # the trial's manifest holds server.env in plain text: the project never writes a secret to a file
            raise_all("server", [detail(("env", secret[0]), "***",
                                        "no secret-named variable (TOKEN, KEY, SECRET, PASSWORD) in server.env "
                                        'with launch = "lws"',
                                        "the trial's LeaderWorkerSet manifest would hold it in plain text; put it "
                                        "in a Kubernetes Secret and reference it from the template's env "
                                        "(valueFrom.secretKeyRef)")])
        if nodes.launch == "srun" and nodes.hosts is None and not os.environ.get("SLURM_JOB_NODELIST"):
            raise_all("server", [detail(("nodes", "launch"), nodes.launch,
                                        "srun inside a Slurm allocation (salloc, sbatch: SLURM_JOB_NODELIST set), "
                                        "or server.nodes.hosts naming the nodes",
                                        "no allocation here (SLURM_JOB_NODELIST unset) and no hosts named")])
        if nodes.launch == "srun" and nodes.hosts is not None and "host" not in self.model_fields_set:
            object.__setattr__(self, "host", nodes.hosts[0])  # readiness and the probe go to the head (frozen model)
        return self

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, raw: Any, info: ValidationInfo) -> tuple[str, ...]:
        accepted = cls.model_fields["command"].description or ""
        try:
            argv = shlex.split(raw) if isinstance(raw, str) else raw
        except ValueError as exc:  # unbalanced quotes
            raise problem(accepted, f"shlex: {exc}") from None
        if not isinstance(argv, list | tuple) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise problem(accepted)
        unknown = [detail((i,), a, "the placeholders {port}, {python}, {node_rank}, {nnodes}, {head} and {dist_port}",
                          f"{{{m.group(1)}}} is not a placeholder nccl-tune fills")
                   for i, a in enumerate(argv) if (m := PLACEHOLDER.fullmatch(a)) and m.group(1) not in PLACEHOLDERS]
        raise_all("command", unknown)
        if load_context(info).check_program:
            why = program_problem(argv[0])
            raise_all("command", [detail((0,), argv[0], PROGRAM_ACCEPTED, why)] if why else [])
        return tuple(argv)

    def argv(self, port: int | None = None) -> list[str]:
        """The command with ``{port}`` replaced, ``{python}`` replaced by this interpreter
        (sys.executable: the simulator runs in nccl-tune's own venv) and a leading ``~`` expanded;
        with ``[server.nodes]``, the head's (:meth:`node_argv` of rank 0)."""
        return self.node_argv(0, self.nodes.head(self.nodes.names()), port)

    def node_argv(self, rank: int, head: str, port: int | None = None) -> list[str]:
        """Node ``rank``'s command (``head``: the head's address): the node placeholders filled
        (one host: rank 0 of 1), else, on a server spanning nodes, the kind's node flags appended
        (:meth:`tuner.servers.ServerKind.node_args`)."""
        p = str(self.port if port is None else port)
        nodes = self.nodes
        values = {"node_rank": str(rank), "nnodes": str(nodes.count), "head": head, "dist_port": str(nodes.dist_port)}
        out = []
        for a in self.command:
            a = fill_node(a.replace("{port}", p).replace("{python}", sys.executable), values)
            out.append(os.path.expanduser(a) if a.startswith("~") else a)
        if nodes.spans and nodes.launch != "lws" and not uses_node_placeholders(self.command):
            out += self.server_kind().node_args(nodes.count, rank, head, nodes.dist_port) or []
        return out

    def server_kind(self) -> ServerKind:
        """The server kind this command runs (:func:`tuner.servers.kind_of`): ``kind`` when set,
        else the one the command names, else the generic OpenAI-compatible one."""
        return kind_of(self.command, forced=self.kind)

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.host}:{self.port}"


@functools.cache
def server_tls() -> ssl.SSLContext:
    """The TLS context every HTTP client of the server shares (httpx's ``verify``), made once
    per process: httpx otherwise loads certifi's bundle for each client it makes, about 28 ms
    of CPU each, and a night makes one per readiness wait and probe run. The server is reached
    at :attr:`ServerConfig.base_url`, plain http, so nothing is verified today; the context
    still verifies (httpx's default, ``httpx.create_ssl_context``) so an https URL would be."""
    import httpx  # the clients' library; only they need it

    return httpx.create_ssl_context()


def program_problem(program: str) -> str | None:
    """Why ``program`` (a command's first argument as written: ``{python}`` is this interpreter,
    a leading ``~`` the home folder) cannot be started: a path that is not an executable file
    ("not found or not executable"), a name not on PATH ("not on PATH"); None when it can."""
    program = os.path.expanduser(program.replace("{python}", sys.executable))
    if os.sep in program:
        return None if os.path.isfile(program) and os.access(program, os.X_OK) else "not found or not executable"
    return None if shutil.which(program) else "not on PATH"


def _repeats(raw: Any) -> int | Literal["auto"]:
    # One run gives no interval: nothing could be judged.
    if raw == "auto" or (isinstance(raw, int) and not isinstance(raw, bool) and 2 <= raw <= 1000):
        return raw
    raise problem('an integer in [2, 1000], or "auto"')


def _tuple(raw: Any) -> Any:
    """A TOML list as a tuple (strict mode takes no list for a tuple field)."""
    return tuple(raw) if isinstance(raw, list) else raw


BeforeTuple = BeforeValidator(_tuple)


class ProbeConfig(FileModel):
    """The fixed single-stream probe: ``warmup`` unrecorded runs, then ``repeats`` recorded.

    ``repeats`` may be ``"auto"``: the number of runs per launch is chosen before each launch
    from the baseline's measured run noise, so that the 95 % CI half-width of a launch's level
    is about ``ci_target`` (fraction, 0.01 = 1 %), at most ``max_repeats``
    (:func:`tuner.judging.stats.runs_for_precision`); the first baseline launch makes ``max_repeats``.
    ``stall_timeout_s`` (s): a stream with no token for that long is ``hung``.
    ``concurrency``: extra runs with that many simultaneous streams (``concurrency_requests`` each).
    ``judge_concurrency``: the level "Use it" rests on (the headline, its confirmation): 1, the
    single-stream probe (the default), or one of ``concurrency``; every level is judged and
    shown either way (:mod:`tuner.judging.levels`).
    ``endpoint``: ``chat`` or ``completions`` (a base model without a chat template).
    ``metric``: what verdicts, the sampler and the plots use: ``output_tok_s`` (completion
    tokens / E2E, the figure users quote) or ``decode_tok_s`` (1 / TPOT, prefill excluded);
    both are always recorded. It is stored with the study when the study begins
    (:class:`tuner.record.Metric`); once the study holds a trial, a resume with another one is
    refused. ``expected_tok_s`` (tok/s): one stream's output rate, for the night's clock before
    the baseline measured the probe (:mod:`tuner.planning.clock`; measured probes replace it).
    """

    prompt: Annotated[str, _TEXT] = "Count from 1 to 50."
    max_tokens: Annotated[int, _int(2, 1_000_000)] = DEFAULT_MAX_TOKENS
    warmup: Annotated[int, _int(0, 100)] = 1
    repeats: Annotated[int | Literal["auto"], PlainValidator(_repeats)] = 3
    max_repeats: Annotated[int, _int(2, 1000)] = 15
    ci_target: Annotated[float, _above(0, 0.5, ", e.g. 0.01 for 1 %")] = 0.01
    stall_timeout_s: Annotated[float, _above(0)] = 120.0
    check: Annotated[SmokeCheck | None, Field(
        description='{ prompt = "What is the capital of France?", expect = "Paris" }')] = None
    concurrency: Annotated[tuple[Annotated[int, Field(ge=1, le=1024)], ...], BeforeTuple, Field(
        description="a list of integers in [1, 1024], e.g. [1, 2, 4, 8]")] = ()
    concurrency_requests: Annotated[int, _int(1, 10_000)] = 4
    judge_concurrency: Annotated[int, Field(ge=1, description=(
        "1 (the single-stream probe) or one of probe.concurrency"))] = 1
    endpoint: Annotated[Literal["chat", "completions"], Field(
        description='"chat" (/v1/chat/completions) or "completions" (/v1/completions, base models)')] = "chat"
    metric: Annotated[Metric, Field(strict=False,  # the file holds the enum's value, a string
                                    description='"output_tok_s" (the default) or "decode_tok_s"')] = Metric.OUTPUT
    expected_tok_s: Annotated[float | None, _above(0, example=" (tok/s), e.g. 50")] = None

    @model_validator(mode="after")
    def _judged_level_measured(self) -> ProbeConfig:
        level = self.judge_concurrency
        if level != 1 and level not in self.concurrency:
            levels = f" ([{', '.join(map(str, self.concurrency))}])" if self.concurrency else ", which is empty"
            raise_all("probe", [detail(("judge_concurrency",), level,
                                       f"1 (the single-stream probe) or one of probe.concurrency{levels}",
                                       f"C={level} is not measured")])
        return self


#: ``[sweep] baseline_every`` by default: at budget 12, a re-measure every 3, 4 or 5 relaunches lifts
#: "Use it" for a true +10 % set from 5 % to 77-79 % of nights at tau 1 % (17 % to 48-53 % at 2 %,
#: benchmarks/night_calibration.py --every); 5 costs the fewest sets on longer nights.
DEFAULT_BASELINE_EVERY = 5
#: Minutes of sustained load a finalist's confirmation launch runs before "use it" (and the final
#: baseline, where the deadline leaves time). 10 min: a night of 12 relaunches at a few minutes
#: each is one to two hours, and two confirmations plus the baseline's soak add 30 min at most;
#: NCCL's and PyTorch's own limits are longer (the ProcessGroupNCCL collective timeout is 10 min
#: by default, torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp, so a stuck collective shows as a
#: stall long before torch's watchdog line), and a hang that takes longer (vllm #42354's came at
#: about 20 min) needs a soak of its own: ``--soak 60`` the night before a deployment.
DEFAULT_SOAK_MINUTES = 10.0
#: The environment variable that replaces :data:`DEFAULT_SOAK_MINUTES` where the experiment file
#: sets no ``sweep.soak_minutes`` (a site's or a CI's own default; the tests' 0).
SOAK_ENV = "NCCL_TUNE_SOAK_MINUTES"
_SOAK_ACCEPTED = "a number of minutes in [0, 1440] (0: no soak; fractions allowed, 0.5 = 30 s)"


def _default_soak() -> float:
    from tuner.errors import InputError

    raw = os.environ.get(SOAK_ENV)
    if raw is None:
        return DEFAULT_SOAK_MINUTES
    try:
        minutes = float(raw)
    except ValueError:
        minutes = -1.0
    if not 0 <= minutes <= 24 * 60:
        raise InputError("the environment", SOAK_ENV, raw, _SOAK_ACCEPTED,
                         "it is sweep.soak_minutes' default where the experiment file sets none")
    return minutes


class SweepConfig(FileModel):
    """What to try: ``space`` file, relaunch budget ``trials`` (every relaunch counts: the
    baseline, its re-measures, the sets, the confirmations; tuner.planning.budget), ``mode``
    (search: presets then the sampler; presets: presets only), ``seed`` of the sampler, a
    baseline re-measure every ``baseline_every`` relaunches (0: none between; the default,
    :data:`DEFAULT_BASELINE_EVERY`, measured by benchmarks/night_calibration.py --every), stop at
    ``target`` tok/s. ``soak_minutes``: the sustained load (min) each finalist's confirmation
    launch runs after its probe, and the final baseline's where the deadline leaves time
    (:data:`DEFAULT_SOAK_MINUTES`, its reasons there; 0: no soak; :data:`SOAK_ENV` replaces the
    default).

    ``space`` is a bundled space's name or a path, looked up next to the experiment file, then in
    the current directory, then among the bundled spaces (:func:`tuner.inputs.locate.find_path`).
    """

    space: Annotated[Path, Field(validate_default=True, description=(
        "a bundled space's name (" + ", ".join(BUNDLED_SPACES) + ") or a search-space TOML file, "
        "relative to the experiment file or to the current directory"))] = DEFAULT_SPACE
    trials: Annotated[int, _int(1, 10_000)] = 12
    mode: Annotated[Literal["search", "presets"], Field(description=" or ".join(MODES))] = "search"
    seed: Annotated[int | None, _int(0)] = None
    baseline_every: Annotated[int, _int(0, 10_000)] = DEFAULT_BASELINE_EVERY
    target: Annotated[float | None, _above(0)] = None
    soak_minutes: Annotated[float, Field(ge=0, le=24 * 60, allow_inf_nan=False, default_factory=_default_soak, description=_SOAK_ACCEPTED)]

    @property
    def soak_s(self) -> float:
        """The soak's seconds (0: none)."""
        return self.soak_minutes * 60.0

    @property
    def trials_given(self) -> bool:
        """True when the experiment file sets ``trials`` (False: the default, which a deadline
        replaces by what fits: tuner.planning.reach)."""
        return "trials" in self.model_fields_set

    @field_validator("space", mode="before")
    @classmethod
    def _find(cls, raw: Any, info: ValidationInfo) -> Path:
        accepted = cls.model_fields["space"].description or ""
        if not (isinstance(raw, str) and raw) and not isinstance(raw, Path):
            raise problem(accepted)
        ctx = load_context(info)
        if not ctx.resolve_space:
            return Path(raw)
        return _located("sweep.space", raw, ctx, accepted, bundled=True)


def _located(key: str, raw: str | Path, ctx: LoadContext, accepted: str, *, bundled: bool = False,
             exists: Callable[[Path], bool] = Path.is_file) -> Path:
    """``raw`` found by :func:`tuner.inputs.locate.find_path` (next to the experiment file, then
    in the working directory, then bundled), where a relative one was found said as a notice."""
    found = find_path(raw, ctx.file, exists=exists, bundled=bundled)
    if found is None:
        raise problem(accepted, "file not found")
    path, where = found
    if where != "as written":
        ctx.notices.append(f'{key} = "{raw}": {path} ({where})')
    return path


def _version(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise problem('an NCCL version string such as "2.21.5"')
    try:
        NcclVersion.parse(raw)
    except ValueError as exc:
        raise problem('an NCCL version string such as "2.21.5"', str(exc)) from None
    return raw


#: The CPUs ``[nccl] cpu_vendor`` names: the kinds NCCL's P2P default tells apart
#: (:data:`tuner.nccl.CPU_KINDS` without NCCL's own "mixed"; src/include/graph.h
#: NCCL_TOPO_CPU_VENDOR_* and NCCL_TOPO_CPU_ARCH_*, read by src/graph/paths.cc ncclTopoCheckP2p).
CPU_VENDOR_NAMES = tuple(k for k in CPU_KINDS if k != "mixed")
_CPU_ACCEPTED = f"one of {', '.join(repr(k) for k in CPU_VENDOR_NAMES)} (any case)"


def _cpu_vendor(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        for kind in CPU_VENDOR_NAMES:
            if raw.strip().lower() == kind.lower():
                return kind
    raise problem(_CPU_ACCEPTED, "not a CPU NCCL tells apart" if isinstance(raw, str) else "")


class NcclConfig(FileModel):
    """``[nccl]``: ``version`` (``"2.21.5"``): the NCCL release whose parsing rules check the
    values before any launch (None: the oldest supported; the baseline's log gives the real one);
    ``cpu_vendor`` (``"amd"``, any case, stored as :data:`CPU_VENDOR_NAMES` spells it): the
    host's CPU, which with the version and the GPU count decides NCCL's default P2P level
    before the baseline's GRAPH lines name it (src/graph/paths.cc, ncclTopoCheckP2p; the log
    wins once it names a CPU); ``debug``: add ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH`` to every launch, so
    each variable can be proven to have reached NCCL (init-time lines only; a ``NCCL_DEBUG`` in
    ``server.env`` is respected)."""

    version: Annotated[str | None, PlainValidator(_version), Field(
        description='an NCCL version string such as "2.21.5"')] = None
    cpu_vendor: Annotated[str | None, PlainValidator(_cpu_vendor), Field(description=_CPU_ACCEPTED)] = None
    debug: Annotated[bool, Field(description="true or false")] = True

    @property
    def nccl_version(self) -> NcclVersion | None:
        """``version`` parsed, or None."""
        return NcclVersion.parse(self.version) if self.version else None


class ModelConfig(FileModel):
    """``[model]``: where the allreduce sizes come from (:mod:`tuner.inputs.model`).

    ``config``: a Hugging Face ``config.json`` (or its folder), relative to the experiment
    file, then to the current directory; read on load. ``tokens_per_step``: tokens in one
    decode forward pass (1 for one stream; the batch, or 1 + draft length with speculative
    decoding). ``prompt_tokens``: the prompt length whose prefill allreduce is screened too
    (None: decode only). ``dtype``: the server's ``--dtype`` when not ``auto``.
    ``expert_parallel``: the server runs MoE layers expert-parallel (their allreduces become
    all-to-all). ``allreduces_per_token``: overrides the 2 x num_hidden_layers rule.
    """

    config: Annotated[Path, Field(description=(
        "the path of a Hugging Face config.json (or its folder), relative to the experiment file "
        "or to the current directory"))]
    tokens_per_step: Annotated[int, _int(1, 1_000_000)] = 1
    prompt_tokens: Annotated[int | None, _int(1, 10_000_000)] = None
    dtype: Annotated[str | None, Field(description='"auto", "bfloat16", "float16" or "float32"')] = None
    expert_parallel: Annotated[bool, Field(description="true or false")] = False
    allreduces_per_token: Annotated[int | None, _int(1, 1_000_000)] = None

    @field_validator("config", mode="before")
    @classmethod
    def _find_config(cls, raw: Any, info: ValidationInfo) -> Path:
        accepted = cls.model_fields["config"].description or ""
        if not (isinstance(raw, str) and raw) and not isinstance(raw, Path):
            raise problem(accepted)
        ctx = load_context(info)
        if not ctx.resolve_space:
            return Path(os.path.expanduser(raw))
        return _located("model.config", raw, ctx, accepted, exists=Path.exists)

    @model_validator(mode="after")
    def _readable(self, info: ValidationInfo) -> ModelConfig:
        if not load_context(info).resolve_space:
            return self
        from tuner.errors import InputError
        from tuner.inputs.model import load_model_shape

        try:
            load_model_shape(self.config, served_dtype=self.dtype)
        except InputError as exc:
            raise problem("a Hugging Face config.json with hidden_size and num_hidden_layers",
                          f"{exc.file}: {exc.key} = {exc.value!r}" + (f" ({exc.why})" if exc.why else "")) from None
        return self


class ScreenConfig(FileModel):
    """``[screen]``: nccl-tests runs under candidate sets before any tuned relaunch (:mod:`tuner.screen`).

    ``command``: argv of an nccl-tests ``*_perf`` program with ``{size}`` (one size) or
    ``{min_size}``/``{max_size}`` (several, measured in one run, read row by row), and
    ``{python}``; a string is split with shlex. ``sizes`` (bytes): the first is the decode size,
    the largest the prefill size; empty: both from ``[model]``. ``trials``: screen runs, the
    untuned set's two included (not counted by ``--trials``). ``top_k``: sets relaunched right
    after the screen, best first. ``timeout_s`` (s): a run still going then is killed, tree and
    all, and recorded as ``timeout``. ``json_output``: use ``-J`` (``"auto"``: when ``-h`` lists it).
    ``tie_pct`` (%): decode times this close rank as tied, then the prefill size decides.
    """

    command: Annotated[tuple[str, ...], Field(
        description="a non-empty list of strings (argv) with {size} or {min_size}/{max_size}, or a string")]
    sizes: Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeTuple, Field(
        description="a list of message sizes in bytes (integers >= 1), the decode size first")] = ()
    trials: Annotated[int, _int(3, 100_000)] = 100
    top_k: Annotated[int, _int(0, 1000)] = 4
    timeout_s: Annotated[float, _above(0)] = 120.0
    json_output: Annotated[bool | Literal["auto"], Field(description='true, false or "auto"')] = "auto"
    tie_pct: Annotated[float, Field(ge=0, lt=50, description="a percentage in [0, 50)")] = 1.0

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, raw: Any, info: ValidationInfo) -> tuple[str, ...]:
        accepted = cls.model_fields["command"].description or ""
        try:
            argv = shlex.split(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            raise problem(accepted, f"shlex: {exc}") from None
        if not isinstance(argv, list | tuple) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise problem(accepted)
        if load_context(info).check_program:
            why = program_problem(argv[0])
            raise_all("command", [detail((0,), argv[0], PROGRAM_ACCEPTED, why)] if why else [])
        return tuple(argv)

    def argv(self, sizes: list[int]) -> list[str]:
        """The command for ``sizes`` (bytes): ``{size}`` the only one, ``{min_size}``/``{max_size}``
        the smallest and largest, ``{python}`` this interpreter, a leading ``~`` expanded."""
        lo, hi = min(sizes), max(sizes)
        out = []
        for a in self.command:
            a = (a.replace("{size}", str(lo)).replace("{min_size}", str(lo)).replace("{max_size}", str(hi))
                 .replace("{python}", sys.executable))
            out.append(os.path.expanduser(a) if a.startswith("~") else a)
        return out


#: The correctness gate's prompts unless ``gates.prompts`` names others: answers with little room
#: for a second greedy path (a fixed text, a fixed sequence, a fixed computation), so a clean set's
#: answers part from the baseline's late or not at all, and a corrupting one's at once
#: (tuner/judging/answers.py says why the rule depends on that).
DEFAULT_GATE_PROMPTS = (
    "Recite Article 1 of the Universal Declaration of Human Rights, then explain each of its phrases in order.",
    "List the first thirty chemical elements in order of atomic number, one per line: number, name, symbol.",
    "Write the numbers from one to one hundred in English words, separated by commas.",
    "Compute the greatest common divisor of 1071 and 462 with Euclid's algorithm, showing every step.",
)
#: Tokens per gate answer unless ``gates.max_tokens`` says otherwise.
DEFAULT_GATE_TOKENS = 256
#: The environment variable that replaces ``gates.answers``' default (on) where the experiment
#: file sets none: ``0``/``false`` or ``1``/``true`` (a site's or a CI's own default; the tests' off).
ANSWERS_ENV = "NCCL_TUNE_ANSWERS"


def _default_answers() -> bool:
    from tuner.errors import InputError

    raw = os.environ.get(ANSWERS_ENV)
    if raw is None:
        return True
    value = {"1": True, "true": True, "0": False, "false": False}.get(raw.strip().lower())
    if value is None:
        raise InputError("the environment", ANSWERS_ENV, raw, "0, 1, true or false",
                         "it is gates.answers' default where the experiment file sets none")
    return value


class GatesConfig(FileModel):
    """The correctness gate (tuner/judging/answers.py), on unless the file or :data:`ANSWERS_ENV`
    turns it off (it costs every launch ``len(prompts) x max_tokens`` tokens of decode, about 15 s
    at 70 tok/s with the defaults: nothing beside a model load): ``answers`` (true: every launch answers
    ``prompts`` greedily, ``max_tokens`` tokens each with ``seed``, and a set whose answers part from
    the baseline's beyond tolerance is ``wrong_output``; false: off), ``reference`` (true: once a
    night the baseline is relaunched in the reference configuration, the server's own allreduce off
    and NCCL_P2P_DISABLE=1, and its answers compared with the baseline's: one relaunch of the
    budget)."""

    answers: bool = Field(default_factory=_default_answers, description="true or false")
    prompts: Annotated[tuple[Annotated[str, _TEXT], ...], BeforeTuple, Field(
        min_length=1, max_length=32, description="a list of 1 to 32 non-empty prompts")] = DEFAULT_GATE_PROMPTS
    max_tokens: Annotated[int, _int(8, 4096)] = DEFAULT_GATE_TOKENS
    seed: Annotated[int, _int(0, 2**31 - 1)] = 0
    reference: Annotated[bool, Field(description="true or false")] = False


class _ExperimentFile(FileModel):
    server: Annotated[ServerConfig, Field(description="a [server] table with at least 'command'")]
    probe: Annotated[ProbeConfig, Field(description="a [probe] table")]
    sweep: Annotated[SweepConfig, Field(description="a [sweep] table")]
    nccl: Annotated[NcclConfig, Field(description="an [nccl] table")]
    screen: Annotated[ScreenConfig | None, Field(description="a [screen] table with at least 'command'")] = None
    model: Annotated[ModelConfig | None, Field(description="a [model] table with 'config'")] = None
    gates: Annotated[GatesConfig, Field(description="a [gates] table")] = Field(default_factory=GatesConfig)

    @model_validator(mode="after")
    def _screen_sizes(self) -> _ExperimentFile:
        sc = self.screen
        if sc is None:
            return self
        if not sc.sizes and self.model is None:
            raise_all("screen", [detail(("screen", "sizes"), [], "a list of message sizes in bytes, or a [model] "
                                        "table to derive them from", "the screen needs the decode size")])
        several = len(set(sc.sizes)) > 1 or (not sc.sizes and self.model is not None
                                               and self.model.prompt_tokens is not None)
        if several and any("{size}" in a for a in sc.command):
            raise_all("screen", [detail(("screen", "command"), list(sc.command),
                                        "-b {min_size} -e {max_size} (and -f 2) when several sizes are screened",
                                        "{size} names one size; several are measured in one run")])
        return self

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # Absent [probe]/[sweep] tables are validated too: the default space path is resolved.
        return {"probe": {}, "sweep": {}, "nccl": {}, **data} if isinstance(data, dict) else data


@dataclass(frozen=True)
class ExperimentConfig:
    """A whole experiment file: ``server``, ``probe``, ``sweep``, ``nccl``, where it came from,
    ``notices``: what NCCL would adjust or not read, said before any launch, and the optional
    ``screen`` and ``model`` tables; ``gates``: the correctness gate's (:class:`GatesConfig`).

    ``written``: the file as parsed, before its ``${NAME}`` references were expanded
    (:mod:`tuner.inputs.envexpand`); empty for a config built in code.
    """

    path: Path
    server: ServerConfig
    probe: ProbeConfig
    sweep: SweepConfig
    nccl: NcclConfig = field(default_factory=NcclConfig)
    notices: list[str] = field(default_factory=list)
    screen: ScreenConfig | None = None
    model: ModelConfig | None = None
    written: Mapping[str, Any] = field(default_factory=dict)
    gates: GatesConfig = field(default_factory=GatesConfig)

    def written_command(self) -> list[str]:
        """``server.command`` as the file wrote it (``${NAME}`` and ``{port}`` unexpanded),
        split like the command itself; the expanded command when the file is not known."""
        server = self.written.get("server")
        raw = server.get("command") if isinstance(server, dict) else None
        if isinstance(raw, str):
            try:
                return shlex.split(raw)
            except ValueError:
                return [raw]
        if isinstance(raw, list) and all(isinstance(a, str) for a in raw):
            return list(raw)
        return list(self.server.command)

    def written_env(self) -> dict[str, str]:
        """``server.env`` as the file wrote it (``${NAME}`` unexpanded); the expanded one
        when the file is not known."""
        server = self.written.get("server")
        raw = server.get("env") if isinstance(server, dict) else None
        if isinstance(raw, dict):
            return {str(k): str(v) for k, v in raw.items()}
        return dict(self.server.env)


def load_config(path: str | os.PathLike[str], *, allow_unsafe: bool = False,
                check_program: bool = True, resolve_space: bool = True,
                environ: Mapping[str, str] | None = None, allow_unknown: bool = False) -> ExperimentConfig:
    """Read and validate an experiment file.

    ``check_program``: the command's program must exist (a path) or be on PATH;
    ``resolve_space``: ``sweep.space`` must exist. ``${NAME}`` references are replaced by the
    runner's environment variables first (:mod:`tuner.inputs.envexpand`; ``environ``: default
    ``os.environ``). Raises :class:`InputError` listing every problem: a missing or unparsable
    file, a variable that is not set, unknown keys, wrong types or ranges, a program that
    does not exist, NCCL values NCCL would misread, unsafe NCCL settings in ``server.env``
    without ``allow_unsafe``, a space file not found, an ``NCCL_*`` name NCCL does not read
    (unless ``allow_unknown``; hardware selectors such as NCCL_SOCKET_IFNAME are checked for their
    name only).
    """
    file = Path(path)
    written = read_toml(file, "experiment")
    data = envexpand.expand(written, os.environ if environ is None else environ, str(file), _numeric_key)
    context = LoadContext(file=file, allow_unsafe=allow_unsafe, check_program=check_program,
                          resolve_space=resolve_space, version=_declared_version(data), allow_unknown=allow_unknown)
    try:
        parsed = _ExperimentFile.model_validate(data, context=context)
    except ValidationError as exc:
        raise input_error(str(file), exc, _ExperimentFile) from None
    return ExperimentConfig(path=file, server=parsed.server, probe=parsed.probe, sweep=parsed.sweep,
                            nccl=parsed.nccl, notices=context.notices, screen=parsed.screen, model=parsed.model,
                            written=written, gates=parsed.gates)


def _numeric_key(key: str) -> type | None:
    """int or float for a numeric key of the file (``server.port``), else None: a ``${NAME}``
    that is the whole value of such a key becomes a number."""
    section, _, name = key.partition(".")
    models: dict[str, type[FileModel]] = {"server": ServerConfig, "probe": ProbeConfig, "sweep": SweepConfig,
                                          "gates": GatesConfig}
    model = models.get(section)
    if model is None or name not in model.model_fields:
        return None
    hint = model.model_fields[name].annotation
    kinds = set(get_args(hint)) - {NoneType} if get_origin(hint) in (Union, UnionType) else {hint}
    if kinds == {int}:
        return int
    if kinds in ({float}, {int, float}):
        return float
    return None


def _declared_version(data: dict[str, Any]) -> NcclVersion | None:
    """``[nccl] version`` read ahead, so ``server.env`` is checked by that release's rules (a bad
    one is reported by the model and the oldest rules apply meanwhile)."""
    table = data.get("nccl")
    raw = table.get("version") if isinstance(table, dict) else None
    try:
        return NcclVersion.parse(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
