"""Backend sets are judged before any launch as NCCL values are: a choice the server's version
does not have, or that this TP size or these links cannot take, is recorded infeasible with the
reason; NCCL variables in a set whose decode allreduce NCCL does not carry cannot act at decode."""

from __future__ import annotations

from pathlib import Path

from tuner.inputs.space import Preset, SearchSpace
from tuner.nccl import NcclVersion, Topology
from tuner.planning import Facts, Planner, Rules
from tuner.record import Kind, Status, TrialRecord

SYMM = {"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}
OFF = ["--disable-custom-all-reduce"]


def _rules(**facts) -> Rules:
    known = Facts(NcclVersion.parse("2.27.3"), **facts)
    return Rules({}, lambda: known)


def test_a_choice_the_server_version_does_not_have_is_refused_with_the_reason():
    rules = _rules(topology=Topology(8, link="nvswitch"), server="vllm", server_version="0.10.1")
    why = rules.backend_problem(SYMM, OFF)
    assert why is not None and "vLLM 0.10.1 does not have vllm-symm-mem" in why and "0.10.2" in why
    assert _rules(topology=Topology(8, link="nvswitch"), server="vllm", server_version="0.11.0").backend_problem(
        SYMM, OFF) is None


def test_symmetric_memory_without_nvlink_is_refused_and_nothing_known_refuses_nothing():
    pcie = _rules(topology=Topology(4, link="pcie"), server="vllm", server_version="0.11.0")
    assert "this box's GPUs talk over PCIe" in (pcie.backend_problem(SYMM, OFF) or "")
    assert pcie.backend_problem({}, OFF) is None  # NCCL only: any box
    assert pcie.backend_problem({"NCCL_PROTO": "LL"}, []) is None  # no backend choice named
    assert _rules(server="vllm").backend_problem(SYMM, OFF) is None  # version and links not known yet
    assert _rules(topology=Topology(4, link="pcie")).backend_problem(SYMM, OFF) is None  # server not known


def test_the_planner_records_an_infeasible_backend_set_as_not_launched_with_its_cause(tmp_path: Path):
    rules = _rules(topology=Topology(4, link="pcie"), server="vllm", server_version="0.11.0")
    space = SearchSpace(tmp_path / "s.toml", {"NCCL_PROTO": ("LL",)}, [Preset("ll", {"NCCL_PROTO": "LL"})])
    planner = Planner(space, "search", records=list, busy_keys=set, problems=rules.problems, key_of=rules.key_of,
                      refusal=rules.backend_problem)
    backends = SearchSpace(tmp_path / "b.toml", {}, [Preset("vllm-symm-mem", {**SYMM, OFF[0]: "on"}),
                                                    Preset("vllm-nccl-only", {"--disable-custom-all-reduce": "on"})])
    assert planner.backends_first(backends) == ["vllm-symm-mem", "vllm-nccl-only"]
    first = planner.next_planned()
    assert first is not None and first.name == "vllm-symm-mem" and first.env == SYMM and first.flags == OFF
    decision = planner.judge(first.env, first.flags, baseline=None)
    assert not decision.launch and "talk over PCIe" in decision.cause
    off = planner.named()[1]
    assert off.env == {} and off.flags == OFF  # a preset's flag is a flag of the set, not a variable
    assert planner.judge(off.env, off.flags, baseline=None).launch


def test_nccl_variables_cannot_act_at_decode_where_another_backend_carries_it():
    rules = _rules(topology=Topology(8, link="nvswitch"), server="vllm", backend="custom_allreduce")
    why = rules.cannot_act({"NCCL_PROTO": "LL"})
    assert why is not None and "cannot act at decode" in why and "custom_allreduce does" in why
    assert rules.cannot_act({"NCCL_PROTO": "LL"}, OFF) is None  # custom allreduce off: NCCL carries decode
    assert "symm_mem does" in (rules.cannot_act({"NCCL_PROTO": "LL", **SYMM}, OFF) or "")
    assert _rules(topology=Topology(8), server="vllm", backend="nccl").cannot_act({"NCCL_PROTO": "LL"}) is None


def test_a_space_preset_that_repeats_a_backend_set_is_its_duplicate_and_the_same_name_runs_once(tmp_path: Path):
    """Every set accounted for: the backend set runs first under its name; the night's preset
    holding it under another name is judged its duplicate (a record, not a silent drop); one of
    the same name and set is the same preset, planned once."""
    rules = _rules(topology=Topology(4, link="pcie"), server="vllm", server_version="0.11.0")
    space = SearchSpace(tmp_path / "s.toml", {}, [Preset("nccl-only", {"--disable-custom-all-reduce": "on"}),
                                                  Preset("vllm-nccl-only", {"--disable-custom-all-reduce": "on"})])
    records: list[TrialRecord] = [TrialRecord(trial=0, kind=Kind.BASELINE, status=Status.OK)]
    planner = Planner(space, "presets", records=lambda: records, busy_keys=set, problems=rules.problems,
                      key_of=rules.key_of)
    backends = SearchSpace(tmp_path / "b.toml", {}, [Preset("vllm-nccl-only", {"--disable-custom-all-reduce": "on"})])
    assert planner.backends_first(backends) == ["vllm-nccl-only"]
    first = planner.next_planned()
    assert first is not None and first.name == "vllm-nccl-only" and first.flags == OFF
    records.append(TrialRecord(trial=1, kind=Kind.PRESET, status=Status.OK, preset=first.name, flags=list(first.flags)))
    second = planner.next_planned()
    assert second is not None and second.name == "nccl-only"
    decision = planner.judge(second.env, second.flags, baseline=records[0])
    assert not decision.launch and decision.duplicate_of is records[1]
    records.append(TrialRecord(trial=2, kind=Kind.DUPLICATE, status=Status.SKIPPED, preset=second.name,
                               flags=list(second.flags), duplicate_of=1))
    assert planner.next_planned() is None  # the space's own vllm-nccl-only is the backend one, measured
