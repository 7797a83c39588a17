"""Verdicts that hold across relaunches, end to end: against the independent env-rate server
with 2 % launch-to-launch noise (seeded, so each night is reproducible), sets that change nothing
are almost never called faster or slower and no headline says "Use it"; a set truly 15 % faster
is found faster and confirmed. The statistics alone are calibrated in tests/unit/judging and
benchmarks/verdict_calibration.py; this checks the whole sweep does what they promise."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers import cli, envrate_command, write_config

# The subject here is noise: 2 % between launches, set by the test. A busy machine adds its own
# (a run delayed by 15 ms is 10 % slower at 0.15 s a run, 2.5 % at the 0.6 s a run of 60 tokens
# at 100 tok/s here), so these run alone, first in line for the CPU (the Makefile): the only
# tests whose outcome depends on how busy the machine is, by their nature, not by an assumption.
pytestmark = pytest.mark.alone

SETS = {"ll": 'NCCL_PROTO = "LL"', "simple": 'NCCL_PROTO = "Simple"', "ring": 'NCCL_ALGO = "Ring"',
        "cdmc": 'CUDA_DEVICE_MAX_CONNECTIONS = "1"', "p2p": 'NCCL_P2P_DISABLE = "1"'}
PRESETS = "".join(f'[[presets]]\nname = "{name}"\nenv = {{ {env} }}\n' for name, env in SETS.items())


def night(tmp_path, space_file, seed: int, effects: str):
    study = f"night{seed}"
    server_env = (f"env = {{ ENVRATE_EFFECTS = '{effects}', ENVRATE_LAUNCH_NOISE = \"0.02\", "
                  f"ENVRATE_BASE = \"100\", ENVRATE_SEED = \"{seed}\", ENVRATE_COUNT_FILE = \"{tmp_path / study}.count\", "
                  "ENVRATE_LOAD_S = \"0.1\" }")
    cfg = write_config(tmp_path / f"{study}.toml", command=envrate_command(), space=space_file(PRESETS), trials=8,
                       extra_server=server_env, extra_sweep='mode = "presets"', max_tokens=60, repeats=3)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", study)
    assert res.returncode == 0, res.stderr
    return res, pd.read_csv(tmp_path / "r" / study / "trials.csv")


def test_sets_that_change_nothing_stay_quiet_under_launch_noise(tmp_path, space_file):
    judged, loud, headlines = 0, 0, 0
    for seed in (1, 2, 3, 4):
        res, df = night(tmp_path, space_file, seed, "{}")
        tuned = df[(df["kind"] == "preset") & (df["status"] == "ok")]
        judged += len(tuned)
        loud += int(tuned["verdict"].isin(["faster", "slower"]).sum())
        headlines += "Use it" in res.stdout
    assert judged == 20
    assert loud <= 1, f"{loud} of {judged} no-effect sets called faster or slower"  # at most 5 %
    # Issue 21 (open): the two-stage claim's measured false "Use it" is up to 4 % of nights at the
    # default budget (benchmarks/results/night_calibration_targets.txt); one night in four is the
    # most this check lets through until that remaining targets are met.
    assert headlines <= 1


def test_a_set_fifteen_percent_faster_is_found_and_confirmed(tmp_path, space_file):
    confirmed = 0
    for seed in (5, 6, 7):
        res, df = night(tmp_path, space_file, seed, '{"NCCL_ALGO=Ring": 1.15}')
        ring = df[(df["kind"] == "preset") & df["env"].str.contains("Ring")]
        # found: called faster on its own launch (a confirmation that missed turns it "failed confirmation")
        assert ring.iloc[0]["verdict"] in ("faster", "failed confirmation"), \
            df[["trial", "kind", "env", "verdict", "vs_baseline"]]
        confirm = df[df["kind"] == "confirm"]
        confirmed += int(len(confirm) == 1 and confirm.iloc[0]["verdict"] == "faster" and "Use it." in res.stdout)
    assert confirmed >= 2  # "in most sweeps"
