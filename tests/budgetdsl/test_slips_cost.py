"""Selective recomputation without flash attention (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", §4.2): the attention's softmax and dropout are
recomputed, memory-bound passes over the 5·a·s bytes per token and layer (2-byte scores and softmax, a
1-byte dropout mask, 2-byte dropout output) that flash attention never stores."""

from __future__ import annotations

import pytest

from budgetdsl.cost.throughput import RECOMPUTE_PASSES, Device, Layout, Shape, step_time

N, L, D, A, S = 6.74e9, 32, 4096, 32, 4096
HBM = 2e12


@pytest.mark.parametrize("t", [1, 2])
def test_selective_recompute_without_flash_reads_the_scores_again(t):
    shape = Shape(N, L, D, S, 6 * N + 12 * L * D * S, A, 32000)
    device = Device(peak_flops=312e12, hbm_bandwidth=HBM, kernel_efficiency=0.5, intra_node=300e9, network=25e9,
                    gpus_per_node=8)
    micro, sequences = 1, 4
    flash = step_time(shape, device, Layout(t, tensor_parallel=t, recompute="selective"), micro, sequences)
    plain = step_time(shape, device, Layout(t, tensor_parallel=t, recompute="selective", flash_attention=False),
                      micro, sequences)
    tokens = sequences * S
    extra = RECOMPUTE_PASSES * 5 * A * S / t * L * tokens / HBM  # 5·a·s/t bytes per token and layer
    assert plain.recompute - flash.recompute == pytest.approx(extra, rel=1e-9)
    assert extra > 0.01 * plain.total  # large enough that a slip in it shows


@pytest.mark.parametrize("overhead", [0.5, 1e20])
def test_the_step_line_keeps_its_slope_when_a_huge_fixed_time_rounds_the_micro_batch_away(overhead):
    """StepCost.linear: T(B) = B·a + c, a the seconds per token of the layout, c the per-step fixed time
    (the overhead included). At a step overhead of 1e20 s one micro-batch's seconds vanish in the
    rounding of T, and the slope is still the layout's own (throughput.StepCost.linear)."""
    from budgetdsl.cost.throughput import step_cost

    shape = Shape(N, L, D, S, 6 * N + 12 * L * D * S, A, 32000)
    device = Device(peak_flops=312e12, hbm_bandwidth=HBM, kernel_efficiency=0.5, intra_node=300e9, network=25e9,
                    gpus_per_node=8)
    layout = Layout(16, tensor_parallel=2, zero=1)
    a0, c0 = step_cost(shape, device, layout, 0.0).linear(2, layout.data_parallel, S)
    a, c = step_cost(shape, device, layout, overhead).linear(2, layout.data_parallel, S)
    assert a0 > 0 and a == pytest.approx(a0, rel=1e-9)
    assert c == pytest.approx(c0 + overhead, rel=1e-12)


@pytest.mark.parametrize("gpus, t, link", [(4, 1, 300e9), (16, 2, 25e9)])
def test_pipeline_sends_one_activation_and_one_gradient_per_micro_batch(gpus, t, link):
    """Pipeline parallelism (Narayanan et al. 2021, Megatron-LM 1F1B): each micro-batch of b sequences
    sends its b·s·d bf16 activations to the next stage and their gradient back, split over the t
    tensor-parallel ranks, over NVLink while tensor × data parallelism fits in a node, else the NIC;
    each send pays its latency once per micro-batch, whatever b."""
    shape = Shape(N, L, D, S, 6 * N + 12 * L * D * S, A, 32000)
    device = Device(peak_flops=312e12, hbm_bandwidth=HBM, kernel_efficiency=0.5, intra_node=300e9, network=25e9,
                    gpus_per_node=8)
    layout = Layout(gpus, tensor_parallel=t, pipeline_parallel=2)
    micro, sequences = 2, 8 * layout.data_parallel
    m = sequences / (layout.data_parallel * micro)
    bd = step_time(shape, device, layout, micro, sequences)
    # each send also pays one NCCL ring step's latency: 8.4 µs + the hop (NVLink 3.4, network 14)
    alpha = (8.4 + (3.4 if link == 300e9 else 14.0)) * 1e-6
    assert bd.pp_comm == pytest.approx(m * 2 * (micro * S * D * 2 / t / link + alpha), rel=1e-12)
