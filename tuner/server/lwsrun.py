"""The launch of a server as a Kubernetes LeaderWorkerSet (``[server.nodes] launch = "lws"``).

``server.command`` is the kubectl client to run (``["kubectl"]``, or with ``--context=NAME``);
the server's commands are the template's. Per launch: the trial's manifest is written beside the
head's log (``trial-0003.lws.yaml``: the set and nccl-tune's logging variables in every
container's env; never a secret, refused at config time) and applied; once every pod runs, the
launched process is ``kubectl port-forward pod/<name>-0 PORT:CONTAINER_PORT`` and the leader's
``kubectl logs -f`` writes into the same pipe (the head's log), each worker's into
``trial-0003.node<R>.log`` (a :class:`tuner.server.nodes.NodeSet` of ``kubectl logs -f``: its
end is the pod's). NCCL_DEBUG_FILE cannot be read from a pod: NCCL logs to the pod's stdout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tuner.inputs import ServerConfig, read_template
from tuner.launchers import lws_manifest, lws_name, manifest_path, pod_names, run_quiet, wait_running
from tuner.nccl import DEBUG_FILE_VAR
from tuner.redaction import is_secret

__all__ = ["LwsRun"]


@dataclass
class LwsRun:
    """One launch's LWS: ``kubectl`` (the client argv), ``name``, ``pods`` (rank order),
    ``namespace``, ``manifest`` (the trial's file), ``template`` (None: ``problem`` says why)."""

    kubectl: list[str]
    name: str
    pods: list[str]
    namespace: str | None
    manifest: Path
    container_port: int
    template: dict[str, Any] | None
    problem: str = ""

    @classmethod
    def of(cls, server: ServerConfig, head_log: Path, token: str) -> LwsRun:
        """The LWS of the launch with short id ``token`` whose head log is ``head_log``."""
        nodes = server.nodes
        assert nodes.manifest is not None  # required with launch = "lws" (NodesConfig)
        name = lws_name(token)
        template, problem = None, ""
        try:
            template = read_template(nodes.manifest)
        except (OSError, ValueError) as exc:
            problem = f"server.nodes.manifest {nodes.manifest}: {getattr(exc, 'strerror', None) or exc}"
        return cls(list(server.command), name, pod_names(name, nodes.count), nodes.namespace,
                   manifest_path(head_log), nodes.container_port or server.port, template, problem)

    def _ns(self) -> list[str]:
        return [f"--namespace={self.namespace}"] if self.namespace else []

    def forward_argv(self, port: int) -> list[str]:
        """``kubectl port-forward pod/<name>-0 PORT:CONTAINER_PORT``: the launched process."""
        return [*self.kubectl, "port-forward", *self._ns(), f"pod/{self.pods[0]}", f"{port}:{self.container_port}"]

    def log_argv(self, rank: int) -> list[str]:
        """``kubectl logs -f pod/<pod of rank>``."""
        return [*self.kubectl, "logs", "-f", *self._ns(), f"pod/{self.pods[rank]}"]

    def apply(self, env: dict[str, str], marker: str, ready_timeout_s: float) -> tuple[str, str]:
        """Write the manifest with ``env`` (NCCL_DEBUG_FILE left out), apply it and wait for
        every pod to run: ``(what kubectl said, problem)``, problem empty when it runs."""
        if self.template is None:
            return "", self.problem
        secret = sorted(k for k in env if is_secret(k))
        if secret:
            return "", (f"{secret[0]} would be written into {self.manifest}: put it in a Kubernetes Secret and "
                        "reference it from the template's env")
        env = {k: v for k, v in env.items() if k != DEBUG_FILE_VAR}
        doc = lws_manifest(self.template, self.name, len(self.pods), env, marker, self.namespace)
        try:
            self.manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
        except OSError as exc:
            return "", f"could not write {self.manifest}: {exc.strerror or exc}"
        code, out = run_quiet([*self.kubectl, "apply", "-f", str(self.manifest)], 60.0)
        if code != 0:
            return out, f"kubectl apply -f {self.manifest}: {out.splitlines()[-1] if out else f'exit {code}'}"
        return out, wait_running(self.kubectl, self.pods, self.namespace, ready_timeout_s)
