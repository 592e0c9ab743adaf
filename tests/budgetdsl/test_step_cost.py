"""The step time in closed form (`throughput.StepCost`, what a solve evaluates for every candidate)
against the itemised model (`throughput.step_time`, what the report shows): the same number on
random layouts, shapes and batches, every ZeRO stage, recomputation and overlap."""

import random
from dataclasses import replace

import pytest

from budgetdsl.cost.experts import Experts
from budgetdsl.cost.stacks import STACKS
from budgetdsl.cost.throughput import Device, Layout, Shape, step_cost, step_time
from budgetdsl.hardware.gemm_curves import HOPPER_GEMM


@pytest.mark.parametrize("gemm", [None, HOPPER_GEMM])
def test_closed_form_equals_the_itemised_step_on_random_layouts(gemm):
    """Also with a GEMM-shape curve (cost.gemm_shape) on every stack: sharded, fused or not."""
    rng = random.Random(13)
    checked = 0
    for _ in range(2000):
        layers = rng.choice([2, 12, 24, 40, 80])
        shape = Shape(rng.uniform(1e8, 7e10), layers, rng.choice([512, 2048, 5120]),
                      rng.choice([512, 2048, 4096]), rng.uniform(1e9, 1e12), rng.choice([None, 8, 32]),
                      rng.choice([None, 32000]))
        device = Device(9.89e14, 3.35e12, 0.5, 4.5e11, 5e10, 8, gemm=gemm)
        t, p = rng.choice([1, 2, 4, 8, 16]), rng.choice([1, 2, 4, 8])
        if p > layers:
            continue
        layout = Layout(t * p * rng.choice([1, 2, 3, 8, 64]), t, p, rng.choice([1, 2]), rng.choice([0, 1, 2, 3]),
                        rng.choice(["none", "selective", "full"]), rng.random() < 0.5, rng.random() < 0.5,
                        rng.choice([2.0, 4.0]), rng.choice([None, 0.0, 0.5]))
        if gemm is not None:
            layout = replace(layout, stack=STACKS[rng.choice(sorted(STACKS))])
        b, m = rng.choice([1, 2, 3, 8]), rng.choice([1, 2, 5, 64])
        itemised = step_time(shape, device, layout, b, b * m * layout.data_parallel, 0.01).total
        closed = step_cost(shape, device, layout, 0.01).total(b, m)
        assert abs(closed - itemised) <= 1e-12 * itemised, (layout, b, m)
        checked += 1
    assert checked > 1500


def test_closed_form_equals_the_itemised_step_with_experts_and_context_parallelism():
    """The same on mixture-of-experts shapes with expert and context parallelism at micro-batches
    above one: the all-to-all and the context ring grow with the micro-batch as compute does."""
    rng = random.Random(29)
    checked = 0
    for _ in range(600):
        layers, d = rng.choice([8, 24, 32]), rng.choice([1024, 4096])
        experts = rng.choice([8, 16, 64])
        moe = Experts(experts, rng.choice([1, 2, 8]), 3.0 * d * rng.choice([1024, 14336]), rng.choice([0, 1]),
                      rng.choice([0, 1]), rng.choice([None, 1.25]),
                      dispatcher=rng.choice(["alltoall", "deepep"]), overlap=rng.random() < 0.3)
        shape = Shape(rng.uniform(1e9, 5e10), layers, d, rng.choice([2048, 8192]), rng.uniform(1e10, 1e11), 32,
                      32000, 8, 14336, "swiglu", False, moe)
        device = Device(9.89e14, 3.35e12, 0.5, 4.5e11, 5e10, 8, gemm=HOPPER_GEMM)
        t, p, cp, ep = rng.choice([1, 2, 8]), rng.choice([1, 2, 4]), rng.choice([1, 2, 4]), rng.choice([1, 2, 8])
        if experts % ep:
            continue
        layout = Layout(t * p * cp * rng.choice([1, 8, 64]), t, p, rng.choice([1, 2]), rng.choice([0, 1, 2, 3]),
                        rng.choice(["none", "selective", "full"]), True, t > 1, 4.0, rng.choice([None, 0.5]),
                        context_parallel=cp, expert_parallel=ep)
        if layout.data_parallel * cp % ep:
            continue
        b, m = rng.choice([2, 3, 8]), rng.choice([1, 2, 5, 64])
        itemised = step_time(shape, device, layout, b, b * m * layout.data_parallel, 0.01)
        closed = step_cost(shape, device, layout, 0.01).total(b, m)
        assert abs(closed - itemised.total) <= 1e-12 * itemised.total, (layout, b, m)
        checked += itemised.ep_comm > 0 and itemised.cp_comm > 0
    assert checked > 50
