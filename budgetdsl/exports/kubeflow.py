"""`kubeflow`: a Kubeflow Trainer v2 `TrainJob` (trainer.kubeflow.org/v1alpha1, Trainer v2.3).

The job references a ClusterTrainingRuntime (`launch.runtime`, default `torch-distributed`) whose
torch plugin sets PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR/PORT, ...; the container runs
`torchrun --nnodes=N --nproc-per-node=G <command>` with the same integers, so the job reads the
same however the runtime is configured. `activeDeadlineSeconds` carries the deadline; the name is a
DNS-1035 label (the CRD's CEL rule). Checked against the CRD's openAPIV3Schema made strict.
"""

from __future__ import annotations

from budgetdsl.exports import _k8s
from budgetdsl.exports._text import dump_yaml, hash_comments, header, torchrun_flags
from budgetdsl.exports.spec import LaunchSpec

USES = frozenset({"launch.image", "launch.command", "launch.namespace", "launch.runtime",
                  "budget.deadline", "optimizer.lr"})


def manifest(spec: LaunchSpec) -> dict:
    trainer = {
        "image": spec.image,
        **_k8s.container_command(spec, ["torchrun", *torchrun_flags(spec)]),
        "env": _k8s.env(spec),
        "numNodes": spec.nodes,
        "numProcPerNode": spec.gpus_per_node,
        "resourcesPerNode": {"limits": {spec.gpu_resource: spec.gpus_per_node}},
    }
    job_spec: dict = {"runtimeRef": {"name": spec.launch.runtime, "apiGroup": "trainer.kubeflow.org",
                                     "kind": "ClusterTrainingRuntime"}}
    if spec.time_limit_s is not None:
        job_spec["activeDeadlineSeconds"] = spec.time_limit_s
    job_spec["trainer"] = trainer
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": _k8s.metadata(spec), "spec": job_spec}


def render(spec: LaunchSpec) -> str:
    return hash_comments(header(spec, "kubeflow", USES)) + dump_yaml(manifest(spec))
