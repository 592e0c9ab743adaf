"""A cluster sweep's tasks as Kubernetes jobs: one Kubeflow TrainJob or PyTorchJob per (batch,
seed), written by the project's export code; each pod runs torchrun on the task
(`python -m budgetdsl.calibrate.cluster DIR TASK`), one process per GPU. No cluster is reached from
here: the manifests are files to apply."""

from __future__ import annotations

from pathlib import Path

from budgetdsl.calibrate.cluster import SlurmOptions, config_from_dict, write_manifest

from budgetdsl.io.atomic_write import write_file


def emit_manifests(folder: Path, manifest: dict, kind: str, plan=None) -> list[Path]:
    """One Kubeflow TrainJob (`kind` kubeflow) or PyTorchJob (pytorchjob) per task, written by the
    project's export code (budgetdsl.exports) into `<folder>/<kind>/<task>.yaml`. Each of the task's
    `--nodes-per-task` pods runs `torchrun --nnodes=M --nproc-per-node=G -m budgetdsl.calibrate.cluster
    FOLDER TASK`, one process per GPU (one on a CPU pod), holding `--gpus-per-task` GPUs; every
    pod must see the sweep folder at the same path, and the tasks after the pilot wait for its
    result. The sweep is recorded as executor `kubernetes`, so `--collect` asks no Slurm."""
    from budgetdsl.exports import kubeflow, pytorchjob
    from budgetdsl.exports._text import dump_yaml, hash_comments
    from budgetdsl.exports.spec import DEFAULT_IMAGE, DEFAULT_RUNTIME, LaunchSpec
    from budgetdsl.plan.launch import Launch

    cfg = config_from_dict(manifest["config"])
    opts = SlurmOptions(**manifest["slurm"])
    launch = plan.launch if plan is not None and plan.launch is not None else None
    tpe = int(manifest.get("tokens_per_example") or 1)
    outdir = folder / kind
    outdir.mkdir(exist_ok=True)
    paths = []
    manifest["executor"] = "kubernetes"
    write_manifest(folder, manifest)
    for t in manifest["tasks"]:
        batch, key = t["batch"], t["key"]
        micro = cfg.micro_for(batch)
        spec = LaunchSpec(
            name=f"{folder.name}-{key}", nodes=opts.nodes_per_task, gpus_per_node=opts.processes_per_node,
            tensor_parallel=1, pipeline_parallel=1, data_parallel=opts.processes, micro_batch=micro,
            grad_accum=batch // micro // opts.processes, seq_len=tpe,
            steps=cfg.pilot_steps if t["pilot"] else cfg.steps_limit, lr=cfg.lr_at(batch),
            warmup_steps=cfg.warmup, time_limit_s=opts.time_min * 60, zero_stage=0,
            launch=Launch(image=(launch.image if launch and launch.image else DEFAULT_IMAGE),
                          command=["-m", "budgetdsl.calibrate.cluster", str(folder), key],
                          namespace=launch.namespace if launch else None,
                          runtime=(launch.runtime if launch and launch.runtime else DEFAULT_RUNTIME),
                          gpu_resource=launch.gpu_resource if launch else None),
            gpu_resource=(launch.gpu_resource if launch and launch.gpu_resource else "nvidia.com/gpu"))
        gpus = opts.gpus_per_task
        if kind == "kubeflow":
            doc = kubeflow.manifest(spec)
            trainer = doc["spec"]["trainer"]
            if gpus:
                trainer["resourcesPerNode"] = {"limits": {spec.gpu_resource: gpus}}
            else:
                trainer["resourcesPerNode"] = {"limits": {"cpu": opts.cpus_per_task}}
        else:
            doc = pytorchjob.manifest(spec)
            for replica in doc["spec"]["pytorchReplicaSpecs"].values():  # Master and Workers: one pod per node
                container = replica["template"]["spec"]["containers"][0]
                container["resources"] = {"limits": {spec.gpu_resource: gpus} if gpus else {"cpu": opts.cpus_per_task}}
        for env in _env_lists(doc):  # the pod's own GPU count, not the one process's
            for var in env:
                if var["name"] == "BUDGETDSL_GPUS_PER_NODE":
                    var["value"] = str(gpus)
        head = [f"budgetdsl calibrate sweep --emit {kind}: task {key} (batch {batch}, seed {t['seed']})"
                + (", the pilot that sets the target loss" if t["pilot"] else ""),
                f"{opts.nodes_per_task} node(s) x {opts.processes_per_node} process(es) (one per GPU), "
                f"{gpus or 'no'} GPU(s) per node; results in {folder}/tasks/{key}/result.json",
                f"collect: budgetdsl calibrate sweep --collect {folder}"]
        path = outdir / f"{key}.yaml"
        write_file(path, hash_comments(head) + dump_yaml(doc))
        paths.append(path)
    return paths


def _env_lists(doc: dict) -> list[list[dict]]:
    if doc["kind"] == "TrainJob":
        return [doc["spec"]["trainer"]["env"]]
    return [c["env"] for r in doc["spec"]["pytorchReplicaSpecs"].values() for c in r["template"]["spec"]["containers"]]
