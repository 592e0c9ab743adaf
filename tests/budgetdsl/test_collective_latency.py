"""Collective latency α and training stacks (issue 24, item 6; budgetdsl/cost/throughput.py,
budgetdsl/cost/stacks.py): NCCL's latency model (src/graph/tuning.cc) against its closed forms, each
collective paying it once, and what each `hardware.stack` overlaps."""

from dataclasses import replace

import pytest
from plan_rules import assert_refused_located
from solver_plans import make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.cost.stacks import STACKS
from budgetdsl.cost.throughput import Device, Layout, Shape, collective_latency, step_time

US = 1e-6
N, L, D, A, S = 6.74e9, 32, 4096, 32, 4096
SHAPE = Shape(N, L, D, S, 6 * N + 12 * L * D * S, A, 32000)
H100 = Device(peak_flops=989e12, hbm_bandwidth=3.35e12, kernel_efficiency=0.514, intra_node=450e9,
              network=50e9, gpus_per_node=8)


def test_ring_latency_in_one_node_is_nccls_base_plus_a_hop_per_step():
    """One node, NVLink, Simple: ring = 8.4 + nsteps·3.4 µs (nsteps 2(n−1) for an all-reduce, n − 1
    for a reduce-scatter or all-gather); the tree's 8.4 + 2(n − 1)·4.0 is longer at n = 8."""
    assert collective_latency("all_reduce", 8, 1) == pytest.approx((8.4 + 14 * 3.4) * US)
    assert collective_latency("all_gather", 8, 1) == pytest.approx((8.4 + 7 * 3.4) * US)
    assert collective_latency("reduce_scatter", 2, 1) == pytest.approx((8.4 + 3.4) * US)
    assert collective_latency("all_reduce", 1, 1) == 0.0
    # PCIe hops are slower: 5.7 µs a ring step (the tree's 4.0 wins the all-reduce at n = 8)
    assert collective_latency("all_gather", 8, 1, pcie=True) == pytest.approx((8.4 + 7 * 5.7) * US)
    assert collective_latency("all_reduce", 8, 1, pcie=True) == pytest.approx((8.4 + 14 * 4.0) * US)


def test_across_nodes_the_tree_bounds_the_all_reduce_and_the_ring_grows_with_the_ranks():
    """2,048 ranks on 256 nodes: the ring all-reduce pays 2·255 network steps (14 µs) and 2·1,792
    in-node ones, × 1.4 (NCCL's plateau factor); the tree 2·(7·4.0 + log2(256)·14) — NCCL runs the
    tree. The all-gather has no tree (nor PAT, with 8 GPUs a node): its ring is 9.7 ms."""
    ring = (8.4 + (2 * 2047 - 2 * 255) * 3.4 + 2 * 255 * 14.0) * 1.4
    tree = 8.4 + 2 * (7 * 4.0 + 8 * 14.0)
    assert tree < ring
    assert collective_latency("all_reduce", 2048, 256) == pytest.approx(tree * US)
    assert collective_latency("all_gather", 2048, 256) == pytest.approx((8.4 + 1792 * 3.4 + 255 * 14.0) * US)
    # one GPU a node (t = 8): PAT for the reduce-scatter, 8.0 + log2(N)·14/3.5 + 2.8·n µs, under the ring's
    pat = 8.0 + 8 * 14.0 / 3.5 + 2.8 * 256
    assert pat < 8.4 + 255 * 14.0
    assert collective_latency("reduce_scatter", 256, 256) == pytest.approx(pat * US)
    assert collective_latency("p2p", 2, 2) == pytest.approx((8.4 + 14.0) * US)


def test_zero3_across_2048_replicas_pays_its_latency_per_block():
    """The issue's case: ZeRO-3 on 2,048 data-parallel H100 (256 nodes) showed dp_comm 0.0. Per
    micro-batch each of the L blocks gathers its weights twice (forward, backward) and reduce-scatters
    its gradients: 3·L ring latencies of 9.7 ms, far more than a small model's micro-batch computes."""
    shape = Shape(1.3e9, 24, 2048, 2048, 6 * 1.3e9 + 12 * 24 * 2048 * 2048, 16, 50000)
    bd = step_time(shape, H100, Layout(2048, zero=3), 1, 2048)
    alpha = collective_latency("all_gather", 2048, 256)
    assert alpha == collective_latency("reduce_scatter", 2048, 256)
    assert bd.dp_comm > 0.5
    # exposed = per micro-batch collectives (bytes + 3·L·α) less the compute that hides them
    no_alpha = step_time(shape, replace(H100, network=1e18, intra_node=1e18), Layout(2048, zero=3), 1, 2048)
    assert no_alpha.dp_comm == pytest.approx(3 * 24 * alpha - (bd.compute + bd.recompute + bd.tp_comm), rel=1e-3)


def test_megatron_core_overlaps_tp_comm_param_gather_and_pipeline_sends():
    """`megatron-core`: TP collectives pipelined in t chunks (one exposed), the pipeline sends hidden
    with interleaving, the ZeRO-1 weights' all-gather under ⅓ of a micro-batch's compute."""
    base = Layout(64, tensor_parallel=8, pipeline_parallel=2, virtual_stages=2, zero=1, sequence_parallel=True)
    mc = replace(base, stack=STACKS["megatron-core"])
    one, two = step_time(SHAPE, H100, base, 1, 64), step_time(SHAPE, H100, mc, 1, 64)
    assert two.tp_comm == pytest.approx(one.tp_comm / 8, rel=1e-12)
    assert one.pp_comm > 0 and two.pp_comm == 0.0
    assert two.compute == one.compute and two.total < one.total
    # without interleaving the sends stay exposed
    flat = replace(mc, virtual_stages=1)
    assert step_time(SHAPE, H100, flat, 1, 64).pp_comm == step_time(SHAPE, H100, replace(base, virtual_stages=1),
                                                                     1, 64).pp_comm


def test_a_stack_that_hides_the_param_gather_exposes_less():
    """ZeRO-1 on a slow network: the default exposes the whole weights' all-gather; fsdp2 and
    megatron-core hide it behind ⅓ of the micro-batch's compute (fsdp2-compile: fsdp2's collectives
    with the elementwise kernels fused, so the same compute as the default's)."""
    slow = replace(H100, network=1.25e9)
    base = Layout(64, zero=1)
    d = step_time(SHAPE, slow, base, 1, 64)
    f = step_time(SHAPE, slow, replace(base, stack=STACKS["fsdp2-compile"]), 1, 64)
    window = d.compute + d.recompute + d.tp_comm
    assert f.compute == pytest.approx(d.compute)
    # fsdp2 also cuts the reduce-scatter and the all-gather into L = 32 calls each, not one: 2·31 more α
    alpha = collective_latency("all_gather", 64, 8)
    assert alpha == pytest.approx((8.4 + 56 * 3.4 + 7 * 14.0) * US)
    assert d.dp_comm - f.dp_comm == pytest.approx(window / 3 - 2 * 31 * alpha, rel=1e-9)


def test_buckets_per_stack():
    """How many collectives carry a 28 GB gradient buffer (7B params, fp32) over 64 ranks, 32 blocks."""
    nbytes = 4.0 * 7e9
    assert STACKS["default"].collectives(nbytes, 4.0, 64, 32) == 1
    assert STACKS["fsdp2"].collectives(nbytes, 4.0, 64, 32) == 32
    assert STACKS["megatron-core"].collectives(nbytes, 4.0, 64, 32) == 110  # ⌈7e9 / 64M⌉
    assert STACKS["megatron-core"].collectives(nbytes, 4.0, 8, 32) == 175  # ⌈7e9 / 40M⌉
    assert STACKS["deepspeed"].collectives(nbytes, 4.0, 64, 32) == 14  # ⌈7e9 / 5e8⌉
    assert STACKS["default"].collectives(0.0, 4.0, 64, 32) == 0


def test_the_stack_reaches_the_cost_model_and_its_assumption_line():
    plan = make_plan(hardware={"mfu": None, "overlap": None, "stack": "megatron-core", "tensor_parallel": 8,
                               "zero": 1, "recompute": "none"})
    cm = build_cost_model(plan, 1024, Split(1, 8, 1, "none", True))
    assert cm.layout is not None and cm.layout.stack is STACKS["megatron-core"]
    coef = cm.coefficients["collective_latency"]
    assert coef.origin == "declared" and "megatron-core" in coef.detail and coef.value > 0
    default = build_cost_model(make_plan(hardware={"mfu": None, "overlap": None}), 1024, Split(1, 8, 1, "none", True))
    assert default.coefficients["collective_latency"].origin == "default"


def test_an_unknown_stack_is_a_located_error(tmp_path, capsys):
    assert_refused_located(tmp_path, capsys, "model: {params: 1B, layers: 16, d_model: 2048}",
                           "hardware: {gpu: H100-SXM5-80GB, gpus: 8, stack: megatron}",
                           "'megatron' is not one of", "did you mean 'megatron-core'?")


def test_deepspeeds_weight_all_gather_pays_a_latency_per_bucket_of_its_bf16_weights():
    """ZeRO-1 under `deepspeed` on an infinitely fast network: what stays exposed is the bf16 weights'
    all-gather, cut into ⌈6.74e9 / 5e8⌉ = 14 buckets (allgather_bucket_size, in elements), each paying
    the all-gather's α once; `default` sends one collective."""
    fast = replace(H100, network=1e18, intra_node=1e18)
    alpha = collective_latency("all_gather", 64, 8)
    ds = step_time(SHAPE, fast, replace(Layout(64, zero=1), stack=STACKS["deepspeed"]), 1, 64)
    default = step_time(SHAPE, fast, Layout(64, zero=1), 1, 64)
    assert ds.dp_comm == pytest.approx(14 * alpha, rel=1e-5)  # the bytes at 1e18 B/s: 1e-8 s
    assert default.dp_comm == pytest.approx(alpha, rel=1e-4)


def test_one_stage_reduces_every_parameter_tied_or_untied():
    """Without a pipeline a GPU holds all N parameters, an untied LM head's own matrix included: the
    gradient all-reduce moves the same bytes whether the embeddings are tied or not (the per-layer
    share is N less one or two embedding matrices, the embeddings come back on the one stage)."""
    slow = replace(H100, network=1.25e9)
    tied = step_time(SHAPE, slow, Layout(64), 1, 64)
    untied = step_time(replace(SHAPE, tied_embeddings=False), slow, Layout(64), 1, 64)
    assert tied.dp_comm > 0.1
    assert untied.dp_comm == pytest.approx(tied.dp_comm, rel=1e-9)


def test_a_link_of_64_gb_s_is_pcie_and_pays_its_hop():
    """NCCL's PCIe hop (5.7 µs a ring step against NVLink's 3.4) applies to in-node links of
    PCIE_LINK or slower, the H100 PCIe card's 64 GB/s itself included: a pipeline's two sends per
    micro-batch inside a node, and an 8-way tensor-parallel all-reduce."""
    from budgetdsl.cost.throughput import _pipeline_latency, group_latency

    pcie, nvlink = replace(H100, intra_node=64e9), replace(H100, intra_node=64.5e9)
    assert pcie.pcie and not nvlink.pcie
    two_stages = Layout(16, pipeline_parallel=2)
    assert _pipeline_latency(pcie, two_stages, True) == pytest.approx(2 * (8.4 + 5.7) * US)
    assert _pipeline_latency(nvlink, two_stages, True) == pytest.approx(2 * (8.4 + 3.4) * US)
    assert group_latency("all_reduce", 8, 1, pcie) == collective_latency("all_reduce", 8, 1, True)
    assert group_latency("all_reduce", 8, 1, nvlink) == collective_latency("all_reduce", 8, 1, False)
