"""``[server.nodes]``: a server across nodes, read from real files; each bad value refused in one
paragraph naming the key, the value and what is accepted; each node's command as launched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli
from tuner.errors import ExitCode, InputError
from tuner.inputs.config import load_config

PY = sys.executable


def _server(command: str, nodes: str, kind: str = "") -> str:
    return f'[server]\ncommand = {command}\n{kind}\n[server.nodes]\n{nodes}\n'


VLLM = f'["{PY}", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--port", "{{port}}"]'
SGLANG = f'["{PY}", "-m", "sglang.launch_server", "--model-path", "m", "--port", "{{port}}"]'
PLAIN = f'["{PY}", "serve.py", "--port", "{{port}}"]'


@pytest.fixture(autouse=True)
def _srun_on_path(monkeypatch):
    """srun mode needs srun on PATH: the stand-in (tests/launchers/srun) is, as on a Slurm login node."""
    monkeypatch.setenv("PATH", f"{ROOT / 'tests' / 'launchers'}{os.pathsep}{os.environ.get('PATH', '')}")


def test_srun_mode_without_srun_on_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun here: the night would crash at its baseline
    why = _refused(tmp_path, _server(VLLM, 'count = 2\nhosts = ["a", "b"]\nlaunch = "srun"'))
    assert "server.nodes.launch" in why and "srun is not on PATH" in why


def _load(tmp_path: Path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return load_config(path)


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return str(info.value)


def test_no_nodes_table_changes_nothing(tmp_path):
    cfg = _load(tmp_path, f"[server]\ncommand = {VLLM}\nport = 8123\n")
    assert not cfg.server.nodes.spans
    assert cfg.server.argv()[-2:] == ["--port", "8123"]


def test_vllm_gets_its_node_flags_and_headless_beyond_the_head(tmp_path):
    cfg = _load(tmp_path, _server(VLLM, "count = 2\ndist_port = 29600"))
    assert cfg.server.argv()[-8:] == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
                                      "--master-port", "29600"]
    assert cfg.server.node_argv(1, "127.0.0.1")[-9:] == ["--nnodes", "2", "--node-rank", "1", "--master-addr",
                                                         "127.0.0.1", "--master-port", "29600", "--headless"]


def test_sglang_gets_dist_init_addr(tmp_path):
    cfg = _load(tmp_path, _server(SGLANG, 'count = 2\nhosts = ["spark-a", "spark-b"]\nlaunch = "srun"'))
    assert cfg.server.node_argv(1, "spark-a")[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr",
                                                       "spark-a:29555"]
    assert cfg.server.argv()[-1] == "spark-a:29555"  # srun: the head is the first host
    assert cfg.server.host == "spark-a"  # probed on the head


def test_srun_probes_the_head_unless_host_is_set(tmp_path):
    nodes = 'count = 2\nhosts = ["spark-a", "spark-b"]\nlaunch = "srun"'
    assert _load(tmp_path, _server(VLLM, nodes)).server.host == "spark-a"
    assert _load(tmp_path, _server(VLLM, nodes, 'host = "10.0.0.7"')).server.host == "10.0.0.7"
    assert _load(tmp_path, _server(VLLM, 'count = 2\nhosts = ["a", "b"]')).server.host == "127.0.0.1"  # local


@pytest.mark.parametrize("args", [
    '"--rank={node_rank}", "--world={nnodes}", "--addr={head}:{dist_port}"',
    '"--rank", "{node_rank}", "--world", "{nnodes}", "--addr", "{head}:{dist_port}"',
])
def test_placeholders_replace_the_kind_flags(tmp_path, args):
    cfg = _load(tmp_path, _server(f'["{PY}", "serve.py", "--port", "{{port}}", {args}]', "count = 3"))
    node2 = " ".join(cfg.server.node_argv(2, "127.0.0.1"))
    assert "--rank" in node2 and "2" in node2 and "3" in node2 and "127.0.0.1:29555" in node2
    assert "--nnodes" not in node2 and "{" not in node2


def test_placeholders_on_one_host_are_rank_zero_of_one(tmp_path):
    cfg = _load(tmp_path, f'[server]\ncommand = ["{PY}", "s.py", "--rank={{node_rank}}", "--n={{nnodes}}"]\n')
    assert cfg.server.argv()[-2:] == ["--rank=0", "--n=1"]


@pytest.mark.parametrize("nodes, words", [
    ("count = 0", ["server.nodes.count", "an integer in [1, 1024]"]),
    ("count = -2", ["server.nodes.count", "an integer in [1, 1024]"]),
    ('count = "2"', ["server.nodes.count"]),
    ('count = 2\nhosts = ["a"]', ["server.nodes", "1 hosts for count = 2"]),
    ('count = 2\nhosts = ["a", "b", "c"]', ["server.nodes", "3 hosts for count = 2"]),
    ('count = 2\nhosts = ["a", "a"]', ["server.nodes", "a host is named twice"]),
    ('count = 2\nhosts = ["a", "b c"]', ["server.nodes.hosts"]),
    ("count = 2\ndist_port = 0", ["server.nodes.dist_port", "an integer in [1, 65535]"]),
    ("count = 2\ndist_port = 70000", ["server.nodes.dist_port", "an integer in [1, 65535]"]),
    ('count = 2\nlaunch = "ssh"', ["server.nodes.launch", "local, srun or lws"]),
    ("count = 2\nnodes = 3", ["server.nodes.nodes"]),
])
def test_bad_values_are_refused_with_the_key(tmp_path, nodes, words):
    said = _refused(tmp_path, _server(VLLM, nodes))
    assert all(w in said for w in words), said


@pytest.mark.parametrize("command, kind", [(PLAIN, ""), (VLLM, 'kind = "tgi"'), (PLAIN, 'kind = "llamacpp"')])
def test_a_kind_without_node_flags_must_write_the_placeholders(tmp_path, command, kind):
    said = _refused(tmp_path, _server(command, "count = 2", kind))
    assert "server.command" in said and "{node_rank}" in said and "no multi-node flags" in said


def test_srun_outside_an_allocation_needs_hosts(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    said = _refused(tmp_path, _server(VLLM, 'count = 2\nlaunch = "srun"'))
    assert "server.nodes.launch" in said and "SLURM_JOB_NODELIST unset" in said
    monkeypatch.setenv("SLURM_JOB_NODELIST", "spark-[a-b]")
    assert _load(tmp_path, _server(VLLM, 'count = 2\nlaunch = "srun"')).server.nodes.launch == "srun"


@pytest.mark.parametrize("arg", ["{node}", "--rank={rank}", "{nodes}", "{head_addr}"])
def test_unknown_placeholders_are_refused(tmp_path, arg):
    said = _refused(tmp_path, _server(f'["{PY}", "s.py", "{arg}"]', "count = 2"))
    assert "is not a placeholder nccl-tune fills" in said and "{dist_port}" in said


def test_a_rendezvous_port_that_is_the_http_port_is_refused(tmp_path):
    """The head binds both: the same port would fail the first launch as a held port (the
    machine's, exit 8) after its whole load; it is the file's mistake, said before anything runs."""

    text = (ROOT / "examples" / "sim-2node.toml").read_text().replace("dist_port = 29581", "dist_port = 8481")
    cfg = tmp_path / "same.toml"
    cfg.write_text(text)
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 2, res.stderr
    assert "server.nodes.dist_port" in res.stderr and "8481" in res.stderr and "Traceback" not in res.stderr


def test_a_head_host_this_machine_cannot_resolve_is_bad_input(tmp_path):
    """srun mode names the head as server.host; on a machine that cannot resolve it the dry run
    (and the sweep) say so as bad input, not a traceback."""

    text = (ROOT / "examples" / "sim-2node.toml").read_text().replace('launch = "local"', 'launch = "srun"')
    text = text.replace('hosts = ["spark-a", "spark-b"]', 'hosts = ["no-such-node.invalid", "spark-b.invalid"]')
    cfg = tmp_path / "srun.toml"
    cfg.write_text(text)
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == 2, res.stderr
    assert "server.host" in res.stderr and "no-such-node.invalid" in res.stderr and "Traceback" not in res.stderr
