"""How long reading one long log line takes (tuner.nccl.lines.read_line): a server that prints a
100 000-character line (a JSON dump, a progress bar without newlines) must not stall the
evidence of its trial. Before NCCL_LINE's host was anchored to the start of a run of host
characters this took about a minute (quadratic); prints the milliseconds per line. Then how
rejoining a block-buffered log (tuner.nccl.rejoin.rejoin) grows with its size: the time of a log
20 times over against 20 times the log's (a ratio near 1 is linear).

    .venv/bin/python benchmarks/log_parse.py
"""

from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.nccl.test_rejoin import four_ranks, simulate  # the tests' log of 4 ranks
from tuner.nccl.lines import read_line
from tuner.nccl.rejoin import rejoin

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
    text, _, _ = simulate(four_ranks(n=400), 1)
    times = {}
    for copies in (1, 20):
        t = time.perf_counter()
        rejoin(text * copies)
        times[copies] = time.perf_counter() - t
    print(f"rejoin: {len(text) / 1e3:.0f} kB in {times[1] * 1e3:.1f} ms, 20 times over in {times[20] * 1e3:.1f} ms: "
          f"{times[20] / (20 * times[1]):.2f} x linear")


if __name__ == "__main__":
    main()
