"""Measuring a running server: the single-stream decode probe, the smoke check, the concurrency
table, and the real request that proves a server ready. Every caller streams and times
completions the same way.

The leaves, one job each: :mod:`~tuner.measure.results` (what a probe measured, its medians and
table), :mod:`~tuner.measure.client` (the HTTP client, API key, model name, HTTP errors to probe
errors), :mod:`~tuner.measure.sse` (Server-Sent Events framing), :mod:`~tuner.measure.tally` (what
one stream carried, its token count), :mod:`~tuner.measure.stream` (one timed stream, the stall
clock), :mod:`~tuner.measure.runs` (the probe loop and its stop rules), :mod:`~tuner.measure.smoke`
(the smoke check), :mod:`~tuner.measure.answers` (the correctness gate's greedy answers),
:mod:`~tuner.measure.bench` (the concurrency table), :mod:`~tuner.measure.readiness` (the
readiness request), :mod:`~tuner.measure.soak` (the soak: a sustained load watched for a hang).
Errors are ``tuner.errors.ProbeError`` and
its subclasses (exit status 1).

The leaves import each other by leaf path, never through this face.
"""

from tuner.measure.answers import Answer, answers_from_json, answers_to_json, take_answers
from tuner.measure.bench import format_table, levels_to_json, run_bench
from tuner.measure.client import ModelName, find_api_key, find_model, make_client, refused_guess
from tuner.measure.readiness import ready_check
from tuner.measure.results import ProbeResult, RunMetrics, format_result
from tuner.measure.runs import run_probe
from tuner.measure.smoke import smoke_check
from tuner.measure.soak import SoakResult, run_soak

__all__ = [
    "Answer",
    "ModelName",
    "ProbeResult",
    "RunMetrics",
    "SoakResult",
    "answers_from_json",
    "answers_to_json",
    "find_api_key",
    "find_model",
    "format_result",
    "format_table",
    "levels_to_json",
    "make_client",
    "ready_check",
    "refused_guess",
    "run_bench",
    "run_probe",
    "run_soak",
    "smoke_check",
    "take_answers",
]
