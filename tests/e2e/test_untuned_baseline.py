"""A baseline that is really untuned, and the NCCL each trial loaded (issue 33, items 4 and 5),
through real sweeps of the simulator: a ``.nccl.conf`` the server's NCCL would read is named
before the baseline (and by ``--dry-run``), a variable set behind nccl-tune's back is reported
with where it came from, and each trial records the library its server mapped."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.e2e.test_cases import sweep
from tests.helpers import ROOT, cli, write_config


def _config(tmp_path: Path, extra_server: str = "") -> Path:
    command = ["{python}", "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}", "--load-time", "0.2",
               "--workers", "0", "--noise", "0", "--launch-noise", "0"]
    return write_config(tmp_path / "exp.toml", command=command, space=ROOT / "search_spaces" / "safe.toml", trials=1,
                        max_tokens=16, repeats=2, ready_timeout_s=30, extra_server=extra_server,
                        extra_sweep='mode = "presets"')


def _home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("# left by a benchmark\nNCCL_PROTO=Simple\n")
    return {**os.environ, "HOME": str(home)}


def test_a_home_nccl_conf_is_named_before_the_baseline_and_the_library_is_recorded(tmp_path):
    env = _home(tmp_path)
    res, df = sweep(tmp_path, _config(tmp_path), "--no-final-baseline", "--trials", "1", "-v", env=env)
    said = res.stdout + res.stderr  # -v: the phase lines too
    assert res.returncode == 0, said
    conf = f"NCCL settings nccl-tune does not set: {tmp_path}/home/.nccl.conf"
    lines = said.splitlines()
    at = next(i for i, line in enumerate(lines) if conf in line)
    assert "NCCL_PROTO=Simple" in lines[at]
    loud = next(i for i, line in enumerate(lines) if "WARNING" in line and "not untuned for NCCL_PROTO" in line)
    first_trial = next(i for i, line in enumerate(lines) if "[trial 0: baseline] launching" in line)
    assert at < first_trial and loud < first_trial, said
    row = df.loc[0]
    assert row["status"] == "ok", row["cause"]
    assert bool(row["nccl_loaded"]) is True
    # the simulator's stand-in, named for its profile's NCCL (fast-tiny: 2.27.3), as the log's version
    assert row["nccl_library"].endswith("/libnccl.so.2.27.3") and row["nccl_library_version"] == "2.27.3"
    assert row["nccl_version"] == "2.27.3"
    assert len(row["nccl_build_id"]) == 40 and int(row["nccl_build_id"], 16) >= 0

    dry = cli("sweep", str(tmp_path / "exp.toml"), "--dry-run", "--trials", "1", "--no-confirm", "--no-final-baseline",
              "--results", str(tmp_path / "dry"), env=env)
    assert dry.returncode == 0, dry.stderr
    assert any(line.startswith(f"  {conf} sets NCCL_PROTO=Simple") for line in dry.stdout.splitlines()), dry.stdout
    assert any(line.startswith("  WARNING:") and "not untuned for NCCL_PROTO" in line for line in dry.stdout.splitlines())


def test_a_conf_file_variable_echoed_is_set_behind_the_back_and_compare_names_another_build(tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("NCCL_MIN_NCHANNELS=4\n")
    first = tmp_path / "a"
    first.mkdir()
    res, df = sweep(first, _config(first, f'env = {{ NCCL_CONF_FILE = "{conf}" }}'), "--no-final-baseline",
                    "--trials", "1")
    said = res.stdout + res.stderr
    assert res.returncode == 0, said
    assert json.loads(df.loc[0, "nccl_unlaunched_from"]) == {"NCCL_MIN_NCHANNELS": f"NCCL_CONF_FILE={conf}"}
    assert "NCCL_MIN_NCHANNELS=4 on rank" in said and f"(from NCCL_CONF_FILE={conf})" in said
    report = (first / "r" / "case" / "report.md").read_text()
    assert "This baseline is not untuned" in report and f"from NCCL_CONF_FILE={conf}" in report
    # the decision's paragraph and the table say it first, not only the proof section
    assert report.index("Not untuned: the baseline ran with NCCL_MIN_NCHANNELS=4") < report.index("| trial |")
    assert "(not untuned: NCCL_MIN_NCHANNELS=4 set behind nccl-tune's back)" in report
    assert "(not untuned: NCCL_MIN_NCHANNELS=4 set behind nccl-tune's back)" in res.stdout

    # the same night's store twice, as two studies; the second's library rebuilt: another build ID, the same version
    results = tmp_path / "both"
    for name, build in (("night1", None), ("night2", "ab" * 20)):
        (results / name).mkdir(parents=True)
        (results / name / "study.db").write_bytes((first / "r" / "case" / "study.db").read_bytes())
        with sqlite3.connect(results / name / "study.db") as db:
            db.execute("UPDATE studies SET study_name = ?", (name,))
            if build:
                db.execute("UPDATE trial_user_attributes SET value_json = ? WHERE key = 'nccl_build_id'",
                           (json.dumps(build),))
    out = cli("compare", "night1", "night2", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert "the NCCL library changed: build ID" in out.stdout and "ab" * 20 in out.stdout
    assert "the version (2.27.3) did not: same version, another build" in out.stdout


def test_a_server_that_never_loads_nccl_is_told_apart_from_a_silent_nccl(tmp_path):
    # tests/refserver.py is a plain OpenAI server: no libnccl mapped, no NCCL line (vLLM's CPU build alike)
    command = ["{python}", str(ROOT / "tests" / "refserver.py"), "--port", "{port}", "--rate", "400"]
    cfg = write_config(tmp_path / "exp.toml", command=command, space=ROOT / "search_spaces" / "safe.toml", trials=2,
                       max_tokens=16, repeats=2, ready_timeout_s=30, extra_sweep='mode = "presets"')
    res, df = sweep(tmp_path, cfg, "--no-final-baseline", "--trials", "2")
    said = res.stdout + res.stderr
    assert res.returncode == 0, said
    assert [bool(x) for x in df["nccl_loaded"]] == [False, False]
    assert df["nccl_library"].isna().all() or set(df["nccl_library"]) == {""}
    proof = json.loads(df.loc[1, "nccl_proof"])
    assert proof and all(row["why"].startswith("NCCL was never loaded by this server (no libnccl mapped, no NCCL "
                                               "line)") for row in proof), proof
    assert "NCCL_DEBUG=INFO was not in effect" not in said and "give NCCL a NCCL_DEBUG_FILE" not in said
    assert "triage: NCCL was never loaded by this server" in said
    assert "NCCL_DEBUG_SUBSYS must include GRAPH" not in said
