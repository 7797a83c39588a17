"""``--dry-run`` announces what the sweep then does: one set of planning rules for both.

For four configs (presets only, presets then the sampler, a ``[screen]``, a triage that finds
NCCL's P2P level wrong) the dry run is run first, then the sweep with the same options; the
fixed part of the plan (the baseline, presets, skips with their reasons, the sets they equal,
what cannot run on the topology, the reserved checks) must be exactly what the study then
holds, in order, and what only the night decides (the triage's fix sets and the screen's
ranking in their slots, the sampler's proposals) must stay within the bound the dry run gave;
a set announced "reached only if" may be missing, from the end only. Re-measures are checked
by their rule (every ``--baseline-every`` relaunches, never in stage 1's last slot), since their
place among the sets moves with how many sets the slots hand. Every relaunch counts in the budget
the dry run prints, and the reserved checks it names (each confirmation, the final baseline) are
the study's last relaunches. Outcomes that would depend on a verdict are fixed: the confirmation
runs only where one set is twice as fast, elsewhere ``--no-confirm``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import ROOT, SERVERS, cli, envrate_command, example_text, free_port, standin_command, write_config
from tuner.record.trial import Kind, TrialRecord
from tuner.study.storage import StudyStore, default_storage, open_study

sys.path.insert(0, str(SERVERS))


@dataclass
class Announced:
    """The dry run's plan as printed: the numbered relaunch lines (a set past the budget as
    ``("maybe", item)`` or ``("out", name)``), the bounds of the triage's and the screen's slots,
    the sampler's bound, the reserved checks, the budget (every relaunch counted)."""

    items: list[tuple]
    proposals: int | None
    screened: int
    reserved: list[str]
    fixes: int = 0
    budget: int | None = None


def _announced(stdout: str) -> Announced:
    items: list[tuple] = []
    screened = fixes = 0
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Relaunches in order: "))
    for line in lines[start:]:
        m = re.match(r"^(?:Relaunches in order: |\s+)\d+(?:-\d+)?\. (.*)$", line)
        if m is None:
            break
        text = m.group(1)
        if text == "the untuned baseline":
            items.append(("baseline",))
        elif text.startswith("baseline re-measure"):
            items.append(("remeasure",))
        elif re.match(r"up to \d+ triage fix sets?: ", text):
            fixes = int(text.split()[2])
            items.append(("fixes",))
        elif text.startswith("up to "):
            screened = int(text.split()[2])
            items.append(("screened",))
        else:
            name, _, rest = text.partition(": ")
            assert " - may not" not in rest, line
            if " - not reached" in rest:
                items.append(("out", name))
                continue
            maybe = " - reached only if " in rest
            rest = rest.split(" - reached only if ")[0]
            skipped = re.search(r" - skipped: (.*)$", rest)
            item = ("skip", name, skipped.group(1)) if skipped else ("set", name)
            items.append(("maybe", item) if maybe else item)
    sampler = next((line for line in lines if line.startswith("Then the sampler")), "")
    bound = re.match(r"Then the sampler \(TPE\): (?:up to (\d+) proposals?|no proposal)", sampler)
    budget = next(line for line in lines if line.startswith("Budget: "))
    words = re.match(r"Budget: (\d+) relaunches: the baseline, (?:\d+ baseline re-measures?, )?up to \d+ sets?"
                     r"(?:, (\d) confirmations?[^,]*)?(, the final baseline)?\.$", budget)
    assert words is not None, budget  # the checks in the night's order: the confirmations, then the final baseline
    reserved = ["confirm"] * int(words.group(2) or 0) + (["final"] if words.group(3) else [])
    return Announced(items, (int(bound.group(1) or 0) if bound else None), screened, reserved, fixes,
                     int(words.group(1)))


def _records(results: Path, study: str) -> list[TrialRecord]:
    store = StudyStore(open_study(study, default_storage(results / study), create=False), {})
    return store.records(relaunched_only=False)


def _label(rec: TrialRecord) -> str:
    """The dry run's name for an earlier set (the planner's ``earlier_label``)."""
    if rec.kind is Kind.BASELINE:
        return "the untuned baseline"
    return rec.preset if rec.preset.startswith("screen-") else f"preset {rec.preset}"


def _ran(records: list[TrialRecord], at: str = "") -> list[tuple[str, ...]]:
    """What the study holds, in trial order, in the dry run's terms (a sampler's repeat, told
    the known result, is not part of any plan and is left out); ``at``: the decode size's words."""
    by_trial = {r.trial: r for r in records}
    out: list[tuple[str, ...]] = []
    for r in records:
        if r.kind is Kind.BASELINE:
            out.append(("remeasure",) if r.recheck else ("baseline",))
        elif r.kind in (Kind.DUPLICATE, Kind.INVALID) and r.preset:
            why = (f"to NCCL{at} the same set as {_label(by_trial[r.duplicate_of])}"
                   if r.kind is Kind.DUPLICATE and r.duplicate_of is not None else r.cause)
            out.append(("skip", r.preset, why))
        elif r.kind is Kind.PRESET:
            out.append(("set", r.preset))
        elif r.kind is Kind.SEARCH:
            out.append(("search",))
        elif r.kind is Kind.CONFIRM:
            out.append(("confirm",))
    return out


def _slot(got: list[tuple], i: int, prefix: str, most: int) -> int:
    """Past the slot's sets (named ``prefix...``, relaunched or skipped) from ``got[i]``; at most ``most``."""
    j = i
    while j < len(got) and got[j][0] in ("set", "skip") and got[j][1].startswith(prefix):
        j += 1
    assert j - i <= most, (prefix, most, got[i:j])
    return j


def _same(item: tuple, got: tuple) -> bool:
    """``got`` is the announced ``item``, or a set the dry run said may equal a slot's set (then skipped)."""
    return got == item or (item[0] == "set" and got[:2] == ("skip", item[1])
                           and bool(re.search(r"the same set as (fix: |screen-)", got[2])))


def _compare(plan: Announced, ran: list[tuple], every: int = 0) -> None:
    """What ran against what the dry run announced (the module docstring says how)."""
    tail = [{"confirm": ("confirm",), "final": ("remeasure",)}[name] for name in plan.reserved]
    assert ran[len(ran) - len(tail):] == tail, (ran, plan.reserved)
    if plan.budget is not None:  # every relaunch counts, the checks included
        assert sum(1 for x in ran if x[0] != "skip") <= plan.budget, (plan.budget, ran)
    body = ran[:len(ran) - len(tail)]
    launched = [i for i, x in enumerate(body) if x[0] in ("set", "search")]
    since = 0
    for i, x in enumerate(body):  # a re-measure exactly when due, before the next relaunch
        if x[0] in ("baseline", "remeasure"):
            assert x == ("baseline",) or (every and since >= every), (x, since, body)
            since = 0
        elif x[0] in ("set", "search"):
            last_slot = plan.budget is not None and i == launched[-1] and sum(
                1 for y in body if y[0] != "skip") == plan.budget - len(tail)
            assert not (every and since >= every) or last_slot, ("a re-measure was due", x, body)
            since += 1
    got = [x for x in body if x != ("remeasure",)]
    i, missing = 0, False
    for item in (x for x in plan.items if x != ("remeasure",)):
        if item == ("fixes",):
            i = _slot(got, i, "fix: ", plan.fixes)
        elif item == ("screened",):
            j = _slot(got, i, "screen-", plan.screened)
            assert [x[1] for x in got[i:j]] == [f"screen-{k + 1}" for k in range(j - i)], got
            i = j
        elif item[0] == "out":
            assert all(x[1:2] != (item[1],) for x in got), (item, got)
        elif item[0] == "maybe":  # pushed out of the budget: missing from the end only
            if not missing and i < len(got) and _same(item[1], got[i]):
                i += 1
            else:
                missing = True
                assert all(x[1:2] != (item[1][1],) for x in got), (item, got)
        else:
            assert not missing and i < len(got) and _same(item, got[i]), (i, got, plan.items)
            i += 1
    # the sampler's share, within its bound
    assert all(x == ("search",) for x in got[i:]) and len(got) - i <= (plan.proposals or 0), (plan.proposals, got[i:])


def _check(stdout: str, results: Path, study: str, *, judged_at: str | None = None,
           every: int = 0) -> tuple[Announced, list]:
    """Compare the dry run's plan with the study; returns both for the config's own checks."""
    plan = _announced(stdout)
    records = _records(results, study)
    ran = _ran(records, f" at {judged_at}" if judged_at is not None else "")
    # what ran is in trials.csv too, in the same order, and so is every named set not launched
    df = pd.read_csv(results / study / "trials.csv").sort_values("trial")
    launched = [r for r in records if r.kind.relaunched]
    relaunches = df[df["status"] != "skipped"]
    assert list(relaunches["trial"]) == [r.trial for r in launched]
    assert list(relaunches["kind"]) == [r.kind.value for r in launched]
    named_skips = [r.trial for r in records if not r.kind.relaunched and r.preset]
    assert set(named_skips) <= set(df[df["status"] == "skipped"]["trial"]), df[["trial", "kind", "preset"]]
    _compare(plan, ran, every)
    return plan, ran


def _sweep_twice(cfg: Path, results: Path, study: str, *options: str):
    dry = cli("sweep", str(cfg), "--dry-run", "--results", str(results), "--study", study, *options)
    assert dry.returncode == 0, dry.stderr
    res = cli("sweep", str(cfg), "--results", str(results), "--study", study, *options)
    assert res.returncode == 0, res.stderr
    return dry, res


def test_presets_with_a_diagnosis_run_as_announced(tmp_path):
    """The simulator's PCIe box, diagnosed first: sets equal at every size the night measures
    (the decode allreduce and the prompt's prefill, 8 tokens on the simulator, which the
    metric output_tok_s includes) and one that cannot run there are announced skipped, and
    are; re-measures fall where due. The triage's fix (NCCL_P2P_LEVEL=SYS) is not in safe.toml:
    its slot stays empty."""
    cfg = _sim_config(tmp_path, ROOT / "search_spaces" / "safe.toml")
    results = tmp_path / "r"
    res = cli("diagnose", str(cfg), "--results", str(results), "--study", "p")
    assert res.returncode == 0, res.stderr
    dry, _ = _sweep_twice(cfg, results, "p", "--mode", "presets", "--trials", "10", "--baseline-every", "2",
                          "--no-confirm")
    assert "Planned with what" in dry.stdout and "diagnose.json" in dry.stdout
    assert "114688 B (prefill, C=1)" in dry.stdout
    plan, ran = _check(dry.stdout, results, "p", judged_at="14336 and 114688 B", every=2)
    assert plan.proposals is None and plan.reserved == ["final"]
    # the diagnosis names NCCL 2.27.3: the allreduce-only presets are judged by it, not doubted
    assert [x[1] for x in ran if x[0] == "set"] == ["deployment-tuned", "simple", "p2p-disable", "tree-ll-allreduce"]
    skips = {x[1]: x[2] for x in ran if x[0] == "skip"}
    assert skips["ll-allreduce"] == skips["ring-ll-allreduce"] == skips["ll"]
    assert skips["ll"] == "to NCCL at 14336 and 114688 B the same set as the untuned baseline"
    assert skips["max-connections-1"] == "to NCCL at 14336 and 114688 B the same set as preset deployment-tuned"
    assert skips["ring-ll"] == skips["channels-8"] == skips["ll"]  # the set measured, not a skip that equals it
    assert "no algorithm/protocol available for function AllGather" in skips["tree-ll"]
    assert ("remeasure",) in plan.items


SEARCH_SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_MAX_NCHANNELS]
values = ["4", "8"]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "ll-default-buffer"
env = { NCCL_PROTO = "LL", NCCL_BUFFSIZE = "0x400000" }
[[presets]]
name = "default-buffer"
env = { NCCL_BUFFSIZE = "4194304" }
[[presets]]
name = "channels-8"
env = { NCCL_MAX_NCHANNELS = "8" }
"""


def test_presets_then_the_sampler_within_its_bound_then_the_confirmation(tmp_path, space_file):
    """Presets equal by canonical form are skipped as announced; the sampler proposes at most
    what the budget leaves; one set twice as fast makes the confirmation certain."""
    effects = json.dumps({"NCCL_PROTO=LL": 2.0})
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(SEARCH_SPACE), trials=4,
                       extra_server=f"env = {{ ENVRATE_EFFECTS = '{effects}' }}",
                       extra_sweep='seed = 3\n[nccl]\nversion = "2.21.5"', max_tokens=60, repeats=3)
    results = tmp_path / "r"
    dry, _ = _sweep_twice(cfg, results, "s", "--trials", "8")  # stage 1: 6, then the confirmation and the final baseline
    plan, ran = _check(dry.stdout, results, "s")
    assert plan.proposals == 3 and plan.reserved == ["confirm", "final"]
    assert ("skip", "ll-default-buffer", "to NCCL the same set as preset ll") in ran
    assert ("skip", "default-buffer", "to NCCL the same set as the untuned baseline") in ran


SCREEN_SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring", "Tree"]
[variables.CUDA_DEVICE_MAX_CONNECTIONS]
values = [1]
[[presets]]
name = "connections-1"
env = { CUDA_DEVICE_MAX_CONNECTIONS = "1" }
[[presets]]
name = "ll-connections-1"
env = { NCCL_PROTO = "LL", CUDA_DEVICE_MAX_CONNECTIONS = "1" }
"""
#: The allreduce landscape both the stand-in and the server follow (tests/servers/landscape.py).
LANDSCAPE = {
    "ENVRATE_AR_US": "40",
    "ENVRATE_AR_EFFECTS": json.dumps({"NCCL_PROTO=LL": 0.8, "NCCL_PROTO=Simple": 1.6, "NCCL_ALGO=Tree": 1.3,
                                      "NCCL_ALGO=Ring": 0.95}),
    "ENVRATE_EFFECTS": json.dumps({"CUDA_DEVICE_MAX_CONNECTIONS=1": 1.005}),
    "ENVRATE_LOAD_S": "0.1",
}


def test_the_screens_best_within_their_bound_then_the_presets_as_announced(tmp_path, space_file):
    """The screen hands at most top_k sets, relaunched first; the presets follow as announced
    (each holds a variable the screen cannot vary, so none can equal a screened set)."""
    cmd = ", ".join(f'"{a}"' for a in standin_command())
    model = ROOT / "tests" / "fixtures" / "model_configs" / "llama-3.3-70b-instruct.config.json"
    screen = (f'[screen]\ncommand = [{cmd}]\nsizes = [14336, 14680064]\ntrials = 8\ntop_k = 2\ntimeout_s = 20\n'
              f'[model]\nconfig = "{model}"\nallreduces_per_token = 100\n[nccl]\nversion = "2.21.5"\n')
    server = "env = { " + ", ".join(f"{k} = '{v}'" for k, v in LANDSCAPE.items()) + " }"
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(SCREEN_SPACE), trials=6,
                       extra_server=server, extra_sweep='seed = 5\nmode = "presets"\n' + screen, max_tokens=40,
                       repeats=3)
    results = tmp_path / "r"
    dry, res = _sweep_twice(cfg, results, "sc", "--no-confirm", "--force")
    plan, ran = _check(dry.stdout, results, "sc")
    assert plan.screened == 2 and plan.reserved == ["final"]
    assert ("screened",) in plan.items and [x for x in ran if x[0] == "set"][-2:] == [
        ("set", "connections-1"), ("set", "ll-connections-1")]
    assert "screen ended" in res.stderr


def _sim_config(tmp_path: Path, space: Path) -> Path:
    """examples/sim.toml (the pcie-8x-mla box), shortened, on ``space``."""
    text = example_text("sim.toml")
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "0.3"')
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 6", "repeats = 2")
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{space}"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    return cfg


LEVEL_SPACE = """
[variables.NCCL_P2P_LEVEL]
values = ["SYS"]
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
[[presets]]
name = "channels-8"
env = { NCCL_MAX_NCHANNELS = "8" }
[[presets]]
name = "p2p-disable"
env = { NCCL_P2P_DISABLE = "1" }
"""


def test_the_triages_fix_runs_in_its_slot_and_pushes_the_last_preset_out(tmp_path, space_file):
    """On the simulator's PCIe box a quarter of the ring hops are on SHM for NCCL's P2P level:
    the triage's fix (NCCL_P2P_LEVEL=SYS) runs right after the baseline, within the slot's
    bound, and the preset it pushes out of the budget is missing from the end, as announced."""
    cfg = _sim_config(tmp_path, space_file(LEVEL_SPACE))
    results = tmp_path / "r"
    dry, _ = _sweep_twice(cfg, results, "t", "--mode", "presets", "--trials", "5", "--no-confirm")
    assert "2-4. up to 3 triage fix sets: decided by the baseline's NCCL log" in dry.stdout, dry.stdout
    plan, ran = _check(dry.stdout, results, "t")
    assert plan.fixes == 3 and ("maybe", ("set", "p2p-disable")) in plan.items
    assert ran[:2] == [("baseline",), ("set", "fix: p2p level")], ran
    assert ("set", "p2p-disable") not in ran and ("set", "channels-8") in ran


def test_the_comparison_fails_when_the_sweep_departs_from_the_announcement():
    """The check above is not vacuous: a fix set after a preset, more fix sets than the bound,
    a pushed-out set present after a missing one, a re-measure not due, each fails it."""
    plan = Announced([("baseline",), ("fixes",), ("set", "a"), ("maybe", ("set", "b")), ("maybe", ("set", "c"))],
                     None, 0, ["final"], fixes=1)
    fix = ("set", "fix: p2p level")
    _compare(plan, [("baseline",), fix, ("set", "a"), ("set", "b"), ("remeasure",)])  # as announced
    _compare(plan, [("baseline",), ("set", "a"), ("set", "b"), ("set", "c"), ("remeasure",)])  # no fix: c fits
    for departed in ([("baseline",), ("set", "a"), fix, ("set", "b"), ("remeasure",)],
                     [("baseline",), fix, ("set", "fix: all"), ("set", "a"), ("remeasure",)],
                     [("baseline",), fix, ("set", "a"), ("set", "c"), ("remeasure",)],
                     [("baseline",), fix, ("remeasure",), ("set", "a"), ("remeasure",)]):
        with pytest.raises(AssertionError):
            _compare(plan, departed, every=0 if departed[2] != ("remeasure",) else 2)
    budgeted = Announced(plan.items, None, 0, ["final"], fixes=1, budget=4)
    _compare(budgeted, [("baseline",), fix, ("set", "a"), ("remeasure",)])  # within the budget of 4
    with pytest.raises(AssertionError):  # one relaunch more than the budget, the final baseline counted
        _compare(budgeted, [("baseline",), fix, ("set", "a"), ("set", "b"), ("remeasure",)])
