"""tuner.report.decision: one decision, said first, and every view naming the set it recommends."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest

from tests.helpers import cli, sample_records, trial_record
from tests.unit.report.page_reader import parse
from tuner.judging import judge
from tuner.record import Kind, Metric, StudyInfo, set_key
from tuner.report import CHECK_PREFIX, write_outputs
from tuner.report.decision import (
    KINDS,
    NO_GAIN_FOUND,
    NOT_DECIDED,
    NOTHING_TO_GAIN,
    USE,
    confirm_command,
    decide,
    scope_lines,
)
from tuner.report.nights import find_nights, judge_night
from tuner.report.status import night_status, status_rows
from tuner.sweep import never_confirmed
from tuner.sweep.check import Against, CheckedSet

FOUR = {"NCCL_MAX_NCHANNELS": "4"}
BUF = {"NCCL_BUFFSIZE": "2097152"}
INFO = StudyInfo(server_command=["vllm", "serve", "/m", "--port", "8000"])
BASE = [70.1, 71.3, 69.8, 70.6]
K4, KBUF = set_key(FOUR, []), set_key(BUF, [])


def two_held() -> list:
    """Two finalists that both hold: NCCL_MAX_NCHANNELS=4 (+15 %) confirmed first, then
    NCCL_BUFFSIZE=2097152 (+10 %), then the baseline: the last confirmation row is the runner-up."""
    return [trial_record(0, "baseline", BASE),
            trial_record(1, "preset", [81.0, 81.6, 80.9, 81.3], env=FOUR, ttft_s=0.050),
            trial_record(2, "preset", [77.4, 77.9, 77.2, 77.7], env=BUF),
            trial_record(3, "preset", [70.3, 70.9, 70.0, 70.6], env={"NCCL_PROTO": "LL"}),
            trial_record(4, "confirm", [81.2, 81.5, 81.0, 81.4], env=FOUR, ttft_s=0.052),
            trial_record(5, "confirm", [77.6, 77.8, 77.3, 77.9], env=BUF),
            trial_record(6, "baseline", [70.5, 71.0, 70.2, 70.9], recheck=True)]


def _judged(records, min_effect=0.01):
    return judge([r for r in records if r.kind.relaunched], metric=Metric.OUTPUT, min_effect=min_effect)


def test_two_finalists_that_both_hold_every_view_names_the_judged_winner(tmp_path):
    records = [r.__class__(**{**vars(r), "ttft_s": r.ttft_s or 0.040}) for r in two_held()]
    j = _judged(records)
    assert j.winner == K4 and j.confirmed is True
    assert all(j.sets[k].confirmation.verdict.value == "faster" for k in (K4, KBUF))
    night, verdict = write_outputs(records, INFO, "two", tmp_path, min_effect=0.01, figures=False)
    d = night.parts[0].decision
    assert d.kind == USE and d.env == FOUR
    assert verdict.startswith("Use NCCL_MAX_NCHANNELS=4: +15.")  # the first line is the decision
    assert verdict.splitlines()[0].endswith("confirmed on fresh launches.")
    use = "\n".join(night.parts[0].use)
    assert "NCCL_MAX_NCHANNELS=4" in use and "NCCL_BUFFSIZE" not in use  # not the last confirmation row's set
    md = (tmp_path / "report.md").read_text()
    assert md.split("## Verdict\n\n", 1)[1].startswith("**Use NCCL_MAX_NCHANNELS=4: +15.")
    assert "export NCCL_MAX_NCHANNELS=4" in md and "export NCCL_BUFFSIZE" not in md
    page = parse(tmp_path / "report.html")
    assert page.paragraphs["verdict"][0].startswith("Use NCCL_MAX_NCHANNELS=4: +15.")
    assert "NCCL_BUFFSIZE" not in "".join(page.pres["verdict"])
    answer = night.to_json({"report_md": str(tmp_path / "report.md")})
    assert answer["decision"]["kind"] == "use" and answer["recommended"]["env"] == FOUR
    assert answer["decision"]["line"] == d.line and answer["files"] == {"report_md": str(tmp_path / "report.md")}
    assert {s["set"] for s in answer["sets"]} == {"NCCL_MAX_NCHANNELS=4", "NCCL_BUFFSIZE=2097152", "NCCL_PROTO=LL"}
    assert [g["gate"] for g in answer["gates"]][:1] == ["confirmation"]
    assert answer["gates"][0]["outcome"].startswith("held: +15.")
    # with the recommendation: what it was judged on and its time to first token
    assert "Judged on single-stream output tok/s (one stream, the probe's prompt)." in d.reasons
    assert "Time to first token: 51 ms against 40 ms untuned (+28 %, medians, it loses TTFT)." in d.reasons
    # the views of a stored night: judge_night as studies and status read it
    (hj,) = judge_night(records, INFO, "two")
    assert hj.decision.line == d.line
    # check --set winner, and the runner-up that held: both were confirmed there
    against = Against("two", "sqlite:///x", records, INFO, j)
    assert never_confirmed(against, CheckedSet("winner", dict(FOUR))) == ""
    assert never_confirmed(against, CheckedSet("b", dict(BUF))) == ""


def _store(results: Path, name: str, records) -> None:
    """``records`` written into a real SQLite study at ``results/<name>/study.db``, as a sweep does."""
    from tuner.study import StudyStore, default_storage, open_study

    folder = results / name
    folder.mkdir(parents=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    choices = {"NCCL_MAX_NCHANNELS": ("unset", "4"), "NCCL_BUFFSIZE": ("unset", "2097152"), "NCCL_PROTO": ("unset", "LL")}
    store = StudyStore(open_study(name, default_storage(folder), seed=1), choices)
    store.update_info(server_command=INFO.server_command, min_effect=0.01, trials=len(records))
    for r in records:
        trial, _, rec = store.ask_fixed(store.params_of(r.env), r)
        store.finish(trial, rec, rec.output_tok_s or 0.0)


def test_studies_and_status_say_the_decision_of_a_stored_night(tmp_path):
    _store(tmp_path, "two", two_held())
    _store(tmp_path, "base", [trial_record(0, "baseline", BASE)])
    nights = {n.name: n for n in find_nights(None, tmp_path)}
    rows = dict(status_rows(night_status(nights["two"])))
    assert rows["decision"].startswith("Use NCCL_MAX_NCHANNELS=4: +15.")
    listing = cli("studies", "--results", str(tmp_path))
    assert listing.returncode == 0, listing.stderr
    line = next(x for x in listing.stdout.splitlines() if x.startswith("two "))
    assert "Use NCCL_MAX_NCHANNELS=4: +15." in line and "NCCL_BUFFSIZE" not in line
    # a night of the baseline alone headlines no gain: it says what it decided
    only = next(x for x in listing.stdout.splitlines() if x.startswith("base "))
    assert "Not decided: only the baseline was measured" in only and "%" not in only
    listed = {s["study"]: s for s in json.loads(cli("studies", "--results", str(tmp_path), "--json").stdout)}
    assert listed["two"]["host_types"][0]["decision"]["recommended"]["env"] == FOUR
    assert listed["base"]["host_types"][0]["decision"]["kind"] == NOT_DECIDED
    status = json.loads(cli("status", "--study", "two", "--results", str(tmp_path), "--json").stdout)
    assert status["decision"][0]["kind"] == USE and status["decision"][0]["recommended"]["env"] == FOUR


def test_nothing_to_gain_when_every_interval_ends_below_the_minimum_effect():
    records = [trial_record(0, "baseline", BASE),
               trial_record(1, "preset", [69.9, 70.4, 69.6, 70.3], env={"NCCL_PROTO": "LL"}),
               trial_record(2, "preset", [60.1, 60.6, 59.8, 60.4], env={"NCCL_PROTO": "Simple"}),
               trial_record(3, "baseline", [70.4, 71.0, 70.1, 70.8], recheck=True)]
    # one launch a set: each interval is about +-5 % wide (launch noise ~1.75 %), so a 6 % gain is what it rules out
    j = _judged(records, min_effect=0.06)
    d = decide(j, INFO, records=records)
    assert all(s.comparison.ci_high < 1.06 for s in j.sets.values()), [s.comparison for s in j.sets.values()]
    assert d.kind == NOTHING_TO_GAIN and d.key is None and not d.recommends
    assert d.line.startswith("Nothing to gain among the 2 sets measured: no interval reaches +6 % (best -0.6 %")
    assert len(d.line.split()) <= 25
    # at a 1 % minimum effect the same intervals do not rule a gain out: no gain found, plainly, and why
    wide = decide(_judged(records), INFO)
    assert wide.kind == NO_GAIN_FOUND and wide.line.startswith("No gain found: the best set, NCCL_PROTO=LL, measured")
    assert wide.line.endswith("within the noise; keep the defaults") and len(wide.line.split()) <= 25
    assert "so one of 1 % is not ruled out" in " ".join(wide.reasons)


def test_a_set_that_failed_confirmation_is_not_decided_with_the_check_that_would_confirm_it():
    records = [*sample_records(), trial_record(11, "confirm", [70.4, 70.8, 71.0, 70.6], env={"NCCL_PROTO": "LL",
                                                                                              "NCCL_MAX_NCHANNELS": "8"}),
               trial_record(12, "baseline", [70.8, 71.6, 70.5, 71.2], recheck=True)]
    j = _judged(records)
    info = StudyInfo(config_path="examples/x.toml", storage_hint="sqlite:///results/night/study.db")
    d = decide(j, info, records=records, study="night")
    assert d.kind == NOT_DECIDED and d.line.startswith("Not decided: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL looked best at")
    assert ", not confirmed; this night can confirm " in d.line and len(d.line.split()) <= 25
    command = confirm_command(j, j.winner, info, records, "night")
    assert command is not None and command.startswith("`nccl-tune check examples/x.toml --trials ")
    assert "--against night --set NCCL_PROTO=LL NCCL_MAX_NCHANNELS=8`" in command  # results/ is the default
    assert f"To confirm {d.ratio * 100 - 100:+.1f} % on its own: {command}." in d.reasons
    # the check of that set against this night says plainly that the night never confirmed it
    against = Against("night", "sqlite:///x", records, info, j)
    said = never_confirmed(against, CheckedSet("deployed", {"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "8"}))
    assert said == "study night did not confirm it (trial 3: failed confirmation)"
    assert never_confirmed(against, CheckedSet("deployed", {"NCCL_ALGO": "Tree"})) == "study night never measured it"


def test_the_other_decisions_and_their_kinds():
    assert decide(None, INFO).line == "Not decided: the untuned baseline has no successful measurement yet"
    base = [trial_record(0, "baseline", BASE)]
    assert decide(_judged(base), INFO, records=base).line == (
        "Not decided: only the baseline was measured, no tuned set yet")
    pending = decide(_judged(sample_records()), INFO, records=sample_records())
    assert pending.kind == NOT_DECIDED and pending.line.startswith("Not decided yet: NCCL_MAX_NCHANNELS=8 NCCL_PROTO=LL")
    assert "do not adopt it before it is: run the same command again." in pending.reasons[0]
    met = decide(_judged(base), StudyInfo(target=60.0, target_met_untuned=True))
    assert met.line == "Keep the defaults: the untuned server already meets the target of 60 tok/s"
    forced = judge([*base, trial_record(1, "preset", [70.0, 70.5, 70.2, 70.4], env=FOUR)], metric=Metric.OUTPUT,
                   forced="TP 1")
    assert decide(forced, INFO).kind == "no-speed-verdict"
    held = decide(_judged(two_held()), StudyInfo(stop_reason=f"{CHECK_PREFIX}holds: ... still significantly faster"))
    assert held.kind == "holds" and held.recommends
    assert {d.kind for d in (pending, met, held)} <= set(KINDS)


def test_a_burst_says_why_ttft_is_empty():
    records = [trial_record(0, "baseline", BASE, timing_measurable=False, ttft_s=None),
               trial_record(1, "preset", [70.0, 70.4, 70.1, 70.3], env=FOUR, timing_measurable=False, ttft_s=None)]
    lines = scope_lines(decide(_judged(records), INFO), records)
    assert lines == ("TTFT and TPOT are left empty for 2 relaunches: the server sent its tokens in a burst, so the "
                     "time of each token cannot be read (tok/s over the whole answer stays right).",)


@pytest.mark.parametrize("kind", ["confirm", "preset"])
def test_confirmed_row_follows_the_judgement_not_the_last_row(kind):
    from tuner.report.frame import trials_frame
    from tuner.report.text import confirmed_row

    records = two_held()
    j = _judged(records)
    df = trials_frame(records, metric=Metric.OUTPUT, min_effect=0.01, judgement=j)
    row = confirmed_row(df, j)
    assert row is not None and row["env"] == FOUR and row["kind"] == Kind.CONFIRM
    assert confirmed_row(df, None) is None
    assert math.isfinite(decide(j, INFO).ratio)


def test_a_set_that_wins_one_stream_and_loses_under_load_says_so():
    from tests.unit.judging.test_levels import P2P_OFF, RING, night
    from tuner.judging import judge_levels

    records = [*night(), trial_record(6, "confirm", [79.1, 79.5, 78.8, 79.4], env=P2P_OFF, concurrency={8: 338.0}),
               trial_record(7, "baseline", [70.3, 71.1, 70.1, 70.8], recheck=True, concurrency={8: 399.0})]
    lj = judge_levels(records, metric=Metric.OUTPUT)
    d = decide(lj.headline, INFO, records=records)
    assert d.kind == USE and d.env == P2P_OFF
    lines = scope_lines(d, records, levels=lj)
    assert lines[0] == "Judged on single-stream output tok/s (one stream, the probe's prompt)."
    assert lines[-1].startswith("At C=8: -15.") and lines[-1].endswith("% (it loses throughput there).")
    # judged at C=8 instead: Ring, and the single stream is the other level
    at8 = judge_levels(night(confirm=RING), metric=Metric.OUTPUT, judged_level=8)
    ring = decide(at8.headline, INFO)
    assert ring.env == RING and scope_lines(ring, night(confirm=RING), levels=at8) == (
        "Judged on aggregate output tok/s at 8 concurrent streams.", "At one stream: -0.1 % (no difference there).")
