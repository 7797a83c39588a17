"""The correctness and soak gates measured through what the night prints (issue 34, item 5).

Whole nights as benchmarks/night_calibration.py plays them (the planner's presets, the baseline
re-measures, the reserved confirmations, the final baseline; judged by
:func:`tuner.judging.judge_by_host_type` and read from :func:`tuner.report.text.verdict_paragraph`
and :func:`tuner.report.text.confirmed_row` by ``night_calibration.outcome_of``), with the gates in
the loop as ``tuner.sweep.runner.Sweep`` runs them:

* **answers**: every launch answers the gate's prompts (``tuner.inputs.config.DEFAULT_GATE_PROMPTS``,
  ``DEFAULT_GATE_TOKENS`` greedy tokens each) from the simulator's own model
  (:class:`tuner.sim.greedy.LaunchPaths`: the set's reduction key, the launch's own nondeterminism
  from a seeded generator, ``corrupt`` for the corrupting set; the rates of the ``pcie-8x-gates``
  profile), turned into :class:`tuner.measure.Answer` as ``tuner.measure.answers.take_answers``
  reads the simulator's chat logprobs (``TOP_LOGPROBS`` alternatives a token), written where the
  sweep keeps them and settled by the product's own :func:`tuner.sweep.gate.check_answers` (the
  baseline's first launch the reference, its re-measures' forks tolerated; beyond tolerance:
  ``wrong_output``) before the next step is planned;
* **soak**: a finalist's first confirmation launch soaks (``Sweep._confirm``: a set soaks once) and
  the final baseline after a soaked confirmation (``Sweep._baseline_soak``); the hanging set's soak
  fails when its hang time falls within the launch's load (its ``soak_failure``, as
  ``tuner.sweep.soak.soak_fields`` stores it; the trial's status stays ok and the judgement reads
  the failure), every other soak passes; a set that failed its soak gives its second slot to the
  next set (:meth:`tuner.planning.Planner.confirmation`).

The night's sets, in an order drawn per night: ``k`` no-effect clean sets (each with a reduction
order of its own, so their answers part late at the profile's rate), one +15 % set that corrupts
answers, one +15 % set that hangs after ``HANG_MIN`` minutes of load (drawn per night, within the
probe plus the soak), one clean +10 % set. Noise per run as night_calibration's
(``tau``: launch, ``sigma``: run). Each night is also played with the gates off (the same draws of
tok/s and order), the night as it was before them.

Run: ``python benchmarks/gate_nights.py [--nights 300] [--seed 34] [--jobs 2] [--out FILE]``.
Results: benchmarks/results/gate_nights.txt.
"""

from __future__ import annotations

import argparse
import math
import random
import shlex
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import night_calibration as nc

from tuner.inputs.config import DEFAULT_GATE_PROMPTS, DEFAULT_GATE_TOKENS, DEFAULT_SOAK_MINUTES
from tuner.inputs.space import Preset, SearchSpace
from tuner.measure import Answer, answers_to_json
from tuner.measure.answers import TOP_LOGPROBS, TokenLogprob
from tuner.planning import Planner, Step, final_baseline_owed
from tuner.record import Kind, Status, StudyInfo, TrialRecord
from tuner.report.frame import trials_frame
from tuner.report.text import confirmed_row, verdict_paragraph
from tuner.sim import greedy, textgen
from tuner.sim.profiles import BUILTIN
from tuner.study import StudyStore
from tuner.sweep.gate import check_answers
from tuner.sweep.trial import answers_path

PROFILE = BUILTIN["pcie-8x-gates"]  # the simulator's gates box: its answer-parting rates
CORRUPT, HANG, CLEAN = "corrupt-15", "hang-15", "clean-10"
BAD_GAIN, CLEAN_GAIN = 0.15, 0.10
HANG_MIN = (2.0, 10.0)  # minutes of load before the hanging set stops (drawn per night): after a probe, within the soak
EXPECTED_TOK_S = 70.0  # examples/sim.toml's probe.expected_tok_s: the gate's answers' time at the demo's rate
PROBE_TOKENS = 96  # examples/sim.toml's probe.max_tokens, a run (one warm-up run and the recorded ones)
STALL_S = 30.0  # examples/sim.toml's probe.stall_timeout_s: the soak's stall clock


@dataclass(frozen=True)
class Box:
    """A night's box and plan: noise ``tau``/``sigma`` (launch/run, SD of log tok/s), ``runs`` a
    launch, ``k`` no-effect sets, ``baseline_every``, ``trials`` (every relaunch counts),
    ``soak_min`` (sweep.soak_minutes), ``logprobs`` (the server sends them), ``tokens`` a gate answer."""

    tau: float = 0.01
    sigma: float = 0.01
    runs: int = 6
    k: int = 3
    baseline_every: int = 2
    trials: int = 12
    soak_min: float = DEFAULT_SOAK_MINUTES
    logprobs: bool = True
    tokens: int = DEFAULT_GATE_TOKENS

    def cell(self) -> nc.Cell:
        return nc.Cell(self.tau, self.sigma, self.runs, self.k, baseline_every=self.baseline_every, trials=self.trials)

    def label(self) -> str:
        return (f"tau {self.tau:.1%}, sigma {self.sigma:.1%}, {self.runs} runs, {self.k} no-effect sets, "
                f"baseline every {self.baseline_every}, budget {self.trials}, soak {self.soak_min:g} min, "
                f"{'with' if self.logprobs else 'without'} logprobs, {self.tokens} tokens an answer")


@dataclass(frozen=True)
class GateNight:
    """One night: what it recommended (``use``: a set name, ``""``: none), its outcome word
    (night_calibration's OUTCOMES, the +10 % set as the true one), the clean launches flagged
    ``wrong_output``, the set launches whose answers parted within tolerance, the corrupting set's
    launches and how many were flagged, soaks made and failed, relaunches, soak seconds and the
    launches the two faulty sets took."""

    use: str
    outcome: str
    clean_flagged: int
    parted_within: int
    set_launches: int
    corrupt_launches: int
    corrupt_flagged: int
    soaks: int
    soaks_failed: int
    relaunches: int
    soak_s: float
    faulty_launches: int
    clean_reached: bool = True


class _Store:
    """What :func:`check_answers` reads of the study: the records finished before the one it checks."""

    def __init__(self, records: list[TrialRecord]) -> None:
        self._records = records

    def finished(self) -> list[TrialRecord]:
        return list(self._records)

    def ok_baselines(self, host_type: str | None = None) -> list[TrialRecord]:
        return sorted((r for r in self._records if r.kind is Kind.BASELINE and r.ok), key=lambda r: r.trial)


def sim_answers(paths: greedy.LaunchPaths, *, tokens: int, logprobs: bool) -> list[Answer]:
    """One launch's answers to the gate's prompts as the simulator serves them (chat, ignore_eos,
    ``TOP_LOGPROBS`` alternatives a token) and take_answers reads them."""
    out = []
    for prompt in DEFAULT_GATE_PROMPTS:
        planned, _ = textgen.plan_tokens(prompt, max_tokens=tokens, ignore_eos=True)
        served, path = paths.answer(prompt, planned, 0)
        if not logprobs:
            out.append(Answer(prompt, tuple(text for _, text in served), (), "length"))
            continue
        lps = []
        for i in range(len(served)):
            top = path.top(i, TOP_LOGPROBS)
            lps.append(TokenLogprob(top[0][0], top[0][1], dict(sorted(top, key=lambda kv: -kv[1]))))
        out.append(Answer(prompt, tuple(lp.token for lp in lps), tuple(lps), "length"))
    return out


class _GatedLauncher(nc._Launcher):
    """night_calibration's launcher with each set's own speed, its answers judged by the product's
    gate and its soak."""

    def __init__(self, box: Box, rng: np.random.Generator, night_key: str, hang_s: float,
                 study_dir: Path | None) -> None:
        super().__init__(box.cell(), rng, None, 0.0)
        self.box, self.night_key, self.hang_s, self.dir = box, night_key, hang_s, study_dir
        self.paths_rng = random.Random(f"{night_key}-paths")  # each launch's own nondeterminism

    def effect(self, env: dict[str, str]) -> float:
        name = env.get(nc.VARIABLE, "")
        return 1.0 + (BAD_GAIN if name in (CORRUPT, HANG) else CLEAN_GAIN if name == CLEAN else 0.0)

    def gated(self, kind: Kind, env: dict[str, str], name: str = "", *, recheck: bool = False,
              soak_s: float = 0.0) -> TrialRecord:
        rec = self.launch(kind, env, name, recheck=recheck)
        if soak_s:  # the soak comes last (tuner.sweep.trial._measure): the probe and the answers loaded it first
            rec.soak_s, rec.soak_concurrency = soak_s, [1]
            before = ((self.runs_wanted() + 1) * PROBE_TOKENS + len(DEFAULT_GATE_PROMPTS) * self.box.tokens) / EXPECTED_TOK_S
            if env.get(nc.VARIABLE) == HANG and self.hang_s < before + soak_s:
                rec.soak_s = max(self.hang_s - before, 0.0) + STALL_S
                rec.soak_failure = (f"no token for {STALL_S:g} s at concurrency 1 after {rec.soak_s - STALL_S:.0f} s "
                                    "of load; /health answered 200 while requests were stuck")
        if self.dir is None:
            return rec
        self.records.pop()  # check_answers runs before the store holds the launch (Sweep._relaunch)
        set_name = env.get(nc.VARIABLE)
        order = None if set_name is None else f"{set_name} of night {self.night_key}"  # each night's sets are its own
        paths = greedy.LaunchPaths(order, PROFILE.divergence_rate,
                                   PROFILE.launch_divergence_rate, set_name == CORRUPT, self.paths_rng)
        where = answers_path(self.dir, rec.trial)
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(answers_to_json(sim_answers(paths, tokens=self.box.tokens, logprobs=self.box.logprobs)))
        check_answers(rec, store=cast(StudyStore, _Store(self.records)), study_dir=self.dir,
                      host_type=nc.HOST_TYPE, log=lambda line: None)
        self.records.append(rec)
        return rec


def _space(order: Sequence[str]) -> SearchSpace:
    return SearchSpace(Path("gates.toml"), {}, [Preset(name, {nc.VARIABLE: name}) for name in order])


def play(box: Box, seed: int, index: int, *, gates: bool) -> GateNight:
    """Night ``index`` of ``box`` (its draws fixed by ``seed``, the box and the index; the same
    with the gates on and off), in the sweep's order (night_calibration's module docstring)."""
    key = [seed, zlib.crc32(repr(astuple(box)).encode()), index]
    rng = np.random.default_rng(key)
    order = [CORRUPT, HANG, CLEAN, *(f"null-{i:02d}" for i in range(1, box.k + 1))]
    order = [order[i] for i in np.random.default_rng([*key, 1]).permutation(len(order))]
    hang_s = 60.0 * float(np.random.default_rng([*key, 2]).uniform(*HANG_MIN))
    with tempfile.TemporaryDirectory(prefix="gate-night-") as tmp:
        night = _GatedLauncher(box, rng, repr(key), hang_s, Path(tmp) if gates else None)
        return _play(box, night, _space(order), soak_s=box.soak_min * 60.0 if gates else 0.0)


def _play(box: Box, night: _GatedLauncher, space: SearchSpace, *, soak_s: float) -> GateNight:
    records = night.records
    planner = Planner(space, "presets", records=lambda: list(records), busy_keys=set, problems=lambda env: [],
                      baseline_every=box.baseline_every, trials=box.trials)
    first = night.gated(Kind.BASELINE, {})
    nc.first_stage(planner, records, first, night.gated)
    for check in planner.reserved:  # Sweep._confirm per slot, then Sweep._final_baseline
        if check is Step.CONFIRM:
            j = nc._judgement(records)
            entry = planner.confirmation(j)
            if entry is not None:
                confirmed = next(s for s in j.sets.values() if s.first_trial == entry.equals_trial)
                night.gated(entry.kind, entry.env, entry.name, soak_s=0.0 if confirmed.confirm_trials else soak_s)
        elif final_baseline_owed([r for r in records if r.kind is Kind.BASELINE], records, nc.HOST_TYPE):
            soaked = any(r.kind is Kind.CONFIRM and r.soak_s is not None for r in records)
            night.gated(Kind.BASELINE, {}, recheck=True, soak_s=soak_s if soaked else 0.0)
    j = nc._judgement(records)
    df = trials_frame(records, min_effect=nc.stats.DEFAULT_MIN_EFFECT, metric=nc.METRIC, judgement=j)
    paragraph = verdict_paragraph(df, StudyInfo(metric=nc.METRIC), judgement=j)
    row = confirmed_row(df, j)
    use_env = dict(row["env"]) if row is not None else None
    outcome = nc.outcome_of(paragraph, use_env, {nc.VARIABLE: CLEAN})
    use = (use_env or {}).get(nc.VARIABLE, "?") if nc.USE_IT in paragraph else ""
    sets = [r for r in records if r.kind is not Kind.BASELINE]
    clean = [r for r in sets if r.env.get(nc.VARIABLE) != CORRUPT]
    corrupt = [r for r in sets if r.env.get(nc.VARIABLE) == CORRUPT]
    soaks = [r for r in records if r.soak_s is not None]
    return GateNight(use, outcome, sum(r.status is Status.WRONG_OUTPUT for r in clean),
                     sum(bool(r.answers_diverge) and r.status is not Status.WRONG_OUTPUT for r in sets), len(sets),
                     len(corrupt), sum(r.status is Status.WRONG_OUTPUT for r in corrupt), len(soaks),
                     sum(bool(r.soak_failure) for r in soaks), len(records), sum(r.soak_s or 0.0 for r in soaks),
                     sum(r.env.get(nc.VARIABLE) in (CORRUPT, HANG) for r in sets),
                     any(r.env.get(nc.VARIABLE) == CLEAN for r in sets))


def _chunk(args: tuple[Box, int, range, bool]) -> list[GateNight]:
    box, seed, indices, gates = args
    return [play(box, seed, i, gates=gates) for i in indices]


def play_nights(box: Box, nights: int, seed: int, *, gates: bool, jobs: int = 1) -> list[GateNight]:
    """``nights`` nights (the same results whatever ``jobs``: each night's draws are its own)."""
    if jobs <= 1:
        return _chunk((box, seed, range(nights), gates))
    step = math.ceil(nights / jobs)
    work = [(box, seed, range(i, min(i + step, nights)), gates) for i in range(0, nights, step)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return [n for part in pool.map(_chunk, work) for n in part]


@dataclass(frozen=True)
class Figures:
    """The rates over a batch of nights (fractions of nights unless said)."""

    nights: int
    use_corrupt: float
    use_hang: float
    use_clean: float
    use_null: float
    clean_flagged: float
    parted_within: float  # of set launches
    corrupt_caught: float  # of the corrupting set's launches
    soak_failed_hang: float  # nights whose hanging set was soaked and failed
    relaunches: float
    soak_min: float  # mean soak minutes a night
    faulty_launches: float  # mean launches a night the two faulty sets took
    clean_reached: float  # nights whose first stage reached the +10 % set


def figures(played: Sequence[GateNight]) -> Figures:
    n = len(played)
    share = lambda f: sum(1 for p in played if f(p)) / n  # noqa: E731
    launches = sum(p.set_launches for p in played)
    corrupt = sum(p.corrupt_launches for p in played)
    return Figures(n, share(lambda p: p.use == CORRUPT), share(lambda p: p.use == HANG),
                   share(lambda p: p.use == CLEAN), share(lambda p: p.use.startswith("null")),
                   share(lambda p: p.clean_flagged > 0),
                   sum(p.parted_within for p in played) / launches if launches else math.nan,
                   sum(p.corrupt_flagged for p in played) / corrupt if corrupt else math.nan,
                   share(lambda p: p.soaks_failed > 0), statistics.mean(p.relaunches for p in played),
                   statistics.mean(p.soak_s for p in played) / 60.0,
                   statistics.mean(p.faulty_launches for p in played), share(lambda p: p.clean_reached))


def table(rows: Sequence[tuple[str, Figures]]) -> str:
    """One line per batch: the rates in % and the costs."""
    head = (f"{'':<28}{'use corrupt':>12}{'use hang':>9}{'use +10%':>9}{'use null':>9}{'clean flagged':>14}"
            f"{'parted ok':>10}{'caught':>7}{'soak fail':>10}{'relaunches':>11}{'soak min':>9}{'faulty':>7}{'+10% run':>9}")
    lines = [head]
    for name, f in rows:
        lines.append(f"{name:<28}{f.use_corrupt:>12.1%}{f.use_hang:>9.1%}{f.use_clean:>9.1%}{f.use_null:>9.1%}"
                     f"{f.clean_flagged:>14.1%}{f.parted_within:>10.1%}{f.corrupt_caught:>7.1%}"
                     f"{f.soak_failed_hang:>10.1%}{f.relaunches:>11.1f}{f.soak_min:>9.1f}{f.faulty_launches:>7.1f}"
                     f"{f.clean_reached:>9.1%}")
    return "\n".join(lines)


def targets(f: Figures) -> list[str]:
    """Issue 34's targets on the gated nights, each ``met`` or ``MISSED``."""
    checks = [("a faster set that corrupts answers recommended 0 times", f.use_corrupt == 0, f.use_corrupt),
              ("a faster set that hangs within the soak recommended 0 times", f.use_hang == 0, f.use_hang),
              ("clean sets flagged by the correctness gate in at most 1 % of nights", f.clean_flagged <= 0.01,
               f.clean_flagged),
              ("a clean +10 % set recommended in at least 80 % of nights", f.use_clean >= 0.80, f.use_clean)]
    return [f"{'met' if ok else 'MISSED':>6}: {what} ({value:.1%} of {f.nights})" for what, ok, value in checks]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nights", type=int, default=300, help="nights per box (default 300)")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--jobs", type=int, default=1, help="nights in this many processes (same results)")
    ap.add_argument("--tau", type=float, action="append",
                    help="launch noise (fraction; repeatable; default: 0.01 and 0.02 with logprobs, 0.01 without)")
    ap.add_argument("--out", type=Path, help="also write the results here (e.g. benchmarks/results/gate_nights.txt)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    lines = [f"$ python benchmarks/gate_nights.py {shlex.join(argv if argv is not None else sys.argv[1:])}",
             f"seed {args.seed}, {args.nights} nights per row; rates in % of nights (parted ok: of set launches; "
             "caught: of the corrupting set's launches; +10% run: nights whose first stage launched it); relaunches, "
             "soak minutes and faulty-set launches: mean a night",
             f"sets a night (order drawn per night): {CORRUPT} (+15 %, corrupts answers), {HANG} (+15 %, hangs after "
             f"{HANG_MIN[0]:g}-{HANG_MIN[1]:g} min of load), {CLEAN} (clean +10 %), k no-effect clean sets; answers: "
             f"pcie-8x-gates' rates (a set's order parts {PROFILE.divergence_rate:.1%} of 300-token answers, a launch "
             f"{PROFILE.launch_divergence_rate:.1%})", ""]
    boxes = ([Box(tau=tau) for tau in args.tau] if args.tau
             else [Box(0.01), Box(0.02), Box(0.01, logprobs=False), Box(0.01, k=4)])
    for box in boxes:
        lines.append(box.label())
        gated = figures(play_nights(box, args.nights, args.seed, gates=True, jobs=args.jobs))
        bare = figures(play_nights(box, args.nights, args.seed, gates=False, jobs=args.jobs))
        lines += [table([("gates on", gated), ("gates off (speed alone)", bare)]), *targets(gated),
                  f"cost of the gates: {len(DEFAULT_GATE_PROMPTS)} prompts x {box.tokens} tokens a launch (about "
                  f"{len(DEFAULT_GATE_PROMPTS) * box.tokens / EXPECTED_TOK_S:.0f} s at {EXPECTED_TOK_S:g} tok/s, "
                  f"{gated.relaunches * len(DEFAULT_GATE_PROMPTS) * box.tokens / EXPECTED_TOK_S / 60:.1f} min a night), "
                  f"{gated.soak_min:.1f} min of soak a night; relaunches {gated.relaunches:.1f} (off: {bare.relaunches:.1f})",
                  ""]
    lines.append(f"{time.perf_counter() - t0:.0f} s")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
