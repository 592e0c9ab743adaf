"""Context parallelism in the cost model: the key/value traffic of ring attention and what of it the
attention compute hides.

Context parallelism (Megatron-Core `--context-parallel-size`, its CP guide; ring attention, Liu et
al. 2023, "Ring Attention with Blockwise Transformers for Near-Infinite Context") splits every
sequence over cp GPUs: each holds s/cp tokens (2 of 2·cp chunks, load-balanced for causal
attention), so its activations, its GEMMs and its tensor-parallel traffic are 1/cp of a sequence's,
while its queries still attend to the whole sequence. The keys and values circulate around the
ring: in the forward, cp − 1 steps each pass a rank's K and V block, 2·(s/cp)·d_kv bf16 values
(÷ t: the heads are split over the tensor-parallel ranks); the backward passes K and V again and
their gradients, twice the forward's volume. Each step's transfer runs under the attention of the
block already received (Liu et al. 2023 §3: the transfer hides when the block's compute outlasts
it), so only the traffic that outlasts the layer's attention compute is exposed.

The cp ranks of a group stride t GPUs (Megatron's rank order tp-cp-ep-dp-pp): within one node
when t·cp ≤ GPUs per node (NVLink), else the ring crosses nodes and its slowest hop is the NIC.
"""

from __future__ import annotations

from budgetdsl.cost.flops import attention_flops_per_token

BF16 = 2.0
RING_PASSES = 3.0  # K and V forward; K, V and their gradients backward (Megatron-Core's p2p ring)


def ring_bytes_per_sequence(seq_len: int, d_kv: float, tensor_parallel: int, context_parallel: int) -> float:
    """Bytes one GPU sends around the ring for one layer and one sequence, forward and backward:
    3 × (cp − 1) steps × 2·(s/cp)·d_kv bf16 values ÷ t (module docstring)."""
    if context_parallel <= 1:
        return 0.0
    block = 2.0 * seq_len / context_parallel * d_kv * BF16 / tensor_parallel
    return RING_PASSES * (context_parallel - 1) * block


def ring_exposed_seconds(seq_len: int, d_model: int, d_kv: float, tensor_parallel: int, context_parallel: int,
                         gpus_per_node: int, intra_node: float, network: float, matmul_rate: float,
                         latency: float = 0.0, width: float | None = None) -> float:
    """Seconds per layer and sequence the ring's traffic outlasts the attention compute it runs
    under: the transfer at NVLink or NIC speed (plus `latency` per pass of the ring, the cost
    model's collective latency of its cp − 1 steps where it prices one), less the rank's share of
    the attention scores and values, 12·d·s FLOPs per token forward and backward (PaLM appendix B)
    × s/(t·cp) tokens at `matmul_rate` (6·s·`width` with the head widths of multi-latent
    attention, `budgetdsl.cost.flops`); never below 0."""
    nbytes = ring_bytes_per_sequence(seq_len, d_kv, tensor_parallel, context_parallel)
    if nbytes <= 0:
        return 0.0
    link = intra_node if tensor_parallel * context_parallel <= gpus_per_node else network
    per_token = attention_flops_per_token(1.0, d_model, seq_len, width)
    attention = per_token * seq_len / (tensor_parallel * context_parallel) / matmul_rate
    return max(0.0, nbytes / link + RING_PASSES * latency - attention)
