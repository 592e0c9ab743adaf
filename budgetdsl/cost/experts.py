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

DeepEP dispatch (`hardware.expert_dispatch: deepep`; Megatron-Core's flex dispatcher with the
DeepEP backend; DeepSeek-AI 2024, DeepSeek-V3 §3.2.2): a token bound for several experts on one
node crosses the inter-node network once, to the GPU of the same in-node index there, and is
forwarded over NVLink to the experts' GPUs. The NIC then carries D·(n − 1)/n copies of a token per
direction, D the distinct nodes its k experts lie on out of the n nodes the ep ranks span
(`nodes_per_token`), instead of k·(ep − in-node)/ep; NVLink carries each of the k copies within its
node. With FP8 GEMMs the dispatch is sent in FP8 with one fp32 scale per 128 values (DeepSeek-V3
§3.3.2: the activations before the MoE up-projections are quantized, then dispatched; DeepEP's FP8
dispatch), the combine and the backward's two transfers in BF16. Group-limited routing
(`model.expert_groups` G, `expert_groups_per_token` g; DeepSeek-V3 §2.1.2's node-limited routing,
Megatron-Core's --moe-router-num-groups/--moe-router-group-topk, whose docs set G to the nodes of
the EP group) bounds D: the g groups of a token hold all its experts.

Overlap (`hardware.expert_overlap`; DeepSeek-V3 §3.2.1, DualPipe, and Megatron-Core's
--overlap-moe-expert-parallel-comm, both scheduling one micro-batch's all-to-all under another's
attention and expert GEMMs): only what outlasts the stage's compute and recomputation of the
same micro-batch is exposed, max(0, all-to-all − compute), as the ring of context parallelism is
priced (`budgetdsl.cost.throughput`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BF16 = 2.0
FP8_DISPATCH = 1.0 + 4.0 / 128.0  # bytes per value: FP8, with an fp32 scale per 128 values (DeepSeek-V3 §3.3.2)


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
    groups: int | None = None  # G of group-limited routing (model.expert_groups); None: unlimited
    groups_per_token: int | None = None  # g (model.expert_groups_per_token)
    dispatcher: str = "alltoall"  # alltoall (Megatron-Core's) | deepep (module docstring)
    overlap: bool = False  # the all-to-all under another micro-batch's compute (hardware.expert_overlap)
    fp8_dispatch: bool = False  # deepep with FP8 GEMMs: the dispatch sent in FP8

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
        out.append(max(0, start + n - max(start, dense_layers)))
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


def _none_of(pool: float, avoid: float, draws: float) -> float:
    """The chance that `draws` distinct items drawn from `pool` miss all `avoid` of them:
    C(pool − avoid, draws) / C(pool, draws), through log-gamma (no big integers)."""
    if draws > pool - avoid:
        return 0.0
    lg = math.lgamma
    return math.exp(lg(pool - avoid + 1) - lg(pool - avoid - draws + 1) - lg(pool + 1) + lg(pool - draws + 1))


def nodes_per_token(ex: Experts, nodes: int) -> float:
    """D: the expected number of distinct nodes a token's k routed experts lie on, the ep ranks
    spanning `nodes` nodes of E/n experts each, routing uniform at the balanced router's mean load:
    n·(1 − C(E − E/n, k)/C(E, k)). Group-limited routing whose G groups are whole groups of a node
    (G a multiple of n) bounds it by the nodes of the token's g groups, n·(1 − C(G − G/n, g)/C(G, g))
    (DeepSeek-V3, G = 8 = n, g = 4: exactly 4)."""
    n = max(1, nodes)
    if n == 1:
        return 1.0
    free = n * (1.0 - _none_of(ex.experts, ex.experts / n, ex.top_k))
    g, groups = ex.groups_per_token, ex.groups
    if g is not None and groups is not None and groups % n == 0:
        return min(free, n * (1.0 - _none_of(groups, groups / n, g)))
    return free


def deepep_seconds_per_token(d_model: int, ex: Experts, recompute: str, gpus_per_node: int, intra_node: float,
                             network: float) -> float:
    """Seconds per token of one MoE layer's DeepEP dispatch and combine, forward and backward
    (module docstring): the forward's dispatch (FP8 or BF16) and combine (BF16), again with full
    recomputation, and the backward's two BF16 transfers; the NIC carries D·(n − 1)/n copies, NVLink
    each of the k copies inside its node, at once. Dropless: a capacity factor pads the expert
    GEMMs (`capacity_padding_flops`), not these transfers."""
    in_node = ranks_in_node(ex.expert_parallel, ex.expert_tensor_parallel, gpus_per_node)
    nodes = max(1, ex.expert_parallel // in_node)
    forward = (FP8_DISPATCH if ex.fp8_dispatch else BF16) + BF16
    per_copy = d_model * (forward * (2 if recompute == "full" else 1) + 2 * BF16)
    remote = nodes_per_token(ex, nodes) * (nodes - 1) / nodes
    local = ex.top_k * (in_node - 1) / in_node
    return max(remote * per_copy / network, local * per_copy / intra_node)


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
    if ex.dispatcher == "deepep" and ex.expert_parallel > 1:
        seconds = tokens * deepep_seconds_per_token(d_model, ex, recompute, gpus_per_node, intra_node, network) \
            + passes * latency
    else:
        seconds = passes * (all_to_all_seconds(buffer, ex.expert_parallel, ex.expert_tensor_parallel, gpus_per_node,
                                               intra_node, network) + (latency if ex.expert_parallel > 1 else 0.0))
    etp = ex.expert_tensor_parallel
    if etp > 1:  # all-gather before and reduce-scatter after the expert GEMMs: (etp − 1)/etp of etp buffers each
        link = intra_node if etp <= gpus_per_node else network
        seconds += passes * (etp - 1) * buffer / link
    return seconds
