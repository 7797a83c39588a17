"""The night's one budget-and-deadline rule (planning/limits.py): whether another relaunch may
start, the words of each refusal, the screen's deadline and what the next run owes; the reserved
checks worded once; one Launch per set."""

from __future__ import annotations

from tuner.planning import Budget, Launch, NightLimits, RelaunchTime, Step, fits
from tuner.planning.budget import check_words
from tuner.planning.clock import Phase, kept_after

NOON = 1_000_000.0
CHECKS = (Step.CONFIRM, Step.CONFIRM, Step.FINAL_BASELINE)


def _per(seconds: float) -> RelaunchTime:
    return RelaunchTime(Phase(seconds, "measured"), Phase(0.0, "measured"), Phase(0.0, "measured"),
                        Phase(None, "not yet"), seconds)


def test_the_deadline_rule_counts_the_relaunch_and_those_it_keeps_after_it():
    assert fits(NOON, None, 1e9, 5)
    assert fits(NOON, NOON + 40, 10.0, 3) and not fits(NOON, NOON + 39, 10.0, 3)
    assert kept_after(None, CHECKS) == 3  # a first-stage relaunch keeps every check still owed
    assert kept_after(Step.CONFIRM, CHECKS[1:]) == 1  # the final baseline after it, its fresh baseline
    assert kept_after(Step.CONFIRM, ()) == 0 and kept_after(Step.FINAL_BASELINE, ()) == 0
    assert kept_after(Step.RETRY, CHECKS) == 0


def test_the_first_stage_stops_at_its_share_of_the_budget_and_says_so():
    limits = NightLimits(Budget(12))
    assert limits.allows(8, NOON, 0.0) == (True, "")
    assert limits.allows(9, NOON, 0.0) == (
        False, "relaunch budget of 12 spent: 9 for the baseline and the sets, 3 kept for the checks")
    assert limits.allows(9, NOON, 0.0, step=Step.CONFIRM) == (True, "")
    assert limits.allows(12, NOON, 0.0, step=Step.FINAL_BASELINE, made=2) == (False, "relaunch budget of 12 spent")
    assert limits.allows(12, NOON, 0.0, step=Step.RETRY, count_budget=False) == (True, "")


def test_before_a_deadline_a_relaunch_keeps_the_reserved_checks_time_and_names_them():
    limits = NightLimits(Budget(12), NOON + 100, "--timeout 100 s")
    assert limits.allows(3, NOON, 20.0) == (True, "")  # 20 s and 3 x 20 s kept: 80 s
    assert limits.allows(3, NOON, 30.0) == (
        False, "--timeout 100 s: another relaunch (~30 s) and the 3 reserved checks after it (~1.5 min: "
               "2 confirmations, the final baseline) would not fit")
    confirm = NightLimits(Budget(12), NOON + 50, "--until 07:00")
    assert confirm.allows(9, NOON, 25.0, step=Step.CONFIRM, what="the confirmation") == (True, "")
    assert confirm.allows(9, NOON, 30.0, step=Step.CONFIRM, what="the confirmation") == (
        False, "--until 07:00: the confirmation (~30 s) and the 1 reserved check after it (~30 s: the final "
               "baseline) would not fit")
    assert confirm.allows(11, NOON, 30.0, step=Step.FINAL_BASELINE, made=2) == (True, "")


def test_the_checks_left_are_the_last_ones_the_budget_still_holds():
    limits = NightLimits(Budget(12))
    assert limits.checks_left(3) == CHECKS
    assert limits.checks_left(10) == CHECKS[1:] and limits.checks_left(11) == (Step.FINAL_BASELINE,)
    assert limits.checks_left(9, made=2) == (Step.FINAL_BASELINE,)
    assert limits.checks_left(12) == ()


def test_the_screen_ends_by_the_deadline_less_the_checks_time():
    assert NightLimits(Budget(12)).kept_deadline(10.0, 3) is None
    assert NightLimits(Budget(12), NOON + 1000).kept_deadline(10.0, 3) == NOON + 970


def test_the_clock_is_laid_on_the_same_limits():
    clock = NightLimits(Budget(12), NOON + 1000).clock(_per(60.0), NOON, 3, first_free=False)
    assert (clock.stage1, clock.checks, clock.done, clock.deadline) == (6, CHECKS, 3, NOON + 1000)
    assert NightLimits(Budget(12)).clock(_per(60.0), NOON, 9, stage2=True, made=1).checks == CHECKS[1:]


def test_the_next_run_says_what_it_makes_first():
    limits = NightLimits(Budget(12))
    assert limits.next_run(12, confirm_owed=True, each_s=60.0) == (
        "the budget of 12 relaunches is spent: run the same command with --trials 14 to make the confirmation "
        "and the final baseline after it")
    assert limits.next_run(5, confirm_owed=False, each_s=None) == (
        "the next run of the same command first relaunches up to 4 more sets (the first stage's slots left), then "
        "makes the final baseline re-measure")
    assert limits.next_run(9, confirm_owed=True, each_s=60.0) == (
        "the next run of the same command makes the confirmation and the final baseline after it first "
        "(2 relaunches, about 2.0 min)")


def test_the_reserved_checks_are_worded_once():
    assert check_words(CHECKS) == ["2 confirmations", "the final baseline"]
    assert check_words(CHECKS, which=True) == ["2 confirmations (the best set, then the runner-up or the best set again)", "the final baseline"]
    assert check_words((Step.CONFIRM,)) == ["1 confirmation"] and check_words(()) == []
    assert Budget(2).problem() == ("2 relaunches cannot hold the baseline, 1 confirmation and the final baseline: at "
                                   "least 3 are needed, more to leave room for sets (--no-confirm and "
                                   "--no-final-baseline free their slots)")


def test_a_launch_is_made_once_from_its_params_and_shows_no_secret():
    params = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "unset", "HF_TOKEN": "abc", "--disable-x": "on", "--seqs": "4"}
    launch = Launch.of(params, lambda env, flags: f"{sorted(env)}{flags}")
    assert launch.env == {"NCCL_ALGO": "Ring", "HF_TOKEN": "abc"}  # the server gets the real value
    assert launch.flags == ("--disable-x", "--seqs", "4")
    assert launch.shown_env == {"NCCL_ALGO": "Ring", "HF_TOKEN": "***"}
    assert launch.key == "['HF_TOKEN', 'NCCL_ALGO']['--disable-x', '--seqs', '4']" and launch.params == params
