"""``nccl-tune bench --url URL``: the concurrency table of a running server
(:func:`tuner.measure.run_bench`); the API key comes from ``OPENAI_API_KEY``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from tuner.cli.common import Help, csv_ints, positive, request_arguments, server_arguments
from tuner.errors import ExitCode

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``bench`` subparser and its arguments, on ``sub`` (argparse's subparsers)."""
    b = sub.add_parser("bench", help="concurrency table of a running server (API key: OPENAI_API_KEY)",
                       formatter_class=Help)
    server_arguments(b)
    b.add_argument("--concurrency", type=csv_ints, default=[1, 2, 4, 8], help="levels, e.g. 1,2,4,8")
    b.add_argument("--requests", type=positive(int), default=4,
                   help="requests per concurrent stream at each level (C x REQUESTS in all)")
    b.add_argument("--max-tokens", type=positive(int), default=256, help="tokens per request")
    request_arguments(b, "s without a token before a request fails")


def run(args: argparse.Namespace) -> int:
    """Bench ``args.url`` at each concurrency level and print the table (or JSON); returns 0
    when every level succeeded, else 1 (PROBE_FAILED)."""
    import json

    from tuner.measure import find_api_key, format_table, levels_to_json, run_bench

    levels = run_bench(args.url, model=args.model, concurrency=args.concurrency, requests=args.requests,
                       max_tokens=args.max_tokens, prompt=args.prompt, stall_timeout_s=args.stall_timeout,
                       endpoint=args.endpoint, api_key=find_api_key(None, os.environ))
    print(json.dumps(levels_to_json(levels)) if args.json else format_table(levels))
    return ExitCode.OK if all(lv.ok for lv in levels) else ExitCode.PROBE_FAILED
