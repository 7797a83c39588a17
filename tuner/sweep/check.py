"""``nccl-tune check``: relaunch the untuned baseline and a deployed set, and say whether the set still holds.

After an NCCL, driver or server upgrade a set tuned on the old stack may no longer help (NCCL's
defaults and cost model move between releases). The check relaunches, as its own study
(``check-<config>-<time>`` unless named), the baseline and the set in the confirmation design a
night ends with, bracketed: baseline, set, set, baseline (:func:`design`; ``--trials N`` counts
every relaunch, the baseline's included, as a night's budget does). Each relaunch is a night's
(:meth:`tuner.sweep.runner.Sweep.relaunch_set` inside :meth:`~tuner.sweep.runner.Sweep.run`):
the same launch, probe, NCCL evidence, proof and record, so ``nccl-tune report`` works on it.

The rule (:func:`judge_check`): the set *holds* when its ratio to the baseline on the check's
fresh launches is significantly above 1, the one-sided ``1 - CONFIRM_ALPHA`` lower bound of
:func:`tuner.judging.stats.confirmed` above 1, the test a night's "Use it" rests on; one set is
checked, so there is no Bonferroni division. The launch noise is the ``--against`` study's
(:attr:`tuner.judging.Judgement.noise`, this host type's: its prior pooled with what that night
measured), else the prior (:data:`tuner.judging.PRIOR_LAUNCH_SIGMA`) pooled with the check's own
launches. It *no longer holds* when that bound is at or below 1 (exit 6); it *cannot be judged*
(exit 7) when a launch failed (one that gave wrong output, the correctness gate's
``wrong_output``, which a check runs unless ``[gates] answers = false``, makes it no longer hold),
NCCL did not apply one of its variables, its variables cannot act
on this server, or the check's baseline launches differ by more than
:data:`tuner.judging.judge.OUTLIER_PRIORS` SDs of the launch noise.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import InputError
from tuner.inputs import ExperimentConfig, LoadContext, SearchSpace, check_nccl
from tuner.judging import (
    CONFIRM_ALPHA,
    OUTLIER_PRIORS,
    PRIOR_LAUNCH_SIGMA,
    Comparison,
    Judgement,
    LaunchNoise,
    cannot_act_on,
    judge_by_host_type,
    runs_of,
    stats,
)
from tuner.planning import flag_params
from tuner.record import Kind, Metric, Status, StudyInfo, TrialRecord, Verdict, set_key
from tuner.study import StudyStore, default_storage, hide_password, open_study
from tuner.sweep.runner import Sweep, SweepOptions

__all__ = [
    "CHECK_TRIALS",
    "PRIOR_WORDS",
    "check_space",
    "design",
    "judge_check",
    "never_confirmed",
    "open_against",
    "resolve_set",
    "run_check",
]

#: The smallest design that can say yes, and the default: baseline, set, set, baseline.
CHECK_TRIALS = 4
#: ``--set`` item naming a trial of the ``--against`` study: ``12`` or ``trial-12``.
_TRIAL = re.compile(r"(?:trial[-:]?)?(\d+)")
#: ``--set`` item naming the ``--against`` study's winner (the set its verdict names).
WINNER = "winner"


@dataclass(frozen=True)
class CheckedSet:
    """The set under check: ``name`` (a preset's, ``trial-N``, ``winner``, or ``deployed`` for a
    set given as ``VAR=VALUE`` items), ``env`` (variable -> value as NCCL reads it), ``flags``
    (server argv items, e.g. ``["--disable-custom-all-reduce"]``), ``source`` (where it came from,
    in words)."""

    name: str
    env: dict[str, str]
    flags: list[str] = field(default_factory=list)
    source: str = "the command line"

    @property
    def key(self) -> str:
        """The set key its records carry (:func:`tuner.record.trial.set_key`)."""
        return set_key(self.env, self.flags)

    def words(self) -> str:
        """``NCCL_PROTO=LL --disable-custom-all-reduce``: the set as one would paste it."""
        return " ".join([*(f"{k}={v}" for k, v in sorted(self.env.items())), *self.flags]) or "(untuned)"


@dataclass
class Against:
    """The study a check is judged against: its ``name``, where it is (``storage``, password
    hidden), its records and info, and this host type's :class:`tuner.judging.Judgement`
    (``judgement``; its ``noise`` is the stored launch noise)."""

    name: str
    storage: str
    records: list[TrialRecord]
    info: StudyInfo
    judgement: Judgement

    @property
    def noise(self) -> LaunchNoise | None:
        """The launch noise that study's verdicts use (None without an ok baseline launch)."""
        return self.judgement.noise


@dataclass
class CheckVerdict:
    """What the check found: ``holds`` True (still faster), False (no longer), None (cannot be
    judged); ``reason``: one paragraph saying why; ``comparison``: the set against the baseline
    on the check's launches (None when not judged); ``noise``: the launch noise used."""

    holds: bool | None
    reason: str
    comparison: Comparison | None = None
    noise: LaunchNoise | None = None


def design(trials: int) -> list[bool]:
    """The check's relaunches in order, True for the baseline: baseline, set, set, baseline,
    then set, set, baseline again (every third a baseline), the last always a baseline so that
    the set's launches are bracketed. ``trials`` (>= :data:`CHECK_TRIALS`) counts every relaunch;
    raises ValueError below it."""
    if trials < CHECK_TRIALS:
        raise ValueError(f"a check needs at least {CHECK_TRIALS} relaunches, got {trials}")
    order = [i % 3 == 0 for i in range(trials)]
    order[-1] = True
    return order


def open_against(name: str, storage: str | None, results: Path, metric: Metric, host_type: str) -> Against:
    """Load study ``name`` (``storage``, else ``results/<name>/study.db``) and judge it: this
    host type's judgement (the only one when the study has a single type). Raises InputError
    (``--against``) for a study that does not exist, has no ok baseline launch, or is judged on
    another metric than ``metric``."""
    url = storage or default_storage(results / name)
    if not storage and not (results / name / "study.db").exists():
        raise InputError("(command line)", "--against", name,
                         f"a study with a storage; {results / name / 'study.db'} does not exist (or pass --storage)")
    try:
        store = StudyStore(open_study(name, url, create=False), {})
    except KeyError:
        raise InputError("(command line)", "--against", name, f"a study present in {hide_password(url)}") from None
    info = store.info()
    if info.metric is not metric:
        raise InputError("(command line)", "--against", name, f"a study judged on {metric.words}, as the config's "
                         "probe.metric", f"that study is judged on {info.metric.words}, so its noise is not this one's")
    finished = store.finished()
    groups = judge_by_host_type(finished, metric=metric, min_effect=info.min_effect or stats.DEFAULT_MIN_EFFECT,
                                cannot_act=cannot_act_on(info, finished))
    mine = groups.get(host_type) or next(iter(groups.values()))
    if mine.noise is None:
        raise InputError("(command line)", "--against", name, "a study with an ok baseline launch",
                         "it has none, so it holds no launch noise to judge with")
    return Against(name, hide_password(url), store.records(relaunched_only=False), info, mine)


def resolve_set(items: Sequence[str], flags: Sequence[str], *, cfg: ExperimentConfig,
                space: Callable[[], SearchSpace | None], against: Against | None,
                allow_unsafe: bool = False, allow_unknown: bool = False) -> CheckedSet:
    """The set ``--set`` names: ``VAR=VALUE`` items (checked as NCCL ``cfg.nccl.nccl_version``
    reads them) plus ``flags`` (server argv items), or one NAME: a preset of the ``--against``
    study, ``winner`` (the set its verdict names), a trial of it (``12``, ``trial-12``), or a preset
    of the config's search space (``space()``, loaded only then). Raises InputError (``--set``)
    naming what is accepted."""
    named = [i for i in items if "=" not in i]
    if named and (len(items) > 1 or flags):
        raise InputError("(command line)", "--set", " ".join(items), "one NAME, or VAR=VALUE items (with --flag items)",
                         "a name and other items cannot be one set")
    if named:
        return _named(named[0], cfg=cfg, space=space, against=against)
    env: dict[str, str] = {}
    ctx = LoadContext(file=Path("(command line)"), allow_unsafe=allow_unsafe, version=cfg.nccl.nccl_version,
                      allow_unknown=allow_unknown)
    for item in items:
        name, _, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise InputError("(command line)", "--set", item, "VAR=VALUE items, VAR an environment variable name "
                             "(letters, digits, _), e.g. NCCL_PROTO=LL", "no variable name before '='")
        if name in env:
            raise InputError("(command line)", f"--set {name}", value, f"one value per variable ({name}={env[name]} "
                             "was given too)", "a variable given twice: which one was deployed?")
        found = check_nccl(name, value, ctx)
        if found.wrong:
            raise InputError("(command line)", f"--set {name}", value, found.accepted, found.wrong)
        if found.unsafe and not allow_unsafe:
            raise InputError("(command line)", f"--set {name}", value, "a safe value, or pass --allow-unsafe", found.unsafe)
        env[name] = value
    if flags and not flags[0].startswith("-"):
        raise InputError("(command line)", "--flag", flags[0], "server flags, e.g. --flag=--disable-custom-all-reduce",
                         "a flag starts with '-'")
    if not env and not flags:
        raise InputError("(command line)", "--set", "", "a NAME or VAR=VALUE items", "nothing to check")
    checked = CheckedSet("deployed", env, list(flags))
    if against is None:
        return checked
    same = next((r for r in against.records if r.kind.relaunched and r.kind is not Kind.BASELINE
                 and r.set_key == checked.key), None)
    if same is not None:  # the night measured it: said, so the two can be read side by side
        return CheckedSet("deployed", env, list(flags), f"the command line; trial {same.trial} of study {against.name}"
                          + (f", preset '{same.preset}'" if same.preset else ""))
    return checked


def _named(name: str, *, cfg: ExperimentConfig, space: Callable[[], SearchSpace | None],
           against: Against | None) -> CheckedSet:
    if against is not None:
        relaunched = [r for r in against.records if r.kind.relaunched and r.kind is not Kind.BASELINE]
        # a preset the night passed over as a duplicate of another set still names its set
        hit = next((r for r in against.records if r.preset == name and r.kind is not Kind.BASELINE
                    and (r.kind.relaunched or r.kind is Kind.DUPLICATE)), None)
        if hit is not None:
            return CheckedSet(name, dict(hit.env), list(hit.flags), f"preset '{name}' of study {against.name}")
        if name == WINNER:
            j = against.judgement
            if j.winner is None:
                raise InputError("(command line)", "--set", name, "a preset or trial of the study",
                                 f"study {against.name} names no winner")
            s = j.sets[j.winner]
            return CheckedSet(f"winner-{s.first_trial}", dict(s.env), list(s.flags),
                              f"the winner of study {against.name} (trial {s.first_trial})")
        m = _TRIAL.fullmatch(name)
        if m is not None:
            number = int(m.group(1))
            rec = next((r for r in relaunched if r.trial == number), None)
            if rec is None:
                raise InputError("(command line)", "--set", name, f"a trial of study {against.name} that relaunched "
                                 "a tuned set", f"trial {number} is not one")
            return CheckedSet(f"trial-{number}", dict(rec.env), list(rec.flags), f"trial {number} of study {against.name}")
    loaded = space()
    preset = next((p for p in loaded.presets if p.name == name), None) if loaded is not None else None
    if preset is not None:
        return CheckedSet(name, dict(preset.env), [], f"preset '{name}' of {loaded.path if loaded else ''}")
    where = (f"a preset or trial number of study {against.name}, '{WINNER}', or " if against is not None else "")
    names = ", ".join(p.name for p in loaded.presets) if loaded is not None else ""
    raise InputError("(command line)", "--set", name, f"{where}a preset of the config's space ({names or 'none'}), "
                     "or VAR=VALUE items", "no such set")


def check_space(checked: CheckedSet, path: Path) -> SearchSpace:
    """The check study's space: the set's variables and flags, each with its one value (and
    ``unset``, the baseline), so both are points of one Optuna categorical space."""
    variables: dict[str, tuple[str, ...]] = {name: (value,) for name, value in checked.env.items()}
    variables.update({name: (value,) for name, value in flag_params(checked.flags).items()})
    return SearchSpace(path=path, variables=variables, presets=[])


def never_confirmed(against: Against | None, checked: CheckedSet) -> str:
    """What the ``--against`` study said of the checked set when it did not confirm it ("" when
    it did, or without a study): a set that failed its confirmation there, was never relaunched
    to confirm, or was never measured; the check is then its first confirmation, not a re-check."""
    if against is None:
        return ""
    j = against.judgement
    s = j.sets.get(checked.key)
    if s is not None and s.confirmation is not None and s.confirmation.verdict is Verdict.FASTER:
        return ""  # it held on fresh launches there (the winner, or a runner-up that held too)
    if s is None:
        said = "never measured it"
    elif s.confirmation is None:
        said = f"never relaunched it to confirm (trial {s.first_trial}, {stats.verdict_words(s.verdict)})"
    else:
        said = f"did not confirm it (trial {s.first_trial}: {stats.verdict_words(s.verdict)})"
    return f"study {against.name} {said}"


def judge_check(records: Sequence[TrialRecord], checked: CheckedSet, *, metric: Metric,
                noise: LaunchNoise | None, noise_from: str, info: StudyInfo,
                against: Against | None = None) -> CheckVerdict:
    """The check's verdict from its ``records`` (module docstring: the rule). ``noise``: the
    ``--against`` study's launch noise (None: the prior pooled with these launches);
    ``noise_from``: where it comes from, in words; ``info``: the check study's (what its first
    baseline showed: TP 1, NCCL off the decode path); ``against``: that study, to say plainly
    when it never confirmed the set (:func:`never_confirmed`): then the set is "faster on this
    check", never "still" faster."""
    launched = [r for r in records if r.kind.relaunched]
    failed = next((r for r in launched if not r.status.measured), None)  # a failed soak: _soak_verdict's
    if failed is not None and failed.status is Status.WRONG_OUTPUT:
        return CheckVerdict(False, f"no longer holds: trial {failed.trial}, a launch of the set {checked.words()}, gave "
                                   f"wrong output ({failed.answers_diverge}): remove it from the deployment")
    if failed is not None:
        who = "the untuned baseline" if failed.kind is Kind.BASELINE else f"the set {checked.words()}"
        log = f"; server log {failed.log}" if failed.log else ""
        return CheckVerdict(None, f"cannot be judged: trial {failed.trial}, a launch of {who}, {failed.status}"
                                  f"{': ' + failed.cause if failed.cause else ''}{log}")
    sets = [r for r in launched if r.kind is not Kind.BASELINE]
    soaked = _soak_verdict(launched, checked)
    if soaked is not None:
        return soaked
    not_applied = {k: v for r in sets for k, v in r.nccl_not_applied.items()}
    if not_applied:
        said = "; ".join(f"{k}: {v}" for k, v in not_applied.items())
        return CheckVerdict(None, f"cannot be judged: NCCL did not apply {', '.join(not_applied)} ({said}), so the "
                                  "launches measured another set than the one deployed")
    refused = next((r for r in sets if r.backend_applied is False), None)
    if refused is not None:  # the server ignored or fell back from the set's backend choice
        return CheckVerdict(None, f"cannot be judged: trial {refused.trial}: the server did not apply "
                                  f"{refused.backend_choice} ({refused.backend_reason}), so the launches measured "
                                  "another backend than the one deployed")
    probe = TrialRecord(trial=-1, kind=Kind.PRESET, env=dict(checked.env), flags=list(checked.flags))
    cannot = cannot_act_on(info, sets or [probe])  # the check stops after the baseline when it cannot act
    if cannot:
        return CheckVerdict(None, f"cannot be judged: {next(iter(cannot.values()))}")
    bases = [runs_of(r, metric) for r in launched if r.kind is Kind.BASELINE]
    tuned = [runs_of(r, metric) for r in sets]
    bases, tuned = [b for b in bases if b], [t for t in tuned if t]
    if not bases or not tuned:
        return CheckVerdict(None, "cannot be judged: the check did not measure both the baseline and the set")
    every = bases + tuned
    scale = stats.robust_run_sigma(every)
    sc = scale if math.isfinite(scale) else None
    used = noise if noise is not None else stats.launch_noise(bases, [tuned], scale=sc)
    moved = _baseline_moved(launched, bases, used, sc)
    if moved:
        return CheckVerdict(None, moved, noise=used)
    c = stats.confirmed(tuned, bases, noise=used, alpha=CONFIRM_ALPHA, scale=sc)
    set_trials = ", ".join(str(r.trial) for r in sets)
    base_trials = ", ".join(str(r.trial) for r in launched if r.kind is Kind.BASELINE)
    noise_words = f"launch noise {used.sigma * 100:.1f} % ({noise_from})"
    what = (f"{checked.words()} ({checked.name}) measured {c.gain_pct:+.1f} % against the untuned baseline on "
            f"{metric.words} (trials {set_trials} against {base_trials}, {len(tuned)} launches against {len(bases)}; "
            f"ratio {c.ratio:.3f}, one-sided {(1 - CONFIRM_ALPHA) * 100:g} % lower bound {c.ci_low:.3f}; {noise_words})")
    if c.verdict is Verdict.FASTER:
        unconfirmed = never_confirmed(against, checked)
        if unconfirmed:
            return CheckVerdict(True, f"holds on this check: {what}: significantly faster than the baseline on these "
                                      f"fresh launches; but {unconfirmed}: this check is its first confirmation, not "
                                      "a re-check of a confirmed set", c, used)
        return CheckVerdict(True, f"holds: {what}: still significantly faster than the baseline", c, used)
    if c.verdict is Verdict.NOT_ENOUGH_RUNS:
        return CheckVerdict(None, f"cannot be judged: {c.note}", c, used)
    slower = c.ci_high < 1.0
    tail = ("it is now slower than the baseline: remove it from the deployment" if slower else
            "not significantly faster than the baseline any more: the gain it was deployed for is gone or within "
            "the noise; run a new night (nccl-tune sweep) or check again with more relaunches (--trials 7)")
    return CheckVerdict(False, f"no longer holds: {what}, at or below 1: {tail}", c, used)


def _soak_verdict(launched: Sequence[TrialRecord], checked: CheckedSet) -> CheckVerdict | None:
    """The check's verdict when the set failed its soak: it does not hold (it hangs under load),
    or, when the baseline failed its soak too, it cannot be judged (the machine hangs); None
    when the set's soak passed or none was made."""
    hung = next((r for r in launched if r.kind is not Kind.BASELINE and r.soak_failure), None)
    if hung is None:
        return None
    base = next((r for r in reversed(launched) if r.kind is Kind.BASELINE and r.soak_s is not None), None)
    if base is not None and base.soak_failure:
        return CheckVerdict(None, f"cannot be judged: the machine hangs under load: the untuned baseline failed the "
                                  f"same soak (trial {base.trial}: {base.soak_words()}) as the set (trial {hung.trial}: "
                                  f"{hung.soak_words()}); fix the machine, then check again")
    base_words = "the untuned baseline passed the same soak" if base is not None else "the baseline was not soaked"
    return CheckVerdict(False, f"no longer holds: {checked.words()} ({checked.name}) hangs under load: trial "
                               f"{hung.trial}'s soak {hung.soak_words()}; {base_words}: remove it from the deployment")


def _baseline_moved(launched: Sequence[TrialRecord], bases: list[list[float]], noise: LaunchNoise,
                    scale: float | None) -> str:
    """Why the check's baseline launches disagree beyond the launch noise ("" when they agree):
    the largest and smallest level more than :data:`OUTLIER_PRIORS` SDs of their difference
    apart (the rule judge() names an outlier by)."""
    if len(bases) < 2 or noise.sigma <= 0:
        return ""
    levels = [math.log(stats.launch_level(b, scale=scale)) for b in bases]
    spread = max(levels) - min(levels)
    if spread <= OUTLIER_PRIORS * noise.sigma * math.sqrt(2.0):
        return ""
    trials = [r.trial for r in launched if r.kind is Kind.BASELINE and r.ok]
    return (f"cannot be judged: the baseline launches (trials {', '.join(map(str, trials))}) differ by "
            f"{math.expm1(spread) * 100:.1f} %, more than {OUTLIER_PRIORS:g} SDs of the launch noise "
            f"({noise.sigma * 100:.1f} %): the machine changed during the check (clocks, other jobs, "
            "temperature); find why, then check again")


def with_answers_gate(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` with the correctness gate's answers on (a check runs it) unless its file turns it
    off (``[gates] answers = false``): a deployed set that now corrupts answers no longer holds."""
    written = cfg.written.get("gates")
    if isinstance(written, dict) and "answers" in written:
        return cfg
    return dataclasses.replace(cfg, gates=cfg.gates.model_copy(update={"answers": True}))


def run_check(cfg: ExperimentConfig, checked: CheckedSet, options: SweepOptions) -> Sweep:
    """Relaunch the baseline and ``checked`` in :func:`design` order (``options.trials``
    relaunches) as study ``options.study``, through a :class:`tuner.sweep.runner.Sweep` and its
    :meth:`~tuner.sweep.runner.Sweep.relaunch_set`. The first set launch is kind ``preset``
    (named ``checked.name``), the others ``confirm``; the baseline's after the first are
    re-measures; the last set launch and the last baseline launch run the soak
    (``sweep.soak_minutes``, tuner.sweep.soak). Stops at the first failed launch, and after the first baseline when the set's
    variables cannot act (:func:`tuner.judging.cannot_act_on`). Returns the sweep (its ``store``
    holds the records); raises what :meth:`tuner.sweep.runner.Sweep.run` raises but
    BaselineFailed, which the records say."""
    space = check_space(checked, Path(f"(nccl-tune check {checked.name})"))
    sweep = Sweep(with_answers_gate(cfg), space, options)
    order = design(options.trials or CHECK_TRIALS)
    last_set = max(i for i, is_baseline in enumerate(order) if not is_baseline)
    last_base = max(i for i, is_baseline in enumerate(order) if is_baseline)

    def steps() -> None:
        sets = 0
        for i, is_baseline in enumerate(order):
            if is_baseline:
                rec = sweep.relaunch_set(Kind.BASELINE, {}, [], recheck=i > 0, soak=i == last_base)
            else:
                kind = Kind.PRESET if sets == 0 else Kind.CONFIRM
                rec = sweep.relaunch_set(kind, dict(checked.env), list(checked.flags), preset=checked.name,
                                         soak=i == last_set)
                sets += 1
            if not rec.status.measured:  # a failed soak still gets the baseline's soak: whose hang is it
                return
            probe = TrialRecord(trial=-1, kind=Kind.PRESET, env=dict(checked.env), flags=list(checked.flags))
            if i == 0 and cannot_act_on(sweep.store.info(), [probe]):
                return

    sweep.run(steps)
    return sweep


#: The prior the check uses without --against, in words.
PRIOR_WORDS = f"the prior {PRIOR_LAUNCH_SIGMA * 100:g} % pooled with this check's own launches"
