"""What the command itself sets for the server, spelling by spelling (``env NAME=VALUE``, ``sudo
NAME=VALUE``, ``env -u``, docker/podman ``-e``/``--env``/``--env-file``, srun ``--export``), the
detach spellings pflag takes, and the plan's words."""

from __future__ import annotations

import pytest

from tuner.launchers import launcher_of

SIMPLE = {"NCCL_PROTO": "Simple"}


@pytest.mark.parametrize("argv", [
    ["env", "NCCL_PROTO=Simple", "python", "server.py"],
    ["/usr/bin/env", "-C", "/srv", "NCCL_PROTO=Simple", "vllm", "serve", "m"],
    ["sudo", "NCCL_PROTO=Simple", "vllm", "serve", "m"],
    ["nice", "-n", "5", "env", "NCCL_PROTO=Simple", "vllm"],
])
def test_a_wrapper_s_assignment_is_a_fix_and_the_server_is_found_behind_it(argv):
    launcher = launcher_of(argv)
    assert launcher.fixed_env() == SIMPLE
    assert launcher.server_argv()[0] in ("python", "vllm")


@pytest.mark.parametrize("argv", [["env", "-u", "NCCL_DEBUG", "vllm"], ["env", "-uNCCL_DEBUG", "vllm"],
                                  ["env", "--unset=NCCL_DEBUG", "vllm"]])
def test_env_minus_u_unsets_a_variable(argv):
    launcher = launcher_of(argv)
    assert [(f.name, f.value) for f in launcher.env_fixes()] == [("NCCL_DEBUG", None)]
    assert launcher.fixed_env() == {} and launcher.server_argv() == ["vllm"]


def test_a_later_unset_removes_an_earlier_assignment():
    assert launcher_of(["env", "NCCL_PROTO=LL", "env", "-u", "NCCL_PROTO", "vllm"]).fixed_env() == {}


@pytest.mark.parametrize("given", [["-e", "NCCL_PROTO=Simple"], ["--env", "NCCL_PROTO=Simple"],
                                   ["--env=NCCL_PROTO=Simple"], ["-eNCCL_PROTO=Simple"], ["-e=NCCL_PROTO=Simple"],
                                   ["-ite", "NCCL_PROTO=Simple"], ["-e", "NCCL_PROTO=LL", "-e", "NCCL_PROTO=Simple"]])
@pytest.mark.parametrize("client", ["docker", "podman", "nerdctl"])
def test_a_container_s_minus_e_with_a_value_is_a_fix(client, given):
    launcher = launcher_of([client, "run", "--rm", *given, "img", "--model", "m"])
    assert launcher.fixed_env() == SIMPLE
    assert launcher.server_argv() == ["--model", "m"]


@pytest.mark.parametrize("given", [["-e", "NCCL_PROTO"], ["--env=NCCL_PROTO"], ["-eNCCL_PROTO"]])
def test_minus_e_without_a_value_copies_the_caller_s_and_is_no_fix(given):
    assert launcher_of(["docker", "run", *given, "img"]).fixed_env() == {}


def test_an_env_file_is_read_and_minus_e_wins_over_it(tmp_path):
    env_file = tmp_path / "vars.env"
    env_file.write_text("# the node's settings\n\n  NCCL_PROTO=Simple\nNCCL_ALGO\nNCCL_DEBUG=WARN\n")
    launcher = launcher_of(["docker", "run", "-e", "NCCL_DEBUG=INFO", "--env-file", str(env_file), "img"])
    assert launcher.fixed_env() == {"NCCL_PROTO": "Simple", "NCCL_DEBUG": "INFO"}  # files first, -e over them
    assert launcher.env_fixes()[0].said == f"--env-file {env_file}: NCCL_PROTO=Simple"
    assert launcher.env_unread() == []
    assert launcher_of(["podman", "run", f"--env-file={env_file}", "img"]).fixed_env()["NCCL_PROTO"] == "Simple"


def test_an_env_file_that_cannot_be_read_is_said(tmp_path):
    launcher = launcher_of(["docker", "run", "--env-file", str(tmp_path / "absent.env"), "img"])
    assert launcher.fixed_env() == {}
    [said] = launcher.env_unread()
    assert "absent.env cannot be read here" in said and "not checked" in said


def test_the_wrapper_s_fix_counts_for_a_container_too():
    # -e NAME (nccl-tune's own, or the command's) copies the client's value, which env fixed
    launcher = launcher_of(["env", "NCCL_DEBUG=WARN", "docker", "run", "-e", "NCCL_PROTO=Simple", "img"])
    assert launcher.fixed_env() == {"NCCL_DEBUG": "WARN", **SIMPLE}


@pytest.mark.parametrize(("export", "environ"), [
    (["--export=ALL,NCCL_PROTO=Simple"], {}),
    (["--export", "HOME,NCCL_PROTO=Simple"], {}),
    ([], {"SLURM_EXPORT_ENV": "ALL,NCCL_PROTO=Simple"}),
])
def test_srun_export_assignments_are_fixes(export, environ):
    launcher = launcher_of(["srun", "-n", "1", *export, "vllm", "serve"], environ)
    assert launcher.fixed_env() == SIMPLE
    assert launcher.server_argv() == ["vllm", "serve"]


@pytest.mark.parametrize("export", [["--export=ALL"], ["--export=NONE"], ["--export=HOME,NCCL_PROTO"]])
def test_srun_export_names_alone_are_no_fix(export):
    assert launcher_of(["srun", *export, "vllm"], {}).fixed_env() == {}


@pytest.mark.parametrize("flag", ["-d=true", "-d=1", "-d=TRUE", "-d=t", "--detach=True", "--detach=1", "-itd=true"])
def test_a_detach_with_a_true_value_is_refused(flag):
    why = launcher_of(["docker", "run", flag, "img"]).refusal()
    assert why is not None and "remove -d" in why


@pytest.mark.parametrize("flag", ["--detach=false", "-d=false", "-d=0", "--detach=0", "-it"])
def test_a_detach_with_a_false_value_is_not(flag):
    launcher = launcher_of(["docker", "run", flag, "img", "--model", "m"])
    assert launcher.refusal() is None and launcher.server_argv() == ["--model", "m"]


def test_the_container_plan_lists_the_names_without_a_dangling_comma():
    launcher = launcher_of(["docker", "run", "img"])
    varied = launcher.plan(["RAY_DEDUP_LOGS"], ["NCCL_PROTO"]) or ""
    assert "(-e NCCL_PROTO -e RAY_DEDUP_LOGS)" in varied and ", )" not in varied
    unvaried = launcher.plan(["RAY_DEDUP_LOGS"]) or ""
    assert "(-e RAY_DEDUP_LOGS, each variable of the set)" in unvaried
    copied = launcher_of(["docker", "run", "-e", "RAY_DEDUP_LOGS", "img"]).plan(["RAY_DEDUP_LOGS"], ["NCCL_PROTO"]) or ""
    assert "(-e NCCL_PROTO)" in copied and ", )" not in copied
    nothing = launcher_of(["docker", "run", "-e", "RAY_DEDUP_LOGS", "img"]).plan(["RAY_DEDUP_LOGS"]) or ""
    assert "for each variable of the launch (each variable of the set)" in nothing


def test_the_srun_plan_has_no_empty_list():
    launcher = launcher_of(["srun", "--export=NONE", "vllm"], {})
    assert "into --export (each variable of the set) so" in (launcher.plan([]) or "")
    assert "into --export (NCCL_DEBUG and each variable of the set) so" in (launcher.plan(["NCCL_DEBUG"]) or "")
    assert "into --export (NCCL_DEBUG, NCCL_PROTO) so" in (launcher.plan(["NCCL_DEBUG"], ["NCCL_PROTO"]) or "")
    assert "( and" not in (launcher.plan([]) or "")
