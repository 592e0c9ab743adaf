"""FLOPs per token by kind, where the cost model needs them apart: the attention scores and values
(12·L·d·s, forward + backward: QKᵀ and the product with V, 2·s·d each per token and layer in the
forward, every query head attending, no causal halving — Chowdhery et al. 2022, PaLM, appendix B)
and the rest of a layer, its linear layers' GEMMs, which FP8 tensor cores run (`hardware.precision`).

The scores and values follow the widths of the heads: QKᵀ costs 2·s per query/key dimension of
all heads and the product with V 2·s per value dimension, so a layer's forward is 2·s·(W_qk + W_v)
and forward + backward 6·s·(W_qk + W_v) per token, W_qk = W_v = d for multi-head and grouped-query
attention (every query head attends, 6·s·2d = 12·d·s) and W_qk = H·(d_n + d_r), W_v = H·d_v for
multi-latent attention (`budgetdsl.plan.model.LatentAttention`; Megatron-Core's
num_floating_point_operations counts the same terms, halved for the causal mask, which this
convention does not halve).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from budgetdsl.plan.model import LatentAttention


def attention_flops_per_token(layers: float, d_model: float, seq_len: float, width: float | None = None) -> float:
    """6·L·s·(W_qk + W_v) (module docstring): the attention scores and values of `layers` layers,
    forward + backward; `width` W_qk + W_v, default 2·d (12·L·d·s)."""
    w = 2.0 * d_model if width is None else width
    return 6.0 * layers * w * seq_len


def training_flops_per_token(params: float, layers: float | None, d_model: float | None,
                             seq_len: float, width: float | None = None) -> float:
    """6N + 12·L·d·s (PaLM, appendix B): 6 per matmul parameter (forward + backward) and the
    attention scores (6·L·s·`width` for multi-latent attention); 6N alone (Kaplan et al. 2020)
    where the shape is unknown."""
    flops = 6.0 * params
    if layers and d_model:
        flops += attention_flops_per_token(layers, d_model, seq_len, width)
    return flops


def gemm_flops_per_layer(layer_flops: float, d_model: float, seq_len: float, width: float | None = None) -> float:
    """One layer's linear-layer (GEMM) FLOPs per token: its FLOPs less the attention scores and
    values; never below 0 (a declared flops_per_token may count less)."""
    return max(0.0, layer_flops - attention_flops_per_token(1.0, d_model, seq_len, width))


def attention_width(d_model: float, heads: float | None = None, mla: LatentAttention | None = None) -> float:
    """W_qk + W_v of a layer (module docstring): 2·d, or H·(d_n + d_r + d_v) with multi-latent
    attention."""
    if mla is not None and heads:
        return mla.qk_width(heads) + mla.v_width(heads)
    return 2.0 * float(d_model)


def layer_matmuls(d_model: float, heads: float | None = None, kv_heads: float | None = None,
                  ffn_hidden: float | None = None, mlp: str = "gelu",
                  mla: LatentAttention | None = None) -> tuple[tuple[float, float], ...]:
    """(input width, output width) of a layer's matmuls in the order its forward runs them, as the
    reference models write them (Llama's model.py: wq, wk, wv, wo, then the MLP's w1, w3, w2;
    DeepSeek-V3's: wq_a and wq_b or wq, wkv_a, wkv_b, wo): the query, key and value projections
    (d_kv = kv_heads·d/heads wide), the output projection, the MLP's up (and gate) and down
    projections. Multi-latent attention: the query down- and up-projections (or one without a query
    latent), the joint key/value down-projection with the shared RoPE key, its up-projection to
    H·(d_n + d_v), the output projection from H·d_v."""
    d = float(d_model)
    ffn = float(ffn_hidden) if ffn_hidden is not None else 4.0 * d
    if mla is not None and heads:
        rq, qk = mla.q_lora_rank, mla.qk_width(heads)
        query = ((d, qk),) if rq is None else ((d, float(rq)), (float(rq), qk))
        rkv = float(mla.kv_lora_rank)
        attention = (*query, (d, rkv + mla.qk_rope_head_dim),
                     (rkv, float(heads) * (mla.qk_nope_head_dim + mla.v_head_dim)), (mla.v_width(heads), d))
    else:
        d_kv = d * float(kv_heads) / float(heads) if kv_heads is not None and heads else d
        attention = ((d, d), (d, d_kv), (d, d_kv), (d, d))
    gated = ((d, ffn), (d, ffn), (ffn, d)) if mlp == "swiglu" else ((d, ffn), (ffn, d))
    return attention + gated
