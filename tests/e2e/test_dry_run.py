"""``nccl-tune sweep --dry-run``: the plan checked by NCCL's own rules for the configured
release, nothing launched; values NCCL rejects or silently ignores refused, all at once."""

from __future__ import annotations

import sys

from tests.helpers import cli

ACCEPTED = """
[variables.NCCL_ALGO]
values = ["ring", "^Tree", "allreduce:ring;broadcast:tree"]
[variables.NCCL_P2P_LEVEL]
values = ["PXB", "2"]
[variables.NCCL_BUFFSIZE]
values = ["0x400000", "8388608"]
[[presets]]
name = "ring"
env = { NCCL_ALGO = "Ring" }
[[presets]]
name = "ring-again"
env = { NCCL_ALGO = "ring" }
"""

REFUSED = """
[variables.NCCL_PROTO]
values = ["LL, Simple"]
[variables.NCCL_P2P_LEVEL]
values = ["pxb"]
[variables.NCCL_ALGO]
values = ["allreduce:ring;broadcast:tree"]
[variables.NCCL_BUFFSIZE]
values = ["4M"]
"""


def _config(tmp_path, space: str, version: str):
    (tmp_path / "space.toml").write_text(space)
    path = tmp_path / "exp.toml"
    path.write_text(f'[server]\ncommand = ["{sys.executable}", "-m", "http.server", "{{port}}"]\n'
                    f'[sweep]\nspace = "{tmp_path / "space.toml"}"\ntrials = 4\n[nccl]\nversion = "{version}"\n')
    return path


def test_dry_run_shows_what_nccl_reads_and_launches_nothing(tmp_path):
    res = cli("sweep", str(_config(tmp_path, ACCEPTED, "2.24.3")), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "rules of NCCL 2.24.3 ([nccl] version)" in out and "nothing is launched" in out
    assert "ring (NCCL reads Ring)" in out
    assert "0x400000 (= NCCL's default: same as unset)" in out
    assert "2 (NCCL reads PXB)" in out
    assert "ring-again: NCCL_ALGO=ring - skipped: to NCCL the same set as preset ring" in out
    assert "distinct sets to NCCL" in out
    assert "Risky" not in out  # PXB keeps P2P behind one PCIe switch
    assert "NCCL_P2P_LEVEL default here: not known yet (it needs " in out  # no GPU count
    assert not (tmp_path / "r").exists()


def test_dry_run_says_the_p2p_default_from_the_config(tmp_path):
    path = _config(tmp_path, ACCEPTED, "2.27.3")
    path.write_text(path.read_text().replace('"{port}"]', '"{port}", "--tensor-parallel-size", "8"]')
                    + 'cpu_vendor = "amd"\n')
    res = cli("sweep", str(path), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert ("NCCL_P2P_LEVEL default here: PXB (NCCL 2.27.3, AMD, 8 GPUs; src/graph/paths.cc ncclTopoCheckP2p)"
            in res.stdout), res.stdout


def test_dry_run_refuses_what_nccl_rejects_or_ignores_all_at_once(tmp_path):
    res = cli("sweep", str(_config(tmp_path, REFUSED, "2.21.5")), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr
    assert "4 problems" in err
    assert "variables.NCCL_PROTO.values[0]" in err and "spaces" in err  # NCCL does not trim list tokens
    assert "variables.NCCL_P2P_LEVEL.values[0]" in err and "case-sensitive" in err
    assert "variables.NCCL_ALGO.values[0]" in err and "2.24" in err  # per-collective syntax arrived in 2.24
    assert "variables.NCCL_BUFFSIZE.values[0]" in err and "strtoll" in err
    assert "Traceback" not in err


def test_dry_run_refuses_a_command_on_another_port_and_writes_nothing(tmp_path):
    path = _config(tmp_path, ACCEPTED, "2.24.3")
    path.write_text(path.read_text().replace('"{port}"]', '"--port", "9999"]\nport = 8477'))
    for extra in (["--dry-run"], []):  # the night-before check finds what the sweep would refuse
        res = cli("sweep", str(path), *extra, "--results", str(tmp_path / "r"))
        assert res.returncode == 2, res.stdout + res.stderr
        assert "server.port is 8477" in res.stderr and res.stderr.count("server.port is 8477") == 1, res.stderr
        assert res.stdout == "" and not (tmp_path / "r").exists()


def test_dry_run_says_which_preset_may_not_launch_and_what_the_sampler_draws_from():
    res = cli("sweep", "examples/sim.toml", "--dry-run")
    assert res.returncode == 0, res.stderr
    tree = next(line for line in res.stdout.splitlines() if "tree-ll:" in line)
    assert "may not be launched (see Notes)" in tree
    assert "the presets' values of NCCL_PROTO, NCCL_ALGO, NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE are in it too" in res.stdout
    assert "Risky but reversible values are in the space" in res.stdout  # default.toml's PHB and SYS
    assert "  - NCCL_P2P_LEVEL=PHB allows P2P beyond a PCIe switch" in res.stdout


def test_dry_run_gives_what_only_the_night_decides_with_its_bound():
    res = cli("sweep", "examples/sim-screen.toml", "--dry-run", "--trials", "8")  # a budget that misses presets
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # default.toml holds NCCL_PROTO=LL and NCCL_P2P_LEVEL=PHB/SYS: up to 3 fix sets of the triage first
    assert "2-4. up to 3 triage fix sets: decided by the baseline's NCCL log" in out
    assert ("at most 3 here: one per finding whose fix the space holds (the search fallback or Simple at the "
            "decode size: NCCL_P2P_LEVEL=PHB/SYS, NCCL_PROTO=LL; SHM pairs kept off P2P by the level: "
            "NCCL_P2P_LEVEL=PHB/SYS) and their combination") in out
    assert "5-7. up to 3 screened sets: the best of up to 40 nccl-tests runs" in out
    assert "the last one only if the triage relaunches fewer than 3 sets" in out
    assert ("ring-ll: NCCL_ALGO=Ring NCCL_PROTO=LL - reached only if the triage relaunches fewer than 3 sets or "
            "the screen hands fewer than 3 sets") in out
    assert "p2p-disable: NCCL_P2P_DISABLE=1 - not reached: the budget of 8 relaunches is spent before it" in out
    res = cli("sweep", "examples/sim.toml", "--dry-run", "--trials", "20", "--baseline-every", "3", "--no-confirm")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # every relaunch counts: stage 1 gets 19 (the final baseline keeps its slot), less the baseline, the 7
    # presets that certainly run (tree-ll may not; no fix set) and the 4 re-measures due among them and the proposals
    assert "Then the sampler (TPE): up to 7 proposals (a baseline re-measure every 3 relaunches)" in out
    assert "  2-4. up to 3 triage fix sets" in out
    assert ("  5. baseline re-measure (every 3 relaunches; its place among the sets below moves with how many "
            "sets the slots above hand)") in out
    assert "Budget: 20 relaunches: the baseline, 4 baseline re-measures, up to 14 sets, the final baseline." in out


def test_dry_run_says_how_the_budget_is_spent_and_refuses_one_too_small(tmp_path):
    res = cli("sweep", str(_config(tmp_path, ACCEPTED, "2.24.3")), "--dry-run", "--trials", "12",
              "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    # the default re-measure every 5 relaunches takes one of stage 1's 9 slots
    assert ("Budget: 12 relaunches: the baseline, 1 baseline re-measure, up to 7 sets, 2 confirmations (the best set, "
            "then the runner-up or the best set again), the final baseline.") in res.stdout
    for trials, extra, minimum in (("2", [], 3), ("1", ["--no-confirm"], 2)):
        res = cli("sweep", str(_config(tmp_path, ACCEPTED, "2.24.3")), "--dry-run", "--trials", trials, *extra,
                  "--results", str(tmp_path / "r"))
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"'--trials' has value {trials}" in res.stderr and f"at least {minimum} are needed" in res.stderr, res.stderr
        assert res.stdout == "" and "Traceback" not in res.stderr
    path = _config(tmp_path, ACCEPTED, "2.24.3")
    path.write_text(path.read_text().replace("trials = 4", "trials = 2"))
    res = cli("sweep", str(path), "--results", str(tmp_path / "r"))  # the config's own value, before any launch
    assert res.returncode == 2 and "'sweep.trials' has value 2" in res.stderr and not (tmp_path / "r").exists()
