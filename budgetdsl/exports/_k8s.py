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


def literal(text: str) -> str:
    """`text` as a container's `command`, `args` or `env[].value` must hold it to reach the program
    unchanged: Kubernetes replaces `$(NAME)` there by the variable NAME and `$$` by `$` (the
    Container API reference; k8s.io/kubernetes third_party/forked/golang/expansion), so every `$`
    is doubled. Plan text is data: `$(HOME)` in a plan's argument stays `$(HOME)`."""
    return text.replace("$", "$$")


def container_command(spec: LaunchSpec, launcher: list[str]) -> dict:
    """`command` (the launcher, then the program) and `args` of the container, literal."""
    words = {"command": [*launcher, literal(spec.command[0])],
             "args": [literal(a) for a in spec.command[1:]]}
    if not words["args"]:
        del words["args"]
    return words


def env(spec: LaunchSpec) -> list[dict]:
    return [{"name": name, "value": literal(value)} for name, value in spec.env()]
