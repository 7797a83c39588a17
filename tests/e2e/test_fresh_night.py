"""`make demo` again: ``sweep --fresh`` replaces the previous night's study folder only once the
new night has passed every check before its first launch (a night that cannot start leaves it as it
was); the console shows the headlines, and the night's log file (``<study>/night.log``) every
phase and detail line, which ``-v`` prints too."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import ROOT, cli, write_config


def _config(tmp_path: Path, program: str = sys.executable) -> Path:
    return write_config(tmp_path / "demo.toml", command=[
        program, "-m", "tuner.sim", "serve", "--profile", "fast-tiny", "--port", "{port}", "--load-time", "0.2"],
        space=ROOT / "search_spaces" / "safe.toml", trials=2, max_tokens=40, repeats=2, extra_sweep='mode = "presets"')


def _night(tmp_path: Path, *extra: str, config: Path | None = None):
    return cli("sweep", str(config or _config(tmp_path)), "--results", str(tmp_path / "r"), "--study", "demo",
               "--no-confirm", "--no-final-baseline", *extra)


def test_fresh_replaces_the_previous_night_only_when_the_new_one_can_start(tmp_path):
    first = _night(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    study = tmp_path / "r" / "demo"
    (study / "mine.txt").write_text("the previous night's")
    log = (study / "night.log").read_text()
    # the console: headlines; the log: each phase and each relaunch's proof and library too
    assert "probing: run 1/2" in log and "NCCL library" in log and "trial 1 [" in log
    assert "probing: run" not in first.stderr and "NCCL library" not in first.stderr and "trial 1 [" not in first.stderr
    assert "sweep ended: relaunch budget of 2 spent" in first.stderr
    assert f"the night's full log: {study / 'night.log'} (-v shows it here too)" in first.stderr

    # a night that cannot start (its program is not there): refused, the previous folder untouched
    bad = _config(tmp_path, program=str(tmp_path / "no-such-python"))
    res = _night(tmp_path, "--fresh", config=bad)
    assert res.returncode == 2 and "not found or not executable" in res.stderr, res.stderr
    assert (study / "mine.txt").exists() and (study / "study.db").exists()
    res = cli("sweep", str(bad), "--results", str(tmp_path / "r"), "--study", "demo", "--fresh",
              "--storage", "sqlite:///" + str(tmp_path / "x.db"))
    assert res.returncode == 2 and "--fresh" in res.stderr and (study / "mine.txt").exists(), res.stderr

    # one that can: a new study in the same folder, nothing of the previous one left
    again = _night(tmp_path, "--fresh", "-v")
    assert again.returncode == 0, again.stderr[-2000:]
    assert not (study / "mine.txt").exists() and "resume" not in again.stderr
    assert (study / "night.log").read_text().count("trial 0 [baseline]") == 1  # the old log went with it
    assert "probing: run 1/2" in again.stderr and "NCCL library" in again.stderr  # -v: all of it here
