"""``nccl-tune probe --url URL``: single-stream decode of a running server
(:func:`tuner.measure.run_probe`); the API key comes from ``OPENAI_API_KEY``, never a flag."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tuner.cli.common import Help, nonneg_int, positive, request_arguments, server_arguments
from tuner.errors import ExitCode
from tuner.inputs import DEFAULT_MAX_TOKENS

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``probe`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    pr = sub.add_parser("probe", help="measure single-stream decode of a running server (API key: OPENAI_API_KEY)",
                        formatter_class=Help)
    server_arguments(pr)
    pr.add_argument("--max-tokens", type=positive(int), default=DEFAULT_MAX_TOKENS, help="tokens per run")
    pr.add_argument("--repeats", type=positive(int), default=3, help="recorded runs")
    pr.add_argument("--warmup", type=nonneg_int, default=1, help="unrecorded runs first")
    request_arguments(pr, "s without a token before giving up")


def run(args: argparse.Namespace) -> int:
    """Probe ``args.url`` and print the result (a table, or JSON); returns 0 (a failure raises
    ProbeError, exit 1)."""
    import json

    from tuner.measure import find_api_key, format_result, run_probe

    key = find_api_key(None, os.environ)  # OPENAI_API_KEY: never a flag (ps, shell history)
    result = run_probe(args.url, model=args.model, prompt=args.prompt, max_tokens=args.max_tokens,
                       warmup=args.warmup, repeats=args.repeats, stall_timeout_s=args.stall_timeout,
                       endpoint=args.endpoint, api_key=key)
    print(json.dumps(result.to_json()) if args.json else format_result(result))
    return ExitCode.OK
