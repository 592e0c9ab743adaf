"""Context parallelism (issue 24, item 4): GPUs = t·p·cp·dp, activations and logits ÷ cp, the same
work per GPU for the same global batch, the ring attention traffic against its closed form and
what the attention hides of it, each rule's located error, and the exports that carry it or
refuse it."""

import json

import pytest
from plan_rules import assert_refused_located, write
from solver_plans import make_plan

from budgetdsl.cost.context_parallel import ring_bytes_per_sequence, ring_exposed_seconds
from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.cost.gemm_shape import gemm_time, sharded_matmuls
from budgetdsl.hardware.gpus import PRESETS
from budgetdsl.plan.loader import load_plan

LLAMA3_70B = {"params": None, "layers": 80, "d_model": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
              "mlp": "swiglu", "tied_embeddings": False, "vocab": 128256, "seq_len": 8192}
PREDICTED = {"gpu": "H100-SXM5-80GB", "mfu": None, "overlap": None, "network": None, "zero": 1,
             "tensor_parallel": 8, "pipeline_parallel": 4, "recompute": "none", "sequence_parallel": True}
SPLIT = Split(1, 8, 4, "none", True)


def _cm(cp: int, gpus: int = 1024, **hw):
    plan = make_plan(model=LLAMA3_70B, hardware={**PREDICTED, "gpus": gpus, "context_parallel": cp, **hw})
    return build_cost_model(plan, gpus, SPLIT)


@pytest.mark.parametrize("cp", [2, 4])
def test_each_gpu_holds_one_cpth_of_a_sequences_activations_and_logits(cp):
    one, many = _cm(1), _cm(cp)
    assert many.data_parallel == 1024 // (8 * 4 * cp)
    for a, b in zip(one.stages, many.stages):
        assert b.activations_per_sequence == pytest.approx(a.activations_per_sequence / cp, rel=1e-12)
        assert b.logits_per_sequence == pytest.approx(a.logits_per_sequence / cp, rel=1e-12)
        # the weights are whole on every cp rank; ZeRO-1 shards the optimizer over dp·cp, the same ranks
        assert (b.weights, b.grads) == (a.weights, a.grads)
        assert b.optimizer == pytest.approx(a.optimizer, rel=1e-12)
    assert "/ cp" in many.coefficients["activation_bytes_per_sequence"].detail
    assert "ring" in many.coefficients["context_parallel"].detail


def test_the_same_global_batch_is_the_same_work_per_gpu():
    """cp = 2 halves the replicas and each GPU's share of a sequence: compute and tensor-parallel
    traffic per step are unchanged for the same global batch at one sequence per micro-batch; what a
    micro-batch pays whatever its size is not shared: twice the micro-batches pay it twice (the
    collectives' latency, and the GEMMs' fixed time: the same GEMMs with half the rows each,
    budgetdsl.cost.gemm_shape)."""
    batch = 256 * 8192.0
    one, two = _cm(1).breakdown(batch, 256 // 32), _cm(2).breakdown(batch, 256 // 16)
    h100 = PRESETS["H100-SXM5-80GB"]
    layer = gemm_time(h100.gemm, sharded_matmuls(LLAMA3_70B["d_model"], 64, 8, 28672, "swiglu", 8, True))
    gemm_fixed = 21 * layer.fixed / (h100.peak_flops * h100.kernel_efficiency)  # the slowest stage's 21 layers
    assert gemm_fixed > 0
    assert two.compute - (two.micro_batches - one.micro_batches) * gemm_fixed == pytest.approx(one.compute, rel=1e-12)
    # the slowest stage's layers, 4 tensor-parallel collectives each (sequence parallel: a reduce-scatter
    # and an all-gather of 8.4 + 7·3.4 µs each) per micro-batch; cp = 2 runs twice the micro-batches
    assert max(one.stage_layers) == max(two.stage_layers) == 21
    alpha = 21 * 4 * 2 * (8.4 + 7 * 3.4) * 1e-6
    assert two.tp_comm - (two.micro_batches - one.micro_batches) * alpha == pytest.approx(one.tp_comm, rel=1e-12)
    assert two.micro_batch == one.micro_batch == 1


def test_the_ring_passes_keys_and_values_three_times_per_step():
    s, d_kv, t, cp = 8192, 1024.0, 8, 4
    block = 2 * (s / cp) * d_kv * 2 / t  # K and V of one chunk, bf16, heads ÷ t
    assert ring_bytes_per_sequence(s, d_kv, t, cp) == 3 * (cp - 1) * block
    assert ring_bytes_per_sequence(s, d_kv, t, 1) == 0.0


def test_only_the_traffic_the_attention_does_not_hide_is_exposed():
    s, d, d_kv, t, cp = 8192, 8192, 1024.0, 8, 4
    rate = 500e12
    attention = 12.0 * d * s * s / (t * cp) / rate
    nbytes = ring_bytes_per_sequence(s, d_kv, t, cp)
    slow = nbytes / attention / 4  # a link four times too slow to hide it
    assert ring_exposed_seconds(s, d, d_kv, t, cp, 8, 1e15, slow, rate) == pytest.approx(3 * attention, rel=1e-12)
    assert ring_exposed_seconds(s, d, d_kv, t, cp, 8, 1e15, 1e15, rate) == 0.0


def test_a_slow_network_shows_the_ring_in_the_step():
    cm = _cm(4, network=1e8)  # 0.8 Gb/s: the ring cannot hide
    bd = cm.breakdown(256 * 8192.0, 256 // 8)
    assert bd.cp_comm > 0 and "cp_comm" in bd.seconds()
    assert "cp_comm" not in _cm(1, network=1e8).breakdown(256 * 8192.0, 256 // 32).seconds()



def test_grouped_query_attention_passes_fewer_keys_and_values_around_the_ring():
    """The ring sends each chunk's keys and values, kv_heads of them (grouped-query attention):
    Llama 3 70B's 8 of 64 heads expose less ring time on a slow network than 64 of 64 would, by
    the bytes `ring_bytes_per_sequence` counts for each."""
    gqa = _cm(4, network=1e8).breakdown(256 * 8192.0, 256 // 8)
    mha_plan = make_plan(model={**LLAMA3_70B, "kv_heads": 64},
                         hardware={**PREDICTED, "gpus": 1024, "context_parallel": 4, "network": 1e8})
    mha = build_cost_model(mha_plan, 1024, SPLIT).breakdown(256 * 8192.0, 256 // 8)
    assert 0 < gqa.cp_comm < mha.cp_comm
    assert ring_bytes_per_sequence(8192, 1024.0, 8, 4) < ring_bytes_per_sequence(8192, 8192.0, 8, 4)


MODEL = "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}"
BAD = {
    "a sequence that does not split into 2·cp chunks": (
        MODEL, "hardware: {gpu: H100-SXM5-80GB, gpus: 48, context_parallel: 3}",
        "plan.yaml:3:43: error[plan-rule]: context_parallel (3) must split seq_len (4096) into 2 × cp = 6 equal "
        "chunks", "e.g. context_parallel: 2"),
    "GPUs that do not split into t·p·cp": (
        MODEL, "hardware: {gpu: H100-SXM5-80GB, gpus: 48, tensor_parallel: 8, context_parallel: 4}",
        "plan.yaml:3:33: error[plan-rule]: 48 GPUs cannot be split into tensor_parallel × pipeline_parallel × "
        "context_parallel = 32 groups", ""),
    "context parallelism without fused attention": (
        MODEL, "hardware: {gpu: H100-SXM5-80GB, gpus: 64, context_parallel: 2, flash_attention: false}",
        "plan.yaml:3:43: error[plan-rule]: context_parallel (2) runs ring attention in fused attention kernels",
        "set flash_attention: true"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_context_rule_fails_located_with_a_hint(tmp_path, name, capsys):
    assert_refused_located(tmp_path, capsys, *BAD[name])


CP_PLAN = """\
    name: llama3-70b-cp
    model: {layers: 80, d_model: 8192, heads: 64, kv_heads: 8, ffn_hidden: 28672, mlp: swiglu,
            tied_embeddings: false, vocab: 128256, seq_len: 8192}
    hardware: {gpu: H100-SXM5-80GB, gpus: 1024, tensor_parallel: 8, pipeline_parallel: 4, context_parallel: 2,
               zero: 1, recompute: none, sequence_parallel: true}
    target: {tokens: 15T, at_batch: 16M}
    noise: {b_crit: 16M}
    """


def test_the_exports_carry_context_parallelism_or_refuse_it(tmp_path, capsys):
    from budgetdsl.cli import main

    path = write(tmp_path, CP_PLAN)
    assert main(["export", "--to", "megatron", str(path)]) == 0
    out = capsys.readouterr().out
    assert "--context-parallel-size 2" in out and "x context 2" in out
    assert main(["plan", "--format", "json", str(path)]) == 0
    assert '"data_parallel": 16' in capsys.readouterr().out  # 1024 / (8 · 4 · 2)
    assert main(["export", "--to", "torchrun", str(path)]) == 0
    assert "BUDGETDSL_CONTEXT_PARALLEL=2" in capsys.readouterr().out
    for fmt in ("hf", "deepspeed"):
        assert main(["export", "--to", fmt, str(path)]) == 2
        assert "context parallelism 2 (hardware.context_parallel)" in capsys.readouterr().err


AUTO_PLAN = """\
    name: long-context
    model: {params: 1.3B, layers: 24, d_model: 2048, heads: 16, seq_len: 65536}
    hardware: {gpu: H100-SXM5-80GB, gpus: 64, context_parallel: auto, zero: 1, recompute: none}
    target: {tokens: 26B, at_batch: 4M}
    noise: {b_crit: 4M}
    """


def test_context_parallel_auto_is_searched_reported_and_exported(tmp_path, capsys):
    """`context_parallel: auto` (issue 24 item 5): the search tries the degrees that split the
    sequence into 2·cp chunks; the chosen one is in the answer, the layout line and the export.
    At 65,536 tokens a sequence's activations do not fit one GPU without it."""
    from budgetdsl.cli import main
    from budgetdsl.solve.solver import solve

    path = write(tmp_path, AUTO_PLAN)
    sol = solve(load_plan(path))
    cp = sol.batch.context_parallel
    assert sol.feasible and cp is not None and cp > 1 and 65536 % (2 * cp) == 0
    assert sol.gpus == sol.batch.tensor_parallel * sol.batch.pipeline_parallel * cp * sol.batch.data_parallel
    assert main(["plan", str(path)]) == 0
    assert f"· CP {cp} (searched)" in capsys.readouterr().out
    assert main(["export", "--to", "megatron", str(path)]) == 0
    assert f"--context-parallel-size {cp}" in capsys.readouterr().out
    pinned = write(tmp_path, AUTO_PLAN.replace("context_parallel: auto", f"context_parallel: {cp}"))
    assert main(["plan", "--format", "json", str(pinned)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "context_parallel" not in answer["batch"]  # only a searched degree is in the answer
    assert answer["assumptions"]["context_parallel"]["value"] == cp


@pytest.mark.parametrize(("flash", "seq_len", "degrees"), [(True, 8192, [1, 2, 4, 8, 16]), (True, 24, [1, 2, 4]),
                                                           (False, 8192, [1])])
def test_context_parallel_auto_tries_the_degrees_the_ring_can_split(flash, seq_len, degrees):
    """`context_parallel: auto` searches powers of two up to 16 whose 2·cp chunks divide seq_len (the
    load-balanced ring); without fused attention there is no ring attention, so only cp = 1."""
    from budgetdsl.solve.layout_search import context_degrees

    plan = make_plan(model={"seq_len": seq_len}, hardware={"context_parallel": "auto", "flash_attention": flash})
    assert context_degrees(plan) == degrees


@pytest.mark.parametrize("t, cp, inside", [(4, 2, True), (2, 4, True), (2, 2, True), (8, 2, False), (4, 4, False)])
def test_the_ring_runs_on_nvlink_while_its_ranks_fill_at_most_one_node(t, cp, inside):
    """The t·cp ranks of a sequence sit in one node while t·cp ≤ GPUs per node (8 fill it exactly):
    the ring passes K and V over NVLink there, over the network past it."""
    s, d, d_kv = 32768, 8192, 1024.0
    nvlink, nic = 450e9, 50e9
    exposed = ring_exposed_seconds(s, d, d_kv, t, cp, 8, nvlink, nic, 1e30)  # no compute to hide under
    nbytes = ring_bytes_per_sequence(s, d_kv, t, cp)
    assert exposed == pytest.approx(nbytes / (nvlink if inside else nic))


def test_the_ring_is_priced_on_the_stage_with_the_most_layers():
    """Each layer of a stage passes its ring; the step waits for the stage with the most layers: 5
    layers on 2 stages (the last lighter by the LM head: here none, so [2, 3]) expose 3 layers'
    ring a micro-batch, as many as 3 layers on one stage."""
    from budgetdsl.cost.throughput import Device, Layout, Shape, step_time

    def shape(layers):
        n = layers * 12 * 4096**2
        return Shape(n, layers, 4096, 32768, 6 * n + 12 * layers * 4096 * 32768, 32, None)

    slow = Device(peak_flops=989e12, hbm_bandwidth=3.35e12, kernel_efficiency=0.5, intra_node=1e9, network=1e9,
                  gpus_per_node=8)
    split = step_time(shape(5), slow, Layout(4, pipeline_parallel=2, context_parallel=2), 1, 1)
    assert sorted(split.stage_layers) == [2, 3]
    whole = step_time(shape(3), slow, Layout(2, context_parallel=2), 1, 1)
    assert split.cp_comm > 0 and split.cp_comm == pytest.approx(whole.cp_comm, rel=1e-9)
