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
