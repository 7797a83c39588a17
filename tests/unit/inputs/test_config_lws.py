"""``[server.nodes] launch = "lws"``: the LeaderWorkerSet template read from real files; each bad
template or key refused in one paragraph naming it and its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuner.errors import ExitCode, InputError
from tuner.inputs.config import load_config

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "examples" / "k8s" / "sim-server-lws.yaml"


def _write(tmp_path: Path, nodes: str, env: str = "", template: str | None = None) -> Path:
    if template is None:
        shutil.copy(TEMPLATE, tmp_path / "lws.yaml")
    else:
        (tmp_path / "lws.yaml").write_text(template)
    path = tmp_path / "exp.toml"
    path.write_text(f'[server]\ncommand = ["kubectl"]\nkind = "vllm"\nport = 8491\n{env}\n[server.nodes]\n{nodes}\n')
    return path


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return str(info.value)


def test_the_template_is_found_next_to_the_file_and_the_kind_adds_no_node_flags(tmp_path):
    cfg = load_config(_write(tmp_path, 'count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"\nnamespace = "tune"'))
    nodes = cfg.server.nodes
    assert nodes.manifest == tmp_path / "lws.yaml" and nodes.namespace == "tune"
    assert cfg.server.argv() == ["kubectl"]  # the template's commands run, not vLLM's flags on kubectl


def test_the_bundled_example_loads(tmp_path):
    cfg = load_config(ROOT / "examples" / "sim-2node-lws.toml")
    assert cfg.server.nodes.launch == "lws" and cfg.server.nodes.container_port == 18491


@pytest.mark.parametrize(("nodes", "template", "said"), [
    ('count = 2\nlaunch = "lws"', None, "no manifest given"),
    ('count = 2\nlaunch = "lws"\nmanifest = "absent.yaml"', None, "file not found"),
    ('count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"', "apiVersion: batch/v1\nkind: Job\nspec: {}\n",
     "not a LeaderWorkerSet"),
    ('count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"', "kind: [unclosed\n", "not YAML"),
    ('count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"', "a: 1\n---\nb: 2\n", "2 YAML documents"),
    ('count = 3\nlaunch = "lws"\nmanifest = "lws.yaml"', None, "size = 2 but server.nodes.count = 3"),
    ('count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"',
     "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nspec:\n  leaderWorkerTemplate: {}\n",
     "workerTemplate has no spec.containers"),
    ('count = 2\nlaunch = "local"\nmanifest = "lws.yaml"', None, 'manifest only with launch = "lws"'),
    ('count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"\nnamespace = "Bad_NS"', None, "namespace"),
])
def test_a_bad_template_or_key_is_refused_in_one_paragraph(tmp_path, nodes, template, said):
    text = _refused(_write(tmp_path, nodes, template=template))
    assert said in text and "server.nodes" in text
    assert "Traceback" not in text


@pytest.mark.parametrize("name", ["HF_TOKEN", "api_key", "DB_PASSWORD", "MySecretThing"])
def test_a_secret_named_variable_is_never_written_into_a_manifest(tmp_path, name):
    text = _refused(_write(tmp_path, 'count = 2\nlaunch = "lws"\nmanifest = "lws.yaml"',
                           env=f'env = {{ {name} = "hunter2", NCCL_PROTO = "Simple" }}'))
    assert "put it in a Kubernetes Secret and reference it from the template's env" in text
    assert name in text and "hunter2" not in text


def test_a_secret_named_variable_is_fine_in_local_mode(tmp_path):
    cfg = load_config(_write(tmp_path, "count = 2", env='env = { HF_TOKEN = "x" }'))
    assert cfg.server.nodes.launch == "local"
