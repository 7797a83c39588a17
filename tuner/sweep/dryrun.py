"""``nccl-tune sweep CONFIG --dry-run``: the night's plan, checked, with nothing launched.

Before a 36-minute load, a user sees which NCCL release's rules checked the values, what every
candidate value means to NCCL (its canonical form, a value equal to NCCL's default, clamps),
which environment every launch gets, and the relaunches in the order the sweep will make them:
planning's forecast (:func:`tuner.planning.forecast`, the same planner the sweep asks), with
the skips and their reasons, what only the night decides given with its bound (``up to F
triage fix sets``, ``up to k screened sets``, ``up to k proposals``) and how the budget is
spent, the reserved checks' slots inside it (``Budget: 12 relaunches: the baseline, up to 8
sets, 2 confirmations (...), the final baseline``: every relaunch counts), the P2P health of
this host (:func:`tuner.sweep.p2p.plan_p2p_lines`: each gate that blocks P2P with its documented
fix), and the night's clock
(:class:`tuner.planning.NightClock`: a relaunch's time by phase, the duration, the expected end
and, with ``--until``/``--timeout``, which relaunches fit with the reserved checks' time kept, by
the sweep's own limits, :class:`tuner.planning.NightLimits`).
This module only words that plan. Values NCCL would reject or silently ignore never get here: loading the
files refuses them, all at once, with the reason (exit 2).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from tuner.inputs import BACKEND_SPACE, ExperimentConfig, SearchSpace, backend_space_path, load_space
from tuner.launchers import launcher_of
from tuner.nccl import (
    DEBUG_FILE_VAR,
    OLDEST_SUPPORTED,
    TRIAL_PATTERN,
    canonical_set,
    canonical_value,
    default_p2p_level,
    local_gpus,
    risky_reason,
    unsafe_reason,
)
from tuner.planning import (
    Budget,
    Facts,
    NightClock,
    NightLimits,
    Plan,
    PlanEntry,
    Rules,
    SamplerView,
    Step,
    clock_budget,
    deadline_at,
    deadline_name,
    forecast,
    reach,
    reach_lines,
    relaunch_time,
    rules_before_the_night,
    unused_line,
)
from tuner.record import StudyInfo, TrialRecord
from tuner.redaction import redact
from tuner.server import nodes_plan, split_inherited
from tuner.servers import BACKEND_SERVERS
from tuner.study import dry_run_lines
from tuner.sweep.evidence import debug_env, debug_file
from tuner.sweep.p2p import plan_p2p_lines

__all__ = ["p2p_default_line", "plan_lines"]

#: The servers' tensor-parallel flags (vLLM ``--tensor-parallel-size``/``-tp``, SGLang ``--tp-size``/``--tp``).
_TP_FLAGS = ("--tensor-parallel-size", "-tp", "--tp", "--tp-size")


def _tp_size(argv: tuple[str, ...] | list[str]) -> int | None:
    """The tensor-parallel size the server command gives, None when it gives none."""
    for i, arg in enumerate(argv):
        key, sep, val = arg.partition("=")
        text = val if sep and key in _TP_FLAGS else (argv[i + 1] if arg in _TP_FLAGS and i + 1 < len(argv) else None)
        if text is not None and text.isdigit():
            return int(text)
    return None


def p2p_default_line(facts: Facts, tp_size: int | None = None) -> str:
    """One line: NCCL's default NCCL_P2P_LEVEL as known before the night, e.g. ``NCCL_P2P_LEVEL
    default here: PXB (NCCL 2.27.3, AMD, 8 GPUs; src/graph/paths.cc ncclTopoCheckP2p)``, or
    that it is not known yet. Judged from ``facts`` (the NCCL version, the CPU: the topology's,
    else ``[nccl] cpu_vendor``) and the GPUs per node: the topology's, else ``tp_size`` (the
    server's tensor-parallel size), by :func:`tuner.nccl.default_p2p_level` (an unknown version
    is known only where every supported release agrees)."""
    gpus = local_gpus(facts.topology) if facts.topology is not None else tp_size
    level = default_p2p_level(facts.version, facts.cpu, gpus)
    if level is None:
        missing = [what for what, known in (("[nccl] version", facts.version is not None),
                                            ("[nccl] cpu_vendor", facts.cpu is not None),
                                            ("the GPU count (a --tensor-parallel-size in the server command)",
                                             gpus is not None)) if not known]
        return ("NCCL_P2P_LEVEL default here: not known yet (it needs " + " and ".join(missing or ["the baseline"])
                + "; the baseline will tell)")
    nccl = f"NCCL {facts.version}" if facts.version is not None else "every supported NCCL"
    cpu = facts.cpu or "any CPU"
    count = f"{gpus} GPUs" if gpus is not None else "any GPU count"
    return f"NCCL_P2P_LEVEL default here: {level} ({nccl}, {cpu}, {count}; src/graph/paths.cc ncclTopoCheckP2p)"


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(untuned)"


def plan_lines(cfg: ExperimentConfig, space: SearchSpace, *, allow_unsafe: bool = False,
               mode: str | None = None, trials: int | None = None, baseline_every: int | None = None,
               confirm: bool = True, final_baseline: bool = True, study_dir: Path | None = None,
               environ: dict[str, str] | None = None, timeout_s: float | None = None,
               until: datetime | None = None, records: Sequence[TrialRecord] = (),
               now: float | None = None, info: StudyInfo | None = None, force: bool = False) -> list[str]:
    """The plan as printable lines (see the module docstring). ``trials``, ``mode`` and
    ``baseline_every`` override the config's like the sweep's options; ``study_dir``: where a
    ``diagnose.json`` of the study may be (the sweep reads the same one); ``timeout_s`` (s) and
    ``until`` the sweep's deadline options, counted from ``now`` (Unix s; default: now);
    ``records``: the study's stored relaunches, whose measured phases time the night; ``info``:
    the stored study's info, whose first baseline may have shown who carries the decode
    allreduce (:func:`backend_lines`; ``force``: --force)."""
    version = cfg.nccl.nccl_version
    rules_text = (f"NCCL {version} ([nccl] version)" if version else
                  f"NCCL {OLDEST_SUPPORTED}, the oldest supported (set [nccl] version, or the baseline's "
                  "log gives the real one)")
    out = [f"Values checked by the rules of {rules_text}; nothing is launched (--dry-run)."]
    removed, kept = split_inherited(environ if environ is not None else dict(os.environ), frozenset(space.choices()))
    every = {**cfg.server.env, **debug_env(cfg)}
    if cfg.nccl.debug and DEBUG_FILE_VAR not in cfg.server.env and debug_file(cfg, Path("trial-0000.log")):
        every[DEBUG_FILE_VAR] = f"<study>/logs/trial-NNNN.nccl/{TRIAL_PATTERN}"
    out.append("Every launch, the baseline included: " + (_env_text(redact(every)) if every else "no added variable")
               + (f"; inherited {', '.join(removed)} removed" if removed else "")
               + (f"; inherited hardware selectors {', '.join(kept)} kept" if kept else "") + ".")
    launcher = launcher_of(cfg.server.argv(), environ)  # how the set reaches the server: a container's -e
    said = launcher.plan(sorted(every), sorted(n for n in space.choices() if not n.startswith("-")))
    if said:
        out.append(f"Launcher: {said}.")
    out += nodes_plan(cfg.server)  # a server spanning nodes: which, how launched
    out += dry_run_lines(cfg, environ)  # the GPUs, and any live worker or process on them
    notes = [*cfg.notices, *space.notices]
    if notes:
        out.append("Notes:")
        out += [f"  - {n}" for n in notes]
    if space.variables:  # a presets-only space has no candidate values, only its presets below
        out.append("Candidate values as NCCL reads them:")
    for name, values in space.variables.items():
        shown = []
        for v in values:
            canon = canonical_value(name, v, version) if not name.startswith("-") else v
            if canon == "":
                shown.append(f"{v} (= NCCL's default: same as unset)")
            elif canon != v:
                shown.append(f"{v} (NCCL reads {canon})")
            else:
                shown.append(v)
        out.append(f"  {name}: unset, " + ", ".join(shown))
    mode = mode or cfg.sweep.mode
    every_k = baseline_every if baseline_every is not None else cfg.sweep.baseline_every
    rules = rules_before_the_night(cfg, study_dir, allow_unsafe=allow_unsafe)
    out.append(p2p_default_line(rules.facts(), _tp_size(cfg.server.command)))
    out += plan_p2p_lines(version, cfg.server.env)  # what this host shows about P2P, before the night
    at = time.time() if now is None else now
    top_k = cfg.screen.top_k if cfg.screen else None
    budget, budget_said = _budget(cfg, space, rules, trials=trials, mode=mode, every_k=every_k, top_k=top_k,
                                  confirm=confirm, final_baseline=final_baseline, records=records,
                                  deadline=deadline_at(at, timeout_s, until), words=deadline_name(timeout_s, until, at),
                                  now=at)
    plan = forecast(space, rules, mode=mode, budget=budget, baseline_every=every_k, screen_top_k=top_k, confirm=confirm,
                    final_baseline=final_baseline, reference=cfg.gates.answers and cfg.gates.reference)
    if rules.decode is not None:
        d, facts = rules.decode, rules.facts()
        gpus = f" on {facts.topology.nranks} GPUs" if facts.topology is not None else ""
        out.append(f"Planned with what {d.source} found: NCCL {facts.version or '(not logged)'}{gpus}; "
                   + d.judgement() + ".")
        if d.why:
            out.append(f"  The sizes: {d.why}.")
    out += backend_lines(info, cfg, space, force=force) if info is not None else []
    out += _relaunch_lines(plan, cfg, notes, every_k)
    proposals = next((e for e in plan.entries if e.step is Step.PROPOSAL), None)
    if proposals is None:
        out.append("Mode presets: the sampler proposes nothing after them.")
    elif plan.sampler is not None:
        out.append(_sampler_line(proposals, plan.sampler, every_k))
    out.append(f"Budget: {budget_said}{plan.budget_words()}.")
    out.append("  Every relaunch counts, re-measures and confirmations too"
               + ("; the finalists' confirmations and the final baseline right after them keep their slots at the end"
                  if plan.slots is None or plan.slots.reserved else "; no check keeps a slot here")
               + "; a baseline launch found to be an outlier is re-measured once, in a set's slot.")
    out.append(_soak_line(cfg, confirm=confirm))
    out += _clock_lines(plan, cfg, records, timeout_s, until, at, unused=not budget_said)
    limits = NightLimits.of(plan.slots or Budget(plan.budget), at, timeout_s, until)
    found = reach(space, rules, budget=budget, baseline_every=every_k, screen_top_k=top_k, confirm=confirm,
                  final_baseline=final_baseline)
    out += reach_lines(found, relaunch_time(cfg, records), at, limits)
    if any(unsafe_reason(n, v, version=version) for n, vs in space.variables.items() for v in vs):
        out.append("Unsafe values are in the space (--allow-unsafe): they can corrupt data or hang.")
    risky = [why for n, vs in space.variables.items() for v in vs if (why := risky_reason(n, v, version, rules.facts().topology))]
    if risky:
        out.append("Risky but reversible values are in the space (a trial that hangs is torn down and recorded as failed):")
        out += [f"  - {why}" for why in risky]
    return out


def _soak_line(cfg: ExperimentConfig, *, confirm: bool) -> str:
    """What the soak gate does on this night (tuner.sweep.soak), or that it is off."""
    minutes = cfg.sweep.soak_minutes
    if not minutes:
        return "Soak: off (sweep.soak_minutes = 0): a set is recommended on its speed and checks alone."
    if not confirm:
        return "Soak: none (--no-confirm): only a finalist's confirmation runs it."
    levels = ",".join(map(str, cfg.probe.concurrency or (1,)))
    return (f"Soak: {minutes:g} min at concurrency {levels} after each confirmation's probe, on the same launch "
            "(sweep.soak_minutes, --soak): a stall of probe.stall_timeout_s, a watchdog line in the server's log "
            "or a request that fails makes the set 'failed soak', never recommended; the final baseline gets "
            "the same soak where the time allows, so a machine that hangs anyway is not blamed on the set.")


def backend_lines(info: StudyInfo, cfg: ExperimentConfig, space: SearchSpace, *, force: bool) -> list[str]:
    """What the night does after its baseline when the stored study's first baseline showed that
    NCCL does not carry the decode allreduce (the sweep's rule, :func:`tuner.sweep.lessons.backend_check`):
    with the server known, it measures the server's backend space first; else it stops (exit 5)
    unless --force or the space varies a server flag. Empty when NCCL carries it or that is not known."""
    if info.allreduce_nccl_on_decode_path is not False:
        return []
    head = f"The stored study's first baseline showed NCCL does not carry the decode allreduce ({info.allreduce_backend})"
    if info.allreduce_backend != "none" and info.allreduce_server in BACKEND_SERVERS:
        path, found = backend_space_path(info.allreduce_server, cfg.path)
        if found:
            names = [p.name for p in load_space(path, allow_unsafe=True).presets]
            return [f"{head}: the night measures {info.allreduce_server}'s backend space {path} first "
                    f"({', '.join(names)}), then the space's NCCL sets, whose variables cannot act at decode."]
    if any(n.startswith("-") for n in space.choices()) or force:
        return [f"{head}: the night sweeps on (the space varies a server flag)."]
    return [f"{head}: the night stops after its baseline (exit 5), naming the backend space to measure "
            f"({' or '.join(BACKEND_SPACE.format(server=s) for s in BACKEND_SERVERS)})."]


def _budget(cfg: ExperimentConfig, space: SearchSpace, rules: Rules, *, trials: int | None, mode: str, every_k: int,
            top_k: int | None, confirm: bool, final_baseline: bool, records: Sequence[TrialRecord],
            deadline: float | None, words: str, now: float) -> tuple[int, str]:
    """The budget the night plans with, and how it was set (``""``: given, by ``--trials`` or
    ``sweep.trials``, or the default without a deadline). With a deadline and no trials given it
    is what fits (:func:`tuner.planning.budget_that_fits`), in presets mode at most what reaches
    every preset; before a relaunch's time is known the default, said to be replaced once the
    first launch measures it (the sweep's rule, tuner/sweep/runner.py)."""
    if trials is not None or cfg.sweep.trials_given or deadline is None:
        return trials or cfg.sweep.trials, ""
    budget, fits = clock_budget(space, rules, relaunch_time(cfg, records), now, deadline, mode=mode,
                                baseline_every=every_k, screen_top_k=top_k, confirm=confirm,
                                final_baseline=final_baseline)
    if budget is None:
        return cfg.sweep.trials, (f"what fits before {words}, counted once the first launch measures a relaunch's time "
                                  "(no --trials or sweep.trials given; set server.expected_load_s and "
                                  f"probe.expected_tok_s to count it now); planned here at {cfg.sweep.trials}: ")
    if budget != fits:
        return budget, (f"what reaches every preset, less than what fits before {words} ({fits}; no --trials or "
                        "sweep.trials given): ")
    return budget, f"what fits before {words} (no --trials or sweep.trials given): "


def _clock_lines(plan: Plan, cfg: ExperimentConfig, records: Sequence[TrialRecord], timeout_s: float | None,
                 until: datetime | None, now: float, *, unused: bool = True) -> list[str]:
    """The night's clock (:class:`tuner.planning.NightClock`), as the sweep's start prints it;
    ``unused``: with the time the budget leaves unused before the deadline."""
    limits = NightLimits.of(plan.slots or Budget(plan.budget), now, timeout_s, until)
    clock = NightClock(relaunch_time(cfg, records), now, plan.stage1(), plan.checks, deadline=limits.deadline,
                       first_free=True)
    lines = clock.lines(limits.deadline_words)
    slots = plan.slots or Budget(plan.budget)
    left = unused_line(clock, limits, confirm=slots.confirm, final_baseline=slots.final_baseline) if unused else ""
    out = ["Clock: " + lines[0], *(f"  {line}" for line in lines[1:]), *([f"  {left}"] if left else [])]
    if cfg.screen is not None:
        out.append(f"  Not counted: the screen's up to {cfg.screen.trials} nccl-tests runs after the baseline (seconds "
                   f"each, at most {cfg.screen.timeout_s:g} s each; none starts past the deadline less the reserved "
                   "checks' time).")
    return out


#: The reserved checks, which the numbered list leaves to the budget's line.
_RESERVED_WORDS = {Step.CONFIRM: "a confirmation", Step.FINAL_BASELINE: "the final baseline re-measure"}


def _relaunch_lines(plan: Plan, cfg: ExperimentConfig, notes: list[str], every_k: int) -> list[str]:
    out: list[str] = []
    n = 0
    for e in plan.entries:
        if e.step in (Step.PROPOSAL, *_RESERVED_WORDS):
            continue
        first = n + 1
        n += e.up_to or 1
        number = f"{first}-{n}" if n > first else f"{first}"
        if e.step is Step.BASELINE:
            out.append(f"Relaunches in order: {number}. the untuned baseline")
        elif e.step is Step.REFERENCE:
            flags = " ".join(cfg.server.server_kind().reference_flags)
            out.append(f"  {number}. the correctness gate's reference check: the baseline with NCCL_P2P_DISABLE=1"
                       + (f" {flags}" if flags else "") + " (its answers against the baseline's; [gates] reference = "
                       "false skips it)")
        elif e.step is Step.REMEASURE:
            out.append(f"  {number}. baseline re-measure (every {every_k} relaunches"
                       + (f"; {e.reason})" if e.reason else ")"))
        elif e.step is Step.FIXES:
            bound = plan.fixes.text() if plan.fixes is not None else ""
            out.append(f"  {number}. up to {e.up_to} triage fix set{'s' if e.up_to != 1 else ''}: decided by the "
                       "baseline's NCCL log (its GRAPH and transport lines: where NCCL's model of the machine looks "
                       "wrong), relaunched before the sets below; each one relaunched pushes the last planned set "
                       "out of the budget; a preset NCCL treats as one of them is not relaunched"
                       + (f"; {bound}" if bound else "") + (f"; {e.reason}" if e.reason else ""))
        elif e.step is Step.SCREENED:
            runs = cfg.screen.trials if cfg.screen else 0
            out.append(f"  {number}. up to {e.up_to} screened set{'s' if e.up_to != 1 else ''}: the best of up to "
                       f"{runs} nccl-tests runs at the decode size (seconds each, outside the budget); a preset "
                       "NCCL treats as one of them is not relaunched" + (f"; {e.reason}" if e.reason else ""))
        else:
            sets = " ".join(([_env_text(e.env)] if e.env or not e.flags else []) + e.flags)  # a flag-only preset too
            out.append(f"  {number}. {e.name}: {sets}{_suffix(e, notes, plan)}")
    return out


def _suffix(e: PlanEntry, notes: list[str], plan: Plan) -> str:
    if e.step is Step.SKIP:
        at = f" at {plan.rules.decode.sizes_text()}" if plan.rules.decode is not None else ""
        text = f" - skipped: to NCCL{at} the same set as {e.equals}" if e.equals else f" - skipped: {e.reason}"
        return text + (f" - {e.reach}" if e.reach else "")  # past the budget the night judges nothing
    f = plan.rules.facts()
    as_read = canonical_set(e.env, f.version, f.topology)
    text = f" (to NCCL: {_env_text(as_read)})" if as_read != e.env else ""
    if e.doubt:
        if e.doubt.startswith("needs NCCL"):  # tuner.nccl.version_doubts: said as it is
            text += f" - {e.doubt}"
        else:
            text += (" - may not be launched (see Notes): the baseline's NCCL version and topology decide"
                     if any(e.doubt in note for note in notes) else f" - may not be launched: {e.doubt}")
    if e.reach:
        text += f" - {e.reach}"
    return text


def _sampler_line(proposals: PlanEntry, view: SamplerView, every_k: int) -> str:
    k = proposals.up_to or 0
    bound = (f"up to {k} proposal{'s' if k != 1 else ''}" + (f" (a baseline re-measure every {every_k} relaunches)"
                                                             if every_k else "")
             if k else "no proposal, the sets above spend the budget")
    counts = ", ".join(f"{n}: {_values(c)}" for n, c in view.values.items())
    if view.distinct is None:
        return f"Then the sampler (TPE): {bound}; it draws from {view.points} points (too many to count distinct sets here)."
    return (f"Then the sampler (TPE): {bound}; it draws from {view.points} points of {len(view.values)} variables "
            f"({counts}, each also unset): {view.distinct} distinct sets to NCCL, {view.fresh} not already planned above"
            + (f"; the presets' values of {', '.join(view.widened)} are in it too (one Optuna distribution per "
               "variable holds every value a trial used)" if view.widened else "") + ".")


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"
