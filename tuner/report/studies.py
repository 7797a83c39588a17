"""``nccl-tune studies``: the studies of a storage, one row each: name, host types, relaunches
done and planned, the night's decision (the report's first line), the night's state.

Relaunches done are those the budget counts (:func:`tuner.planning.counts_in_budget`: every
relaunch, in flight ones included, interrupted ones not); planned is the last sweep's budget
(:attr:`tuner.record.StudyInfo.trials`, ``?`` for a study stored before format version 6). The
decision is the report's (:func:`tuner.report.nights.judge_night`, its
:class:`tuner.report.decision.Decision`), per host type: a gain is shown only as the decision
words it, never a best set's ratio headlined on a night that judged none; the state is
:func:`tuner.study.study_state`'s. The JSON keeps the set the decision is about with its ratio
and interval, beside the decision.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.plaintext import plain_table
from tuner.planning import counts_in_budget
from tuner.report.frame import set_text
from tuner.report.nights import Night, best_words

__all__ = ["print_studies"]

#: The listing's columns, in order.
STUDIES_COLUMNS = ("study", "state", "relaunches", "host type", "decision")


class StudyRow:
    """One study of the listing: ``name``, ``storage``, ``state`` and ``why`` (what it rests on),
    ``done`` (relaunches the budget counts), ``planned`` (the budget, None when not stored),
    ``hosts``: per host type ``(host type, best set's env text or "", gain text with its 95 %
    interval, verdict words, and the decision's JSON)``, ``metric``, ``stop_reason``."""

    def __init__(self, night: Night) -> None:
        self.name = night.name
        self.storage = night.storage
        self.state = night.state.state.value
        self.why = night.state.why
        self.done = sum(1 for r in night.records if counts_in_budget(r))
        self.planned = night.info.trials
        self.metric = night.info.metric.value
        self.stop_reason = night.info.stop_reason
        self.hosts: list[dict[str, Any]] = []
        for hj in night.judged:
            best = hj.best()
            self.hosts.append({
                "host_type": hj.host_type, "set": set_text(dict(best.env), best.flags) if best is not None else "",
                "flags": list(best.flags) if best is not None else [], "trial": best.trials[0] if best else None,
                "ratio": best.ratio if best is not None and math.isfinite(best.ratio) else None,
                "low": best.low if best is not None and math.isfinite(best.low) else None,
                "high": best.high if best is not None and math.isfinite(best.high) else None,
                "verdict": best_words(hj, night.min_effect),
                "confirmed": hj.story.confirmed if best is not None and hj.story.best == best.key else None,
                "decision": hj.decision.to_json()})

    @property
    def relaunches(self) -> str:
        """``done of planned`` (``of ?`` when the budget is not stored)."""
        return f"{self.done} of {self.planned if self.planned is not None else '?'}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON of the row (NaN as null)."""
        return {"study": self.name, "storage": self.storage, "state": self.state, "why": self.why,
                "relaunches_done": self.done, "relaunches_planned": self.planned, "metric": self.metric,
                "stop_reason": self.stop_reason, "host_types": self.hosts}


def study_row(night: Night) -> StudyRow:
    """The listing's row of ``night``."""
    return StudyRow(night)


def studies_table(rows: Sequence[StudyRow]) -> Table:
    """The listing as a rich table (:data:`STUDIES_COLUMNS`), one line per host type of a study."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for col in STUDIES_COLUMNS:
        table.add_column(col, justify="right" if col == "relaunches" else "left", overflow="fold")
    for row in rows:
        for k, h in enumerate(row.hosts or [{}]):
            first = k == 0
            table.add_row(*(Text(c) for c in (
                row.name if first else "", row.state if first else "", row.relaunches if first else "",
                h.get("host_type") or "-", h["decision"]["line"] if h.get("decision") else "-")))
    return table


def studies_json(rows: Sequence[StudyRow]) -> str:
    """The listing as JSON: a list of :meth:`StudyRow.to_json` objects."""
    return json.dumps([r.to_json() for r in rows], indent=1)


def print_studies(nights: Sequence[Night], *, as_json: bool = False, console: Console | None = None,
                  where: str = "") -> None:
    """Print the listing of ``nights`` (a table, or JSON with ``as_json``), then each state's
    reason; ``console``: where (default stdout; off a terminal each row is one line); ``where``:
    what was read (a storage URL without its password, or the results folders), said when empty."""
    console = console or Console()
    rows = [study_row(n) for n in nights]
    if as_json:
        console.out(studies_json(rows), highlight=False)
        return
    if not rows:
        console.out(f"no study found in {where}" if where else "no study found", highlight=False)
        return
    table = studies_table(rows)
    if console.is_terminal:
        console.print(table)
    else:
        console.out(plain_table(table), highlight=False)
    console.out("", highlight=False)
    for row in rows:
        console.out(f"{row.name}: {row.state}: {row.why}", highlight=False)
