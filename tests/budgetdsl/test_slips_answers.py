"""Answers a user reads off a solution, checked against their definition (the mutation benchmark,
bench/bench_mutation.py, found each unchecked): a one-character slip in the solver changed them
and every other test passed."""

from __future__ import annotations

import pytest

from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.solve.solver import solve
from tests.budgetdsl.solver_plans import DAY, make_plan

# 1.3B model on 8 A100-40GB, ZeRO-1, no recomputation: memory caps the micro-batch at a few sequences
MODEL = {"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 4096}
HARDWARE = {"gpu": "A100-SXM4-40GB", "gpus": 8, "mfu": None, "overlap": None, "zero": 1, "tensor_parallel": 1,
            "pipeline_parallel": 1, "recompute": "none"}


@pytest.mark.parametrize("per_replica", [1, 2, 3, 4])
def test_memory_binds_exactly_when_it_forces_accumulation(per_replica):
    """The memory limit is reported binding when it decided the launch: the micro-batch is fewer
    sequences than each replica's share and one sequence more would not fit, so accumulation
    makes up the batch (two accumulations as much as ten). Pinned batches of 1–4 memory caps of
    sequences per replica."""
    def plan(**over):
        return make_plan(model=MODEL, hardware=HARDWARE, target={"tokens": 2e10, "at_batch": 1e6},
                         budget={"deadline": 300 * DAY, "flops": None, "gpu_hours": None}, noise={"b_crit": 2e6},
                         **over)
    cm = build_cost_model(plan(), HARDWARE["gpus"])
    cap = cm.micro_batch_max
    assert cap >= 2
    sequences = per_replica * cap * HARDWARE["gpus"]
    got = solve(plan(run={"batch": float(sequences * MODEL["seq_len"])}))
    assert got.feasible and got.batch.sequences == sequences
    b = got.batch
    share = sequences // b.data_parallel
    forced = b.micro_batch < share and cm.memory_at(b.micro_batch + 1) > cm.memory_per_device
    assert forced == (per_replica > 1)
    memory = got.constraint("memory")
    assert memory is not None and memory.binding == forced, memory
