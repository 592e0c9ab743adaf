"""`track --replan` writes a declared MFU that reproduces the measured throughput where the run was
launched, although a declared MFU holds at the plan's reference configuration (issue 24 item 7)."""

import pytest

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.plan.model import Plan
from budgetdsl.solve.solver import solve
from budgetdsl.track.replan import declared_mfu

PLAN = {
    "name": "replan-mfu",
    "model": {"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus": 64, "pipeline_parallel": 2},
    "budget": {"flops": 2.75e20},
    "target": {"tokens": 2.6e10, "at_batch": 1e6},
    "noise": {"b_crit": 1e6},
}


def _mfu_at_launch(plan: Plan, solution, mfu: float) -> float:
    hw = plan.hardware.model_copy(update={"mfu": mfu, "tensor_parallel": solution.batch.tensor_parallel,
                                          "zero": solution.batch.zero, "recompute": solution.batch.recompute})
    b = solution.batch
    cm = build_cost_model(plan.model_copy(update={"hardware": hw}), solution.gpus,
                          Split(b.zero, b.tensor_parallel, b.pipeline_parallel, b.recompute, True))
    return cm.breakdown(b.tokens, b.grad_accum).mfu


@pytest.mark.parametrize("measured", [0.2, 0.35])
def test_the_written_mfu_gives_the_measured_one_at_the_launched_configuration(measured):
    plan = Plan.model_validate(PLAN)
    sol = solve(plan)
    layout = {"tensor_parallel": sol.batch.tensor_parallel, "zero": sol.batch.zero,
              "recompute": sol.batch.recompute}
    written = declared_mfu(plan, sol, measured, layout)
    # the launched run had a pipeline bubble and few micro-batches: the reference (many per step)
    # runs faster than the launch, so the value written is above the measurement
    assert written > measured * 1.01
    assert _mfu_at_launch(plan, sol, written) == pytest.approx(measured, rel=1e-9)
    assert _mfu_at_launch(plan, sol, measured) < measured  # writing the measurement as is would not


def test_without_a_shape_the_measurement_is_written_as_it_is():
    plan = Plan.model_validate({**PLAN, "model": {"params": 1.3e9, "seq_len": 2048, "activation_bytes_per_token": 1e6},
                                "hardware": {"peak_flops": 1e15, "memory_per_device": 80 * 2**30, "gpus": 64,
                                             "mfu": 0.3}})
    sol = solve(plan)
    assert declared_mfu(plan, sol, 0.25, {}) == 0.25
