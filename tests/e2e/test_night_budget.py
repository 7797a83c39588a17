"""The budget says what it leaves out, through the CLI: with ``--until``/``--timeout`` and no
trials given the budget is what fits (said, and set again once the baseline measures a
relaunch); with both, the time left unused and the presets not reached, with the ``--trials``
that reaches them and when it would end; a budget that holds no tuned set is never said to hold
one; a preset that repeats another's set is a skipped row of trials.csv and of report.md's "Sets
not measured"; and the bundled examples' budgets reach their presets (sim-acs its fix,
p2p-disable)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pandas as pd

from tests.helpers import ROOT, envrate_command, example_text, free_port, run_cli, write_config
from tuner.study.storage import StudyStore, default_storage, open_study

NOT_REACHED = re.compile(r"^NOT REACHED: (\d+) presets? of the space \(([^)]*)\): the budget of (\d+) relaunches is "
                         r"spent before (?:them|it); --trials (\d+) reaches every preset however many sets the triage "
                         r"and the screen hand \((.*)\)\.$", re.M)


def _sim(tmp_path, *, trials: bool = True, load: bool = True):
    """examples/sim.toml (load 2 s and 70 tok/s expected) on a free port, its space by absolute
    path; without ``trials`` no sweep.trials, without ``load`` no server.expected_load_s."""
    text = example_text("sim.toml").replace("port = 8477", f"port = {free_port()}")
    text = text.replace('space = "search_spaces/', f'space = "{ROOT}/search_spaces/')
    # the budget these tests reason about, whatever the demo's own (tuned for a stable decision)
    text = re.sub(r"^trials = \d+.*\n", "trials = 8\n", text, flags=re.M)
    text = re.sub(r"^baseline_every = .*\n", "", text, flags=re.M)
    if not trials:
        text = re.sub(r"^trials = \d+.*\n", "", text, flags=re.M)
    if not load:
        text = re.sub(r"^expected_load_s = .*\n", "", text, flags=re.M)
    path = tmp_path / "sim.toml"
    path.write_text(text)
    return path


def _until(hours: float) -> str:
    return (datetime.now() + timedelta(hours=hours)).strftime("%H:%M")


def test_a_deadline_and_no_trials_plans_what_fits(tmp_path):
    cfg, until = _sim(tmp_path, trials=False), _until(1)
    res = run_cli("sweep", str(cfg), "--dry-run", "--until", until, "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    m = re.search(rf"^Budget: what fits before --until {until} \(no --trials or sweep\.trials given\): (\d+) "
                  r"relaunches: the baseline, ", res.stdout, re.M)
    assert m is not None, res.stdout
    budget = int(m.group(1))
    assert budget > 12, budget  # an hour holds more than the default's 12 relaunches of ~9 s
    # the clock lays exactly that budget before the deadline, and says no time is left unused
    assert re.search(rf"^  Before --until {until} \(in .*\): all {budget} relaunches fit", res.stdout, re.M), res.stdout
    assert "left unused" not in res.stdout
    assert "passed: server.env fixes no variable the space varies; the budget: what fits before the deadline" in res.stdout
    # a --timeout is a deadline too; a shorter one fits fewer
    short = run_cli("sweep", str(cfg), "--dry-run", "--timeout", "10m", "--results", str(tmp_path / "r"))
    m = re.search(r"^Budget: what fits before --timeout 10\.0 min \(no --trials or sweep\.trials given\): (\d+) ",
                  short.stdout, re.M)
    assert m is not None and int(m.group(1)) < budget, short.stdout
    # --trials given: the budget is the one given, the clock says what it leaves unused
    given = run_cli("sweep", str(cfg), "--dry-run", "--until", until, "--trials", "9", "--results", str(tmp_path / "r"))
    assert "Budget: 9 relaunches: " in given.stdout, given.stdout


def test_before_a_launch_is_measured_the_budget_is_said_to_come_from_the_first_launch(tmp_path):
    cfg = _sim(tmp_path, trials=False, load=False)
    res = run_cli("sweep", str(cfg), "--dry-run", "--timeout", "8h", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert ("Budget: what fits before --timeout 8 h 00 min, counted once the first launch measures a relaunch's time "
            "(no --trials or sweep.trials given; set server.expected_load_s and probe.expected_tok_s to count it now); "
            "planned here at 12: 12 relaunches: ") in res.stdout, res.stdout


def test_a_budget_and_a_deadline_say_the_time_unused_and_the_presets_not_reached(tmp_path):
    cfg, until = _sim(tmp_path), _until(3)
    res = run_cli("sweep", str(cfg), "--dry-run", "--until", until, "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    m = re.search(rf"^  Before --until {until} \(in .*\): all 8 relaunches fit .*expected end \d\d:\d\d\.\n"
                  rf"  (\d+ h \d\d min) of the time before --until {until} left unused: --trials (\d+) fills it",
                  res.stdout, re.M)
    assert m is not None, res.stdout
    assert int(m.group(2)) > 8
    found = NOT_REACHED.search(res.stdout)
    assert found is not None, res.stdout
    count, names, budget, trials, end = found.groups()
    assert names.split(", ") == ["channels-8", "p2p-disable", "ll-allreduce", "ring-ll-allreduce",
                                 "tree-ll-allreduce"] and (count, budget) == ("5", "8")
    assert re.fullmatch(r"about .+, expected end \d\d:\d\d", end), end
    # the --trials named reaches them: its own dry run says nothing is left out
    again = run_cli("sweep", str(cfg), "--dry-run", "--trials", trials, "--results", str(tmp_path / "r"))
    assert again.returncode == 0 and "NOT REACHED" not in again.stdout and "not reached" not in again.stdout
    assert "reached only if" not in again.stdout, again.stdout


def test_the_bundled_examples_reach_their_presets(tmp_path):
    """sim-acs reaches its fix (p2p-disable); the real-vLLM example tunes a set and never says its
    budget holds one when it does not."""
    acs = run_cli("sweep", "examples/sim-acs.toml", "--dry-run", "--results", str(tmp_path / "r"))
    assert acs.returncode == 0, acs.stderr
    line = next(x for x in acs.stdout.splitlines() if " p2p-disable: NCCL_P2P_DISABLE=1" in x)
    assert "reached" not in line, line
    assert "NOT REACHED" not in acs.stdout
    vllm = run_cli("sweep", "examples/vllm-cpu-tiny.toml", "--dry-run", "--force", "--results", str(tmp_path / "r"))
    assert vllm.returncode == 0, vllm.stderr
    assert "no tuned set" not in vllm.stdout and "NOT REACHED" not in vllm.stdout, vllm.stdout
    assert re.search(r"^Budget: \d+ relaunches: the baseline, up to [1-9]\d* sets?, ", vllm.stdout, re.M), vllm.stdout
    assert re.search(r"the budget of \d+ relaunches holds the baseline, [1-9]\d* slots for sets and baseline re-measures "
                     r"and the reserved checks", vllm.stdout), vllm.stdout
    # with baseline re-measures (the default), the check's slots are the Budget line's sets and re-measures together
    sim = run_cli("sweep", "examples/sim.toml", "--dry-run", "--results", str(tmp_path / "r"))
    assert sim.returncode == 0, sim.stderr
    plan = re.search(r"^Budget: 12 relaunches: the baseline, (\d+) baseline re-measures, up to (\d+) sets, ", sim.stdout, re.M)
    held = re.search(r"the budget of 12 relaunches holds the baseline, (\d+) slots for sets and baseline re-measures "
                     r"and the reserved checks", sim.stdout)
    assert plan and held, sim.stdout
    assert int(held.group(1)) == int(plan.group(1)) + int(plan.group(2))


def test_a_budget_without_room_for_a_set_says_so_and_never_that_it_holds_one(tmp_path):
    cfg = _sim(tmp_path)
    res = run_cli("sweep", str(cfg), "--dry-run", "--trials", "3", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert "Budget: 3 relaunches: the baseline, no tuned set, 1 confirmation, the final baseline." in res.stdout
    assert "passed: server.env fixes no variable the space varies; the budget of 3 relaunches holds the baseline and " \
           "the reserved checks" in res.stdout
    assert ("warning: the budget of 3 relaunches holds no tuned set: the night measures the untuned baseline only "
            "(--trials 4 leaves room for one set)") in res.stdout
    assert "holds the baseline, a set" not in res.stdout and "up to 0 sets" not in res.stdout
    # --no-confirm frees a slot: the same 3 relaunches then hold one set
    freed = run_cli("sweep", str(cfg), "--dry-run", "--trials", "3", "--no-confirm", "--results", str(tmp_path / "r"))
    assert "the budget of 3 relaunches holds the baseline, up to 1 set and the reserved checks" in freed.stdout
    assert "holds no tuned set" not in freed.stdout
    # the night itself says it at its start, before its one relaunch
    night = run_cli("sweep", str(cfg), "--trials", "3", "--results", str(tmp_path / "r"), "--study", "none")
    assert night.returncode == 0, night.stderr
    assert ("warning: the budget of 3 relaunches holds no tuned set: the night measures the untuned baseline only "
            "(--trials 4 leaves room for one set)") in night.stderr, night.stderr
    assert re.search(r"warning: NOT REACHED: 11 presets of the space \(deployment-tuned, .*tree-ll-allreduce\)", night.stderr)


DUPLICATE_SPACE = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "ll-again"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


def test_a_preset_that_repeats_another_is_a_skipped_row_and_a_set_not_measured(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(DUPLICATE_SPACE), trials=5,
                       extra_sweep='mode = "presets"', max_tokens=20, repeats=2)
    results = tmp_path / "r"
    dry = run_cli("sweep", str(cfg), "--dry-run", "--no-confirm", "--results", str(results))
    assert dry.returncode == 0, dry.stderr
    assert "ll-again: NCCL_PROTO=LL - skipped: to NCCL the same set as preset ll" in dry.stdout, dry.stdout
    assert "measured once, under that name" not in dry.stdout + dry.stderr
    res = run_cli("sweep", str(cfg), "--no-confirm", "--results", str(results), "--study", "dup")
    assert res.returncode == 0, res.stderr
    assert "sweep ended: 3 presets: 2 measured, 1 skipped (see report.md, Sets not measured)" in res.stderr, res.stderr
    df = pd.read_csv(results / "dup" / "trials.csv")
    ll = df[(df["preset"] == "ll") & (df["status"] == "ok")]
    again = df[df["preset"] == "ll-again"]
    assert len(ll) == 1 and len(again) == 1, df[["trial", "kind", "preset", "status"]]
    row = again.iloc[0]
    assert (row["status"], row["kind"], row["verdict"]) == ("skipped", "duplicate", "not measured")
    assert row["verdict_note"] == f"trial {int(ll.iloc[0]['trial'])} (preset ll)" and row["cause"]
    md = (results / "dup" / "report.md").read_text()
    table = md[md.index("## Sets not measured"):]
    assert re.search(rf"\| *{int(row['trial'])} *\| *ll-again *\| *NCCL_PROTO=LL *\|.*\| *trial "
                     rf"{int(ll.iloc[0]['trial'])} \(preset ll\) *\|", table), table


def test_the_night_start_sets_its_budget_by_the_clock_and_says_what_it_leaves_out(tmp_path):
    """Without trials, the budget is what fits, set at the start from the expected time and again
    once the baseline is measured (the study stores the last); with trials and a deadline, the
    start says the time left unused and, loudly, the presets not reached."""
    cfg = _sim(tmp_path, trials=False)
    text = cfg.read_text().replace('"--load-time", "1"', '"--load-time", "0.3"')
    cfg.write_text(text.replace("max_tokens = 96", "max_tokens = 16").replace("repeats = 6", "repeats = 2"))
    results = tmp_path / "r"
    res = run_cli("sweep", str(cfg), "--timeout", "20s", "--results", str(results), "--study", "fill")
    assert res.returncode == 0, res.stderr
    said = re.findall(r"budget: (\d+) relaunches, what fits before --timeout 20 s \(no --trials or sweep\.trials "
                      r"given\)(, at the relaunch time measured)?$", res.stderr, re.M)
    assert [bool(m) for _, m in said] == [False, True], res.stderr  # at the start, then after the baseline
    store = StudyStore(open_study("fill", default_storage(results / "fill"), create=False), {})
    assert store.info().trials == int(said[-1][0])
    log = (results / "fill" / "night.log").read_text()  # the phases: in the night's log
    counted = [(int(k), int(n)) for k, n in re.findall(r"relaunch (\d+) of (\d+) \[", log)]
    assert counted and all(k <= n for k, n in counted), counted
    # trials given and a deadline far away: the time left unused and the presets not reached, at the start
    res = run_cli("sweep", str(cfg), "--trials", "3", "--no-confirm", "--timeout", "2h", "--results", str(results),
                  "--study", "given")
    assert res.returncode == 0, res.stderr
    assert re.search(r"clock: \d h \d\d min of the time before --timeout 2 h 00 min left unused: --trials \d+ fills it",
                     res.stderr), res.stderr
    warning = next(x for x in res.stderr.splitlines() if "warning: NOT REACHED" in x)
    assert "p2p-disable" in warning and re.search(r"; --trials \d+ reaches every preset", warning), warning
    assert "budget: " not in res.stderr  # the budget given is the budget
