"""`pytorchjob`: a Kubeflow Training Operator v1 `PyTorchJob` (kubeflow.org/v1, operator v1.9).

One Master and N-1 Workers, one pod per node, each running torchrun with the plan's integers; the
operator sets PET_NODE_RANK and PET_MASTER_ADDR/PORT, which torchrun reads for the rank and the
rendezvous. The operator's admission webhook wants: a DNS-1035 name, Master replicas exactly 1,
Worker replicas at least 1, and in every replica a container named `pytorch` with an image;
`nprocPerNode` is a string in this API. `runPolicy.activeDeadlineSeconds` carries the deadline.
Checked in the tests against the CRD's openAPIV3Schema made strict plus those webhook rules.
"""

from __future__ import annotations

from budgetdsl.exports import _k8s
from budgetdsl.exports._text import dump_yaml, hash_comments, header, torchrun_flags
from budgetdsl.exports.spec import LaunchSpec

USES = frozenset({"launch.image", "launch.command", "launch.namespace", "budget.deadline",
                  "optimizer.lr"})
CONTAINER = "pytorch"  # the operator's default container name: the webhook requires it


def _replica(spec: LaunchSpec, replicas: int) -> dict:
    container = {
        "name": CONTAINER,
        "image": spec.image,
        **_k8s.container_command(spec, ["torchrun", *torchrun_flags(spec)]),
        "env": _k8s.env(spec),
        "resources": {"limits": {spec.gpu_resource: spec.gpus_per_node}},
    }
    return {"replicas": replicas, "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [container]}}}


def manifest(spec: LaunchSpec) -> dict:
    replicas = {"Master": _replica(spec, 1)}
    if spec.nodes > 1:
        replicas["Worker"] = _replica(spec, spec.nodes - 1)
    job_spec: dict = {"nprocPerNode": str(spec.gpus_per_node)}
    if spec.time_limit_s is not None:
        job_spec["runPolicy"] = {"activeDeadlineSeconds": spec.time_limit_s}
    job_spec["pytorchReplicaSpecs"] = replicas
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _k8s.metadata(spec),
            "spec": job_spec}


def render(spec: LaunchSpec) -> str:
    return hash_comments(header(spec, "pytorchjob", USES)) + dump_yaml(manifest(spec))
