"""A server spanning nodes as a Kubernetes LeaderWorkerSet per trial (``[server.nodes] launch = "lws"``).

Per launch nccl-tune writes the trial's manifest (:func:`lws_manifest`): the user's template
(:func:`tuner.inputs.lws.read_template`) named ``nccl-tune-<token>``, ``replicas: 1``, ``size`` the
node count, the launch's variables appended to the ``env`` of every container of the leader and
worker templates, and the launch's marker as a pod label. ``kubectl apply -f`` starts it; LWS
names the pods ``<name>-0`` (the leader, group 0) and ``<name>-0-<i>`` (worker i of group 0, the
worker StatefulSet named after the leader pod: kubernetes-sigs/lws v0.7.0,
pkg/controllers/pod_controller.go, ``constructWorkerStatefulSetApplyConfiguration``). The
launched process is ``kubectl port-forward pod/<name>-0 PORT:CONTAINER_PORT`` (readiness and the
probe go to 127.0.0.1:PORT); each pod's log is followed with ``kubectl logs -f``.

Teardown: ``kubectl delete lws <name> --wait=true --timeout=...`` (bounded; the pods go with
their owner), then ``kubectl get lws <name>`` must say NotFound. :meth:`LwsLauncher.handle` lets
a later runner delete a dead runner's LWS.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from tuner.launchers.base import Launcher, Stopped, Wrappers, run_quiet

__all__ = ["MARKER_LABEL", "LwsLauncher", "is_port_forward", "lws_manifest", "lws_name", "manifest_path", "pod_names",
           "wait_running"]

#: The pod label holding the launch's marker (nccl-tune's own key).
MARKER_LABEL = "nccl-tune/launch"
#: How long a deleted LWS may take to go (s), beyond the grace.
GONE_WAIT_S = 60.0
_LEFTOVER = "nccl-tune-leftover"


def lws_name(token: str) -> str:
    """The LWS of the launch whose short id is ``token``: ``nccl-tune-<token>`` (an RFC 1123 name)."""
    return f"nccl-tune-{token.lower()}"


def pod_names(name: str, count: int) -> list[str]:
    """The pods of group 0 of LWS ``name`` with ``count`` pods, rank order: ``name-0``, ``name-0-1``..."""
    return [f"{name}-0"] + [f"{name}-0-{i}" for i in range(1, count)]


def lws_manifest(template: Mapping[str, Any], name: str, count: int, env: Mapping[str, str], marker: str,
                 namespace: str | None) -> dict[str, Any]:
    """The trial's LWS: ``template`` with ``metadata.name`` ``name`` (labels and annotations
    kept; no uid or resourceVersion), ``namespace`` if given, one replica of ``count`` pods, and
    ``env`` appended to every container of both templates (a name the container sets already is
    replaced: every node runs the same set), ``marker`` as the pod label :data:`MARKER_LABEL`."""
    doc: dict[str, Any] = copy.deepcopy(dict(template))
    meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k in ("labels", "annotations", "namespace")}
    meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    doc["metadata"] = meta
    doc.pop("status", None)
    spec = doc["spec"]
    spec["replicas"] = 1
    lwt = spec["leaderWorkerTemplate"]
    lwt["size"] = count
    for key in ("leaderTemplate", "workerTemplate"):
        tmpl = lwt.get(key)
        if tmpl is None:
            continue
        labels = tmpl.setdefault("metadata", {}).setdefault("labels", {})
        labels[MARKER_LABEL] = marker
        for container in tmpl["spec"]["containers"]:
            kept = [e for e in container.get("env") or [] if e.get("name") not in env]
            container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]
    return doc


class LwsLauncher(Launcher):
    """``kubectl port-forward pod/<name>-0 ...`` in front of a LeaderWorkerSet nccl-tune applied;
    :meth:`stop` deletes the LWS. ``argv``: the port-forward (or a :meth:`handle`)."""

    name = "a Kubernetes LeaderWorkerSet (kubectl)"
    listener_outside = None  # the port-forward nccl-tune launched holds the listener

    def __init__(self, argv: Sequence[str], wrappers: Wrappers | None = None) -> None:
        super().__init__(argv, wrappers)
        self.kubectl = list(self.argv[:self.start + 1])
        words = self.argv[self.start + 1:]
        self.namespace = next((w.partition("=")[2] for w in words if w.startswith("--namespace=")), "")
        pod = next((w for w in words if w.startswith("pod/")), "pod/")
        self.lws = pod[len("pod/"):].removesuffix("-0")
        self.kubectl += [w for w in words if w.startswith("--context=")]

    def _ns(self) -> list[str]:
        return [f"--namespace={self.namespace}"] if self.namespace else []

    def prepare(self, forward: Collection[str], mounts: Collection[str] = (), token: str = "") -> list[str]:
        return list(self.argv)  # the set is in the manifest, not the client's environment

    def plan(self, fixed: Collection[str], varied: Collection[str] = ()) -> str | None:
        return ("the server is a LeaderWorkerSet applied per trial (kubectl apply -f <trial>.lws.yaml): the set and "
                "nccl-tune's logging variables are written into every container's env, never a secret; readiness "
                "and the probe go through kubectl port-forward to the leader pod; teardown deletes the LWS")

    def handle(self) -> list[str]:
        if not self.lws:
            return []
        return [*self.kubectl, "port-forward", *self._ns(), f"pod/{self.lws}-0", _LEFTOVER]

    def host_path(self, path: str) -> tuple[str | None, str]:
        return None, f"{path} is the pods', on their nodes: not checked here"

    def stop(self, grace_s: float) -> Stopped:
        if not self.lws:
            return Stopped()
        what = f"LeaderWorkerSet {self.lws}"
        wait = grace_s + GONE_WAIT_S
        code, out = run_quiet([*self.kubectl, "delete", "lws", self.lws, *self._ns(), "--ignore-not-found",
                               "--wait=true", f"--timeout={wait:.0f}s"], wait + 15.0)
        if code != 0:
            return Stopped(f"{what}: kubectl delete failed ({out.splitlines()[-1] if out else f'exit {code}'})",
                           (f"{what} (kubectl delete lws {self.lws})",))
        code, out = run_quiet([*self.kubectl, "get", "lws", self.lws, *self._ns()], 15.0)
        if code == 0:
            return Stopped(f"{what} still listed after kubectl delete", (f"{what} still listed",))
        return Stopped(f"{what} deleted")


def wait_running(kubectl: Sequence[str], pods: Sequence[str], namespace: str | None, timeout_s: float,
                 poll_s: float = 0.5) -> str:
    """Wait until every pod of ``pods`` is Running (``kubectl get pod NAME -o
    jsonpath={.status.phase}``: ``kubectl logs -f`` and ``port-forward`` need a running pod);
    empty when they are, else why not (a pod Failed, or not Running after ``timeout_s`` s)."""
    ns = [f"--namespace={namespace}"] if namespace else []
    deadline = time.monotonic() + timeout_s
    waiting: dict[str, str] = {}
    while True:
        for pod in pods:
            if waiting.get(pod) == "Running":
                continue
            code, out = run_quiet([*kubectl, "get", "pod", pod, *ns, "-o", "jsonpath={.status.phase}"], 15.0)
            waiting[pod] = out.strip() if code == 0 else "not created yet"
            if waiting[pod] in ("Failed", "Succeeded"):
                return f"pod {pod} is {waiting[pod]} before the server served"
        if all(v == "Running" for v in waiting.values()):
            return ""
        if time.monotonic() >= deadline:
            late = ", ".join(f"{p}: {v}" for p, v in waiting.items() if v != "Running")
            return f"pods not running after {timeout_s:.0f} s ({late})"
        time.sleep(poll_s)


def manifest_path(head_log: Path) -> Path:
    """The trial's manifest beside its log: ``logs/trial-0003.log`` -> ``logs/trial-0003.lws.yaml``."""
    return head_log.with_name(f"{head_log.stem}.lws.yaml")


def is_port_forward(argv: Sequence[str], start: int) -> bool:
    """True when ``argv[start]`` is kubectl and it forwards a port (``kubectl [--context=X] port-forward``)."""
    return (start < len(argv) and Path(argv[start]).name == "kubectl"
            and "port-forward" in argv[start + 1:start + 3])
