"""Calibration through the product: whole simulated nights, judged and reported by the sweep's own code.

Where benchmarks/verdict_calibration.py calls the statistics (tuner.judging.stats) on one set or one
headline at a time, this script plays whole nights in the order the sweep plays them and reads each
night's outcome from the words the report prints. No server is started; only the tok/s are drawn.

A night (:func:`play_night`), step by step as ``tuner.sweep.runner.Sweep._loop`` does it:

1. the untuned baseline (a :class:`tuner.record.TrialRecord` of kind ``baseline``);
2. stage 1, while its share of the budget (``--trials``: every relaunch counts,
   :func:`tuner.planning.counts_in_budget`; :attr:`tuner.planning.Budget.screening` leaves the
   reserved checks their slots) is not spent: a baseline re-measure when
   :meth:`tuner.planning.Planner.remeasure_due` says one is owed (``--baseline-every``; it counts),
   one after an outlier baseline launch the judgement names (:func:`tuner.planning.outlier_baseline`,
   once), else the planner's next launch (:meth:`Planner.next_launch`, the space's presets in order:
   K no-effect sets and, at a chosen position, one set with a true gain), each checked by
   :meth:`Planner.judge` like the sweep does;
3. stage 2, the reserved checks in :attr:`Planner.reserved` order: each confirmation slot
   (:meth:`Planner.confirmation` of :func:`tuner.judging.judge_by_host_type` on the records so far,
   as ``Sweep._confirm``: the finalists, the runner-up when its slot is reserved), then the final
   baseline when :func:`tuner.planning.final_baseline_owed`;
4. the report: :func:`tuner.judging.judge_by_host_type` on every record,
   :func:`tuner.report.frame.trials_frame`, :func:`tuner.report.text.verdict_paragraph` (the
   paragraph report.md and the console print) and :func:`tuner.report.text.confirmed_row` (the
   set the "Use it:" lines export).

The outcome is read from the printed paragraph (:func:`outcome_of`): "Use it." with the set the
export lines name (right when it is the true set, wrong otherwise), "not yet confirmed", failed
confirmation, keep the defaults (no "Best set:" named), or ``other`` when a best set is named
with none of these words (a reworded report shows up there instead of being miscounted). Per-set rates read each set's own verdict
(:attr:`tuner.judging.SetJudgement.comparison`, the verdict column of its first row); the smallest
detectable gain is the figure the paragraph prints ("... is about 7.1 %").

Noise model, per run: ``tok/s = base * effect * drift(i) * exp(N(0, tau)) * exp(N(0, sigma)) * hiccup``,
the launch term drawn once per launch (shared by its runs), ``drift(i)`` log-linear over the
night's launches (``drift`` end to end, -0.03 = 3 % slower at the end), ``hiccup``: a run is 30 %
slow (``HICCUP_DROP``) with probability ``hiccup``.

Columns (each a share of nights or of sets over ``nights`` nights of the cell):

- ``use right`` / ``use wrong``: nights whose report says "Use it." for the true set / a
  no-effect set; ``not yet``: nights ending "not yet confirmed"; ``failed``: the winner failed its
  confirmation; ``keep``: no best set named (keep the defaults; also the nights whose paragraph
  only lists sets "faster at 95 % on their own" and gives no advice); ``other``: a best set
  named with none of these words;
- ``false f/s``: no-effect sets whose own verdict is faster or slower (per set);
- ``power``: the true set's own verdict is faster (per set; ``-`` without one);
- ``MDE``: the median printed smallest detectable gain; ``pow@MDE`` / ``use@MDE``: a second batch
  of nights (other seeds) with the true set's gain set to that figure: its per-set power and the
  share of nights that say "Use it." for it (what the printed figure promises is 80 % power);
- ``warn``: nights whose judgement carries a noise warning (``Judgement.noise_warning``);
  ``false silent``: ``false f/s`` over the nights whose warning was silent.

With ``RUNNER_UP`` the night also confirms ``Judgement.finalists[1]`` after the planner's
confirmation (the two-stage design of issue 21, until the planner does it itself).

Run: ``python benchmarks/night_calibration.py`` (the default cells, a few minutes on one core),
``--issue`` (the cells of issue 21, the "before" table), ``--full`` (a wider grid), ``--every``
(``--baseline-every`` 0, 3, 4, 5 at budget 12, the measurement behind its default), ``--jobs N``
(cells in N processes), ``--nights``, ``--seed``, ``--csv FILE``. benchmarks/results/ keeps the
tables quoted in notes.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple, dataclass, fields, replace
from pathlib import Path

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.inputs.space import Preset, SearchSpace
from tuner.judging import Judgement, judge, judge_by_host_type, stats
from tuner.plaintext import plain_table
from tuner.planning import Budget, Planner, Step, counts_in_budget, final_baseline_owed, outlier_baseline
from tuner.record import Kind, Metric, Status, StudyInfo, TrialRecord, Verdict
from tuner.report.frame import trials_frame
from tuner.report.text import confirmed_row, verdict_paragraph

BASE_TOK_S = 80.0        # the untuned level (tok/s); only ratios matter
HICCUP_DROP = 0.30       # a hiccup run is this much slower
HOST_TYPE = "sim-gpu x8 | calibration"
METRIC = Metric.OUTPUT   # the study's metric (the sweep's default)
VARIABLE = "NCCL_CALIBRATION_SET"  # one fake variable; its value names the set
TRUE_NAME = "true-set"
CI_TARGET = 0.01         # probe.ci_target default, for repeats = "auto"
MAX_REPEATS = 15         # probe.max_repeats default
RUNNER_UP = True         # confirm Judgement.finalists[1] too (the design of issue 21)

# The words of tuner/report/text.py's headline that decide a night (matched in the paragraph).
USE_IT = "Use it."
NOT_YET = "not yet confirmed"
FAILED = ("it failed confirmation", "it was not confirmed")
BEST = "Best set:"
_MDE = re.compile(r"smallest gain (?:a set could be called faster at|this night could recommend) \(80 % power\) "
                  r"is about ([0-9.]+) %")

OUTCOMES = ("use_right", "use_wrong", "not_yet", "failed", "keep", "other")


@dataclass(frozen=True)
class Cell:
    """One cell of the grid: launch noise ``tau`` and run noise ``sigma`` (SD of log tok/s,
    fractions), ``runs`` per launch (an int, or ``"auto"`` as ``probe.repeats``), ``k`` no-effect
    sets, one true set with ``gain`` (fraction; 0: none) at ``position`` (first, middle, last in
    plan order), ``drift`` (fraction end to end, log-linear over the launches), ``hiccup`` (chance
    a run is :data:`HICCUP_DROP` slow), ``baseline_every`` (0: none), ``trials`` (the budget,
    every relaunch counted; 0: enough for the baseline, every set once, the re-measures due and
    the reserved checks)."""

    tau: float
    sigma: float
    runs: int | str = 4
    k: int = 10
    gain: float = 0.0
    position: str = "last"
    drift: float = 0.0
    hiccup: float = 0.0
    baseline_every: int = 0
    trials: int = 0

    @property
    def budget(self) -> int:
        """The relaunch budget (``--trials``): the smallest that reaches every set once unless given."""
        if self.trials:
            return self.trials
        sets = self.k + (1 if self.gain else 0)
        n = sets + 1
        while stage_one_sets(Budget(n).screening, self.baseline_every) < sets:
            n += 1
        return n

    def label(self) -> dict[str, str]:
        """The cell's columns as the table prints them."""
        return {"tau": f"{self.tau * 100:g}%", "sigma": f"{self.sigma * 100:g}%", "runs": str(self.runs),
                "K": f"{self.k}" + (f"+1@{self.position}" if self.gain else ""),
                "gain": f"+{self.gain * 100:g}%" if self.gain else "-",
                "drift": f"{self.drift * 100:+g}%" if self.drift else "-",
                "hiccup": f"1/{round(1 / self.hiccup)}" if self.hiccup else "-",
                "b-every": str(self.baseline_every or "-")}


@dataclass(frozen=True)
class Night:
    """What one night's report said: its ``outcome`` (one of :data:`OUTCOMES`), how many of its
    no-effect sets got a false faster/slower verdict (of ``null_sets``), whether the true set's
    own verdict was faster (None without one), the printed smallest detectable gain (fraction,
    NaN when not printed), the relaunches made, the paragraph itself and the night's records."""

    outcome: str
    false_verdicts: int
    null_sets: int
    true_faster: bool | None
    mde: float
    relaunches: int
    paragraph: str
    records: list[TrialRecord]
    warned: bool = False


def stage_one_sets(screening: int, every: int) -> int:
    """Sets stage 1 reaches in ``screening`` relaunches with a re-measure every ``every`` (the
    planner's rule, :meth:`tuner.planning.Planner.remeasure_due`: not in the last slot)."""
    spent, since, sets = 1, 0, 0
    while spent < screening:
        if every and since >= every and screening - spent > 1:
            since = 0
        else:
            sets, since = sets + 1, since + 1
        spent += 1
    return sets


def _space(cell: Cell) -> tuple[SearchSpace, dict[str, str] | None]:
    """The night's space: ``cell.k`` no-effect presets and the true set at its position."""
    names = [f"null-{i:02d}" for i in range(1, cell.k + 1)]
    true_env = None
    if cell.gain:
        at = {"first": 0, "middle": len(names) // 2, "last": len(names)}[cell.position]
        names.insert(at, TRUE_NAME)
        true_env = {VARIABLE: TRUE_NAME}
    presets = [Preset(name, {VARIABLE: name}) for name in names]
    return SearchSpace(Path("calibration.toml"), {}, presets), true_env


class _Launcher:
    """Draws one launch's runs and records it as the sweep's relaunch would (trial number,
    kind, ok status, runs, start time in launch order, host type)."""

    def __init__(self, cell: Cell, rng: np.random.Generator, true_env: dict[str, str] | None, gain: float) -> None:
        self.cell, self.rng, self.true_env, self.gain = cell, rng, true_env, gain
        self.expected = cell.budget  # every relaunch counts
        self.records: list[TrialRecord] = []

    def runs_wanted(self) -> int:
        """``probe.repeats``, or for ``"auto"`` what ``Sweep._runs_wanted`` asks of the
        statistics (tuner.judging.stats.runs_for_precision on the baseline's launches)."""
        if isinstance(self.cell.runs, int):
            return self.cell.runs
        bases = [r.output_tok_s_runs for r in self.records if r.kind is Kind.BASELINE and len(r.output_tok_s_runs) >= 2]
        return stats.runs_for_precision(bases, CI_TARGET, MAX_REPEATS) if bases else MAX_REPEATS

    def effect(self, env: dict[str, str]) -> float:
        """The set's true speed factor: ``1 + gain`` for the true set, 1 for any other."""
        return 1.0 + self.gain if self.true_env is not None and env == self.true_env else 1.0

    def launch(self, kind: Kind, env: dict[str, str], name: str = "", *, recheck: bool = False) -> TrialRecord:
        c, i = self.cell, len(self.records)
        n = self.runs_wanted()
        effect = self.effect(env)
        trend = math.exp(math.log1p(c.drift) * i / max(self.expected - 1, 1))
        launch_term = math.exp(self.rng.normal(0.0, c.tau))
        runs = BASE_TOK_S * effect * trend * launch_term * np.exp(self.rng.normal(0.0, c.sigma, n))
        if c.hiccup:
            runs = np.where(self.rng.random(n) < c.hiccup, runs * (1.0 - HICCUP_DROP), runs)
        values = [float(v) for v in runs]
        rec = TrialRecord(trial=i, kind=kind, status=Status.OK, preset=name, env=dict(env), recheck=recheck,
                          output_tok_s=float(np.median(values)), output_tok_s_runs=values,
                          started_at=float(i), finished_at=float(i) + 0.5, host_type=HOST_TYPE)
        self.records.append(rec)
        return rec


def _judgement(records: Sequence[TrialRecord]) -> Judgement:
    """This host type's judgement, as ``Sweep._judgement`` takes it."""
    groups = judge_by_host_type(records, metric=METRIC, min_effect=stats.DEFAULT_MIN_EFFECT)
    return groups.get(HOST_TYPE) or judge([], metric=METRIC)


def first_stage(planner: Planner, records: list[TrialRecord], first: TrialRecord,
                launch: Callable[..., TrialRecord], *, outlier_done: bool = False) -> None:
    """Stage 1 as ``tuner.sweep.runner.Sweep._first_stage`` plays it, into ``records``: while its
    share of the budget lasts (``Sweep._fits``), a baseline re-measure when due, the outlier
    re-measure once (``Sweep._outlier_remeasure``), else the planner's next launch checked by
    ``Planner.judge`` against ``first`` (the first baseline). ``launch(kind, env, name="", *,
    recheck=False)`` relaunches and returns the record (appended to ``records``). Raises
    RuntimeError when the planner would not launch what it planned."""
    since = 0
    while (left := planner.budget.screening - sum(1 for r in records if counts_in_budget(r))) > 0:  # Sweep._fits
        if planner.remeasure_due(since, left):
            launch(Kind.BASELINE, {}, recheck=True)
            since = 0
            continue
        if not outlier_done:  # Sweep._outlier_remeasure: once, the latest baseline launch named
            named = outlier_baseline(_judgement(records))
            if named is not None and named == [r for r in records if r.kind is Kind.BASELINE][-1].trial:
                outlier_done = True
                launch(Kind.BASELINE, {}, recheck=True)
                since = 0
                continue
        step = planner.next_launch()
        if step.step is Step.DONE:
            break
        decision = planner.judge(step.env, step.flags, baseline=first)
        if not decision.launch:
            raise RuntimeError(f"the planner would not launch {step.name}: {decision.reason}")
        launch(step.kind, step.env, step.name)
        since += 1


def play_night(cell: Cell, rng: np.random.Generator, *, gain: float | None = None) -> Night:
    """One night of ``cell`` in the sweep's order, judged and reported by the product (see the
    module docstring); ``gain`` overrides the true set's gain (fraction)."""
    space, true_env = _space(cell)
    night = _Launcher(cell, rng, true_env, cell.gain if gain is None else gain)
    records = night.records
    planner = Planner(space, "presets", records=lambda: list(records), busy_keys=set, problems=lambda env: [],
                      baseline_every=cell.baseline_every, trials=cell.budget)
    first = night.launch(Kind.BASELINE, {})
    first_stage(planner, records, first, night.launch, outlier_done=not hasattr(Judgement, "noise_warning"))
    for check in planner.reserved:  # each confirmation slot, then the final baseline (Sweep._loop)
        if check is Step.CONFIRM:
            j0 = _judgement(records)
            entry = planner.confirmation(j0)
            if entry is not None:
                night.launch(entry.kind, entry.env, entry.name)
            # The runner-up (Judgement.finalists), until the planner confirms it itself (issue 21).
            runner = j0.sets.get(j0.finalists[1]) if len(getattr(j0, "finalists", [])) > 1 else None
            if RUNNER_UP and runner is not None and not runner.confirm_trials:
                night.launch(Kind.CONFIRM, dict(runner.env), "confirm")
        elif final_baseline_owed([r for r in records if r.kind is Kind.BASELINE], records, HOST_TYPE):
            night.launch(Kind.BASELINE, {}, recheck=True)
    j = _judgement(records)
    df = trials_frame(records, min_effect=stats.DEFAULT_MIN_EFFECT, metric=METRIC, judgement=j)
    paragraph = verdict_paragraph(df, StudyInfo(metric=METRIC), judgement=j)
    use = confirmed_row(df, j)
    use_env = dict(use["env"]) if use is not None else None
    null = [s for s in j.sets.values() if s.env != true_env]
    false = sum(1 for s in null if s.comparison is not None
                and s.comparison.verdict in (Verdict.FASTER, Verdict.SLOWER))
    true = next((s for s in j.sets.values() if s.env == true_env), None)
    true_faster = None if true is None else bool(true.comparison and true.comparison.verdict is Verdict.FASTER)
    found = _MDE.search(paragraph)
    return Night(outcome_of(paragraph, use_env, true_env), false, len(null), true_faster,
                 float(found.group(1)) / 100 if found else math.nan, len(records), paragraph, records,
                 getattr(j, "noise_warning", None) is not None)


def outcome_of(paragraph: str, use_env: dict[str, str] | None, true_env: dict[str, str] | None) -> str:
    """The night's outcome from the printed paragraph and the set the "Use it:" lines export
    (``use_env``, None when none): one of :data:`OUTCOMES`."""
    if USE_IT in paragraph:
        return "use_right" if use_env is not None and use_env == true_env else "use_wrong"
    if NOT_YET in paragraph:
        return "not_yet"
    if any(f in paragraph for f in FAILED):
        return "failed"
    if BEST not in paragraph:
        return "keep"  # no winner named: "Keep the defaults.", or sets "faster on their own" only
    return "other"


@dataclass(frozen=True)
class Row:
    """One cell's measured rates (see the module docstring's columns); ``seconds``: its wall time."""

    cell: Cell
    nights: int
    use_right: float
    use_wrong: float
    not_yet: float
    failed: float
    keep: float
    other: float
    false_fs: float
    power: float
    mde: float
    power_at_mde: float
    use_at_mde: float
    relaunches: float
    seconds: float
    warned: float = math.nan
    false_silent: float = math.nan


def _seed(cell: Cell, seed: int, batch: int) -> np.random.Generator:
    """A generator fixed by the cell's own values (adding cells changes no other cell's draws)."""
    return np.random.default_rng([seed, batch, zlib.crc32(repr(astuple(cell)).encode())])


def run_cell(cell: Cell, nights: int, seed: int = 21, *, at_mde: bool = True) -> Row:
    """``nights`` nights of ``cell`` (fixed seed), then, with ``at_mde``, as many with the true
    set's gain at the median printed smallest detectable gain (the true set at ``cell.position``,
    added when the cell has none)."""
    t0 = time.perf_counter()
    rng = _seed(cell, seed, 0)
    played = [play_night(cell, rng) for _ in range(nights)]
    count = {o: sum(1 for n in played if n.outcome == o) / nights for o in OUTCOMES}
    null_sets = sum(n.null_sets for n in played)
    trues = [n.true_faster for n in played if n.true_faster is not None]
    mdes = [n.mde for n in played if math.isfinite(n.mde)]
    mde = statistics.median(mdes) if mdes else math.nan
    power_at = use_at = math.nan
    if at_mde and math.isfinite(mde):
        probe = replace(cell, gain=mde)
        rng2 = _seed(cell, seed, 1)
        again = [play_night(probe, rng2) for _ in range(nights)]
        power_at = sum(1 for n in again if n.true_faster) / nights
        use_at = sum(1 for n in again if n.outcome == "use_right") / nights
    return Row(cell, nights, count["use_right"], count["use_wrong"], count["not_yet"], count["failed"], count["keep"],
               count["other"], sum(n.false_verdicts for n in played) / null_sets if null_sets else math.nan,
               sum(trues) / len(trues) if trues else math.nan, mde, power_at, use_at,
               statistics.mean(n.relaunches for n in played), time.perf_counter() - t0,
               sum(n.warned for n in played) / nights, _false_silent(played))


def _false_silent(played: Sequence[Night]) -> float:
    """The per-set false faster/slower rate over the nights whose noise warning was silent."""
    silent = [n for n in played if not n.warned]
    sets = sum(n.null_sets for n in silent)
    return sum(n.false_verdicts for n in silent) / sets if sets else math.nan


def _run_one(args: tuple[Cell, int, int, bool]) -> Row:
    return run_cell(args[0], args[1], args[2], at_mde=args[3])


def run_cells(cells: Sequence[Cell], nights: int, seed: int = 21, *, jobs: int = 1, at_mde: bool = True) -> list[Row]:
    """:func:`run_cell` of every cell, in ``jobs`` processes when more than one (same results)."""
    work = [(c, nights, seed, at_mde) for c in cells]
    if jobs <= 1:
        return [_run_one(w) for w in work]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_one, work))


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.1f}"


#: Table columns after the cell's own.
COLUMNS = ("use right %", "use wrong %", "not yet %", "failed %", "keep %", "other %", "false f/s %",
           "power %", "MDE %", "pow@MDE %", "use@MDE %", "relaunches", "s", "warn %", "false silent %")


def _values(row: Row) -> list[str]:
    return [_pct(row.use_right), _pct(row.use_wrong), _pct(row.not_yet), _pct(row.failed), _pct(row.keep),
            _pct(row.other), _pct(row.false_fs), _pct(row.power), _pct(row.mde), _pct(row.power_at_mde),
            _pct(row.use_at_mde), f"{row.relaunches:.1f}", f"{row.seconds:.0f}", _pct(row.warned),
            _pct(row.false_silent)]


def table_text(rows: Iterable[Row]) -> str:
    """The rows as a plain-text table (tuner.plaintext.plain_table), one line per cell."""
    rows = list(rows)
    table = Table(box=None, pad_edge=False, show_edge=False)
    heads = list(Cell(0, 0).label())
    for name in [*heads, *COLUMNS]:
        table.add_column(name, justify="left" if name in heads else "right")
    for row in rows:
        table.add_row(*row.cell.label().values(), *_values(row))
    return plain_table(table)


def write_csv(rows: Iterable[Row], path: Path) -> None:
    """The rows as CSV: the cell's fields, then the rates as fractions."""
    names = [f.name for f in fields(Cell)]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([*names, "nights", *OUTCOMES, "false_fs", "power", "mde", "power_at_mde", "use_at_mde",
                    "relaunches", "seconds"])
        for r in rows:
            w.writerow([*astuple(r.cell), r.nights, r.use_right, r.use_wrong, r.not_yet, r.failed, r.keep, r.other,
                        r.false_fs, r.power, r.mde, r.power_at_mde, r.use_at_mde, r.relaunches, r.seconds])


def issue_cells() -> list[Cell]:
    """The cells of issue 21: tau 0.5-5 % at sigma 1 and 2 %, 4 runs, K = 10 with one +10 % set
    (last) and without; drift -3 % with a +5 % set last (and first); one run in 20 at -30 %."""
    cells = []
    for sigma in (0.01, 0.02):
        for tau in (0.005, 0.01, 0.02, 0.03, 0.05):
            cells.append(Cell(tau, sigma, 4, 10, 0.10, "last"))
            cells.append(Cell(tau, sigma, 4, 10))
    for position in ("last", "first"):
        cells.append(Cell(0.01, 0.01, 4, 10, 0.05, position, drift=-0.03))
        cells.append(Cell(0.01, 0.01, 4, 10, 0.05, position))
    cells.append(Cell(0.01, 0.01, 4, 10, 0.10, "last", hiccup=0.05))
    cells.append(Cell(0.01, 0.01, "auto", 10, 0.10, "last", hiccup=0.05))
    cells.append(Cell(0.01, 0.01, 4, 10, 0.10, "last", baseline_every=5))
    return cells


def default_cells() -> list[Cell]:
    """A few minutes on one core: the main claims of the issue, one cell each."""
    return [Cell(0.005, 0.01, 4, 10, 0.10), Cell(0.01, 0.01, 4, 10, 0.10), Cell(0.02, 0.02, 4, 10, 0.10),
            Cell(0.03, 0.01, 4, 10), Cell(0.05, 0.01, 4, 10),
            Cell(0.01, 0.01, 4, 10, 0.05, "last", drift=-0.03), Cell(0.01, 0.01, 4, 10, 0.10, "last", hiccup=0.05)]


def full_cells() -> list[Cell]:
    """The wider grid: tau x sigma x runs x K x gain x position, then drift, hiccup and
    baseline-every cells."""
    cells = [Cell(tau, sigma, runs, k, gain, pos)
             for tau in (0.005, 0.01, 0.02, 0.03, 0.05) for sigma in (0.01, 0.02) for runs in (3, 4)
             for k in (6, 10) for gain, pos in ((0.0, "last"), (0.05, "last"), (0.10, "first"), (0.10, "middle"),
                                                (0.10, "last"), (0.15, "last"))]
    for drift in (-0.03, 0.03):
        cells += [Cell(0.01, 0.01, 4, 10, 0.05, pos, drift=drift) for pos in ("first", "middle", "last")]
    cells += [Cell(tau, 0.01, runs, 10, 0.10, "last", hiccup=0.05) for tau in (0.01, 0.02) for runs in (3, 4, "auto")]
    cells += [Cell(tau, 0.01, 4, 10, 0.10, "last", baseline_every=every) for tau in (0.01, 0.03) for every in (3, 5)]
    return cells


def target_cells() -> list[Cell]:
    """The issue's targets at the default budget (12 relaunches, every one counted, with the
    default ``--baseline-every 5``): a true +10 % set among 6 no-effect ones (the middle of the
    order) at tau 0.5-2 %, sigma 1 and 2 %; 7 no-effect sets at tau 0.5-5 % (false "Use it");
    one run in 20 at -30 %."""
    cells = [Cell(tau, sigma, 4, 6, 0.10, "middle", baseline_every=5, trials=12)
             for sigma in (0.01, 0.02) for tau in (0.005, 0.01, 0.02)]
    cells += [Cell(tau, sigma, 4, 7, baseline_every=5, trials=12)
              for sigma in (0.01, 0.02) for tau in (0.005, 0.01, 0.02, 0.03, 0.05)]
    cells.append(Cell(0.01, 0.01, 4, 6, 0.10, "middle", hiccup=0.05, baseline_every=5, trials=12))
    return cells


def every_cells() -> list[Cell]:
    """The default ``--baseline-every`` measured (docs/USAGE.md): 0, 3, 4, 5 at tau 1 and 2 %, sigma 1 %,
    4 runs, K = 10 with one +10 % set, budget 12 (every relaunch counted: stage 1 holds 7-8 of the
    11 sets, so the true set sits in the middle, reached by each), without and with a -3 % drift."""
    return [Cell(tau, 0.01, 4, 10, 0.10, "middle", drift=drift, baseline_every=every, trials=12)
            for drift in (0.0, -0.03) for tau in (0.01, 0.02) for every in (0, 3, 4, 5)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    grid = ap.add_mutually_exclusive_group()
    grid.add_argument("--issue", action="store_true", help="the cells of issue 21 (the 'before' table)")
    grid.add_argument("--full", action="store_true", help="the wider grid (long: use --jobs)")
    grid.add_argument("--every", action="store_true", help="--baseline-every 0/3/4/5 at budget 12 (the default's)")
    grid.add_argument("--targets", action="store_true", help="the issue's targets at the default budget of 12")
    ap.add_argument("--nights", type=int, default=200, help="nights per cell (default 200)")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--jobs", type=int, default=1, help="cells in this many processes")
    ap.add_argument("--no-mde", action="store_true", help="skip the second batch at the printed smallest gain")
    ap.add_argument("--csv", type=Path, help="also write the rows as CSV here")
    args = ap.parse_args(argv)
    cells = (issue_cells() if args.issue else full_cells() if args.full else every_cells() if args.every
             else target_cells() if args.targets else default_cells())
    t0 = time.perf_counter()
    rows = run_cells(cells, args.nights, args.seed, jobs=args.jobs, at_mde=not args.no_mde)
    print(f"{args.nights} nights per cell, seed {args.seed}; rates in % of nights (use/not yet/failed/keep/other) "
          "or of sets (false f/s, power)")
    print(table_text(rows))
    print(f"\n{len(cells)} cells in {time.perf_counter() - t0:.0f} s")
    if args.csv:
        write_csv(rows, args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
