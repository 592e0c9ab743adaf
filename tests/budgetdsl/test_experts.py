"""Mixture-of-experts models and expert parallelism (issue 24, item 2): parameters from the shape
against published totals and active counts, FLOPs per token from the active count, memory sharded
by Megatron-Core's rule (routed experts ÷ etp·ep with their own data-parallel domain, the rest ÷ t),
the all-to-all dispatch time against its closed form, each new key's located error, and the example
plan through the solver and the Megatron export."""

import pathlib
import textwrap

import pytest
from plan_rules import assert_refused_located, write
from solver_plans import make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.cost.experts import Experts, all_to_all_seconds, capacity_padding_flops, moe_layers_per_stage
from budgetdsl.cost.memory import BYTES_OPTIMIZER, BYTES_WEIGHTS
from budgetdsl.cost.throughput import Layout
from budgetdsl.hardware.gpus import PRESETS
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import mlp_params, transformer_params

REPO = pathlib.Path(__file__).resolve().parents[2]

# Mixtral 8x7B's config.json (Jiang et al. 2024, Table 1): the safetensors hold 46,702,792,704
# parameters; the paper: 46.7B total, 12.9B active (13B).
MIXTRAL = dict(layers=32, d_model=4096, vocab=32000, heads=32, kv_heads=8, ffn_hidden=14336, mlp="swiglu",
               tied_embeddings=False, experts=8, experts_per_token=2)
# Qwen1.5-MoE-A2.7B's config.json: 60 experts of 1408, top-4, a shared expert of 5632 = 4 × 1408;
# the model card: 14.3B total, 2.7B active. The checkpoint's 14,315,784,192 also holds the q/k/v
# biases (3·2048 per layer) and the shared expert's sigmoid gate (2048 per layer), which the shape
# (no biases, like Llama's) does not count.
QWEN_MOE = dict(layers=24, d_model=2048, vocab=151936, heads=16, kv_heads=16, ffn_hidden=5632, mlp="swiglu",
                tied_embeddings=False, experts=60, experts_per_token=4, expert_ffn_hidden=1408, shared_experts=4)
QWEN_CHECKPOINT = 14_315_784_192
QWEN_EXTRA = 24 * (3 * 2048 + 2048)


def test_mixtral_8x7b_counts_its_published_total_and_active_parameters():
    total = transformer_params(**MIXTRAL)
    active = transformer_params(**MIXTRAL, active=True)
    assert total == 46_702_792_704
    assert round(total / 1e9, 1) == 46.7 and round(active / 1e9, 1) == 12.9
    # the active count is the total less the 6 experts of 8 a token skips, in each of the 32 layers
    assert total - active == 32 * 6 * mlp_params(4096, 14336, "swiglu")


def test_qwen_moe_counts_its_checkpoint_less_the_biases_the_shape_leaves_out():
    total = transformer_params(**QWEN_MOE)
    assert total + QWEN_EXTRA == QWEN_CHECKPOINT
    active = transformer_params(**QWEN_MOE, active=True)
    assert round(total / 1e9, 1) == 14.3 and round(active / 1e9, 1) == 2.7


def test_deepseek_v3_active_parameters_from_its_published_total_and_moe_shape(tmp_path):
    """DeepSeek-V3 (DeepSeek-AI 2024, §4.2): 61 layers, the first 3 dense, 256 routed experts of
    2048 and 1 shared, top-8, width 7168; 671B total, 37B active. `params` is declared here, so the
    check covers the MoE accounting alone: the published total less the 58 × 248 experts a token
    skips (37.5B; the paper rounds to 37B). Its multi-latent attention counted from the shape:
    tests/budgetdsl/test_latent_attention.py."""
    path = tmp_path / "v3.yaml"
    path.write_text(textwrap.dedent("""\
        name: v3
        model: {params: 671B, layers: 61, d_model: 7168, heads: 128, vocab: 129280, tied_embeddings: false,
                mlp: swiglu, ffn_hidden: 18432, experts: 256, experts_per_token: 8, expert_ffn_hidden: 2048,
                shared_experts: 1, dense_layers: 3, seq_len: 4096}
        hardware: {gpu: H800-SXM5-80GB, gpus: 2048, mfu: 0.4}
        target: {tokens: 14.8T, at_batch: 60M}
        noise: {b_crit: 60M}
        """))
    m = load_plan(path).model
    skipped = 58 * (256 - 8) * 3 * 7168 * 2048
    assert m.active_param_count == 671e9 - skipped
    assert 37e9 <= m.active_param_count < 38e9


def test_flops_per_token_follow_the_active_parameters():
    plan = make_plan(model={"params": None, "seq_len": 4096, **MIXTRAL})
    cm = build_cost_model(plan, 1024, Split(1, 1, 1, "full", True))
    active = transformer_params(**MIXTRAL, active=True)
    assert cm.flops_per_token == 6 * (active - 32000 * 4096) + 12 * 32 * 4096 * 4096
    assert cm.params == transformer_params(**MIXTRAL)  # memory holds all of them
    assert "active" in cm.coefficients["flops_per_token"].detail
    assert cm.coefficients["active_params"].value == active


PREDICTED = {"gpu": "H100-SXM5-80GB", "mfu": None, "overlap": None, "network": None, "zero": 1,
             "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "full"}


FULL = Split(1, 1, 1, "full", True)


def _mixtral(gpus=64, split=FULL, **hw):
    plan = make_plan(model={"params": None, "seq_len": 4096, **MIXTRAL}, hardware={**PREDICTED, "gpus": gpus, **hw})
    return build_cost_model(plan, gpus, split)


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_expert_parallelism_shards_the_routed_experts_and_their_optimizer_over_edp(ep):
    """Megatron-Core's rule: the routed experts ÷ ep (etp = t = 1), attention, norms, router and
    embeddings ÷ t; ZeRO-1 shards the experts' optimizer state over edp = dp / ep copies and the
    rest over dp."""
    one, many = _mixtral(), _mixtral(expert_parallel=ep)
    routed = 32 * 8 * mlp_params(4096, 14336, "swiglu")
    assert one.weights_bytes - many.weights_bytes == pytest.approx(BYTES_WEIGHTS * routed * (1 - 1 / ep), rel=1e-12)
    dp = 64
    expected = BYTES_OPTIMIZER * (routed / ep / (dp // ep) - routed / dp)  # routed: ÷ ep, then ÷ edp
    assert many.optimizer_bytes - one.optimizer_bytes == pytest.approx(expected, rel=1e-9)
    assert f"etp·ep = 1·{ep}" in many.coefficients["weights_bytes"].detail
    assert "edp = " + str(dp // ep) in many.coefficients["optimizer_bytes"].detail


def test_the_dense_layers_sit_on_the_first_stages():
    assert moe_layers_per_stage((2, 2, 2), 3) == [0, 1, 2]
    assert moe_layers_per_stage((5, 5), 0) == [5, 5]
    ex = Experts(4, 2, 1e6, dense_layers=2)
    assert moe_layers_per_stage((1, 1, 2), ex.dense_layers) == [0, 0, 2]


def test_dispatch_and_combine_are_four_all_to_alls_of_the_routed_copies():
    """Inside one node (ep = 8): each GPU sends 7/8 of k·s·d bf16 values per all-to-all over NVLink,
    4 per MoE layer (dispatch and combine, forward and backward), per sequence of micro-batch."""
    h100 = PRESETS["H100-SXM5-80GB"]
    cm = _mixtral(expert_parallel=8, split=Split(1, 1, 1, "none", True), recompute="none")
    bd = cm.breakdown(64 * 4096.0, 1)  # one sequence per GPU, one micro-batch
    per_layer = 4 * (2 * 4096 * 4096 * 2.0) * 7 / 8 / h100.intra_node
    p2p = (8.4 + 3.4) * 1e-6  # each all-to-all's latency: one NCCL ring step over NVLink (its ep − 1 sends at once)
    assert bd.ep_comm == pytest.approx(32 * (per_layer + 4 * p2p), rel=1e-12)
    assert "ep_comm" in bd.seconds() and "ep_comm" not in _dense_breakdown().seconds()
    assert "balanced" in cm.coefficients["experts"].detail and "dropless" in cm.coefficients["experts"].detail


def _dense_breakdown():
    plan = make_plan(model={"params": None, "seq_len": 4096, **{k: v for k, v in MIXTRAL.items()
                                                               if not k.startswith("experts")}},
                     hardware={**PREDICTED, "gpus": 64})
    return build_cost_model(plan, 64, Split(1, 1, 1, "full", True)).breakdown(64 * 4096.0, 1)


def test_an_all_to_all_across_nodes_moves_at_the_nic():
    nv, nic = 450e9, 50e9
    inside = all_to_all_seconds(1e9, 8, 1, 8, nv, nic)
    across = all_to_all_seconds(1e9, 16, 1, 8, nv, nic)
    assert inside == pytest.approx(1e9 * 7 / 8 / nv)
    assert across == pytest.approx(1e9 * 8 / 16 / nic)  # half the peers are off the node
    assert all_to_all_seconds(1e9, 4, 8, 8, nv, nic) == pytest.approx(1e9 * 3 / 4 / nic)  # etp fills the node
    assert all_to_all_seconds(1e9, 1, 1, 8, nv, nic) == 0.0


def test_a_capacity_factor_pads_the_dispatch_and_the_expert_gemms():
    dropless = _mixtral(expert_parallel=8).breakdown(64 * 4096.0, 1)
    padded_plan = make_plan(model={"params": None, "seq_len": 4096, **MIXTRAL, "capacity_factor": 1.25},
                            hardware={**PREDICTED, "gpus": 64, "expert_parallel": 8})
    padded = build_cost_model(padded_plan, 64, Split(1, 1, 1, "full", True))
    assert padded.breakdown(64 * 4096.0, 1).ep_comm > 1.25 * dropless.ep_comm  # 1.25× traffic + padding work
    assert padded.flops_per_token == _mixtral().flops_per_token  # model FLOPs count the routed tokens
    assert "capacity factor 1.25" in padded.coefficients["experts"].detail


def test_capacity_padding_is_the_empty_slots_gemm_work():
    """6·(c − 1)·k·W_e per token and MoE layer: the slots a capacity factor c adds past the k routed
    copies run the expert GEMMs on padding (0 at c = 1 and dropless)."""
    w_e = 3 * 4096 * 14336
    assert capacity_padding_flops(Experts(8, 2, w_e, capacity_factor=1.25)) == pytest.approx(6 * 0.25 * 2 * w_e)
    assert capacity_padding_flops(Experts(8, 2, w_e, capacity_factor=1.0)) == 0.0
    assert capacity_padding_flops(Experts(8, 2, w_e)) == 0.0



MOE_MODEL = "model: {layers: 32, d_model: 4096, heads: 32, vocab: 32000, seq_len: 4096, experts: 8, "
BAD = {
    "more experts per token than experts": (
        MOE_MODEL + "experts_per_token: 9}", "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:88: error[plan-rule]: experts_per_token (9) must be at most experts (8)",
        "e.g. experts_per_token: 2"),
    "experts without experts_per_token": (
        "model: {layers: 32, d_model: 4096, heads: 32, vocab: 32000, seq_len: 4096, experts: 8}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:76: error[plan-rule]: experts needs experts_per_token", "e.g. experts_per_token: 2"),
    "a MoE key on a dense model": (
        "model: {layers: 32, d_model: 4096, heads: 32, vocab: 32000, seq_len: 4096, experts_per_token: 2}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:76: error[plan-rule]: experts_per_token describes a mixture-of-experts layer; it needs "
        "experts", "e.g. experts: 8"),
    "expert parallelism that does not divide the experts": (
        MOE_MODEL + "experts_per_token: 2}", "hardware: {gpu: H100-SXM5-80GB, gpus: 64, expert_parallel: 3}",
        "plan.yaml:3:43: error[plan-rule]: expert_parallel (3) must divide model.experts (8)",
        "e.g. expert_parallel: 2"),
    "expert parallelism on a dense model": (
        "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64, expert_parallel: 8}",
        "plan.yaml:3:43: error[plan-rule]: expert_parallel (8) splits the routed experts", "set model.experts"),
    "expert groups that do not fill a stage": (
        MOE_MODEL + "experts_per_token: 2}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 8, pipeline_parallel: 2, expert_parallel: 8}",
        "plan.yaml:3:64: error[plan-rule]: the 4 GPUs of a pipeline stage (tensor × context × data parallel) "
        "cannot be split into expert_tensor_parallel × expert_parallel = 8 expert groups",
        "e.g. expert_parallel: 4"),
    # below 1 every expert drops tokens at its mean load; the padding term would price the GEMMs
    # below the routed tokens' work (a schema-fuzzed plan found a negative step time from it)
    "a capacity factor below one": (
        MOE_MODEL + "experts_per_token: 2, capacity_factor: 0.6}", "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:127: error[out-of-range]: must be at least 1, got 0.6", ""),
    "all the layers dense": (
        MOE_MODEL + "experts_per_token: 2, dense_layers: 32}", "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "error[plan-rule]: dense_layers (32) must be fewer than layers (32)", "e.g. dense_layers: 3"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_moe_key_fails_located_with_a_hint(tmp_path, name, capsys):
    assert_refused_located(tmp_path, capsys, *BAD[name])


def test_the_mixtral_example_plans_and_exports_megatron_moe_flags(capsys):
    from budgetdsl.cli import main

    plan = str(REPO / "plans" / "mixtral-8x7b.yaml")
    assert main(["plan", plan]) == 0
    out = capsys.readouterr().out
    assert "ep_comm" in out and "active_params" in out
    assert main(["export", "--to", "megatron", plan]) == 0
    text = capsys.readouterr().out
    for flag in ("--num-experts 8", "--moe-router-topk 2", "--moe-ffn-hidden-size 14336",
                 "--expert-model-parallel-size 8", "--moe-token-dispatcher-type alltoall"):
        assert flag in text
    assert main(["export", "--to", "hf", plan]) == 2
    assert "expert parallelism 8" in capsys.readouterr().err


def test_expert_parallel_auto_searches_the_divisors_of_the_experts(tmp_path, capsys):
    """`expert_parallel: auto` (issue 24 item 5): the search tries the powers of two that divide
    model.experts; the answer names the chosen degree, and the Megatron export writes it."""
    from budgetdsl.cli import main
    from budgetdsl.solve.layout_search import candidates
    from budgetdsl.solve.solver import solve

    text = (REPO / "plans" / "mixtral-8x7b.yaml").read_text().replace("expert_parallel: 8", "expert_parallel: auto")
    path = tmp_path / "mixtral-auto.yaml"
    path.write_text(text)
    plan = load_plan(path)
    assert {c.expert_parallel for c in candidates(plan)} == {1, 2, 4, 8}
    sol = solve(plan)
    ep = sol.batch.expert_parallel
    assert sol.feasible and ep in (1, 2, 4, 8)
    assert main(["export", "--to", "megatron", str(path)]) == 0
    assert f"--expert-model-parallel-size {ep}" in capsys.readouterr().out


def test_the_schema_fuzzer_reaches_the_moe_and_parallel_keys():
    """tests/budgetdsl/schema_plans.py draws mixture-of-experts plans with expert and context
    parallelism from the committed schema and makes them valid (test_schema_fuzz runs them through
    the solver and every export)."""
    from hypothesis import HealthCheck, given, settings
    from schema_plans import plans

    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plans())
    def draw(doc):
        model, hw = doc["model"], doc["hardware"]
        seen.update(f"model.{k}" for k in ("experts", "expert_ffn_hidden", "shared_experts", "dense_layers",
                                           "capacity_factor") if model.get(k))
        seen.update(f"hardware.{k}>1" for k in ("expert_parallel", "context_parallel") if hw.get(k, 1) > 1)

    draw()
    assert {"model.experts", "model.expert_ffn_hidden", "model.shared_experts", "model.capacity_factor",
            "hardware.expert_parallel>1", "hardware.context_parallel>1"} <= seen, seen


def test_a_moe_plan_that_does_not_fit_is_offered_more_expert_parallelism(tmp_path):
    """Memory remedies name the next expert-parallel degrees with their numbers; ep = 8 (one expert
    per GPU) fits where ep = 1 does not."""
    from budgetdsl.solve.solver import solve

    path = write(tmp_path, """\
        name: mixtral-oom
        model: {layers: 32, d_model: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, mlp: swiglu,
                tied_embeddings: false, vocab: 32000, seq_len: 4096, experts: 8, experts_per_token: 2}
        hardware: {gpu: H100-SXM5-80GB, gpus: 64, tensor_parallel: 1, pipeline_parallel: 1, zero: 1,
                   recompute: full}
        target: {tokens: 1T, at_batch: 4M}
        noise: {b_crit: 4M}
        """)
    sol = solve(load_plan(path))
    assert not sol.feasible
    remedies = {r.change: r for r in sol.memory_remedies}
    assert {f"hardware.expert_parallel: {e}" for e in (2, 4, 8)} <= set(remedies)
    assert remedies["hardware.expert_parallel: 8"].fits and not remedies["hardware.expert_parallel: 2"].fits
    assert (remedies["hardware.expert_parallel: 8"].memory_per_device
            < remedies["hardware.expert_parallel: 4"].memory_per_device
            < remedies["hardware.expert_parallel: 2"].memory_per_device)


def test_expert_tensor_parallelism_defaults_to_the_layouts_tensor_parallelism():
    """As Megatron-Core's --expert-tensor-parallel-size defaults to --tensor-model-parallel-size, a
    layout that names no etp shards each routed expert over its t ranks; a named one wins."""
    moe = Experts(8, 2, 3 * 4096 * 14336)
    assert Layout(64, tensor_parallel=4, expert_parallel=8).place_experts(moe).expert_tensor_parallel == 4
    assert Layout(64, tensor_parallel=4, expert_parallel=8,
                  expert_tensor_parallel=1).place_experts(moe).expert_tensor_parallel == 1


@pytest.mark.parametrize(("mlp", "t"), [("swiglu", 1), ("swiglu", 4), ("gelu", 2)])
def test_a_moe_layer_stores_its_routed_copies_instead_of_one_dense_mlp(mlp, t):
    """Bytes per sequence a MoE layer stores beyond a dense one (`moe_activation_extra`): the MLP
    activations of k routed copies and the shared experts at width F_e (6·F_e a token with SwiGLU,
    4·F_e with GeLU) and the k dispatched d-wide inputs in bf16, less the dense MLP's 6·F (4·F),
    for s tokens ÷ t; nothing under full recomputation."""
    from budgetdsl.cost.experts import moe_activation_extra

    s, d, f, f_e, k = 4096, 4096, 14336.0, 1408, 2
    matrices, mult = (3, 6.0) if mlp == "swiglu" else (2, 4.0)
    ex = Experts(8, k, matrices * d * f_e, shared=1)
    expected = s * (mult * f_e * (k + 1) + 2.0 * d * k - mult * f) / t
    assert moe_activation_extra(s, d, f, mlp, ex, t, "none") == pytest.approx(expected, rel=1e-12)
    assert moe_activation_extra(s, d, f, mlp, ex, t, "full") == 0.0


def test_a_pipeline_stage_holds_its_moe_layers_extra_for_every_micro_batch_in_flight():
    """Under 1F1B stage i holds p − i micro-batches in flight (Narayanan et al. 2021, section 2.2),
    the MoE layers' extra activations as much as the dense part: stage i of 4 stores
    (p − i) × (n·per-layer + moe_i·extra), moe_i its MoE layers (the first `dense_layers` are dense)."""
    from budgetdsl.cost import memory as mem
    from budgetdsl.cost.experts import moe_activation_extra

    s, d, f = 4096, 4096, 14336
    ex = Experts(8, 2, 3 * d * 1408, dense_layers=2)
    kw = dict(params=7e9, seq_len=s, layers=16, d_model=d, heads=32, vocab=32000, tensor_parallel=1,
              pipeline_parallel=4, data_parallel=8, zero=1, recompute="selective", flash_attention=True,
              sequence_parallel=False, kv_heads=8, ffn_hidden=f, mlp="swiglu", tied_embeddings=False, dropout=False)
    stages = mem.stage_memory(experts=ex, **kw)
    per_layer = mem.activation_bytes_per_layer(s, d, 32, "selective", True, 1, False, kv_heads=8, ffn_hidden=f,
                                               mlp="swiglu", dropout=False)
    extra = moe_activation_extra(s, d, float(f), "swiglu", ex, 1, "selective")
    moe = moe_layers_per_stage([st.layers for st in stages], 2)
    assert [st.layers for st in stages] == [4, 4, 4, 4] and moe == [2, 4, 4, 4]
    for i, st in enumerate(stages):
        assert st.activations_per_sequence == pytest.approx((4 - i) * (4 * per_layer + moe[i] * extra), rel=1e-12)


def test_fp8_caches_a_copy_of_each_moe_stages_layer_weights_and_not_its_embedding():
    """FP8 GEMMs cache an FP8 copy of each layer weight and its transpose (FP8_WEIGHT_BYTES a
    parameter) and none of the embedding or the LM head, which stay BF16. Mixtral 8x7B on t = 2,
    p = 2, ep = 2 (ZeRO-1, so no weight is sharded over data parallelism): each stage holds 16
    layers, whose attention and router split over t and whose 8 routed experts split over etp·ep = 2,
    plus the input embedding (first stage) or the untied head (last); fp8 adds, per GPU,
    FP8_WEIGHT_BYTES × 16 × ((layer − routed) / t + routed / 2) bytes and no more."""
    from budgetdsl.cost import memory as mem

    d, f, vocab = 4096, 14336, 32000
    params = transformer_params(**MIXTRAL)
    routed = 8 * 3 * d * f  # E·W_e of one MoE layer (SwiGLU: three d × F matrices an expert)
    layer = (params - 2 * vocab * d) / 32
    ex = Experts(8, 2, 3 * d * f, expert_parallel=2)
    kw = dict(params=params, seq_len=4096, layers=32, d_model=d, heads=32, vocab=vocab, tensor_parallel=2,
              pipeline_parallel=2, data_parallel=8, zero=1, recompute="selective", flash_attention=True,
              sequence_parallel=True, kv_heads=8, ffn_hidden=f, mlp="swiglu", tied_embeddings=False, experts=ex)
    bf16, fp8 = mem.stage_memory(**kw), mem.stage_memory(fp8=True, **kw)
    assert [st.layers for st in fp8] == [16, 16]
    copies = mem.FP8_WEIGHT_BYTES * 16 * ((layer - routed) / 2 + routed / 2)
    for a, b in zip(bf16, fp8):
        assert b.weights - a.weights == pytest.approx(copies, rel=1e-12)
        assert (b.grads, b.optimizer) == (a.grads, a.optimizer)
