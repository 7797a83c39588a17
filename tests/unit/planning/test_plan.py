"""Planning against a real Optuna study in memory: retries first and once, presets in order,
never a set twice, sets in flight skipped, duplicates and invalid sets never launched, the
re-measures when due and the reserved checks in their order."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from tuner.inputs.space import load_space
from tuner.planning.budget import Budget
from tuner.planning.entry import PlanEntry, ScreenedSet, Step
from tuner.planning.order import (
    EXHAUSTED,
    RESERVED,
    Planner,
    counts_in_budget,
    final_baseline_owed,
    outlier_baseline,
)
from tuner.planning.params import flag_params, split_params
from tuner.record import Kind, Metric, Status, TrialRecord
from tuner.study.storage import StudyStore

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_MAX_NCHANNELS]
values = [4, 8]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


@pytest.fixture
def store(tmp_path: Path) -> StudyStore:
    (tmp_path / "space.toml").write_text(SPACE)
    space = load_space(tmp_path / "space.toml")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    s = StudyStore(study, space.choices())
    s.space = space  # type: ignore[attr-defined]
    return s


def planner(store: StudyStore, problems=lambda env: [], mode: str = "search", **options) -> Planner:
    return Planner(store.space, mode, records=lambda: store.records(relaunched_only=False),  # type: ignore[attr-defined]
                   busy_keys=lambda: {TrialRecord(trial=0, kind=Kind.SEARCH, env=split_params(p)[0]).set_key
                                      for p in store.pending_params()},
                   problems=problems, **options)


def run(store: StudyStore, env: dict[str, str], kind: Kind, status: Status = Status.OK, *, preset: str = "",
        retry_of: int | None = None, started_at: float = 0.0) -> TrialRecord:
    """Take one trial through the store as the sweep does (enqueue, ask, start, finish)."""
    store.enqueue(store.params_of(env), TrialRecord(trial=-1, kind=kind, preset=preset, retry_of_trial=retry_of))
    trial, params, rec = store.ask()
    assert split_params(params)[0] == env
    rec.env, rec.status, rec.started_at = env, Status.RUNNING, started_at
    store.start(trial, rec)
    if status is Status.INTERRUPTED:
        store.abandon(trial, replace(rec, status=Status.INTERRUPTED))
        return rec
    if kind in (Kind.DUPLICATE, Kind.INVALID):
        rec.status = Status.SKIPPED
        store.tell_known(trial, rec, None, 1.0)
        return rec
    rec.status = status
    rec.output_tok_s_runs = [70.0, 71.0] if status is Status.OK else []
    rec.output_tok_s = 70.5 if status is Status.OK else None
    store.finish(trial, rec, rec.output_tok_s or 0.0)
    return rec


def test_presets_in_order_then_none(store):
    p = planner(store)
    assert p.next_planned().name == "ll"
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, preset="ll")
    nxt = p.next_planned()
    assert (nxt.step, nxt.name, nxt.env, nxt.kind) == (Step.SET, "simple", {"NCCL_PROTO": "Simple"}, Kind.PRESET)
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.CRASHED, preset="simple")  # a failed set is measured too
    assert p.next_planned() is None


def test_interrupted_trial_is_retried_first_and_only_once(store):
    p = planner(store)
    first = run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.INTERRUPTED, preset="simple")
    retry = p.next_planned()
    assert (retry.step, retry.env, retry.retry_of, retry.kind) == (Step.RETRY, {"NCCL_PROTO": "Simple"}, first.trial,
                                                                   Kind.PRESET)
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, Status.INTERRUPTED, preset="simple", retry_of=first.trial)
    # The retry died too: given up, and its preset is not tried a third time.
    nxt = p.next_planned()
    assert nxt.name == "ll" and nxt.retry_of is None
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, preset="ll")
    assert p.next_planned() is None


def test_a_proposal_of_a_set_owed_a_retry_is_that_retry(store):
    """The sampler may propose the set a dead runner left before any runner plans its retry:
    that relaunch is the retry (one measure of the set, the lost trial names it)."""
    p = planner(store)
    lost = run(store, {"NCCL_PROTO": "Simple"}, Kind.SEARCH, Status.INTERRUPTED)
    simple, ll = (p.key_of({"NCCL_PROTO": v}, []) for v in ("Simple", "LL"))
    assert p.retry_owed_by(simple) == lost.trial and p.retry_owed_by(ll) is None
    run(store, {"NCCL_PROTO": "Simple"}, Kind.SEARCH, retry_of=lost.trial)
    assert p.retry_owed_by(simple) is None  # retried once: owed nothing more


def test_interrupted_baseline_is_not_planned(store):
    run(store, {}, Kind.BASELINE, Status.INTERRUPTED)
    assert planner(store).next_planned().name == "ll"


def test_set_in_flight_is_not_planned(store):
    store.enqueue(store.params_of({"NCCL_PROTO": "LL"}), TrialRecord(trial=-1, kind=Kind.PRESET))
    assert planner(store).next_planned().name == "simple"


def test_judge_duplicates_baseline_and_invalid(store):
    base = run(store, {}, Kind.BASELINE)
    measured = run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, preset="ll")
    p = planner(store, problems=lambda env: ["MIN above MAX"] if env.get("NCCL_MAX_NCHANNELS") == "4" else [])
    dup = p.judge({"NCCL_PROTO": "LL"}, [], baseline=base)
    assert dup.duplicate_of.trial == measured.trial and dup.reason == f"to NCCL the same set as trial {measured.trial} (ll)"
    assert p.judge({}, [], baseline=base).duplicate_of.trial == base.trial
    assert p.judge({"NCCL_MAX_NCHANNELS": "4"}, [], baseline=base).invalid_reason == "MIN above MAX"
    assert p.judge({"NCCL_PROTO": "Simple"}, [], baseline=base).launch
    at_size = planner(store, decode_bytes=14336).judge({"NCCL_PROTO": "LL"}, [], baseline=base)
    assert at_size.reason.startswith("to NCCL at 14336 B the same set as trial")


def test_flags_round_trip():
    params = {"NCCL_PROTO": "LL", "--disable-custom-all-reduce": "on", "--max-num-seqs": "4", "X": "unset"}
    env, flags = split_params(params)
    assert env == {"NCCL_PROTO": "LL"}
    assert flags == ["--disable-custom-all-reduce", "--max-num-seqs", "4"]
    assert flag_params(flags) == {"--disable-custom-all-reduce": "on", "--max-num-seqs": "4"}


def test_the_screens_best_come_before_the_presets_and_a_preset_equal_to_one_is_judged_a_duplicate(store):
    base = run(store, {}, Kind.BASELINE)
    p = planner(store)
    p.screened_first([ScreenedSet("screen-1", {"NCCL_MAX_NCHANNELS": "8"}), ScreenedSet("screen-2", {"NCCL_PROTO": "LL"})])
    assert p.next_planned().name == "screen-1"
    run(store, {"NCCL_MAX_NCHANNELS": "8"}, Kind.PRESET, preset="screen-1")
    assert p.next_planned().name == "screen-2"
    second = run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, preset="screen-2")
    # the preset "ll" is the same set as screen-2: planned, judged, recorded as a duplicate, never launched
    ll = p.next_planned()
    assert ll.name == "ll"
    decision = p.judge(ll.env, ll.flags, baseline=base)
    assert not decision.launch and decision.duplicate_of.trial == second.trial and "screen-2" in decision.reason
    run(store, ll.env, Kind.DUPLICATE, preset="ll")
    assert p.next_planned().name == "simple"


def test_a_set_the_screen_forbids_is_never_launched(store):
    base = run(store, {}, Kind.BASELINE)
    p = planner(store)
    p.screened_first([], lambda env: "wrong values" if env.get("NCCL_PROTO") == "Simple" else None)
    decision = p.judge({"NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "8"}, [], baseline=base)
    assert not decision.launch and decision.invalid_reason == "wrong values"
    assert p.judge({"NCCL_PROTO": "LL"}, [], baseline=base).launch


def test_next_launch_ends_presets_mode_and_a_searched_out_space(store):
    run(store, {}, Kind.BASELINE)
    for name, env in (("ll", {"NCCL_PROTO": "LL"}), ("simple", {"NCCL_PROTO": "Simple"})):
        run(store, env, Kind.PRESET, preset=name)
    assert planner(store, mode="presets").next_launch() == PlanEntry(Step.DONE, reason="all presets measured")
    assert planner(store).next_launch().step is Step.PROPOSAL
    for proto, channels in [(a, b) for a in ("unset", "LL", "Simple") for b in ("unset", "4", "8")][1:]:
        env = {k: v for k, v in (("NCCL_PROTO", proto), ("NCCL_MAX_NCHANNELS", channels)) if v != "unset"}
        if env not in ({"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}):
            run(store, env, Kind.SEARCH)
    assert planner(store).next_launch() == PlanEntry(Step.DONE, reason=EXHAUSTED)


def test_a_presets_night_with_skipped_presets_never_ends_all_presets_measured(store):
    run(store, {}, Kind.BASELINE)
    run(store, {"NCCL_PROTO": "LL"}, Kind.DUPLICATE, preset="ll")  # e.g. the same set to NCCL as the baseline
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, preset="simple")
    assert planner(store, mode="presets").next_launch() == PlanEntry(
        Step.DONE, reason="2 presets: 1 measured, 1 skipped (see report.md, Sets not measured)")


def test_a_failed_preset_is_counted_as_failed(store):
    run(store, {}, Kind.BASELINE)
    run(store, {"NCCL_PROTO": "LL"}, Kind.PRESET, Status.CRASHED, preset="ll")
    run(store, {"NCCL_PROTO": "Simple"}, Kind.PRESET, preset="simple")
    assert planner(store, mode="presets").presets_done() == "2 presets: 1 measured, 1 failed"


def test_a_duplicate_is_recorded_with_its_cause_and_an_invalid_set_with_its_reason(store):
    base = run(store, {}, Kind.BASELINE)
    p = planner(store, problems=lambda env: ["NCCL rejects it"] if env.get("NCCL_PROTO") == "Simple" else [],
                key_of=lambda env, flags: "{}" if env == {"NCCL_PROTO": "LL"} else TrialRecord(0, Kind.SEARCH, env=env).set_key,
                decode_bytes=14336)
    same = p.judge({"NCCL_PROTO": "LL"}, [], baseline=base)
    assert not same.launch and same.duplicate_of.trial == base.trial and same.cause == "the same set to NCCL at 14336 B"
    bad = p.judge({"NCCL_PROTO": "Simple"}, [], baseline=base)
    assert not bad.launch and bad.cause == bad.invalid_reason == "NCCL rejects it"


def test_re_measures_when_due_and_the_reserved_checks_in_order(store):
    assert not planner(store).remeasure_due(5)
    p = planner(store, baseline_every=2)
    assert [p.remeasure_due(n) for n in range(4)] == [False, False, True, True]
    # not in the last stage-1 slot: no set could follow it there
    assert [p.remeasure_due(2, left) for left in (0, 1, 2, 5)] == [False, False, True, True]
    assert planner(store).reserved == (Step.CONFIRM, Step.FINAL_BASELINE) == RESERVED
    assert planner(store, confirm=False).reserved == (Step.FINAL_BASELINE,)
    assert planner(store, confirm=False, final_baseline=False).reserved == ()
    # from 10 relaunches the runner-up's confirmation has its slot too
    assert planner(store, trials=9).reserved == RESERVED
    assert planner(store, trials=10).reserved == (Step.CONFIRM, Step.CONFIRM, Step.FINAL_BASELINE)
    assert planner(store, trials=12, confirm=False).reserved == (Step.FINAL_BASELINE,)


def test_the_budget_counts_every_relaunch():
    counted = [TrialRecord(0, Kind.BASELINE, Status.OK), TrialRecord(1, Kind.PRESET, Status.CRASHED),
               TrialRecord(2, Kind.SEARCH, Status.RUNNING), TrialRecord(3, Kind.BASELINE, Status.OK, recheck=True),
               TrialRecord(4, Kind.CONFIRM, Status.OK), TrialRecord(7, Kind.CONFIRM, Status.RUNNING)]
    not_counted = [TrialRecord(5, Kind.PRESET, Status.INTERRUPTED), TrialRecord(6, Kind.DUPLICATE, Status.SKIPPED),
                   TrialRecord(8, Kind.INVALID, Status.SKIPPED), TrialRecord(9, Kind.CONFIRM, Status.INTERRUPTED)]
    assert all(counts_in_budget(r) for r in counted) and not any(counts_in_budget(r) for r in not_counted)


def test_the_budget_keeps_the_checks_slots_and_refuses_a_night_too_small():
    b = Budget(12)
    assert (b.confirmations, b.reserved, b.screening, b.minimum) == (2, 3, 9, 4)
    assert b.words() == ("12 relaunches: the baseline, up to 8 sets, 2 confirmations (the best set, then the "
                         "runner-up or the best set again), the final baseline")
    assert Budget(12).words(remeasures=1) == ("12 relaunches: the baseline, 1 baseline re-measure, up to 7 sets, "
                                              "2 confirmations (the best set, then the runner-up or the best set again), the final baseline")
    assert Budget(9).words() == "9 relaunches: the baseline, up to 6 sets, 1 confirmation, the final baseline"
    assert Budget(12, confirm=False).screening == 11 and Budget(12, False, False).screening == 12
    assert Budget(3).problem() is None and Budget(1, False, False).problem() is None
    why = Budget(2).problem()
    assert why is not None and "at least 3" in why and "2 relaunches" in why and "--no-confirm" in why
    assert Budget(1, final_baseline=False).problem() is not None  # the baseline and the confirmation: 2
    assert Budget(2, final_baseline=False).minimum == 2


def test_final_baseline_owed_after_a_tuned_relaunch_only():
    base = TrialRecord(0, Kind.BASELINE, Status.OK, started_at=10.0, host_type="h")
    tuned = TrialRecord(1, Kind.PRESET, Status.OK, started_at=20.0, host_type="h")
    assert final_baseline_owed([base], [base, tuned], "h")
    assert not final_baseline_owed([base], [base, replace(tuned, started_at=5.0)], "h")
    assert not final_baseline_owed([base], [base, replace(tuned, host_type="other")], "h")
    assert not final_baseline_owed([], [tuned], "h")


def test_the_confirmation_is_the_winners_set_once(store):
    from tuner.judging.judge import judge

    def launch(trial: int, kind: Kind, env: dict[str, str], level: float) -> TrialRecord:
        runs = [level, level * 1.001, level * 0.999]
        return TrialRecord(trial, kind, Status.OK, env=env, output_tok_s=level, output_tok_s_runs=runs,
                           started_at=float(trial))

    records = [launch(0, Kind.BASELINE, {}, 70.0), launch(1, Kind.PRESET, {"NCCL_PROTO": "LL"}, 140.0),
               launch(2, Kind.BASELINE, {}, 70.2)]
    entry = planner(store).confirmation(judge(records, metric=Metric.OUTPUT))
    assert (entry.step, entry.kind, entry.env, entry.equals_trial) == (Step.CONFIRM, Kind.CONFIRM,
                                                                       {"NCCL_PROTO": "LL"}, 1)
    confirmed = [*records, launch(3, Kind.CONFIRM, {"NCCL_PROTO": "LL"}, 139.0)]
    assert planner(store).confirmation(judge(confirmed, metric=Metric.OUTPUT)) is None  # made once per winner, also on a resume
    assert planner(store).confirmation(judge(records[:1], metric=Metric.OUTPUT)) is None  # no winner, no confirmation


def test_the_confirmations_follow_the_finalists_in_their_slots(store):
    """A judgement's ``confirm_slots`` (stage-1's best first) are read over its winner: the first
    slot whose set has fewer confirmations than the slots so far give it, the second only when
    its slot is reserved (10+ relaunches); the best set twice when it holds both."""
    from tuner.judging.judge import judge

    def launch(trial: int, kind: Kind, env: dict[str, str], level: float) -> TrialRecord:
        runs = [level, level * 1.001, level * 0.999]
        return TrialRecord(trial, kind, Status.OK, env=env, output_tok_s=level, output_tok_s_runs=runs,
                           started_at=float(trial))

    ll, simple = {"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "Simple"}
    records = [launch(0, Kind.BASELINE, {}, 70.0), launch(1, Kind.PRESET, ll, 75.0),
               launch(2, Kind.PRESET, simple, 76.0)]
    j = judge(records, metric=Metric.OUTPUT)
    keys = {tuple(s.env.items()): s.key for s in j.sets.values()}
    slots = [keys[tuple(simple.items())], keys[tuple(ll.items())]]
    j.confirm_slots = slots
    first = planner(store, trials=12).confirmation(j)
    assert first is not None and (first.env, first.equals_trial) == (simple, 2)
    j = judge([*records, launch(3, Kind.CONFIRM, simple, 76.0)], metric=Metric.OUTPUT)
    j.confirm_slots = slots
    second = planner(store, trials=12).confirmation(j)
    assert second is not None and (second.env, second.equals_trial) == (ll, 1)
    assert planner(store, trials=9).confirmation(j) is None  # no slot for the runner-up below 10
    j.confirm_slots = [slots[0], slots[0]]  # no runner-up that could be the best: the best set once more
    again = planner(store, trials=12).confirmation(j)
    assert again is not None and again.env == simple
    j = judge([*records, launch(3, Kind.CONFIRM, simple, 76.0), launch(4, Kind.CONFIRM, simple, 76.0)],
              metric=Metric.OUTPUT)
    j.confirm_slots = [slots[0], slots[0]]
    assert planner(store, trials=12).confirmation(j) is None  # both slots done
    j.confirm_slots = []
    assert planner(store, trials=12).confirmation(j) is None  # no finalist: none, even with a winner
    # the best set failed its soak in its first slot: its second passes to the best set left
    hung = launch(3, Kind.CONFIRM, simple, 76.0)
    hung.soak_s, hung.soak_failure = 15.0, "no token for 30 s at concurrency 1 after 12 s of load"
    j = judge([*records, hung], metric=Metric.OUTPUT)
    j.confirm_slots, j.ranked = [slots[0], slots[0]], [slots[0], slots[1]]
    moved = planner(store, trials=12).confirmation(j)
    assert moved is not None and moved.env == ll


def test_an_outlier_baseline_is_read_from_the_noise_warning():
    from tuner.judging.judge import judge

    records = [TrialRecord(0, Kind.BASELINE, Status.OK, output_tok_s=70.0, output_tok_s_runs=[70.0, 70.1],
                           started_at=0.0)]
    j = judge(records, metric=Metric.OUTPUT)
    assert outlier_baseline(j) is None  # no warning attribute (or None): silent
    j.noise_warning = "launch-to-launch noise measured ~6 % (prior 1.75 %); trial 0 is an outlier"  # type: ignore[attr-defined]
    assert outlier_baseline(j) == 0
    j.noise_warning = "trial 5 is an outlier"  # type: ignore[attr-defined]
    assert outlier_baseline(j) is None  # not a baseline launch
