"""What the runner shows while it works: relaunch k of n, phase, elapsed, the expected end.

A rich status line on a terminal; plain timestamped log lines otherwise (CI, nohup, cron),
so an overnight log reads well the next morning. ``n`` counts every relaunch of the night as
the runner's clock plans it now (:class:`tuner.planning.NightClock`; never below ``k``), and the
expected end is a local clock time the runner corrects before each relaunch from the phases
measured so far. Nothing secret is ever passed here.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime

from rich.console import Console

from tuner.planning import clock_time

__all__ = [
    "Progress",
    "proof_line",
]


class Progress:
    """Prints progress events; ``interactive`` (a TTY) uses a rich live status. ``total``: the
    night's relaunches as first planned (the budget), until the runner's :meth:`plan` says more."""

    def __init__(self, total: int, *, interactive: bool | None = None, quiet: bool = False) -> None:
        self.total = total
        self.start = time.monotonic()
        self.quiet = quiet
        self.console = Console(stderr=True)
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self._status = self.console.status("") if self.interactive and not quiet else None
        if self._status:
            self._status.start()
        self.trial_times: list[float] = []
        self.end_at: float | None = None

    def plan(self, total: int, end_at: float | None) -> None:
        """The plan as the runner's clock now has it: ``total`` relaunches in the night (every
        one counted), ending at ``end_at`` (Unix s; None: not known yet)."""
        self.total, self.end_at = total, end_at

    def _end(self) -> str:
        if self.end_at is None:
            return "expected end not known yet"
        left = max(0.0, self.end_at - time.time())
        return f"expected end {clock_time(self.end_at, time.time())} (in {left / 60:.1f} min)"

    def phase(self, index: int, label: str, phase: str, detail: str = "") -> None:
        """Announce that relaunch ``index`` (1-based, the night's count) entered ``phase``."""
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        text = (f"relaunch {index} of {max(index, self.total)} [{label}] {phase}"
                f"{': ' + detail if detail else ''}  elapsed {elapsed / 60:.1f} min, {self._end()}")
        if self._status:
            self._status.update(text)
        else:
            self.log(text)

    def log(self, text: str) -> None:
        """A plain line with a timestamp (printed above the live status on a terminal)."""
        if self.quiet:
            return
        stamp = datetime.now().strftime("%H:%M:%S")
        self.console.print(f"[{stamp}] {text}", markup=False, highlight=False, soft_wrap=True)

    def trial_done(self, wall_s: float) -> None:
        """Record a finished relaunch's wall time (s) (the runner's clock reads the stored records)."""
        self.trial_times.append(wall_s)

    def close(self) -> None:
        """Stop the live status."""
        if self._status:
            self._status.stop()


def proof_line(rows: list[dict[str, str]]) -> str:
    """One console line of a trial's proof rows (:attr:`tuner.record.TrialRecord.nccl_proof`),
    variables with the same outcome said once: ``NCCL_ALGO, NCCL_PROTO confirmed, echoed by 0-7
    (8/8) [NCCL_DEBUG_FILE x8]; CUDA_DEVICE_MAX_CONNECTIONS unverifiable: <why>``."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for row in rows:
        name = row.get("name", "")
        why = row.get("why", "") if row.get("status") != "confirmed" else ""
        key = (row.get("status", ""), row.get("ranks", ""), row.get("source", ""), why.replace(name, "\0") if name else why)
        groups.setdefault(key, []).append(name)
    parts = []
    for (status, ranks, source, why), names in groups.items():
        where = (f", echoed by {ranks}" if ranks and ranks != "-" else "") + (f" [{source}]" if source not in ("", "-") else "")
        said = why.replace("\0", names[0] if len(names) == 1 else "them")
        parts.append(f"{', '.join(names)} {status}{where}" + (f": {said.rstrip('.')}" if said else ""))
    return "; ".join(parts)
