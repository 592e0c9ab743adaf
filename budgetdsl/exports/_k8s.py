"""Pieces the two Kubeflow manifests share: metadata and the container environment."""

from __future__ import annotations

from budgetdsl.exports._text import dns1035
from budgetdsl.exports.spec import LaunchSpec

PLAN_ANNOTATION = "budgetdsl.dev/plan"


def metadata(spec: LaunchSpec) -> dict:
    meta: dict = {"name": dns1035(spec.name)}
    if spec.launch.namespace:
        meta["namespace"] = spec.launch.namespace
    meta["labels"] = {"app.kubernetes.io/managed-by": "budgetdsl"}
    meta["annotations"] = {PLAN_ANNOTATION: spec.name}  # the name as written, a YAML string
    return meta


def env(spec: LaunchSpec) -> list[dict]:
    return [{"name": name, "value": value} for name, value in spec.env()]
