"""The runner's own edges, end to end against the independent env-rate server: hang-ups and
nohup, a second runner of the same study and port, a kill during the last budgeted trial (the
final baseline still made), checks that stop a doomed night in seconds, time budgets."""

from __future__ import annotations

import signal
import subprocess
import sys

import pandas as pd

from tests.helpers import ROOT, cli, envrate_command, server_processes, start_cli, wait_for_log, write_config

PRESETS = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
[[presets]]
name = "simple"
env = { NCCL_PROTO = "Simple" }
"""


def test_sighup_tears_down_exits_129_and_resumes(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=3,
                       extra_server='env = { ENVRATE_LOAD_S = "1" }', max_tokens=20, repeats=2)
    # --no-confirm: the rows are then certain, whatever the verdicts (this is about signals)
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "hup", "--no-final-baseline",
            "--no-confirm"]
    proc = start_cli(*args)
    wait_for_log(tmp_path / "r" / "hup", 1, "SAW_ENV")
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert not server_processes(cfg)
    assert "Traceback" not in err and "SIGHUP" in err
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    assert "resume: retrying trial 1" in res.stderr
    df = pd.read_csv(tmp_path / "r" / "hup" / "trials.csv").set_index("trial")
    assert df.loc[1, "status"] == "interrupted" and df.loc[1, "retried_by_trial"] == 2
    assert (df[df["status"] == "ok"]["kind"] != "baseline").sum() == 2


def test_nohup_survives_a_hang_up(tmp_path, space_file):
    """The detached example of the README and docs/OVERNIGHT.md: `nohup nccl-tune sweep ... > night.log 2>&1 &`."""
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=2,
                       extra_server='env = { ENVRATE_LOAD_S = "1" }', max_tokens=20, repeats=2)
    log = tmp_path / "night.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["nohup", sys.executable, "-m", "tuner.cli", "sweep", str(cfg), "--results",
                                 str(tmp_path / "r"), "--study", "nohup", "--no-final-baseline", "--no-confirm"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_log(tmp_path / "r" / "nohup", 0, "SAW_ENV")
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=120) == 0, log.read_text()
    assert len(pd.read_csv(tmp_path / "r" / "nohup" / "trials.csv")) == 2


def test_second_runner_of_the_same_study_and_port_is_refused(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=2,
                       extra_server='env = { ENVRATE_LOAD_S = "3" }', max_tokens=20, repeats=2)
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "two", "--no-final-baseline",
            "--no-confirm"]
    first = start_cli(*args)
    wait_for_log(tmp_path / "r" / "two", 0, "SAW_ENV")
    second = cli(*args)
    assert second.returncode == 3, second.stderr
    assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    df = pd.read_csv(tmp_path / "r" / "two" / "trials.csv")
    assert list(df["status"]) == ["ok", "ok"]


def test_kill_during_last_trial_still_gets_the_final_baseline(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS), trials=3,
                       extra_server='env = { ENVRATE_LOAD_S = "1.5" }', max_tokens=20, repeats=2)
    args = ["sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "last", "--no-confirm"]
    proc = start_cli(*args)
    wait_for_log(tmp_path / "r" / "last", 1, "SAW_ENV")  # the last budgeted trial
    proc.kill()
    proc.communicate(timeout=30)
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "last" / "trials.csv")
    ok = df[df["status"] == "ok"]
    assert list(ok["kind"]) == ["baseline", "preset", "baseline"], df[["trial", "kind", "status"]]
    assert "over 2 launches" in res.stdout


def test_server_listening_elsewhere_is_refused_in_seconds(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=[*envrate_command()[:-1], "9"], space=space_file(PRESETS),
                       ready_timeout_s=600)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "elsewhere")
    assert res.returncode == 2, res.stderr  # refused before any launch: ready_timeout_s = 600 never waited
    assert not (tmp_path / "r" / "elsewhere" / "logs").exists()
    assert "server.command" in res.stderr and "--port 9" in res.stderr


def test_time_budgets_say_what_they_mean(tmp_path, space_file):
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS))
    res = cli("sweep", str(cfg), "--timeout", "8", "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "8h" in res.stderr and "Traceback" not in res.stderr
    res = cli("sweep", str(cfg), "--timeout", "0s", "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "above 0" in res.stderr
    res = cli("sweep", str(cfg), "--study", "", "--results", str(tmp_path / "r"))
    assert res.returncode == 2
    res = cli("report", "--study", "x", "--min-effect", "-1", "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "fraction" in res.stderr


def test_until_echoes_its_deadline_and_a_past_time_means_tomorrow(tmp_path, space_file):
    from datetime import datetime, timedelta

    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(PRESETS))
    now = datetime.now()
    past = now.replace(hour=0, minute=0) if now.hour or now.minute > 1 else now - timedelta(minutes=2)
    res = cli("sweep", str(cfg), "--until", f"{past:%H:%M}", "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    tomorrow = past + timedelta(days=1)
    assert f"after {tomorrow:%Y-%m-%d %H:%M} (tomorrow" in res.stderr
