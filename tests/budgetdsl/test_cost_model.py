"""The cost model (DESIGN.md section 2) against hand-computed closed forms."""

import pytest

from budgetdsl.cost_model import RESERVE_FRACTION, Split, activation_bytes_per_layer, build_cost_model
from budgetdsl.diagnostics import PlanError
from budgetdsl.gpus import GiB, PRESETS
from budgetdsl.solver import solve
from solver_plans import make_plan

N, L, D, A, S = 6.74e9, 32, 4096, 32, 4096


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


def test_step_time_and_all_reduce():
    cm = build_cost_model(make_plan(hardware={"step_overhead": 0.1}), 1024)
    dp = 1024
    t_comm = 2 * (dp - 1) / dp * 2 * N / 25e9 * (1 - 0.8)  # ring all-reduce of bf16 gradients
    assert cm.comm_time == pytest.approx(t_comm, rel=1e-12)
    b = 4194304.0
    assert cm.step_time(b) == pytest.approx(cm.flops_per_token * b / (1024 * 312e12 * 0.42) + t_comm + 0.1,
                                            rel=1e-12)
    # one replica: nothing to reduce
    assert build_cost_model(make_plan(hardware={"gpus": 8, "tensor_parallel": 8}), 8).comm_time == 0.0
    # ZeRO-3 moves 1.5× the bytes (Rajbhandari et al. 2020, section 7.2)
    z3 = build_cost_model(make_plan(hardware={"zero": 3}), 1024)
    assert z3.comm_time == pytest.approx(1.5 * t_comm, rel=1e-12)


def test_memory_by_zero_stage():
    dp = 1024
    expect = {0: (2 * N, 2 * N, 12 * N), 1: (2 * N, 2 * N, 12 * N / dp),
              2: (2 * N, 2 * N / dp, 12 * N / dp), 3: (2 * N / dp, 2 * N / dp, 12 * N / dp)}
    for zero, (w, g, o) in expect.items():
        cm = build_cost_model(make_plan(hardware={"zero": zero}), 1024)
        assert (cm.weights_bytes, cm.grads_bytes, cm.optimizer_bytes) == pytest.approx((w, g, o), rel=1e-12)


def test_activations_korthikanti():
    # eq. 2: s·d·(34 + 5·a·s/d) per layer without recomputation; 34·s·d with flash/selective; 2·s·d full
    assert activation_bytes_per_layer(S, D, A, "none", False) == S * D * (34 + 5 * A * S / D)
    assert activation_bytes_per_layer(S, D, A, "none", True) == 34 * S * D
    assert activation_bytes_per_layer(S, D, None, "selective", False) == 34 * S * D
    assert activation_bytes_per_layer(S, D, A, "full", False) == 2 * S * D
    assert activation_bytes_per_layer(S, D, None, "none", False) is None
    cm = build_cost_model(make_plan(hardware={"gpus": 1024, "tensor_parallel": 2, "pipeline_parallel": 4}), 1024)
    # L/p = 8 layers per device, 4 micro-batches in flight on the first 1F1B stage, over t = 2
    assert cm.activation_bytes_per_sequence == pytest.approx(34 * S * D * (L / 4) * 4 / 2, rel=1e-12)
    assert cm.data_parallel == 128
    over = make_plan(model={"activation_bytes_per_token": 1e6}, hardware={"tensor_parallel": 2})
    assert build_cost_model(over, 1024).activation_bytes_per_sequence == pytest.approx(1e6 * S / 2)


def test_largest_micro_batch_is_exact():
    cm = build_cost_model(make_plan(), 1024)
    m = cm.micro_batch_max
    memory = PRESETS["A100-SXM4-80GB"].memory
    assert cm.reserve_bytes == RESERVE_FRACTION * memory
    # hand computation for Llama-2-7B, ZeRO-1 over 1024: 2N + 2N + 12N/1024, 34·s·d·L per sequence
    free = memory * (1 - RESERVE_FRACTION) - (4 * N + 12 * N / 1024)
    assert m == int(free // (34 * S * D * L)) == 2
    assert cm.memory_at(m) <= memory < cm.memory_at(m + 1)


def test_origins_are_reported():
    coefs = build_cost_model(make_plan(), 1024).coefficients
    assert coefs["peak_flops"].origin == "preset" and "A100" in coefs["peak_flops"].detail
    assert coefs["network"].origin == "declared"
    assert coefs["mfu"].origin == "declared"
    assert coefs["step_overhead"].origin == "default"
    assert coefs["micro_batch_max"].origin == "derived"
    plan = make_plan(hardware={"peak_flops": 1e15, "memory_per_device": 96 * GiB})
    coefs = build_cost_model(plan, 1024).coefficients
    assert coefs["peak_flops"].origin == "declared" and coefs["peak_flops"].value == 1e15
    assert coefs["memory_per_device"].value == 96 * GiB


def test_a_split_override_changes_only_the_layout():
    plan = make_plan()
    base = build_cost_model(plan, 1024)
    alt = build_cost_model(plan, 1024, Split(3, 1, 1, "full", True))
    assert alt.weights_bytes < base.weights_bytes and alt.activation_bytes_per_sequence < base.activation_bytes_per_sequence
    assert alt.flops_per_token == base.flops_per_token


def test_unknown_shape_is_a_located_plan_error():
    plan = make_plan(model={"layers": None, "d_model": None})
    with pytest.raises(PlanError) as exc:
        solve(plan)
    (d,) = exc.value.diagnostics
    assert d.code == "shape-unknown"
    assert "model.layers and model.d_model" in d.message and "activation_bytes_per_token" in d.message


def test_a_declared_memory_reserve_replaces_the_default():
    default = build_cost_model(make_plan(), 1024)
    assert default.reserve_bytes == pytest.approx(RESERVE_FRACTION * 80 * GiB)
    assert default.coefficients["reserve_bytes"].origin == "default"
    declared = build_cost_model(make_plan(hardware={"memory_reserve": 2 * GiB}), 1024)
    assert declared.coefficients["reserve_bytes"].origin == "declared"
    assert declared.memory_at(1) - default.memory_at(1) == pytest.approx(2 * GiB - RESERVE_FRACTION * 80 * GiB)
    free = 80 * GiB - 2 * GiB - declared.static_bytes
    assert declared.micro_batch_max == int(free // declared.activation_bytes_per_sequence)


def test_replicas_in_one_node_all_reduce_over_nvlink():
    """8 replicas in one DGX A100 node reduce over NVLink (300 GB/s a direction), not the NICs."""
    one_node = build_cost_model(make_plan(hardware={"gpus": 8}), 8)
    assert one_node.network == 300e9
    assert one_node.coefficients["network"].detail.startswith("within one node: A100-SXM4-80GB")
    assert one_node.comm_time == pytest.approx(2 * 7 / 8 * 2 * N / 300e9 * (1 - 0.8), rel=1e-12)
    declared = build_cost_model(make_plan(hardware={"gpus": 8, "intra_node_network": 100e9}), 8)
    assert (declared.network, declared.coefficients["network"].origin) == (100e9, "declared")
    two_nodes = build_cost_model(make_plan(hardware={"gpus": 16}), 16)
    assert two_nodes.network == 25e9  # hardware.network, 200 Gb/s


def test_the_pipeline_bubble():
    """1F1B idles (p - 1)/m of the compute for m micro-batches a step (Narayanan et al. 2021)."""
    cm = build_cost_model(make_plan(hardware={"gpus": 1024, "pipeline_parallel": 4}), 1024)
    b = 4194304.0
    compute = cm.flops_per_token * b / cm.rate
    assert cm.step_time(b, 12) == pytest.approx(compute * (1 + 3 / 12) + cm.comm_time + cm.step_overhead,
                                                rel=1e-12)
    # without m: one-sequence micro-batches, m = B/(dp·s), and the bubble is a constant per step
    m = b / (cm.data_parallel * S)
    assert cm.step_time(b) == pytest.approx(compute * (1 + 3 / m) + cm.comm_time + cm.step_overhead, rel=1e-12)
    assert cm.bubble_time == pytest.approx(3 * cm.flops_per_token * cm.data_parallel * S / cm.rate, rel=1e-12)
    assert cm.step_time(b, round(m)) == pytest.approx(cm.step_time(b), rel=1e-12)
    flat = build_cost_model(make_plan(), 1024)
    assert flat.step_time(b, 1) == flat.step_time(b) and flat.bubble_time == 0.0  # no pipeline


def test_a_pipelined_run_takes_one_sequence_micro_batches():
    plan = make_plan(hardware={"gpus": 1024, "pipeline_parallel": 4}, run={"batch": 4194304.0})
    sol = solve(plan)
    assert (sol.batch.micro_batch, sol.batch.grad_accum, sol.batch.data_parallel) == (1, 4, 256)
