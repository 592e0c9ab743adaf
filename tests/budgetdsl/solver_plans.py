"""Plans for the solver's tests, built in memory (no YAML): a base dict and hypothesis strategies.

Values are in base units (seconds, bytes, FLOP), as the loader hands them to the models.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from budgetdsl.plan.model import Plan, Recompute

DAY = 86400.0
GiB = 2.0**30

BASE: dict[str, Any] = {
    "name": "test",
    "model": {"params": 6.74e9, "layers": 32, "d_model": 4096, "heads": 32, "seq_len": 4096},
    "hardware": {"gpu": "A100-SXM4-80GB", "gpus": 1024, "mfu": 0.42, "overlap": 0.8, "zero": 1,
                 "network": 25e9},
    "budget": {"deadline": 21 * DAY, "flops": 1.2e23, "gpu_hours": 250e3},
    "target": {"tokens": 2e12, "at_batch": 4194304.0},
    "noise": {"b_crit": 3e6},
}


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        elif v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


# The layout keys a plan may leave to the search, each as its field holds `auto`.
SEARCHED: dict[str, Any] = {"tensor_parallel": "auto", "pipeline_parallel": "auto", "zero": "auto",
                            "recompute": Recompute.auto}


def searched(plan: Plan) -> Plan:
    """`plan` with tensor and pipeline parallelism, ZeRO and recomputation left to the search."""
    return plan.model_copy(update={"hardware": plan.hardware.model_copy(update=SEARCHED)})


def make_plan(**sections: Any) -> Plan:
    """BASE with sections deep-merged over it (a None value deletes the key)."""
    return Plan.model_validate(merge(BASE, sections))


def drop(plan_dict: dict[str, Any], *paths: str) -> dict[str, Any]:
    out = copy.deepcopy(plan_dict)
    for path in paths:
        *head, last = path.split(".")
        node = out
        for k in head:
            node = node[k]
        node.pop(last, None)
    return out


@st.composite
def plans(draw: st.DrawFn, objective: str | None = None, limits: bool = True, tight: bool = False) -> Plan:
    """Generated plans: model sizes 20M–200B, 1–4096 GPUs, budgets around what the run needs;
    `tight`: always a deadline and a FLOP budget, often too small (infeasible plans)."""
    layers = draw(st.sampled_from([12, 24, 32, 48, 64, 80]))
    heads = draw(st.sampled_from([8, 16, 32, 64]))
    d_model = heads * draw(st.sampled_from([64, 96, 128]))
    params = 12.0 * layers * d_model**2 * draw(st.floats(0.9, 1.3))
    seq_len = draw(st.sampled_from([512, 1024, 2048, 4096]))
    gpus_per_node = 8
    tp = draw(st.sampled_from([1, 1, 2, 4, 8]))
    while heads % tp:
        tp //= 2
    nodes = draw(st.integers(1, 512))
    gpus = max(tp, gpus_per_node * nodes if nodes > 1
               else draw(st.sampled_from([g for g in (1, 2, 4, 8) if g % tp == 0])))
    b_crit = draw(st.floats(1e5, 5e7))
    tokens = draw(st.floats(1e9, 5e12))
    at_batch = draw(st.floats(1e5, 2e7))
    hardware = {
        "gpu": draw(st.sampled_from(["A100-SXM4-80GB", "H100-SXM5-80GB", "MI300X", "L40S"])),
        "gpus": gpus, "gpus_per_node": gpus_per_node, "tensor_parallel": tp,
        "mfu": draw(st.floats(0.2, 0.6)), "overlap": draw(st.floats(0.0, 1.0)),
        "step_overhead": draw(st.sampled_from([0.0, 0.0, 0.01, 0.2])),
        "zero": draw(st.sampled_from([0, 1, 2, 3])),
        "recompute": draw(st.sampled_from(["none", "selective", "full"])),
        "flash_attention": draw(st.booleans()),
    }
    budget: dict[str, Any] = {}
    if tight:
        budget["deadline"] = draw(st.floats(0.05 * DAY, 30 * DAY))
        budget["flops"] = draw(st.floats(1e18, 1e23))
    elif limits:
        if draw(st.booleans()):
            budget["deadline"] = draw(st.floats(1 * DAY, 400 * DAY))
        if draw(st.booleans()):
            budget["flops"] = draw(st.floats(1e20, 1e25))
        if draw(st.booleans()):
            budget["gpu_hours"] = draw(st.floats(1e3, 1e8))
        if draw(st.booleans()):
            budget["usd_per_gpu_hour"] = draw(st.floats(0.5, 5.0))
            if draw(st.booleans()):
                budget["usd"] = draw(st.floats(1e4, 1e9))
    data = {
        "name": "generated",
        "model": {"params": params, "layers": layers, "d_model": d_model, "heads": heads, "seq_len": seq_len},
        "hardware": hardware,
        "budget": budget,
        "target": {"tokens": tokens, "at_batch": at_batch},
        "noise": {"b_crit": b_crit, "uncertainty": draw(st.sampled_from([0.1, 0.3, 0.5]))},
        "objective": objective or draw(st.sampled_from(["balanced", "min_time", "min_flops", "min_cost"])),
    }
    return Plan.model_validate(data)
