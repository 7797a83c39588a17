"""What the server sees that nccl-tune does not set (:func:`tuner.server.settings_behind`), and
the NCCL library a real process mapped (:func:`tuner.server.mapped_nccl`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tuner.inputs.config import ServerConfig
from tuner.nccl import build_id
from tuner.server import behind_lines, settings_behind
from tuner.server.library import mapped_nccl

DOCKER = ROOT / "tests" / "launchers" / "docker"


def _server(*command: str, env: dict[str, str] | None = None) -> ServerConfig:
    return ServerConfig(command=tuple(command) or ("python", "server.py"), port=8000, env=env or {})


def test_a_nccl_conf_in_the_launch_home_is_named_and_a_varied_name_said_loudly(tmp_path):
    (tmp_path / ".nccl.conf").write_text("# left by an old benchmark\nNCCL_PROTO=Simple\nNCCL_IB_DISABLE=1\n")
    found = settings_behind(_server(), {"HOME": str(tmp_path), "PATH": "/usr/bin"})
    [conf] = [s for s in found if str(tmp_path) in s.where]
    assert conf.values == {"NCCL_PROTO": "Simple", "NCCL_IB_DISABLE": "1"}
    lines = behind_lines(found, ["NCCL_PROTO", "NCCL_ALGO"])
    assert any(f"{tmp_path}/.nccl.conf" in line and "NCCL_PROTO=Simple" in line for line in lines)
    [loud] = [line for line in lines if line.startswith("WARNING")]
    assert "NCCL_PROTO=Simple" in loud and "not untuned for NCCL_PROTO" in loud
    # server.env fixes the name for every launch: the file's value never acts, nothing loud
    assert not [line for line in behind_lines(found, ["NCCL_PROTO"], {"NCCL_PROTO": "LL"}) if "WARNING" in line]


def test_a_secret_a_conf_file_sets_is_never_shown(tmp_path):
    (tmp_path / ".nccl.conf").write_text("NCCL_ALGO=Ring\nHF_TOKEN=hf_do_not_show_me\n")
    found = settings_behind(_server(), {"HOME": str(tmp_path), "PATH": "/usr/bin"})
    said = " ".join(behind_lines(found, ["NCCL_ALGO"]))
    assert "NCCL_ALGO=Ring" in said and "HF_TOKEN" in said and "hf_do_not_show_me" not in said


def test_nccl_conf_file_in_server_env_replaces_the_home_file(tmp_path):
    (tmp_path / ".nccl.conf").write_text("NCCL_ALGO=Tree\n")
    named = tmp_path / "site.conf"
    named.write_text("NCCL_MIN_NCHANNELS=4\n")
    found = settings_behind(_server(env={"NCCL_CONF_FILE": str(named)}), {"HOME": str(tmp_path)})
    assert next(s.where for s in found if s.values) == f"NCCL_CONF_FILE={named}"
    assert not any(".nccl.conf" in s.where and str(tmp_path) in s.where for s in found)


def test_a_container_image_that_turns_p2p_off_is_named(tmp_path, monkeypatch):
    image = tmp_path / "image.py"  # the stand-in docker's image: its IMAGE_ENV line is the image's ENV
    image.write_text('IMAGE_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "WARN", "OTHER": "x"}\n')
    monkeypatch.setenv("FAKE_DOCKER_IMAGE", str(image))  # the client runs in the runner's environment
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "state"))
    server = _server(str(DOCKER), "run", "--rm", "-p", "{port}:8000", "fake/vllm-openai:v0.10.1.1", "--model", "m")
    found = settings_behind(server, {"HOME": str(tmp_path)})
    [img] = [s for s in found if "image" in s.where]
    assert img.where == "image fake/vllm-openai:v0.10.1.1's environment (Config.Env)"
    assert img.values == {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "WARN"}
    assert any("WARNING" in line and "NCCL_P2P_DISABLE=1" in line for line in behind_lines(found, ["NCCL_P2P_DISABLE"]))


def test_an_image_that_cannot_be_inspected_is_said(tmp_path):
    server = _server(sys.executable, "-c", "import sys; sys.exit(1)")  # not a container: no image
    assert all("image" not in s.where for s in settings_behind(server, {"HOME": str(tmp_path)}))
    broken = tmp_path / "docker"
    broken.write_text("#!/bin/sh\necho 'Error: No such image' >&2\nexit 1\n")
    broken.chmod(0o755)
    [said] = settings_behind(_server(str(broken), "run", "img:1"), {"HOME": str(tmp_path)})
    assert "not read" in said.where and "No such image" in said.where


def test_the_stand_in_library_a_real_process_mapped_is_named_with_version_and_build_id(tmp_path):
    code = ("import sys, time; from tuner.sim.libstub import map_stand_in; "
            "print(map_stand_in('2.21.5'), flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        path = proc.stdout.readline().strip()
        assert path.endswith("/libnccl.so.2.21.5")
        # the parent pid names the tree: its child (this test's Popen) is found through psutil
        loaded, lib = mapped_nccl([proc.pid])
        assert loaded is True and lib is not None
        assert (lib.path, lib.version, lib.pids) == (path, "2.21.5", (proc.pid,))
        assert len(lib.build_id) >= 16 and lib.build_id == build_id(Path(path))
    finally:
        proc.kill()
        proc.wait()


def test_a_process_without_nccl_is_known_not_to_have_it_and_a_gone_one_is_not_known():
    loaded, lib = mapped_nccl([os.getpid()])
    if lib is not None:
        pytest.skip("this test process has an NCCL library mapped")
    assert loaded is False
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert mapped_nccl([proc.pid]) == (None, None)
