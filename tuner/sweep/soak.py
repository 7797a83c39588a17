"""The soak of one launch, after its probe: a finalist's confirmation and the final baseline.

:func:`soak_launch` runs :func:`tuner.measure.run_soak` on the launched server at the probe's
concurrency levels (its stall timeout, prompt and tokens), with the server's log watched for
the kind's hang and fatal lines (:class:`LogWatch`, :meth:`tuner.servers.ServerKind.is_hang`);
:func:`soak_fields` puts what it saw into the record (``soak_*``, tuner.record.trial). A soak
that fails leaves the launch's speed measured: the judgement reads the failure
(tuner.judging.judge), and a baseline whose soak fails too says the machine hangs, not the set.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tuner.inputs import ProbeConfig
from tuner.measure import SoakResult, run_soak
from tuner.record import TrialRecord
from tuner.server import ServerProcess
from tuner.servers import ServerKind

__all__ = ["LogWatch", "soak_fields", "soak_launch"]

_READ_BYTES = 1 << 20  # read at most this much of the log per poll: a chatty server cannot stall the soak


class LogWatch:
    """The first hang or fatal line (:meth:`tuner.servers.ServerKind.is_hang`) a server log at
    ``path`` gained since this watch was made; called as ``watch()`` (None: none yet)."""

    def __init__(self, path: Path, kind: ServerKind) -> None:
        self.path, self.kind = path, kind
        try:
            self.offset = path.stat().st_size
        except OSError:
            self.offset = 0
        self.partial = ""
        self.found: str | None = None

    def __call__(self) -> str | None:
        if self.found is not None:
            return self.found
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(_READ_BYTES)
        except OSError:
            return None
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self.partial = lines.pop()  # a line still being written
        for line in lines:
            if self.kind.is_hang(line):
                self.found = line.strip()
                return self.found
        return None


def soak_launch(server: ServerProcess, pc: ProbeConfig, *, url: str, model: str, api_key: str | None,
                seconds: float, log: Path) -> SoakResult:
    """Soak the launched ``server`` for ``seconds`` (s) at ``pc``'s concurrency levels (its
    prompt, max_tokens, stall timeout and endpoint); ``log``: the server's log, watched. A
    server that exited during the soak is said in the failure."""
    kind = server.kind()
    result = run_soak(url, model=model, duration_s=seconds, concurrency=list(pc.concurrency),
                      max_tokens=pc.max_tokens, prompt=pc.prompt, stall_timeout_s=pc.stall_timeout_s,
                      endpoint=pc.endpoint, api_key=api_key, health_path=kind.health_path,
                      watch=LogWatch(log, kind))
    if result.failure and not server.alive():
        return replace(result, failure=f"{result.failure}; the server exited")
    return result


def soak_fields(record: TrialRecord, result: SoakResult | None) -> None:
    """What the soak saw, into ``record``'s ``soak_*`` fields (nothing without a soak)."""
    if result is None:
        return
    record.soak_s = result.seconds
    record.soak_failure = result.failure
    record.soak_concurrency = list(result.concurrency)
    record.soak_requests = result.requests
    record.soak_tok_s = result.output_tok_s
