"""Every launcher states one node count and one GPU count per node, on nodes of other than 8 GPUs.

A job whose scheduler allocates one number of nodes while torchrun waits for another hangs at
rendezvous. The golden cases run on 8-GPU nodes, where a slip computing Slurm's `--nodes` as
gpus // 8 gives the right number: these cases (4, 6 and 2 GPUs a node, several nodes) read every
place a format writes either count — scheduler directives, torchrun flags, Kubernetes replicas and
resources, SkyPilot's accelerators, the BUDGETDSL_* variables, the header — and compare them with
the plan's layout."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml
from export_specs import multi_node

from budgetdsl.exports import FORMATS, export
from budgetdsl.exports.spec import ExportError, LaunchSpec, launch_spec
from budgetdsl.solve.solver import solve
from tests.budgetdsl.solver_plans import make_plan

# (nodes, GPUs a node, tensor parallel): none of them 8 GPUs a node, all on several nodes
SHAPES = [(4, 4, 2), (3, 6, 2), (8, 2, 1), (2, 4, 4)]


def _spec(nodes: int, per_node: int, tp: int) -> LaunchSpec:
    return replace(multi_node(), nodes=nodes, gpus_per_node=per_node, tensor_parallel=tp, pipeline_parallel=1,
                   data_parallel=nodes * per_node // tp)


def _counts(fmt: str, text: str) -> tuple[list[int], list[int]]:
    """(every node count, every GPUs-per-node count) that `text` states."""
    nodes = [int(n) for n in re.findall(r"--nnodes=(\d+)|#SBATCH --nodes=(\d+)", text) for n in n if n]
    per = [int(g) for g in re.findall(r"--nproc-per-node=(\d+)|#SBATCH --gpus-per-node=(\d+)", text)
           for g in g if g]
    header = re.search(r"^# (\d+) nodes? x (\d+) GPUs?", text, re.M)
    if header:
        nodes.append(int(header[1]))
        per.append(int(header[2]))
    nodes += [int(v) for v in re.findall(r"BUDGETDSL_NODES=(\d+)", text)]
    per += [int(v) for v in re.findall(r"BUDGETDSL_GPUS_PER_NODE=(\d+)", text)]
    if fmt in ("kubeflow", "pytorchjob", "skypilot"):
        _walk(yaml.safe_load(text), nodes, per)
    if fmt == "pytorchjob":
        replicas = yaml.safe_load(text)["spec"]["pytorchReplicaSpecs"]
        assert replicas["Master"]["replicas"] == 1
        nodes.append(sum(r["replicas"] for r in replicas.values()))
    return nodes, per


def _walk(node, nodes: list[int], per: list[int]) -> None:
    """The structured counts of a YAML document: fields, env entries and GPU resource limits."""
    if isinstance(node, list):
        for item in node:
            _walk(item, nodes, per)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("numNodes", "num_nodes"):
            nodes.append(int(value))
        elif key in ("numProcPerNode", "nprocPerNode") or key.endswith("/gpu"):
            per.append(int(value))
        elif key == "accelerators":
            per.append(int(str(value).rsplit(":", 1)[1]))
        elif key == "envs" and isinstance(value, dict):  # SkyPilot's env mapping
            nodes += [int(value[k]) for k in ("BUDGETDSL_NODES",) if k in value]
            per += [int(value[k]) for k in ("BUDGETDSL_GPUS_PER_NODE",) if k in value]
        else:
            _walk(value, nodes, per)
    if node.get("name") == "BUDGETDSL_NODES":
        nodes.append(int(node["value"]))
    elif node.get("name") == "BUDGETDSL_GPUS_PER_NODE":
        per.append(int(node["value"]))


# the launchers, and what each must state: both counts in the scheduler's own terms
LAUNCHERS = ["slurm", "torchrun", "kubeflow", "pytorchjob", "skypilot"]


@pytest.mark.parametrize("fmt", LAUNCHERS)
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{g}-tp{t}" for n, g, t in SHAPES])
def test_every_count_a_launcher_states_is_the_layouts(shape, fmt) -> None:
    nodes, per_node, tp = shape
    text = export(_spec(nodes, per_node, tp), fmt)
    stated_nodes, stated_per = _counts(fmt, text)
    assert len(stated_nodes) >= 3 and len(stated_per) >= 3, (stated_nodes, stated_per)
    assert set(stated_nodes) == {nodes} and set(stated_per) == {per_node}, (stated_nodes, stated_per)
    if fmt == "slurm":  # one torchrun per node: one task per node
        assert "#SBATCH --ntasks-per-node=1" in text


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in LAUNCHERS])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{g}-tp{t}" for n, g, t in SHAPES])
def test_the_other_formats_state_the_layouts_counts(shape, fmt) -> None:
    nodes, per_node, tp = shape
    try:
        text = export(_spec(nodes, per_node, tp), fmt)
    except ExportError:  # hf refuses tensor parallelism (test_export_formats.test_refusals)
        assert fmt == "hf" and tp > 1
        return
    stated_nodes, stated_per = _counts(fmt, text)
    assert set(stated_nodes) <= {nodes} and set(stated_per) <= {per_node}, (stated_nodes, stated_per)


@pytest.mark.parametrize("per_node,gpus", [(4, 16), (6, 24), (2, 8)])
def test_a_plans_gpus_per_node_reaches_every_launcher(per_node, gpus) -> None:
    """From the plan through the solver: `hardware.gpus_per_node` sets the node count of every
    launcher (16 GPUs on 4-GPU nodes are 4 nodes, not 16 // 8 = 2)."""
    plan = make_plan(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                     hardware={"gpu": "H100-SXM5-80GB", "gpus": gpus, "gpus_per_node": per_node,
                               "tensor_parallel": 2, "zero": 1},
                     budget={"deadline": None, "flops": None, "gpu_hours": None},
                     target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6},
                     launch={"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["train.py"]})
    solution = solve(plan)
    assert solution.feasible and solution.gpus == gpus
    spec = launch_spec(plan, solution)
    assert (spec.nodes, spec.gpus_per_node) == (gpus // per_node, per_node)
    for fmt in LAUNCHERS:
        stated_nodes, stated_per = _counts(fmt, export(spec, fmt))
        assert set(stated_nodes) == {gpus // per_node} and set(stated_per) == {per_node}, fmt
