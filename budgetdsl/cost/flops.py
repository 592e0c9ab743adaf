"""FLOPs per token by kind, where the cost model needs them apart: the attention scores and values
(12·L·d·s, forward + backward: QKᵀ and the product with V, 2·s·d each per token and layer in the
forward, every query head attending, no causal halving — Chowdhery et al. 2022, PaLM, appendix B)
and the rest of a layer, its linear layers' GEMMs, which FP8 tensor cores run (`hardware.precision`).
"""

from __future__ import annotations


def attention_flops_per_token(layers: float, d_model: float, seq_len: float) -> float:
    """12·L·d·s: the attention scores and values of `layers` layers, forward + backward."""
    return 12.0 * layers * d_model * seq_len


def training_flops_per_token(params: float, layers: float | None, d_model: float | None,
                             seq_len: float) -> float:
    """6N + 12·L·d·s (PaLM, appendix B): 6 per matmul parameter (forward + backward) and the
    attention scores; 6N alone (Kaplan et al. 2020) where the shape is unknown."""
    flops = 6.0 * params
    if layers and d_model:
        flops += attention_flops_per_token(layers, d_model, seq_len)
    return flops


def gemm_flops_per_layer(layer_flops: float, d_model: float, seq_len: float) -> float:
    """One layer's linear-layer (GEMM) FLOPs per token: its FLOPs less the attention scores and
    values; never below 0 (a declared flops_per_token may count less)."""
    return max(0.0, layer_flops - attention_flops_per_token(1.0, d_model, seq_len))
