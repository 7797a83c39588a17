"""Each launcher's reading and rewriting of the command: the container's -e, -v and --name for
every spelling docker and podman take, srun's --export, the wrappers in front, the refusals, the
host's paths and ports."""

from __future__ import annotations

import pytest

from tuner.launchers import launcher_of

NAMES = ["NCCL_DEBUG", "NCCL_PROTO"]


def _added(before: list[str], after: list[str]) -> list[str]:
    """What prepare inserted right after ``run`` (the commands here have it at index 1)."""
    assert after[:2] == before[:2] and after[len(after) - len(before) + 2:] == before[2:]
    return after[2:len(after) - len(before) + 2]


@pytest.mark.parametrize(("argv", "run_at"), [
    (["docker", "run", "--rm", "img", "--model", "m"], 1),
    (["docker", "container", "run", "img"], 2),
    (["/usr/bin/podman", "run", "img"], 1),
    (["podman", "container", "run", "-it", "img"], 2),
    (["docker", "--context", "gpu-box", "run", "img"], 3),
    (["docker", "-H=tcp://h:2375", "--debug", "run", "img"], 3),
])
def test_every_client_spelling_gets_minus_e_right_after_run(argv, run_at):
    launcher = launcher_of(argv)
    out = launcher.prepare(NAMES, ["/r/logs/trial-0001.nccl"], "abc")
    assert out[:run_at + 1] == argv[:run_at + 1]
    assert out[run_at + 1:run_at + 9] == ["-e", "NCCL_DEBUG", "-e", "NCCL_PROTO", "-v",
                                          "/r/logs/trial-0001.nccl:/r/logs/trial-0001.nccl", "--name",
                                          "nccl-tune-abc"]
    assert out[run_at + 9:] == argv[run_at + 1:]
    assert launcher.refusal() is None


def test_sudo_docker_keeps_sudo_and_preserves_the_names_for_minus_e():
    argv = ["sudo", "docker", "run", "img"]
    out = launcher_of(argv).prepare(NAMES, (), "x")
    # sudo resets the environment, and -e NAME copies the client's: the names must get through sudo
    assert out == ["sudo", "--preserve-env=NCCL_DEBUG,NCCL_PROTO", "docker", "run", "-e", "NCCL_DEBUG", "-e",
                   "NCCL_PROTO", "--name", "nccl-tune-x", "img"]
    assert launcher_of(["sudo", "-E", "docker", "run", "img"]).prepare(NAMES, (), "x")[:3] == ["sudo", "-E", "docker"]


@pytest.mark.parametrize("given", [["-e", "NCCL_PROTO"], ["--env", "NCCL_PROTO"], ["--env=NCCL_PROTO"],
                                   ["-eNCCL_PROTO"], ["-e", "NCCL_PROTO=LL"], ["--env=NCCL_PROTO=LL"]])
def test_a_name_the_command_passes_already_is_not_added_twice(given):
    argv = ["docker", "run", *given, "img"]
    added = _added(argv, launcher_of(argv).prepare(NAMES, (), "x"))
    assert added == ["-e", "NCCL_DEBUG", "--name", "nccl-tune-x"]


@pytest.mark.parametrize("given", [["--name", "mine"], ["--name=mine"]])
def test_an_existing_name_is_kept_and_used_for_teardown(given):
    argv = ["docker", "run", "--rm", *given, "--network", "host", "img"]
    launcher = launcher_of(argv)
    added = _added(argv, launcher.prepare(NAMES, (), "x"))
    assert added == ["-e", "NCCL_DEBUG", "-e", "NCCL_PROTO"]
    assert launcher.container == "mine"  # type: ignore[attr-defined]


def test_a_mount_already_at_the_folder_is_not_added_again():
    argv = ["docker", "run", "-v", "/r/logs/t.nccl:/r/logs/t.nccl", "img"]
    assert "-v" not in _added(argv, launcher_of(argv).prepare([], ["/r/logs/t.nccl"], "x"))


@pytest.mark.parametrize(("argv", "flag"), [
    (["docker", "run", "-d", "img"], "-d"),
    (["docker", "run", "--detach", "img"], "--detach"),
    (["docker", "run", "-dit", "--rm", "img"], "-dit"),
    (["podman", "run", "--detach=true", "img"], "--detach"),
])
def test_a_detached_run_is_refused_naming_the_flag(argv, flag):
    why = launcher_of(argv).refusal()
    assert why is not None and f"run {flag}`" in why and "remove -d" in why


@pytest.mark.parametrize("argv", [["docker", "compose", "up"], ["docker", "start", "-a", "vllm"],
                                  ["docker", "exec", "c", "vllm", "serve"], ["podman", "container", "start", "c"]])
def test_a_container_nccl_tune_does_not_start_is_refused(argv):
    why = launcher_of(argv).refusal()
    assert why is not None and "run [OPTIONS] IMAGE" in why


def test_env_file_alone_is_fine_since_minus_e_is_added():
    argv = ["docker", "run", "--env-file", "vars.env", "img"]
    launcher = launcher_of(argv)
    assert launcher.refusal() is None
    assert _added(argv, launcher.prepare(["NCCL_PROTO"], (), "x"))[:2] == ["-e", "NCCL_PROTO"]


def test_a_script_that_runs_docker_inside_is_a_plain_process():
    launcher = launcher_of(["./start-vllm.sh", "--port", "8000"])
    assert launcher.refusal() is None and launcher.plan(NAMES) is None
    assert launcher.prepare(NAMES, (), "x") == ["./start-vllm.sh", "--port", "8000"]


@pytest.mark.parametrize("argv", [["env", "A=1", "docker", "run", "img"], ["nice", "-n", "5", "docker", "run", "img"],
                                  ["taskset", "-c", "0-7", "podman", "run", "img"],
                                  ["timeout", "2h", "docker", "run", "img"], ["sudo", "-E", "docker", "run", "img"]])
def test_wrappers_in_front_are_skipped(argv):
    launcher = launcher_of(argv)
    assert launcher.listener_outside is not None  # found the container client behind the wrappers
    assert launcher.server_argv() == []  # the image has no arguments


def test_env_minus_i_is_refused():
    why = launcher_of(["env", "-i", "vllm", "serve", "m"]).refusal()
    assert why is not None and "env -i" in why


def test_the_model_path_inside_the_container_is_translated_through_its_mount():
    launcher = launcher_of(["docker", "run", "-v", "/data/models:/models:ro", "img", "--model", "/models/x"])
    assert launcher.server_argv() == ["--model", "/models/x"]
    assert launcher.host_path("/models/x") == ("/data/models/x", "")
    host, note = launcher.host_path("/opt/x")
    assert host is None and "the container's own" in note
    mounted = launcher_of(["docker", "run", "--mount", "type=bind,source=/d,target=/m", "img"])
    assert mounted.host_path("/m/a") == ("/d/a", "")
    host, note = launcher_of(["docker", "run", "-v", "hf-cache:/root/.cache", "img"]).host_path("/root/.cache/m")
    assert host is None and "volume hf-cache" in note


@pytest.mark.parametrize(("argv", "ports"), [
    (["docker", "run", "-p", "18431:8000", "img"], ["18431"]),
    (["docker", "run", "-p", "127.0.0.1:18431:8000/tcp", "img"], ["18431"]),
    (["docker", "run", "--publish=9000:8000", "img"], ["9000"]),
    (["docker", "run", "--network", "host", "img", "--port", "8000"], None),
    (["docker", "run", "--net=host", "img"], None),
    (["vllm", "serve", "m", "-p", "8000"], None),
])
def test_the_hosts_ports(argv, ports):
    assert launcher_of(argv).host_ports() == ports


@pytest.mark.parametrize(("argv", "environ", "want"), [
    (["srun", "-n", "1", "--export=NONE", "vllm", "serve"], {}, "--export=NCCL_DEBUG,NCCL_PROTO"),
    (["srun", "--export", "NONE", "vllm"], {}, "--export=NCCL_DEBUG,NCCL_PROTO"),
    (["srun", "--export=HOME,NCCL_PROTO=Simple", "vllm"], {}, "--export=HOME,NCCL_PROTO=Simple,NCCL_DEBUG"),
    (["srun", "vllm"], {"SLURM_EXPORT_ENV": "NONE"}, "--export=NCCL_DEBUG,NCCL_PROTO"),
])
def test_srun_writes_the_names_into_export(argv, environ, want):
    out = launcher_of(argv, environ).prepare(NAMES, (), "x")
    assert want in out and sum(a.startswith("--export") for a in out) == 1
    assert "--job-name=nccl-tune-x" in out
    assert out[-len(launcher_of(argv, environ).server_argv()):] == launcher_of(argv, environ).server_argv()


@pytest.mark.parametrize("export", [[], ["--export=ALL"], ["--export=ALL,FOO=1"]])
def test_srun_with_export_all_needs_nothing(export):
    argv = ["srun", "-J", "mine", *export, "python", "-m", "server"]
    launcher = launcher_of(argv, {})
    assert launcher.prepare(NAMES, (), "x") == argv
    assert launcher.server_argv() == ["python", "-m", "server"]
    assert "--export=ALL" in (launcher.plan(NAMES) or "")
