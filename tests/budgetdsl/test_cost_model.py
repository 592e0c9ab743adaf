"""The cost model (docs/design.md section 2) against hand-computed closed forms: the two modes of
utilization, the throughput model's parts, the mixed-precision memory recipe, uneven stages."""

import pytest
from solver_plans import make_plan

from budgetdsl.cost.cost_model import (
    Split,
    activation_bytes_per_layer,
    build_cost_model,
)
from budgetdsl.cost.reserve import COLLECTIVE, CUBLAS_WORKSPACE, CUDA_CONTEXT, FRAGMENTATION, P2P_PEER
from budgetdsl.cost.stacks import DEFAULT_STACK
from budgetdsl.cost.throughput import (
    Device,
    Layout,
    Shape,
    dp_collective_time,
    step_time,
)
from budgetdsl.hardware.gpus import PRESETS, GiB
from budgetdsl.hardware.layout import launch_problem, launchable_counts, stage_layers
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.solve.solver import solve

N, L, D, A, S = 6.74e9, 32, 4096, 32, 4096
A100 = PRESETS["A100-SXM4-80GB"]


def test_flops_per_token_palm_appendix_b():
    cm = build_cost_model(make_plan(), 1024)
    assert cm.flops_per_token == 6 * N + 12 * L * D * S  # 4.688e10
    assert cm.coefficients["flops_per_token"].origin == "derived"
    shapeless = make_plan(model={"layers": None, "d_model": None, "heads": None,
                                 "activation_bytes_per_token": 1e6})
    assert build_cost_model(shapeless, 8).flops_per_token == 6 * N
    declared = make_plan(model={"flops_per_token": 5e10})
    c = build_cost_model(declared, 8).coefficients["flops_per_token"]
    assert (c.value, c.origin) == (5e10, "declared")


def _predicted(plan, gpus):
    """The same plan without its declared MFU: the modelled step the anchor scales."""
    hw = plan.hardware.model_copy(update={"mfu": None})
    return build_cost_model(plan.model_copy(update={"hardware": hw}), gpus)


def test_a_declared_mfu_holds_where_it_was_measured():
    """A pinned run.batch and micro-batch: the step there is f·B/(G·P·u) exactly, whatever the
    layout's bubble, collectives or overhead (they are inside the measurement)."""
    b = 4194304.0
    for hw in ({}, {"pipeline_parallel": 4}, {"zero": 3, "overlap": 0.0}, {"step_overhead": 0.5}):
        plan = make_plan(hardware=hw, run={"batch": b, "micro_batch": 1})
        cm = build_cost_model(plan, 1024)
        accum = b / (S * cm.data_parallel)
        expect = cm.flops_per_token * b / (1024 * 312e12 * 0.42)
        assert cm.step_time(b, accum) == pytest.approx(expect, rel=1e-12)
        bd = cm.breakdown(b, accum)
        assert bd.total == pytest.approx(expect, rel=1e-12) and bd.mfu == pytest.approx(0.42, rel=1e-12)
        assert "run.batch" in cm.coefficients["mfu"].detail


def test_a_declared_mfu_scales_the_modelled_step_away_from_it():
    """Elsewhere the step is the modelled one times one factor: the batch dependence (per-step
    costs amortized over more micro-batches) survives, so a smaller batch costs more per token."""
    plan = make_plan(hardware={"pipeline_parallel": 4}, run={"batch": 4194304.0, "micro_batch": 1})
    cm, bare = build_cost_model(plan, 1024), _predicted(plan, 1024)
    k = cm.anchor.scale
    for accum in (1, 4, 64):
        batch = accum * S * cm.data_parallel
        assert cm.step_time(batch, accum) == pytest.approx(k * bare.step_time(batch, accum), rel=1e-12)
    per_token = [cm.step_time(a * S * cm.data_parallel, a) / a for a in (1, 4, 64)]
    assert per_token[0] > per_token[1] > per_token[2]  # the bubble, paid per step


def test_without_a_pinned_batch_a_declared_mfu_is_the_many_micro_batch_rate():
    """No run.batch: the MFU holds with the per-step costs amortized, so every finite accumulation
    runs at or below it, approaching it as micro-batches are added."""
    plan = make_plan(hardware={"pipeline_parallel": 4, "step_overhead": 0.5})
    cm = build_cost_model(plan, 1024)
    mfu = [cm.breakdown(a * S * cm.data_parallel, a).mfu for a in (1, 16, 4096)]
    assert mfu[0] < mfu[1] < mfu[2] <= 0.42 and mfu[2] == pytest.approx(0.42, rel=2e-3)
    assert "amortized" in cm.coefficients["mfu"].detail


def test_a_declared_mfu_without_a_shape_is_the_line():
    """Nothing to model: T(B) = f·B/(G·P·u), no fixed time."""
    plan = make_plan(model={"layers": None, "d_model": None, "heads": None, "activation_bytes_per_token": 1e6})
    cm = build_cost_model(plan, 1024)
    b = 4194304.0
    assert cm.anchor is None and cm.fixed_time == 0.0
    for accum in (None, 1, 4):
        assert cm.step_time(b, accum) == pytest.approx(cm.flops_per_token * b / (1024 * 312e12 * 0.42), rel=1e-12)


def test_llama2_7b_plan_lands_on_the_published_gpu_hours():
    """Touvron et al. 2023 Table 2: 184,320 GPU-hours; the plan declares the MFU they imply."""
    from budgetdsl.plan.loader import load_plan

    sol = solve(load_plan("plans/llama2-7b.yaml"))
    assert sol.throughput.source == "declared"
    assert abs(sol.gpu_hours / 184320 - 1) < 0.05


def _one_gpu_shape():
    return Shape(N, L, D, S, 6 * N + 12 * L * D * S, A, 32000)


def _device(**kw):
    base = dict(peak_flops=312e12, hbm_bandwidth=2e12, kernel_efficiency=0.5, intra_node=300e9,
                network=25e9, gpus_per_node=8)
    return Device(**{**base, **kw})


def test_predicted_single_gpu_is_compute_plus_memory_traffic_plus_optimizer():
    """One GPU, no parallelism: compute = f·tokens/(P·η) + 6 passes × 34·d bytes per layer per
    token / HBM; optimizer = (4 + 26) bytes/param / HBM; no communication, no bubble."""
    sh, dev = _one_gpu_shape(), _device()
    bd = step_time(sh, dev, Layout(1), micro_batch=2, global_batch=8)
    tokens = 8 * S
    assert bd.micro_batches == 4
    assert bd.compute == pytest.approx(sh.flops_per_token * tokens / (312e12 * 0.5)
                                       + 6 * 34 * D * L * tokens / 2e12, rel=1e-12)
    assert bd.optimizer == pytest.approx(30 * N / 2e12, rel=1e-12)
    assert bd.recompute == bd.tp_comm == bd.pp_comm == bd.bubble == bd.dp_comm == 0.0
    assert bd.mfu == pytest.approx(sh.flops_per_token * tokens / bd.total / 312e12, rel=1e-12)


def test_full_recompute_costs_one_more_forward():
    sh, dev = _one_gpu_shape(), _device()
    none = step_time(sh, dev, Layout(1), 1, 4)
    full = step_time(sh, dev, Layout(1, recompute="full"), 1, 4)
    layer_fwd = (sh.flops_per_token - sh.head_flops) / 3  # every layer's forward, not the head
    assert full.recompute == pytest.approx(4 * S * (layer_fwd / (312e12 * 0.5) + 2 * 34 * D * L / 2e12), rel=1e-12)
    assert full.hardware_flops - full.model_flops == pytest.approx(layer_fwd * 4 * S, rel=1e-12)
    assert full.hfu > full.mfu and none.hfu == none.mfu
    sel = step_time(sh, dev, Layout(1, recompute="selective"), 1, 4)
    assert sel.hardware_flops - sel.model_flops == pytest.approx(4 * L * D * S * 4 * S, rel=1e-12)
    assert none.total < sel.total < full.total


def test_tensor_parallel_all_reduces_over_nvlink():
    """Megatron: 4 all-reduces of b·s·d bf16 per layer and micro-batch (6 with full recompute),
    ring cost 2(t−1)/t · bytes / NVLink; over the NIC when t spans nodes."""
    sh, dev = _one_gpu_shape(), _device()
    bd = step_time(sh, dev, Layout(8, tensor_parallel=8), 1, 4)
    one = 2 * 7 / 8 * S * D * 2 / 300e9
    # each all-reduce also pays NCCL's latency: in one node the ring's 8.4 + 2·7·3.4 µs (tree: 64.4)
    alpha8 = (8.4 + 14 * 3.4) * 1e-6
    assert bd.tp_comm == pytest.approx(4 * L * 4 * (one + alpha8), rel=1e-12)
    wide = step_time(sh, dev, Layout(16, tensor_parallel=16), 1, 4)
    alpha16 = (8.4 + 2 * (7 * 4.0 + 1 * 14.0)) * 1e-6  # two nodes: the tree (the ring's is 184 µs)
    assert wide.tp_comm == pytest.approx(4 * L * 4 * (2 * 15 / 16 * S * D * 2 / 25e9 + alpha16), rel=1e-12)


def test_hierarchical_data_parallel_reduction_busbw():
    """NCCL bus bandwidth: a ring all-reduce moves 2(n−1)/n of the bytes. In-node peers use NVLink,
    the nodes then all-reduce 1/k shards with every NIC in parallel."""
    dev = _device()
    nbytes = 1e9
    # the bandwidth term alone (calls=0: no collective latency, test_collective_latency_is_nccls)
    assert dp_collective_time(nbytes, 8, 1, dev, calls=0) == pytest.approx(2 * 7 / 8 * nbytes / 300e9)
    assert dp_collective_time(nbytes, 64, 1, dev, calls=0) == pytest.approx(
        2 * 7 / 8 * nbytes / 300e9 + 2 * 7 / 8 * nbytes / 8 / 25e9)
    # t = 8 fills the node: every data-parallel peer is in another node, one NIC each
    assert dp_collective_time(nbytes, 16, 8, dev, calls=0) == pytest.approx(2 * 15 / 16 * nbytes / 25e9)
    assert dp_collective_time(nbytes, 16, 8, dev, "reduce_scatter", calls=0) == pytest.approx(
        15 / 16 * nbytes / 25e9)
    # each collective adds NCCL's latency: 64 ranks on 8 nodes, tree (least) for the all-reduce
    assert dp_collective_time(nbytes, 64, 1, dev, calls=3) == pytest.approx(
        dp_collective_time(nbytes, 64, 1, dev, calls=0) + 3 * (8.4 + 2 * (7 * 4.0 + 3 * 14.0)) * 1e-6)
    # overlap: declared hides that fraction; the framework default hides what the last
    # micro-batch's backward covers, so exposure falls as the micro-batch grows
    sh, fast = _one_gpu_shape(), _device(peak_flops=5e15)  # compute fast enough to expose the reduction
    exposed = [step_time(sh, fast, Layout(64), mb, 64 * 8).dp_comm for mb in (1, 2, 8)]
    assert exposed[0] > exposed[1] >= exposed[2] >= 0.0
    full = step_time(sh, dev, Layout(64, overlap=0.0), 1, 64)
    buckets = DEFAULT_STACK.collectives(4 * N, 4.0, 64, sh.layers)  # one per step (Megatron-LM local DDP)
    assert full.dp_comm == pytest.approx(dp_collective_time(4 * N, 64, 1, dev, calls=buckets), rel=1e-12)


def test_the_pipeline_bubble_is_p_minus_1_micro_batches():
    """1F1B: (p − 1) micro-batch times of the slowest stage; interleaving v chunks divides it by v."""
    sh = Shape(N, 32, D, S, 6 * N + 12 * 32 * D * S, A, None)  # no vocab: even stages
    dev = _device()
    bd = step_time(sh, dev, Layout(4, pipeline_parallel=4), 1, 16)
    per_micro = (bd.compute + bd.recompute + bd.tp_comm + bd.pp_comm) / bd.micro_batches
    assert bd.stage_layers == (8, 8, 8, 8)
    assert bd.bubble == pytest.approx(3 * per_micro, rel=1e-12)
    inter = step_time(sh, dev, Layout(4, pipeline_parallel=4, virtual_stages=3), 1, 16)
    assert inter.bubble == pytest.approx(bd.bubble / 3, rel=1e-12)
    # more micro-batches per step: a smaller share idles
    assert step_time(sh, dev, Layout(4, pipeline_parallel=4), 1, 64).mfu > bd.mfu


def test_uneven_stages_balance_the_lm_head():
    """BLOOM's 70 layers on 12 stages and Llama 3 405B's 126 on 16 are layouts, not errors; the
    split is one Megatron-Core launches: equal middle stages, the first and last may differ."""
    assert stage_layers(70, 12) == (5,) + (6,) * 10 + (5,)
    assert stage_layers(8, 7) == (1, 1, 1, 1, 1, 1, 2)  # the ends may also hold more
    assert stage_layers(126, 16, last_extra=0.5) == (7,) + (8,) * 14 + (7,)  # Llama 3 405B's split
    assert stage_layers(32, 4, last_extra=0.3) == (8, 8, 8, 8)  # even stays even
    with_head = stage_layers(70, 12, last_extra=1.4)
    assert sum(with_head) == 70 and with_head[-1] < max(with_head) and len(set(with_head[1:-1])) == 1

    # brute force over every Megatron-shaped split (first a, p − 2 middle stages of k, last c)
    # (bench: equal on 4,000 random (L, p, extra) too; the bisection is O(log L) for L = 10^5)
    def slowest(c, h):
        return max(max(c[:-1]), c[-1] + h)

    for n, p, h in ((20, 5, 1.4), (70, 12, 1.43), (37, 4, 0.0), (9, 3, 2.5)):
        shaped = [(a,) + (k,) * (p - 2) + (n - a - k * (p - 2),) for k in range(1, n) for a in range(1, n)
                  if n - a - k * (p - 2) >= 1]
        assert slowest(stage_layers(n, p, h), h) == min(slowest(c, h) for c in shaped)
    plan = make_plan(model={"layers": 70, "heads": 32}, hardware={"gpus": 96, "pipeline_parallel": 12})
    assert [st.layers for st in build_cost_model(plan, 96).stages] == list(stage_layers(70, 12))


def test_one_home_for_launchable_counts():
    assert launch_problem(24, 8, 1, 8) is None
    assert "whole nodes" in launch_problem(12, 1, 1, 8)
    assert "groups" in launch_problem(96, 8, 16, 8)
    assert launchable_counts(range(1, 33), 2, 2, 8) == [4, 8, 16, 24, 32]


def test_memory_by_zero_stage_fp32_gradients():
    """bf16 weights 2, fp32 gradients 4 (Megatron/DeepSpeed default), Adam 12 bytes a parameter."""
    dp = 1024
    expect = {0: (2 * N, 4 * N, 12 * N), 1: (2 * N, 4 * N, 12 * N / dp),
              2: (2 * N, 4 * N / dp, 12 * N / dp), 3: (2 * N / dp, 4 * N / dp, 12 * N / dp)}
    for zero, (w, g, o) in expect.items():
        cm = build_cost_model(make_plan(hardware={"zero": zero}), 1024)
        assert (cm.weights_bytes, cm.grads_bytes, cm.optimizer_bytes) == pytest.approx((w, g, o), rel=1e-12)
    bf16 = build_cost_model(make_plan(hardware={"grad_dtype": "bf16"}), 1024)
    assert bf16.grads_bytes == pytest.approx(2 * N, rel=1e-12)


def test_activations_korthikanti_table_2():
    # s·d·(34 + 5·a·s/d) without recomputation; 34·s·d with flash/selective; 2·s·d full
    assert activation_bytes_per_layer(S, D, A, "none", False) == S * D * (34 + 5 * A * S / D)
    assert activation_bytes_per_layer(S, D, A, "none", True) == 34 * S * D
    assert activation_bytes_per_layer(S, D, None, "selective", False) == 34 * S * D
    assert activation_bytes_per_layer(S, D, A, "full", False) == 2 * S * D
    assert activation_bytes_per_layer(S, D, None, "none", False) is None
    # tensor parallel without sequence parallelism: s·d·(10 + 24/t + 5·a·s/(d·t))
    assert activation_bytes_per_layer(S, D, A, "none", False, 8, False) == pytest.approx(
        S * D * (10 + 24 / 8 + 5 * A * S / (D * 8)))
    assert activation_bytes_per_layer(S, D, A, "none", False, 8, True) == pytest.approx(
        S * D * (34 + 5 * A * S / D) / 8)
    cm = build_cost_model(make_plan(hardware={"gpus": 1024, "tensor_parallel": 2, "pipeline_parallel": 4,
                                              "sequence_parallel": True}), 1024)
    # 8 layers on the first stage, 4 micro-batches in flight (1F1B), over t = 2
    assert cm.stages[0].activations_per_sequence == pytest.approx(34 * S * D * 8 * 4 / 2, rel=1e-12)
    assert cm.data_parallel == 128
    over = make_plan(model={"activation_bytes_per_token": 1e6}, hardware={"tensor_parallel": 2})
    assert build_cost_model(over, 1024).activation_bytes_per_sequence == pytest.approx(1e6 * S / 2)


def test_logits_sit_on_the_last_stage_in_fp32():
    plan = make_plan(model={"vocab": 32000}, hardware={"pipeline_parallel": 4})
    cm = build_cost_model(plan, 1024)
    assert cm.stages[-1].logits_per_sequence == pytest.approx(4 * S * 32000, rel=1e-12)
    assert all(st.logits_per_sequence == 0 for st in cm.stages[:-1])


def test_largest_micro_batch_is_exact():
    cm = build_cost_model(make_plan(), 1024)
    m = cm.micro_batch_max
    memory = A100.memory
    # t = p = 1 on 1024 replicas: the context, two cuBLAS workspaces and the data-parallel communicator
    assert cm.reserve_bytes == CUDA_CONTEXT + 2 * CUBLAS_WORKSPACE + COLLECTIVE
    # Llama-2-7B, ZeRO-1 over 1024: 2N + 4N + 12N/1024 static, 34·s·d·L per sequence (no vocab), all of it
    # × (1 + fragmentation) beside the fixed reserve
    free = (memory - cm.reserve_bytes) / (1 + FRAGMENTATION) - (6 * N + 12 * N / 1024)
    assert m == int(free // (34 * S * D * L)) == 2
    assert cm.memory_at(m) <= memory < cm.memory_at(m + 1)


def test_origins_are_reported():
    coefs = build_cost_model(make_plan(), 1024).coefficients
    assert coefs["peak_flops"].origin == "preset" and "A100" in coefs["peak_flops"].detail
    assert coefs["kernel_efficiency"].origin == "preset" and "Narayanan" in coefs["kernel_efficiency"].detail
    assert coefs["network"].origin == "declared"
    assert coefs["mfu"].origin == "declared"
    assert coefs["micro_batch_max"].origin == "derived"
    # (the layout pinned: without a declared mfu a silent layout key is searched, issue 13)
    predicted = build_cost_model(make_plan(hardware={"mfu": None, "tensor_parallel": 1, "pipeline_parallel": 1,
                                                     "recompute": "none"}), 1024)
    assert predicted.mode == "predicted" and predicted.coefficients["mfu"].origin == "derived"
    plan = make_plan(hardware={"peak_flops": 1e15, "memory_per_device": 96 * GiB})
    coefs = build_cost_model(plan, 1024).coefficients
    assert coefs["peak_flops"].origin == "declared" and coefs["peak_flops"].value == 1e15
    assert coefs["memory_per_device"].value == 96 * GiB


def test_predicted_step_is_linear_in_the_batch_at_a_fixed_micro_batch():
    """The closed forms see T(B) = f·B/rate + c; at whole micro-batches it is exact."""
    cm = build_cost_model(make_plan(hardware={"mfu": None, "pipeline_parallel": 4, "tensor_parallel": 1,
                                              "recompute": "none"}), 1024)
    for accum in (1, 3, 16):
        b = 256 * accum * S  # one-sequence micro-batches on dp = 256
        assert cm.step_time(b, accum) == pytest.approx(cm.flops_per_token * b / cm.rate + cm.fixed_time, rel=1e-9)


def test_a_split_override_changes_only_the_layout():
    plan = make_plan()
    base = build_cost_model(plan, 1024)
    alt = build_cost_model(plan, 1024, Split(3, 1, 1, "full", True))
    assert alt.weights_bytes < base.weights_bytes
    assert alt.activation_bytes_per_sequence < base.activation_bytes_per_sequence
    assert alt.flops_per_token == base.flops_per_token


def test_unknown_shape_is_a_located_plan_error():
    plan = make_plan(model={"layers": None, "d_model": None})
    with pytest.raises(PlanError) as exc:
        solve(plan)
    (d,) = exc.value.diagnostics
    assert d.code == "shape-unknown"
    assert "model.layers and model.d_model" in d.message


@pytest.mark.parametrize("hardware, names", [
    ({"flash_attention": False, "recompute": "none"}, ["model.heads"]),  # the scores are kept
    ({"flash_attention": False, "recompute": "full", "recompute_layers": 1}, ["model.heads"]),  # on the others
    ({"flash_attention": False, "recompute": "selective"}, None),  # nothing keeps them: it solves
    ({"flash_attention": True, "recompute": "none"}, None),
])
def test_unknown_shape_names_only_what_is_missing(hardware, names):
    """Without model.heads the memory model needs it only where layers keep their attention
    scores (no flash attention and not every layer recomputed); the error names that key alone, not
    the layers and width the plan gives."""
    plan = make_plan(model={"heads": None, "kv_heads": None},
                     hardware={"tensor_parallel": 1, "pipeline_parallel": 1, "zero": 1, **hardware})
    if names is None:
        assert solve(plan).feasible is not None
        return
    with pytest.raises(PlanError) as exc:
        solve(plan)
    (d,) = exc.value.diagnostics
    assert d.code == "shape-unknown" and "model.heads (" in d.message
    assert "model.layers" not in d.message and "model.d_model" not in d.message


def test_a_declared_memory_reserve_replaces_the_default():
    default = build_cost_model(make_plan(), 1024)
    assert default.coefficients["reserve_bytes"].origin == "default"
    assert default.coefficients["fragmentation"].value == FRAGMENTATION
    declared = build_cost_model(make_plan(hardware={"memory_reserve": 2 * GiB}), 1024)
    assert declared.coefficients["reserve_bytes"].origin == "declared"
    assert "fragmentation" not in declared.coefficients and declared.fragmentation == 0
    counted = declared.memory_at(1) - 2 * GiB  # the declared reserve is the whole reserve, as before
    assert default.memory_at(1) == pytest.approx(counted * (1 + FRAGMENTATION) + default.reserve_bytes)
    free = 80 * GiB - 2 * GiB - declared.static_bytes
    assert declared.micro_batch_max == int(free // declared.activation_bytes_per_sequence)


def test_a_pipelined_run_takes_one_sequence_micro_batches():
    plan = make_plan(hardware={"gpus": 1024, "pipeline_parallel": 4}, run={"batch": 4194304.0})
    sol = solve(plan)
    assert (sol.batch.micro_batch, sol.batch.grad_accum, sol.batch.data_parallel) == (1, 4, 256)


def test_memory_remedies_carry_their_price():
    """Recomputation is not free: the full-recompute remedy costs about one more forward (a third
    of the layers' compute), a ZeRO stage about nothing (issue 12)."""
    plan = make_plan(model={"params": 70e9, "layers": 80, "d_model": 8192, "heads": 64},
                     hardware={"gpus": 64, "zero": 0}, budget={"deadline": None, "flops": None, "gpu_hours": None})
    remedies = {m.change: m for m in solve(plan).memory_remedies}
    full = remedies["hardware.recompute: full"].relative_step_time
    assert 1.25 < full < 1.4
    assert remedies["hardware.zero: 2"].relative_step_time == pytest.approx(1.0, abs=0.05)


def test_a_remedy_that_fits_one_sequence_fits():
    """A memory remedy fits when one sequence per micro-batch does: 70B on 64 GPUs at ZeRO-0 has
    remedies whose largest micro-batch is exactly 1, and they are offered as fitting."""
    plan = make_plan(model={"params": 70e9, "layers": 80, "d_model": 8192, "heads": 64},
                     hardware={"gpus": 64, "zero": 0}, budget={"deadline": None, "flops": None, "gpu_hours": None})
    remedies = solve(plan).memory_remedies
    assert all(m.fits == (m.micro_batch_max >= 1) for m in remedies)
    assert any(m.micro_batch_max == 1 and m.fits for m in remedies)


def test_memory_remedies_reach_every_degree_a_node_holds():
    """A remedy's tensor-parallel degree goes up to the node, whatever it holds (not a fixed five
    doublings of the plan's): a 2M-token sequence on nodes of 128 GPUs fits only at TP 64 or more,
    and both are offered, fitting."""
    plan = make_plan(model={"params": None, "vocab": 128000, "layers": 32, "d_model": 16384, "heads": 128,
                            "seq_len": 2097152},
                     hardware={"gpus": 4096, "gpus_per_node": 128, "zero": 3, "recompute": "full",
                               "tensor_parallel": 1, "pipeline_parallel": 1, "sequence_parallel": True},
                     budget={"deadline": None, "flops": None, "gpu_hours": None})
    sol = solve(plan)
    assert not sol.feasible
    fitting = {m.change: m.micro_batch_max for m in sol.memory_remedies if m.fits}
    assert fitting == {"hardware.tensor_parallel: 64": 1, "hardware.tensor_parallel: 128": 2}


def test_the_declared_mfu_holds_at_the_reference_micro_batch_and_the_first_count_of_a_range():
    """ZeRO-3 gathers every micro-batch, so the per-token rate depends on the micro-batch: the MFU
    holds at the reference one (the largest that fits without a pipeline), many per step; a GPU
    range's reference is its first launchable count, the others priced by the model."""
    plan = make_plan(hardware={"zero": 3, "overlap": 0.0, "gpus": {"min": 512, "max": 2048, "step": 512}})
    cm = build_cost_model(plan, 512)
    micro, accum = cm.micro_batch_max, 4096
    assert micro > 1
    assert cm.breakdown(micro * accum * cm.data_parallel * S, accum).mfu == pytest.approx(0.42, rel=2e-3)
    assert cm.breakdown(accum * cm.data_parallel * S, accum).mfu < 0.42 * 0.99  # one sequence per micro-batch
    at_reference = cm.breakdown(micro * accum * cm.data_parallel * S, accum).mfu
    wide = build_cost_model(plan, 2048)  # the same k: more replicas, a longer ring, a lower MFU
    assert wide.anchor == cm.anchor
    assert wide.breakdown(micro * accum * wide.data_parallel * S, accum).mfu < at_reference * (1 - 1e-4)


def test_a_gpu_range_measures_its_declared_mfu_on_its_first_launchable_count():
    batch = 4 * 512 * S
    plan = make_plan(hardware={"zero": 3, "overlap": 0.0, "gpus": {"min": 512, "max": 2048, "step": 512}},
                     run={"batch": batch, "micro_batch": 4})
    assert build_cost_model(plan, 512).breakdown(batch, 1).mfu == pytest.approx(0.42, rel=1e-9)
    assert "on 512 GPUs" in build_cost_model(plan, 1024).coefficients["mfu"].detail


def test_the_default_reserve_counts_the_layouts_communicators():
    """budgetdsl.cost.reserve: a fixed context + cuBLAS workspaces, 588 MiB per collective
    communicator (32 channels × 2 ring connections × Simple 4 MiB + LL128 + LL), 16 MiB per pipeline
    or ring-attention rank (2 peers × 2 channels × 4 MiB), (ep − 1) × 8 MiB for the all-to-all; a
    group of one rank holds none. Fragmentation scales the counted bytes, not the fixed part."""
    from budgetdsl.cost.reserve import default_reserve

    base = CUDA_CONTEXT + 2 * CUBLAS_WORKSPACE
    assert COLLECTIVE == 32 * 2 * (4 * 2**20 + 120 * 640 * 8 * 8 + 8 * 512 * 8 * 16)
    assert COLLECTIVE == pytest.approx(588 * 2**20, rel=1e-3) and P2P_PEER == 8 * 2**20
    assert default_reserve(1, 1, 1, 1, 1).fixed == base  # one GPU: no communicator
    assert default_reserve(1, 1, 1, 1, 8).fixed == base + COLLECTIVE  # data parallel only
    r = default_reserve(8, 16, 1, 1, 64)  # TP, DP and the pipeline's two neighbours
    assert r.fixed == base + 2 * COLLECTIVE + 2 * P2P_PEER and r.data_parallel == COLLECTIVE
    assert default_reserve(1, 1, 2, 1, 1).fixed == base + COLLECTIVE + 2 * P2P_PEER  # CP 2: grads over dp·cp = 2
    assert default_reserve(1, 1, 1, 8, 8).fixed == base + COLLECTIVE + 7 * P2P_PEER  # EP 8: seven all-to-all peers
    assert "TP 8" in r.detail and "PP 16" in r.detail and "NCCL_BUFFSIZE" in r.detail


def test_the_micro_batch_room_is_the_most_sequences_every_stage_fits():
    """memory.micro_batch_room against counting: the largest k with static + k·per_sequence ≤ free
    on every stage, whatever the bytes a sequence takes (a declared activation_bytes_per_token of
    1 B at 4-token sequences under t = 8 is half a byte a sequence); a stage that stores nothing per
    sequence sets no limit, and one whose static bytes fill the device leaves no room."""
    from budgetdsl.cost.memory import micro_batch_room

    def brute(free, stages):
        if any(static >= free for static, _ in stages):
            return 0
        k = 0
        while all(static + (k + 1) * per <= free for static, per in stages) and k < 10_000:
            k += 1
        return k

    cases = [(100.0, [(40.0, 7.0)]), (100.0, [(40.0, 0.5)]), (100.0, [(40.0, 0.5), (10.0, 1.0)]),
             (100.0, [(99.5, 0.25), (0.0, 0.0)]), (100.0, [(40.0, 6.0), (70.0, 3.0)]), (100.0, [(100.0, 1.0)]),
             (100.0, [(60.0, 10.0)])]
    for free, stages in cases:
        assert micro_batch_room(free, stages) == brute(free, stages), (free, stages)


def test_the_search_room_follows_the_data_parallel_communicator():
    """The layout search reads each count's micro-batch room from one cost model on one replica
    (search_space._quick_all): the data-parallel communicator's buffers are there from 2 replicas on,
    so free_bytes at another replica count is what that count's own cost model has."""
    plan = make_plan(hardware={"mfu": None, "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "none",
                               "zero": 0})
    one, many = build_cost_model(plan, 1), build_cost_model(plan, 8)
    assert one.reserve_bytes + COLLECTIVE == pytest.approx(many.reserve_bytes)
    assert one.free_bytes(8) == pytest.approx(many.free_bytes())
    assert many.free_bytes(1) == pytest.approx(one.free_bytes())
    assert one.free_bytes() > many.free_bytes()


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_the_memory_coefficients_say_what_each_zero_stage_shards(zero):
    """The report explains the bytes per parameter it counts: ZeRO-1 shards the optimizer state,
    ZeRO-2 the gradients too, ZeRO-3 the weights too — each coefficient names the dp shard exactly
    when the stage divides it, and its bytes fall by dp there."""
    plan = make_plan()
    cm = build_cost_model(plan, 1024, Split(zero, 1, 1, "full", True))
    whole = build_cost_model(plan, 1024, Split(0, 1, 1, "full", True))
    for name, stage, label in (("optimizer_bytes", 1, "/ dp (ZeRO-1+)"), ("grads_bytes", 2, "/ dp (ZeRO-2+)"),
                               ("weights_bytes", 3, "/ dp (ZeRO-3)")):
        coef, was = cm.coefficients[name], whole.coefficients[name]
        assert (label in coef.detail) == (zero >= stage), (name, coef.detail)
        assert coef.value == pytest.approx(was.value / (1024 if zero >= stage else 1), rel=1e-12)


def test_the_throughput_coefficients_say_which_mode_produced_them():
    """Predicted from the layout, the achieved rate is f over the modelled seconds per token and
    the fixed time is the bubble, the exposed reduction and the optimizer step; a declared MFU is
    the anchor of that model, and with no shape to model it is G·P·u with nothing added — the
    report must not say one for another."""
    predicted = build_cost_model(make_plan(hardware={"mfu": None}), 1024, Split(1, 1, 1, "full", True)).coefficients
    assert predicted["achieved_flops"].detail.endswith(", predicted")
    assert predicted["fixed_time"].detail.startswith("bubble + exposed data-parallel reduction")
    anchored = build_cost_model(make_plan(), 1024, Split(1, 1, 1, "full", True)).coefficients
    assert anchored["achieved_flops"].detail.endswith(", anchored")
    line = build_cost_model(make_plan(model={"layers": None, "d_model": None, "activation_bytes_per_token": 4e5}),
                            1024, Split(1, 1, 1, "full", True)).coefficients
    assert (line["achieved_flops"].detail, line["fixed_time"].detail) == ("G·P·u", "nothing: inside the declared MFU")


@pytest.mark.parametrize("p", [2, 4])
def test_a_pipelines_memory_is_its_heaviest_stage_wherever_it_stands(p):
    """The device's memory is the heaviest stage's (docs/design.md section 2): with a shallow model
    and a large vocabulary the last stage, holding the fp32 logits of its micro-batch, outweighs
    the first with its p micro-batches in flight — the answer must be the last stage's."""
    plan = make_plan(model={"params": None, "layers": 8, "d_model": 1024, "heads": 16, "vocab": 256000,
                            "seq_len": 4096})
    cm = build_cost_model(plan, 64, Split(1, 1, p, "none", True))
    last = cm.stages[-1]
    assert last.at(1) > max(st.at(1) for st in cm.stages[:-1])
    for micro in (1, 2):
        assert cm.memory_at(micro) == pytest.approx(last.at(micro) * (1 + cm.fragmentation) + cm.reserve_bytes,
                                                    rel=1e-12)


def test_a_memory_remedy_is_priced_against_the_same_micro_batches():
    """A remedy's price is its step time over the plan's at the same one-sequence micro-batches
    and global batch (on a pipeline, the bubble depends on them): the layout itself costs exactly
    1, full recomputation (one more forward) more than 1 and less than 4/3 of the step."""
    from budgetdsl.solve.relaxations import _relative_step_time

    plan = make_plan(hardware={"mfu": None})
    base = build_cost_model(plan, 1024, Split(1, 1, 4, "none", True))
    full = build_cost_model(plan, 1024, Split(1, 1, 4, "full", True))
    assert _relative_step_time(base, base) == 1.0
    ratio = _relative_step_time(base, full)
    assert ratio is not None and 1.0 < ratio < 4 / 3
