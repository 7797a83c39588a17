"""Every example experiment file runs, with its server replaced by the simulator, and is what
the README says it is."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import ROOT, cli, free_port

EXAMPLES = ROOT / "examples"
README = (ROOT / "README.md").read_text()


def simulated(example: str, tmp_path: Path, *extra_server_args: str) -> Path:
    """The example with its command replaced by the simulator (TP-8 PCIe box, short load),
    fewer tokens and relaunches, and a free port; every other key as the example has it."""
    text = (EXAMPLES / example).read_text()
    sim = ", ".join(f'"{a}"' for a in ["{python}", "-m", "tuner.sim", "serve", "--profile", "pcie-8x-mla",
                                         "--port", "{port}", "--load-time", "0.3", *extra_server_args])
    text = re.sub(r"command = \[.*?\]\n", f"command = [{sim}]\n", text, count=1, flags=re.S)
    text = re.sub(r"^port = \d+", f"port = {free_port()}", text, flags=re.M)
    text = re.sub(r"^max_tokens = \d+", "max_tokens = 32", text, flags=re.M)
    text = re.sub(r"^repeats = \d+", "repeats = 2", text, flags=re.M)
    text = re.sub(r"^trials = \d+", "trials = 3", text, flags=re.M)  # --no-confirm: the baseline, one set, the final baseline
    text = re.sub(r'^space = "search_spaces/', f'space = "{ROOT}/search_spaces/', text, flags=re.M)
    path = tmp_path / example
    path.write_text(text)
    return path


@pytest.mark.parametrize("example, extra", [
    ("sim.toml", ()),
    ("vllm-tp8.toml", ()),
    # SGLang overwrites CUDA_DEVICE_MAX_CONNECTIONS: the simulator drops it as SGLang would
    ("sglang-tp8.toml", ("--ignore-var", "CUDA_DEVICE_MAX_CONNECTIONS")),
])
def test_each_example_runs_against_the_simulator(tmp_path, example, extra):
    assert f"examples/{example}" in README or example == "sim.toml"
    res = cli("sweep", str(simulated(example, tmp_path, *extra)), "--results", str(tmp_path / "r"), "--study", "ex",
              "--no-confirm")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "ex" / "trials.csv")
    assert set(df["status"]) == {"ok"} and len(df) == 3  # baseline, one set, the re-measure


def test_the_examples_are_what_the_readme_says():
    vllm = tomllib.loads((EXAMPLES / "vllm-tp8.toml").read_text())
    assert vllm["sweep"]["mode"] == "presets" and vllm["sweep"]["space"].endswith("safe.toml")
    assert "`examples/vllm-tp8.toml`: the safe-ish presets of `search_spaces/safe.toml` only" in README
    sglang = tomllib.loads((EXAMPLES / "sglang-tp8.toml").read_text())
    space = tomllib.loads((ROOT / sglang["sweep"]["space"]).read_text())
    varied = set(space.get("variables", {})) | {k for p in space.get("presets", []) for k in p["env"]}
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in varied and "include_presets" not in space
    assert "`examples/sglang-tp8.toml`" in README and "search_spaces/sglang.toml" in README
    sim = tomllib.loads((EXAMPLES / "sim.toml").read_text())
    assert sim["sweep"]["trials"] == 12 and "make demo" in README
