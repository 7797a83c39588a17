"""What the runner shows while it works: relaunch k of n, phase, elapsed, the expected end.

A rich status line on a terminal; plain timestamped log lines otherwise (CI, nohup, cron),
so an overnight log reads well the next morning. Every line, each phase and the details
(each ok relaunch's result, its proof when it holds, its NCCL library, the baseline's server
and topology, the triage's findings after its headline) included, goes to the night's log file
(``<study>/night.log``, :meth:`Progress.keep`); the console shows the phases on the live line
only, and the details only when ``verbose`` (``-v``), so a short night fits a screen (the table
at its end has every relaunch's result). ``n`` counts every relaunch of the night as
the runner's clock plans it now (:class:`tuner.planning.NightClock`; never below ``k``), and the
expected end is a local clock time the runner corrects before each relaunch from the phases
measured so far. Nothing secret is ever passed here.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from tuner.errors import tolerated
from tuner.planning import DecodeContext, clock_time
from tuner.record import Kind, TrialRecord

__all__ = [
    "NIGHT_LOG",
    "Progress",
    "proof_line",
    "start_lines",
    "trial_details",
    "trial_lines",
]

#: The night's log file in its study folder (:meth:`Progress.keep`).
NIGHT_LOG = "night.log"


class Progress:
    """Prints progress events; ``interactive`` (a TTY) uses a rich live status. ``total``: the
    night's relaunches as first planned (the budget), until the runner's :meth:`plan` says more.
    ``quiet``: nothing on the console; ``verbose``: the phases (off a terminal) and the details
    too. The log file (:meth:`keep`) gets every line either way."""

    def __init__(self, total: int, *, interactive: bool | None = None, quiet: bool = False,
                 verbose: bool = False) -> None:
        self.total = total
        self.start = time.monotonic()
        self.quiet, self.verbose = quiet, verbose
        self.file_path: Path | None = None
        self.console = Console(stderr=True)
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self._status = self.console.status("") if self.interactive and not quiet else None
        if self._status:
            self._status.start()
        self.trial_times: list[float] = []
        self.end_at: float | None = None

    def keep(self, path: Path) -> None:
        """Write every line from now on to ``path`` as well (appended, each line opened and closed:
        a resumed night adds to its log, a killed one loses no line, and the lines after the runner
        closed its live status are kept too); said once on the console unless ``verbose`` shows it
        all there. A file that cannot be written is said and skipped."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError as exc:
            self.log(f"the night's log {path} cannot be written ({exc.strerror or exc}): the console is all of it")
            return
        self.file_path = path
        if not self.verbose:
            self._console(f"the night's full log: {path} (-v shows it here too)")

    def _write(self, text: str) -> None:
        if self.file_path is not None:
            with tolerated(), open(self.file_path, "a", encoding="utf-8") as fh:  # a full disk must not stop
                fh.write(text + "\n")  # a measurement (a signal must)

    def _console(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

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
        elapsed = time.monotonic() - self.start
        text = (f"relaunch {index} of {max(index, self.total)} [{label}] {phase}"
                f"{': ' + detail if detail else ''}  elapsed {elapsed / 60:.1f} min, {self._end()}")
        if self._status:
            self._status.update(text)
            self._write(_stamped(text))
        else:
            self.detail(text)

    def phases(self, index: int, title: str, store: Callable[[dict[str, Any]], None],
               night: dict[str, Any]) -> Callable[[str, str], None]:
        """A relaunch's ``on_phase(phase, detail)``: each phase of relaunch ``index`` shown
        (:meth:`phase`) and, once per change, stored by ``store(state)`` (``nccl-tune status``
        reads it: the phase, its detail, since when, and ``night``'s fields)."""
        last = [""]

        def on_phase(phase: str, detail: str) -> None:
            self.phase(index, title, phase, detail)
            if phase != last[0]:  # one storage write per phase change
                last[0] = phase
                with tolerated():  # a missed write must not stop a measurement (a signal must)
                    store({"phase": phase, "detail": detail, "since": time.time(), **night})

        return on_phase

    def log(self, text: str) -> None:
        """A plain line with a timestamp (printed above the live status on a terminal), kept in
        the log file too."""
        line = _stamped(text)
        self._write(line)
        self._console(line)

    def detail(self, text: str) -> None:
        """A line the log file keeps and the console shows only when ``verbose``."""
        line = _stamped(text)
        self._write(line)
        if self.verbose:
            self._console(line)

    def trial_done(self, wall_s: float) -> None:
        """Record a finished relaunch's wall time (s) (the runner's clock reads the stored records)."""
        self.trial_times.append(wall_s)

    def close(self) -> None:
        """Stop the live status."""
        if self._status:
            self._status.stop()


def _stamped(text: str) -> str:
    return f"[{datetime.now().strftime('%H:%M:%S')}] {text}"


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


def trial_lines(rec: TrialRecord, label: str) -> list[str]:
    """The lines a finished relaunch prints: its set and result, its proof (:func:`proof_line`)
    when a variable was not confirmed, the backend choice and whether it ran, and the NCCL
    variables the launch did not set; the rest is :func:`trial_details`."""
    if rec.ok:
        summary = f"{rec.output_tok_s:.1f} tok/s (runs {', '.join(f'{r:.1f}' for r in rec.output_tok_s_runs)})"
    elif rec.status.gated and rec.output_tok_s is not None:  # its gate's line, just before, says why
        summary = f"{rec.output_tok_s:.1f} tok/s, then {rec.status} (said above)"
    else:
        summary = f"{rec.status}: {rec.cause}"
    flags = f" {' '.join(rec.flags)}" if rec.flags else ""
    out = [f"trial {rec.trial} [{label}] {json.dumps(rec.env)}{flags} -> {summary}"]
    if rec.nccl_proof and not _proven(rec):
        out.append(f"trial {rec.trial} proof: " + proof_line(rec.nccl_proof))
    if rec.backend_choice:  # the backend choice's own proof (sweep/evidence.py), beside NCCL's
        said = ("applied" if rec.backend_applied else "not read" if rec.backend_applied is None
                else "NOT APPLIED (no speed verdict)")
        out.append(f"trial {rec.trial} backend: {rec.backend_choice} {said}, {rec.allreduce_backend} carried "
                   f"the decode allreduce: {rec.backend_reason}")
    if rec.nccl_unlaunched:
        said = "; ".join(f"{k}={v}" + (f" (from {rec.nccl_unlaunched_from[k]})" if k in rec.nccl_unlaunched_from else "")
                         for k, v in rec.nccl_unlaunched.items())
        out.append(f"trial {rec.trial}: set behind nccl-tune's back (NCCL read variables this launch did not set): "
                   f"{said}" + ("" if set(rec.nccl_unlaunched) <= set(rec.nccl_unlaunched_from) else
                                " (set where those processes start: `ray start`, the image, a conf file, or the server itself)")
                   + ("; this baseline is not untuned on those ranks" if rec.kind is Kind.BASELINE else ""))
    return out


def trial_details(rec: TrialRecord) -> list[str]:
    """A finished relaunch's lines for the log file (and ``-v``): its proof when every variable
    was confirmed (or cannot be: read by CUDA or the server), and the NCCL library it mapped."""
    out = []
    if rec.nccl_proof and _proven(rec):
        out.append(f"trial {rec.trial} proof: " + proof_line(rec.nccl_proof))
    if rec.nccl_library:
        out.append(f"trial {rec.trial}: NCCL library {rec.nccl_library} (version {rec.nccl_library_version or '?'}, "
                   f"build ID {rec.nccl_build_id or 'not read'})")
    return out


def _proven(rec: TrialRecord) -> bool:
    """Every proof row confirmed, or unverifiable (a variable NCCL never echoes)."""
    return all(row.get("status") in ("confirmed", "unverifiable") for row in rec.nccl_proof)


def start_lines(notices: Sequence[str], removed: Sequence[str], kept: Sequence[str],
                decode: DecodeContext | None) -> list[str]:
    """What the night says before anything else: the inputs' ``notices``, the inherited NCCL
    variables no trial sees (``removed``) and the hardware selectors every trial keeps (``kept``),
    and the allreduce sizes a set's identity is judged at (``decode``, from a diagnosis)."""
    out = list(notices)
    if removed:
        out.append(f"inherited {', '.join(removed)} removed from every trial, the baseline included; "
                   "variables your cluster needs (interfaces, IB HCAs) belong in server.env")
    if kept:
        out.append(f"inherited {', '.join(kept)} kept for every trial: they select hardware rather "
                   "than tune it (vary one in the space to have it removed)")
    if decode is not None:
        out.append(decode.sentence())
        if decode.why:
            out.append(f"the sizes: {decode.why}")
    return out
