"""Which GPU counts can launch a layout, and how a layout places its ranks: the one home of these
rules (the plan validator, the solver's GPU ranges and memory remedies, the cost model and the
exports all ask here).

A layout is tensor-parallel degree t, pipeline-parallel degree p and data-parallel degree
dp = G/(t·p). A GPU count G launches it when
- G splits into whole t·p model replicas (G mod t·p = 0), and
- the job fills whole nodes: G ≤ gpus_per_node (one partly used node), or G mod gpus_per_node = 0.

Rank order follows Megatron-LM's (Narayanan et al. 2021, section 3.3; `parallel_state`): tensor
ranks innermost (adjacent GPUs, so t ≤ gpus_per_node stays on NVLink), then data-parallel ranks,
then pipeline stages outermost. So a GPU's data-parallel peers in its own node number
min(dp, gpus_per_node / t), and pipeline neighbours are t·dp ranks apart.

Pipeline stages may be uneven (Megatron-Core's `--decoder-first/last-pipeline-num-layers`,
Llama 3 405B's 126 layers on 16 stages; BLOOM's 70 layers on 12): `stage_layers` balances the
layers over the stages with the LM head's work counted on the last one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def launch_problem(gpus: int, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                   gpus_per_node: int = 8) -> str | None:
    """Why `gpus` GPUs cannot launch the layout, or None when they can."""
    split = tensor_parallel * pipeline_parallel
    if gpus < 1:
        return f"{gpus} GPUs: need at least one"
    if gpus % split:
        return (f"{gpus} GPUs cannot be split into tensor_parallel × pipeline_parallel = {split} "
                "groups")
    if gpus > gpus_per_node and gpus % gpus_per_node:
        return f"{gpus} GPUs do not fill whole nodes of {gpus_per_node}"
    return None


def launchable(gpus: int, tensor_parallel: int = 1, pipeline_parallel: int = 1,
               gpus_per_node: int = 8) -> bool:
    return launch_problem(gpus, tensor_parallel, pipeline_parallel, gpus_per_node) is None


def launchable_counts(counts: Iterable[int], tensor_parallel: int = 1, pipeline_parallel: int = 1,
                      gpus_per_node: int = 8) -> list[int]:
    """The counts of `counts` that launch the layout."""
    return [g for g in counts if launchable(g, tensor_parallel, pipeline_parallel, gpus_per_node)]


def nodes_of(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs used per node) of a launchable count: one partly used node, or whole nodes."""
    if gpus <= gpus_per_node:
        return 1, gpus
    return gpus // gpus_per_node, gpus_per_node


def data_parallel_peers_in_node(data_parallel: int, tensor_parallel: int, gpus_per_node: int) -> int:
    """How many of a GPU's data-parallel group share its node (Megatron's rank order: tensor
    innermost, then data): min(dp, gpus_per_node / t), at least 1."""
    if tensor_parallel >= gpus_per_node:
        return 1
    return max(1, min(data_parallel, gpus_per_node // tensor_parallel))


def stage_layers(layers: int, stages: int, last_extra: float = 0.0) -> tuple[int, ...]:
    """Transformer layers per pipeline stage, first to last, that minimise the slowest stage when
    the last stage also carries `last_extra` layers' worth of work (the LM head and the loss).

    Uneven splits are allowed (L mod p ≠ 0). The earliest stages give up layers first, as the
    first stage holds p micro-batches of activations under 1F1B and the most memory. Exact: the
    smallest capacity T with Σ_i ⌊T − extra_i⌋ ≥ L over the O(L) candidate capacities."""
    if stages <= 1:
        return (layers,)
    if layers < stages:
        raise ValueError(f"{layers} layers cannot fill {stages} pipeline stages")
    extras = [0.0] * (stages - 1) + [max(0.0, last_extra)]

    def fits(cap: float) -> bool:  # monotone in cap, so each candidate family is bisected:
        per = [max(0, math.floor(cap - e + 1e-9)) for e in extras]  # a scan of the O(L) candidates
        return sum(per) >= layers and min(per) >= 1               # was O(L·p) per call

    best: float | None = None
    for e0 in sorted(set(extras)):  # the candidates k + e0, k = 0..L
        lo, hi = 0, layers
        if not fits(hi + e0):
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if fits(mid + e0) else (mid + 1, hi)
        if best is None or lo + e0 < best:
            best = lo + e0
    for cap in [] if best is None else [best]:
        per = [max(0, math.floor(cap - e + 1e-9)) for e in extras]
        if sum(per) >= layers and min(per) >= 1:
            over = sum(per) - layers
            while over > 0:  # trim the surplus one layer a stage, front stages first
                for i in range(stages):
                    if over > 0 and per[i] > 1:
                        per[i] -= 1
                        over -= 1
            return tuple(per)
    return tuple([layers // stages + (1 if i < layers % stages else 0) for i in range(stages)])
