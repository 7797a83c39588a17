"""Measuring a running server: the single-stream decode probe, the smoke check, the concurrency
table, and the real request that proves a server ready. Every caller streams and times
completions the same way.

The leaves, one job each: :mod:`~tuner.measure.results` (what a probe measured, its medians and
table), :mod:`~tuner.measure.client` (the HTTP client, API key, model name, HTTP errors to probe
errors), :mod:`~tuner.measure.sse` (Server-Sent Events framing), :mod:`~tuner.measure.tally` (what
one stream carried, its token count), :mod:`~tuner.measure.stream` (one timed stream, the stall
clock), :mod:`~tuner.measure.runs` (the probe loop and its stop rules), :mod:`~tuner.measure.smoke`
(the smoke check), :mod:`~tuner.measure.bench` (the concurrency table),
:mod:`~tuner.measure.readiness` (the readiness request). Errors are ``tuner.errors.ProbeError`` and
its subclasses (exit status 1).

The leaves import each other by leaf path, never through this face.
"""

from tuner.measure.bench import format_table, levels_to_json, run_bench
from tuner.measure.client import (
    API_KEY_ENV,
    DRAIN_S,
    DROPPABLE_FIELDS,
    ERROR_BODY_BYTES,
    SERVER_API_KEY_ENV,
    DrainBound,
    api_url,
    body_excerpt,
    bounded_body,
    discover_model,
    error_message,
    find_api_key,
    make_client,
    probe_error_from,
    refused_field,
    refused_fields,
    request_timeouts,
    status_error,
    unframed_error,
)
from tuner.measure.readiness import ready_check
from tuner.measure.results import (
    MIN_TOKEN_GAP_S,
    ProbeResult,
    RunMetrics,
    TokensSource,
    format_result,
    is_burst,
)
from tuner.measure.runs import DEFAULT_PROMPT, FixedRuns, StopRule, StopWhen, run_probe
from tuner.measure.smoke import (
    SMOKE_EXPECT,
    SMOKE_MAX_TOKENS,
    SMOKE_PROMPT,
    SMOKE_RETRY_MAX_TOKENS,
    CheckResult,
    smoke_check,
)
from tuner.measure.sse import DONE, SseFramer, server_error, sse_lines
from tuner.measure.stream import Endpoint, stream_once
from tuner.measure.tally import Tally, run_metrics

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_PROMPT",
    "DONE",
    "DRAIN_S",
    "DROPPABLE_FIELDS",
    "ERROR_BODY_BYTES",
    "MIN_TOKEN_GAP_S",
    "SERVER_API_KEY_ENV",
    "SMOKE_EXPECT",
    "SMOKE_MAX_TOKENS",
    "SMOKE_PROMPT",
    "SMOKE_RETRY_MAX_TOKENS",
    "CheckResult",
    "DrainBound",
    "Endpoint",
    "FixedRuns",
    "ProbeResult",
    "RunMetrics",
    "SseFramer",
    "StopRule",
    "StopWhen",
    "Tally",
    "TokensSource",
    "api_url",
    "body_excerpt",
    "bounded_body",
    "discover_model",
    "error_message",
    "find_api_key",
    "format_result",
    "format_table",
    "is_burst",
    "levels_to_json",
    "make_client",
    "probe_error_from",
    "ready_check",
    "refused_field",
    "refused_fields",
    "request_timeouts",
    "run_bench",
    "run_metrics",
    "run_probe",
    "server_error",
    "smoke_check",
    "sse_lines",
    "status_error",
    "stream_once",
    "unframed_error",
]
