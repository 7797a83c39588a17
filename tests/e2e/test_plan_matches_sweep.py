"""``--dry-run`` announces what the sweep then does: one set of planning rules for both.

For three configs (presets only, presets then the sampler, a ``[screen]``) the dry run is run
first, then the sweep with the same options; the fixed part of the plan (the baseline,
re-measures, presets, skips with their reasons, the sets they equal, what cannot run on the
topology, the reserved checks) must be exactly what the study then holds, in order, and what
only the night decides (the sampler's proposals, the screen's ranking) must stay within the
bound the dry run gave. Outcomes that would depend on a verdict are fixed: the confirmation runs
only where one set is twice as fast, elsewhere ``--no-confirm``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tests.helpers import ROOT, SERVERS, cli, envrate_command, free_port, standin_command, write_config
from tuner.record.trial import Kind, TrialRecord
from tuner.study.storage import StudyStore, default_storage, open_study

sys.path.insert(0, str(SERVERS))


@dataclass
class Announced:
    """The dry run's plan as printed: the numbered relaunch lines, the sampler's bound, the
    reserved checks."""

    items: list[tuple[str, ...]]
    proposals: int | None
    screened: int
    reserved: list[str]


def _announced(stdout: str) -> Announced:
    items: list[tuple[str, ...]] = []
    screened = 0
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
        elif text.startswith("up to "):
            screened = int(text.split()[2])
            items.append(("screened",))
        else:
            name, _, rest = text.partition(": ")
            assert " - not reached" not in rest and " - reached only if" not in rest and " - may not" not in rest, line
            skipped = re.search(r" - skipped: (.*)$", rest)
            items.append(("skip", name, skipped.group(1)) if skipped else ("set", name))
    sampler = next((line for line in lines if line.startswith("Then the sampler")), "")
    bound = re.match(r"Then the sampler \(TPE\): (?:up to (\d+) proposals?|no proposal)", sampler)
    budget = next(line for line in lines if line.startswith("Budget: "))
    reserved = [name for name, words in (("confirm", "one confirmation of a winner"),
                                         ("final", "the final baseline re-measure")) if words in budget]
    if "one confirmation" in budget and "final baseline" in budget:
        assert budget.index("one confirmation") < budget.index("final baseline"), budget  # in the night's order
    return Announced(items, (int(bound.group(1) or 0) if bound else None), screened, reserved)


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


def _check(stdout: str, results: Path, study: str, *, judged_at: str | None = None) -> tuple[Announced, list]:
    """Compare the dry run's plan with the study; returns both for the config's own checks."""
    plan = _announced(stdout)
    records = _records(results, study)
    ran = _ran(records, f" at {judged_at}" if judged_at is not None else "")
    # what ran is in trials.csv too, in the same order
    df = pd.read_csv(results / study / "trials.csv").sort_values("trial")
    launched = [r for r in records if r.kind.relaunched]
    assert list(df["trial"]) == [r.trial for r in launched]
    assert list(df["kind"]) == [r.kind.value for r in launched]
    # the fixed part, screened sets (up to their bound) in their place
    expected = list(plan.items)
    i = 0
    for item in expected:
        if item == ("screened",):
            j = i
            while j < len(ran) and ran[j][0] == "set" and ran[j][1].startswith("screen-"):
                j += 1
            names = [x[1] for x in ran[i:j]]
            assert len(names) <= plan.screened and names == [f"screen-{k + 1}" for k in range(len(names))], ran
            i = j
            continue
        assert ran[i] == item, (i, ran, expected)
        i += 1
    # the sampler's share, within its bound, then the reserved checks in order
    proposals = [x for x in ran[i:] if x == ("search",)]
    assert len(proposals) <= (plan.proposals or 0), (plan.proposals, ran[i:])
    i += len(proposals)
    tail = [{"confirm": ("confirm",), "final": ("remeasure",)}[name] for name in plan.reserved]
    assert ran[i:] == tail, (ran[i:], plan.reserved)
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
    are; re-measures fall where announced."""
    text = (ROOT / "examples" / "sim.toml").read_text()
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "0.3"')
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 4", "repeats = 2")
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT}/search_spaces/safe.toml"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    results = tmp_path / "r"
    res = cli("diagnose", str(cfg), "--results", str(results), "--study", "p")
    assert res.returncode == 0, res.stderr
    dry, _ = _sweep_twice(cfg, results, "p", "--mode", "presets", "--trials", "10", "--baseline-every", "2",
                          "--no-confirm")
    assert "Planned with what" in dry.stdout and "diagnose.json" in dry.stdout
    assert "114688 B (prefill, C=1)" in dry.stdout
    plan, ran = _check(dry.stdout, results, "p", judged_at="14336 and 114688 B")
    assert plan.proposals is None and plan.reserved == ["final"]
    assert [x[1] for x in ran if x[0] == "set"] == ["deployment-tuned", "simple", "p2p-disable"]
    skips = {x[1]: x[2] for x in ran if x[0] == "skip"}
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
    dry, _ = _sweep_twice(cfg, results, "s", "--trials", "6")
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
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(SCREEN_SPACE), trials=5,
                       extra_server=server, extra_sweep='seed = 5\nmode = "presets"\n' + screen, max_tokens=40,
                       repeats=3)
    results = tmp_path / "r"
    dry, res = _sweep_twice(cfg, results, "sc", "--no-confirm", "--force")
    plan, ran = _check(dry.stdout, results, "sc")
    assert plan.screened == 2 and plan.reserved == ["final"]
    assert ("screened",) in plan.items and [x for x in ran if x[0] == "set"][-2:] == [
        ("set", "connections-1"), ("set", "ll-connections-1")]
    assert "screen ended" in res.stderr
