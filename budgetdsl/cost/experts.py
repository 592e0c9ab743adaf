"""Mixture-of-experts layers in the cost model: which parameters expert parallelism shards, the
activations an MoE layer stores beyond a dense one, and the token dispatch and combine time.

Parameters (`budgetdsl.plan.model.transformer_params`): every MoE layer holds the router d·E and E
routed experts of W_e = 2·d·F_e (GeLU) or 3·d·F_e (SwiGLU) weights, S shared experts of W_e; a
token multiplies the k experts it is routed to and the shared ones, so the FLOPs per token follow
the active count (6 per active parameter, Fedus et al. 2022 §2) while memory holds the total.

Sharding (Megatron-Core's rule, MoE parallel folding, Liu et al. 2025, "MoE Parallel Folding",
arXiv:2504.14960; the rule its memory estimator was fixed to follow): attention, norms, router,
shared experts, dense MLPs and embeddings split over the tensor-parallel ranks t (and pipeline
stages), and their optimizer state (ZeRO) over the dp·cp ranks that hold a copy; the routed experts
split over expert-tensor × expert-parallel ranks etp·ep, which fold into each stage's t·cp·dp
GPUs, and their optimizer state over the remaining edp = t·cp·dp / (etp·ep) copies.

Routing assumption (stated in the report): the router is balanced — an auxiliary loss (Fedus et al.
2022) or DeepSeek-V3's bias balancing keeps every expert at its mean load of k·tokens/E — and the
time is priced at that mean. Dropless routing moves and computes exactly the routed tokens; a
capacity factor c (GShard, Lepikhin et al. 2021) sizes every expert's buffer to c × its mean load,
and the dispatch and expert GEMMs run padded to it (c − 1 more routed-expert work; c < 1 drops
tokens). The imbalance of a dropless router beyond the mean is not modelled.

Dispatch and combine (Megatron-Core's all-to-all token dispatcher; Lepikhin et al. 2021 §2.2): per
MoE layer, the forward all-to-alls each GPU's k·c copies of its tokens to the experts' ranks and
back, and the backward does the same with the gradients: 4 all-to-alls of k·c·n·d bf16 values for n
tokens on the GPU (n = b·s / (t·cp): sequence-parallel shards), 2 more with full recomputation. An
all-to-all over ep ranks sends (ep − 1)/ep of the buffer; the ep ranks stride etp (Megatron's rank
order tp-cp-ep-dp-pp for the experts: etp innermost), so min(ep, node/etp) of them share a node and
the rest are across nodes: the NVLink and NIC shares move at once, the longer one sets the time.
With etp > 1 the dispatched tokens are also all-gathered over the etp ranks before the expert GEMMs
and reduce-scattered after (the same volume, forward and backward).
"""

from __future__ import annotations

from dataclasses import dataclass

BF16 = 2.0


@dataclass(frozen=True, slots=True)
class Experts:
    """The MoE part of a model and its expert layout: E routed experts of `expert_params` weights,
    top-k routing, S shared experts, the first `dense_layers` layers dense; etp × ep expert ranks."""

    experts: int
    top_k: int
    expert_params: float  # W_e, one expert's weights
    shared: int = 0
    dense_layers: int = 0
    capacity_factor: float | None = None  # None: dropless
    expert_parallel: int = 1
    expert_tensor_parallel: int = 1

    @property
    def load(self) -> float:
        """Routed copies of a token the experts process: k × the capacity factor (k dropless)."""
        return self.top_k * (self.capacity_factor if self.capacity_factor is not None else 1.0)

    @property
    def routed_layer_params(self) -> float:
        """Routed expert weights of one MoE layer: E·W_e."""
        return self.experts * self.expert_params

    @property
    def group(self) -> int:
        """etp·ep: the GPUs one copy of the routed experts spans."""
        return self.expert_parallel * self.expert_tensor_parallel


def moe_layers_per_stage(stage_counts: tuple[int, ...] | list[int], dense_layers: int) -> list[int]:
    """MoE layers on each pipeline stage: the dense layers are the model's first, so the first stages
    hold them."""
    out, start = [], 0
    for n in stage_counts:
        out.append(max(0, start + n - max(start, dense_layers)) if n else 0)
        start += n
    return out


def expert_data_parallel(tensor_parallel: int, context_parallel: int, data_parallel: int, ex: Experts) -> int:
    """edp = t·cp·dp / (etp·ep): the copies of each routed expert, over which ZeRO shards its
    optimizer state and its gradients are reduced (at least 1)."""
    return max(1, tensor_parallel * context_parallel * data_parallel // ex.group)


def moe_activation_extra(seq_len: int, d_model: int, ffn_hidden: float, mlp: str, ex: Experts,
                         tensor_parallel: int, recompute: str) -> float:
    """Bytes per sequence one MoE layer stores beyond a dense layer of `ffn_hidden`, on one GPU: its
    MLP activations are those of k·c routed copies and S shared experts of width F_e instead of one
    MLP of width F (`memory.layer_activation_split`'s M = 4·F GeLU, 6·F SwiGLU, per token), plus
    the k·c dispatched copies of the token's d-wide input the experts keep for their backward; ÷ t
    (sequence-parallel shards, as the dense layer). Full recomputation stores only the layer input:
    0. May be negative (a dense MLP wider than the active experts)."""
    if recompute == "full":
        return 0.0
    mult = 6.0 if mlp == "swiglu" else 4.0
    f_e = ex.expert_params / ((3.0 if mlp == "swiglu" else 2.0) * d_model)
    per_token = mult * f_e * (ex.load + ex.shared) + BF16 * d_model * ex.load - mult * ffn_hidden
    return seq_len * per_token / tensor_parallel


def capacity_padding_flops(ex: Experts) -> float:
    """FLOPs per token and MoE layer the expert GEMMs add when padded to a capacity factor c:
    6·(c − 1)·k·W_e (0 dropless). Hardware work, not model FLOPs (MFU counts the routed tokens)."""
    if ex.capacity_factor is None:
        return 0.0
    return 6.0 * (ex.capacity_factor - 1.0) * ex.top_k * ex.expert_params


def ranks_in_node(ranks: int, stride: int, gpus_per_node: int) -> int:
    """How many of a group's `ranks`, spaced `stride` GPUs apart, share a node (at least 1)."""
    return max(1, min(ranks, gpus_per_node // stride)) if stride < gpus_per_node else 1


def all_to_all_seconds(nbytes: float, ranks: int, stride: int, gpus_per_node: int, intra_node: float,
                       network: float) -> float:
    """Seconds for an all-to-all of `nbytes` per GPU over `ranks` ranks spaced `stride` GPUs apart
    (module docstring): each rank keeps 1/ranks and sends the rest, its node's peers over NVLink
    and the others over its NIC at once."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    in_node = ranks_in_node(ranks, stride, gpus_per_node)
    intra = nbytes * (in_node - 1) / ranks / intra_node
    inter = nbytes * (ranks - in_node) / ranks / network
    return max(intra, inter)


def all_to_all_count(recompute: str) -> int:
    """All-to-alls per MoE layer and micro-batch: dispatch and combine in the forward and the
    backward (4), and the forward's again under full recomputation (module docstring)."""
    return 4 + (2 if recompute == "full" else 0)


def dispatch_seconds_per_sequence(seq_len: int, d_model: int, ex: Experts, tensor_parallel: int,
                                  context_parallel: int, recompute: str, gpus_per_node: int, intra_node: float,
                                  network: float, latency: float = 0.0) -> float:
    """All-to-all dispatch and combine (and the etp gathers) of one MoE layer for one sequence of
    the micro-batch, forward and backward, on one GPU (module docstring); `latency`: seconds each
    all-to-all pays besides its bytes (the cost model's collective latency, where it prices one)."""
    tokens = seq_len / (tensor_parallel * context_parallel)
    buffer = ex.load * tokens * d_model * BF16
    passes = all_to_all_count(recompute)
    seconds = passes * (all_to_all_seconds(buffer, ex.expert_parallel, ex.expert_tensor_parallel, gpus_per_node,
                                           intra_node, network) + (latency if ex.expert_parallel > 1 else 0.0))
    etp = ex.expert_tensor_parallel
    if etp > 1:  # all-gather before and reduce-scatter after the expert GEMMs: (etp − 1)/etp of etp buffers each
        link = intra_node if etp <= gpus_per_node else network
        seconds += passes * (etp - 1) * buffer / link
    return seconds
