"""How long one optimizer step takes on a layout, and where the time goes (docs/design.md section 2).

`step_time(shape, device, layout, micro_batch, global_batch)` → `Breakdown`: seconds per step split
into compute, recompute, tensor-/pipeline-/data-parallel communication, pipeline bubble, optimizer
step and a declared fixed overhead, with the model FLOPs (MFU) and hardware FLOPs (HFU, counting
recomputation) of the step. Plain floats and frozen dataclasses, no plan objects: the solver's
layout search (issue #13) calls it per candidate.

Two honest modes (the cost model picks one per plan):
- declared: `hardware.mfu` is a measured end-to-end model-FLOPs utilization (PaLM's definition,
  Chowdhery et al. 2022, appendix B). It holds at the configuration it was measured on; the model
  below, every time scaled by one factor (`StepCost.scaled`, `Breakdown.scaled`), gives the step
  elsewhere (`cost_model.declared_anchor`).
- predicted: no mfu; the step time is the sum below, and utilization follows from the layout.

The model, per micro-batch of b sequences of s tokens on the slowest pipeline stage (n layers,
tensor-parallel degree t):
- compute: the stage's share of the model FLOPs f per token (f = 6N + 12·L·d·s, PaLM appendix B;
  the LM head's 6·d·V on the last stage) over t, at `kernel_efficiency` × peak (one fitted number
  per GPU preset, `gpus.py`), plus the memory-bound kernels: ELEMENTWISE_PASSES passes over the
  activation bytes a layer stores (Korthikanti et al. 2022, eq. 2 with sequence parallelism, eq. 3
  without: s·d·(10 + 24/t + 5·a·s/(d·t)); the 5·a·s term is gone with flash attention) at the HBM
  bandwidth.
- recompute: full = one more forward of every layer (f/3 per token, Korthikanti et al. 2022
  section 4), selective = the forward of the attention-score matmuls, 4·s·d per token per layer
  (their section 4.2: QKᵀ, softmax, dropout and the product with V; 2·s·(W_qk + W_v) for the
  head widths of multi-latent attention, `budgetdsl.cost.flops`); block (full with
  `recompute_layers` N): the full recomputation's terms for the first N layers of each chunk of a
  stage only (`memory.recomputed_layers`), so N/L_stage of full recomputation's extra forward;
  torchtitan's op-level selective policy (`recompute: selective` under `stack: fsdp2`,
  budgetdsl.cost.stacks): the forward of the matmuls it does not keep (their share of the layer's
  GEMM FLOPs, `op_recomputed_share`) and, as full recomputation, the forward's memory-bound passes.
- tensor parallelism: Megatron's two all-reduces per layer in the forward and two in the backward
  (two more with full recomputation) of b·s·d bf16 values (Shoeybi et al. 2019, section 3;
  sequence parallelism swaps each for a reduce-scatter + all-gather of the same volume), ring
  cost 2(t−1)/t · bytes / link over NVLink when t ≤ GPUs per node, else the NIC; overlapped only
  where the stack says so (`stacks.Stack.tp_overlap`: one chunk in t exposed).
- latency: every collective also pays NCCL's α once (`collective_latency`, the comment above it):
  per micro-batch for TP, pipeline sends, ring-attention steps and all-to-alls (StepCost.latency),
  per block (ZeRO-3) or per bucket of the stack (`stacks.Stack.collectives`) for data parallelism.
- pipeline: each stage boundary sends b·s·d bf16 activations forward and gradients back per
  micro-batch (split over t, Narayanan et al. 2021 section 4.1's scatter/gather); the 1F1B bubble
  is (p − 1)/v micro-batch times of the slowest stage (Narayanan et al. 2021, section 2.2; v
  interleaved virtual stages per GPU).
- data parallelism, once per step (per micro-batch for ZeRO-3): a hierarchical collective. NCCL's
  performance notes (nccl-tests, doc/PERFORMANCE.md) give a ring all-reduce over n ranks a bus
  bandwidth busbw = algbw · 2(n − 1)/n; here the k data-parallel peers inside a node reduce over
  NVLink, and the n = dp/k nodes all-reduce their 1/k shards with every GPU's own NIC in parallel
  (all NICs of a node): T = 2(k−1)/k·S/NVLink + 2(n−1)/n·(S/k)/NIC for S gradient bytes; a
  reduce-scatter or all-gather alone is half. ZeRO 1/2 reduce-scatter the gradients and all-gather
  the bf16 weights; ZeRO-2 reduce-scatters the gradients after every micro-batch's backward, not
  once per step: a rank keeps only its shard of the accumulated gradients ("For zero stage 2 (and
  3), gradient reduction is required after every backward because of gradient partitioning",
  deepspeedai/DeepSpeed#2252; DeepSpeed's engine: "ZeRO stage >= 2 communicates during non
  gradient accumulation boundaries as well"); ZeRO-3 also all-gathers the weights for the forward
  and the backward of every micro-batch (Rajbhandari et al. 2020, section 7). Overlap, unless the
  plan declares `hardware.overlap`: the framework default — DDP/Megatron buckets the gradient
  reduction into the last micro-batch's backward (Li et al. 2020, PyTorch DDP, section 3.2.3),
  ZeRO-2 each micro-batch's into its own backward, FSDP/ZeRO-3 prefetch each micro-batch's gathers
  behind its compute; only what outlasts that window is exposed. So ZeRO-2 is ZeRO-1 plus the
  m − 1 reductions of the other micro-batches, each exposed by what outlasts its backward: the same
  step where a backward hides its reduction.
- optimizer: Adam reads and writes fp32 master weights and both moments and reads the gradients,
  writes bf16 weights: (grad bytes + 26) bytes per local parameter at the HBM bandwidth.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from budgetdsl.cost.context_parallel import RING_PASSES, ring_exposed_seconds
from budgetdsl.cost.experts import (
    Experts,
    all_to_all_count,
    capacity_padding_flops,
    dispatch_seconds_per_sequence,
    moe_layers_per_stage,
    ranks_in_node,
)
from budgetdsl.cost.flops import attention_width, gemm_flops_per_layer, layer_matmuls
from budgetdsl.cost.gemm_shape import GemmTime, gemm_time, sharded_matmuls
from budgetdsl.cost.memory import (
    attention_score_bytes,
    layer_activation_split,
    layer_activation_whole,
    layer_params,
    recomputed_layers,
    stage_params,
)
from budgetdsl.cost.stacks import DEFAULT_STACK, Stack, op_checkpoint_kept
from budgetdsl.hardware.gemm_curves import GemmCurve
from budgetdsl.hardware.layout import balanced_split, data_parallel_peers_in_node
from budgetdsl.theory.xp import SCALAR

if TYPE_CHECKING:
    from budgetdsl.plan.model import LatentAttention

# Passes over each layer's stored activation bytes made by the memory-bound kernels of one
# forward + backward: the forward writes and reads each (2), the backward reads the saved value
# and the incoming gradient and writes and re-reads the outgoing one (4). An estimate from the
# kernels' shapes, not fitted; a full recomputation adds the forward's 2 passes again.
ELEMENTWISE_PASSES = 6.0
RECOMPUTE_PASSES = 2.0
# Eager PyTorch (a stack without torch.compile, `Stack.eager`): each elementwise op is its own kernel,
# reading its inputs and writing its output, as torchtitan's Llama runs them (torchtitan/models/
# llama/model.py at b5bcd76): RMSNorm through ATen's composite rms_norm (bf16 → fp32 copy, pow,
# mean, the scaling, the cast back, the weight: 36 bytes an element), rotary embeddings in complex
# fp32 (`apply_rotary_emb`: cast, complex product, cast back: 20 bytes an element of q and k),
# `repeat_kv`'s copies of K and V under grouped-query attention, the attention output made
# contiguous (4), the two residual adds (6 each), SiLU and the gate product (4 + 6 an element of F;
# GeLU 4). The backward moves twice the forward's bytes (ELEMENTWISE_PASSES' 4 to 2); the forward
# once more under recomputation.
RMS_NORM_BYTES = 36.0
ROPE_BYTES = 20.0
EAGER_BACKWARD = 2.0
BF16 = 2.0
ADAM_BYTES = 26.0  # fp32 master weights read+write (8), m (8), v (8), bf16 weights written (2)

COMPONENTS = ("compute", "recompute", "tp_comm", "pp_comm", "bubble", "dp_comm", "optimizer", "overhead")
PARALLEL_COMPONENTS = ("ep_comm", "cp_comm")  # shown where the layout has expert or context parallelism


@dataclass(frozen=True, slots=True)
class Shape:
    """The model: N parameters, L layers, width d, a heads, s tokens, V vocabulary, f FLOPs/token."""

    params: float
    layers: int
    d_model: int
    seq_len: int
    flops_per_token: float
    heads: int | None = None
    vocab: int | None = None
    kv_heads: int | None = None  # the layer's shape (budgetdsl.plan.model.ModelShape): activations
    ffn_hidden: int | None = None
    mlp: str = "gelu"
    tied_embeddings: bool = True
    moe: Experts | None = None  # the mixture-of-experts layers (budgetdsl.cost.experts), its layout degrees 1
    mla: LatentAttention | None = None  # multi-latent attention's dimensions (budgetdsl.plan.model)
    dropout: bool = True  # dropout p > 0: its masks are stored (budgetdsl.cost.memory)

    @property
    def attention_width(self) -> float:
        """W_qk + W_v of the heads (budgetdsl.cost.flops): 2·d, or MLA's H·(d_n + d_r + d_v)."""
        return attention_width(self.d_model, self.heads, self.mla)

    @property
    def head_flops(self) -> float:
        """The LM head's FLOPs per token, forward + backward: 6·d·V (0 without a vocabulary)."""
        return 6.0 * self.d_model * self.vocab if self.vocab else 0.0

    @property
    def layer_flops(self) -> float:
        """One layer's FLOPs per token, forward + backward: (f − 6·d·V)/L, so the layers and the
        head add up to f exactly (the plan's FLOP convention)."""
        return (self.flops_per_token - self.head_flops) / self.layers

    @property
    def head_layers(self) -> float:
        """The LM head's work in layers' worth, 6·d·V over one layer's FLOPs per token: what the
        balanced split weighs on the last stage (`layout.balanced_split`). The plan's rules keep a
        layer's FLOPs positive (f > 6·d·V: `plan.model.ModelShape`)."""
        return self.head_flops / self.layer_flops

    @property
    def embedding_params(self) -> float:
        return float(self.vocab * self.d_model) if self.vocab else 0.0

    @property
    def layer_params(self) -> float:
        return layer_params(self.params, self.layers, self.embedding_params, self.tied_embeddings)


@dataclass(frozen=True, slots=True)
class Device:
    peak_flops: float  # FLOP/s, dense bf16
    hbm_bandwidth: float  # bytes/s
    kernel_efficiency: float  # fraction of peak reached by the matmuls
    intra_node: float  # bytes/s per GPU and direction (NVLink)
    network: float  # bytes/s per GPU across nodes (its NIC)
    gpus_per_node: int = 8
    fp8_peak_flops: float = 0.0  # FLOP/s, dense FP8 when the plan runs FP8 GEMMs; 0: BF16 GEMMs
    gemm: GemmCurve | None = None  # the part's GEMM-shape curve (hardware.gemm_curves); None: every shape alike

    @property
    def pcie(self) -> bool:
        """The in-node link is PCIe (PCIE_LINK or slower), not NVLink: NCCL's PCIe hop latency."""
        return self.intra_node <= PCIE_LINK


@dataclass(frozen=True, slots=True)
class Layout:
    gpus: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    virtual_stages: int = 1
    zero: int = 0
    recompute: str = "none"  # none | selective | full
    flash_attention: bool = True
    sequence_parallel: bool = False
    grad_bytes: float = 4.0  # per gradient value, accumulated and reduced (fp32 by default)
    overlap: float | None = None  # declared fraction of the data-parallel reduction hidden
    context_parallel: int = 1  # cp: GPUs = t·p·cp·dp (budgetdsl.cost.context_parallel)
    expert_parallel: int = 1  # ep, and etp (0: t), of the routed experts (budgetdsl.cost.experts)
    expert_tensor_parallel: int = 0
    stage_split: tuple[int, ...] | None = None  # layers per stage as the plan pins them (hardware.stage_layers)
    stack: Stack = DEFAULT_STACK  # what the framework overlaps, how it cuts collectives (cost.stacks)
    recompute_layers: int | None = None  # with full: N layers per chunk recomputed (block); None: every layer

    def recomputed(self, layers: int) -> int:
        """Layers of a stage of `layers` this layout recomputes in full (`memory.recomputed_layers`)."""
        return recomputed_layers(layers, self.recompute, self.recompute_layers, self.virtual_stages)

    def stages(self, shape: Shape) -> tuple[int, ...]:
        """Layers per pipeline stage: the pinned split, else `layout.balanced_split` balancing the
        stages (in chunks of v layers with interleaving) with the LM head (6·d·V FLOPs per token,
        in layers' worth) on the last."""
        if self.stage_split is not None and len(self.stage_split) == self.pipeline_parallel:
            return self.stage_split
        return balanced_split(shape.layers, self.pipeline_parallel, self.virtual_stages, shape.head_layers)

    @property
    def data_parallel(self) -> int:
        return self.gpus // (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    def experts(self, shape: Shape) -> Experts | None:
        """The shape's experts with this layout's ep and etp; None for a dense model."""
        return self.place_experts(shape.moe)

    def place_experts(self, moe: Experts | None) -> Experts | None:
        """`moe` with this layout's ep and etp (etp defaults to t); None for a dense model."""
        if moe is None:
            return None
        return replace(moe, expert_parallel=self.expert_parallel,
                       expert_tensor_parallel=self.expert_tensor_parallel or self.tensor_parallel)


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Seconds per optimizer step by cause, and the FLOPs of the step (all GPUs)."""

    compute: float
    recompute: float
    tp_comm: float
    pp_comm: float
    bubble: float
    dp_comm: float
    optimizer: float
    overhead: float
    model_flops: float  # f · tokens of the step
    hardware_flops: float  # model FLOPs + recomputation
    gpus: int
    peak_flops: float
    micro_batch: float
    micro_batches: float
    stage_layers: tuple[int, ...]
    total: float = 0.0  # the sum of the components, set on construction
    ep_comm: float = 0.0  # expert-parallel all-to-all dispatch and combine (experts.py)
    cp_comm: float = 0.0  # context-parallel ring traffic the attention does not hide (context_parallel.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.compute + self.recompute + self.tp_comm + self.pp_comm
                           + self.bubble + self.dp_comm + self.optimizer + self.overhead
                           + self.ep_comm + self.cp_comm)

    def _per_gpu(self, flops: float) -> float:
        return flops / (self.total * self.gpus) if self.total > 0 else 0.0

    @property
    def model_tflops_per_gpu(self) -> float:
        return self._per_gpu(self.model_flops) / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        return self._per_gpu(self.hardware_flops) / 1e12

    @property
    def mfu(self) -> float:
        return self._per_gpu(self.model_flops) / self.peak_flops

    @property
    def hfu(self) -> float:
        return self._per_gpu(self.hardware_flops) / self.peak_flops

    def scaled(self, total: float) -> Breakdown:
        """The same shares inside a step of `total` seconds (declared mode)."""
        k = total / self.total if self.total > 0 else 0.0
        return replace(self, **{c: getattr(self, c) * k for c in COMPONENTS + PARALLEL_COMPONENTS})

    def seconds(self) -> dict[str, float]:
        """Seconds by component; the expert- and context-parallel ones where the layout has them."""
        out = {c: getattr(self, c) for c in COMPONENTS}
        out.update({c: getattr(self, c) for c in PARALLEL_COMPONENTS if getattr(self, c)})
        return out


def _ring(volume: float, ranks: int) -> float:
    """Bytes each rank moves in a ring all-reduce of `volume` bytes: 2(n − 1)/n · volume."""
    return 2.0 * (ranks - 1) / ranks * volume if ranks > 1 else 0.0


# Collective latency α: NCCL's own cost model, NVIDIA/nccl src/graph/tuning.cc (commit 5067397,
# 2026-06; ncclTunerConstantsDefaults, ncclTopoTuneModel, ncclTopoGetAlgoTime), Simple protocol —
# what NCCL's tuner picks for the megabyte-sized collectives of training. Microseconds:
#   baseLatencies  Ring 8.4, Tree 8.4, PAT 8.0
#   hwLatencies    NVLink: Ring 3.4, Tree 4.0; PCI: Ring 5.7, Tree 4.0; NET: Ring 14.0, Tree 14
#   ring    base + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat; nsteps = 2(n − 1) for an
#           all-reduce, n − 1 for a reduce-scatter or all-gather over n ranks; nInterSteps =
#           2(N − 1) resp. N − 1 across N nodes; across nodes intraLat ≥ 3 × getNetOverhead() (1 µs
#           on x86, ×3 for Simple) and a ring all-reduce's latency × 1.4 ("plateau effect", sm80+)
#   tree    all-reduce only: base + 2·((n/N − 1)·intraLat + log2(N)·interLat)
#   PAT     reduce-scatter / all-gather with one GPU per node only: base + log2(N)·interLat/3.5 + 2.8·n
# NCCL runs the algorithm of least modelled time; the bandwidth term being the caller's (the
# hierarchical ring above), that is the least latency. Not modelled: NVLS and CollNet (NVLink and
# in-network SHARP reductions, which need the switch hardware), the LL/LL128 protocols (small
# messages). Point-to-point sends (pipeline, ring attention, the experts' all-to-all, whose ep − 1
# sends run at once) pay one ring step: base + the link's hop latency — NCCL's tuner does not model
# p2p; this is its ring's cost of one step.
NCCL_BASE_US = {"ring": 8.4, "tree": 8.4, "pat": 8.0}
NCCL_HOP_US = {"nvlink": {"ring": 3.4, "tree": 4.0}, "pci": {"ring": 5.7, "tree": 4.0},
               "net": {"ring": 14.0, "tree": 14.0}}
NCCL_NET_OVERHEAD_US = 3.0  # getNetOverhead() 1 µs (x86) × 3 for the Simple protocol
NCCL_RING_PLATEAU = 1.4  # ncclTopoGetAlgoTime: ring Simple all-reduce across nodes, compute capability ≥ 8.0
NCCL_PAT_PER_RANK_US = 2.8
PCIE_LINK = 64e9  # bytes/s: an in-node link this slow or slower is PCIe (Gen5 x16), not NVLink


@functools.lru_cache(maxsize=4096)
def collective_latency(kind: str, ranks: int, nodes: int, pcie: bool = False) -> float:
    """Seconds of latency α of one NCCL collective over `ranks` GPUs on `nodes` nodes (the comment
    above: the least of ring, tree and PAT, as NCCL's tuner chooses). `kind`: all_reduce,
    reduce_scatter, all_gather; p2p (one ring step, across nodes when nodes > 1). 0 for one rank."""
    if ranks <= 1:
        return 0.0
    nodes = max(1, min(nodes, ranks))
    hop = NCCL_HOP_US["pci" if pcie else "nvlink"]
    net = NCCL_HOP_US["net"]
    if kind == "p2p":
        return (NCCL_BASE_US["ring"] + (net["ring"] if nodes > 1 else hop["ring"])) * 1e-6
    ar = kind == "all_reduce"
    steps = 2 * (ranks - 1) if ar else ranks - 1
    inter = 0 if nodes == 1 else (2 * (nodes - 1) if ar else nodes - 1)
    intra = hop["ring"] if nodes == 1 else max(hop["ring"], NCCL_NET_OVERHEAD_US)
    best = NCCL_BASE_US["ring"] + (steps - inter) * intra + inter * net["ring"]
    if ar and nodes > 1:
        best *= NCCL_RING_PLATEAU
    log_nodes = nodes.bit_length() - 1  # log2i
    if ar:
        best = min(best, NCCL_BASE_US["tree"] + 2.0 * ((ranks // nodes - 1) * hop["tree"] + log_nodes * net["tree"]))
    elif ranks == nodes:
        best = min(best, NCCL_BASE_US["pat"] + log_nodes * net["tree"] / 3.5 + NCCL_PAT_PER_RANK_US * ranks)
    return best * 1e-6


@functools.lru_cache(maxsize=65536)
def group_latency(kind: str, ranks: int, stride: int, device: Device) -> float:
    """`collective_latency` of a group of `ranks` GPUs spaced `stride` apart (tensor-parallel
    groups stride 1, data-parallel ones t, Megatron's rank order)."""
    in_node = ranks_in_node(ranks, stride, device.gpus_per_node)
    return collective_latency(kind, ranks, -(-ranks // in_node), device.pcie)


def dp_collective_time(nbytes: float, dp: int, t: int, device: Device, kind: str = "all_reduce",
                       calls: int = 1) -> float:
    """Seconds for a data-parallel collective of `nbytes` per GPU, hierarchical (module docstring):
    NVLink among the k peers of a node, then every NIC of the node across the dp/k nodes, plus the
    latency α of each of the `calls` collectives that carry it (`collective_latency`).
    `kind`: all_reduce, or reduce_scatter / all_gather (half the traffic)."""
    if dp <= 1 or nbytes <= 0:
        return 0.0
    k = data_parallel_peers_in_node(dp, t, device.gpus_per_node)
    n = max(1, dp // k)
    t_ar = _ring(nbytes, k) / device.intra_node + _ring(nbytes / k, n) / device.network
    beta = t_ar if kind == "all_reduce" else 0.5 * t_ar
    return beta + calls * group_latency(kind, dp, t, device)


def _activation_traffic_per_token(shape: Shape, layout: Layout) -> float:
    """Bytes per token one layer stores (Korthikanti et al. 2022 eq. 2/3) on one GPU, before any
    recomputation: what the memory-bound kernels stream."""
    d, s, t = float(shape.d_model), float(shape.seq_len), float(layout.tensor_parallel)
    scores = (0.0 if layout.flash_attention or shape.heads is None
              else attention_score_bytes(shape.dropout) * shape.heads * s)
    parted = layer_activation_split(shape.d_model, shape.heads, shape.kv_heads, shape.ffn_hidden, shape.mlp,
                                    shape.mla)
    whole = layer_activation_whole(shape.d_model, shape.mla, shape.dropout)
    if layout.sequence_parallel or t == 1:
        return ((whole + parted) * d + scores) / t
    return whole * d + parted * d / t + scores / t


def _eager_traffic_per_token(shape: Shape, layout: Layout) -> float:
    """Bytes per token one layer's forward moves through its eager elementwise kernels on one GPU
    (the op list above RMS_NORM_BYTES): the norms and residual adds on the tokens a GPU holds (÷ t
    with sequence parallelism), the rest on its heads and MLP columns (÷ t). Multi-latent attention:
    its two latents' norms, the rotary part of queries and the shared key, no repeat."""
    d, t = float(shape.d_model), float(layout.tensor_parallel)
    ffn = float(shape.ffn_hidden) if shape.ffn_hidden is not None else 4.0 * d
    mla, heads = shape.mla, shape.heads
    if mla is not None and heads:
        attention = ROPE_BYTES * (heads + 1) * mla.qk_rope_head_dim + RMS_NORM_BYTES * mla.latent_width \
            + 4.0 * mla.v_width(heads)
    else:
        d_kv = d * shape.kv_heads / heads if shape.kv_heads is not None and heads else d
        repeat = 2.0 * (2.0 * d_kv + 2.0 * d) if d_kv < d else 0.0
        attention = ROPE_BYTES * (d + d_kv) + repeat + 4.0 * d
    mlp = (10.0 if shape.mlp == "swiglu" else 4.0) * ffn
    token_wise = 2.0 * RMS_NORM_BYTES * d + 2.0 * 6.0 * d  # two norms, two residual adds
    split = layout.sequence_parallel or t == 1
    return (token_wise / t if split else token_wise) + (attention + mlp) / t


def fp8_gemm_saving(shape: Shape, device: Device) -> float:
    """Seconds per token that one layer's GEMMs save on FP8 tensor cores (`hardware.precision:
    fp8`): its linear layers' FLOPs (`flops.gemm_flops_per_layer`) at the dense FP8 peak instead of
    the BF16 one, both at kernel_efficiency; the attention scores and values, the LM head and the
    memory-bound kernels stay BF16. 0 with BF16 GEMMs."""
    if device.fp8_peak_flops <= 0:
        return 0.0
    gemm = gemm_flops_per_layer(shape.layer_flops, shape.d_model, shape.seq_len, shape.attention_width)
    eff = device.kernel_efficiency
    return gemm / (device.peak_flops * eff) - gemm / (device.fp8_peak_flops * eff)


def op_recomputed_share(shape: Shape) -> float:
    """The share of a layer's GEMM FLOPs that torchtitan's op-level policy recomputes: its matmuls
    (`flops.layer_matmuls`, 2·in·out each per token) that `stacks.op_checkpoint_kept` does not keep."""
    matmuls = layer_matmuls(shape.d_model, shape.heads, shape.kv_heads, shape.ffn_hidden, shape.mlp, shape.mla)
    work = [i * o for i, o in matmuls]
    return sum(w for w, keep in zip(work, op_checkpoint_kept(matmuls)) if not keep) / sum(work)


def recompute_flops_per_token(shape: Shape, recompute: str) -> float:
    """FLOPs per token that recomputation adds (whole model); `recompute` is the priced policy
    (`Stack.checkpoint`)."""
    if recompute == "full":
        return shape.layers * shape.layer_flops / 3.0  # one more forward of every layer
    if recompute == "ops":  # the forward of the matmuls the policy does not keep
        gemm = gemm_flops_per_layer(shape.layer_flops, shape.d_model, shape.seq_len, shape.attention_width)
        return shape.layers * gemm / 3.0 * op_recomputed_share(shape)
    if recompute == "selective":
        # the attention-score matmuls' forward: 2·s·(W_qk + W_v), 4·s·d for multi-head attention
        return 2.0 * shape.layers * shape.attention_width * shape.seq_len
    return 0.0


@dataclass(frozen=True, slots=True)
class StepCost:
    """One layout's step time in closed form: every per-micro-batch share is proportional to the
    micro-batch b (tokens = b·s), so with m micro-batches per step and n = m·b sequences per replica

        T(b, m) = n·K + bubble_k·b + dp(b, m) + optimizer + overhead

    K: compute + recompute + tensor- and pipeline-parallel traffic of one sequence on the slowest
    stage; bubble_k·b = (p − 1)/v micro-batch times; dp(b, m) the exposed data-parallel collective
    (constant per step, or per micro-batch with ZeRO-3, hidden behind window·b of compute per
    micro-batch; ZeRO-2 adds its m − 1 further reductions, each behind ⅔·b·window, the backward of
    its micro-batch). `step_time` is this model with its shares itemised; a solve evaluates `total`
    (a few float operations) for every candidate configuration of a layout."""

    per_sequence: float  # K, seconds per sequence per replica
    window: float  # compute + recompute + TP of one sequence: what hides the DP collective
    bubble_k: float  # bubble per sequence of micro-batch
    zero3: bool
    dp_per_micro: float  # ZeRO-3: gathers + reduce-scatter per micro-batch; ZeRO-2: its reduce-scatter; else 0
    reduce: float  # ZeRO 0-2: the gradient reduction per step
    gather: float  # ZeRO 1-2: the weights' all-gather per step
    overlap: float | None
    fixed: float  # optimizer + overhead (+ the bubble's share of `latency`)
    latency: float = 0.0  # seconds per micro-batch whatever its size: its collectives' α, its GEMMs' fixed time
    gather_share: float = 0.0  # ZeRO-1/2: share of a micro-batch's compute hiding the weights' all-gather (stack)

    def linear(self, micro_batch: float, dp: int, seq_len: int) -> tuple[float, float]:
        """(seconds per token, fixed seconds per step) of T(B) = B·a + c at `micro_batch`, from the
        steps of one and two micro-batches per replica. Where the fixed time (step_overhead:
        1e10 s) rounds one micro-batch's time away, the slope is taken without it."""
        t1, t2 = self.total(micro_batch, 1.0), self.total(micro_batch, 2.0)
        per_token = (t2 - t1) / (dp * micro_batch * seq_len)
        if not per_token > 0:
            bare = replace(self, fixed=0.0)
            b1 = bare.total(micro_batch, 1.0)
            per_token = (bare.total(micro_batch, 2.0) - b1) / (dp * micro_batch * seq_len)
            t1 = b1 + self.fixed
        return per_token, t1 - per_token * dp * micro_batch * seq_len

    def total(self, micro_batch: float, micro_batches: float) -> float:
        return step_seconds(self, micro_batch, micro_batches)

    def scaled(self, k: float) -> StepCost:
        """The same step with every time k times longer (T(b, m) is homogeneous of degree one in its
        times: `exposed_dp` compares a collective with the compute window that hides it)."""
        return StepCost(*scaled_step_fields(tuple(getattr(self, n) for n in self.__slots__), k))


_STEP_TIMES = (0, 1, 2, 4, 5, 6, 8, 9)  # the fields of StepCost in seconds (not zero3, overlap, gather_share)


def scaled_step_fields(fields: tuple, k: float) -> tuple:
    """StepCost's fields, or `step_cost_columns`' columns (same order; a column a list), with every
    time multiplied by k: how a declared MFU anchors the modelled step (cost_model.declared_anchor)."""
    return tuple(([x * k for x in f] if isinstance(f, list) else f * k) if i in _STEP_TIMES else f
                 for i, f in enumerate(fields))


def step_seconds(step, b, m, xp=SCALAR):
    """T(b, m) of a `StepCost` (class docstring): m micro-batches of b sequences per replica. The
    step time, defined here only: `step` holds floats (one layout) or numpy arrays of its fields
    (a sweep's pairs, `xp` = numpy; `zero3` then a boolean array)."""
    once, zero2 = exposed_dp(step.zero3, step.dp_per_micro, step.reduce, step.gather, step.overlap, b, step.window,
                             m, xp, step.gather_share)
    return m * b * step.per_sequence + step.bubble_k * b + once + zero2 + step.fixed + m * step.latency


BACKWARD_SHARE = 2.0 / 3.0  # the backward's share of a micro-batch's compute: what hides ZeRO 0–2's reduction


def exposed_dp(zero3, per_micro, reduce, gather, overlap, b, window, m, xp=SCALAR, gather_share=0.0):
    """(the data-parallel seconds a step leaves exposed once, ZeRO-2's other m − 1 reductions), with
    m micro-batches of b sequences each hidden behind b·window of compute (module docstring):
    ZeRO-3 gathers and reduces per micro-batch behind its compute; ZeRO 0–2 reduce once behind
    the last micro-batch's backward (⅔ of its compute), and ZeRO-2 (per_micro, not ZeRO-3) the
    other m − 1 micro-batches' reductions each behind its own backward; a stack that overlaps the
    ZeRO-1/2 weights' all-gather (`stacks.Stack.gather_share`) hides it behind that share of one
    micro-batch's compute (the next step's first forward). A declared `overlap` hides that
    fraction of every collective instead."""
    per_step = m * per_micro
    total = xp.where(zero3, per_step, reduce + gather)
    if overlap is not None:
        exposed = total * (1.0 - overlap)
        each = per_micro * (1.0 - overlap)
    else:
        backward = BACKWARD_SHARE * b * window
        hidden = xp.minimum(reduce, backward)
        if gather_share:
            hidden = hidden + xp.minimum(gather, gather_share * b * window)
        exposed = total - xp.where(zero3, xp.minimum(per_step, m * b * window), hidden)
        each = xp.maximum(0.0, per_micro - backward)
    return xp.maximum(0.0, exposed), xp.where(zero3, 0.0, (m - 1) * each)


def linear_step_seconds(flops_per_token, batch_tokens, rate, fixed):
    """T(B) = f·B/rate + c: the step with a declared MFU (c = 0), and the closed forms' line."""
    return flops_per_token * batch_tokens / rate + fixed


@functools.lru_cache(maxsize=1024)
def _stage_shares(shape: Shape, device: Device, layout: Layout
                  ) -> tuple[tuple[int, ...], int, tuple[float, float, float], float, tuple[float, float]]:
    """(layers per stage, the slowest stage, its compute, recompute and TP shares of one sequence
    per micro-batch, its TP latency per micro-batch, its GEMMs' compute and recompute seconds per
    micro-batch whatever its size): independent of the GPU count and ZeRO stage,
    so a layout search computes them once per (t, p, recomputation) — `layout` arrives with
    gpus = t·p and zero = 0."""
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    s, d = shape.seq_len, float(shape.d_model)
    tokens = s  # one sequence per micro-batch; every share below is proportional to it
    mm_rate = device.peak_flops * device.kernel_efficiency
    fl, fh = shape.layer_flops, shape.head_flops
    stages = layout.stages(shape)
    act = _activation_traffic_per_token(shape, layout)
    # the memory-bound kernels' bytes per token of a layer: forward + backward, and a forward again
    if layout.stack.eager:
        eager = _eager_traffic_per_token(shape, layout)
        passes, again = (1.0 + EAGER_BACKWARD) * eager, eager
    else:
        passes, again = ELEMENTWISE_PASSES * act, RECOMPUTE_PASSES * act
    policy = layout.stack.checkpoint(layout.recompute)
    # the share of the forward's GEMMs a recomputed layer runs again (the FP8 saving it repeats)
    rec_share = {"full": 1.0, "ops": op_recomputed_share(shape) if policy == "ops" else 0.0}.get(policy, 0.0)
    rec_layer = recompute_flops_per_token(shape, policy) / shape.layers
    tp_link = device.intra_node if t <= device.gpus_per_node else device.network
    # TP collectives a layer: 2 forward + 2 backward; recomputation runs the forward's again, all of
    # them under full, under torchtitan's op-level policy those it does not keep: its save list keeps
    # the reduce-scatters (`_op_sac_save_list`, llama3/infra/parallelize.py, 2025), so with sequence
    # parallelism the two all-gathers are recomputed (one all-reduce's worth), without it both all-reduces
    n_tp = 4 + (2 if policy == "full" or (policy == "ops" and not layout.sequence_parallel)
                else 1 if policy == "ops" else 0)
    tp_one = _ring(tokens * d * BF16, t) / tp_link if t > 1 else 0.0
    # each all-reduce's latency; with sequence parallelism a reduce-scatter and an all-gather
    tp_alpha = (2.0 * group_latency("all_gather", t, 1, device) if layout.sequence_parallel
                else group_latency("all_reduce", t, 1, device))
    if layout.stack.tp_overlap and t > 1:  # pipelined in t chunks with the GEMMs: one chunk exposed (cost.stacks)
        tp_one, tp_alpha = tp_one / t, tp_alpha / t
    # the layer's GEMMs and the LM head as one GPU runs them (cost.gemm_shape): their time against
    # the preset's large-GEMM rate, per token (linear in the micro-batch) and fixed per micro-batch
    gemm = gemm_flops_per_layer(fl, d, s, shape.attention_width)
    layer = gemm_time(device.gemm, sharded_matmuls(d, shape.heads, shape.kv_heads, shape.ffn_hidden, shape.mlp, t,
                                                   layout.stack.fused, shape.mla)) if gemm > 0 else GemmTime()
    head = gemm_time(device.gemm, ((d, shape.vocab / t),)) if shape.vocab else GemmTime()
    fl += gemm * (layer.per_row - 1.0)
    fh *= head.per_row
    rec_layer += gemm / 3.0 * rec_share * (layer.forward_per_row - 1.0)  # the forward's GEMMs again
    saving = fp8_gemm_saving(shape, device)  # per token at the large-GEMM rate; each pass at its own factor
    fp8 = saving * layer.per_row
    gemm_rate = (device.fp8_peak_flops if device.fp8_peak_flops > 0 else device.peak_flops) * device.kernel_efficiency

    def tp_count(n: int) -> int:  # TP collectives per micro-batch: two more per fully recomputed layer
        return n * n_tp if layout.recompute_layers is None else n * 4 + 2 * layout.recomputed(n)

    def fixed(i: int) -> tuple[float, float]:  # the GEMMs' seconds per micro-batch whatever its size
        n = stages[i]
        r = n if policy != "full" else layout.recomputed(n)
        return (n * layer.fixed / gemm_rate + (head.fixed / mm_rate if i == p - 1 else 0.0),
                r * rec_share * layer.forward_fixed / gemm_rate)

    def stage(i: int) -> tuple[float, float, float]:
        n = stages[i]
        r = n if policy != "full" else layout.recomputed(n)  # block: r of the n layers recomputed
        flops = (n * fl + (fh if i == p - 1 else 0.0)) * tokens / t
        compute = flops / mm_rate + passes * n * tokens / device.hbm_bandwidth - n * tokens / t * fp8
        recompute = rec_layer * r * tokens / t / mm_rate
        if policy in ("full", "ops"):  # the forward again: on FP8, a third of its GEMMs' saving again
            recompute += again * r * tokens / device.hbm_bandwidth \
                - r * tokens / t * saving * layer.forward_per_row / 3.0 * rec_share
        elif policy == "selective" and not layout.flash_attention and shape.heads:
            recompute += RECOMPUTE_PASSES * 5.0 * shape.heads * s / t * n * tokens / device.hbm_bandwidth
        return compute, recompute, tp_count(n) * tp_one

    per_stage = [stage(i) for i in range(p)]
    slow = max(range(p), key=lambda i: sum(per_stage[i]) + (i == p - 1) * 1e-18)
    return stages, slow, per_stage[slow], tp_count(stages[slow]) * tp_alpha, fixed(slow)


def _slowest(shape: Shape, device: Device, layout: Layout
             ) -> tuple[tuple[int, ...], tuple[float, float, float], float, float, int, tuple[float, float]]:
    """(layers per stage, the slowest stage's compute, recompute and TP shares of one sequence, its
    GPU's parameters, its TP latency per micro-batch, its layers, its GEMMs' compute and recompute
    seconds per micro-batch whatever its size): what every GPU count of a (t, p, recomputation)
    layout shares."""
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    stages, slow, shares, tp_alpha, gemm_fixed = _stage_shares(shape, device, Layout(
        t * p, t, p, layout.virtual_stages, 0, layout.recompute, layout.flash_attention, layout.sequence_parallel,
        stage_split=layout.stage_split, stack=layout.stack, recompute_layers=layout.recompute_layers))
    local = stage_params(stages[slow], shape.layer_params, shape.embedding_params, slow == 0, slow == p - 1, p,
                         shape.tied_embeddings) / t
    if layout.context_parallel > 1:  # each GPU holds s/cp tokens of a sequence (context_parallel.py)
        shares = (shares[0] / layout.context_parallel, shares[1] / layout.context_parallel,
                  shares[2] / layout.context_parallel)
    ex = layout.experts(shape)
    if ex is not None:  # the routed experts of the stage ÷ etp·ep instead of their average share ÷ t
        routed = ex.routed_layer_params
        moe = moe_layers_per_stage(stages, ex.dense_layers)[slow]
        local += moe * routed / ex.group - stages[slow] * routed * (shape.layers - ex.dense_layers) / shape.layers / t
    return stages, shares, local, tp_alpha, stages[slow], gemm_fixed


def _matmul_rate(shape: Shape, device: Device, t: int) -> float:
    """FLOP/s the layers' matmuls reach on one GPU (what hides the context-parallel ring)."""
    return device.peak_flops * device.kernel_efficiency


def _expert_context(shape: Shape, device: Device, layout: Layout, stages: tuple[int, ...],
                    window: float = 0.0) -> tuple[float, float, float, float]:
    """(expert-parallel, context-parallel) seconds per sequence of micro-batch on the busiest stage:
    the MoE layers' dispatch and combine all-to-alls and their capacity padding
    (budgetdsl.cost.experts), and the ring attention traffic the attention compute does not hide
    (budgetdsl.cost.context_parallel); then their latencies per micro-batch: one point-to-point
    step (`collective_latency`) per all-to-all and per ring step (the latter counted exposed).
    Zeros for a dense model without context parallelism. With `hardware.expert_overlap` the
    all-to-alls run under the compute and recomputation of the stage, `window` seconds per
    sequence, and only what outlasts it counts (budgetdsl.cost.experts), their latency hidden too."""
    t, cp = layout.tensor_parallel, layout.context_parallel
    ex = layout.experts(shape)
    ep_seconds = cp_seconds = ep_alpha = cp_alpha = 0.0
    rate = _matmul_rate(shape, device, t)
    if ex is not None:
        moe_layers = max(moe_layers_per_stage(stages, ex.dense_layers))
        ep_seconds = moe_layers * dispatch_seconds_per_sequence(
            shape.seq_len, shape.d_model, ex, t, cp, layout.recompute, device.gpus_per_node, device.intra_node,
            device.network)
        share = 1.0
        if layout.recompute_layers is not None and layout.recompute == "full":  # block: the recomputed share
            share = layout.recomputed(max(stages)) / max(stages)
            ep_seconds = share * ep_seconds + (1.0 - share) * moe_layers * dispatch_seconds_per_sequence(
                shape.seq_len, shape.d_model, ex, t, cp, "none", device.gpus_per_node, device.intra_node,
                device.network)
        if ex.overlap:
            ep_seconds = max(0.0, ep_seconds - window)
        ep_seconds += moe_layers * capacity_padding_flops(ex) * shape.seq_len / (t * cp) / rate
        if ex.expert_parallel > 1 and not ex.overlap:
            passes = all_to_all_count(layout.recompute) if share == 1.0 else \
                share * all_to_all_count("full") + (1.0 - share) * all_to_all_count("none")
            ep_alpha = moe_layers * passes * group_latency(
                "p2p", ex.expert_parallel, ex.expert_tensor_parallel, device)
    if cp > 1:
        d_kv = shape.d_model * shape.kv_heads / shape.heads if shape.kv_heads and shape.heads else float(shape.d_model)
        if shape.mla is not None and shape.heads:  # the decompressed K and V of every head: (W_qk + W_v)/2 each
            d_kv = 0.5 * shape.attention_width
        cp_seconds = max(stages) * ring_exposed_seconds(shape.seq_len, shape.d_model, d_kv, t, cp, device.gpus_per_node,
                                                        device.intra_node, device.network, rate,
                                                        width=shape.attention_width)
        cp_alpha = max(stages) * RING_PASSES * (cp - 1) * group_latency("p2p", cp, t, device)
    return ep_seconds, cp_seconds, ep_alpha, cp_alpha


def _pipeline_send(shape: Shape, t: int, p: int, link: float, cp: int = 1) -> float:
    """Seconds per sequence of micro-batch to send a stage's activations forward and gradients back
    (a GPU sends its s/cp tokens' share with context parallelism)."""
    return 2.0 * shape.seq_len * float(shape.d_model) * BF16 / t / link / cp if p > 1 else 0.0


def _pipeline_hidden(layout: Layout) -> bool:
    """The stack overlaps the pipeline sends with compute (interleaved schedule only, cost.stacks)."""
    return layout.stack.pp_overlap and layout.virtual_stages > 1


def _pipeline_latency(device: Device, layout: Layout, inside: bool) -> float:
    """Latency per micro-batch of the two pipeline sends (activations, gradients), one p2p step each
    over NVLink (`inside`) or the network; 0 without a pipeline or where the stack hides them."""
    if layout.pipeline_parallel <= 1 or _pipeline_hidden(layout):
        return 0.0
    return 2.0 * collective_latency("p2p", 2, 1 if inside else 2, device.pcie)


def _collectives(shape: Shape, device: Device, layout: Layout, local: float, dps: list[int],
                 shared: dict | None, blocks: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per data-parallel degree of `dps`: (per micro-batch, gradient reduction per step, weights'
    all-gather per step, optimizer step) seconds of the slowest stage's GPU (module docstring). A
    reduce-scatter or all-gather is half an all-reduce's bytes (`dp_collective_time`), each
    collective adds its latency: ZeRO-3 one per transformer block of the stage (`blocks`) and
    direction, ZeRO 0–2 one per bucket of the stack (`stacks.Stack.collectives`); `shared`, a dict
    a layout search passes to every layout, keeps each all-reduce column by (bytes, t, device)."""
    t, zero, stack = layout.tensor_parallel, layout.zero, layout.stack
    grads = layout.grad_bytes * local

    def alpha(kind: str, nbytes: float, value_bytes: float) -> list[float]:
        """The latency of the collectives carrying `nbytes` per GPU, per data-parallel degree."""
        if nbytes <= 0:
            return [0.0] * len(dps)
        return [(blocks if zero >= 3 else stack.collectives(nbytes, value_bytes, dp, blocks))
                * group_latency(kind, dp, t, device) if dp > 1 else 0.0 for dp in dps]

    def all_reduce(nbytes: float) -> list[float]:
        memo = None
        if shared is not None:
            memo = shared.get((nbytes, t, device))
            if memo is None:
                memo = shared[(nbytes, t, device)] = {}
        out = []
        for dp in dps:
            ar = memo.get(dp) if memo is not None else None
            if ar is None:
                ar = dp_collective_time(nbytes, dp, t, device, "all_reduce", calls=0)
                if memo is not None:
                    memo[dp] = ar
            out.append(ar)
        return out

    zeros = [0.0] * len(dps)
    if zero >= 3:
        ag, rs = all_reduce(BF16 * local), all_reduce(grads)
        ag_a, rs_a = alpha("all_gather", BF16 * local, BF16), alpha("reduce_scatter", grads, layout.grad_bytes)
        per_micro, reduce, gather = [2 * (0.5 * a + la if a else 0.0) + (0.5 * r + lr if r else 0.0)
                                     for a, r, la, lr in zip(ag, rs, ag_a, rs_a)], zeros, zeros
    elif zero >= 1:
        reduce = [0.5 * r + la if r else 0.0
                  for r, la in zip(all_reduce(grads), alpha("reduce_scatter", grads, layout.grad_bytes))]
        per_micro = reduce if zero == 2 else zeros
        gather = [0.5 * a + la if a else 0.0
                  for a, la in zip(all_reduce(BF16 * local), alpha("all_gather", BF16 * local, BF16))]
    else:
        per_micro, zeros_ = zeros, all_reduce(grads)
        reduce = [r + la if r else 0.0 for r, la in zip(zeros_, alpha("all_reduce", grads, layout.grad_bytes))]
        gather = zeros
    fixed_bytes, hbm = layout.grad_bytes + ADAM_BYTES, device.hbm_bandwidth
    if zero >= 1:  # Adam over the GPU's shard of the parameters
        optimizer = [fixed_bytes * (local / dp) / hbm for dp in dps]
    else:
        optimizer = [fixed_bytes * (local / 1) / hbm] * len(dps)
    return per_micro, reduce, gather, optimizer


def step_cost(shape: Shape, device: Device, layout: Layout, step_overhead: float = 0.0) -> StepCost:
    """The layout's `StepCost`: T(b, m) for every micro-batch b and count m in closed form."""
    k, window, bubble, zero3, per_micro, reduce, gather, overlap, fixed, latency, gather_share = step_cost_columns(
        shape, device, layout, [layout.gpus], step_overhead)
    return StepCost(k[0], window, bubble[0], zero3, per_micro[0], reduce[0], gather[0], overlap, fixed[0],
                    latency[0], gather_share)


def step_cost_columns(shape: Shape, device: Device, layout: Layout, counts: list[int],
                      step_overhead: float = 0.0, shared: dict | None = None) -> tuple:
    """The fields of `step_cost` of `layout` on each GPU count of `counts` (a layout search's many
    counts of one layout), as columns: (per_sequence, window, bubble_k, zero3, dp_per_micro,
    reduce, gather, overlap, fixed, latency, gather_share), `window`, `zero3`, `overlap` and
    `gather_share` one value for every count.
    What does not depend on the count is computed once: the stage shares, the slowest stage's
    parameters, the two pipeline links (within a node or not); `shared`: see `_collectives`; it
    also keeps what does not depend on the ZeRO stage either (`_slowest`, `_expert_context`: they
    read the shape, the device and the layout's fields named in the key, nothing else)."""
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    key = None
    if shared is not None:  # what the ZeRO stages (and GPU counts) of one layout share, once
        key = ("shares", shape, device, t, p, layout.virtual_stages, layout.recompute, layout.flash_attention,
               layout.sequence_parallel, layout.stage_split, layout.stack, layout.recompute_layers,
               layout.context_parallel, layout.expert_parallel, layout.expert_tensor_parallel)
        kept = shared.get(key)
    if key is None or kept is None:
        slowest = _slowest(shape, device, layout)
        kept = (slowest, _expert_context(shape, device, layout, slowest[0], slowest[1][0] + slowest[1][1]))
        if shared is not None:
            shared[key] = kept
    (stages, (c1, r1, tp1), local, tp_alpha, blocks, (c_fixed, r_fixed)), (ep1, cp1, ep_alpha, cp_alpha) = kept
    cp = layout.context_parallel
    v = max(1, layout.virtual_stages)
    hide_pp = _pipeline_hidden(layout)
    # the two pipeline links: t·dp < GPUs per node (NVLink) or not (the NIC)
    kb = []
    for inside_node, pp_link in ((True, device.intra_node), (False, device.network)):
        k = c1 + r1 + tp1 + ep1 + cp1 + (0.0 if hide_pp else _pipeline_send(shape, t, p, pp_link, cp))
        lat = c_fixed + r_fixed + tp_alpha + ep_alpha + cp_alpha + _pipeline_latency(device, layout, inside_node)
        kb.append((k, (p - 1) / v * k if p > 1 else 0.0, lat, (p - 1) / v * lat if p > 1 else 0.0))
    (k_in, b_in, l_in, lb_in), (k_out, b_out, l_out, lb_out) = kb
    dps = [gpus // (t * p * cp) for gpus in counts]
    inside = [t * dp * cp < device.gpus_per_node for dp in dps]
    # the weights' copies are on dp·cp ranks: the gradient reduction and ZeRO run over them
    per_micro, reduce, gather, optimizer = _collectives(shape, device, layout, local, [dp * cp for dp in dps],
                                                        shared, blocks)
    return ([k_in if i else k_out for i in inside], c1 + r1 + tp1, [b_in if i else b_out for i in inside],
            layout.zero >= 3, per_micro, reduce, gather, layout.overlap,
            [o + step_overhead + (lb_in if i else lb_out) for o, i in zip(optimizer, inside)],
            [l_in if i else l_out for i in inside], layout.stack.gather_share)


def step_time(shape: Shape, device: Device, layout: Layout, micro_batch: float, global_batch: float,
              step_overhead: float = 0.0) -> Breakdown:
    """The predicted step of `global_batch` sequences in micro-batches of `micro_batch` sequences
    per GPU (m = global_batch/(dp·micro_batch) per step; fractional m is allowed for the closed
    forms' linearisation), itemised: the shares of `step_seconds`, each scaled to the step."""
    t, p, v = layout.tensor_parallel, layout.pipeline_parallel, max(1, layout.virtual_stages)
    dp = layout.data_parallel
    b = micro_batch
    m = global_batch / (dp * micro_batch)
    stages, (c1, r1, tp1), local, tp_alpha, blocks, (c_fixed, r_fixed) = _slowest(shape, device, layout)
    cp = layout.context_parallel
    ep1, cp1, ep_alpha, cp_alpha = _expert_context(shape, device, layout, stages, c1 + r1)
    inside = t * dp * cp < device.gpus_per_node
    pp1 = 0.0 if _pipeline_hidden(layout) else _pipeline_send(
        shape, t, p, device.intra_node if inside else device.network, cp)
    (per_micro,), (reduce,), (gather,), (optimizer,) = _collectives(shape, device, layout, local, [dp * cp],
                                                                    None, blocks)
    # each share per micro-batch: b sequences' worth plus its collectives' latency
    c_mb, r_mb, tp_mb = c1 * b + c_fixed, r1 * b + r_fixed, tp1 * b + tp_alpha
    pp_micro = pp1 * b + _pipeline_latency(device, layout, inside)
    ep_mb, cp_mb = ep1 * b + ep_alpha, cp1 * b + cp_alpha
    micro_time = c_mb + r_mb + tp_mb + ep_mb + cp_mb + pp_micro
    bubble = (p - 1) / v * micro_time if p > 1 else 0.0
    # the window hiding the collectives: the micro-batch's per-sequence compute (StepCost.window; the
    # GEMMs' fixed time per micro-batch is not counted as hiding them)
    once, zero2 = exposed_dp(layout.zero >= 3, per_micro, reduce, gather, layout.overlap, 1.0, (c1 + r1 + tp1) * b,
                             m, SCALAR, layout.stack.gather_share)
    seq_tokens = global_batch * shape.seq_len
    model_flops = shape.flops_per_token * seq_tokens
    recomputed = recompute_flops_per_token(shape, layout.stack.checkpoint(layout.recompute)) * seq_tokens
    if layout.recompute_layers is not None and layout.recompute == "full":  # block: the recomputed layers' share
        recomputed *= sum(layout.recomputed(n) for n in stages) / sum(stages)
    hardware_flops = model_flops + recomputed
    return Breakdown(compute=m * c_mb, recompute=m * r_mb, tp_comm=m * tp_mb, pp_comm=m * pp_micro,
                     bubble=bubble, dp_comm=once + zero2, optimizer=optimizer,
                     overhead=step_overhead, model_flops=model_flops, hardware_flops=hardware_flops,
                     gpus=layout.gpus, peak_flops=device.peak_flops, micro_batch=micro_batch,
                     micro_batches=m, stage_layers=stages, ep_comm=m * ep_mb, cp_comm=m * cp_mb)


__all__ = ["Shape", "Device", "Layout", "Breakdown", "COMPONENTS", "StepCost", "step_cost", "step_cost_columns",
           "step_seconds", "exposed_dp", "linear_step_seconds", "step_time", "scaled_step_fields",
           "dp_collective_time", "collective_latency", "group_latency", "recompute_flops_per_token"]

