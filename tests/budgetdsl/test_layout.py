"""budgetdsl.layout is the one home of the launch rules: the exports ask it too, and an uneven
pipeline (a layout the planner accepts) is refused by the exports cleanly, not with a crash."""

import pytest

from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.plan_model import Plan
from budgetdsl.solver import solve


def _plan(layers: int, pp: int) -> Plan:
    return Plan.model_validate({
        "name": "uneven", "model": {"params": 176e9, "layers": layers, "d_model": 14336, "heads": 112,
                                    "seq_len": 2048, "vocab": 250880},
        "hardware": {"gpu": "A100-SXM4-80GB", "gpus": 384, "tensor_parallel": 4, "pipeline_parallel": pp,
                     "zero": 1, "recompute": "full"},
        "target": {"tokens": 366e9, "at_batch": 4194304.0}, "noise": {"b_crit": 4194304.0},
        "run": {"batch": 4194304.0},
        "launch": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["pretrain_gpt.py"]}})


def test_an_uneven_pipeline_plans_and_the_exports_refuse_it_by_name():
    plan = _plan(70, 12)  # BLOOM-176B's layout
    sol = solve(plan)
    assert sol.feasible and sum(sol.throughput.stage_layers) == 70
    with pytest.raises(ExportError, match=r"70 layers on 12 pipeline stages are uneven .*first 6, 10 × 6, last 4"):
        launch_spec(plan, sol)


def test_an_even_pipeline_still_exports():
    plan = _plan(72, 12)
    spec = launch_spec(plan, solve(plan))
    assert (spec.pipeline_parallel, spec.nodes) == (12, 48)
