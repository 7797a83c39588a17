"""The night's clock on the simulator: the dry run of a 12-relaunch night names its end and the
relaunches that fit before ``--until``/``--timeout``; the night then run under a deadline keeps
its reserved checks' time (the first stage stops early enough for them), numbers every relaunch
``k of n`` with ``k <= n``, and its clock is built from the phases it measured: their sum for the
finished part, and the night's wall time within a generous factor of it (behaviour, not speed:
the same measurements on either side)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pandas as pd
import pytest

from tests.helpers import ROOT, cli, example_text, free_port
from tuner.inputs.config import load_config
from tuner.planning import relaunch_time
from tuner.study.storage import StudyStore, default_storage, open_study


def _config(tmp_path):
    """examples/sim.toml (its clock hints kept) with a 2 s load and a short probe: the time is mostly the load."""
    text = example_text("sim.toml", gates=True)  # its answers gate kept: the clock counts it; its soak removed below
    text = text.replace("port = 8477", f"port = {free_port()}").replace('"--load-time", "1"', '"--load-time", "2"')
    text = text.replace("max_tokens = 96", "max_tokens = 16").replace("repeats = 6", "repeats = 2")
    text = text.replace("baseline_every = 2\n", "")  # the default cadence: this clock is not the demo's
    text = re.sub(r"^soak_minutes = .*\n", "", text, flags=re.M)  # nor its soak: the tests' default, none
    text = text.replace('space = "search_spaces/default.toml"', f'space = "{ROOT}/search_spaces/default.toml"')
    cfg = tmp_path / "sim.toml"
    cfg.write_text(text)
    return cfg


def test_a_dry_run_of_a_12_relaunch_night_names_its_end_and_what_fits(tmp_path):
    cfg = _config(tmp_path)
    until = (datetime.now() + timedelta(hours=2)).strftime("%H:%M")
    res = cli("sweep", str(cfg), "--dry-run", "--trials", "12", "--until", until, "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert re.search(r"^Clock: A relaunch takes about \d+\.\d s: load 2\.0 s \(server\.expected_load_s\), probe \d+\.\d s "
                     r"\(.* tokens a stream at probe\.expected_tok_s 70 tok/s\)", res.stdout, re.M), res.stdout
    assert re.search(rf"^  Before --until {until} \(in .*\): all 12 relaunches fit \(relaunches 1-9: the baseline and "
                     r"the sets, relaunches 10-12 reserved: 2 confirmations, the final baseline\); about .*, expected "
                     r"end \d\d:\d\d( \(\+1 d\))?\.$", res.stdout, re.M), res.stdout
    # a deadline the night does not fill: the first stage gives up its last slots, the checks keep theirs
    res = cli("sweep", str(cfg), "--dry-run", "--trials", "12", "--timeout", "40s", "--results", str(tmp_path / "r"))
    line = next(x for x in res.stdout.splitlines() if x.startswith("  Before --timeout 40 s"))
    m = re.search(r": (\d+) of the 12 relaunches fit: relaunches 1-(\d+): the baseline and the sets, relaunches "
                  r"(\d+)-(\d+) reserved: 2 confirmations, the final baseline \(the first stage stops (\d+) relaunch", line)
    assert m is not None, line
    fit, last, first_check, last_check, cut = map(int, m.groups())
    assert (first_check, last_check, fit) == (last + 1, last + 3, last + 3) and cut == 9 - last
    assert not (tmp_path / "r").exists()


@pytest.mark.alone  # a 30 s deadline against measured relaunches: under the full suite's load one took 8.6 s against 3.1 s expected
def test_a_night_under_a_deadline_keeps_its_checks_and_its_clock_is_its_measured_phases(tmp_path):
    cfg, results = _config(tmp_path), tmp_path / "r"
    res = cli("sweep", str(cfg), "--trials", "12", "--timeout", "30s", "--results", str(results), "--study", "c")
    assert res.returncode == 0, res.stderr
    err = res.stderr
    assert "clock: A relaunch takes about" in err and re.search(r"clock: Before --timeout 30 s \(in \d+ s\): ", err), err
    log = (results / "c" / "night.log").read_text()  # every phase line (the console shows them on a terminal only)
    assert "relaunch 1 of" not in err and "clock: A relaunch takes about" in log
    counted = [(int(k), int(n)) for k, n in re.findall(r"relaunch (\d+) of (\d+) \[", log)]
    assert counted and all(k <= n for k, n in counted), counted
    df = pd.read_csv(results / "c" / "trials.csv").sort_values("trial")
    made = df[df["status"] != "skipped"]
    assert sorted({k for k, _ in counted}) == list(range(1, len(made) + 1))  # the night's count, one per relaunch
    assert re.search(r"relaunch 1 of \d+ \[.*expected end \d\d:\d\d", log), log
    # the reserved checks kept their time: whatever ended the first stage, no check was skipped for it
    assert "was skipped" not in err, err
    tuned = made[made["kind"] != "baseline"]
    if len(tuned):
        assert made.iloc[-1]["kind"] == "baseline"  # the final baseline re-measure came last
    stopped = re.search(r"sweep ended: (.*); \d+ relaunch", err)
    assert stopped is not None
    if "--timeout" in stopped.group(1):  # stopped by the clock: it says the checks' time was kept
        assert "reserved check" in stopped.group(1) and "would not fit" in stopped.group(1)
    # the clock the night ends with is its measured phases: the mean of each, the sum for the finished part
    store = StudyStore(open_study("c", default_storage(results / "c"), create=False), {})
    records = [r for r in store.records() if r.status.value == "ok"]
    per = relaunch_time(load_config(cfg), records)
    assert per.load.source == f"measured: mean of {len(records)} launches"
    phases = sum((r.load_s or 0) + (r.probe_s or 0) + (r.teardown_s or 0) for r in records)
    assert per.work_s is not None and abs(len(records) * per.work_s - phases) < 1e-6 * phases
    assert all((r.load_s or 0) + (r.probe_s or 0) + (r.teardown_s or 0) <= (r.wall_s or 0) + 1e-3 for r in records)
    night = max(r.finished_at or 0 for r in records) - min(r.started_at or 0 for r in records)
    assert per.seconds is not None and 0.5 < night / (len(records) * per.seconds) < 2.0
    # and the dry run of the same study times the next night by them
    dry = cli("sweep", str(cfg), "--dry-run", "--trials", "12", "--results", str(results), "--study", "c")
    assert per.load.text("load") in dry.stdout, dry.stdout
