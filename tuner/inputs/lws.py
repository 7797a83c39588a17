"""A LeaderWorkerSet template (``[server.nodes] manifest``, ``launch = "lws"``): read and checked.

The object is kubernetes-sigs/lws v0.7.0's ``LeaderWorkerSet`` (api/leaderworkerset/v1/
leaderworkerset_types.go): ``apiVersion: leaderworkerset.x-k8s.io/v1``, its pods laid out by
``spec.leaderWorkerTemplate`` (``size``: pods per group, default 1; ``leaderTemplate``, optional,
else ``workerTemplate`` for the leader too). YAML (one document) or JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["LWS_API", "read_template", "template_problem"]

#: The LWS object's apiVersion and kind (lws v0.7.0, config/crd/bases).
LWS_API = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def read_template(path: Path) -> dict[str, Any]:
    """The one object of ``path`` (YAML or JSON). Raises OSError (unreadable), ValueError
    (not YAML, not one mapping)."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise ValueError(f"not YAML: {str(exc).splitlines()[0]}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValueError(f"{len(docs)} YAML documents, not one LeaderWorkerSet")
    return docs[0]


def template_problem(path: Path, count: int) -> str:
    """Why ``path`` is no LWS template for ``count`` nodes (empty: it is): unreadable, another
    kind, no workerTemplate's containers, a ``size`` other than ``count``."""
    try:
        doc = read_template(path)
    except (OSError, ValueError) as exc:
        return str(getattr(exc, "strerror", None) or exc)
    if (doc.get("apiVersion"), doc.get("kind")) != LWS_API:
        return f"apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r}: not a LeaderWorkerSet"
    spec = doc.get("spec")
    lwt = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    if not isinstance(lwt, dict):
        return "no spec.leaderWorkerTemplate"
    for key in ("workerTemplate", "leaderTemplate"):
        tmpl = lwt.get(key)
        if tmpl is None and key == "leaderTemplate":
            continue
        containers = (tmpl or {}).get("spec", {}).get("containers") if isinstance(tmpl, dict) else None
        if not isinstance(containers, list) or not containers:
            return f"spec.leaderWorkerTemplate.{key} has no spec.containers"
    size = lwt.get("size")
    if size is not None and size != count:
        return f"spec.leaderWorkerTemplate.size = {size} but server.nodes.count = {count}"
    return ""
