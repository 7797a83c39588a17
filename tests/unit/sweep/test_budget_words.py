"""The dry run's check of the budget (tuner.sweep.prelaunch.budget_words) and its Budget line
(the plan's :meth:`tuner.planning.forecast.Plan.budget_words`) add up: the check's slots are the
plan's sets, its baseline re-measures and the reference check together, never a count of sets
that the Budget line contradicts."""

from __future__ import annotations

import re

import pytest

from tests.unit.planning.test_forecast import _plan
from tuner.sweep.prelaunch import budget_words


@pytest.mark.parametrize("budget, every, reference", [(12, 2, False), (12, 2, True), (7, 2, False), (5, 5, False),
                                                     (10, 0, True), (16, 3, True)])
def test_the_check_and_the_budget_line_add_up(tmp_path, budget, every, reference):
    plan = _plan(tmp_path, budget=budget, baseline_every=every, mode="presets", reference=reference)
    line = plan.budget_words()
    sets = int(m.group(1)) if (m := re.search(r"up to (\d+) sets?", line)) else 0
    remeasures = int(m.group(1)) if (m := re.search(r"(\d+) baseline re-measures?", line)) else 0
    held, warning = budget_words(budget, True, True, reference=reference, remeasured=every > 0)
    assert ("the reference check" in held) == reference == ("the reference check" in line)
    assert not warning
    if every:
        assert f"{sets + remeasures} slots for sets and baseline re-measures" in held or \
            (remeasures == 0 and f"up to {sets} set" in held), (held, line)
    else:
        assert f"up to {sets} set" in held and remeasures == 0, (held, line)


def test_no_room_for_a_set_is_a_warning_with_the_budget_that_has_room():
    held, warning = budget_words(4, True, True, reference=True)
    assert held == "the budget of 4 relaunches holds the baseline, the reference check and the reserved checks"
    assert warning.endswith("(--trials 5 leaves room for one set)")
    assert budget_words(5, True, True, reference=True, remeasured=True)[0] == (
        "the budget of 5 relaunches holds the baseline, the reference check, up to 1 set and the reserved checks")
