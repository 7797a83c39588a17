"""How long reading one long log line takes (tuner.nccl.lines.read_line): a server that prints a
100 000-character line (a JSON dump, a progress bar without newlines) must not stall the
evidence of its trial. Before NCCL_LINE's host was anchored to the start of a run of host
characters this took about a minute (quadratic); prints the milliseconds per line.

    .venv/bin/python benchmarks/log_parse.py
"""

from __future__ import annotations

import timeit

from tuner.nccl.lines import read_line

CASES = {
    "NCCL line": "gpu-node7:4242:4300 [3] NCCL INFO Channel 00/02 :    0   1   2   3   4   5   6   7",
    "server line, 200 chars": "INFO 03-01 12:00:00 api_server.py:123 " + "x" * 200,
    "100k chars, no space, after 'NCCL '": "NCCL " + "a" * 100_000,
    "100k chars of 'a:'": "NCCL " + "a:" * 50_000,
}


def main() -> None:
    for name, line in CASES.items():
        n = 2000 if len(line) < 1000 else 5
        per = timeit.timeit(lambda line=line: read_line(line), number=n) / n
        print(f"{name:40s} {per * 1e3:10.3f} ms a line")


if __name__ == "__main__":
    main()
