"""The OpenAI-compatible HTTP surface of the simulated server: vLLM's endpoints and formats, or
with ``api = "tgi"`` text-generation-inference's (``/info``; no ``GET /v1/models`` before 2.3;
any model name; no usage chunk; the role in every delta). ``stream_interval`` sends that many
tokens per chunk (trtllm-serve's ``stream_interval``); ``ignores_ignore_eos`` ends an answer at
its natural end whatever ``ignore_eos`` says (sglang PR #5264, TGI #1544).

Logprobs, in vLLM's shapes (vllm/entrypoints/openai/protocol.py ``ChatCompletionLogProb``,
``ChatCompletionLogProbsContent``, ``CompletionLogProbs``; serving_chat.py / serving_completion.py
``_create_completion_logprobs``, read at v0.11.0), values from greedy.py:

* chat, ``"logprobs": true`` (``"top_logprobs": N``, 0-20, needs logprobs): ``choices[0].logprobs =
  {"content": [{"token", "logprob", "bytes", "top_logprobs": [N x {"token", "logprob", "bytes"}]}]}``,
  one entry per generated token (reasoning tokens too), the chosen token first among the top;
* completions, ``"logprobs": N`` (0-20): ``choices[0].logprobs = {"tokens", "token_logprobs",
  "top_logprobs": [{token: logprob} with max(N, 1) entries], "text_offset"}``, offsets counted from
  the start of the generated text;
* streamed, every chunk carries the logprobs of its own tokens (completions' ``text_offset`` goes on
  across chunks); without logprobs the field is ``null``, as before.

``temperature``, ``top_p`` and ``seed`` are accepted and change nothing: every answer is the greedy
one (greedy.py)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from . import textgen, tgilog

if TYPE_CHECKING:
    from .server import Engine

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI / vLLM default for /v1/completions
MAX_LOGPROBS = 20  # vLLM's default --max-logprobs


class SimHTTPServer(ThreadingHTTPServer):
    """Threaded HTTP server carrying the simulated ``engine`` its handlers use."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    engine: Engine


class SimHTTPServer6(SimHTTPServer):
    """The same on an IPv6 address."""

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


def _logprobs_option(body: dict, chat: bool) -> int | None:
    """How many top logprobs the request wants per token (None: no logprobs), checked as vLLM's
    request models do (protocol.py ``check_logprobs``)."""
    lp, top = body.get("logprobs"), body.get("top_logprobs") if chat else None
    if chat:
        if lp is not None and not isinstance(lp, bool):
            raise _BadRequest(400, f"'logprobs' must be true or false on chat completions, got {lp!r}")
        if top is not None:
            if not lp:
                raise _BadRequest(400, "when using `top_logprobs`, `logprobs` must be set to true.")
            if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_LOGPROBS:
                raise _BadRequest(400, f"`top_logprobs` must be an integer within 0-{MAX_LOGPROBS}, "
                                       f"got {top!r}")
        return (top or 0) if lp else None
    if lp is None:
        return None
    if isinstance(lp, bool) or not isinstance(lp, int) or not 0 <= lp <= MAX_LOGPROBS:
        raise _BadRequest(400, f"'logprobs' must be an integer within 0-{MAX_LOGPROBS} on "
                               f"completions, got {lp!r}")
    return lp


class Handler(BaseHTTPRequestHandler):
    """One HTTP connection (HTTP/1.1, keep-alive)."""

    protocol_version = "HTTP/1.1"
    server_version = "tuner-sim"
    sys_version = ""
    server: SimHTTPServer

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
        elif path == "/info" and eng.opts.api == "tgi":
            self._send_json(200, tgilog.info(eng.opts.model_name, eng.opts.tgi_version,
                                             eng.opts.profile.max_model_len))
        elif path == "/v1/models" and eng.opts.api == "tgi" and not tgilog.lists_models(eng.opts.tgi_version):
            self.send_response(404)  # before TGI 2.3: axum's default, an empty body
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
        if model is not None and model != opts.model_name and opts.api != "tgi":  # TGI serves any name
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
        stream_opts = (body.get("stream_options") or {}) if opts.api != "tgi" else {}  # TGI: no usage chunk
        logprobs = _logprobs_option(body, chat)
        wrong = opts.faults.has("wrong-output") or eng.corrupts(prompt_tokens)
        tokens, finish = textgen.plan_tokens(
            question, max_tokens=max_tokens,
            ignore_eos=bool(body.get("ignore_eos", False)) and not opts.ignores_ignore_eos,
            reasoning_tokens=reasoning, wrong=wrong)
        tokens, answer = eng.paths.answer(question, tokens, min(reasoning, len(tokens)))
        return {"chat": chat, "stream": bool(body.get("stream", False)),
                "usage": isinstance(stream_opts, dict) and bool(stream_opts.get("include_usage")),
                "prompt_tokens": prompt_tokens, "tokens": tokens, "finish": finish,
                "max_tokens": max_tokens, "logprobs": logprobs, "answer": answer}

    @staticmethod
    def _logprobs(req: dict, first: int, last: int, offset: int = 0):
        """The logprobs field for tokens ``first``..``last - 1`` (None when not asked for), and
        the completions text offset after them."""
        n = req["logprobs"]
        if n is None:
            return None, offset
        ans = req["answer"]
        if req["chat"]:
            content = []
            for i in range(first, last):
                top = ans.top(i, max(1, n))
                content.append({"token": top[0][0], "logprob": top[0][1],
                                "bytes": list(top[0][0].encode()),
                                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                                 for t, lp in top[:n]]})
            return {"content": content}, offset
        out: dict = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
        for i in range(first, last):
            top = ans.top(i, max(1, n))
            out["tokens"].append(top[0][0])
            out["token_logprobs"].append(top[0][1])
            out["top_logprobs"].append(dict(top[:max(1, n)]))
            out["text_offset"].append(offset)
            offset += len(top[0][0])
        return out, offset

    def _paced(self, req: dict, req_no: int | None, factor: float):
        """Yield (index, kind, text) at each token's due time (absolute schedule). With
        ``log_schedule``, ``SIM SCHEDULE {"due": [...], "batch": [...]}`` follows the stream: each
        token's due time (``time.perf_counter()`` s, the machine's monotonic clock; none is sent
        before it) and the batch whose decode step led to it (0 for the first token: prefill)."""
        eng = self.server.engine
        t_due = getattr(self, "_t_arrival", time.perf_counter()) + eng.prefill_s(req["prompt_tokens"], factor)
        due: list[float] = []
        batches: list[int] = []
        t_due += eng.first_token_wait()
        with eng.decoding():
            for i, (kind, text) in enumerate(req["tokens"]):
                batch = 0
                if i:
                    batch = max(1, eng.active)
                    t_due += eng.step_s(factor, batch)
                due.append(t_due)
                batches.append(batch)
                left = t_due - time.perf_counter()
                if left > 0:
                    time.sleep(left)
                eng.checkpoint(req_no, i)
                eng.count_token()
                yield i, kind, text
        if eng.opts.log_schedule:
            eng.log.sim("SCHEDULE", {"due": due, "batch": batches})

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
        tgi = eng.opts.api == "tgi"
        if tgi:
            base["system_fingerprint"] = f"{eng.opts.tgi_version}-sha-db7e043"
        if chat and not tgi:  # vLLM sends the role first, before any token exists
            self._sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                            "logprobs": None, "finish_reason": None}]})
        n = len(req["tokens"])
        every = max(1, eng.opts.stream_interval)
        held: list[str] = []  # tokens of the chunk being filled (never mixing kinds)
        offset = 0  # completions' text_offset across chunks
        for i, kind, text in self._paced(req, req_no, factor):
            held.append(text)
            nxt = req["tokens"][i + 1][0] if i + 1 < n else None
            if i < n - 1 and len(held) < every and nxt == kind:
                continue
            fin = req["finish"] if i == n - 1 else None
            lp, offset = self._logprobs(req, i + 1 - len(held), i + 1, offset)
            text, held = "".join(held), []
            if chat:
                delta = self._delta(kind, text)
                if tgi:  # TGI puts the role in every delta
                    delta = {"role": "assistant", **delta}
                choice = {"index": 0, "delta": delta, "logprobs": lp, "finish_reason": fin}
            else:
                choice = {"index": 0, "text": text, "logprobs": lp, "finish_reason": fin}
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
        lp = self._logprobs(req, 0, n)[0]
        if req["chat"]:
            msg = {"role": "assistant", "content": "".join(content)}
            if reasoning:
                field = eng.opts.reasoning_field
                for f in (("reasoning", "reasoning_content") if field == "both" else (field,)):
                    msg[f] = "".join(reasoning)
            out = {"id": "chatcmpl-" + rid, "object": "chat.completion", "created": int(time.time()),
                   "model": eng.opts.model_name, "choices": [{
                       "index": 0, "message": msg, "logprobs": lp,
                       "finish_reason": req["finish"]}], "usage": usage}
        else:
            out = {"id": "cmpl-" + rid, "object": "text_completion", "created": int(time.time()),
                   "model": eng.opts.model_name, "choices": [{
                       "index": 0, "text": "".join(content), "logprobs": lp,
                       "finish_reason": req["finish"]}], "usage": usage}
        self._send_json(200, out)


# -- orchestration -------------------------------------------------------------------------------
