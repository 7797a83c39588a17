"""The Kubernetes examples (examples/k8s/) against the JSON schemas of the versions they name:
the Indexed Job of workers against Kubernetes v1.31's ``batch/v1`` Job, the LeaderWorkerSet
against LWS v0.7.0's CRD (tests/fixtures/schemas/README.md: sources and trimming). Strict, as
``kubectl apply`` validates by default: an unknown or misspelt field is refused, so each schema
is also shown to refuse one (a check that cannot fail proves nothing)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tuner.cli.common import STORAGE_ENV

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "tests" / "fixtures" / "schemas"
JOB = ROOT / "examples" / "k8s" / "workers-job.yaml"
LWS = ROOT / "examples" / "k8s" / "server-lws.yaml"


def _strict(schema: Any) -> Any:
    """A CRD's structural schema as strict field validation reads it: an object that lists its
    properties and says nothing of others takes no others."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _validator(name: str, strict: bool = False) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    schema = _strict(schema) if strict else schema
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def _job_validator() -> jsonschema.protocols.Validator:
    return _validator("job-batch-v1-k8s-v1.31.0.json")


def _lws_validator() -> jsonschema.protocols.Validator:
    return _validator("leaderworkerset-v1-lws-v0.7.0.json", strict=True)


def _one(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path.name}: {len(docs)} documents"
    return docs[0]


def _errors(validator: jsonschema.protocols.Validator, doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_workers_job_is_a_valid_indexed_job_of_one_pod_per_gpu_host():
    job = _one(JOB)
    assert not _errors(_job_validator(), job)
    spec = job["spec"]
    assert (job["apiVersion"], job["kind"], spec["completionMode"]) == ("batch/v1", "Job", "Indexed")
    assert spec["completions"] == spec["parallelism"] >= 1
    pod = spec["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    (container,) = pod["containers"]
    assert container["command"] == ["nccl-tune"] and container["args"][0] == "sweep"


def test_the_workers_job_holds_no_storage_url_only_a_secret_reference():
    text = JOB.read_text()
    assert not re.search(r"postgres(ql)?(\+\w+)?://", text)
    (container,) = _one(JOB)["spec"]["template"]["spec"]["containers"]
    assert "--storage" not in container["args"]  # on no command line: `ps` would show it
    env = {e["name"]: e for e in container["env"]}
    assert STORAGE_ENV in env  # --storage's default (tuner/cli/common.py)
    assert "secretKeyRef" in env[STORAGE_ENV]["valueFrom"] and "value" not in env[STORAGE_ENV]


@pytest.mark.parametrize("break_it", [
    lambda j: j["spec"].update(completions="2"),  # completionMode has no enum in the OpenAPI: a type is what it checks
    lambda j: j["spec"].update(complettions=2),
    lambda j: j["spec"]["template"]["spec"]["containers"][0].update(args="sweep"),
    lambda j: j["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"].pop("key"),
    lambda j: j["spec"].pop("template"),
])
def test_the_job_schema_refuses_a_broken_job(break_it):
    job = copy.deepcopy(_one(JOB))
    break_it(job)
    assert _errors(_job_validator(), job)


def _lws_container(lws: dict[str, Any], template: str) -> dict[str, Any]:
    (container,) = lws["spec"]["leaderWorkerTemplate"][template]["spec"]["containers"]
    return container


def _flags(args: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, word in enumerate(args):
        if word.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[word] = nxt if nxt is not None and not nxt.startswith("--") else None
    return out


def test_the_server_lws_is_valid_and_lays_one_vllm_server_across_its_nodes():
    lws = _one(LWS)
    assert not _errors(_lws_validator(), lws)
    assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["size"] >= 2
    leader = _flags(_lws_container(lws, "leaderTemplate")["args"])
    worker = _flags(_lws_container(lws, "workerTemplate")["args"])
    assert leader["--nnodes"] == worker["--nnodes"] == "$(LWS_GROUP_SIZE)"
    assert leader["--master-addr"] == worker["--master-addr"] == "$(LWS_LEADER_ADDRESS)"
    assert leader["--master-port"] == worker["--master-port"]
    assert (leader["--node-rank"], worker["--node-rank"]) == ("0", "$(LWS_WORKER_INDEX)")
    assert "--headless" in worker and "--headless" not in leader
    assert "--port" in leader and "--port" not in worker  # only the head serves HTTP
    envs = [{e["name"]: e.get("value") for e in _lws_container(lws, t).get("env", [])}
            for t in ("leaderTemplate", "workerTemplate")]
    assert envs[0] == envs[1], "every node must run the same NCCL set"


@pytest.mark.parametrize("break_it", [
    lambda w: w["spec"]["leaderWorkerTemplate"].update(size="two"),
    lambda w: w["spec"]["leaderWorkerTemplate"].update(restartPolicy="Always"),
    lambda w: w["spec"]["leaderWorkerTemplate"].update(workerTemplates=w["spec"]["leaderWorkerTemplate"]["workerTemplate"]),
    lambda w: w["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].update(argz=[]),
    lambda w: w["spec"]["leaderWorkerTemplate"].pop("workerTemplate"),
])
def test_the_lws_schema_refuses_a_broken_lws(break_it):
    lws = copy.deepcopy(_one(LWS))
    break_it(lws)
    assert _errors(_lws_validator(), lws)
