"""Who carries the decode allreduce, found from the baseline's log: on the simulator's
`nvlink-8x` box vLLM's custom allreduce does, so NCCL variables cannot change decode speed; the
server being vLLM, the night measures vLLM's backend space (search_spaces/vllm-backends.toml)
next, its --disable-custom-all-reduce reaching the server's command line, and marks the NCCL
sets unable to act at decode. A server the command and log do not name stops right after the
baseline (exit 5), naming the backend space and the command. A space that varies the backend
itself is swept: the known server's night uses one (FLAG_SPACE), so one night proves both."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from tests.helpers import cli, free_port

SPACE = """
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""
FLAG_SPACE = """
[variables."--disable-custom-all-reduce"]
values = ["on"]
[[presets]]
name = "ll"
env = { NCCL_PROTO = "LL" }
"""
UNNAMED = Path(__file__).parents[1] / "servers" / "unnamed_server.py"


def _config(tmp_path, space: str | None, *, program: list[str] | None = None, trials: int = 3):
    where = ""
    if space is not None:
        (tmp_path / "space.toml").write_text(space)
        where = f'space = "{tmp_path / "space.toml"}"'
    command = ", ".join(f'"{a}"' for a in (program or ["{python}", "-m", "tuner.sim", "serve"]))
    path = tmp_path / "exp.toml"
    path.write_text(f"""
[server]
command = [{command}, "--profile", "nvlink-8x", "--port", "{{port}}", "--load-time", "0.3"]
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 5
[probe]
max_tokens = 32
repeats = 2
[sweep]
{where}
trials = {trials}
""")
    return path


def _argv(log: str) -> str:
    return Path(log).read_text().splitlines()[0]  # the launched argv


def test_a_known_server_measures_its_backend_space_in_the_same_night_and_a_space_varying_it_is_swept(tmp_path):
    # a space of one preset and the backend flag: what the default space would plan is not the
    # subject, and planning it costs this night more than its launches
    config = str(_config(tmp_path, FLAG_SPACE))
    common = ("--results", str(tmp_path / "r"), "--study", "nv", "--seed", "1", "--no-confirm", "--no-final-baseline")
    res = cli("sweep", config, *common, "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert ("the night measures the backend space search_spaces/vllm-backends.toml next (7 backend sets: "
            "vllm-flashinfer-pcie-ipc, vllm-flashinfer,") in res.stderr
    # the resumed runner did not measure the baseline: it decides from the stored study info
    res = cli("sweep", config, *common, "--trials", "6")
    assert res.returncode == 0, res.stderr
    assert "the night measures the backend space" in res.stderr
    every = pd.read_csv(tmp_path / "r" / "nv" / "trials.csv")
    skipped = every[every["status"] == "skipped"].set_index("preset")["cause"]
    # vLLM 0.11.0 (the simulator's nvlink-8x) has none of these: refused before any launch, the reason said
    for name, since in [("vllm-flashinfer-pcie-ipc", "0.30.0"), ("vllm-flashinfer", "0.17.0"),
                        ("vllm-flashinfer-fusion", "0.12.0"), ("vllm-nccl-only", "0.17.0")]:
        assert f"vLLM 0.11.0 does not have {name}" in skipped[name] and since in skipped[name], skipped
    df = every[every["status"] != "skipped"].set_index("preset", drop=False)
    order = list(dict.fromkeys(df["preset"].fillna("")))  # a retried launch repeats its name
    assert order[:4] == ["", "vllm-nccl-symm-mem", "vllm-symm-mem", "vllm-custom-allreduce-off"], \
        df[["trial", "kind", "status", "preset", "retry_of_trial"]]
    off = df.loc["vllm-custom-allreduce-off"]
    assert json.loads(off["flags"]) == ["--disable-custom-all-reduce"]
    assert "--disable-custom-all-reduce" in _argv(off["log"]) and off["allreduce_backend"] == "nccl"
    assert off["backend_applied"] == True  # noqa: E712
    symm = df.loc["vllm-symm-mem"]  # the A100 refuses torch symmetric memory, in vLLM's own words
    assert symm["backend_applied"] == False and "SymmMemCommunicator" in symm["backend_reason"]  # noqa: E712
    nccl = df[df["preset"] == order[4]].iloc[0]  # the space's first NCCL set, after the backend sets
    assert any(k.startswith("NCCL_") for k in json.loads(nccl["env"])) and nccl["status"] == "ok"
    # the space's own backend variable is swept: a set of the space carries the flag, NCCL then carries decode
    flagged = df[(df["kind"] == "search") & df["flags"].map(json.loads).map(lambda f: "--disable-custom-all-reduce" in f)]
    assert len(flagged) >= 1, df[["trial", "kind", "env", "flags"]]
    row = flagged.iloc[0]
    assert row["allreduce_backend"] == "nccl" and "--disable-custom-all-reduce" in _argv(row["log"])
    # each set's backend choice is judged from its own launch's log
    assert row["backend_choice"].startswith("vllm-") and row["backend_reason"]
    report = (tmp_path / "r" / "nv" / "report.md").read_text()
    assert "cannot act at decode" in report and "(custom_allreduce does)" in report
    res = cli("sweep", config, *common, "--dry-run")  # the stored study knows the backend: the plan says so
    assert res.returncode == 0, res.stderr
    assert "the night measures vllm's backend space search_spaces/vllm-backends.toml first (" in res.stdout


def test_a_server_not_known_stops_naming_the_backend_space_and_the_command(tmp_path):
    config = _config(tmp_path, SPACE, program=["{python}", str(UNNAMED)])
    res = cli("sweep", str(config), "--results", str(tmp_path / "r"), "--study", "nv")
    assert res.returncode == 5, res.stderr
    assert "NCCL does not carry the decode allreduce" in res.stderr and "--force" in res.stderr
    assert (f"`nccl-tune sweep {config} --space search_spaces/vllm-backends.toml --study nv-backends`"
            in res.stderr), res.stderr
    df = pd.read_csv(tmp_path / "r" / "nv" / "trials.csv")
    assert list(df["kind"]) == ["baseline"] and df.iloc[0]["allreduce_backend"] == "custom_allreduce"
    assert "vllm" not in Path(df.iloc[0]["log"]).read_text().replace(sys.executable, "")
    res = cli("sweep", str(config), "--results", str(tmp_path / "r"), "--study", "forced",
              "--force", "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    assert "sweeping anyway (--force)" in res.stderr
