"""Multi-latent attention (issue 24, item 1; DeepSeek-AI 2024, DeepSeek-V2 §2.1 and DeepSeek-V3
§2.1.1): parameters from the low-rank shape against DeepSeek-V2's and V3's published totals and
activated counts, FLOPs per token against Megatron-Core's own MLA count, activation memory against
its closed form, each new key's located error, and the Megatron export's MLA flags."""

import pytest
from plan_rules import assert_refused_located, write
from solver_plans import make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.cost.flops import attention_flops_per_token, attention_width
from budgetdsl.cost.memory import activation_bytes_per_layer
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import LatentAttention, transformer_params

# The released configs (deepseek-ai/DeepSeek-V3, inference/configs/config_671B.json and
# config_236B.json, the Hugging Face config.json's names): MLA with q_lora_rank 1536, kv_lora_rank
# 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, 128 heads, SwiGLU experts, untied.
MLA = dict(attention="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
           v_head_dim=128)
V3 = dict(layers=61, d_model=7168, heads=128, vocab=129280, ffn_hidden=18432, mlp="swiglu", tied_embeddings=False,
          experts=256, experts_per_token=8, expert_ffn_hidden=2048, shared_experts=1, dense_layers=3, **MLA)
V2 = dict(layers=60, d_model=5120, heads=128, vocab=102400, ffn_hidden=12288, mlp="swiglu", tied_embeddings=False,
          experts=160, experts_per_token=6, expert_ffn_hidden=1536, shared_experts=2, dense_layers=1, **MLA)
LATENT = LatentAttention(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, q_lora_rank=1536)


def _count(shape: dict, active: bool = False) -> float:
    kw = {k: v for k, v in shape.items() if k not in MLA}
    return transformer_params(**kw, active=active, mla=LATENT)


@pytest.mark.parametrize("shape, total, activated", [
    # DeepSeek-V3 (§1 and §4.2): 671B total, 37B activated, which README_WEIGHTS.md states to three
    # digits: 671B main model (the multi-token-prediction module's 14B apart), 36.7B activated.
    (V3, 671e9, 36.7e9),
    # DeepSeek-V2 (abstract and §3.1.2): 236B total, 21B activated.
    (V2, 236e9, 21e9),
], ids=["DeepSeek-V3", "DeepSeek-V2"])
def test_the_shape_counts_deepseeks_published_parameters(shape, total, activated):
    """Total within 0.2 %. Activated: the count a token's matmuls use — the input embedding is a
    lookup, so the activated count is the active parameters less V·d (the tool's FLOP-bearing count,
    `cost_model.flops_per_token`): V3 36.63B (README_WEIGHTS's 36.7B, −0.2 %; the paper's rounded 37B),
    V2 20.85B (21B, −0.7 %). With the input embedding as well they would be 37.55B and 21.38B
    (+1.5 %, +1.8 %)."""
    counted = _count(shape)
    assert counted == pytest.approx(total, rel=0.002)
    matmul = _count(shape, active=True) - shape["vocab"] * shape["d_model"]
    assert matmul == pytest.approx(activated, rel=0.01)


def test_deepseek_v3_counts_to_the_parameter():
    """The sum of the released main-model tensors' shapes (no biases; every RMSNorm counted):
    671,026,404,352, 187,107,328 of each layer's in its attention."""
    assert _count(V3) == 671_026_404_352
    assert LATENT.params(7168, 128) == 187_107_328


def test_a_plan_counts_params_from_the_mla_shape_and_expressions_see_it(tmp_path):
    path = write(tmp_path, """\
        name: v3
        model: {layers: 61, d_model: 7168, heads: 128, vocab: 129280, ffn_hidden: 18432, mlp: swiglu,
                tied_embeddings: false, experts: 256, experts_per_token: 8, expert_ffn_hidden: 2048,
                shared_experts: 1, dense_layers: 3, attention: mla, q_lora_rank: 1536, kv_lora_rank: 512,
                qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128, seq_len: 4096}
        hardware: {gpu: H800-SXM5-80GB, gpus: 2048, mfu: 0.4}
        target: {tokens: 20 * model.params, at_batch: 60M}
        noise: {b_crit: 60M}
        """)
    plan = load_plan(path)
    assert plan.model.params == 671_026_404_352
    assert plan.target.tokens == 20 * 671_026_404_352


def test_without_a_query_latent_the_query_projection_is_full():
    """DeepSeek-V2-Lite (q_lora_rank null): W_Q is d × H·(d_n + d_r)."""
    lite = LatentAttention(512, 128, 64, 128, None)
    d, h = 2048, 16
    assert lite.params(d, h) == d * h * 192 + d * (512 + 64) + 512 + 512 * h * 256 + h * 128 * d


def _megatron_mla_flops_per_token(d, h, rq, rkv, nope, rope, v, s):
    """Megatron-LM's num_floating_point_operations (megatron/training/training.py, MLA branch), per
    token and layer: the token-linear part 3·2·(q_term + kv term + rope key + o proj) and the core
    attention 3·2·(H·(d_n + d_r)/2 + H·d_v/2)·s, halved there for the causal mask."""
    q_term = rq * (d + h * (nope + rope) + 1)
    linear = 6 * (q_term + rkv * (d + h * (nope + v) + 1) + d * rope + h * v * d)
    core = 6 * (h * (nope + rope) / 2 + h * v / 2) * s
    return linear, core


def test_flops_per_token_are_megatrons_mla_count_without_the_causal_halving():
    """6 per MLA weight is Megatron-Core's token-linear MLA term exactly; the scores and values,
    6·s·(W_qk + W_v) per layer, are its core term ×2 (this codebase does not halve for the causal
    mask: PaLM appendix B)."""
    s = 4096
    linear, core = _megatron_mla_flops_per_token(7168, 128, 1536, 512, 128, 64, 128, s)
    assert 6 * LATENT.params(7168, 128) == linear
    assert attention_flops_per_token(1, 7168, s, attention_width(7168, 128, LATENT)) == 2 * core
    assert attention_width(7168, 128, None) == 2 * 7168  # multi-head: 12·L·d·s unchanged


def test_the_cost_model_counts_mla_flops_from_the_active_shape():
    plan = make_plan(model={"params": None, "seq_len": 4096, **V3})
    cm = build_cost_model(plan, 2048, Split(1, 16, 1, "full", True))
    active = _count(V3, active=True)
    assert cm.flops_per_token == pytest.approx(6 * (active - 129280 * 7168) + 6 * 61 * 4096 * 128 * 320, rel=1e-12)
    assert "multi-latent attention" in cm.coefficients["flops_per_token"].detail
    assert "multi-latent" in cm.coefficients["params"].detail


def test_activation_memory_follows_the_decompressed_heads_and_the_latents():
    """Korthikanti et al. (2022)'s itemisation on an MLA layer (budgetdsl.cost.memory): Q and K
    2·H·(d_n + d_r) bytes each, V and the output projection's input 2·H·d_v each, the SwiGLU MLP
    6·F, the d-wide 10·d, and the two latents 4·(d_c' + d_c); without sequence parallelism the
    latents stay whole on every TP rank (Megatron-Core runs the down-projections duplicated)."""
    s, d, f = 4096, 7168, 18432
    mla_bytes = 4 * 128 * 192 + 4 * 128 * 128
    whole = 10 * d + 4 * (1536 + 512)
    got = activation_bytes_per_layer(s, d, 128, "none", True, 1, True, ffn_hidden=f, mlp="swiglu", mla=LATENT)
    assert got == pytest.approx(s * (whole + mla_bytes + 6 * f), rel=1e-12)
    t = 8
    got = activation_bytes_per_layer(s, d, 128, "none", True, t, False, ffn_hidden=f, mlp="swiglu", mla=LATENT)
    assert got == pytest.approx(s * (whole + (mla_bytes + 6 * f) / t), rel=1e-12)
    assert activation_bytes_per_layer(s, d, 128, "full", True, 1, True, mla=LATENT) == 2 * s * d


def test_selective_recomputation_reruns_the_mla_score_matmuls():
    """Selective recomputation runs the scores' forward again: 2·s·(W_qk + W_v) per token and layer
    (4·s·d for multi-head attention)."""
    from budgetdsl.cost.throughput import recompute_flops_per_token

    plan = make_plan(model={"params": None, "seq_len": 4096, **V3})
    cm = build_cost_model(plan, 2048, Split(1, 16, 1, "selective", True))
    assert cm.shape is not None and cm.shape.mla == LATENT
    assert recompute_flops_per_token(cm.shape, "selective") == 2 * 61 * 4096 * 128 * 320


MLA_MODEL = "model: {layers: 4, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096, "
HW = "hardware: {gpu: H100-SXM5-80GB, gpus: 8}"
BAD = {
    "an MLA key without attention: mla": (
        MLA_MODEL + "kv_lora_rank: 512}", HW,
        "error[plan-rule]: kv_lora_rank is a dimension of multi-latent attention; it needs attention: mla",
        "write attention: mla"),
    "attention: mla without its dimensions": (
        MLA_MODEL + "attention: mla, kv_lora_rank: 512}", HW,
        "error[plan-rule]: attention: mla needs qk_nope_head_dim, qk_rope_head_dim, v_head_dim",
        "e.g. DeepSeek-V3's kv_lora_rank: 512"),
    "a latent rank above d_model": (
        MLA_MODEL + "attention: mla, kv_lora_rank: 2048, qk_nope_head_dim: 64, qk_rope_head_dim: 32, "
        "v_head_dim: 64}", HW,
        "error[plan-rule]: kv_lora_rank (2048) is above d_model (1024)", "e.g. kv_lora_rank: 256"),
    "a query rank above d_model": (
        MLA_MODEL + "attention: mla, q_lora_rank: 4096, kv_lora_rank: 256, qk_nope_head_dim: 64, "
        "qk_rope_head_dim: 32, v_head_dim: 64}", HW,
        "error[plan-rule]: q_lora_rank (4096) is above d_model (1024)", "e.g. q_lora_rank: 256"),
    "an odd RoPE width": (
        MLA_MODEL + "attention: mla, kv_lora_rank: 256, qk_nope_head_dim: 64, qk_rope_head_dim: 33, "
        "v_head_dim: 64}", HW,
        "error[plan-rule]: qk_rope_head_dim (33) must be even", "e.g. qk_rope_head_dim: 34"),
    "kv_heads with mla": (
        MLA_MODEL + "kv_heads: 2, attention: mla, kv_lora_rank: 256, qk_nope_head_dim: 64, "
        "qk_rope_head_dim: 32, v_head_dim: 64}", HW,
        "error[plan-rule]: kv_heads groups the key/value heads of multi-head attention", "remove kv_heads"),
    "an unknown attention": (
        MLA_MODEL + "attention: gqa}", HW, "error", "mha"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_mla_key_fails_located_with_a_hint(tmp_path, name, capsys):
    assert_refused_located(tmp_path, capsys, *BAD[name])


def test_the_error_points_at_the_key(tmp_path):
    from budgetdsl.plan.diagnostics import PlanError

    path = write(tmp_path, "name: bad\n" + MLA_MODEL + "v_head_dim: 64}\n" + HW
                 + "\ntarget: {min_tokens: 1B}\nnoise: {b_crit: 1M}\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    d = info.value.diagnostics[0]
    assert d.format().startswith(f"{path}:2:{len(MLA_MODEL) + 1}:"), d.format()


def test_the_schema_fuzzer_reaches_mla_and_the_deepseek_routing_keys():
    """tests/budgetdsl/schema_plans.py draws multi-latent attention, group-limited routing, DeepEP
    dispatch and the all-to-all overlap from the committed schema and makes them valid
    (test_schema_fuzz runs such plans through the solver and every export)."""
    from hypothesis import HealthCheck, given, settings
    from schema_plans import plans

    seen: set[str] = set()

    @settings(max_examples=400, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plans())
    def draw(doc):
        model, hw = doc["model"], doc["hardware"]
        if model.get("attention") == "mla":
            seen.add("mla")
            seen.update(f"model.{k}" for k in ("q_lora_rank", "kv_lora_rank") if model.get(k))
        seen.update(f"model.{k}" for k in ("expert_groups",) if model.get(k))
        seen.update(f"hardware.{k}" for k in ("expert_overlap",) if hw.get(k) is True)
        if hw.get("expert_dispatch") == "deepep":
            seen.add("deepep")

    draw()
    assert {"mla", "model.q_lora_rank", "model.kv_lora_rank", "model.expert_groups", "hardware.expert_overlap",
            "deepep"} <= seen, seen
