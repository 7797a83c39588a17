"""OpenAI-compatible HTTP server standing in for a TP-N vLLM server.

Life cycle of ``serve(opts)``:

1. drop the ``ignore_vars`` from the environment (a server that overwrites them, or Ray workers
   that never receive them), print ``SIM ENV {...}`` and vLLM's start lines; the ``no_effect``
   variables (test support) stay for NCCL to read, but the speed is that of the launch without them;
2. play the start (startup.py): read the NCCL environment as NCCL would, spawn N-1 worker
   processes that print their own rank's lines, run the start-up collectives; a failure there
   ends the process (exit 1) the way vLLM does, with NCCL's WARN lines when NCCL_DEBUG asks;
3. "load the model" for the load time WITHOUT binding the port (connections are refused, as
   with vLLM), then bind, print ``SIM READY tok_s=<rate> ...`` and serve until SIGTERM/SIGINT;
   then close the port, stop the workers (SIGTERM, then SIGKILL after 5 s) and exit 0. If a
   worker dies on its own the server logs an error and exits 1 (EngineCore-died behaviour).

Where the lines go: the simulator's own and vLLM's lines on stderr, whole. NCCL's lines of each
process go where NCCL writes them (ncclstdio): the process's own file when NCCL_DEBUG_FILE names
one (``%h``/``%p`` expanded), else with ``stdout_buffering="line"`` (the default) with the other
lines, whole; with ``"block"`` on stdout through a 4096-byte buffer, as a real server on a pipe
(cut mid-line, mixed with other processes' output, lost with a SIGKILLed process). With ``ray``
the server is vLLM 0.8.2 on Ray (raycluster.py): rank 0 runs in this process with the launch
environment, the workers get the environment of ``ray start`` and what vLLM copies (no
``NCCL_*``), and their output comes back through Ray's log files, prefixed and folded.

Across nodes (``opts.nodes``, nodes.py): the head (node rank 0) listens on the master address
before step 2 and plays NCCL's init only once every other node joined, so ``/health`` answers
only then; a headless node (rank > 0) joins, prints its ranks' lines and waits. A node that goes
away ends the head (exit 1, vLLM's "Worker proc ... died unexpectedly" line), and a lost head ends
a node (exit 1).

Endpoints: ``GET /health`` (200, empty body), ``GET /v1/models``, ``GET /metrics`` (a few vLLM
Prometheus counters), ``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming (SSE
over chunked transfer encoding, one token per chunk, role-only first chunk for chat, usage chunk
when ``stream_options.include_usage``) or not. Token i of a request is due at
``t0 + prefill + i * step`` (absolute schedule, so the average rate holds at thousands of tok/s),
where step is the cost model's decode step for the streams running at that moment, times a
per-launch and a per-request noise factor; with ``log_schedule`` (``--log-schedule``) each stream
is followed by ``SIM SCHEDULE {"due": [...], "batch": [...]}``, those due times
(``time.perf_counter`` s) and each step's batch, so a test can check the pace without timing it.
With NCCL_DEBUG=INFO and TUNING in NCCL_DEBUG_SUBSYS, each processed prompt logs rank 0's
per-operation line for its prefill allreduce. A request whose allreduces run on a protocol NCCL
would not have enabled (LL128 forced on PCIe) answers with corrupted text.

Answers are greedy paths (greedy.py): deterministic per prompt and launch environment, parting late
from the untuned launch's at the profile's ``divergence_rate`` when the set changes the reduction
order (``launch_divergence_rate`` on any launch), with OpenAI logprobs on request (http_api.py).
Set-bound faults (faults.py: ``corrupt``, ``hang-after-load=S``, ``speed=F``) are resolved once from
the launch environment and logged in ``SIM MODEL``'s ``set_effects``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid

from . import greedy, raycluster, tgilog, vllmlog
from .arbackends import BackendPlan, plan_for
from .costmodel import CollectiveCrash, CostModel
from .faults import Effects, FaultPlan, parse_when_list
from .http_api import Handler, SimHTTPServer, SimHTTPServer6
from .libstub import map_stand_in
from .ncclenv import EnvReport, NcclInitError, drop_vars, load_conf_file, read_env, relevant_env
from .nccllog import DebugConfig, NcclLog, host_name, node_layout, op_message, output_plan
from .ncclnet import net_choice
from .ncclstdio import open_sink
from .nodes import Head, Member, NodeSpec, rendezvous_timeout_s
from .procs import Workers
from .profiles import Profile
from .startup import NCCL, failure_lines, rank_lines, run_startup


@dataclasses.dataclass
class ServeOptions:
    """Everything ``serve`` needs. Times in seconds, noise as fractions (1 sigma);
    ``ignore_vars`` are dropped from ``environ`` before NCCL or the workers see it;
    ``stdout_buffering`` ``"line"`` or ``"block"`` (see the module docstring); ``ray``: vLLM
    0.8.2 on a Ray cluster of ``ray_nodes`` nodes whose ``ray start`` had ``ray_start_env``
    (None: raycluster.DEFAULT_START_ENV)."""

    profile: Profile
    model_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    load_time_s: float = 1.0
    noise: float = 0.02
    launch_noise: float = 0.005
    seed: int | None = None
    workers: int = 0
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning"
    faults: FaultPlan = dataclasses.field(default_factory=FaultPlan)
    environ: dict = dataclasses.field(default_factory=dict)
    ignore_vars: tuple = ()
    stdout_buffering: str = "line"
    ray: bool = False
    ray_nodes: int = 1
    ray_start_env: dict | None = None
    log_schedule: bool = False  # SIM SCHEDULE after each stream: when its tokens were due (for tests)
    #: test support: variables NCCL reads (and echoes) whose effect on the speed is dropped
    no_effect: tuple = ()
    missing: tuple = ()  # packages the server lacks (--sim-missing): arbackends.MISSING_PACKAGES
    #: the HTTP surface and log of: "vllm", or "tgi" (text-generation-inference, tgi_version)
    api: str = "vllm"
    tgi_version: str = "2.2.0"
    stream_interval: int = 1  # tokens per stream chunk (trtllm-serve's stream_interval)
    ignores_ignore_eos: bool = False  # accepts ignore_eos and ends at the natural end anyway
    first_token_delay_s: float = 0.0  # the launch's first request: its first token this much later
    first_token_log: str = "compile"  # meanwhile: "compile" logs a warm-up line, "none" nothing
    nodes: NodeSpec | None = None  # a server across nodes (nodes.py); None: one node


class Engine:
    """Shared state of the simulated engine: pacing, counters, fault triggers."""

    def __init__(self, opts: ServeOptions, model: CostModel, log: NcclLog, workers: Workers,
                 effects: Effects | None = None, paths: greedy.LaunchPaths | None = None):
        self.opts = opts
        self.model = model
        self.log = log
        self.workers = workers
        self.effects = effects or Effects()
        self.paths = paths or greedy.LaunchPaths(None, 0.0, 0.0, False)
        self.busy_s = 0.0  # seconds with at least one stream decoding (closed intervals)
        self.busy_since: float | None = None
        self.rng = random.Random(opts.seed)
        self.lock = threading.Lock()
        self.launch_factor = self._factor(opts.launch_noise)
        self.active = 0
        self.requests = 0
        self.counted = 0
        self.tokens_total = 0
        self.prompt_tokens_total = 0
        self.dead = False
        self.hung = threading.Event()
        self.stopping = threading.Event()
        self.compile_until: float | None = None  # perf_counter s: a first-request warm-up ends

    def first_token_wait(self) -> float:
        """Seconds a request's first token waits for the launch's first-request warm-up (a JIT
        compile or CUDA-graph capture on the first request: sglang #5031, TensorRT-LLM #9276):
        the first request starts it (logging it with ``first_token_log = "compile"``), every
        request until it ends waits for it."""
        delay = self.opts.first_token_delay_s
        if delay <= 0:
            return 0.0
        with self.lock:
            now = time.perf_counter()
            if self.compile_until is None:
                self.compile_until = now + delay
                if self.opts.first_token_log == "compile":
                    self.log.line(tgilog.warmup() if self.opts.api == "tgi" else vllmlog.text(
                        "INFO", "backends.py:215", f"Compiling a graph for dynamic shape takes {delay:.2f} s",
                        "EngineCore_DP0", os.getpid()))
            return max(0.0, self.compile_until - now)

    def _factor(self, sigma: float) -> float:
        """Multiplicative time noise: 1 + N(0, sigma), floored at 0.5."""
        return max(0.5, 1.0 + self.rng.gauss(0.0, sigma)) if sigma > 0 else 1.0

    def expected_tok_s(self) -> float:
        """Single-stream rate this launch delivers on average (tok/s)."""
        return self.model.breakdown(1).tok_s / self.launch_factor

    def new_request(self, prompt_tokens: int, stream: bool = True,
                    max_tokens: int = 16) -> tuple[int | None, float]:
        """Register a completion request: (its number among the requests the faults count, or
        None when it does not count; its speed factor). See faults.py for the counting rule."""
        with self.lock:
            self.requests += 1
            self.prompt_tokens_total += prompt_tokens
            number = None
            if self.opts.faults.counts(stream, max_tokens):
                self.counted += 1
                number = self.counted
            return number, self._factor(self.opts.noise)

    def engine_dead(self, req_no: int | None) -> bool:
        """healthy-then-500: the engine is dead from the fault's request on."""
        f = self.opts.faults
        if f.has("healthy-then-500") and req_no is not None and req_no >= f.target:
            self.dead = True
        return self.dead

    def step_s(self, factor: float, batch: int | None = None) -> float:
        """Seconds until the next token of a stream with noise ``factor``, at ``batch`` streams
        (default: those decoding now)."""
        try:
            ms = self.model.decode_step_ms(batch or max(1, self.active))
        except (CollectiveCrash, NcclInitError) as exc:
            self.crash(f"{exc}")
        return ms / 1000.0 * self.launch_factor * factor

    def prefill_s(self, prompt_tokens: int, factor: float) -> float:
        """Seconds from request to first token (logs the prefill's TUNING line)."""
        try:
            ms = self.model.prefill_ms(prompt_tokens)
        except (CollectiveCrash, NcclInitError) as exc:
            self.crash(f"{exc}")
        if self.log.debug.tuning:
            nbytes = self.model.prefill_bytes(prompt_tokens)
            cost = self.model.allreduce(nbytes)
            if cost.via == "nccl":
                msg = op_message(self.model.tune(), self.model.settings.version, nbytes,
                                 cost.nchannels)
                if msg is not None:
                    self.log.nccl(msg)
        return ms / 1000.0 * self.launch_factor * factor

    def corrupts(self, prompt_tokens: int) -> bool:
        """Whether this request's allreduces (prefill, decode) run on a corrupting protocol."""
        try:
            return (self.model.allreduce(self.model.prefill_bytes(prompt_tokens)).corrupt
                    or self.model.breakdown(1).allreduce.corrupt)
        except (CollectiveCrash, NcclInitError):
            return False

    @contextlib.contextmanager
    def decoding(self):
        """Count this stream as running while it decodes (sets the batch size and the load clock)."""
        with self.lock:
            self.active += 1
            if self.active == 1:
                self.busy_since = time.monotonic()
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1
                if self.active == 0 and self.busy_since is not None:
                    self.busy_s += time.monotonic() - self.busy_since
                    self.busy_since = None

    def load_s(self) -> float:
        """Seconds of load so far, in the simulated clock (wall seconds x the time scale)."""
        with self.lock:
            busy = self.busy_s + (time.monotonic() - self.busy_since if self.busy_since else 0.0)
        return busy * self.opts.faults.time_scale

    def _hang_under_load(self) -> None:
        """hang-after-load: stop every stream; the watchdog speaks ``watchdog_s`` later (both in
        the simulated clock)."""
        with self.lock:
            if self.hung.is_set():
                return
            self.hung.set()
            batch = max(1, self.active)
        self.log.sim("HANG", {"after_load_s": round(self.load_s(), 3), "batch": batch})
        threading.Thread(target=self._watchdog, args=(batch,), name="sim-watchdog", daemon=True).start()

    def _watchdog(self, batch: int) -> None:
        """PyTorch's watchdog line, once per rank (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
        ``watchdogHandler``: "[Rank N] Watchdog caught collective operation timeout: <work> ran for
        <ms> milliseconds before timing out."; the prefix is c10's log format; line 629 as a public torch
        log shows it, the number moves between torch versions)."""
        f = self.opts.faults
        if self.stopping.wait(f.watchdog_s / f.time_scale):
            return
        p = self.model.profile
        timeout_ms = int(f.watchdog_s * 1000)
        seq = self.tokens_total * p.allreduces_per_token + self.requests
        numel = p.hidden * batch
        for rank in range(p.tp):
            ns = time.time_ns()
            stamp = time.strftime("%m%d %H:%M:%S", time.localtime(ns / 1e9)) + f".{ns % 10**9:09d}"
            ran = timeout_ms + 1 + self.rng.randrange(90)
            self.log.line(f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught "
                          f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
                          f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_ms}) ran for {ran} "
                          "milliseconds before timing out.")

    def count_token(self) -> None:
        with self.lock:
            self.tokens_total += 1

    def checkpoint(self, req_no: int | None, sent: int) -> None:
        """Before sending token ``sent`` (0-based) of a request: play mid-stream faults.
        Blocks forever (until shutdown) once the engine hangs."""
        f = self.opts.faults
        hang = self.effects.hang_after_load_s
        if hang is not None and not self.hung.is_set() and self.load_s() >= hang:
            self._hang_under_load()
        if req_no is not None and req_no == f.target and sent == f.after_tokens:
            if f.has("crash-mid-stream"):
                self.crash("crash-mid-stream")
            if f.has("hang-mid-stream"):
                self.hung.set()  # a deadlocked collective prints nothing
        if self.hung.is_set():
            self.stopping.wait()
            raise ConnectionAbortedError("server stopping")

    def crash(self, reason: str) -> None:
        """Die like an engine whose NCCL call failed mid-request: log, stop workers, exit 1.
        NCCL keeps its last error even when NCCL_DEBUG prints nothing (src/debug.cc
        ``ncclLastError``); torch's NCCL error text carries it (``Last error:``)."""
        from .ncclenv import warn

        self.log.nccl(warn("Cuda failure 'an illegal memory access was encountered'",
                           "enqueue.cc:1672"))
        self.log.line("ERROR [core.py] EngineCore encountered a fatal error.")
        self.log.line("Traceback (most recent call last):")
        self.log.line('  File "vllm/v1/engine/core.py", line 701, in run_engine_core')
        self.log.line(f"RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO "
                      f"for details), NCCL version {self.opts.profile.nccl_version}")
        self.log.line("ncclUnhandledCudaError: Call to CUDA function failed.")
        self.log.line("Last error:")
        self.log.line("Cuda failure 'an illegal memory access was encountered'")
        self.workers.kill_now()
        _exit_line(self.log, f"code=1 reason={reason.split(':')[0]}")
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(1)


def _install_signals(stop: threading.Event, signalled: threading.Event | None = None) -> None:
    """SIGTERM/SIGINT set ``stop`` (the main thread does the teardown) and ``signalled``."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(*_) -> None:
        if signalled is not None:
            signalled.set()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def _lost_unasked(watched: Head | Member, signalled: threading.Event) -> bool:
    """A peer node went away before this process was told to stop: a group-wide SIGTERM reaches
    every node at once, so a loss within a moment of our own signal is the teardown's."""
    return watched.lost is not None and not signalled.wait(0.3)


def _not_joined(log, stop: threading.Event, error: str) -> int:
    """The exit of a node whose rendezvous did not complete: 0 when it was told to stop meanwhile,
    else 1 with ``error`` in vLLM's executor words."""
    if stop.is_set():
        _exit_line(log, "code=0")
        return 0
    log.line(f"ERROR [multiproc_executor.py] {error}")
    _exit_line(log, "code=1 reason=rendezvous")
    return 1


def _exit_line(log: NcclLog, text: str) -> None:
    """``SIM EXIT``, after what a normal exit writes out of NCCL's buffered output."""
    log.flush_nccl()
    log.sim("EXIT", text)


def _worker_report(environ: dict, version: str) -> EnvReport | None:
    """What a worker's NCCL reads from its environment (None: its init would fail)."""
    try:
        return read_env(environ, version)
    except NcclInitError:
        return None


def _without_effect(speed: CostModel, names: tuple, environ: dict, p: Profile) -> CostModel:
    """The cost model of ``environ`` without ``names`` (``--no-effect``): NCCL has read and echoed
    them, the speed is the launch's without them (``speed`` when that environment fails init)."""
    report = _worker_report(drop_vars(environ, names), p.nccl_version)
    return CostModel(p, report.settings, speed.plan) if report is not None else speed


def _start(opts: ServeOptions, p: Profile, log: NcclLog, debug: DebugConfig, environ: dict,
           plan: BackendPlan, comm_id: int | None = None):
    """Play the start: (model or None, workers, outcome, Ray log monitor or None, the model
    that sets the speed). Prints this process's rank's lines (and, on Ray, the workers' as Ray
    shows them); across nodes, this node's first rank is node rank x GPUs per node, and
    ``comm_id`` the head's."""
    try:
        report, init_error = read_env(environ, p.nccl_version), None
    except NcclInitError as exc:
        report, init_error = None, exc
    model = CostModel(p, report.settings, plan) if report is not None else None
    outcome = run_startup(p, report, model, init_error)
    comm_id = random.getrandbits(44) << 4 if comm_id is None else comm_id
    spec = opts.nodes if opts.nodes is not None and opts.nodes.nnodes > 1 else None
    nodes = spec.nnodes if spec else max(1, opts.ray_nodes) if opts.ray else 1
    rank0 = spec.node_rank * (p.gpus_per_node or 1) if spec else 0
    # On Ray the workers' NCCL reads another environment: theirs sets the lines and the speed.
    w_env, w_report, w_model = environ, report, model
    monitor = logs = None
    if opts.ray:
        w_env, w_report, w_model, monitor, logs = _ray_workers(opts, p, environ, log, nodes, plan)
    w_merged = load_conf_file(w_env)
    w_debug = DebugConfig(w_merged)
    host = host_name()
    payloads = []
    for r in range(1, opts.workers + 1):
        node = node_layout(p.tp, nodes, r)[0]
        r_host = host if node == 0 or spec else f"{host}-node{node}"
        lines = rank_lines(p, opts.model_name, w_debug, w_report, w_model, outcome, rank0 + r, comm_id,
                           host=r_host, nodes=nodes, plain_vllm=opts.ray)
        out_plan = output_plan(w_merged, w_debug, p.nccl_version, opts.stdout_buffering, r_host)
        payloads.append({"lines": lines, "nccl_output": out_plan})
    ignore = opts.faults.has("orphan-workers") or opts.faults.has("stuck-workers")
    workers = Workers(opts.workers, uuid.uuid4().hex[:12], ignore, environ, payloads,
                      environs=[w_env] * opts.workers if opts.ray else None, logs=logs)
    for kind, text in rank_lines(p, opts.model_name, debug, report, model, outcome, rank0, comm_id,
                                 pid=os.getpid(), tid=threading.get_native_id(), nodes=nodes,
                                 plain_vllm=opts.ray):
        if kind == NCCL:
            log.nccl_line(text)
        else:
            log.line(text)
    # vLLM is ready only once every rank is up: a worker that has not yet set its signals or
    # printed its NCCL lines is still starting.
    workers.wait_logged()
    if monitor is not None:
        monitor.started(workers.pids)
        for text in monitor.poll() + monitor.flush():  # the aggregation window ends with the start
            log.line(text)
    speed = w_model if opts.ray and opts.workers and w_model is not None else model
    return model, workers, outcome, monitor, speed


def _ray_workers(opts: ServeOptions, p: Profile, environ: dict, log: NcclLog, nodes: int,
                 plan: BackendPlan):
    """The Ray side of the start: (the workers' environment, what their NCCL reads, their cost
    model, the log monitor, their log files); logs what vLLM's executor logs."""
    start_env = raycluster.DEFAULT_START_ENV if opts.ray_start_env is None else opts.ray_start_env
    env = raycluster.worker_environ(environ, start_env)
    report = _worker_report(env, p.nccl_version)
    model = CostModel(p, report.settings, plan) if report is not None else None
    for entry in raycluster.executor_lines(environ):
        log.line(vllmlog.plain(*entry))
    session = tempfile.mkdtemp(prefix="sim-ray-session-")
    logs = [os.path.join(session, f"worker-{r}.out") for r in range(1, opts.workers + 1)]
    monitor = raycluster.RayLogMonitor(
        session, [(path, node_layout(p.tp, nodes, r)[0]) for r, path in enumerate(logs, 1)], environ)
    return env, report, model, monitor, logs


def _drain(log: NcclLog, monitor: raycluster.RayLogMonitor | None) -> None:
    """On Ray: what the workers wrote last (their buffers, written out at exit), then the
    folded lines; the worker files are removed."""
    if monitor is None:
        return
    for text in monitor.poll() + monitor.flush():
        log.line(text)
    monitor.remove_files()


#: Variables the untuned launch (the reduction order answers are compared with) does not set.
_TUNED_PREFIXES = ("NCCL_", "VLLM_ALLREDUCE_", "VLLM_USE_NCCL_SYMM_MEM", "CUDA_DEVICE_MAX_CONNECTIONS")


def untuned_model(p: Profile, environ: dict, missing: tuple = ()) -> CostModel:
    """The cost model of this server without the set: no NCCL_* or vLLM allreduce variables."""
    bare = {k: v for k, v in environ.items() if not k.startswith(_TUNED_PREFIXES)}
    return CostModel(p, read_env(bare, p.nccl_version).settings, plan_for(p, bare, missing))


def set_behaviour(p: Profile, faults: FaultPlan, environ: dict, model: CostModel,
                  missing: tuple = ()) -> tuple[CostModel, Effects, str | None]:
    """(the model with the set's speed, the set's effects, its reduction_key or None)."""
    try:
        custom = model.breakdown(1).allreduce.via == "custom"
    except (CollectiveCrash, NcclInitError):
        custom = False
    effects = faults.effects(environ, custom, parse_when_list([p.set_faults], "profile set_faults"))
    if effects.speed != 1.0:
        model = CostModel(p, model.settings, model.plan, speed=effects.speed)
    try:
        key = greedy.reduction_key(model, untuned_model(p, environ, missing))
    except (CollectiveCrash, NcclInitError):
        key = "unknown"
    return model, effects, key


def _set_behaviour(opts: ServeOptions, p: Profile, environ: dict, model: CostModel):
    model, effects, key = set_behaviour(p, opts.faults, environ, model, opts.missing)
    launch_rate = 0.0 if environ.get("VLLM_BATCH_INVARIANT") == "1" else p.launch_divergence_rate
    rng = random.Random(f"{opts.seed}-paths") if opts.seed is not None else random.Random()
    return model, effects, greedy.LaunchPaths(key, p.divergence_rate, launch_rate, effects.corrupt, rng)


def serve(opts: ServeOptions) -> int:
    """Run the simulated server until SIGTERM/SIGINT; returns the process exit status. With
    ``opts.nodes`` across several nodes: the head listens for the others first (nodes.py), a
    headless node plays its ranks without HTTP (``_serve_member``)."""
    spec = opts.nodes
    if spec is None or spec.nnodes <= 1:
        return _serve(opts)
    if spec.node_rank > 0:
        return _serve_member(opts, Member(spec))
    head = Head(spec)
    try:
        return _serve(opts, head)
    finally:
        head.close()


def _setup(opts: ServeOptions, p: Profile):
    """(environment, debug config, NCCL log) of a launch; prints ``SIM ENV``."""
    environ = drop_vars(opts.environ, opts.ignore_vars)
    map_stand_in(p.nccl_version)  # the NCCL a real server's processes map (libstub.py)
    merged = load_conf_file(environ)
    debug = DebugConfig(merged)
    sink = open_sink(output_plan(merged, debug, p.nccl_version, opts.stdout_buffering), os.getpid())
    log = NcclLog(debug=debug, version=p.nccl_version, sink=sink)
    log.sim("ENV", relevant_env(merged))
    return environ, debug, log


def _serve(opts: ServeOptions, head: Head | None = None) -> int:
    """The server of one node, or the head of several."""
    p = opts.profile
    if opts.ray:
        p = dataclasses.replace(p, vllm_version=raycluster.RAY_VLLM_VERSION)
    environ, debug, log = _setup(opts, p)
    if head is not None and (error := head.listen()) is not None:
        # torch's TCPStore, as vLLM's head reports a taken master port
        log.line(f"RuntimeError: The server socket has failed to listen on any local network address. "
                 f"port: {head.spec.master_port}, useIpv6: {int(':' in head.spec.master_addr)}, "
                 f"code: -{error.errno}, name: {error.strerror}")
        _exit_line(log, "code=1 reason=master-port")
        return 1
    if opts.ignore_vars:
        log.sim("IGNORED", sorted(set(opts.ignore_vars)))
    if opts.api == "tgi":  # TGI's launcher and router lines, no vLLM line (tgilog.py)
        for text in tgilog.start(opts.model_name, p.tp, opts.port, opts.tgi_version):
            log.line(text)
    elif opts.ray:  # vLLM 0.8's format: no process prefix
        log.line(vllmlog.plain("INFO", "api_server.py:1007", f"vLLM API server version {p.vllm_version}"))
        log.line(vllmlog.plain(*vllmlog.chunked_prefill(p)))
        log.line(vllmlog.plain(*vllmlog.engine_config(p, opts.model_name, "V0")))
    else:  # vLLM's V1 API server says its version first (vllm/entrypoints/openai/api_server.py, run_server)
        log.line(vllmlog.text("INFO", "api_server.py:1839", f"vLLM API server version {p.vllm_version}", "APIServer",
                              os.getpid()))
        log.line(vllmlog.text(*vllmlog.chunked_prefill(p), "APIServer", os.getpid()))
        log.line(vllmlog.text(*vllmlog.engine_config(p, opts.model_name), "EngineCore_DP0",
                              os.getpid()))
    try:  # vllm/envs.py reads each switch as bool(int(value)): a bad value stops the start
        plan = plan_for(p, environ, opts.missing)
    except ValueError as exc:
        log.line("Traceback (most recent call last):")
        log.line('  File "vllm/envs.py", in <lambda>')
        log.line(f"ValueError: {exc}")
        _exit_line(log, "code=1 reason=vllm-env")
        return 1
    stop, signalled = threading.Event(), threading.Event()
    _install_signals(stop, signalled)
    comm_id = None
    if head is not None:
        comm_id = head.gather(log.host, stop, rendezvous_timeout_s())
        if comm_id is None:
            return _not_joined(log, stop, f"Timed out waiting for {head.spec.nnodes - 1} node(s) to join at "
                                          f"{head.spec.where}; joined: {sorted(head.conns)}")
        log.sim("NODES", {"nnodes": head.spec.nnodes, "hosts": head.hosts, "master": head.spec.where})
        head.watch(lambda _rank: stop.set())
    model, workers, outcome, monitor, speed = _start(opts, p, log, debug, environ, plan, comm_id)
    if outcome.failure is not None:
        workers.wait_logged()
        for text in failure_lines(outcome):
            log.line(text)
        workers.terminate()
        _drain(log, monitor)
        _exit_line(log, f"code=1 reason=nccl-{outcome.failure[0]}")
        return 1
    assert model is not None and speed is not None
    model = _without_effect(speed, opts.no_effect, environ, p) if opts.no_effect else speed
    if opts.no_effect:
        log.sim("NO-EFFECT", sorted(set(opts.no_effect)))
    faults = opts.faults
    model, effects, paths = _set_behaviour(opts, p, environ, model)
    engine = Engine(opts, model, log, workers, effects, paths)
    bd = model.breakdown(1)
    cost = bd.allreduce
    log.sim("WORKERS", {"sim_id": workers.sim_id, "pids": workers.pids, "pgid": os.getpgrp()})
    log.sim("MODEL", {"profile": p.name, "model": opts.model_name, "tok_s": round(bd.tok_s, 3),
                      "launch_tok_s": round(engine.expected_tok_s(), 3),
                      "step_ms": round(bd.step_ms, 4), "compute_ms": round(bd.compute_ms, 4),
                      "allreduce_ms": round(bd.allreduce_ms, 4), "share": round(bd.share, 4),
                      "allreduce_us": round(cost.time_us, 3), "via": cost.via, "algo": cost.algo,
                      "proto": cost.proto, "nchannels": cost.nchannels,
                      "nthreads": cost.nthreads, "faults": sorted(faults.modes),
                      "vllm_version": p.vllm_version, "backends": list(model.plan.enabled),
                      "missing": sorted(opts.missing), "set_effects": effects.as_dict(),
                      "reduction_order": "untuned" if paths.set_key is None else "changed",
                      "divergence_rate": p.divergence_rate,
                      "launch_divergence_rate": 0.0 if not paths.launch_eps else p.launch_divergence_rate,
                      "time_scale": faults.time_scale,
                      **({"network": net_choice(p, model.settings.raw).name} if p.gpus_per_node else {})})

    httpd = None
    code = 0
    t_start = time.monotonic()
    if faults.has("crash-start"):
        if not stop.wait(opts.load_time_s / 2):
            log.line("Traceback (most recent call last):")
            log.line('  File "vllm/v1/worker/gpu_worker.py", line 214, in load_model')
            log.line("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
            workers.terminate()
            _drain(log, monitor)
            _exit_line(log, "code=1 reason=crash-start")
            return 1
    elif faults.has("hang-start"):
        while not stop.wait(0.5):
            pass
    elif stop.wait(opts.load_time_s):
        pass
    if not stop.is_set():
        try:
            cls = SimHTTPServer6 if ":" in opts.host else SimHTTPServer
            httpd = cls((opts.host, opts.port), Handler)
        except OSError as exc:
            log.line(f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
                     f"({opts.host!r}, {opts.port}): {exc.strerror}")
            workers.terminate()
            _drain(log, monitor)
            _exit_line(log, "code=1 reason=bind")
            return 1
        httpd.engine = engine
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                         name="sim-http", daemon=True).start()
        port = httpd.server_address[1]
        host = f"[{opts.host}]" if ":" in opts.host else opts.host
        log.line(tgilog.connected() if opts.api == "tgi" else
                 f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        log.sim("READY", f"tok_s={engine.expected_tok_s():.3f} model_tok_s={bd.tok_s:.3f} "
                         f"url=http://{host}:{port} port={port} profile={p.name} "
                         f"load_s={time.monotonic() - t_start:.2f}")
        while not stop.wait(0.2):
            dead = workers.dead()
            # A group-wide SIGTERM reaches the workers too: give our own handler a moment.
            if dead and not workers.stopping and not stop.wait(0.3):
                log.line(f"ERROR [multiproc_executor.py] Worker proc VllmWorker-{dead[0]} died "
                         "unexpectedly, shutting down executor.")
                code = 1
                break
    lost = head.lost if head is not None and _lost_unasked(head, signalled) else None
    if head is not None and lost is not None:
        log.line(f"ERROR [multiproc_executor.py] Worker proc VllmWorker-{lost * p.gpus_per_node} "
                 f"died unexpectedly, shutting down executor. (node {lost}: "
                 f"{head.hosts.get(lost)}, its connection to {head.spec.where} closed)")
        code = 1
    return _teardown(log, httpd, workers, engine, faults, code, monitor)


def _serve_member(opts: ServeOptions, member: Member) -> int:
    """A headless node: join the head, play this node's ranks, wait; exit 1 when the head goes
    away, 0 on SIGTERM/SIGINT."""
    p = opts.profile
    environ, debug, log = _setup(opts, p)
    spec = member.spec
    stop, signalled = threading.Event(), threading.Event()
    _install_signals(stop, signalled)
    try:
        plan = plan_for(p, environ, opts.missing)
    except ValueError as exc:
        log.line(f"ValueError: {exc}")
        _exit_line(log, "code=1 reason=vllm-env")
        return 1
    answer = member.join(log.host, stop, rendezvous_timeout_s())
    if answer is None:
        return _not_joined(log, stop, f"Node {spec.node_rank} could not join the head at {spec.where}: no answer")
    member.watch(lambda _rank: stop.set())
    _model, workers, outcome, monitor, _speed = _start(opts, p, log, debug, environ, plan,
                                                       int(answer.get("comm_id", 0)))
    code = 0
    if outcome.failure is not None:
        for text in failure_lines(outcome):
            log.line(text)
        stop.set()
        code = 1
    else:
        log.sim("NODE", {"node_rank": spec.node_rank, "nnodes": spec.nnodes, "host": log.host,
                         "ranks": _node_ranks(p, spec), "master": spec.where,
                         "pids": [os.getpid(), *workers.pids], "pgid": os.getpgrp()})
    while not stop.wait(0.2):
        if workers.dead() and not workers.stopping and not stop.wait(0.3):
            log.line(f"ERROR [multiproc_executor.py] Worker proc VllmWorker-{workers.dead()[0]} died "
                     "unexpectedly, shutting down executor.")
            code = 1
            break
    if _lost_unasked(member, signalled):
        log.line(f"ERROR [multiproc_executor.py] Lost the head node: its connection at {spec.where} "
                 "closed, shutting down executor.")
        code = 1
    member.close()
    workers.terminate()
    _drain(log, monitor)
    _exit_line(log, f"code={code}")
    return code


def _node_ranks(p: Profile, spec: NodeSpec) -> list[int]:
    """The global ranks node ``spec.node_rank`` runs (blocks of GPUs per node)."""
    per = p.gpus_per_node or p.tp
    return list(range(spec.node_rank * per, (spec.node_rank + 1) * per))


def _teardown(log: NcclLog, httpd, workers: Workers, engine: Engine, faults: FaultPlan,
              code: int, monitor: raycluster.RayLogMonitor | None = None) -> int:
    """Close the port, play slow-teardown / orphan-workers, stop workers (stuck ones take the
    SIGKILL after the grace), return ``code``."""
    log.line("INFO:     Shutting down")
    engine.stopping.set()
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()
    if faults.has("slow-teardown"):
        time.sleep(faults.teardown_s)
    workers.terminate(wait=not faults.has("orphan-workers"))
    _drain(log, monitor)
    _exit_line(log, f"code={code}")
    return code
