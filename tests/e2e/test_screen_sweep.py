"""Two-stage sweeps end to end: the independent all_reduce_perf stand-in screens the space, the
independent env-rate server is relaunched; both follow one hidden allreduce landscape
(tests/servers/landscape.py), stated once in ``server.env``. Real processes, real files."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import pandas as pd

from tests.helpers import SERVERS, cli, envrate_command, standin_command, write_config
from tests.unit.report.page_reader import parse as parse_page
from tuner.screen import screen_key

sys.path.insert(0, str(SERVERS))
import landscape

SPACE = """
[variables.NCCL_PROTO]
values = ["LL", "Simple"]
[variables.NCCL_ALGO]
values = ["Ring", "Tree"]
[variables.NCCL_MAX_NCHANNELS]
values = ["1", "2", "4", "8"]
[variables.NCCL_BUFFSIZE]
values = ["1048576", "4194304", "16777216"]
[variables.CUDA_DEVICE_MAX_CONNECTIONS]
values = [1]
"""
#: The hidden landscape. NCCL_BUFFSIZE=1048576 is the fastest setting of all in the screen, and
#: every set holding it reports wrong values: the corruption guard must keep it out.
LANDSCAPE = {
    "ENVRATE_AR_US": "40",
    "ENVRATE_AR_EFFECTS": json.dumps({"NCCL_PROTO=LL": 0.8, "NCCL_PROTO=Simple": 1.6, "NCCL_ALGO=Tree": 1.3,
                                      "NCCL_ALGO=Ring": 0.95, "NCCL_MAX_NCHANNELS=1": 1.1,
                                      "NCCL_MAX_NCHANNELS=2": 0.9, "NCCL_MAX_NCHANNELS=4": 0.85,
                                      "NCCL_BUFFSIZE=4194304": 0.98, "NCCL_BUFFSIZE=1048576": 0.5}),
    "ENVRATE_AR_LARGE_EFFECTS": json.dumps({"NCCL_PROTO=LL": 2.0, "NCCL_PROTO=Simple": 0.7}),
    "ENVRATE_AR_WRONG": json.dumps(["NCCL_BUFFSIZE=1048576"]),
    "ENVRATE_EFFECTS": json.dumps({"CUDA_DEVICE_MAX_CONNECTIONS=1": 1.005}),
    "ENVRATE_LAUNCH_NOISE": "0.003",
    "ENVRATE_AR_NOISE": "0.01",
    "ENVRATE_LOAD_S": "0.1",
}
SECRET = "hf_screen_secret_value_123"


def _env_toml(env: dict[str, str]) -> str:
    return "env = { " + ", ".join(f"{k} = '{v}'" for k, v in env.items()) + " }"


def _screen_toml(trials: int, top_k: int, extra: str = "") -> str:
    cmd = ", ".join(f'"{a}"' for a in standin_command())
    return f"""
[screen]
command = [{cmd}]
sizes = [14336, 14680064]
trials = {trials}
top_k = {top_k}
timeout_s = 20
{extra}
[model]
config = "{Path(__file__).resolve().parents[1] / 'fixtures' / 'model_configs' / 'llama-3.3-70b-instruct.config.json'}"
allreduces_per_token = 100
"""


def true_rate(env: dict[str, str]) -> float:
    """What the hidden landscape gives a set (tok/s), the effects of unscreened variables included;
    0 for a set that corrupts results (worth nothing however fast)."""
    full = {**LANDSCAPE, **env}
    if landscape.holds(full, "ENVRATE_AR_WRONG"):
        return 0.0
    rate = landscape.decode_rate(full)
    for setting, factor in json.loads(LANDSCAPE["ENVRATE_EFFECTS"]).items():
        name, _, value = setting.partition("=")
        rate *= factor if env.get(name) == value else 1.0
    return rate


def best_rate() -> float:
    """The best rate over every set of SPACE that reports right values."""
    names = {"NCCL_PROTO": ["LL", "Simple"], "NCCL_ALGO": ["Ring", "Tree"], "NCCL_MAX_NCHANNELS": ["1", "2", "4", "8"],
             "NCCL_BUFFSIZE": ["4194304", "16777216"], "CUDA_DEVICE_MAX_CONNECTIONS": ["1"]}
    best = 0.0
    for values in itertools.product(*([None, *v] for v in names.values())):
        env = {n: v for n, v in zip(names, values, strict=True) if v is not None}
        best = max(best, true_rate(env))
    return best


def _config(tmp_path: Path, space_file, *, trials: int, screen: str, landscape_env: dict[str, str] | None = None):
    space = space_file(SPACE)
    server = _env_toml(landscape_env or LANDSCAPE)
    return write_config(tmp_path / "exp.toml", command=envrate_command(), space=space, trials=trials,
                        extra_server=server, extra_sweep="seed = 5\n" + screen, max_tokens=40, repeats=3)


def test_two_stage_sweep_finds_a_near_best_set_in_six_relaunches(tmp_path, space_file):
    cfg = _config(tmp_path, space_file, trials=8, screen=_screen_toml(trials=60, top_k=4))
    env = dict(os.environ, HF_TOKEN=SECRET)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "two", env=env, figures=True)
    assert res.returncode == 0, res.stderr
    study = tmp_path / "r" / "two"
    df = pd.read_csv(study / "trials.csv")
    df = df[df["status"] != "skipped"].reset_index(drop=True)  # the relaunches (sets not measured have rows too)
    df["env_d"] = df["env"].map(json.loads)
    budgeted = df[(df["kind"].isin(["baseline", "preset", "search"])) & ~df["recheck"]]
    assert len(budgeted) <= 6
    ok = df[df["status"] == "ok"]
    assert max(true_rate(e) for e in ok["env_d"]) >= 0.98 * best_rate()
    # the screen's best went first, right after the baseline, in their order (a set NCCL treats
    # as equal to one measured before is not relaunched, so one may be missing)
    first = [p for p in df["preset"].iloc[1:5] if isinstance(p, str)]
    assert first and first[0] == "screen-1" and all(p.startswith("screen-") for p in first), first
    assert first == sorted(first, key=lambda p: int(p.split("-")[1]))
    # corruption guard: the screen saw wrong values, and no such set was ever relaunched
    screen = pd.read_csv(study / "screen.csv")
    assert (screen["status"] == "invalid_output").any()
    assert not any(e.get("NCCL_BUFFSIZE") == "1048576" for e in df["env_d"])
    # the screen ran the untuned set first and last; the bound came before the first tuned relaunch
    runs = screen.drop_duplicates("run")
    stage_runs = runs[runs["role"] != "check"]
    assert stage_runs.iloc[0]["role"] == "untuned-first" and stage_runs.iloc[-1]["role"] == "untuned-last"
    assert len(stage_runs) == 60
    # no tuned set reached a relaunch unscreened: the sampler's later sets were screened first
    clean = set(runs[runs["status"] == "ok"]["set"])
    for env in df[df["kind"] != "baseline"]["env_d"]:
        assert screen_key(env) in clean, env
    err = (study / "night.log").read_text()  # every line in order, each relaunch's phases and result included
    assert err.index("bound: NCCL tuning can gain at most") < err.index("[screen-1]")
    # exports, report section, and no secret anywhere under results/ (the -J file held it)
    assert (study / "tuner_perf.csv").exists() and (study / "nccl_tuner.conf").exists()
    report = (study / "report.md").read_text()
    assert "## Screen" in report and "Spearman rho" in report and "Tuner plugin" in report
    assert (study / "screen_gain.png").stat().st_size > 5_000
    page = parse_page(study / "report.html")  # the screen's section there too, after the table, its figure inline
    assert page.sections.index("sets") < page.sections.index("screen") < page.sections.index("baselines")
    assert page.figures["screen"] == [True] and "Tuner plugin" in (study / "report.html").read_text()
    assert set(page.sections) <= {"verdict", "forest", "sets", "screen", "proof", "not-measured", "baselines",
                                  "effects", "history", "concurrency", "machine", "p2p", "failed", "closing"}, page.sections
    for path in study.rglob("*"):
        if path.is_file() and path.suffix != ".db":
            assert SECRET not in path.read_text(errors="replace"), path


def test_bound_below_the_noise_stops_after_the_screen_unless_forced(tmp_path, space_file):
    tiny = {**LANDSCAPE, "ENVRATE_AR_US": "0.5", "ENVRATE_AR_PER_TOKEN": "10", "ENVRATE_COMPUTE_MS": "20"}
    cfg = _config(tmp_path, space_file, trials=3, screen=_screen_toml(trials=5, top_k=1), landscape_env=tiny)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "tiny")
    assert res.returncode == 5, res.stderr
    assert "relaunching tuned sets is pointless" in res.stderr and "--force" in res.stderr
    df = pd.read_csv(tmp_path / "r" / "tiny" / "trials.csv")
    assert list(df["kind"]) == ["baseline"]
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "tiny", "--force",
                  "--no-final-baseline", "--no-confirm")
    assert res.returncode == 0, res.stderr
    assert "--force: relaunching anyway" in res.stderr
    df = pd.read_csv(tmp_path / "r" / "tiny" / "trials.csv")
    assert len(df) == 3
    # the resume continued the screen study: no screen run was made twice
    screen = pd.read_csv(tmp_path / "r" / "tiny" / "screen.csv").drop_duplicates("run")
    assert len(screen) == 5


def test_simulator_pcie_prints_the_bound_before_the_first_tuned_relaunch(tmp_path, space_file):
    space = space_file('[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n[variables.NCCL_ALGO]\nvalues = ["Ring", "Tree"]\n')
    serve = ["{python}", "-m", "tuner.sim", "serve", "--profile", "pcie-8x-mla", "--port", "{port}", "--load-time", "0.3"]
    screen = ["{python}", "-m", "tuner.sim", "all-reduce-perf", "-b", "{min_size}", "-e", "{max_size}", "-f", "2", "-g", "8",
              "-d", "bfloat16", "-n", "20", "--profile", "pcie-8x-mla"]
    model = Path(__file__).resolve().parents[1] / "fixtures" / "model_configs" / "deepseek-v3.config.json"
    cfg = write_config(tmp_path / "exp.toml", command=serve, space=space, trials=2, max_tokens=40, repeats=3,
                       ready_timeout_s=60, stall_timeout_s=30,
                       extra_sweep="seed = 1\n[screen]\ncommand = [" + ", ".join(f'"{a}"' for a in screen) + "]\n"
                                   f'trials = 6\ntop_k = 1\n[model]\nconfig = "{model}"\nprompt_tokens = 1024\n')
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "pcie", "--no-confirm",
                  "--no-final-baseline", "-v")  # -v: each relaunch's result line too
    assert res.returncode == 0, res.stderr
    err = res.stderr
    bound = err.index("bound: NCCL tuning can gain at most")
    assert err.index("screen run 0 [untuned-first]") < bound < err.index("trial 1 [")
    assert "Decode allreduce: hidden_size 7168 x 2 bytes (bfloat16) x 1 token(s) = 14336 bytes" in err
    assert "JSON output (-J) used" in err
