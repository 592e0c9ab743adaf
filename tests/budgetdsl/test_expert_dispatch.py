"""DeepEP dispatch, group-limited routing and the all-to-all's overlap with compute (issue 24, items 2
and 8; DeepSeek-AI 2024, DeepSeek-V3 §2.1.2, §3.2.1–3.2.2, §3.3.2): the distinct nodes a token is
sent to against their closed forms, the dispatch time against its bytes, the exposed time with
overlap, and each new key's located error."""

import math

import pytest
from plan_rules import assert_refused_located
from solver_plans import make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model, model_experts
from budgetdsl.cost.experts import (
    BF16,
    FP8_DISPATCH,
    Experts,
    all_to_all_count,
    deepep_seconds_per_token,
    dispatch_seconds_per_sequence,
    nodes_per_token,
)
from budgetdsl.cost.gemm_shape import gemm_time, sharded_matmuls
from budgetdsl.cost.throughput import group_latency
from budgetdsl.hardware.gpus import PRESETS

W_E = 3 * 7168 * 2048  # one DeepSeek-V3 expert
V3 = Experts(256, 8, W_E, shared=1, dense_layers=3, expert_parallel=64, expert_tensor_parallel=1)


def test_a_token_reaches_the_nodes_of_its_experts():
    """Uniform routing over n nodes of E/n experts: n·(1 − C(E − E/n, k)/C(E, k)); DeepSeek-V3's
    node-limited routing (8 groups, one per node of EP 64, 4 per token): exactly 4 nodes."""
    free = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert nodes_per_token(V3, 8) == pytest.approx(free, rel=1e-12)
    assert 5.2 < free < 5.3
    limited = Experts(256, 8, W_E, groups=8, groups_per_token=4, expert_parallel=64)
    assert nodes_per_token(limited, 8) == pytest.approx(4.0, rel=1e-12)
    assert nodes_per_token(V3, 1) == 1.0
    # groups that do not sit whole on nodes (3 groups over 8 nodes) do not bound the nodes
    assert nodes_per_token(Experts(24, 2, W_E, groups=3, groups_per_token=1), 8) == pytest.approx(
        8 * (1 - math.comb(21, 2) / math.comb(24, 2)), rel=1e-12)


def test_deepep_sends_each_node_one_copy_over_the_nic():
    """Per token and MoE layer: D·(n − 1)/n copies over the NIC, each the forward's dispatch (FP8 with
    its scales, or BF16) and combine (BF16) and the backward's two BF16 transfers; NVLink carries
    the k copies' in-node share. The NIC is the slower here (50 GB/s against 200 GB/s)."""
    ex = Experts(256, 8, W_E, groups=8, groups_per_token=4, expert_parallel=64, expert_tensor_parallel=1,
                 dispatcher="deepep", fp8_dispatch=True)
    d, nic, nvl = 7168, 50e9, 200e9
    per_copy = d * (FP8_DISPATCH + BF16 + 2 * BF16)
    assert deepep_seconds_per_token(d, ex, "none", 8, nvl, nic) == pytest.approx(4 * 7 / 8 * per_copy / nic)
    full = d * (2 * (FP8_DISPATCH + BF16) + 2 * BF16)  # full recomputation runs the forward's pair again
    assert deepep_seconds_per_token(d, ex, "full", 8, nvl, nic) == pytest.approx(4 * 7 / 8 * full / nic)
    seq = dispatch_seconds_per_sequence(4096, d, ex, 1, 1, "none", 8, nvl, nic)
    assert seq == pytest.approx(4096 * 4 * 7 / 8 * per_copy / nic)
    # Megatron-Core's all-to-all moves every one of the k copies: 4 BF16 passes, 7/8 of them across nodes
    plain = dispatch_seconds_per_sequence(4096, d, V3, 1, 1, "none", 8, nvl, nic)
    assert plain == pytest.approx(4 * 8 * 4096 * d * BF16 * (56 / 64) / nic)
    assert seq < plain / 2


def test_inside_one_node_deepep_is_nvlink_only():
    ex = Experts(8, 2, 3 * 4096 * 14336, expert_parallel=8, expert_tensor_parallel=1, dispatcher="deepep")
    got = deepep_seconds_per_token(4096, ex, "none", 8, 450e9, 50e9)
    assert got == pytest.approx(2 * 7 / 8 * 4096 * 4 * BF16 / 450e9)


MIXTRAL = dict(layers=32, d_model=4096, vocab=32000, heads=32, kv_heads=8, ffn_hidden=14336, mlp="swiglu",
               tied_embeddings=False, experts=8, experts_per_token=2, seq_len=4096, params=None)


def _cost_model(**hardware):
    plan = make_plan(model=MIXTRAL, hardware={"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": None, "zero": 1,
                                              "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "full",
                                              "expert_parallel": 8, "overlap": None, "network": None, **hardware})
    return build_cost_model(plan, 64, Split(1, 1, 1, "full", True, 1, 8))


def _ep_share(**hardware):
    return _cost_model(**hardware).breakdown(64 * 4096 * 4, 4)


def test_overlap_exposes_only_what_outlasts_the_compute():
    """With expert_overlap the all-to-all runs under the micro-batch's compute and recomputation:
    exposed max(0, all-to-all − compute − recompute) (their per-sequence part: the GEMMs' fixed time
    per micro-batch, budgetdsl.cost.gemm_shape, is not counted as hiding it); here (NVLink) it hides
    entirely, and the rest of the step is the same to the bit."""
    plain, hidden = _ep_share(), _ep_share(expert_overlap=True)
    assert plain is not None and hidden is not None
    assert plain.ep_comm > 0 and hidden.ep_comm == 0.0
    assert (hidden.compute, hidden.recompute, hidden.dp_comm) == (plain.compute, plain.recompute, plain.dp_comm)
    # over a slow network the all-to-all outlasts the compute: the difference is exposed
    # (the all-to-alls' latency, 6 per MoE layer and micro-batch under full recomputation, hides with them)
    slow, slow_hidden = _ep_share(intra_node_network=1e9), _ep_share(intra_node_network=1e9, expert_overlap=True)
    device = _cost_model(intra_node_network=1e9).device
    latency = 4 * 32 * all_to_all_count("full") * group_latency("p2p", 8, 1, device)
    h100 = PRESETS["H100-SXM5-80GB"]
    layer = gemm_time(h100.gemm, sharded_matmuls(4096, 32, 8, 14336, "swiglu", 1, True))
    head = gemm_time(h100.gemm, ((4096.0, 32000.0),))
    fixed = slow.micro_batches * (32 * (layer.fixed + layer.forward_fixed) + head.fixed) / (
        h100.peak_flops * h100.kernel_efficiency)  # 32 layers, each recomputed (full)
    assert fixed > 0
    assert slow_hidden.ep_comm == pytest.approx(slow.ep_comm - latency - (slow.compute + slow.recompute - fixed),
                                                rel=1e-9)


def test_the_alltoall_default_is_the_dispatch_it_was():
    """The defaults (alltoall, no overlap, no groups) leave a plan's step as before these keys."""
    base = _ep_share()
    explicit = _ep_share(expert_dispatch="alltoall", expert_overlap=False)
    assert base == explicit


MOE = "model: {layers: 8, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096, experts: 16, experts_per_token: 4, "
HW = "hardware: {gpu: H100-SXM5-80GB, gpus: 16, expert_parallel: 8}"
BAD = {
    "expert_groups without its partner": (
        MOE + "expert_groups: 4}", HW, "error[plan-rule]: expert_groups needs expert_groups_per_token",
        "e.g. expert_groups: 8, expert_groups_per_token: 4"),
    "groups that do not divide the experts": (
        MOE + "expert_groups: 3, expert_groups_per_token: 2}", HW,
        "error[plan-rule]: expert_groups (3) must divide experts (16)", "e.g. expert_groups: 2"),
    "more groups per token than groups": (
        MOE + "expert_groups: 4, expert_groups_per_token: 5}", HW,
        "error[plan-rule]: expert_groups_per_token (5) must be at most expert_groups (4)",
        "e.g. expert_groups_per_token: 2"),
    "groups too few for top-k": (
        MOE + "expert_groups: 8, expert_groups_per_token: 1}", HW,
        "error[plan-rule]: 1 groups of 2 experts hold fewer than the 4 experts", "e.g. expert_groups_per_token: 2"),
    "a group key on a dense model": (
        "model: {layers: 8, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096, expert_groups: 4}", HW.replace(
            ", expert_parallel: 8", ""),
        "error[plan-rule]: expert_groups describes a mixture-of-experts layer; it needs experts", "e.g. experts: 8"),
    "deepep on a dense model": (
        "model: {layers: 8, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 16, expert_dispatch: deepep}",
        "error[plan-rule]: expert_dispatch (deepep) moves the routed tokens", "set model.experts"),
    "overlap on a dense model": (
        "model: {layers: 8, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 16, expert_overlap: true}",
        "error[plan-rule]: expert_overlap (true) moves the routed tokens", "set model.experts"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_dispatch_key_fails_located_with_a_hint(tmp_path, name, capsys):
    assert_refused_located(tmp_path, capsys, *BAD[name])


@pytest.mark.parametrize("t, cp", [(2, 1), (1, 4), (2, 2)])
def test_each_rank_dispatches_its_share_of_the_sequence(t, cp):
    """Under tensor (sequence-parallel) and context parallelism a rank routes s/(t·cp) tokens of a
    sequence, so one MoE layer's all-to-all moves 1/(t·cp) of the bytes it moves unsplit: the
    ring all-to-all's time scales with them (no latency term here, one expert rank per GPU)."""
    ex = Experts(8, 2, 3 * 4096 * 14336, expert_parallel=8, expert_tensor_parallel=1)
    whole = dispatch_seconds_per_sequence(4096, 4096, ex, 1, 1, "none", 8, 450e9, 50e9)
    split = dispatch_seconds_per_sequence(4096, 4096, ex, t, cp, "none", 8, 450e9, 50e9)
    assert whole > 0 and split == pytest.approx(whole / (t * cp), rel=1e-12)


def test_the_deepep_assumption_counts_the_destination_nodes_in_whole_nodes():
    """64 expert-parallel ranks, 8 GPUs a node: DeepEP's sends are counted over 8 nodes, and the
    report says so in whole nodes, with the expected number a token reaches (`nodes_per_token`)."""
    from budgetdsl.cost.experts import nodes_per_token

    plan = make_plan(model={**MIXTRAL, "experts": 64, "experts_per_token": 8},
                     hardware={"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": None, "zero": 1, "tensor_parallel": 1,
                               "pipeline_parallel": 1, "recompute": "full", "expert_parallel": 64,
                               "expert_dispatch": "deepep", "overlap": None, "network": None})
    cm = build_cost_model(plan, 64, Split(1, 1, 1, "full", True, 1, 64))
    assert cm.layout is not None
    ex = cm.layout.place_experts(model_experts(plan))
    detail = cm.coefficients["experts"].detail
    assert f"{nodes_per_token(ex, 8):.3g} of 8 nodes on average" in detail, detail
    assert "8 of the 64 ep ranks share a node" in detail


def test_without_expert_parallelism_the_note_names_no_ep_ranks():
    """Experts on every GPU (expert_parallel 1) dispatch nothing across GPUs: the assumption says
    nothing about ranks sharing a node; with ep 8 it does."""
    plan = make_plan(model=MIXTRAL, hardware={"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": None, "zero": 1,
                                              "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "full",
                                              "expert_parallel": 1, "overlap": None, "network": None})
    one = build_cost_model(plan, 64, Split(1, 1, 1, "full", True, 1, 1))
    assert "ep 1," in one.coefficients["experts"].detail
    assert "ep ranks share a node" not in one.coefficients["experts"].detail
    assert "8 of the 8 ep ranks share a node" in _cost_model().coefficients["experts"].detail
