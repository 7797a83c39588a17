"""End-to-end sweeps against an independent server whose speed and faults depend on the NCCL
variables it was started with (tests/servers/envrate_server.py): real processes, real ports."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import alive_pids, cli, envrate_command, server_processes, start_cli, wait_for_log, write_config
from tuner.diagnose import DEBUG_ENV

PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
[[presets]]
name = "ring-ll-16"
env = { NCCL_ALGO = "Ring", NCCL_PROTO = "LL", NCCL_MAX_NCHANNELS = "16", NCCL_BUFFSIZE = "16777216" }
"""


def _workers_alive(study_dir: Path) -> list[int]:
    pids = []
    for log in (study_dir / "logs").glob("*.log"):
        for line in log.read_text().splitlines():
            if line.startswith("WORKERS "):
                pids += [int(p) for p in line.split()[1:]]
    return alive_pids(pids)


def _saw_env(log: str) -> dict:
    for line in Path(log).read_text().splitlines():
        if line.startswith("SAW_ENV "):
            return json.loads(line[len("SAW_ENV "):])
    raise AssertionError(f"no SAW_ENV line in {log}")


@pytest.mark.alone  # its verdicts (-15 % called slower) are on timed launches: a busy machine blurs them (failed so once)
def test_sweep_records_what_the_server_saw(tmp_path, space_file):
    space = space_file(PRESETS)
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=6,
                       extra_sweep='mode = "presets"', max_tokens=200, repeats=5)
    env = dict(os.environ, NCCL_PROTO="Simple", NCCL_DEBUG="INFO", CUDA_DEVICE_MAX_CONNECTIONS="4")
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "s1", env=env, figures=True)
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "s1" / "trials.csv")
    assert list(df["trial"])[:4] == [0, 1, 2, 3]
    assert (df["status"] == "ok").all()
    base = df[df["trial"] == 0].iloc[0]
    assert base["kind"] == "baseline" and json.loads(base["env"]) == {}
    # The shell's tuning never reached the baseline, and every row's env is what the server saw,
    # plus the init-time NCCL logging nccl-tune adds to every launch to prove what NCCL read.
    # (SAW_ENV lists NCCL_* and CUDA_DEVICE_MAX_CONNECTIONS: the per-trial NCCL_DEBUG_FILE is one)
    # The first baseline, its NCCL not yet known, also runs NCCL's own P2P check (2.31+); the
    # final one does not: the first one's log said NCCL 2.21.5, which has none.
    def added(row) -> dict[str, str]:
        log = tmp_path / "r" / "s1" / "logs" / f"trial-{row['trial']:04d}.nccl" / "%h.%p.log"
        diag = {"NCCL_RUN_DIAGNOSTICS": "1"} if row["trial"] == 0 else {}
        return {**DEBUG_ENV, "NCCL_DEBUG_FILE": str(log), **diag}

    assert _saw_env(base["log"]) == added(base)
    assert set(json.loads(base["removed_inherited"])) == {"NCCL_PROTO", "NCCL_DEBUG", "CUDA_DEVICE_MAX_CONNECTIONS"}
    for _, row in df.iterrows():
        assert _saw_env(row["log"]) == {**json.loads(row["env"]), **added(row)}, row["trial"]
    # A drift re-measure of the baseline closes the sweep (trial 4).
    assert df.iloc[-1]["kind"] == "baseline"
    # +5 % with two baseline launches is within what the launch noise allows (issue: power is
    # honest, see the verdict tests); the interval covers the truth, -15 % is called slower.
    ll = df[df["env"] == json.dumps({"NCCL_PROTO": "LL"})].iloc[0]
    assert ll["verdict"] in ("faster", "no significant difference", "failed confirmation")  # +5 %: may be a finalist
    assert ll["vs_baseline_ci_low"] <= 1.05 <= ll["vs_baseline_ci_high"] + 0.01
    simple = df[df["env"] == json.dumps({"NCCL_PROTO": "Simple"})].iloc[0]
    assert simple["verdict"] == "slower"
    assert not _workers_alive(tmp_path / "r" / "s1")
    assert not server_processes(cfg)
    assert (tmp_path / "r" / "s1" / "trials_vs_baseline.png").stat().st_size > 10_000
    assert "Slower: NCCL_PROTO=Simple (trial 2" in res.stdout
    assert "NCCL_RUN_DIAGNOSTICS" not in str(base.get("nccl_unlaunched", ""))  # nccl-tune's own check is no setting behind its back
    # the host's P2P health, read after the first baseline, is in the report (this machine: no GPU on its bus)
    assert "## P2P health" in (tmp_path / "r" / "s1" / "report.md").read_text()


@pytest.mark.alone  # a verdict on timed launches: a busy machine shrinks the gain it measures (see test_verdicts.py)
def test_half_percent_is_noise_fifteen_percent_is_faster_and_confirmed(tmp_path, space_file):
    space = space_file("""
[[presets]]
name = "half-percent"
env = { CUDA_DEVICE_MAX_CONNECTIONS = "1" }
[[presets]]
name = "fifteen-percent"
env = { NCCL_PROTO = "LL" }
""")
    effects = '{"CUDA_DEVICE_MAX_CONNECTIONS=1": 1.005, "NCCL_PROTO=LL": 1.15}'
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=5,
                       extra_server=f"env = {{ ENVRATE_EFFECTS = '{effects}' }}",
                       extra_sweep='mode = "presets"', max_tokens=200, repeats=5)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "noise")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "noise" / "trials.csv").set_index("trial")
    assert df.loc[1, "verdict"] == "no significant difference"
    assert df.loc[2, "verdict"] == "faster"
    assert df.loc[2, "vs_baseline_ci_low"] <= 1.15 + 0.01 and df.loc[2, "vs_baseline_ci_high"] >= 1.15 - 0.01
    # the winner relaunched once more, then the baseline: the gain held on those launches alone
    assert list(df["kind"])[3:] == ["confirm", "baseline"]
    assert df.loc[3, "verdict"] == "faster" and "Use it." in res.stdout
    assert "export NCCL_PROTO=LL" in res.stdout


def test_search_mode_never_relaunches_a_measured_set(tmp_path, space_file):
    space = space_file("""
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring"]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
""")
    # 3 x 2 = 6 points, the baseline among them: a budget of 10 must stop when they are all measured.
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=10, max_tokens=20,
                       repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "dup", "--seed", "1",
                  "--no-final-baseline", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "dup" / "trials.csv")
    assert len(df) == 6
    assert df["env"].is_unique
    assert "exhausted" in res.stderr


def test_target_met_by_baseline_spends_one_launch(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=7)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "t", "--target", "100")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "t" / "trials.csv")
    assert len(df) == 1 and df.iloc[0]["kind"] == "baseline"
    assert len(list((tmp_path / "r" / "t" / "logs").glob("*.log"))) == 1
    assert "already met by the untuned server" in res.stdout
    assert "already met by the untuned server" in (tmp_path / "r" / "t" / "report.md").read_text()


def test_target_out_of_reach_ends_at_budget(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=3)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "t", "--target", "100000",
                  "--no-final-baseline", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "t" / "trials.csv")
    assert len(df) == 3
    assert "Target 100000 tok/s: not reached within the budget" in res.stdout


def test_target_reached_stops_early(tmp_path, space_file):
    # The baseline, 70 tok/s, can never meet 75: its 28 tokens take at least 27 / 70 s (a busy
    # machine only ever measures a server slower). The first preset, LL, is 4x faster (280): the
    # lower bound of its 5 runs' CI stays above 75 (0.27 of its median) even with two of them
    # delayed without limit (tuner.judging.stats.median_ci_halfwidth), so it meets the target.
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=7,
                       max_tokens=28, repeats=5,
                       extra_server="""env = { ENVRATE_BASE = "70", ENVRATE_EFFECTS = '{"NCCL_PROTO=LL": 4}' }""")
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "t", "--target", "75",
                  "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "t" / "trials.csv")
    assert len(df) == 2 and "reached by trial 1" in res.stdout


@pytest.mark.alone  # the drift it measures is timed: a busy machine shrinks it (see test_verdicts.py)
def test_baseline_drift_keeps_a_small_gain_from_being_called_faster(tmp_path, space_file):
    space = space_file("""
[[presets]]
name = "two-percent"
env = { NCCL_MAX_NCHANNELS = "8" }
""")
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=4,
                       extra_server=f'env = {{ ENVRATE_DRIFT_FILE = "{tmp_path / "drift"}", ENVRATE_DRIFT_AT = "2" }}',
                       extra_sweep='mode = "presets"', max_tokens=200)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "d", figures=True)
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "d" / "trials.csv").set_index("trial")
    # the set may be a finalist (relaunched once more before the final baseline): the budget of 4 holds it
    assert list(df["kind"]) in (["baseline", "preset", "baseline"], ["baseline", "preset", "confirm", "baseline"])
    # The +2 % set is not recommended: the baselines' own 5 % move is in its interval.
    assert df.loc[1, "verdict"] in ("no significant difference", "inconclusive", "failed confirmation")
    assert df.loc[1, "vs_baseline_ci_low"] < 1.0
    assert "Use it." not in res.stdout
    drift = float(re.search(r"over 2 launches, drift ([\d.]+) %", res.stdout).group(1))
    # the server drifts 5 %; a busy machine can shrink what a launch shows (2.7 % seen on 2 cores
    # beside the noise tests), never grow it: only the ceiling and a drift seen at all are the rule's
    assert 1.0 <= drift <= 7.0, drift
    assert (tmp_path / "r" / "d" / "baselines.png").exists()


def test_report_rebuilds_from_storage(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=4,
                       max_tokens=20)
    assert cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "rep").returncode == 0
    out = tmp_path / "r" / "rep"
    before = pd.read_csv(out / "trials.csv")
    assert not list(out.glob("*.png")) and "--no-figures" in (out / "report.md").read_text()  # the words alone
    for f in ("trials.csv", "report.md"):
        (out / f).unlink()
    res = cli("report", "--study", "rep", "--results", str(tmp_path / "r"), figures=True)
    assert res.returncode == 0, res.stderr
    after = pd.read_csv(out / "trials.csv")
    pd.testing.assert_frame_equal(before[["trial", "status", "env", "output_tok_s"]],
                                  after[["trial", "status", "env", "output_tok_s"]])
    assert (out / "trials_vs_baseline.png").exists() and "## Verdict" in (out / "report.md").read_text()
    # the words alone again: the figures of the report before are removed, none taken for this one's
    assert cli("report", "--study", "rep", "--results", str(tmp_path / "r")).returncode == 0
    assert not list(out.glob("*.png")) and not list(out.glob("*.svg"))


def test_port_already_answering_is_refused(tmp_path, space_file):
    from tests import refserver

    server, url = refserver.start_in_thread(port=0)
    try:
        port = int(url.rsplit(":", 1)[1])
        cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), port=port)
        res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "p")
        assert res.returncode == 3
        assert f"port {port}" in res.stderr and "already answers" in res.stderr and "pid" in res.stderr
        assert "Traceback" not in res.stderr
        assert not (tmp_path / "r" / "p" / "logs").exists()
        # said once, with no empty table or report after it
        assert res.stderr.count("already answers") == 1 and res.stdout == "", res.stdout + res.stderr
        assert not (tmp_path / "r" / "p" / "report.md").exists()
    finally:
        refserver.stop(server)


def test_sigterm_tears_down_and_exits_143(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=6,
                       extra_server='env = { ENVRATE_LOAD_S = "30" }', ready_timeout_s=60)
    proc = start_cli(*["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "sig"])
    wait_for_log(tmp_path / "r" / "sig", 0, "SAW_ENV")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert not server_processes(cfg)
    assert "interrupted" in err


def test_runner_sigkill_mid_trial_then_resume(tmp_path, space_file):
    """The runner dies (SIGKILL) while trial 2's server loads; the same command resumes."""
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=5,
                       extra_server='env = { ENVRATE_LOAD_S = "1.5" }', max_tokens=30)
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "res", "--no-confirm"]  # no verdict-made row
    study_dir = tmp_path / "r" / "res"
    proc = start_cli(*args)
    wait_for_log(study_dir, 2, "SAW_ENV")
    proc.kill()
    proc.communicate(timeout=30)
    assert server_processes(cfg), "the dead runner's server should still be running"
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    assert "died during trial 2" in res.stderr
    df = pd.read_csv(study_dir / "trials.csv")
    ok = df[df["status"] == "ok"]
    tuned = ok[ok["kind"] != "baseline"]
    assert len(ok[(ok["kind"] == "baseline")]) == 2  # first + drift re-measure
    assert len(tuned) == 3 and tuned["env"].is_unique
    interrupted = df[df["status"] == "interrupted"]
    assert list(interrupted["trial"]) == [2]
    assert tuned["retry_of_trial"].dropna().astype(int).tolist() == [2]
    assert not server_processes(cfg)
    assert not _workers_alive(study_dir)


def test_failed_baseline_stops_at_once_and_exits_4(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=6,
                       extra_server='env = { ENVRATE_FAULT = "crash-start" }')
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "bf")
    assert res.returncode == 4, res.stderr
    df = pd.read_csv(tmp_path / "r" / "bf" / "trials.csv")
    assert len(df) == 1 and df.iloc[0]["status"] == "crashed" and "NCCL WARN" in df.iloc[0]["cause"]
    assert "no tuned set was launched" in res.stderr
    assert f"server log {df.iloc[0]['log']}" in res.stderr  # where to look, in the message itself


def test_resume_with_changed_server_is_refused(tmp_path, space_file):
    space = space_file(PRESETS)
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=3, max_tokens=20)
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "fp"]
    assert cli(*args).returncode == 0
    cfg.write_text(cfg.read_text().replace("max_tokens = 20", "max_tokens = 40"))
    res = cli(*args, "--trials", "4")
    assert res.returncode == 2 and "probe.max_tokens" in res.stderr and "new --study" in res.stderr
    assert len(pd.read_csv(tmp_path / "r" / "fp" / "trials.csv")) == 1


def test_server_env_may_not_fix_what_the_space_varies(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS),
                       extra_server='env = { NCCL_PROTO = "Simple" }')
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "server.env.NCCL_PROTO" in res.stderr


def test_sets_nccl_treats_as_equal_are_launched_once(tmp_path, space_file):
    space = space_file("""
[variables.NCCL_ALGO]
values = ["Ring", "ring"]
[variables.NCCL_BUFFSIZE]
values = ["0x400000", "4194304"]
""")
    # 3 x 3 points, but to NCCL only two sets: untuned (the buffer size is its default) and Ring.
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=10, max_tokens=20,
                       repeats=2)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "eq", "--seed", "3",
                  "--no-final-baseline", "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "eq" / "trials.csv")
    skipped = df[df["status"] == "skipped"]
    df = df[df["status"] != "skipped"].reset_index(drop=True)
    assert list(df["kind"]) == ["baseline", "search"], df[["trial", "kind", "env"]]
    assert json.loads(df.iloc[1]["env"])["NCCL_ALGO"].lower() == "ring"
    # each other set proposed is listed once, with the set it equals (the baseline or trial 1's)
    assert (skipped["kind"] == "duplicate").all() and skipped["env"].is_unique
    assert set(skipped["verdict_note"]) <= {"trial 0 (the untuned baseline)", f"trial {df.iloc[1]['trial']} (a search set)"}
    assert "exhausted" in res.stderr
