"""The probe's HTTP side: the keep-alive client, the API key, URLs, the model's name, and the one
mapping of HTTP failures to probe errors.

Errors (all ``tuner.errors.ProbeError``, exit status 1): ``ProbeHTTPError`` (status >= 400, with
a hint for a missing chat template or API key: :func:`status_error`), ``ProbeStalled``,
``ProbeDisconnected``, ``ProbeConnectError``; httpx exceptions become these in one place,
:func:`probe_error_from`.

An API key (``make_client(api_key=...)``) is sent as ``Authorization: Bearer <key>`` and never
appears in a message: an error body that echoes it is redacted (:func:`body_excerpt`).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.errors import ProbeConnectError, ProbeDisconnected, ProbeError, ProbeHTTPError, ProbeStalled
from tuner.inputs import server_tls
from tuner.servers import GENERIC, KINDS, ServerKind

__all__ = [
    "DRAIN_S",
    "DROPPABLE_FIELDS",
    "ERROR_BODY_BYTES",
    "FALLBACK_MODEL",
    "DrainBound",
    "ModelName",
    "api_url",
    "body_excerpt",
    "bounded_body",
    "discover_model",
    "find_api_key",
    "find_model",
    "make_client",
    "probe_error_from",
    "refused_field",
    "refused_fields",
    "refused_guess",
    "request_timeouts",
    "status_error",
    "unframed_error",
]

#: Environment variables the runner reads an API key from, in order (the OpenAI client's name).
API_KEY_ENV = ("OPENAI_API_KEY",)
#: Names under which a server is given its key in its own environment: each kind's ``api_key_env``.
SERVER_API_KEY_ENV = tuple(name for kind in KINDS for name in kind.api_key_env)

#: Request fields the probe adds that a server may refuse, each with the words that name it in an
#: error body (vLLM/FastAPI ``extra_forbidden`` lists ``loc: ["body", "stream_options"]``, the
#: OpenAI API says "Unrecognized request argument supplied: stream_options", others quote
#: ``include_usage``). Without ``stream_options`` the stream carries no usage: tokens are then
#: counted as :mod:`tuner.measure.tally` says (``max_tokens`` with a ``length`` finish, or chunks).
DROPPABLE_FIELDS: dict[str, re.Pattern[str]] = {
    "stream_options": re.compile(r"stream[ _-]?options|include[ _-]?usage", re.IGNORECASE),
    # the correctness gate's (tuner.measure.answers): a server without them answers all the same
    "top_logprobs": re.compile(r"top[ _-]?logprobs", re.IGNORECASE),
    "logprobs": re.compile(r"logprobs", re.IGNORECASE),
    "seed": re.compile(r"\bseed\b", re.IGNORECASE),
}

#: Longest a body is read once its answer is known (s): an error body, checked per chunk.
DRAIN_S = 1.0
#: Most bytes of an error body read (the excerpt needs 500 characters).
ERROR_BODY_BYTES = 64 * 1024

_BODY_EXCERPT = 500  # characters of an error body kept in ProbeHTTPError
_REFUSED: weakref.WeakKeyDictionary[httpx.Client, set[str]] = weakref.WeakKeyDictionary()
_CHAT_TEMPLATE = re.compile(r"chat[ _-]?template", re.IGNORECASE)


def make_client(stall_timeout_s: float = 60.0, connect_timeout_s: float = 10.0, *,
                api_key: str | None = None) -> httpx.Client:
    """A keep-alive ``httpx.Client`` whose read timeout is the stall timeout (s).

    ``api_key``: sent as ``Authorization: Bearer <key>`` on every request (vLLM ``--api-key``,
    SGLang ``--api-key``); never logged nor put in an error message.
    """
    headers = {"Accept": "text/event-stream, application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(timeout=request_timeouts(stall_timeout_s, connect_timeout_s), headers=headers,
                        verify=server_tls())


def find_api_key(explicit: str | None = None, runner_env: Mapping[str, str] | None = None,
                 server_env: Mapping[str, str] | None = None) -> str | None:
    """The API key to send: ``explicit`` (e.g. ``server.api_key``), else the runner's
    ``OPENAI_API_KEY`` (:data:`API_KEY_ENV`), else a key the server is given in its own
    environment under a known name (:data:`SERVER_API_KEY_ENV`); None when there is none."""
    if explicit:
        return explicit
    for env, names in ((runner_env, API_KEY_ENV), (server_env, SERVER_API_KEY_ENV)):
        for name in names:
            if env and env.get(name):
                return env[name]
    return None


def api_url(base_url: str, path: str) -> str:
    """Join ``base_url`` (``http://h:p`` or ``http://h:p/v1``) and an API path like ``/v1/models``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        base = base[:-3]
    return base + path


def request_timeouts(stall_timeout_s: float, connect_timeout_s: float = 10.0) -> httpx.Timeout:
    """httpx timeouts of a probe request (s): read, write and pool the stall timeout, connect the
    smaller of the two."""
    return httpx.Timeout(connect=min(connect_timeout_s, stall_timeout_s), read=stall_timeout_s,
                         write=stall_timeout_s, pool=stall_timeout_s)


def _secret(client: httpx.Client) -> str | None:
    auth = client.headers.get("Authorization", "")
    return auth.split(" ", 1)[1] if auth.startswith("Bearer ") else None


def body_excerpt(text: str, secret: str | None = None) -> str:
    """``text`` on one line, ``secret`` replaced by ``***``, cut at 500 characters (``...``)."""
    if secret:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("..." if len(text) > _BODY_EXCERPT else "")


def probe_error_from(exc: httpx.HTTPError, url: str, timeout_s: float, after: str = "") -> ProbeError:
    """The probe error for an httpx exception (the one mapping used by every request here).

    ConnectError/ConnectTimeout/UnsupportedProtocol -> ProbeConnectError; other timeouts ->
    ProbeStalled (``timeout_s``); dropped connections (RemoteProtocolError, ReadError,
    WriteError, CloseError, other transport errors) -> ProbeDisconnected; anything else (e.g.
    a decoding error) -> ProbeError. ``after`` says how far the request got (e.g. "after 12
    token chunks"); the message never holds request headers (the API key).
    """
    where = f" {after}" if after else ""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol)):
        return ProbeConnectError(f"cannot connect to {url}: {type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.TimeoutException):
        return ProbeStalled(f"nothing from {url} for {timeout_s:g} s (stall timeout){where}", timeout_s)
    if isinstance(exc, httpx.TransportError):
        return ProbeDisconnected(f"connection to {url} dropped{where}: {type(exc).__name__}: {exc}")
    return ProbeError(f"{url}{where}: {type(exc).__name__}: {exc}")


def error_message(text: str) -> str | None:
    """The server's own message in an error body, or None when ``text`` is not a JSON error.

    Shapes: OpenAI ``{"error": {"message": ...}}`` (or ``"error": "text"``), vLLM's
    ``ErrorResponse`` ``{"object": "error", "message": ...}`` (vllm/entrypoints/openai/protocol.py),
    FastAPI ``{"detail": "text"}`` and its validation list ``{"detail": [{"loc": [...], "msg": ...}]}``.
    """
    try:
        obj: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    err = obj.get("error")
    if isinstance(err, dict) and err:
        return str(err.get("message") or json.dumps(err))
    if isinstance(err, str) and err:
        return err
    if obj.get("object") == "error":
        return str(obj.get("message") or json.dumps(obj))
    detail = obj.get("detail")
    if isinstance(detail, str) and detail:
        return detail
    if isinstance(detail, list) and detail:
        parts = [f"{'.'.join(map(str, d.get('loc') or []))}: {d.get('msg', '')}" if isinstance(d, dict) else str(d)
                 for d in detail]
        return "; ".join(parts)
    return None


def unframed_error(lines: list[str], secret: str | None = None) -> str | None:
    """The server's message when the body lines of a 200 stream are a JSON error object sent
    bare (not as SSE ``data:``), e.g. ``{"error": {...}}`` or vLLM's ``{"object": "error", ...}``;
    None otherwise. ``lines``: the body's lines that were not SSE fields."""
    message = error_message("\n".join(lines)) if lines else None
    return body_excerpt(message, secret) if message else None


def refused_field(resp: httpx.Response, sent: Mapping[str, object], text: str | None = None) -> str | None:
    """The field of :data:`DROPPABLE_FIELDS` that a 400/422 response names and the request
    ``sent`` carried, or None; ``text`` is its body (None reads ``resp.text``: the body must
    have been read)."""
    if resp.status_code not in (400, 422):
        return None
    body = resp.text if text is None else text
    for name, words in DROPPABLE_FIELDS.items():
        if name in sent and words.search(body):
            return name
    return None


def refused_fields(client: httpx.Client, add: str | None = None) -> frozenset[str]:
    """The probe fields the server behind ``client`` refused so far (requests on it go without
    them); ``add`` records one more first."""
    seen = _REFUSED.setdefault(client, set())
    if add:
        seen.add(add)
    return frozenset(seen)


class DrainBound:
    """Ends the read of a streamed response ``max_s`` s after :meth:`start`: a timer shuts the
    connection's socket down (``network_stream`` of httpcore's response extensions), which wakes
    a blocked read with an httpx.ReadError or RemoteProtocolError and the connection is not
    reused. Reads that end sooner keep the connection (:meth:`cancel`). Without a socket to
    reach, the read timeout remains the bound."""

    def __init__(self, resp: httpx.Response, max_s: float = DRAIN_S) -> None:
        stream = resp.extensions.get("network_stream")
        self._sock = stream.get_extra_info("socket") if stream is not None else None
        self._max_s = max_s
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        """Start the clock (once)."""
        if self._timer is None and self._sock is not None:
            self._timer = threading.Timer(self._max_s, self._cut)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        """Stop the clock: the read ended by itself."""
        if self._timer is not None:
            self._timer.cancel()

    def _cut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing to cut
                self._sock.shutdown(socket.SHUT_RDWR)


def bounded_body(resp: httpx.Response, max_bytes: int = ERROR_BODY_BYTES, max_s: float = DRAIN_S) -> str:
    """The start of a streamed response's body as text: at most ``max_bytes`` bytes, read until
    the body ends or for about ``max_s`` s (:class:`DrainBound`: a body that trickles, or stays
    open, cannot hold the caller); a broken body gives what arrived."""
    data = b""
    bound = DrainBound(resp, max_s)
    bound.start()
    start = time.monotonic()
    try:
        for chunk in resp.iter_bytes():
            data += chunk
            if len(data) >= max_bytes or time.monotonic() - start > max_s:
                break
    except httpx.HTTPError:
        pass
    finally:
        bound.cancel()
    return data[:max_bytes].decode(resp.encoding or "utf-8", "replace")


def status_error(resp: httpx.Response, client: httpx.Client, endpoint: str | None = None,
                 text: str | None = None) -> ProbeHTTPError:
    """ProbeHTTPError for a response with status >= 400: ``text`` is its body (e.g.
    :func:`bounded_body`; None reads ``resp.text``: the body must have been read). The server's
    own message when the body is a JSON error (:func:`error_message`), else the body."""
    secret = _secret(client)
    text = resp.text if text is None else text
    body = body_excerpt(error_message(text) or text, secret)
    hint = ""
    if endpoint == "chat" and _CHAT_TEMPLATE.search(text):
        hint = ("the model has no chat template, as a base model: measure it on the completions endpoint with "
                'probe.endpoint = "completions" in the experiment file or --endpoint completions')
    elif resp.status_code in (401, 403):
        hint = ("the API key sent was refused" if secret else
                "the server requires an API key: set OPENAI_API_KEY or server.api_key")
    return ProbeHTTPError(resp.status_code, body, hint)


@dataclass(frozen=True)
class ModelName:
    """The model name the probe sends, and how it was found (units: none).

    ``name``: the name; ``note``: ``""`` when the first model route named it, else one line
    saying which routes failed and where the name came from (said once in the night's log);
    ``guessed``: True when no route named it (the command's model or ``"default"``), so a
    refusal of it is answered with ``stop`` (the URL that answered, its status, the key to set).
    """

    name: str
    note: str = ""
    guessed: bool = False
    stop: str = ""


#: The name sent when no route names a model and the command names none (a single-model
#: server that takes any name serves it).
FALLBACK_MODEL = "default"


def find_model(base_url: str, *, client: httpx.Client | None = None, timeout_s: float = 10.0,
               api_key: str | None = None, kind: ServerKind = GENERIC, argv: Sequence[str] = ()) -> ModelName:
    """The model to send to the server at ``base_url``: the first of ``kind.model_routes`` that
    names one (OpenAI's ``GET /v1/models`` ``data[0].id``; TGI's ``GET /info`` ``model_id``;
    SGLang's ``GET /get_model_info`` ``model_path``). A route that answers 404 or 405, lists
    nothing, or answers 200 with a body that is not JSON is passed over; when every route is,
    the name is the model ``argv`` names (``kind.model``), else :data:`FALLBACK_MODEL`
    (``ModelName.guessed``; a kind with ``any_model_name`` serves any name).

    Raises ProbeConnectError (unreachable), ProbeStalled, ProbeDisconnected, and ProbeHTTPError
    for another status >= 400 (its hint names the URL and ``server.model``).
    """
    c = client or make_client(timeout_s, api_key=api_key)
    failed: list[str] = []
    try:
        for route in kind.model_routes:
            url = api_url(base_url, route.path)
            try:
                resp = c.get(url, timeout=request_timeouts(timeout_s))
            except httpx.HTTPError as e:
                raise probe_error_from(e, url, timeout_s) from e
            if resp.status_code in (404, 405):
                why = f" ({kind.model_list_note})" if kind.model_list_note and route.path == "/v1/models" else ""
                failed.append(f"GET {url} answered {resp.status_code}{why}")
                continue
            if resp.status_code >= 400:
                err = status_error(resp, c)
                raise ProbeHTTPError(err.status, err.body_excerpt, err.hint or (
                    f"GET {url} answered {resp.status_code} when asked for the model's name: "
                    f"{_set_model(kind)}"))
            try:
                name = route.read(resp.json())
            except ValueError:
                failed.append(f"GET {url} answered {resp.status_code} with a body that is not JSON")
                continue
            if name is None:
                keys = ".".join(str(k) if isinstance(k, str) else f"[{k}]" for k in route.keys).replace(".[", "[")
                failed.append(f"GET {url} named no model (no {keys})")
                continue
            note = f"{'; '.join(failed)}: the model name {name!r} came from GET {url}" if failed else ""
            return ModelName(name, note)
    finally:
        if client is None:
            c.close()
    name = kind.model(argv) or FALLBACK_MODEL
    where = "the model the server command names" if kind.model(argv) else "a placeholder"
    accepts = f"{kind.title} serves any model name" if kind.any_model_name else "a single-model server takes any name"
    said = "; ".join(failed)
    return ModelName(name, f"{said}: sending {where}, {name!r} ({accepts}; set server.model to choose)",
                     guessed=True, stop=f"{said}: {_set_model(kind)}")


def _set_model(kind: ServerKind) -> str:
    """What to set, in words: ``set server.model (TGI accepts any name, e.g. "tgi")``."""
    if kind.any_model_name and kind.any_model_example:
        return f'set server.model ({kind.title} accepts any name, e.g. "{kind.any_model_example}")'
    return "set server.model to the name the server serves"


def refused_guess(exc: ProbeError, model: ModelName) -> ProbeError:
    """The error to stop with when a request with a guessed ``model`` name failed: for an HTTP
    400, 404 or 422 (a model name refused) the routes that failed and the key to set; else ``exc``."""
    if model.guessed and isinstance(exc, ProbeHTTPError) and exc.status in (400, 404, 422):
        return ProbeHTTPError(exc.status, exc.body_excerpt, f"the model name {model.name!r} was a guess: {model.stop}")
    return exc


def discover_model(base_url: str, *, client: httpx.Client | None = None, timeout_s: float = 10.0,
                   api_key: str | None = None, kind: ServerKind = GENERIC, argv: Sequence[str] = ()) -> str:
    """The name :func:`find_model` finds (its note not said). Raises what it raises."""
    return find_model(base_url, client=client, timeout_s=timeout_s, api_key=api_key, kind=kind, argv=argv).name
