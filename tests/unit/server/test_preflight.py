"""The checks before the first launch, one by one: what each looked at, and its refusal, which the
sweep and ``--dry-run`` both read (:func:`tuner.server.preflight.checks`)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.helpers import ROOT, free_port
from tuner.inputs.config import ServerConfig
from tuner.server import preflight

TOPO = ROOT / "tests" / "fixtures" / "nccl_xml" / "topo8-2cpu.xml"


def _server(*command: str, port: int = 8000, **fields: object) -> ServerConfig:
    return ServerConfig(command=tuple(command), port=port, **fields)


def test_the_port_check_says_what_it_read_and_refuses_another_port():
    assert preflight.port_check(_server("vllm", "--port", "{port}")).what == (
        "server.command's port: {port} is filled with server.port 8000")
    assert preflight.port_check(_server("vllm", "--port", "8000")).problem is None
    wrong = preflight.port_check(_server("vllm", "--port", "9999"))
    assert wrong.problem is not None and "passes --port 9999, but server.port is 8000" in wrong.problem
    assert not wrong.on_host  # the command's text: refused on any machine
    assert preflight.port_check(_server("vllm", "--port=9999")).problem == (
        'server.command passes --port=9999, but server.port is 8000; write "--port={port}"')
    none = preflight.port_check(_server("vllm", "serve"))
    assert none.problem is None and none.what.endswith("none passed (see the warning)")
    assert preflight.port_warning(_server("vllm", "serve")) is not None


def test_a_command_without_a_port_is_warned_with_its_kind_s_default():
    sglang = ServerConfig(command=["python", "-m", "sglang.launch_server", "--model-path", "m"], port=8000)
    said = preflight.port_warning(sglang)
    assert said is not None and "SGLang listens on 30000 by default, not on server.port 8000" in said
    tgi = ServerConfig(command=["text-generation-launcher", "--model-id", "m", "--port", "8000"], port=8000)
    assert preflight.port_warning(tgi) is None  # it names the port
    plain = ServerConfig(command=["./serve.sh"], port=8000)
    said = preflight.port_warning(plain)
    assert said is not None and "unless the server listens there by default" in said


def test_the_results_folder_can_be_created_or_is_refused_without_creating_it(tmp_path):
    ok = preflight.results_check(tmp_path / "r" / "s")
    assert ok.problem is None and ok.what == f"--results {tmp_path / 'r' / 's'}: can be created in {tmp_path}"
    assert preflight.results_check(tmp_path).what == f"--results {tmp_path}: writable"
    (tmp_path / "f").write_text("x")
    bad = preflight.results_check(tmp_path / "f" / "r")
    assert bad.problem == f"{tmp_path / 'f'} is a file, not a folder"
    err = bad.error("exp.toml")
    assert err.file == "(command line)" and err.key == "--results" and err.accepted == preflight.RESULTS_ACCEPTED
    assert not (tmp_path / "r").exists()


def test_server_env_nccl_files_are_read_as_nccl_reads_them(tmp_path):
    good = preflight.nccl_file_check(_server("vllm", env={"NCCL_TOPO_FILE": str(TOPO)}))
    assert [c.problem for c in good] == [None] and good[0].what.endswith("read as NCCL reads it")
    (tmp_path / "graph.xml").write_text('<system version="1"/>')
    bad = preflight.nccl_file_check(_server("vllm", env={"NCCL_GRAPH_FILE": str(tmp_path / "graph.xml"),
                                                         "NCCL_TOPO_FILE": str(tmp_path / "none.xml")}))
    problems = {c.key: c.problem for c in bad}
    assert problems["server.env.NCCL_TOPO_FILE"] == (f"file not found: {tmp_path / 'none.xml'}; NCCL would go on "
                                                      "without it")
    assert "has root <system>" in (problems["server.env.NCCL_GRAPH_FILE"] or "")
    assert preflight.nccl_file_check(_server("vllm")) == []


def test_model_paths_and_programs(tmp_path):
    (tmp_path / "m").mkdir()
    assert preflight.model_path_check(_server("vllm", "serve", str(tmp_path / "m"))).what == (
        f"the model path {tmp_path / 'm'}: found")
    missing = preflight.model_path_check(_server("python", "-m", "x", "--model", str(tmp_path / "no")))
    assert missing.problem == f"the model path {tmp_path / 'no'} in server.command does not exist" and missing.on_host
    assert preflight.model_path_check(_server("vllm", "serve", "org/model")).problem is None  # a hub id
    from tests.helpers import write_config
    from tuner.inputs.config import load_config

    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    cfg = load_config(write_config(tmp_path / "exp.toml", command=["no-such-server-xyz", "{port}"],
                                   space=tmp_path / "space.toml"), check_program=False)
    (found,) = preflight.program_checks(cfg)
    assert (found.key, found.value, found.problem) == ("server.command[0]", "no-such-server-xyz", "not on PATH")
    cfg = load_config(write_config(tmp_path / "exp.toml", command=[sys.executable, "{port}"],
                                   space=tmp_path / "space.toml"))
    assert [c.problem for c in preflight.program_checks(cfg)] == [None]


def test_a_port_that_answers_is_named_with_its_holder():
    port = free_port()
    server = _server("vllm", "--port", "{port}", port=port)
    assert preflight.port_held(server) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        held = preflight.port_held(server)
    assert held is not None and held.startswith(f"port {port} on 127.0.0.1 already answers, held by pid ")


def test_checks_are_every_one_in_order_and_problems_their_refusals(tmp_path):
    from tests.helpers import write_config
    from tuner.inputs.config import load_config

    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    cfg = load_config(write_config(tmp_path / "exp.toml", command=[sys.executable, "--port", "{port}"],
                                   space=tmp_path / "space.toml"))
    found = preflight.checks(cfg, tmp_path / "r", environ={})
    assert [c.key for c in found] == ["server.command", "server.command", "server.command", "server.command",
                                      "server.env.CUDA_VISIBLE_DEVICES",
                                      "--results", "server.log_max_bytes"]
    assert preflight.problems(cfg, tmp_path / "r") == []
    assert Path(tmp_path / "r").exists() is False


def test_a_detached_docker_run_is_refused_as_the_launchers_and_a_published_port_is_the_hosts(tmp_path):
    from tuner.errors import LauncherRefused
    from tuner.inputs.config import ServerConfig

    server = ServerConfig(command=("docker", "run", "-d", "-p", "18431:8000", "img", "--port", "8000"), port=18431)
    launcher = preflight.launcher_check(server)
    assert launcher.problem is not None and isinstance(launcher.error("exp.toml"), LauncherRefused)
    assert preflight.port_check(server).problem is None  # the container's own --port 8000 is not the host's
    other = ServerConfig(command=("docker", "run", "-p", "9000:8000", "img"), port=18431)
    assert "publishes host port 9000" in (preflight.port_check(other).problem or "")
