"""``nccl-tune status``: a night as its storage has it now, from any host: its state, the trial
in flight and its phase, the expected end, the decision so far (the report's first line).

The phase is what the runner stored in the running trial (:data:`tuner.study.PHASE_ATTR`, one
write per phase change: launching, loading, check, warmup, probing, concurrency, teardown), with
the night's count and the expected end its clock had when the relaunch began
(:attr:`tuner.planning.NightClock.end_at`, corrected by the runner before each relaunch). The
decision so far is the report's judgement of the relaunches finished until now
(:func:`tuner.report.nights.judge_night`, its :class:`tuner.report.decision.Decision`): a
gain is shown only as the decision words it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.errors import InputError
from tuner.judging import gain_pct
from tuner.plaintext import plain_table
from tuner.planning import clock_time, counts_in_budget, span
from tuner.record import Kind, TrialRecord
from tuner.report.frame import set_text
from tuner.report.nights import Night, best_words
from tuner.study import NightState

__all__ = ["night_status", "pick_running", "print_status"]


@dataclass(frozen=True)
class InFlight:
    """One trial in flight: ``trial``, ``label`` (its preset or kind), ``set`` (env text and
    flags), ``runner`` (``host:pid``), ``phase`` and ``detail`` (None when its runner stored none
    yet, or an older nccl-tune runs it), ``since`` (Unix s), ``relaunch`` and ``of`` (the night's
    count), ``end_at`` (the expected end, Unix s, or None), ``heartbeat_age_s``."""

    trial: int
    label: str
    set: str
    runner: str
    phase: str | None = None
    detail: str = ""
    since: float | None = None
    relaunch: int | None = None
    of: int | None = None
    end_at: float | None = None
    heartbeat_age_s: float | None = None


@dataclass
class NightStatus:
    """What ``nccl-tune status`` shows of one study (see the module docstring); ``best``: the
    best set so far per host type, ``(host type, set text, ratio, low, high, verdict words)``;
    ``decisions``: per host type, ``(host type, the decision's JSON)``: what the table shows."""

    study: str
    storage: str
    state: str
    why: str
    done: int
    planned: int | None
    in_flight: list[InFlight] = field(default_factory=list)
    best: list[tuple[str, str, float, float, float, str]] = field(default_factory=list)
    stop_reason: str = ""
    decisions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (NaN as null)."""
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None
        return {"study": self.study, "storage": self.storage, "state": self.state, "why": self.why,
                "relaunches_done": self.done, "relaunches_planned": self.planned, "stop_reason": self.stop_reason,
                "in_flight": [vars(f) for f in self.in_flight],
                "best": [{"host_type": h, "set": s, "ratio": num(r), "low": num(lo), "high": num(hi), "verdict": v}
                         for h, s, r, lo, hi, v in self.best],
                "decision": [{"host_type": h, **d} for h, d in self.decisions]}


def _label(rec: TrialRecord) -> str:
    if rec.preset:
        return rec.preset
    return "baseline re-measure" if rec.kind is Kind.BASELINE and rec.recheck else rec.kind.value


def night_status(night: Night) -> NightStatus:
    """The status of ``night`` now."""
    phases = night.store.phases()
    ages = night.state.ages
    flights = []
    for rec in sorted((r for r in night.relaunches() if r.trial in night.state.in_flight), key=lambda r: r.trial):
        p = phases.get(rec.trial, {})
        flights.append(InFlight(rec.trial, str(p.get("label") or _label(rec)),
                                set_text(rec.env, rec.flags), rec.runner,
                                p.get("phase"), str(p.get("detail") or ""), p.get("since"), p.get("relaunch"),
                                p.get("of"), p.get("end_at"), ages.get(rec.trial)))
    best = []
    for hj in night.judged:
        b = hj.best()
        if b is not None:
            best.append((hj.host_type, f"{set_text(dict(b.env), b.flags)} (trial {b.trials[0]})",
                         b.ratio, b.low, b.high, best_words(hj, night.min_effect)))
    return NightStatus(night.name, night.storage, night.state.state.value, night.state.why,
                       sum(1 for r in night.records if counts_in_budget(r)), night.info.trials, flights, best,
                       night.info.stop_reason, [(hj.host_type, hj.decision.to_json()) for hj in night.judged])


def pick_running(nights: Sequence[Night], where: str) -> Night:
    """The one running night of ``nights`` (``nccl-tune status`` without ``--study``). Raises
    InputError (exit 2) naming ``--study`` and every study with its state when none or several
    are running (``where``: the storage or results folder read); with none running, the only
    study there when there is one."""
    running = [n for n in nights if n.state.state is NightState.RUNNING]
    if len(running) == 1:
        return running[0]
    if not running and len(nights) == 1:
        return nights[0]
    listed = ", ".join(f"{n.name} ({n.state.state.value})" for n in nights) or "none"
    why = (f"{len(running)} studies are running in {where}" if running else f"no study is running in {where}")
    raise InputError("(command line)", "--study", None, f"the name of one of the studies there: {listed}", why)


def _pct(v: float) -> str:
    return f"{gain_pct(v):+.1f}" if math.isfinite(v) else "?"


def status_rows(status: NightStatus, now: float | None = None) -> list[tuple[str, str]]:
    """``(what, value)`` lines of the status table, as ``nccl-tune status`` prints them."""
    now = time.time() if now is None else now
    rows = [("study", f"{status.study} ({status.storage})"), ("state", f"{status.state}: {status.why}"),
            ("relaunches", f"{status.done} of {status.planned if status.planned is not None else '?'} done or in flight")]
    for f in status.in_flight:
        count = f"relaunch {f.relaunch} of {f.of}, " if f.relaunch is not None else ""
        rows.append((f"trial {f.trial}", f"{count}{f.label}: {f.set}"))
        if f.phase is None:
            rows.append(("phase", "not stored (the runner has not reached one, or an older nccl-tune runs it)"))
        else:
            since = f" for {span(max(0.0, now - f.since))}" if f.since is not None else ""
            # a run counter ("run 1/4") is stored when the phase begins, not per run: not shown
            detail = f": {f.detail}" if f.detail and not f.detail.startswith("run ") and "/" not in f.detail else ""
            rows.append(("phase", f"{f.phase}{detail}{since}"))
        if f.end_at is not None:
            rows.append(("expected end", f"{clock_time(f.end_at, now)} (in {span(max(0.0, f.end_at - now))}, "
                                         "the runner's clock at this relaunch's start)"))
        elif f.phase is not None:
            rows.append(("expected end", "not known yet (no relaunch measured)"))
        rows.append(("runner", f.runner + (f", heartbeat {f.heartbeat_age_s:.0f} s ago"
                                           if f.heartbeat_age_s is not None else "")))
    if status.stop_reason and status.state != NightState.RUNNING.value:
        rows.append(("stopped", status.stop_reason))
    for host, decision in status.decisions:
        rows.append((f"decision{' on ' + host if host and len(status.decisions) > 1 else ''}", decision["line"]))
    return rows


def print_status(status: NightStatus, *, as_json: bool = False, console: Console | None = None) -> None:
    """Print ``status`` as a two-column table (or JSON with ``as_json``); ``console``: where
    (default stdout; off a terminal each line whole)."""
    console = console or Console()
    if as_json:
        console.out(json.dumps(status.to_json(), indent=1), highlight=False)
        return
    table = Table(box=None, pad_edge=False, show_header=False, show_edge=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for what, value in status_rows(status):
        table.add_row(Text(what), Text(value))
    if console.is_terminal:
        console.print(table)
    else:
        console.out(plain_table(table), highlight=False)
