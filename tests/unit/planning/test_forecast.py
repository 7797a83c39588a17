"""The forecast ``--dry-run`` prints: the planner's own steps over an imagined study. Skips
with their reasons, the budget's cut, the screen's and the sampler's share given as bounds,
re-measures where due and the reserved checks last."""

from __future__ import annotations

from pathlib import Path

from tuner.inputs.space import load_space
from tuner.nccl.types import NcclVersion
from tuner.planning import Facts, Rules, Step, forecast

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring", "ring"]
[[presets]]
name = "ring"
env = { NCCL_ALGO = "Ring" }
[[presets]]
name = "ring-again"
env = { NCCL_ALGO = "ring" }
[[presets]]
name = "default-buffer"
env = { NCCL_BUFFSIZE = "4194304" }
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "tree-ll"
env = { NCCL_ALGO = "Tree", NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


def _plan(tmp_path: Path, space: str = SPACE, **options):
    (tmp_path / "space.toml").write_text(space)
    space = load_space(tmp_path / "space.toml", version=NcclVersion.parse("2.24.3"))
    rules = Rules({}, lambda: Facts(NcclVersion.parse("2.24.3")))
    return forecast(space, rules, **{"mode": "search", "budget": 10, **options})


def _steps(plan):
    return [(e.step, e.name) for e in plan.entries]


def test_skips_name_the_set_they_equal_and_reserved_checks_come_last(tmp_path):
    plan = _plan(tmp_path)
    assert _steps(plan) == [(Step.BASELINE, ""), (Step.FIXES, ""), (Step.SET, "ring"), (Step.SKIP, "ring-again"),
                            (Step.SKIP, "default-buffer"), (Step.SET, "ll"), (Step.SET, "tree-ll"),
                            (Step.SET, "simple"), (Step.PROPOSAL, ""), (Step.CONFIRM, "confirm"),
                            (Step.CONFIRM, "confirm: runner-up or the best again"), (Step.FINAL_BASELINE, "")]
    by_name = {e.name: e for e in plan.entries}
    assert by_name["ring-again"].equals == "preset ring"
    assert by_name["default-buffer"].equals == "the untuned baseline"
    assert "AllGather" in by_name["tree-ll"].doubt  # the baseline's topology decides: said, not acted on
    # the sampler gets what the fixed part leaves of stage 1 (10 less 3 slots kept for the two
    # confirmations and the final baseline), counting tree-ll as possibly not launched
    assert plan.entries[8].up_to == 10 - 3 - 4
    assert plan.budget_words() == ("10 relaunches: the baseline, up to 6 sets, 2 confirmations (the best set, then the "
                                   "runner-up or the best set again), the final baseline")
    assert [e.name for e in plan.fixed] == ["", "ring", "ring-again", "default-buffer", "ll", "simple"]


def test_the_budget_cuts_the_presets_and_says_which_may_still_run(tmp_path):
    plan = _plan(tmp_path, budget=5, confirm=False)  # stage 1: 4, one slot kept for the final baseline
    reach = {e.name: e.reach for e in plan.entries if e.step is Step.SET}
    maybe = "reached only if the triage relaunches fewer than 1 set or a set marked 'may not be launched' is not launched"
    assert reach == {"ring": "", "ll": "", "tree-ll": maybe, "simple": maybe}  # the triage's LL may come first
    assert plan.entries[-2].step is Step.PROPOSAL and plan.entries[-2].up_to == 0
    assert plan.entries[-1].step is Step.FINAL_BASELINE


def test_the_screens_share_is_a_bound_and_pushes_the_presets(tmp_path):
    plan = _plan(tmp_path, budget=6, screen_top_k=2, mode="presets", final_baseline=False)  # stage 1: 5
    fixes, screened = plan.entries[1:3]
    assert (fixes.step, fixes.up_to) == (Step.FIXES, 1) and (screened.step, screened.up_to) == (Step.SCREENED, 2)
    reach = {e.name: e.reach for e in plan.entries if e.step is Step.SET}
    assert reach["ring"] == ""
    for name in ("ll", "tree-ll"):  # the triage's set and the screen's two come first
        assert reach[name].startswith("reached only if the triage relaunches fewer than 1 set or the screen hands "
                                      "fewer than 2 sets")
    assert not any(e.step is Step.PROPOSAL for e in plan.entries)  # presets mode
    assert plan.entries[-1].step is Step.CONFIRM


def test_re_measures_fall_where_the_sweep_makes_them(tmp_path):
    plan = _plan(tmp_path, budget=7, baseline_every=2, mode="presets", confirm=False)  # the re-measure counts
    assert plan.remeasures == 1 and plan.budget_words() == ("7 relaunches: the baseline, 1 baseline re-measure, "
                                                            "up to 4 sets, the final baseline")
    assert _steps(plan)[:8] == [(Step.BASELINE, ""), (Step.FIXES, ""), (Step.SET, "ring"), (Step.REMEASURE, ""),
                                (Step.SKIP, "ring-again"), (Step.SKIP, "default-buffer"), (Step.SET, "ll"),
                                (Step.SET, "tree-ll")]
    assert "moves with how many sets the slots above hand" in plan.entries[3].reason


NO_FIX_SPACE = """
[variables.NCCL_ALGO]
values = ["Ring"]
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


def test_a_space_that_holds_no_fix_plans_no_triage_slot(tmp_path):
    plan = _plan(tmp_path, NO_FIX_SPACE, budget=3, mode="presets", confirm=False)
    assert plan.fixes is not None and plan.fixes.most == 0
    assert _steps(plan) == [(Step.BASELINE, ""), (Step.SET, "simple"), (Step.FINAL_BASELINE, "")]


def test_the_triages_slot_comes_first_and_the_screen_keeps_its_bound(tmp_path):
    space = SPACE + '[variables.NCCL_P2P_LEVEL]\nvalues = ["SYS"]\n'
    plan = _plan(tmp_path, space, budget=5, screen_top_k=2, mode="presets", confirm=False)
    assert plan.fixes is not None and plan.fixes.most == 3  # LL or the level (fallback), the level (SHM), both
    fixes, screened = plan.entries[1:3]
    assert (fixes.step, fixes.up_to) == (Step.FIXES, 3)
    # no fix: both screened sets fit stage 1's 4 relaunches (5 less the final baseline's slot), though
    # three fixes would leave none
    assert (screened.step, screened.up_to) == (Step.SCREENED, 2)
    assert "the last 2 only if the triage relaunches fewer than 3 sets" in screened.reason


def test_the_reference_check_takes_one_relaunch_right_after_the_baseline(tmp_path):
    plain, gated = _plan(tmp_path), _plan(tmp_path, reference=True)
    assert _steps(gated)[:2] == [(Step.BASELINE, ""), (Step.REFERENCE, "answers reference")]
    assert gated.stage1() == plain.stage1()  # the same share, one of its relaunches the check's
    assert gated.entries[-4].step is Step.PROPOSAL and gated.entries[-4].up_to == plain.entries[8].up_to - 1
    assert gated.budget_words() == ("10 relaunches: the baseline, the reference check (the baseline's answers against "
                                    "the reference configuration's), up to 5 sets, 2 confirmations (the best set, then "
                                    "the runner-up or the best set again), the final baseline")


def test_a_budget_too_small_for_the_reference_check_says_so():
    from tuner.planning import Budget

    assert Budget(4, confirm=True, final_baseline=True, reference=True).minimum == 4
    why = Budget(3, confirm=True, final_baseline=True, reference=True).problem()
    assert why is not None and "the baseline, the reference check, 1 confirmation and the final baseline" in why
