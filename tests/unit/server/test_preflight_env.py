"""The variables the command sets itself, held to the space and to the proof before the first
launch (:func:`tuner.server.preflight.command_env_checks`): refused as server.env is when it
fixes a variable the space varies, and when it hides NCCL's INFO lines."""

from __future__ import annotations

import sys

import pytest

from tuner.errors import InputError, LauncherRefused
from tuner.inputs.config import ServerConfig
from tuner.server import preflight

SPACE = "the search space space.toml"


def _refusals(*command: str, env: dict[str, str] | None = None, varied: tuple[str, ...] = ("NCCL_PROTO",),
              environ: dict[str, str] | None = None) -> list[str]:
    server = ServerConfig(command=tuple(command), port=8000, env=env or {})
    checks = preflight.command_env_checks(server, varied, SPACE, environ or {})
    found = [c for c in checks if c.problem]
    for c in found:
        err = c.error("sweep.toml")
        assert isinstance(err, LauncherRefused) and isinstance(err, InputError) and err.exit_code == 2
        assert c.key == "server.command" and not c.on_host
    return [str(c.error("sweep.toml")) for c in found]


@pytest.mark.parametrize(("command", "said"), [
    (["env", "NCCL_PROTO=Simple", "python", "server.py"], "env NCCL_PROTO=Simple"),
    (["docker", "run", "-e", "NCCL_PROTO=Simple", "img"], "-e NCCL_PROTO=Simple"),
    (["podman", "run", "--env=NCCL_PROTO=Simple", "img"], "--env NCCL_PROTO=Simple"),
    (["srun", "--export=ALL,NCCL_PROTO=Simple", "vllm"], "--export=ALL,NCCL_PROTO=Simple"),
])
def test_a_command_that_fixes_a_varied_variable_is_refused_naming_it(command, said):
    [message] = _refusals(*command)
    assert message.startswith(f"sweep.toml: key 'server.command' has value '{said}'")
    assert "NCCL_PROTO=Simple" in message and SPACE in message and "accepted: a command that fixes no variable" in message


def test_an_env_file_s_fix_is_refused_and_one_that_cannot_be_read_is_not_checked(tmp_path):
    env_file = tmp_path / "f"
    env_file.write_text("NCCL_PROTO=Simple\n")
    [message] = _refusals("docker", "run", "--env-file", str(env_file), "img")
    assert f"--env-file {env_file}: NCCL_PROTO=Simple" in message
    server = ServerConfig(command=("docker", "run", "--env-file", str(tmp_path / "gone"), "img"), port=8000)
    checks = preflight.command_env_checks(server, ("NCCL_PROTO",), SPACE)
    assert not any(c.problem for c in checks)
    assert any(c.unchecked and "gone cannot be read here" in c.unchecked for c in checks)


@pytest.mark.parametrize("command", [
    ["env", "NCCL_DEBUG=WARN", "docker", "run", "img"],
    ["docker", "run", "-e", "NCCL_DEBUG=version", "img"],
    ["env", "-u", "NCCL_DEBUG", "vllm"],
    ["docker", "run", "-e", "NCCL_DEBUG_SUBSYS=GRAPH", "img"],
    ["docker", "run", "-e", "NCCL_DEBUG_SUBSYS=^ENV", "img"],
    ["srun", "--export=ALL,NCCL_DEBUG_FILE=/tmp/nccl.%h.%p", "vllm"],
])
def test_a_command_that_hides_nccl_s_info_lines_is_refused(command):
    [message] = _refusals(*command)
    assert "hides NCCL's INFO lines" in message and "NCCL_DEBUG" in message


@pytest.mark.parametrize("command", [
    ["env", "NCCL_DEBUG=info", "vllm"],
    ["docker", "run", "-e", "NCCL_DEBUG=TRACE", "-e", "NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING", "img"],
    ["docker", "run", "-e", "NCCL_DEBUG_SUBSYS=ALL", "img"],
    ["docker", "run", "-e", "NCCL_DEBUG_SUBSYS=^NET", "img"],
    ["docker", "run", "-e", "NCCL_PROTO", "-e", "HF_HOME=/cache", "img"],  # a copy, and a variable no one varies
    ["srun", "--export=NONE", "vllm"],
])
def test_a_command_that_leaves_the_set_and_the_proof_alone_passes(command):
    assert _refusals(*command) == []


def test_the_command_s_debug_file_is_accepted_when_it_is_server_env_s():
    assert _refusals("env", "NCCL_DEBUG_FILE=/l/%h", "vllm", env={"NCCL_DEBUG_FILE": "/l/%h"}) == []


def test_a_command_that_contradicts_server_env_is_refused():
    [message] = _refusals("env", "NCCL_IB_HCA=mlx5_1", "vllm", env={"NCCL_IB_HCA": "mlx5_0"})
    assert "server.env sets NCCL_IB_HCA" in message


def test_the_sweep_s_checks_hold_the_command_to_the_space(tmp_path):
    from tests.helpers import write_config
    from tuner.inputs.config import load_config

    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    cfg = load_config(write_config(tmp_path / "exp.toml", command=["env", "NCCL_PROTO=Simple", sys.executable,
                                                                   "--port", "{port}"], space=tmp_path / "space.toml"))
    found = preflight.problems(cfg, tmp_path / "r", ["NCCL_PROTO"], SPACE)
    assert [p.key for p in found] == ["server.command"] and "env NCCL_PROTO=Simple" in str(found[0])
    assert preflight.problems(cfg, tmp_path / "r") == []  # the space not given: nothing it varies


def test_a_secret_the_command_sets_is_never_shown_nor_held_to_server_env():
    # the study records a secret as ***: a command's own token beside server.env's is no contradiction
    assert _refusals("env", "HF_TOKEN=hf_cmd_secret", "python", "s.py", env={"HF_TOKEN": "hf_env_secret"}) == []
    # and where a secret variable is the space's, the refusal names it without its value
    said = _refusals("env", "MY_SECRET=hf_cmd_secret", "python", "s.py", varied=("MY_SECRET",))
    assert len(said) == 1 and "MY_SECRET=***" in said[0] and "hf_cmd_secret" not in said[0]
