"""``--dry-run``'s first minute of the night: every check the sweep makes before its first launch
that needs no server, made by the sweep's own functions, with what ran and what could not.

The sweep, before its first launch: loads the experiment file and the space (every key, the
command's placeholders, its program on PATH, every value and NCCL file as NCCL reads them), holds
``server.env`` and the budget to the space (``tuner/cli.py``), then the checks of
:func:`tuner.server.preflight.checks` (the port the command passes, the model path, the GPUs,
``server.env``'s NCCL files, the results folder, the disk), the heartbeat settings, no live runner
of the study on this host and port (:meth:`tuner.study.RunnerFile.claim`), and nothing answering
on the port (:func:`tuner.server.preflight.port_held`), then no stranger's process on its GPUs
(:func:`before_first_launch`, the sweep's own). :func:`start_checks` makes each of them
the same way and refuses what the sweep refuses, with its exit status: InputError (2),
MachineNotClean (3).

Where the server's program is not found (``vllm`` on a laptop), this is not taken for the
night's host: what belongs to the machine (:attr:`tuner.server.preflight.Check.on_host`: the
model path, the GPUs, the disk, the results folder, the port) is reported, not refused, and
the lines say what was not checked and that the sweep checks it there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import InputError, MachineNotClean
from tuner.inputs import ExperimentConfig, SearchSpace
from tuner.launchers import launcher_of
from tuner.planning import Budget
from tuner.server import behind_lines, preflight, settings_behind
from tuner.study import RunnerFile, check_processes, gpus_of, heartbeat_settings, hide_password

__all__ = ["before_first_launch", "budget_words", "start_checks"]


def before_first_launch(cfg: ExperimentConfig, study_dir: Path, log: Callable[[str], None],
                        varied: Collection[str] = ()) -> None:
    """The sweep's checks before its first launch (after its recovery): refuse what would only
    show after ``ready_timeout_s`` (InputError with every problem), say what only might (the
    NCCL settings the server sees that no launch sets: :func:`tuner.server.settings_behind`,
    loudly where the space ``varied`` varies one), and refuse to start when the port already
    answers (MachineNotClean, naming who holds it) or NVML lists a compute process on its GPUs
    that is not this runner's (GpusInUse)."""
    preflight.check(cfg, study_dir)
    said = launcher_of(cfg.server.argv()).plan(sorted(cfg.server.env))
    if said:
        log(f"launcher: {said}")
    for line in behind_lines(settings_behind(cfg.server, varied=varied), varied, cfg.server.env):
        log(line)
    for warning in preflight.warnings(cfg.server):
        log(f"warning: {warning}")
    check_processes(gpus_of(cfg))  # after the recovery: a server this study's dead runner left is gone
    held = preflight.port_held(cfg.server)
    if held:
        raise MachineNotClean(held)


@dataclass
class StartChecks:
    """What :func:`start_checks` found, as ``--dry-run`` prints it (:meth:`lines`): ``passed``
    and ``unchecked`` (each what was looked at, in words), ``elsewhere`` (checks of the machine
    not judged here, with what this machine showed), ``warnings`` (the sweep's own words),
    ``missing`` (a program not found, with what that leaves unchecked) and ``off_host`` (why
    this is not taken for the night's host, e.g. ``vllm is not on PATH``; empty: it is) and
    ``behind`` (the NCCL settings the server will see that no launch sets, the sweep's words)."""

    passed: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    off_host: str = ""
    behind: list[str] = field(default_factory=list)

    @property
    def on_host(self) -> bool:
        """True when every program was found: this is taken for the night's host."""
        return not self.off_host

    def lines(self) -> list[str]:
        """The checks as printable lines: a heading, one line per check, and the outcome."""
        out = ["Checks the sweep makes before its first launch, made here:"]
        out += [f"  passed: {text}" for text in self.passed]
        out += [f"  warning: {text}" for text in self.warnings]
        out += [f"  {text}" for text in self.behind]
        out += [f"  not checked: {text}" for text in [*self.missing, *self.unchecked]]
        if self.elsewhere:
            out.append(f"  not judged here ({self.off_host}, so this is not taken for the night's host; the sweep "
                       "checks these there before its first launch):")
            out += [f"    - {text}" for text in self.elsewhere]
        if not self.on_host:
            out.append("Nothing that can be checked off the night's host failed.")
        elif self.unchecked:
            out.append("Nothing failed; what could not be checked here is listed above.")
        else:
            out.append("Nothing failed: the night can start.")
        return out


def _missing_words(key: str, program: str) -> str:
    """What a program not found leaves unchecked, and what the sweep does about it."""
    if key.startswith("screen"):
        return (f"{program} is not on PATH: the screen's nccl-tests runs were not tried; the sweep refuses to start "
                "where it is not found (exit 2)")
    return (f"{program} is not on PATH: the server's version and flags were not checked; the sweep will: it refuses "
            f"to start where {program} is not found (exit 2), and its baseline launch tries the flags and logs the "
            "version")


def budget_words(trials: int | None, confirm: bool, final_baseline: bool, *, reference: bool = False,
                 remeasured: bool = False) -> tuple[str, str]:
    """What the budget holds, as a passed check, and a warning when it holds no tuned set (``""``
    otherwise): never that it holds a set when its first stage is the baseline alone.
    ``reference``: the correctness gate's reference check takes a first-stage slot (as
    :class:`tuner.planning.budget.Budget` counts it); ``remeasured``: the night re-measures the
    baseline between sets (``baseline_every`` > 0), whose re-measures share the sets' slots. How
    many re-measures come is the plan's to say (the dry run's Budget line): the slots are then
    given as shared, so the two lines add up instead of contradicting each other."""
    if trials is None:
        return "the budget: what fits before the deadline (no --trials or sweep.trials given)", ""
    budget = Budget(trials, confirm, final_baseline, reference)
    checks = " and the reserved checks" if budget.reserved else ""
    first = "the baseline, the reference check" if reference else "the baseline"
    sets = budget.screening - 1 - int(reference)
    if sets > 1 and remeasured:
        return f"the budget of {trials} relaunches holds {first}, {sets} slots for sets and baseline re-measures{checks}", ""
    if sets > 0:
        return f"the budget of {trials} relaunches holds {first}, up to {sets} set{'s' if sets != 1 else ''}{checks}", ""
    return (f"the budget of {trials} relaunches holds {first}{checks}",
            f"the budget of {trials} relaunches holds no tuned set: the night measures the untuned baseline only "
            f"(--trials {trials + 1 - sets} leaves room for one set)")


def start_checks(cfg: ExperimentConfig, space: SearchSpace, results: Path, *, study: str | None,
                 trials: int | None, storage: str | None = None, environ: Mapping[str, str] | None = None,
                 confirm: bool = True, final_baseline: bool = True, baseline_every: int | None = None) -> StartChecks:
    """Make the sweep's checks before its first launch (see the module docstring) on ``cfg``
    and ``space`` (loaded without the program check: ``load_config(check_program=False)``; the
    budget and ``server.env`` already held to the space), ``results`` (``--results``), the
    study ``study`` (None: a name the sweep would refuse, so no runner file is looked for),
    ``trials`` (the budget, in relaunches, with ``confirm``, ``final_baseline`` and
    ``baseline_every`` as the sweep's options, the last None for ``sweep.baseline_every``; None:
    what fits before the deadline, no trials given) and ``storage`` (``--storage``; never opened here).
    Writes nothing. Raises InputError (exit 2) with every refusal at once, then MachineNotClean
    (exit 3) for a live runner of the study on this host and port or a port that answers, in
    the sweep's order and words; off the night's host (a program not found) the machine's
    checks are reported instead."""
    env = dict(os.environ if environ is None else environ)
    found = StartChecks()
    for prog in preflight.program_checks(cfg):
        if prog.problem:
            found.missing.append(_missing_words(prog.key, str(prog.value)))
            found.off_host = found.off_host or f"{prog.value} is {prog.problem}"
        else:
            found.passed.append(prog.what)
    checks = preflight.checks(cfg, results, env, [n for n in space.choices() if not n.startswith("-")],
                              f"the search space {space.path}")
    refused = [c.error(str(cfg.path)) for c in checks if c.problem and (found.on_host or not c.on_host)]
    if refused:
        raise InputError.combine(refused)
    heartbeat_settings(env)  # a bad test setting is refused as the sweep refuses it
    every = cfg.sweep.baseline_every if baseline_every is None else baseline_every
    held, no_set = budget_words(trials, confirm, final_baseline, reference=cfg.gates.answers and cfg.gates.reference,
                                remeasured=every > 0)
    found.passed[:0] = [f"the experiment file and {space.path}: every key, the command's placeholders and every value "
                        "as NCCL reads it (above)", f"server.env fixes no variable the space varies; {held}"]
    found.warnings += [no_set] if no_set else []
    for c in checks:
        if c.unchecked:
            (found.unchecked if found.on_host or not c.on_host else found.elsewhere).append(f"{c.what}: {c.unchecked}")
        elif found.on_host or not c.on_host:
            found.passed.append(c.what)
        else:
            found.elsewhere.append(c.what)
    if study is not None:
        _runner(found, RunnerFile(results / study, cfg.server.port), study)
    _port(found, cfg)
    found.warnings += preflight.warnings(cfg.server)
    varied = [n for n in space.choices() if not n.startswith("-")]
    found.behind = behind_lines(settings_behind(cfg.server, env, varied), varied, cfg.server.env)
    if study is not None:
        _stored(found, results / study, study, storage)
    return found


def _runner(found: StartChecks, runner: RunnerFile, study: str) -> None:
    """No live runner of the study on this host and port: MachineNotClean as ``claim`` raises."""
    held = runner.held_by(study)
    if held is not None:
        raise held
    found.passed.append(f"no other runner sweeps study '{study}' on this host and port {runner.port}")


def _port(found: StartChecks, cfg: ExperimentConfig) -> None:
    """Nothing answers on the port: MachineNotClean as the sweep raises, on the night's host."""
    server = cfg.server
    held = preflight.port_held(server)
    where = f"port {server.port} on {server.host}"
    if held and found.on_host:
        raise MachineNotClean(held)
    if not found.on_host:
        found.elsewhere.append(f"{where}: " + (f"answers here ({held})" if held else "free here"))
    else:
        found.passed.append(f"{where}: nothing answers")


def _stored(found: StartChecks, study_dir: Path, study: str, storage: str | None) -> None:
    """A study in a storage is compared by the sweep when it opens it; the dry run opens none."""
    where = hide_password(storage) if storage else (study_dir / "study.db")
    if storage is None and not (study_dir / "study.db").exists():
        return
    found.unchecked.append(f"study '{study}' in {where}: its stored settings (format version, server command and env, "
                           "space, metric) were not compared, since the dry run opens no storage (it writes nothing); "
                           "the sweep compares them when it opens it and refuses a change (exit 2)")
