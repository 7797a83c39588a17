"""The tool installed as a user installs it (`pip install <repo>`, `pipx install <repo>`): a wheel
of the project, installed into a fresh venv, answers --version and dry-runs a night from another
directory, its bundled search spaces found as package data; the wheel asks for the tool's own
dependencies only (no test tools).

The fresh venv reuses this environment's installed dependencies through a .pth file (the machine
may have no network); the wheel itself is built by pip with build isolation (setuptools and
wheel from the index, or pip's cache)."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "sim.toml"
TEST_TOOLS = {"pytest", "ruff", "mypy", "pytest-xdist", "pytest-timeout"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the sources (the build leaves build/ and
    *.egg-info behind it, kept out of the repository)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "tuner", src / "tuner", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                          "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0 and "No matching distribution found" in res.stderr:
        pytest.skip(f"no index to build the wheel with (setuptools, wheel): {res.stderr.strip()[-300:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    [built] = out.glob("nccl_tune-*.whl")
    return built


def test_the_wheel_requires_no_test_tool_and_ships_the_spaces(wheel: Path):
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        message = email.message_from_bytes(whl.read(meta))
    required = [r for r in message.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert required and not {r.split(">")[0].split("<")[0].split("[")[0].strip() for r in required} & TEST_TOOLS
    assert {f"tuner/inputs/spaces/{n}.toml" for n in ("default", "safe", "vllm-backends")} <= set(names)
    assert "tuner/report/templates/report.html.j2" in names


def test_installed_the_tool_runs_from_any_directory(wheel: Path, tmp_path: Path, workers_dir: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")  # this environment's dependencies
    # without PYTHONPATH: a checkout on it (its nccl_tune.egg-info) reads as the tool already installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet",
                    "--disable-pip-version-check", str(wheel)], check=True, timeout=300, env=env)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    env["NCCL_TUNE_WORKERS_DIR"] = str(workers_dir)
    tool = str(venv / "bin" / "nccl-tune")

    imported = subprocess.run([str(python), "-c", "import tuner; print(tuner.__file__)"], capture_output=True,
                              text=True, env=env, cwd=elsewhere, timeout=120)
    assert imported.returncode == 0, imported.stderr[-3000:]
    where = imported.stdout
    assert where.startswith(str(site)), where  # the installed copy, not the repository's
    res = subprocess.run([tool, "--version"], capture_output=True, text=True, env=env, cwd=elsewhere, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("nccl-tune 0.") and str(python) in res.stdout, res

    # the repository's example, from another directory: its space found as a bundled one
    res = subprocess.run([tool, "sweep", str(EXAMPLE), "--dry-run"], capture_output=True, text=True, env=env,
                         cwd=elsewhere, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (f'sweep.space = "search_spaces/default.toml": {site / "tuner" / "inputs" / "spaces" / "default.toml"} '
            "(bundled with nccl-tune)") in res.stdout
    assert "GPUs: no GPU (the simulator, on a host without NVML)" in res.stdout
    # a user's own night file naming a bundled space, run from its folder
    night = elsewhere / "night.toml"
    night.write_text(EXAMPLE.read_text().replace('space = "search_spaces/default.toml"', 'space = "safe"'))
    res = subprocess.run([tool, "sweep", "night.toml", "--dry-run"], capture_output=True, text=True, env=env,
                         cwd=elsewhere, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f'sweep.space = "safe": {site / "tuner" / "inputs" / "spaces" / "safe.toml"} (bundled' in res.stdout
    assert not (elsewhere / "results").exists()  # a dry run writes nothing
