"""The correctness gate through the CLI, against an independent server whose answers a set can
corrupt (tests/servers/answers_server.py): a faster set that corrupts ends ``wrong_output``, is
never recommended and the report shows its prompt and tokens; a clean faster set still is; a
baseline whose own path corrupts is said to be the machine's."""

from __future__ import annotations

import json
import os
import sys

import pandas as pd
import pytest

from tests.helpers import SERVERS, cli, write_config
from tuner.record import CSV_COLUMNS

SPACE = """
[variables.NCCL_PROTO]
values = ["LL"]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "ch8"
env = { NCCL_MAX_NCHANNELS = "8" }
"""
GATES = '[gates]\nanswers = true\nmax_tokens = 40\nprompts = ["Recite the alphabet.", "Count in French."]\n'
COMMAND = [sys.executable, str(SERVERS / "answers_server.py"), "--port", "{port}"]
# LL is 50 % faster and corrupts every answer from its third token; 8 channels is 30 % faster and clean
FAST = {"ENVRATE_EFFECTS": json.dumps({"NCCL_PROTO=LL": 1.5, "NCCL_MAX_NCHANNELS=8": 1.3})}


def _night(tmp_path, space_file, env: dict[str, str], gates: str = GATES, trials: int = 6):
    """One night through the CLI; returns its result, study folder and the decision (``--json``)."""
    cfg = write_config(tmp_path / "exp.toml", command=COMMAND, space=space_file(SPACE), trials=trials,
                       extra_sweep='mode = "presets"\n' + gates)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "g", "--json",
              env={**os.environ, **FAST, **env})
    assert res.returncode == 0, res.stderr
    said = json.loads(res.stdout)
    return res, tmp_path / "r" / "g", {**said["decision"], "recommended": said["recommended"], "gates": said["gates"]}


@pytest.mark.alone  # "use" rests on timed launches: a busy machine (the full suite on 2 cores) widened them to "no gain found" once
def test_a_faster_set_that_corrupts_answers_is_wrong_output_and_the_clean_one_is_recommended(tmp_path, space_file):
    _res, study, decision = _night(tmp_path, space_file, {"ANSWERS_CORRUPT_WHEN": "NCCL_PROTO=LL"})
    df = pd.read_csv(study / "trials.csv")
    assert {"answers_checked", "answers_diverge"} <= set(df.columns) and list(df.columns) == list(CSV_COLUMNS)
    ll = df[df["env"] == json.dumps({"NCCL_PROTO": "LL"})]
    assert list(ll["status"]) == ["wrong_output"]
    row = ll.iloc[0]
    assert row["output_tok_s"] > 0  # measured, kept for the report
    assert row["verdict"] == "failed" and bool(row["answers_checked"])
    assert row["answers_diverge"].startswith("prompt 1 ('Recite the alphabet.') parted at token 2: baseline ")
    assert any(f"vs set ' {w}'" in row["answers_diverge"] for w in ("Lyon", "zzz", "###", "qux"))
    clean = df[df["env"] == json.dumps({"NCCL_MAX_NCHANNELS": "8"})]
    assert (clean["status"] == "ok").all() and clean["answers_checked"].all()
    assert clean["answers_diverge"].isna().all()  # identical answers: nothing to say
    # the decision: the clean set, with the corrupting one named among the reasons
    assert decision["kind"] == "use"
    assert decision["recommended"]["env"] == {"NCCL_MAX_NCHANNELS": "8"}
    assert any(r.startswith("NCCL_PROTO=LL gave wrong output") and "parted at token 2" in r for r in decision["reasons"])
    assert {"gate": "correctness", "outcome": "answers matched the baseline's on 2 launches"} in decision["gates"]
    report = (study / "report.md").read_text()
    assert "NCCL_PROTO=LL gave wrong output" in report and "'Recite the alphabet.'" in report
    assert "NCCL_PROTO=LL gave wrong output" in (study / "report.html").read_text()
    log = (study / "night.log").read_text()
    said = [ln for ln in log.splitlines() if "wrong output: prompt 1 ('Recite the alphabet.') parted at token 2" in ln]
    assert len(said) == 1, said  # the gate's line, once; the trial's line points to it
    assert "then wrong_output (said above)" in log
    # every launch kept its answers; the sampler was told the corrupting set failed
    assert len(list((study / "answers").glob("trial-*.json"))) == int(df["kind"].isin(
        ["baseline", "preset", "confirm"]).sum())


def test_a_clean_fork_at_a_near_tie_is_within_tolerance(tmp_path, space_file):
    _, study, decision = _night(tmp_path, space_file, {"ANSWERS_NEAR_TIE": "3",
                                                       "ANSWERS_FORK_WHEN": "NCCL_MAX_NCHANNELS=8"})
    df = pd.read_csv(study / "trials.csv")
    clean = df[df["env"] == json.dumps({"NCCL_MAX_NCHANNELS": "8"})]
    assert (clean["status"] == "ok").all()
    assert clean.iloc[0]["answers_diverge"].startswith("prompt 1 ('Recite the alphabet.') parted at token 3")
    assert not any("wrong output" in r for r in decision["reasons"])  # a fork blames no set


def test_the_reference_configuration_says_when_the_machine_corrupts(tmp_path, space_file):
    gates = GATES + "reference = true\n"
    cfg = write_config(tmp_path / "dry.toml", command=COMMAND, space=space_file(SPACE), trials=7,
                       extra_sweep='mode = "presets"\n' + gates)
    dry = cli("sweep", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "2. the correctness gate's reference check: the baseline with NCCL_P2P_DISABLE=1" in dry.stdout
    assert "the baseline, the reference check" in dry.stdout
    # the default path corrupts: only a launch with P2P off answers right
    _, study, decision = _night(tmp_path, space_file, {"ANSWERS_CORRUPT_UNLESS": "NCCL_P2P_DISABLE=1"}, gates,
                                trials=7)
    df = pd.read_csv(study / "trials.csv")
    ref = df[df["preset"] == "answers reference"]
    assert len(ref) == 1 and ref.iloc[0]["trial"] == 1 and ref.iloc[0]["status"] == "ok"
    assert json.loads(ref.iloc[0]["env"]) == {"NCCL_P2P_DISABLE": "1"}
    assert ref.iloc[0]["answers_diverge"].startswith("prompt 1")
    assert "the untuned baseline's answers part from the reference configuration's" in (study / "night.log").read_text()
    # sets were compared with the reference's answers: both corrupt like the baseline's path
    sets = df[df["preset"].isin(["ll", "ch8"])]
    assert (sets["status"] == "wrong_output").all()
    assert decision["kind"] != "use"
    assert any("may be corrupting answers" in r for r in decision["reasons"])
