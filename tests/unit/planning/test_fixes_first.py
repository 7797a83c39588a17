"""The triage's fix sets are planned before the screen's best and the presets, cut to the space,
judged like any set (duplicates, problems), and kept by a resumed study (tuner/planning/order.py)."""

from __future__ import annotations

from tests.unit.planning.test_plan import planner, run, store  # noqa: F401  (the fixture)
from tuner.planning.entry import ScreenedSet
from tuner.record import Kind, study_from_user_attrs, study_to_user_attrs
from tuner.record.study import StudyInfo
from tuner.triage import Finding, FixSet, Triage

FIXES = [FixSet("fix: all", {"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"}, "both"),
         FixSet("fix: LL at decode", {"NCCL_PROTO": "LL"}, "LL"),
         FixSet("fix: p2p level", {"NCCL_P2P_LEVEL": "SYS"}, "not in the space")]


def test_fixes_come_first_cut_to_the_space_and_judged(store):  # noqa: F811
    base = run(store, {}, Kind.BASELINE)
    p = planner(store)
    p.screened_first([ScreenedSet("screen-1", {"NCCL_MAX_NCHANNELS": "4"})])
    said = p.fixes_first(FIXES)
    assert [s.name for s in p.fixes] == ["fix: all", "fix: LL at decode"]
    assert len(said) == 1 and "NCCL_P2P_LEVEL=SYS is not in the search space" in said[0]
    assert [e.name for e in p.named()][:4] == ["fix: all", "fix: LL at decode", "screen-1", "ll"]
    assert p.next_planned().name == "fix: all"
    run(store, {"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"}, Kind.PRESET, preset="fix: all")
    nxt = p.next_planned()
    assert nxt.name == "fix: LL at decode"
    fix_ll = run(store, nxt.env, Kind.PRESET, preset=nxt.name)
    assert p.next_planned().name == "screen-1"
    # the preset "ll" is the fix's set: judged a duplicate, never relaunched
    decision = p.judge({"NCCL_PROTO": "LL"}, [], baseline=base)
    assert not decision.launch and decision.duplicate_of.trial == fix_ll.trial


def test_fix_sets_equal_after_the_cut_are_planned_once(store):  # noqa: F811
    p = planner(store)
    p.fixes_first([FixSet("fix: fallback", {"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"}, ""),
                   FixSet("fix: LL at decode", {"NCCL_PROTO": "LL"}, "")])
    assert [(s.name, s.env) for s in p.fixes] == [("fix: fallback", {"NCCL_PROTO": "LL"})]


def test_a_resumed_study_reads_the_stored_triage_and_plans_the_same_fixes(store):  # noqa: F811
    t = Triage((Finding("simple-at-decode", "s", "q", "src", "c", (FIXES[1],)),), False, "one finding")
    stored = study_from_user_attrs(study_to_user_attrs(StudyInfo(triage=t.to_dict())))
    back = Triage.from_dict(stored.triage)
    assert back == t
    run(store, {}, Kind.BASELINE)
    p = planner(store)
    p.fixes_first(back.fix_sets())
    assert p.next_planned().name == "fix: LL at decode"
    assert study_from_user_attrs({}).triage == {}  # an older study: no triage, no fixes
