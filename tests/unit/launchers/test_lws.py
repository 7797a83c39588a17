"""The trial's LeaderWorkerSet: the template made into one launch's manifest (checked against LWS
v0.7.0's CRD schema, strict as ``kubectl apply``), the launcher found from its port-forward and
its handle, and the teardown run against the stand-in kubectl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from tuner.inputs import read_template
from tuner.launchers import launcher_of, lws_manifest, lws_name, pod_names
from tuner.launchers.lws import MARKER_LABEL, LwsLauncher

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "examples" / "k8s" / "server-lws.yaml"
SCHEMA = ROOT / "tests" / "fixtures" / "schemas" / "leaderworkerset-v1-lws-v0.7.0.json"
KUBECTL = ROOT / "tests" / "launchers" / "kubectl"


def _strict(schema):
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _manifest(env=None, namespace=None):
    env = {"NCCL_IB_GID_INDEX": "5", "NCCL_DEBUG": "INFO"} if env is None else env
    return lws_manifest(read_template(TEMPLATE), lws_name("ABC123"), 2, env, "m" * 32, namespace)


def test_every_container_of_both_templates_gets_the_set_once_and_the_set_wins():
    doc = _manifest()
    assert doc["metadata"] == {"name": "nccl-tune-abc123"}
    assert doc["spec"]["replicas"] == 1 and doc["spec"]["leaderWorkerTemplate"]["size"] == 2
    lwt = doc["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        assert lwt[key]["metadata"]["labels"][MARKER_LABEL] == "m" * 32
        for c in lwt[key]["spec"]["containers"]:
            env = [(e["name"], e.get("value")) for e in c["env"]]
            assert env.count(("NCCL_IB_GID_INDEX", "5")) == 1  # the template's 3 replaced: every node runs the set
            assert [n for n, _ in env].count("NCCL_IB_GID_INDEX") == 1
            assert ("NCCL_NET_GDR_LEVEL", "0") in env and ("NCCL_DEBUG", "INFO") in env
    errors = list(jsonschema.Draft7Validator(_strict(json.loads(SCHEMA.read_text()))).iter_errors(doc))
    assert not errors, errors


def test_the_template_itself_is_left_as_it_was_and_a_namespace_is_written():
    template = read_template(TEMPLATE)
    before = json.dumps(template, sort_keys=True)
    doc = lws_manifest(template, "nccl-tune-x", 2, {"NCCL_PROTO": "Simple"}, "m", "tune")
    assert json.dumps(template, sort_keys=True) == before
    assert doc["metadata"]["namespace"] == "tune"


def test_lws_names_group_zero_s_pods_leader_first():
    assert pod_names("nccl-tune-ab", 3) == ["nccl-tune-ab-0", "nccl-tune-ab-0-1", "nccl-tune-ab-0-2"]


def test_the_port_forward_is_the_lws_launcher_and_its_handle_finds_it_again():
    for argv in (["kubectl", "port-forward", "pod/nccl-tune-ab-0", "8000:8000"],
                 ["/usr/local/bin/kubectl", "--context=prod", "port-forward", "--namespace=t", "pod/nccl-tune-ab-0",
                  "1:2"],
                 ["env", "A=1", "kubectl", "port-forward", "pod/nccl-tune-ab-0", "1:2"]):
        launcher = launcher_of(argv)
        assert isinstance(launcher, LwsLauncher) and launcher.lws == "nccl-tune-ab"
        again = launcher_of(launcher.handle())
        assert isinstance(again, LwsLauncher) and again.lws == "nccl-tune-ab"
        assert again.namespace == launcher.namespace
    assert not isinstance(launcher_of(["kubectl", "apply", "-f", "x"]), LwsLauncher)


def _kubectl(state, *args):
    env = {**os.environ, "FAKE_KUBECTL_STATE": str(state)}
    return subprocess.run([sys.executable, str(KUBECTL), *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_the_stand_in_refuses_a_manifest_the_crd_refuses(tmp_path):
    doc = _manifest()
    doc["spec"]["leaderWorkerTemplate"]["sizee"] = 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    done = _kubectl(tmp_path / "k", "apply", "-f", str(bad))
    assert done.returncode == 1 and "strict decoding error" in done.stderr and "sizee" in done.stderr
    assert _kubectl(tmp_path / "k", "get", "lws").stdout.startswith("No resources found")


def test_stop_deletes_the_lws_and_its_pods_and_says_so(tmp_path, monkeypatch):
    state = tmp_path / "k"
    monkeypatch.setenv("FAKE_KUBECTL_STATE", str(state))
    monkeypatch.setenv("PATH", f"{KUBECTL.parent}{os.pathsep}{os.environ['PATH']}")
    template = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "t"},
                "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "c", "image": "x", "command": [sys.executable, "-c",
                                    "import os, time; print(os.environ['LWS_WORKER_INDEX'], os.environ['V'], "
                                    "os.environ['NCCL_TUNE_NODE'], flush=True); time.sleep(600)"]}]}}}}}
    doc = lws_manifest(template, "nccl-tune-t1", 2, {"V": "$(LWS_GROUP_SIZE)x"}, "m", None)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert _kubectl(state, "apply", "-f", str(path)).returncode == 0
    launcher = launcher_of(["kubectl", "port-forward", "pod/nccl-tune-t1-0", "1:2"])
    pods = [json.loads((state / "pods" / p / "pod.json").read_text()) for p in pod_names("nccl-tune-t1", 2)]
    assert [p["env"]["LWS_WORKER_INDEX"] for p in pods] == ["0", "1"]
    assert pods[1]["env"]["V"] == "2x"  # Kubernetes' $(NAME) expansion, LWS's variables first
    stopped = launcher.stop(5.0)
    assert stopped.said == "LeaderWorkerSet nccl-tune-t1 deleted" and not stopped.left
    for p in pods:
        try:
            os.killpg(p["pid"], 0)
        except OSError:
            continue
        raise AssertionError(f"pod {p['name']} still runs")
    assert "NotFound" in _kubectl(state, "get", "lws", "nccl-tune-t1").stderr
    assert launcher.stop(5.0).said == "LeaderWorkerSet nccl-tune-t1 deleted"  # gone already: nothing left either
