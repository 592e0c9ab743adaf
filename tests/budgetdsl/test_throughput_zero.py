"""ZeRO-2's data-parallel traffic (budgetdsl/cost/throughput.py): sharded gradients are reduced every
micro-batch (deepspeedai/DeepSpeed#2252: "For zero stage 2 (and 3), gradient reduction is required
after every backward because of gradient partitioning"), where ZeRO-1 reduces once per step."""

import pytest

from budgetdsl.cost.stacks import DEFAULT_STACK
from budgetdsl.cost.throughput import (
    Device,
    Layout,
    Shape,
    dp_collective_time,
    step_cost,
    step_cost_columns,
    step_time,
)

BACKWARD = 2.0 / 3.0  # the backward's share of a micro-batch's compute, what hides its reduction

# A 7B-like shape on a slow network, so that one micro-batch's reduction outlasts its backward.
SHAPE = Shape(6.7e9, 32, 4096, 2048, 6 * 6.7e9 + 12 * 32 * 4096 * 2048, 32, 32000)
DEVICE = Device(9.89e14, 3.35e12, 0.5, 4.5e11, 1.25e9, 8)  # 10 Gb/s per GPU across nodes


def _layout(zero: int, gpus: int = 64) -> Layout:
    return Layout(gpus, 1, 1, 1, zero, "none", True, False, 4.0, None)


@pytest.mark.parametrize("m", [1, 2, 8])
def test_zero2_pays_the_gradient_reduction_every_micro_batch(m):
    """Closed form: ZeRO-2 − ZeRO-1 = (m − 1)·(RS − ⅔·b·w) when a micro-batch's reduce-scatter RS
    outlasts ⅔ of its compute w·b (both hide one reduction behind one backward; ZeRO-2 runs m of
    them, ZeRO-1 one; the weights' all-gather and the optimizer step are the same)."""
    b = 1
    one = step_time(SHAPE, DEVICE, _layout(1), b, b * m * 64)
    two = step_time(SHAPE, DEVICE, _layout(2), b, b * m * 64)
    grads = 4.0 * SHAPE.params
    rs = dp_collective_time(grads, 64, 1, DEVICE, "reduce_scatter",
                            calls=DEFAULT_STACK.collectives(grads, 4.0, 64, SHAPE.layers))
    w = (one.compute + one.recompute + one.tp_comm) / m  # one micro-batch of one sequence
    assert rs > BACKWARD * w  # the case the closed form is for
    assert two.total - one.total == pytest.approx((m - 1) * (rs - BACKWARD * w), rel=1e-9)
    assert step_cost(SHAPE, DEVICE, _layout(2)).total(b, m) == pytest.approx(two.total, rel=1e-12)


def test_zero2_on_a_fast_network_costs_what_zero1_does():
    """With NVLink-fast links every micro-batch's reduction hides behind its backward: ZeRO-2 and
    ZeRO-1 take the same step (the difference is memory, not time)."""
    fast = Device(9.89e14, 3.35e12, 0.5, 4.5e11, 4.5e11, 8)
    one = step_time(SHAPE, fast, _layout(1, 8), 4, 4 * 16 * 8)
    two = step_time(SHAPE, fast, _layout(2, 8), 4, 4 * 16 * 8)
    assert two.total == pytest.approx(one.total, rel=1e-12)


def test_the_search_columns_agree_with_step_cost_for_zero2():
    """`step_cost_columns` (what the layout search keeps per GPU count) builds the same StepCost as
    `step_cost` for ZeRO-2, count by count."""
    counts = [8, 16, 64, 256, 1024]
    k, window, bubble, zero3, per_micro, reduce, gather, overlap, fixed, latency, share = step_cost_columns(
        SHAPE, DEVICE, _layout(2, 8), counts)
    for i, g in enumerate(counts):
        ref = step_cost(SHAPE, DEVICE, _layout(2, g))
        got = (k[i], window, bubble[i], zero3, per_micro[i], reduce[i], gather[i], overlap, fixed[i], latency[i],
               share)
        want = (ref.per_sequence, ref.window, ref.bubble_k, ref.zero3, ref.dp_per_micro, ref.reduce,
                ref.gather, ref.overlap, ref.fixed, ref.latency, ref.gather_share)
        assert got == pytest.approx(want, rel=1e-12), g


def test_zero2_where_every_reduction_hides_is_zero1_to_the_bit():
    """Where each micro-batch's backward hides its reduction, ZeRO-2's step is ZeRO-1's exactly (not
    within rounding): the search and the sweep kernel meet the two stages as an exact tie, which the
    search's order decides, as before ZeRO-2's reductions were priced."""
    fast = Device(9.89e14, 3.35e12, 0.5, 4.5e11, 4.5e11, 8)
    for m in (1, 3, 16):
        one = step_cost(SHAPE, fast, _layout(1, 8)).total(4, m)
        two = step_cost(SHAPE, fast, _layout(2, 8)).total(4, m)
        assert two == one
    slow_two = step_cost(SHAPE, DEVICE, _layout(2))
    assert slow_two.total(1, 1) == step_cost(SHAPE, DEVICE, _layout(1)).total(1, 1)  # one micro-batch
