#!/usr/bin/env python3
"""Reference OpenAI-compatible streaming server with exactly known pacing (stdlib only).

Independent of ``tuner``: it must stay importable and runnable without the package, so the
probe and the bench are checked against something they share no code with.

Run as a process::

    python tests/refserver.py --port P --rate TOK_S [--ttft S] [--reasoning-tokens K]
        [--reasoning-field reasoning|reasoning_content] [--no-usage] [--chunk-tokens N]
        [--model M] [--shared-capacity] [--stall-after K] [--drop-after K] [--fail-status CODE]

It prints ``READY http://127.0.0.1:PORT`` on stdout once it listens (``--port 0`` picks a free
port).  Or in-process: ``server, base_url = start_in_thread(port=0, rate=1000.0, ttft=0.05)``;
``server.shutdown(); server.server_close()`` stops it (``stop(server)`` does both).

Endpoints: ``GET /health`` (200, empty body), ``GET /v1/models``,
``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming (SSE, chunked transfer
encoding) and non-streaming.

Pacing of a streamed request of N = max_tokens tokens (the server always generates exactly
max_tokens tokens when ``ignore_eos`` is true or the prompt has no canned answer):

* t0 = the moment the request body has been read (perf_counter).  A role-only chunk
  (``delta: {"role": "assistant"}``) is sent at once, as vLLM does; it carries no token.
* Token i (0-based) is due at ``t0 + ttft + i / rate``.  Scheduling is absolute (sleep until
  the due time), so jitter never accumulates.  With ``--chunk-tokens n`` tokens are grouped n
  to a chunk and a chunk is sent when its last token is due; chunks never mix reasoning and
  content.
* The first K = ``--reasoning-tokens`` tokens are reasoning deltas (``delta.reasoning`` by
  default, ``delta.reasoning_content`` with ``--reasoning-field reasoning_content``); the rest
  are ``delta.content``.  All N count in ``usage.completion_tokens``.
* The last token chunk carries ``finish_reason``; then (unless ``--no-usage``) a usage-only
  chunk with ``choices: []``; then ``data: [DONE]``.

So, for one stream, the last token leaves at ``ttft + (N - 1) / rate`` and the true
single-stream figure users quote (output tokens / E2E) is
``N / (ttft + (N - 1) / rate)`` tok/s (with chunking: the same, the last chunk is due with the
last token).

Concurrency: by default every stream is paced independently at ``rate`` (aggregate = C x rate
for C concurrent streams), which makes the truth of a concurrency bench computable.  With
``--shared-capacity`` the rate is a fixed aggregate capacity: every token takes the next free
global slot (slots 1/rate apart), so C backlogged streams share ``rate`` tok/s between them and
a lone stream still gets ``rate``.

Faults: ``--stall-after K`` sends K tokens then holds the connection open silently (until the
client goes away or the server stops); ``--drop-after K`` sends K tokens then closes the
socket without finishing the chunked body; ``--fail-status CODE`` answers every completion
request with that HTTP status and a JSON error body.

Field behaviours (seen in real servers and proxies):

* ``--keepalive KIND``: keep-alive traffic that carries no token, sent after every token chunk
  and, during a ``--stall-after`` stall, every ``--keepalive-interval`` s (default 0.2) instead of
  silence. KIND: ``comment`` (``: ping``), ``empty-data`` (``data: {}``), ``empty-delta``
  (``delta: {}``), ``role`` (a role-only delta), ``empty-content`` (``content: ""``),
  ``null-content`` (``content: null``), ``event-ping`` (``event: ping`` + ``data: {}``),
  ``usage-zero`` (a usage chunk counting 0 tokens, ``choices: []``).
* ``--sse-style STYLE``: ``lf`` (default), ``crlf``, ``cr`` (lines end in CR only),
  ``nospace`` (``data:`` without the space), ``multiline`` (each JSON payload pretty-printed
  over several ``data:`` lines of one event), ``no-blank`` (no blank line between events).
* ``--end-after K``: generation ends after K tokens (usage says K) with finish_reason
  ``--finish`` (default ``length``); ``--finish R`` alone changes the last finish_reason;
  ``--no-finish`` sends no finish_reason at all (the stream still ends with [DONE]).
* ``--error-after K`` with ``--error-style``: after K tokens the stream reports an error:
  ``event`` (``event: error`` + ``{"error": {...}}``), ``object`` (vLLM's older top-level
  ``{"object": "error", "message": ...}``), ``string`` (``{"error": "..."}``), ``event-text``
  (``event: error`` + plain text); then ``data: [DONE]``. The message is ``upstream overloaded``.
* ``--api-key KEY``: every ``/v1/*`` request without ``Authorization: Bearer KEY`` gets 401
  (as vLLM ``--api-key``), whose body echoes the key it got (as OpenAI's "Incorrect API key
  provided: ..."); ``/health`` stays open.
* ``--fail-after-requests N``: completion requests after the first N answer HTTP 500.
* ``--no-chat-template``: chat completions answer 400 with transformers' "no chat template"
  message (a base model); completions work.
* ``--unicode``: tokens include U+2028, U+0085 (NEL) and an emoji, written as raw UTF-8.
* ``--burst-after K``: the first K token chunks leave when due, the rest are held and written in
  one piece when the last is due (a starved HTTP layer; ``0`` = every token in one burst).

Timeline (what the server really did, for tests that must not depend on how busy the machine
is): every streamed request appends a record to ``server.timeline`` (in-thread), and with
``--timeline FILE`` writes it as one JSON line to FILE (a process), before its ``[DONE]`` leaves
(so a client that has read ``[DONE]`` finds the record). Times are ``time.perf_counter()``
seconds, ``CLOCK_MONOTONIC`` on Linux, the clock of every process on the machine. A record:
``{"conn": n, "read": t, "tokens": [[t, k], ...], "done": t | None, "held": t | None}``:
``conn`` numbers the TCP connection (1, 2, ... in accept order); ``read``: the request body had
been read; ``tokens``: a chunk of k tokens was about to be written at t (held chunks of a burst:
the time of the burst's write); ``done``: ``[DONE]`` was about to be written; ``held``: the
stream began to hold (``--stall-after``). Bytes reach a client after these times, and a client
sends its next request on a connection only after it read the previous answer to its end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULTS = {
    "rate": 100.0,  # tok/s per stream (aggregate with shared_capacity)
    "ttft": 0.0,  # s from request to first token
    "reasoning_tokens": 0,
    "reasoning_field": "reasoning",
    "usage": True,
    "chunk_tokens": 1,
    "model": "ref-model",
    "shared_capacity": False,
    "stall_after": None,
    "drop_after": None,
    "fail_status": None,
    "keepalive": None,
    "keepalive_interval": 0.2,
    "sse_style": "lf",
    "end_after": None,
    "finish": None,
    "no_finish": False,
    "error_after": None,
    "error_style": "event",
    "api_key": None,
    "no_chat_template": False,
    "unicode": False,
    "burst_after": None,
    "fail_after_requests": None,
    "timeline": None,  # a file path: one JSON line per streamed request (see the module docstring)
}

KEEPALIVE_KINDS = ("comment", "empty-data", "empty-delta", "role", "empty-content", "null-content",
                   "event-ping", "usage-zero")
SSE_STYLES = ("lf", "crlf", "cr", "nospace", "multiline", "no-blank")
ERROR_STYLES = ("event", "object", "string", "event-text")
ERROR_MESSAGE = "upstream overloaded"
NO_TEMPLATE_MESSAGE = ("As of transformers v4.44, default chat template is no longer allowed, so you must "
                       "provide a chat template if the tokenizer does not define one.")

_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
_UNICODE_WORDS = ("line\u2028sep", "next\x85line", "para\u2029sep", "\U0001f600", "caf\u00e9")
_ANSWERS = (("capital of france", "The capital of France is Paris."),)


class _Capacity:
    """Global token slots for --shared-capacity: one slot every 1/rate s across all streams."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next_free = 0.0
        self.lock = threading.Lock()

    def reserve(self, earliest: float) -> float:
        with self.lock:
            t = earliest if earliest > self.next_free else self.next_free
            self.next_free = t + self.interval
            return t


def _sleep_until(t: float) -> None:
    dt = t - time.perf_counter()
    if dt > 0:
        time.sleep(dt)


def _canned_answer(prompt: str) -> str | None:
    low = prompt.lower()
    for key, answer in _ANSWERS:
        if key in low:
            return answer
    return None


def _prompt_of(body: dict, chat: bool) -> str:
    if not chat:
        p = body.get("prompt", "")
        return p if isinstance(p, str) else json.dumps(p)
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
    return "\n".join(parts)


def _plan_tokens(body: dict, chat: bool, opts: dict) -> tuple[list[str], str | None]:
    """Token texts to emit and the finish_reason (None with ``no_finish``)."""
    toks, finish = _plan_natural(body, chat, opts)
    if opts.get("end_after") is not None and opts["end_after"] < len(toks):
        toks, finish = toks[: opts["end_after"]], opts.get("finish") or "length"
    elif opts.get("finish"):
        finish = opts["finish"]
    return toks, None if opts.get("no_finish") else finish


def _plan_natural(body: dict, chat: bool, opts: dict) -> tuple[list[str], str]:
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 16
    max_tokens = max(1, int(max_tokens))
    answer = None if body.get("ignore_eos") else _canned_answer(_prompt_of(body, chat))
    if answer is not None:
        # a reasoning model thinks first (reasoning_tokens words), then answers
        think = [(" " if i else "") + _WORDS[i % len(_WORDS)] for i in range(opts["reasoning_tokens"] if chat else 0)]
        words = answer.split(" ")
        toks = think + [w if i == 0 else " " + w for i, w in enumerate(words)]
        if len(toks) <= max_tokens:
            return toks, "stop"
        return toks[:max_tokens], "length"
    words = _UNICODE_WORDS if opts.get("unicode") else _WORDS
    toks = [(" " if i else "") + words[i % len(words)] for i in range(max_tokens)]
    return toks, "length"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # every SSE event leaves at once
    server_version = "refserver/1"

    # -- plumbing -------------------------------------------------------------------------
    def setup(self):
        super().setup()
        with self.server.count_lock:
            self.server.connections += 1
            self.conn_id = self.server.connections

    def log_message(self, format, *args):  # the stdlib's signature
        if self.server.opts.get("verbose"):
            sys.stderr.write("refserver: " + (format % args) + "\n")

    def _send_json(self, status: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        if getattr(self, "held", None) is not None:  # a burst: written later in one piece
            self.held.append(data)
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _event(self, obj, event: str | None = None) -> None:
        if self.server.opts["sse_style"] == "multiline":  # pretty-printed: one data line per line
            text = json.dumps(obj, indent=1, ensure_ascii=False)
        else:
            text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
        self._chunk(self._frame(text, event))

    def _frame(self, payload: str, event: str | None = None) -> bytes:
        """One SSE event in the server's ``sse_style``; each line of ``payload`` is a data line."""
        style = self.server.opts["sse_style"]
        nl = {"crlf": "\r\n", "cr": "\r"}.get(style, "\n")
        parts = payload.split("\n")
        sep = "data:" if style == "nospace" else "data: "
        lines = ([f"event: {event}"] if event else []) + [sep + p for p in parts]
        end = nl if style == "no-blank" else nl + nl
        return (nl.join(lines) + end).encode()

    def _keepalive(self) -> None:
        kind = self.server.opts.get("keepalive")
        if not kind:
            return
        head = {"id": "chatcmpl-ref", "object": "chat.completion.chunk", "model": self.server.opts["model"]}
        if kind == "comment":
            self._chunk(b": ping\n\n")
        elif kind == "empty-data":
            self._chunk(self._frame("{}"))
        elif kind == "event-ping":
            self._chunk(self._frame("{}", "ping"))
        elif kind == "usage-zero":
            self._event(dict(head, choices=[], usage={"prompt_tokens": 8, "completion_tokens": 0, "total_tokens": 8}))
        else:
            delta = {"empty-delta": {}, "role": {"role": "assistant"}, "empty-content": {"content": ""},
                     "null-content": {"content": None}}[kind]
            self._event(dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]))

    def _denied(self) -> bool:
        key = self.server.opts.get("api_key")
        path = self.path.split("?", 1)[0]
        got = self.headers.get("Authorization") or ""
        if key and path.startswith("/v1/") and got != f"Bearer {key}":
            msg = f"Incorrect API key provided: {got.removeprefix('Bearer ') or '(none)'}"
            self._send_json(401, {"error": {"message": msg, "type": "AuthenticationError", "code": 401}})
            return True
        return False

    # -- routes ---------------------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._denied():
            return
        if path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": self.server.opts["model"], "object": "model", "owned_by": "refserver"}
                    ],
                },
            )
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})

    def do_POST(self):
        t0 = None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        t0 = time.perf_counter()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})
            return
        if self._denied():
            return
        opts = self.server.opts
        if opts.get("no_chat_template") and path == "/v1/chat/completions":
            self._send_json(400, {"error": {"message": NO_TEMPLATE_MESSAGE, "type": "BadRequestError", "code": 400}})
            return
        with self.server.count_lock:
            self.server.completions += 1
            late = opts.get("fail_after_requests") is not None and self.server.completions > opts["fail_after_requests"]
        if opts.get("fail_status") or late:
            st = int(opts.get("fail_status") or 500)
            self._send_json(
                st,
                {"error": {"message": "EngineCore encountered an issue", "type": "InternalServerError", "code": st}},
            )
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "invalid JSON body", "code": 400}})
            return
        chat = path == "/v1/chat/completions"
        try:
            if body.get("stream"):
                self._stream(body, chat, t0)
            else:
                self._complete(body, chat, t0)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _complete(self, body: dict, chat: bool, t0: float) -> None:
        opts = self.server.opts
        toks, finish = _plan_tokens(body, chat, opts)
        n = len(toks)
        k = min(opts["reasoning_tokens"], n) if chat else 0
        rate, ttft = opts["rate"], opts["ttft"]
        _sleep_until(t0 + ttft + (n - 1) / rate)
        usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
        base = {"id": "cmpl-ref", "created": int(time.time()), "model": opts["model"]}
        if chat:
            msg = {"role": "assistant", "content": "".join(toks[k:]) or None}
            if k:
                msg[opts["reasoning_field"]] = "".join(toks[:k])
            choice = {"index": 0, "message": msg, "finish_reason": finish}
            obj = dict(base, object="chat.completion", choices=[choice], usage=usage)
        else:
            choice = {"index": 0, "text": "".join(toks), "finish_reason": finish}
            obj = dict(base, object="text_completion", choices=[choice], usage=usage)
        self._send_json(200, obj)

    def _stream(self, body: dict, chat: bool, t0: float) -> None:
        opts = self.server.opts
        toks, finish = _plan_tokens(body, chat, opts)
        n = len(toks)
        k = min(opts["reasoning_tokens"], n) if chat else 0
        rate, ttft, per = float(opts["rate"]), float(opts["ttft"]), max(1, int(opts["chunk_tokens"]))
        capacity: _Capacity | None = self.server.capacity if opts["shared_capacity"] else None
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and opts["usage"]
        stall_after, drop_after = opts.get("stall_after"), opts.get("drop_after")
        error_after, burst_after = opts.get("error_after"), opts.get("burst_after")
        self.held = None
        record: dict = {"conn": self.conn_id, "read": t0, "tokens": [], "done": None, "held": None}
        self.server.timeline.append(record)
        pending: list[list] = []  # token entries of held chunks: stamped when the burst is written

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        created = int(time.time())
        if chat:
            head = {"id": "chatcmpl-ref", "object": "chat.completion.chunk", "created": created, "model": opts["model"]}
            self._event(dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]))
        else:
            head = {"id": "cmpl-ref", "object": "text_completion", "created": created, "model": opts["model"]}
        self.wfile.flush()

        # chunks: (first token index, last token index, kind)
        chunks = []
        i = 0
        while i < n:
            kind = "reasoning" if i < k else "content"
            end = min(i + per, k if i < k else n)
            chunks.append((i, end - 1, kind))
            i = end

        sent = 0
        prev_t = None
        for first, last, kind in chunks:
            if burst_after is not None and sent >= burst_after and self.held is None:
                self.held = []
            if error_after is not None and sent >= error_after:
                self._error_event()
                break
            if stall_after is not None and sent >= stall_after:
                record["held"] = time.perf_counter()
                self._publish(record)
                self._hold()
                return
            if drop_after is not None and sent >= drop_after:
                self._publish(record)
                self._drop()
                return
            if capacity is None:
                due = t0 + ttft + last / rate
            else:
                due = None
                for _ in range(first, last + 1):
                    earliest = t0 + ttft if prev_t is None else prev_t + capacity.interval
                    prev_t = due = capacity.reserve(earliest)
            _sleep_until(due)
            text = "".join(toks[first : last + 1])
            fin = finish if last == n - 1 else None
            if chat:
                field = opts["reasoning_field"] if kind == "reasoning" else "content"
                choice = {"index": 0, "delta": {field: text}, "logprobs": None, "finish_reason": fin}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": fin}
            obj = dict(head, choices=[choice])
            if include_usage:
                obj["usage"] = None
            entry = [time.perf_counter(), last - first + 1]
            (record["tokens"] if self.held is None else pending).append(entry)
            self._event(obj)
            self._keepalive()
            if self.held is None:
                self.wfile.flush()
            sent += last - first + 1
        else:
            if include_usage:
                usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
                self._event(dict(head, choices=[], usage=usage))
        record["done"] = time.perf_counter()
        for entry in pending:
            entry[0] = record["done"]
        record["tokens"] += pending
        self._publish(record)
        self._chunk(self._frame("[DONE]"))
        if self.held is not None:
            held, self.held = self.held, None
            self._chunk(b"".join(held))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _publish(self, record: dict) -> None:
        """Write ``record`` to the ``timeline`` file, when there is one (before the bytes it
        describes the end of leave: a client that has them finds the record)."""
        path = self.server.opts.get("timeline")
        if path:
            with self.server.count_lock, open(path, "a") as f:
                f.write(json.dumps(record) + "\n")

    def _error_event(self) -> None:
        """Report ERROR_MESSAGE mid-stream in the server's ``error_style``."""
        style = self.server.opts["error_style"]
        err = {"message": ERROR_MESSAGE, "type": "server_error", "code": 503}
        if style == "event":
            self._event({"error": err}, "error")
        elif style == "object":
            self._event(dict(err, object="error"))
        elif style == "string":
            self._event({"error": ERROR_MESSAGE})
        else:
            self._chunk(self._frame(ERROR_MESSAGE, "error"))

    def _hold(self) -> None:
        """Keep the connection open until the peer leaves or the server stops: silent, or with
        keep-alive traffic every ``keepalive_interval`` s when ``keepalive`` is set."""
        self.wfile.flush()
        stop = self.server.stopping
        interval = float(self.server.opts.get("keepalive_interval") or 0.2)
        self.connection.settimeout(0.05)
        next_ping = time.perf_counter() + interval
        while not stop.is_set():
            try:
                if self.connection.recv(1) == b"":
                    break
            except TimeoutError:
                if self.server.opts.get("keepalive") and time.perf_counter() >= next_ping:
                    next_ping += interval
                    try:
                        self._keepalive()
                        self.wfile.flush()
                    except OSError:
                        break
                continue
            except OSError:
                break
        self.close_connection = True

    def _drop(self) -> None:
        """Close the socket mid-body (no terminating zero-length chunk)."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class RefServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, opts: dict):
        super().__init__(addr, Handler)
        self.opts = opts
        self.capacity = _Capacity(float(opts["rate"]))
        self.stopping = threading.Event()
        self.connections = 0  # TCP connections accepted so far (keep-alive reuse shows here)
        self.completions = 0  # completion requests received
        self.count_lock = threading.Lock()
        self.timeline: list[dict] = []  # one record per streamed request (module docstring)

    def shutdown(self):
        self.stopping.set()
        super().shutdown()

    def handle_error(self, request, client_address):
        # A client that goes away (reset, broken pipe, timeout) is normal here: no traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout)):
            return
        super().handle_error(request, client_address)


def _options(**opts) -> dict:
    unknown = set(opts) - set(DEFAULTS) - {"verbose"}
    if unknown:
        raise TypeError(f"unknown refserver options: {sorted(unknown)}")
    merged = dict(DEFAULTS, **opts)
    if float(merged["rate"]) <= 0:
        raise ValueError("rate must be > 0 tok/s")
    for key, allowed in (("keepalive", KEEPALIVE_KINDS), ("sse_style", SSE_STYLES), ("error_style", ERROR_STYLES)):
        if merged[key] is not None and merged[key] not in allowed:
            raise ValueError(f"{key} must be one of {allowed}, got {merged[key]!r}")
    return merged


def make_server(host: str = "127.0.0.1", port: int = 0, **opts) -> RefServer:
    """A bound, not yet serving, RefServer.  ``opts``: keys of DEFAULTS."""
    return RefServer((host, port), _options(**opts))


def start_in_thread(port: int = 0, host: str = "127.0.0.1", **opts) -> tuple[RefServer, str]:
    """Start a server in a daemon thread; returns (server, base_url like http://127.0.0.1:P)."""
    server = make_server(host, port, **opts)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    return server, f"http://{host}:{server.server_address[1]}"


def stop(server: RefServer) -> None:
    server.shutdown()
    server.server_close()


def spawn(*args: str, python: str | None = None, timeout_s: float = 15.0):
    """Start this file as a separate process (``args``: CLI options, e.g. "--rate", "1000").

    Returns ``(popen, base_url)`` once the READY line is read; stop it with ``kill_process``.
    """
    import select
    import tempfile

    cmd = [python or sys.executable, os.path.abspath(__file__), "--port", "0", *args]
    err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - a file, not a pipe: a chatty server never blocks
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("READY "):
        kill_process(proc)
        err.seek(0)
        raise RuntimeError(f"refserver did not start: {line!r} {err.read()[-2000:]}")
    err.close()
    return proc, line.split()[1]


def kill_process(proc) -> None:
    """SIGTERM, wait up to 5 s, then SIGKILL, for a process from ``spawn``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


def truth_output_tok_s(n: int, rate: float, ttft: float = 0.0) -> float:
    """True single-stream output tok/s (completion_tokens / E2E) for n tokens, ignoring network."""
    return n / (ttft + (n - 1) / rate)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Reference OpenAI-compatible streaming server with exact pacing.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (printed in the READY line)")
    ap.add_argument("--rate", type=float, default=DEFAULTS["rate"], help="tokens/s per stream (aggregate with --shared-capacity)")
    ap.add_argument("--ttft", type=float, default=0.0, help="seconds before the first token")
    ap.add_argument("--reasoning-tokens", type=int, default=0, help="first K tokens are reasoning deltas")
    ap.add_argument("--reasoning-field", choices=("reasoning", "reasoning_content"), default="reasoning")
    ap.add_argument("--no-usage", action="store_true", help="never send the final usage chunk")
    ap.add_argument("--chunk-tokens", type=int, default=1, help="tokens per SSE chunk")
    ap.add_argument("--model", default=DEFAULTS["model"])
    ap.add_argument("--shared-capacity", action="store_true", help="rate is an aggregate shared by all streams")
    ap.add_argument("--stall-after", type=int, default=None, help="send K tokens then hold the stream silently")
    ap.add_argument("--drop-after", type=int, default=None, help="send K tokens then close the socket")
    ap.add_argument("--fail-status", type=int, default=None, help="answer completions with this HTTP status")
    ap.add_argument("--keepalive", choices=KEEPALIVE_KINDS, default=None, help="keep-alive traffic kind")
    ap.add_argument("--keepalive-interval", type=float, default=0.2, help="s between keep-alives during a stall")
    ap.add_argument("--sse-style", choices=SSE_STYLES, default="lf")
    ap.add_argument("--end-after", type=int, default=None, help="generation ends after K tokens")
    ap.add_argument("--finish", default=None, help="finish_reason of the last chunk (default length/stop)")
    ap.add_argument("--no-finish", action="store_true", help="send no finish_reason")
    ap.add_argument("--error-after", type=int, default=None, help="report an error after K tokens")
    ap.add_argument("--error-style", choices=ERROR_STYLES, default="event")
    ap.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY on /v1/*")
    ap.add_argument("--no-chat-template", action="store_true", help="chat completions answer 400")
    ap.add_argument("--unicode", action="store_true", help="tokens with U+2028, NEL, emoji")
    ap.add_argument("--burst-after", type=int, default=None, help="hold tokens after K and send them at once")
    ap.add_argument("--fail-after-requests", type=int, default=None, help="HTTP 500 after N completion requests")
    ap.add_argument("--timeline", default=None, help="append one JSON line per streamed request to this file")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    server = make_server(
        a.host,
        a.port,
        rate=a.rate,
        ttft=a.ttft,
        reasoning_tokens=a.reasoning_tokens,
        reasoning_field=a.reasoning_field,
        usage=not a.no_usage,
        chunk_tokens=a.chunk_tokens,
        model=a.model,
        shared_capacity=a.shared_capacity,
        stall_after=a.stall_after,
        drop_after=a.drop_after,
        fail_status=a.fail_status,
        keepalive=a.keepalive,
        keepalive_interval=a.keepalive_interval,
        sse_style=a.sse_style,
        end_after=a.end_after,
        finish=a.finish,
        no_finish=a.no_finish,
        error_after=a.error_after,
        error_style=a.error_style,
        api_key=a.api_key,
        no_chat_template=a.no_chat_template,
        unicode=a.unicode,
        burst_after=a.burst_after,
        fail_after_requests=a.fail_after_requests,
        timeline=a.timeline,
        verbose=a.verbose,
    )
    print(f"READY http://{a.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
