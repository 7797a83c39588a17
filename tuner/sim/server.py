"""OpenAI-compatible HTTP server standing in for a TP-N vLLM server.

Life cycle of ``serve(opts)``:

1. drop the ``ignore_vars`` from the environment (a server that overwrites them, or Ray workers
   that never receive them), print ``SIM ENV {...}`` and vLLM's start lines;
2. play the start (startup.py): read the NCCL environment as NCCL would, spawn N-1 worker
   processes that print their own rank's lines, run the start-up collectives; a failure there
   ends the process (exit 1) the way vLLM does, with NCCL's WARN lines when NCCL_DEBUG asks;
3. "load the model" for the load time WITHOUT binding the port (connections are refused, as
   with vLLM), then bind, print ``SIM READY tok_s=<rate> ...`` and serve until SIGTERM/SIGINT;
   then close the port, stop the workers (SIGTERM, then SIGKILL after 5 s) and exit 0. If a
   worker dies on its own the server logs an error and exits 1 (EngineCore-died behaviour).

Endpoints: ``GET /health`` (200, empty body), ``GET /v1/models``, ``GET /metrics`` (a few vLLM
Prometheus counters), ``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming (SSE
over chunked transfer encoding, one token per chunk, role-only first chunk for chat, usage chunk
when ``stream_options.include_usage``) or not. Token i of a request is due at
``t0 + prefill + i * step`` (absolute schedule, so the average rate holds at thousands of tok/s),
where step is the cost model's decode step for the streams running at that moment, times a
per-launch and a per-request noise factor. With NCCL_DEBUG=INFO and TUNING in
NCCL_DEBUG_SUBSYS, each processed prompt logs rank 0's per-operation line for its prefill
allreduce. A request whose allreduces run on a protocol NCCL would not have enabled (LL128
forced on PCIe) answers with corrupted text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import textgen, vllmlog
from .costmodel import CollectiveCrash, CostModel
from .faults import FaultPlan
from .ncclenv import NcclInitError, drop_vars, load_conf_file, read_env, relevant_env
from .nccllog import DebugConfig, NcclLog, op_message
from .profiles import Profile
from .startup import failure_lines, rank_lines, run_startup

WORKER_STOP_GRACE_S = 5.0  # SIGTERM -> SIGKILL delay for workers at teardown
WORKER_LOG_WAIT_S = 3.0  # how long a failing start waits for the workers to print their lines
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI / vLLM default for /v1/completions


@dataclasses.dataclass
class ServeOptions:
    """Everything ``serve`` needs. Times in seconds, noise as fractions (1 sigma);
    ``ignore_vars`` are dropped from ``environ`` before NCCL or the workers see it."""

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


class Engine:
    """Shared state of the simulated engine: pacing, counters, fault triggers."""

    def __init__(self, opts: ServeOptions, model: CostModel, log: NcclLog, workers: Workers):
        self.opts = opts
        self.model = model
        self.log = log
        self.workers = workers
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

    def step_s(self, factor: float) -> float:
        """Seconds until the next token of a stream with noise ``factor``, at current batch."""
        try:
            ms = self.model.decode_step_ms(max(1, self.active))
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
        """Count this stream as running while it decodes (sets the batch size)."""
        with self.lock:
            self.active += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1

    def count_token(self) -> None:
        with self.lock:
            self.tokens_total += 1

    def checkpoint(self, req_no: int | None, sent: int) -> None:
        """Before sending token ``sent`` (0-based) of a request: play mid-stream faults.
        Blocks forever (until shutdown) once the engine hangs."""
        f = self.opts.faults
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
        self.log.sim("EXIT", f"code=1 reason={reason.split(':')[0]}")
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(1)


class Workers:
    """The N-1 simulated TP worker processes (worker.py), started in the server's group; each
    gets its rank's log lines on stdin and acknowledges on stdout once it printed them."""

    def __init__(self, count: int, sim_id: str, ignore_sigterm: bool, environ: dict,
                 lines: list[list[str]] | None = None):
        self.sim_id = sim_id
        self.procs: list[subprocess.Popen] = []
        self.stopping = False
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
        for rank in range(1, count + 1):
            argv = [sys.executable, "-S", script, "--sim-worker", "--sim-id", sim_id,
                    "--rank", str(rank), "--log-stdin"]
            if ignore_sigterm:
                argv.append("--ignore-sigterm")
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=environ, close_fds=True)
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                payload = (lines[rank - 1] if lines and rank - 1 < len(lines) else [])
                proc.stdin.write(json.dumps(payload).encode())
                proc.stdin.close()
            self.procs.append(proc)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def wait_logged(self, timeout: float = WORKER_LOG_WAIT_S) -> None:
        """Wait until every worker printed its lines (its acknowledgement byte or its exit)."""
        deadline = time.monotonic() + timeout
        for p in self.procs:
            if p.stdout is None:
                continue
            left = deadline - time.monotonic()
            if left > 0:
                with contextlib.suppress(OSError, ValueError):
                    select.select([p.stdout], [], [], left)

    def dead(self) -> list[int]:
        """Ranks of workers that exited on their own."""
        return [i + 1 for i, p in enumerate(self.procs) if p.poll() is not None]

    def terminate(self, wait: bool = True) -> None:
        """SIGTERM every worker; with ``wait``, SIGKILL those still alive after the grace."""
        self.stopping = True
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        if not wait:
            return
        deadline = time.monotonic() + WORKER_STOP_GRACE_S
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                p.wait()

    def kill_now(self) -> None:
        """SIGKILL every worker (crash path: no time for manners)."""
        self.stopping = True
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.wait(timeout=2)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    engine: Engine


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _text_of(content) -> str:
    """Text of an OpenAI message content: a string or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class Handler(BaseHTTPRequestHandler):
    """One HTTP connection (HTTP/1.1, keep-alive)."""

    protocol_version = "HTTP/1.1"
    server_version = "tuner-sim"
    sys_version = ""
    server: _HTTPServer

    def setup(self):
        super().setup()
        # One small write per token: Nagle + delayed ACK would add ~40 ms stalls.
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):  # uvicorn-style access log on stderr
        self.server.engine.log.line(f"INFO:     {self.client_address[0]}:{self.client_address[1]}"
                                    f" - {fmt % args}")

    def log_request(self, code="-", size="-"):
        if isinstance(code, int) or str(code).isdigit():
            self.log_message('"%s" %s', self.requestline, str(code))

    # -- helpers ---------------------------------------------------------------------------
    def _send_json(self, status: int, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_error_json(self, status: int, message: str, kind: str) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None,
                                           "code": status}})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _sse(self, obj) -> None:
        self._chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    # -- GET ---------------------------------------------------------------------------------
    def do_GET(self):
        eng = self.server.engine
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{
                "id": eng.opts.model_name, "object": "model", "created": int(time.time()),
                "owned_by": "tuner-sim", "max_model_len": eng.opts.profile.max_model_len}]})
        elif path == "/metrics":
            name = eng.opts.model_name
            body = (f'vllm:num_requests_running{{model_name="{name}"}} {eng.active}\n'
                    f'vllm:generation_tokens_total{{model_name="{name}"}} {eng.tokens_total}\n'
                    f'vllm:prompt_tokens_total{{model_name="{name}"}} '
                    f'{eng.prompt_tokens_total}\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._send_error_json(404, f"Not Found: {path}", "NotFoundError")

    # -- POST --------------------------------------------------------------------------------
    def do_POST(self):
        self._t_arrival = time.perf_counter()  # the schedule starts when the request arrived
        path = self.path.split("?", 1)[0]
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send_error_json(404, f"Not Found: {path}", "NotFoundError")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                raise _BadRequest(400, "request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise _BadRequest(400, "request body must be a JSON object")
            req = self._parse(body, chat=path == "/v1/chat/completions")
        except _BadRequest as exc:
            self._send_error_json(exc.status, exc.message, exc.kind)
            return
        eng = self.server.engine
        req_no, factor = eng.new_request(req["prompt_tokens"], req["stream"], req["max_tokens"])
        if eng.engine_dead(req_no):
            eng.log.line("ERROR [serving_chat.py] EngineDeadError: EngineCore encountered an issue."
                         " See stack trace (above) for the root cause.")
            self._send_json(500, {"error": "EngineCore encountered an issue"})
            return
        try:
            if req["stream"]:
                self._stream(req, req_no, factor)
            else:
                self._complete(req, req_no, factor)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _parse(self, body: dict, chat: bool) -> dict:
        """Validate an OpenAI request; returns the fields the generator needs."""
        eng = self.server.engine
        opts = eng.opts
        model = body.get("model")
        if model is not None and model != opts.model_name:
            raise _BadRequest(404, f"The model `{model}` does not exist.", "NotFoundError")
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
                raise _BadRequest(400, "'messages' must be a non-empty list of message objects")
            texts = [_text_of(m.get("content")) for m in msgs]
            users = [_text_of(m.get("content")) for m in msgs if m.get("role") == "user"]
            question = users[-1] if users else texts[-1]
            prompt_text = "\n".join(texts)
            prompt_tokens = textgen.count_prompt_tokens(prompt_text) + 3 * len(msgs)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                question, prompt_tokens = "", len(prompt)
            elif isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
                question = prompt[0]
                prompt_tokens = textgen.count_prompt_tokens(question)
            elif isinstance(prompt, str):
                question, prompt_tokens = prompt, textgen.count_prompt_tokens(prompt)
            else:
                raise _BadRequest(400, "'prompt' must be a string, a list of strings or token ids")
        max_tokens = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        limit = opts.profile.max_model_len
        if max_tokens is None:
            max_tokens = (limit - prompt_tokens) if chat else DEFAULT_COMPLETION_MAX_TOKENS
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _BadRequest(400, f"max_tokens must be a positive integer, got {max_tokens!r}")
        if prompt_tokens + max_tokens > limit:
            raise _BadRequest(400, f"This model's maximum context length is {limit} tokens. "
                                   f"However, you requested {prompt_tokens + max_tokens} tokens "
                                   f"({prompt_tokens} in the messages, {max_tokens} in the "
                                   "completion).")
        reasoning = opts.reasoning_tokens if chat else 0
        if chat:
            kwargs = body.get("chat_template_kwargs") or {}
            if isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False:
                reasoning = 0
            if isinstance(body.get("sim_reasoning_tokens"), int):
                reasoning = max(0, body["sim_reasoning_tokens"])
        stream_opts = body.get("stream_options") or {}
        wrong = opts.faults.has("wrong-output") or eng.corrupts(prompt_tokens)
        tokens, finish = textgen.plan_tokens(
            question, max_tokens=max_tokens, ignore_eos=bool(body.get("ignore_eos", False)),
            reasoning_tokens=reasoning, wrong=wrong)
        return {"chat": chat, "stream": bool(body.get("stream", False)),
                "usage": isinstance(stream_opts, dict) and bool(stream_opts.get("include_usage")),
                "prompt_tokens": prompt_tokens, "tokens": tokens, "finish": finish,
                "max_tokens": max_tokens}

    def _paced(self, req: dict, req_no: int | None, factor: float):
        """Yield (index, kind, text) at each token's due time (absolute schedule)."""
        eng = self.server.engine
        t_due = getattr(self, "_t_arrival", time.perf_counter()) + eng.prefill_s(req["prompt_tokens"], factor)
        with eng.decoding():
            for i, (kind, text) in enumerate(req["tokens"]):
                if i:
                    t_due += eng.step_s(factor)
                left = t_due - time.perf_counter()
                if left > 0:
                    time.sleep(left)
                eng.checkpoint(req_no, i)
                eng.count_token()
                yield i, kind, text

    def _delta(self, kind: str, text: str) -> dict:
        field = self.server.engine.opts.reasoning_field
        if kind == "content":
            return {"content": text}
        if field == "both":
            return {"reasoning": text, "reasoning_content": text}
        return {field: text}

    def _stream(self, req: dict, req_no: int | None, factor: float) -> None:
        eng = self.server.engine
        chat = req["chat"]
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        base = {"id": rid, "object": obj, "created": created, "model": eng.opts.model_name}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if chat:  # vLLM sends the role first, before any token exists
            self._sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                            "logprobs": None, "finish_reason": None}]})
        n = len(req["tokens"])
        for i, kind, text in self._paced(req, req_no, factor):
            fin = req["finish"] if i == n - 1 else None
            if chat:
                choice = {"index": 0, "delta": self._delta(kind, text), "logprobs": None,
                          "finish_reason": fin}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": fin}
            self._sse({**base, "choices": [choice]})
        if req["usage"]:
            self._sse({**base, "choices": [], "usage": {
                "prompt_tokens": req["prompt_tokens"], "completion_tokens": n,
                "total_tokens": req["prompt_tokens"] + n}})
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _complete(self, req: dict, req_no: int | None, factor: float) -> None:
        eng = self.server.engine
        content: list[str] = []
        reasoning: list[str] = []
        for _, kind, text in self._paced(req, req_no, factor):
            (content if kind == "content" else reasoning).append(text)
        n = len(req["tokens"])
        usage = {"prompt_tokens": req["prompt_tokens"], "completion_tokens": n,
                 "total_tokens": req["prompt_tokens"] + n}
        rid = uuid.uuid4().hex
        if req["chat"]:
            msg = {"role": "assistant", "content": "".join(content)}
            if reasoning:
                field = eng.opts.reasoning_field
                for f in (("reasoning", "reasoning_content") if field == "both" else (field,)):
                    msg[f] = "".join(reasoning)
            out = {"id": "chatcmpl-" + rid, "object": "chat.completion", "created": int(time.time()),
                   "model": eng.opts.model_name, "choices": [{
                       "index": 0, "message": msg, "logprobs": None,
                       "finish_reason": req["finish"]}], "usage": usage}
        else:
            out = {"id": "cmpl-" + rid, "object": "text_completion", "created": int(time.time()),
                   "model": eng.opts.model_name, "choices": [{
                       "index": 0, "text": "".join(content), "logprobs": None,
                       "finish_reason": req["finish"]}], "usage": usage}
        self._send_json(200, out)


# -- orchestration -------------------------------------------------------------------------------

def _install_signals(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set ``stop`` (the main thread does the teardown)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


def _start(opts: ServeOptions, log: NcclLog, debug: DebugConfig, environ: dict):
    """Play the start: (model or None, workers, outcome). Prints rank 0's lines."""
    p = opts.profile
    try:
        report, init_error = read_env(environ, p.nccl_version), None
    except NcclInitError as exc:
        report, init_error = None, exc
    model = CostModel(p, report.settings) if report is not None else None
    outcome = run_startup(p, report, model, init_error)
    comm_id = random.getrandbits(44) << 4
    lines = [rank_lines(p, opts.model_name, debug, report, model, outcome, r, comm_id)
             for r in range(1, opts.workers + 1)]
    workers = Workers(opts.workers, uuid.uuid4().hex[:12], opts.faults.has("orphan-workers"),
                      environ, lines)
    for text in rank_lines(p, opts.model_name, debug, report, model, outcome, 0, comm_id,
                           pid=os.getpid(), tid=threading.get_native_id()):
        log.line(text)
    return model, workers, outcome


def serve(opts: ServeOptions) -> int:
    """Run the simulated server until SIGTERM/SIGINT; returns the process exit status."""
    p = opts.profile
    environ = drop_vars(opts.environ, opts.ignore_vars)
    merged = load_conf_file(environ)
    debug = DebugConfig(merged)
    log = NcclLog(debug=debug, version=p.nccl_version)
    log.sim("ENV", relevant_env(merged))
    if opts.ignore_vars:
        log.sim("IGNORED", sorted(set(opts.ignore_vars)))
    log.line(vllmlog.text(*vllmlog.chunked_prefill(p), "APIServer", os.getpid()))
    log.line(vllmlog.text(*vllmlog.engine_config(p, opts.model_name), "EngineCore_DP0",
                          os.getpid()))
    stop = threading.Event()
    _install_signals(stop)
    model, workers, outcome = _start(opts, log, debug, environ)
    if outcome.failure is not None:
        workers.wait_logged()
        for text in failure_lines(outcome):
            log.line(text)
        workers.terminate()
        log.sim("EXIT", f"code=1 reason=nccl-{outcome.failure[0]}")
        return 1
    assert model is not None
    faults = opts.faults
    engine = Engine(opts, model, log, workers)
    bd = model.breakdown(1)
    cost = bd.allreduce
    log.sim("WORKERS", {"sim_id": workers.sim_id, "pids": workers.pids, "pgid": os.getpgrp()})
    log.sim("MODEL", {"profile": p.name, "model": opts.model_name, "tok_s": round(bd.tok_s, 3),
                      "launch_tok_s": round(engine.expected_tok_s(), 3),
                      "step_ms": round(bd.step_ms, 4), "compute_ms": round(bd.compute_ms, 4),
                      "allreduce_ms": round(bd.allreduce_ms, 4), "share": round(bd.share, 4),
                      "allreduce_us": round(cost.time_us, 3), "via": cost.via, "algo": cost.algo,
                      "proto": cost.proto, "nchannels": cost.nchannels,
                      "nthreads": cost.nthreads, "faults": sorted(faults.modes)})

    httpd = None
    code = 0
    t_start = time.monotonic()
    if faults.has("crash-start"):
        if not stop.wait(opts.load_time_s / 2):
            log.line("Traceback (most recent call last):")
            log.line('  File "vllm/v1/worker/gpu_worker.py", line 214, in load_model')
            log.line("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
            workers.terminate()
            log.sim("EXIT", "code=1 reason=crash-start")
            return 1
    elif faults.has("hang-start"):
        while not stop.wait(0.5):
            pass
    elif stop.wait(opts.load_time_s):
        pass
    if not stop.is_set():
        try:
            cls = _HTTPServer6 if ":" in opts.host else _HTTPServer
            httpd = cls((opts.host, opts.port), Handler)
        except OSError as exc:
            log.line(f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
                     f"({opts.host!r}, {opts.port}): {exc.strerror}")
            workers.terminate()
            log.sim("EXIT", "code=1 reason=bind")
            return 1
        httpd.engine = engine
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                         name="sim-http", daemon=True).start()
        port = httpd.server_address[1]
        host = f"[{opts.host}]" if ":" in opts.host else opts.host
        log.line(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
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
    return _teardown(log, httpd, workers, engine, faults, code)


def _teardown(log: NcclLog, httpd, workers: Workers, engine: Engine, faults: FaultPlan,
              code: int) -> int:
    """Close the port, play slow-teardown / orphan-workers, stop workers, return ``code``."""
    log.line("INFO:     Shutting down")
    engine.stopping.set()
    if httpd is not None:
        httpd.shutdown()
        httpd.server_close()
    if faults.has("slow-teardown"):
        time.sleep(faults.teardown_s)
    workers.terminate(wait=not faults.has("orphan-workers"))
    log.sim("EXIT", f"code={code}")
    return code
