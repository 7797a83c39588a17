"""The real-server cases of tests/cases/ (reproductions of behaviours servers and proxies show
in the field), each run through a whole sweep as its README says, ending as it says.

Cases 13 and 14 have no sweep file: their probe-level outcome is tested in
tests/unit/measure/test_probe_cases.py, with 01, 10, 11, 15, 17 and 19 as well.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import optuna
import pandas as pd
import pytest

from tests.helpers import ROOT, assert_rate_from_e2e, cli, processes_with

CASES = ROOT / "tests" / "cases"


def case_config(tmp_path: Path, case: str, name: str = "sweep.toml", **replace: str) -> Path:
    """The case's sweep file with its paths made absolute (it was written for the project root
    beside a shared/ folder) and ``replace`` applied (old text -> new)."""
    text = (CASES / case / name).read_text()
    text = text.replace("../shared/cases/", f"{CASES}/").replace('"search_spaces/', f'"{ROOT}/search_spaces/')
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / f"{case}-{name}"
    path.write_text(text)
    return path


def sweep(tmp_path: Path, config: Path, *args: str, env: dict[str, str] | None = None):
    """The case's sweep with --no-confirm; without --trials, the budget the case file gives for a
    default night (every relaunch counts: the confirmation's and the final baseline's slots
    included) less the slots these options free, so the same sets run."""
    if "--trials" not in args:
        found = re.search(r"^trials = (\d+)$", config.read_text(), re.M)
        if found is not None:
            args = (*args, "--trials", str(int(found.group(1)) - 1 - ("--no-final-baseline" in args)))
    res = cli("sweep", str(config), "--results", str(tmp_path / "r"), "--study", "case", "--no-confirm", *args,
              env=env)
    csv = tmp_path / "r" / "case" / "trials.csv"
    return res, (pd.read_csv(csv).set_index("trial") if csv.exists() else None)


# Where a case's outcome does not hang on the final re-measure of the baseline, its night runs
# without it (--no-final-baseline): the baseline and the case's sets, one relaunch fewer.


def test_01_keep_alive_pings_do_not_hide_a_stall(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "01-sse-ping-stall"))
    assert res.returncode == 4, res.stderr  # the baseline hung: nothing to compare with
    assert df.loc[0, "status"] == "hung", df.loc[0, "cause"]  # stall_timeout_s = 5 ended it, not forever


def test_03_the_cause_is_the_root_error_not_the_wrapper(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "03-engine-init-wrapper"))
    assert res.returncode == 4, res.stderr
    assert df.loc[0, "status"] == "crashed"
    assert "No available memory for the cache blocks" in df.loc[0, "cause"]
    assert "See root cause above" not in df.loc[0, "cause"]


def test_07_loading_is_not_unhealthy(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "07-health-200-while-loading"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}
    assert (df["load_s"] > 5).all()  # it waited through the 6 s of 503s, then measured


@pytest.mark.slow  # the port's TIME_WAIT (about 60 s) is waited out for real
def test_08_every_relaunch_binds_its_fixed_port(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "08-port-time-wait"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert list(df["status"]) == ["ok", "ok"], df[["status", "cause"]]  # never blamed on the set
    # the wait for the port (its TIME_WAIT blocks this server) came before each launch: no launch
    # ever failed to bind
    for log in (tmp_path / "r" / "case" / "logs").glob("*.log"):
        assert "Address already in use" not in log.read_text()


def test_09_a_space_edited_on_resume_is_refused_without_a_trace(tmp_path):
    config = case_config(tmp_path, "09-space-edited-on-resume")
    res, _ = sweep(tmp_path, config, "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    res, _ = sweep(tmp_path, config, "--space", str(CASES / "09-space-edited-on-resume" / "space-v2.toml"),
                   "--trials", "4")
    assert res.returncode == 2, res.stderr
    assert "NCCL_MAX_NCHANNELS gained 16" in res.stderr and "new --study" in res.stderr
    assert "Traceback" not in res.stderr
    study = optuna.load_study(study_name="case", storage=f"sqlite:///{tmp_path / 'r' / 'case' / 'study.db'}")
    assert not [t for t in study.get_trials() if t.state.name == "RUNNING"]


def test_10_the_api_key_is_sent_and_written_nowhere(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "10-api-key-401"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}
    for path in (tmp_path / "r").rglob("*"):
        if path.is_file():
            assert b"sk-test-0000" not in path.read_bytes(), path
    assert "sk-test-0000" not in res.stdout + res.stderr


def test_11_a_base_model_is_measured_on_completions(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "11-base-model-no-chat-template"))
    assert res.returncode == 4
    assert 'probe.endpoint = "completions"' in df.loc[0, "cause"]
    res, df = sweep(tmp_path / "c", case_config(tmp_path, "11-base-model-no-chat-template", "sweep-completions.toml"),
                    "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}


def test_15_tokens_without_usage_are_counted_right(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "15-no-usage-chunk"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert (df["completion_tokens"] == 100).all() and not df["tokens_counted"].any()
    assert_rate_from_e2e(df, 110)  # the server streams 100 tok/s


def test_16_a_silently_dead_engine_is_hung_the_rest_fine(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "16-engine-silent-death-hang"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert df.loc[0, "status"] == "ok" and df.loc[1, "status"] == "hung"  # the tuned set sets NCCL_ALGO


def test_17_a_reasoning_model_gets_room_to_answer(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "17-reasoning-smoke-check"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert "invalid_output" not in set(df["status"]), df[["status", "cause"]]


def test_18_a_renamed_worker_in_its_own_session_is_killed(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "18-worker-new-session"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}
    assert not processes_with(str(CASES / "18-worker-new-session"))


def test_19_bursty_delivery_keeps_output_tok_s_flags_timing(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "19-bursty-delivery"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert_rate_from_e2e(df, 520)  # the engine's 500 tok/s, never the burst's own rate
    assert not df["timing_measurable"].any()
    assert df["tpot_s"].isna().all() and df["ttft_s"].isna().all()


def test_19_a_decode_study_on_a_server_that_always_bursts_stops_at_the_baseline(tmp_path):
    """probe.metric = "decode_tok_s" on the same server: its bursty runs are made again, still
    burst, and the night stops at the baseline (exit 4) saying which metric measures the server,
    no set launched; the relaunch is recorded as the baseline's."""
    cfg = case_config(tmp_path, "19-bursty-delivery", **{"[probe]\n": '[probe]\nmetric = "decode_tok_s"\n'})
    res, df = sweep(tmp_path, cfg, "--no-final-baseline")
    assert res.returncode == 4, res.stderr[-2000:]
    assert "decode tok/s, the study's metric, was not measurable" in res.stderr
    assert "3 more made again did too" in res.stderr and 'probe.metric = "output_tok_s"' in res.stderr
    assert list(df["kind"]) == ["baseline"] and list(df["status"]) == ["unhealthy"]


def test_the_cases_readme_lists_every_case():
    readme = (CASES / "README.md").read_text()
    assert [f.name for f in CASES.iterdir() if f.is_dir() and f.name not in readme] == []


def _proof(df: pd.DataFrame, trial: int) -> dict[str, dict[str, str]]:
    return {row["name"]: row for row in json.loads(df.loc[trial, "nccl_proof"])}


def test_20_ray_workers_that_never_got_the_set_make_it_not_applied(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "20-ray-dedup-silent-ranks"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert df.loc[1, "verdict"].startswith("not applied")
    assert json.loads(df.loc[1, "nccl_confirmed"]) == {}
    why = json.loads(df.loc[1, "nccl_not_applied"])["NCCL_ALGO"]
    assert why.startswith("ranks 1, 7 logged communicator init through Init COMPLETE but never echoed NCCL_ALGO")
    assert "ranks 2-6 are hidden in Ray-folded lines" in why and "1 echo for 8 ranks" in why
    assert "Ray workers keep the environment of `ray start`" in why and "vLLM 0.8.2" in why
    proof = _proof(df, 1)["NCCL_ALGO"]
    # the driver wrote its file; the Ray cluster's two hosts each say how many of their ranks echoed
    assert proof["ranks"].startswith("1 of 8 ranks on 2 nodes (") and proof["source"] == "NCCL_DEBUG_FILE x1", proof
    assert "trial 1 proof: NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE not applied, echoed by 1 of 8 ranks" in res.stderr


@pytest.mark.parametrize("variant", ["sweep.toml", "sweep-stuck.toml"])
def test_26_nccl_files_confirm_every_rank_even_when_workers_need_sigkill(tmp_path, variant):
    res, df = sweep(tmp_path, case_config(tmp_path, "26-nccl-stdout-block-buffered", variant),
                    "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert (df["nccl_version"].astype(str) == "2.27.3").all() and (df["nccl_not_applied"] == "{}").all()
    assert json.loads(df.loc[1, "nccl_ranks"]) == [0, 1, 2, 3]
    for name in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE"):
        row = _proof(df, 1)[name]
        assert (row["status"], row["ranks"], row["source"]) == ("confirmed", "0-3 (4/4)", "NCCL_DEBUG_FILE x4"), row
    files = sorted((tmp_path / "r" / "case" / "logs" / "trial-0001.nccl").glob("*.log"))
    assert len(files) == 4 and "NCCL INFO NCCL_ALGO set by environment to Ring" not in (
        tmp_path / "r" / "case" / "logs" / "trial-0001.log").read_text()


def test_26_cut_lines_on_the_pipe_are_rejoined_never_read_as_another_value(tmp_path):
    # the server's NCCL cannot open the file it is given (a container path): its lines go to the pipe
    cfg = case_config(tmp_path, "26-nccl-stdout-block-buffered", **{"port = 18227": "port = 18237"},
                      **{"teardown_grace_s = 4": 'teardown_grace_s = 4\nenv = { NCCL_DEBUG_FILE = '
                                                 '"/nonexistent-dir/nccl.%h.%p.log" }'})
    res, df = sweep(tmp_path, cfg, "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert (df["nccl_not_applied"] == "{}").all(), df["nccl_not_applied"].tolist()
    log = (tmp_path / "r" / "case" / "logs" / "trial-0001.log").read_text()
    # the pipe really cut rank 1's echo (the fake puts a 4 KB block boundary inside it): the proof rejoined it
    assert not re.search(r"\[1\] NCCL INFO NCCL_ALGO set by environment to Ring$", log, re.M)
    row = _proof(df, 1)["NCCL_ALGO"]
    assert (row["status"], row["ranks"], row["source"]) == ("confirmed", "0-3 (4/4)", "server log x4"), row


def test_26_lines_lost_at_sigkill_are_unverifiable_never_not_applied(tmp_path):
    cfg = case_config(tmp_path, "26-nccl-stdout-block-buffered", "sweep-stuck.toml", **{"port = 18228": "port = 18238"},
                      **{"teardown_grace_s = 4": 'teardown_grace_s = 2\nenv = { NCCL_DEBUG_FILE = '
                                                 '"/nonexistent-dir/nccl.%h.%p.log" }'})
    res, df = sweep(tmp_path, cfg, "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert (df["nccl_not_applied"] == "{}").all(), df["nccl_not_applied"].tolist()
    assert json.loads(df.loc[1, "nccl_confirmed"]) == {}
    assert set(json.loads(df.loc[1, "nccl_unverifiable"])) >= {"NCCL_ALGO", "NCCL_PROTO"}
    assert "no speed verdict" not in df.loc[1, "verdict"]
    why = _proof(df, 1)["NCCL_ALGO"]["why"]
    assert "stop before Init COMPLETE" in why or "reached the log" in why, why


def test_26_a_users_own_nccl_debug_file_is_read_where_it_points(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    cfg = case_config(tmp_path, "26-nccl-stdout-block-buffered", "sweep-stuck.toml", **{"port = 18228": "port = 18239"},
                      **{"teardown_grace_s = 4": f'teardown_grace_s = 2\nenv = {{ NCCL_DEBUG_FILE = '
                                                 f'"{mine}/n.%h.%p.txt" }}'})
    res, df = sweep(tmp_path, cfg, "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert (df["nccl_version"].astype(str) == "2.27.3").all()
    row = _proof(df, 1)["NCCL_ALGO"]
    assert (row["status"], row["ranks"], row["source"]) == ("confirmed", "0-3 (4/4)", "NCCL_DEBUG_FILE x4"), row
    assert not (tmp_path / "r" / "case" / "logs" / "trial-0001.nccl").exists()
    assert any(str(mine) in s for s in json.loads(df.loc[1, "nccl_sources"]))


def _teardown_lines(tmp_path: Path) -> list[str]:
    return [line for log in (tmp_path / "r" / "case" / "logs").glob("*.log")
            for line in log.read_text().splitlines() if "[nccl-tune] teardown:" in line]


def test_23_a_command_that_daemonizes_the_server_is_named_and_its_server_killed(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "23-command-daemonizes"), "--no-final-baseline")
    assert res.returncode == 4, res.stderr  # the baseline cannot be measured: exit 4 stays
    cause = df.loc[0, "cause"]
    assert df.loc[0, "status"] == "crashed"
    assert cause.startswith("the server command exited with status 0 after "), cause
    assert "while a detached process it started (pid " in cause and "server.py" in cause
    assert "run the server in the foreground" in cause
    teardown = _teardown_lines(tmp_path)
    assert teardown and all("the command had exited (0) before the teardown; 1 detached process killed" in line
                            for line in teardown), teardown
    assert not any("exited on SIGTERM" in line for line in teardown)
    assert not processes_with(str(CASES / "23-command-daemonizes"))


def test_23_a_start_script_with_nohup_and_ampersand_is_the_same_cause(tmp_path):
    script = ROOT / "tests" / "servers" / "nohup_start.sh"
    cfg = case_config(tmp_path, "23-command-daemonizes", **{
        f'"{{python}}", "{CASES}/23-command-daemonizes/server.py", "{{port}}"':
            f'"sh", "{script}", "{{python}}", "{{port}}"',
        "port = 18223": "port = 18233"})
    res, df = sweep(tmp_path, cfg, "--no-final-baseline")
    assert res.returncode == 4, res.stderr
    cause = df.loc[0, "cause"]
    assert "exited with status 0" in cause and "http.server 18233" in cause, cause
    assert "run the server in the foreground" in cause
    assert any("1 detached process killed" in line for line in _teardown_lines(tmp_path))
    assert not processes_with("http.server 18233")


_HOLD = '24-health-green-post-blocked-warmup/server.py", "{port}"]'


def _held(tmp_path: Path, port: int, mode: str, hold: str, extra: str = "") -> Path:
    """Case 24's sweep file on its variant server: POSTs held ``hold`` s, the log ``mode``."""
    return case_config(tmp_path, "24-health-green-post-blocked-warmup", **{
        _HOLD: f'24-health-green-post-blocked-warmup/server-hold.py", "{{port}}", "{mode}", "{hold}"]',
        "port = 18224": f"port = {port}", "teardown_grace_s = 3": f"teardown_grace_s = 3\n{extra}"})


def test_24_a_warm_up_behind_a_green_health_is_waited_through(tmp_path):
    # the baseline alone: every launch of this server warms up the same way, whatever the set
    res, df = sweep(tmp_path, case_config(tmp_path, "24-health-green-post-blocked-warmup"), "--no-final-baseline",
                    "--trials", "1")
    assert res.returncode == 0, res.stderr
    assert set(df["status"]) == {"ok"}, df[["status", "cause"]]
    assert (df["warmup_s"] > 6).all() and (df["warmup_s"] <= df["load_s"]).all(), df[["warmup_s", "load_s"]]
    assert "a warm-up behind a green health check" in res.stderr


def test_24_a_warm_up_that_logs_is_waited_past_the_silence_bound(tmp_path):
    # held 25 s, longer than WARMUP_SILENCE_S (20 s) and 5 stall timeouts, progress lines every 2 s
    res, df = sweep(tmp_path, _held(tmp_path, 18244, "lively", "25"), "--no-final-baseline", "--trials", "1")
    assert res.returncode == 0, res.stderr
    assert df.loc[0, "status"] == "ok", df.loc[0, "cause"]
    assert df.loc[0, "warmup_s"] > 20


def test_24_a_silent_held_request_is_hung_within_its_bound(tmp_path):
    res, df = sweep(tmp_path, _held(tmp_path, 18245, "silent", "inf"), "--no-final-baseline")
    assert res.returncode == 4, res.stderr
    assert df.loc[0, "status"] == "hung", df.loc[0, "cause"]  # not the timeout of ready_timeout_s = 40
    assert "no response headers" in df.loc[0, "cause"] and "printed nothing" in df.loc[0, "cause"]


def test_24_a_warm_up_that_logs_forever_ends_at_warmup_timeout_s(tmp_path):
    res, df = sweep(tmp_path, _held(tmp_path, 18246, "lively", "inf", "warmup_timeout_s = 12"), "--no-final-baseline")
    assert res.returncode == 4, res.stderr
    assert df.loc[0, "status"] == "hung", df.loc[0, "cause"]
    assert "server.warmup_timeout_s = 12" in df.loc[0, "cause"]  # ready_timeout_s = 40 is not what ended it


def test_27_the_log_cap_is_a_byte_bound_and_the_marker_counts(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "27-log-cap-long-lines"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert df.loc[0, "status"] == "ok", df.loc[0, "cause"]
    log = tmp_path / "r" / "case" / "logs" / "trial-0000.log"
    assert log.stat().st_size <= 1048576
    text = log.read_text()
    marker = [line for line in text.splitlines() if "bytes dropped:" in line]
    assert len(marker) == 1 and "log cap 1048576 bytes reached" in marker[0], marker
    dropped = int(marker[0].split("[... ")[1].split(" ")[0])
    assert dropped > 8_000_000  # about 9.9 MB printed, at most 1 MiB kept
    assert "bytes of this line dropped ...]" in text and "Received request cmpl-000000" in text
    assert "[nccl-tune] teardown:" in text


def test_27_one_5_mb_line_is_cut_keeping_its_head(tmp_path):
    cfg = case_config(tmp_path, "27-log-cap-long-lines", **{
        '27-log-cap-long-lines/server.py"': '27-log-cap-long-lines/server-one-line.py"', "port = 18229": "port = 18249"})
    res, _ = sweep(tmp_path, cfg, "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    log = tmp_path / "r" / "case" / "logs" / "trial-0000.log"
    assert log.stat().st_size < 64 * 1024
    text = log.read_text()
    assert "[logger.py:43] Received request cmpl-000000: prompt: 'xxx" in text
    assert "bytes of this line dropped ...]" in text and "after the long line" in text


def test_28_llamacpp_loading_503s_are_waited_then_measured(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "28-llamacpp-503-loading"), "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert df.loc[0, "status"] == "ok", df.loc[0, "cause"]
    assert df.loc[0, "completion_tokens"] == 50 and not df.loc[0, "tokens_counted"]
    assert df.loc[0, "load_s"] > 4  # the 5 s of 503 "Loading model" were waited through
    assert_rate_from_e2e(df.loc[[0]], 105)
