"""``[server.nodes]``: one server that spans several nodes, and each node's command.

``server.command`` is the head's (node rank 0). Each node's command is it with the node
placeholders filled (``{node_rank}``, ``{nnodes}``, ``{head}``, ``{dist_port}``); a command that
uses none of them gets its server kind's own node flags (:meth:`tuner.servers.ServerKind.node_args`:
vLLM's ``--nnodes/--node-rank/--master-addr/--master-port`` and ``--headless``, SGLang's
``--nnodes/--node-rank/--dist-init-addr``). ``launch``: ``local`` plays every node on this machine
(each its own process group; the simulator and the tests), ``srun`` runs one Slurm step across
the allocation's nodes (:mod:`tuner.launchers.multiprog`), ``lws`` applies a Kubernetes
LeaderWorkerSet per trial from the template ``manifest`` (:mod:`tuner.launchers.lws`; the
template's own commands run, the node flags are its: LWS fills ``$(LWS_*)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from tuner.inputs.locate import find_path
from tuner.inputs.lws import template_problem
from tuner.inputs.schema import FileModel, load_context, problem

__all__ = ["DEFAULT_DIST_PORT", "LOCAL_HEAD", "NODE_PLACEHOLDERS", "NodesConfig", "fill_node", "uses_node_placeholders"]

#: The head's rendezvous port unless ``dist_port`` says (chosen: clear of vLLM's 29500-ish
#: torch defaults and SGLang's 30000 HTTP port).
DEFAULT_DIST_PORT = 29555
#: ``{head}`` in local mode: every node is played on this machine.
LOCAL_HEAD = "127.0.0.1"
NODE_PLACEHOLDERS = ("node_rank", "nnodes", "head", "dist_port")


class NodesConfig(FileModel):
    """``[server.nodes]``: ``count`` nodes one server spans (1: one host, nothing changes);
    ``hosts`` their names (local: played names, default ``node0..``; srun: the allocation's
    nodes, first = head, default the allocation's own); ``launch`` ``local`` or ``srun``;
    ``dist_port`` the head's rendezvous port (vLLM ``--master-port``, SGLang's
    ``--dist-init-addr`` port)."""

    count: Annotated[int, Field(ge=1, le=1024, description="an integer in [1, 1024]")] = 1
    hosts: Annotated[tuple[Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")], ...] | None,
                     BeforeValidator(lambda raw: tuple(raw) if isinstance(raw, list) else raw), Field(
        description="a list of node names (letters, digits, '.', '-', '_', ':'), one per node, first = head")] = None
    launch: Annotated[Literal["local", "srun", "lws"], Field(description="local, srun or lws")] = "local"
    dist_port: Annotated[int, Field(ge=1, le=65535, description="an integer in [1, 65535]")] = DEFAULT_DIST_PORT
    manifest: Annotated[Path | None, Field(description=(
        "a LeaderWorkerSet template (YAML or JSON: apiVersion leaderworkerset.x-k8s.io/v1, kind "
        "LeaderWorkerSet), a path next to the experiment file or in the working directory"))] = None
    namespace: Annotated[str | None, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63,
                                           description="a Kubernetes namespace name (RFC 1123 label)")] = None
    container_port: Annotated[int | None, Field(ge=1, le=65535, description="an integer in [1, 65535]")] = None

    @field_validator("manifest", mode="before")
    @classmethod
    def _manifest(cls, raw: object, info: ValidationInfo) -> Path | None:
        if raw is None:
            return None
        accepted = cls.model_fields["manifest"].description or ""
        if not isinstance(raw, str) or not raw:
            raise problem(accepted)
        ctx = load_context(info)
        found = find_path(raw, None if str(ctx.file) == "(code)" else ctx.file)
        if found is None:
            raise problem(accepted, "file not found")
        return found[0]

    @model_validator(mode="after")
    def _hosts_match(self) -> NodesConfig:
        if self.hosts is not None and len(self.hosts) != self.count:
            raise problem(f"hosts with exactly count = {self.count} names (or no hosts)",
                          f"{len(self.hosts)} hosts for count = {self.count}")
        if self.hosts is not None and len(set(self.hosts)) != len(self.hosts):
            raise problem("distinct node names", "a host is named twice")
        if self.launch == "lws":
            if self.manifest is None:
                raise problem('launch = "lws" with manifest = "<a LeaderWorkerSet template>"', "no manifest given")
            why = template_problem(self.manifest, self.count)
            if why:
                raise problem("manifest = a LeaderWorkerSet template whose leaderWorkerTemplate.size is count "
                              f"({self.count}) or absent", f"{self.manifest}: {why}")
        elif self.manifest is not None:
            raise problem('manifest only with launch = "lws"', f"launch = {self.launch!r}")
        return self

    @property
    def spans(self) -> bool:
        """True when the server spans more than one node."""
        return self.count > 1

    def names(self, allocation: Sequence[str] = ()) -> list[str]:
        """The nodes' names, rank order: ``hosts``; else in srun mode ``allocation`` (the
        allocation's first ``count`` nodes); else ``node0..node{count-1}``."""
        if self.hosts is not None:
            return list(self.hosts)
        if self.launch == "srun" and allocation:
            return list(allocation[:self.count])
        return [f"node{r}" for r in range(self.count)]

    def head(self, names: Sequence[str]) -> str:
        """``{head}``: 127.0.0.1 in local mode, the first node's name in srun mode."""
        return LOCAL_HEAD if self.launch == "local" or not names else names[0]


def uses_node_placeholders(command: Sequence[str]) -> bool:
    """True when some argument of ``command`` names a node placeholder."""
    return any(f"{{{p}}}" in a for a in command for p in NODE_PLACEHOLDERS)


def fill_node(arg: str, values: Mapping[str, str]) -> str:
    """``arg`` with each node placeholder replaced by ``values[name]`` (names of
    :data:`NODE_PLACEHOLDERS`)."""
    for name in NODE_PLACEHOLDERS:
        arg = arg.replace(f"{{{name}}}", values[name])
    return arg
