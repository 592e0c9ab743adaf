"""Memory per GPU from the mixed-precision recipe, stage by stage (docs/design.md section 2).

The recipe (Micikevicius et al. 2018; Rajbhandari et al. 2020, ZeRO, section 3.1), per parameter:
- bf16 weights, 2 bytes — sharded over dp by ZeRO-3 / FSDP full sharding;
- gradients in `grad_dtype`: fp32 by default, 4 bytes (Megatron-LM accumulates and reduces into an
  fp32 `main_grad` for bf16 runs; DeepSpeed's bf16 optimizer keeps fp32 gradient accumulators) —
  sharded by ZeRO-2 and 3;
- Adam: fp32 master weights, first and second moments, 12 bytes — sharded by ZeRO-1, 2 and 3.
Parameters of a stage (`stage_params`): its layers' share (N − V·d)/L each ((N − 2·V·d)/L with an
untied LM head, which N counts too), the embedding V·d on the first stage and the LM head V·d on
the last (a tied head is a copy there under a pipeline, as Megatron keeps it), all ÷ t. With
FP8 GEMMs (`hardware.precision: fp8`) each layer parameter also has FP8_WEIGHT_BYTES of FP8 copies:
Transformer Engine casts the bf16 weight to FP8 once per step and caches it for the step's
micro-batches, with its transpose for the backward's GEMM (Hopper's FP8 tensor cores take one
layout only), sharded like the weights. Master weights, gradients and optimizer state stay as
below; of the stored activations, the inputs of the four linear layers (QKV, output projection,
MLP up/gate and down) are kept in FP8, 1 byte a value: Transformer Engine's `Linear` saves its
quantized input for the weight-gradient GEMM (transformer_engine/pytorch/module/linear.py at
d0067d0: `saved_inputmat = inputmat`, the FP8 tensor with only its column-wise data kept), so the
QKV and MLP inputs (d wide each, in the 10) and the projection and down-projection inputs (d and
F wide, in the split part) take half their 16-bit bytes (`FP8_SAVED_WHOLE`, `fp8_saved_split`).

Activations per sequence per layer, 16-bit (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", section 4.1 and Table 2):
- no recomputation, tensor parallel without sequence parallelism: s·d·(10 + 24/t + 5·a·s/(d·t));
  with sequence parallelism (or t = 1): s·d·(34 + 5·a·s/d)/t;
- the 24 is their itemisation for a standard layer; for any shape (`layer_activation_split`) it is
  (4·d + 4·d_kv + M)/d bytes per token: Q and the output projection's input 2·d each, K and V
  2·d_kv each (d_kv = kv_heads·d/heads under grouped-query attention), and the MLP's M = 4·F
  (GeLU: its input and output, F wide) or 6·F (SwiGLU: the gate and up projections' outputs and
  their product); the 10 (norm inputs, the QKV and MLP inputs, two dropout masks) is d-wide either
  way. With d_kv = d and F = 4·d, 4 + 4 + 16 = 24. Multi-latent attention (DeepSeek-V2/V3,
  `budgetdsl.plan.model.LatentAttention`) runs decompressed, so its Q and K are W_qk = H·(d_n + d_r)
  wide and its V and the output projection's input W_v = H·d_v: (4·W_qk + 4·W_v + M)/d; its two
  latents d_c' + d_c (each the RMSNorm's input and the up-projection's input, 2 + 2 bytes) join
  the part tensor parallelism keeps whole, as Megatron-Core runs the down-projections duplicated
  on every TP rank and scatters the latents only under sequence parallelism (multi_latent_attention.py);
- without dropout (`model.dropout: 0`, as Llama, Mistral, Qwen and DeepSeek train) no dropout mask
  is stored: PyTorch's dropout at p = 0 returns its input and saves nothing for the backward, so
  the two masks (2·s·d, DROPOUT_MASKS) leave the 10, which is 8, and of the 5·a·s² attention-score
  bytes (softmax output 2, dropout mask 1, dropout output 2) the softmax output alone stays, 2·a·s²
  (`attention_score_bytes`): it serves both the softmax's backward and the value matmul's. Only
  zero against nonzero matters: a mask is 1 byte a value whatever p;
- flash attention or selective recomputation: the 5·a·s/d attention-score term (2·a·s/d without
  dropout) is not kept;
- torchtitan's op-level selective checkpointing (`recompute: selective` under `stack: fsdp2`,
  "ops": budgetdsl.cost.stacks): the layer's input (2·d), the kept matmuls' outputs (2 bytes × each
  output width: `op_checkpoint_saved`), the attention kernel's output (2·W_v) and its fp32 log-sum-exp
  (4·a), whatever the dropout (recomputed too); plus, like full recomputation, the one layer being
  recomputed for its backward (the rest of its full set);
- full recomputation: 2·s·d per layer (÷ t with sequence parallelism), plus one layer's full set
  while it is recomputed for the backward;
- block recomputation (full with `recompute_layers` N, Megatron-LM --recompute-method block): the
  first N layers of each of a stage's v chunks at the full-recomputation size (and the one layer
  being recomputed), the stage's other layers at the no-recomputation size (`recomputed_layers`).
Under 1F1B, stage i (0-based) of p holds p − i micro-batches in flight (Narayanan et al. 2021,
section 2.2), so the first stage holds p × its layers (Korthikanti et al. eq. 5: L layers' worth
for even stages); interleaving v chunks multiplies it by 1 + (p − 1)/(p·v) (their section 4.2.3).
The last stage also holds the logits of its micro-batch, s·V values in fp32 for the loss, ÷ t
(vocabulary-parallel cross-entropy).

The device's memory is its heaviest stage's: max over stages of static + micro-batch × per-sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from budgetdsl.cost.experts import Experts, expert_data_parallel, moe_activation_extra, moe_layers_per_stage
from budgetdsl.cost.flops import layer_matmuls
from budgetdsl.cost.stacks import LOGIT_BYTES, op_checkpoint_kept
from budgetdsl.hardware.layout import balanced_split

if TYPE_CHECKING:
    from budgetdsl.plan.model import LatentAttention

BYTES_WEIGHTS = 2.0  # bf16
FP8_WEIGHT_BYTES = 2.0  # FP8 copy of a layer weight and its transpose, cached for a step (module docstring)
BYTES_OPTIMIZER = 12.0  # fp32 master weights (4) + Adam m (4) + v (4)
GRAD_BYTES = {"fp32": 4.0, "bf16": 2.0}


@dataclass(frozen=True, slots=True)
class StageMemory:
    """Bytes on one GPU of pipeline stage `stage`."""

    stage: int
    layers: int | None
    weights: float
    grads: float
    optimizer: float
    activations_per_sequence: float  # every micro-batch in flight, per sequence of the micro-batch
    logits_per_sequence: float
    # of weights, grads and optimizer: the routed experts' share (ZeRO shards it over edp, the rest over dp·cp)
    experts: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def static(self) -> float:
        return self.weights + self.grads + self.optimizer

    @property
    def per_sequence(self) -> float:
        return self.activations_per_sequence + self.logits_per_sequence

    def at(self, micro_batch: int) -> float:
        return self.static + micro_batch * self.per_sequence


def layer_activation_split(d_model: int, heads: int | None = None, kv_heads: int | None = None,
                           ffn_hidden: int | None = None, mlp: str = "gelu",
                           mla: LatentAttention | None = None) -> float:
    """The part of a layer's 16-bit activations tensor parallelism splits, bytes per token ÷ d:
    Korthikanti et al. (2022) section 4.1's 24 generalised to the shape (module docstring):
    (4·d + 4·d_kv + M)/d, M = 4·F (GeLU) or 6·F (SwiGLU); (4·W_qk + 4·W_v + M)/d with multi-latent
    attention."""
    d = float(d_model)
    d_kv = d * kv_heads / heads if kv_heads is not None and heads else d
    ffn = float(ffn_hidden) if ffn_hidden is not None else 4.0 * d
    mlp_bytes = (6.0 if mlp == "swiglu" else 4.0) * ffn
    if mla is not None and heads:
        return (4.0 * mla.qk_width(heads) + 4.0 * mla.v_width(heads) + mlp_bytes) / d
    return (4.0 * d + 4.0 * d_kv + mlp_bytes) / d


ACTIVATION_WHOLE = 10.0  # bytes per token ÷ d that tensor parallelism without sequence parallelism keeps whole
DROPOUT_MASKS = 2.0  # of those, the two 1-byte dropout masks (after attention, after the MLP): none at p = 0
ATTENTION_SCORES = 5.0  # bytes per score a head: softmax output 2, dropout mask 1, dropout output 2
ATTENTION_SCORES_NO_DROPOUT = 2.0  # at p = 0: the softmax output alone (its backward's and the value matmul's)
FP8_SAVED_WHOLE = 2.0  # of those, saved by FP8 linear layers: the QKV and MLP inputs at 1 byte instead of 2


def fp8_saved_split(d_model: int, ffn_hidden: int | None = None) -> float:
    """Bytes per token ÷ d of the split part that FP8 linear layers save (module docstring): the
    output projection's input (d) and the down projection's (F) at 1 byte instead of 2."""
    ffn = float(ffn_hidden) if ffn_hidden is not None else 4.0 * d_model
    return 1.0 + ffn / d_model


LSE_BYTES = 4.0  # flash attention's saved log-sum-exp: one fp32 value per head and token


def op_checkpoint_saved(d_model: int, heads: int | None = None, kv_heads: int | None = None,
                        ffn_hidden: int | None = None, mlp: str = "gelu",
                        mla: LatentAttention | None = None) -> float:
    """Bytes per token ÷ d a layer keeps under torchtitan's op-level selective checkpointing (module
    docstring): its input, the outputs of the matmuls the policy keeps (`stacks.op_checkpoint_kept`
    over `flops.layer_matmuls`), the attention kernel's output and log-sum-exp."""
    d = float(d_model)
    matmuls = layer_matmuls(d, heads, kv_heads, ffn_hidden, mlp, mla)
    kept = sum(out for (_, out), keep in zip(matmuls, op_checkpoint_kept(matmuls)) if keep)
    attention_out = mla.v_width(heads) if mla is not None and heads else d
    return (BYTES_WEIGHTS * (d + kept + attention_out) + LSE_BYTES * float(heads or 0)) / d


def layer_activation_whole(d_model: int, mla: LatentAttention | None = None, dropout: bool = True) -> float:
    """The part tensor parallelism keeps whole (without sequence parallelism), bytes per token ÷ d:
    ACTIVATION_WHOLE, less the DROPOUT_MASKS without `dropout` (p = 0: module docstring), plus
    multi-latent attention's two latents, 4·(d_c' + d_c)/d (module docstring)."""
    whole = ACTIVATION_WHOLE - (0.0 if dropout else DROPOUT_MASKS)
    return whole + (4.0 * mla.latent_width / float(d_model) if mla is not None else 0.0)


def attention_score_bytes(dropout: bool = True) -> float:
    """Bytes stored per attention score of a head, where the scores are kept (no flash attention,
    no selective recomputation): the 5 of Korthikanti et al.'s 5·a·s²·b, or 2 without `dropout`
    (module docstring). The term a layer stores is this × a·s per token."""
    return ATTENTION_SCORES if dropout else ATTENTION_SCORES_NO_DROPOUT


def activation_bytes_per_layer(seq_len: int, d_model: int, heads: int | None, recompute: str,
                               flash_attention: bool, tensor_parallel: int = 1,
                               sequence_parallel: bool = True, *, kv_heads: int | None = None,
                               ffn_hidden: int | None = None, mlp: str = "gelu",
                               mla: LatentAttention | None = None, fp8: bool = False,
                               dropout: bool = True) -> float | None:
    """Korthikanti et al. (2022) Table 2, for the layer's shape (`layer_activation_split`): 16-bit
    activation bytes of one sequence in one layer on one GPU (with `fp8`, the linear layers'
    inputs at 1 byte; without `dropout`, p = 0, no dropout masks: module docstring). None when the
    attention-score term needs `heads` and it is unknown."""
    s, d, t = float(seq_len), float(d_model), float(tensor_parallel)
    split = sequence_parallel or t == 1
    if recompute == "full":
        return 2.0 * s * d / (t if split else 1.0)  # only the layer input is stored
    if recompute == "ops":  # the input whole without sequence parallelism, the rest ÷ t
        saved = op_checkpoint_saved(d_model, heads, kv_heads, ffn_hidden, mlp, mla)
        return s * d * saved / t if split else s * d * (BYTES_WEIGHTS + (saved - BYTES_WEIGHTS) / t)
    keep_scores = recompute != "selective" and not flash_attention
    if keep_scores and heads is None:
        return None
    scores = attention_score_bytes(dropout) * heads * s / d if keep_scores and heads else 0.0
    parted = layer_activation_split(d_model, heads, kv_heads, ffn_hidden, mlp, mla)
    whole = layer_activation_whole(d_model, mla, dropout)
    if fp8:
        whole, parted = whole - FP8_SAVED_WHOLE, parted - fp8_saved_split(d_model, ffn_hidden)
    if split:
        return s * d * (whole + parted + scores) / t
    return s * d * (whole + parted / t + scores / t)


def recomputed_layers(layers: int, recompute: str, recompute_layers: int | None = None,
                      virtual_stages: int = 1) -> int:
    """Layers of a stage of `layers` that recomputation recomputes in full: all under full
    recomputation, the first N of each of its v chunks under block recomputation (`recompute_layers`
    N: Megatron-LM's --recompute-method block recomputes the first N layers of every virtual chunk),
    none otherwise."""
    if recompute != "full":
        return 0
    if recompute_layers is None:
        return layers
    return min(layers, recompute_layers * max(1, virtual_stages))


def layer_params(params: float, layers: int, embedding: float, tied_embeddings: bool = True) -> float:
    """One layer's parameters: N less the embedding matrices it counts (V·d tied, 2·V·d untied), ÷ L."""
    return (params - embedding * (1.0 if tied_embeddings else 2.0)) / layers


def stage_params(n_layers: float, per_layer: float, embedding: float, first: bool, last: bool,
                 pipeline_parallel: int, tied_embeddings: bool = True) -> float:
    """Parameters held by a GPU of a stage before t divides them (module docstring): its layers, the
    input embedding on the first stage, the LM head on the last (its own matrix untied; a copy of
    the tied embedding only where the pipeline puts the head on another stage)."""
    head = last and (pipeline_parallel > 1 or not tied_embeddings)
    return n_layers * per_layer + (embedding if first else 0.0) + (embedding if head else 0.0)


def stage_memory(*, params: float, seq_len: int, layers: int | None, d_model: int | None,
                 heads: int | None, vocab: int | None, tensor_parallel: int, pipeline_parallel: int,
                 data_parallel: int, zero: int, recompute: str, flash_attention: bool,
                 sequence_parallel: bool, virtual_stages: int = 1, grad_dtype: str = "fp32",
                 activation_bytes_per_token: float | None = None,
                 head_layers: float = 0.0, kv_heads: int | None = None, ffn_hidden: int | None = None,
                 mlp: str = "gelu", tied_embeddings: bool = True,
                 fp8: bool = False, context_parallel: int = 1,
                 experts: Experts | None = None,
                 split: tuple[int, ...] | None = None, mla: LatentAttention | None = None,
                 recompute_layers: int | None = None, dropout: bool = True,
                 logit_bytes: float = LOGIT_BYTES, splits: dict | None = None) -> list[StageMemory] | None:
    """Memory of every pipeline stage's GPU, or None when the shape is too unknown to estimate
    activations (no layers/d_model and no `activation_bytes_per_token`). `fp8`: FP8 GEMMs, whose
    cached weight copies (FP8_WEIGHT_BYTES per layer parameter) the weights include.

    `context_parallel` cp: each GPU holds s/cp tokens of a sequence, so activations and logits are
    ÷ cp, and the cp ranks hold copies of the weights: ZeRO shards over dp·cp (Megatron-Core's
    distributed optimizer uses the data-parallel group with context parallelism). `experts`: the
    routed experts are ÷ etp·ep instead of ÷ t, their ZeRO shards over edp, and each MoE layer
    stores `experts.moe_activation_extra` more activations (budgetdsl.cost.experts). `split`: the
    layers per stage the plan pins (hardware.stage_layers), else balanced with the LM head's
    `head_layers` on the last, in chunks of v layers with interleaving (`layout.balanced_split`).
    `recompute_layers` N with full recomputation: block recomputation (`recomputed_layers`).
    `dropout`: the model trains with dropout (p > 0), storing its masks (`activation_bytes_per_layer`).
    `logit_bytes`: what the loss holds per logit (the stack's, `budgetdsl.cost.stacks`).
    `splits`: a dict the caller keeps the balanced splits in, by their arguments (a layout search
    builds thousands of cost models on a few pipeline depths)."""
    t, p, dp = tensor_parallel, pipeline_parallel, max(1, data_parallel)
    cp = max(1, context_parallel)
    grad_bytes = GRAD_BYTES[grad_dtype]
    interleave = 1.0 + (p - 1) / (p * virtual_stages) if virtual_stages > 1 else 1.0

    d3, d2, d1 = zero_divisors(dp * cp, zero)

    def static(local: float, in_layers: float,
               divisors: tuple[int, int, int] = (d3, d2, d1)) -> tuple[float, float, float]:
        z3, z2, z1 = divisors
        copies = FP8_WEIGHT_BYTES * in_layers / z3 if fp8 else 0.0
        return BYTES_WEIGHTS * local / z3 + copies, grad_bytes * local / z2, BYTES_OPTIMIZER * local / z1

    if activation_bytes_per_token is not None or layers is None or d_model is None:
        if activation_bytes_per_token is None:
            return None
        # declared bytes per token for the whole model: ÷ t·p per stage, × p in flight (1F1B)
        act = activation_bytes_per_token * seq_len / (t * p) * p * interleave / cp
        local = params / (t * p)
        return [StageMemory(0, layers, *static(local, local), act, 0.0)]

    per_layer = activation_bytes_per_layer(seq_len, d_model, heads, recompute, flash_attention, t,
                                           sequence_parallel, kv_heads=kv_heads, ffn_hidden=ffn_hidden, mlp=mlp,
                                           mla=mla, fp8=fp8, dropout=dropout)
    if per_layer is None:
        return None
    working = 0.0
    block = recompute == "full" and recompute_layers is not None
    if recompute in ("full", "ops"):  # the layer being recomputed holds its full set during its backward
        kept = activation_bytes_per_layer(seq_len, d_model, heads, "none", flash_attention, t, sequence_parallel,
                                          kv_heads=kv_heads, ffn_hidden=ffn_hidden, mlp=mlp, mla=mla, fp8=fp8,
                                          dropout=dropout)
        if kept is None and block:  # the layers block recomputation keeps need the attention scores' heads
            return None
        # ops: what the layer's backward recomputes beside what it kept
        working = max(0.0, (kept or 0.0) - per_layer) if recompute == "ops" else (kept or 0.0)
    emb = float(vocab * d_model) if vocab else 0.0
    per_param = layer_params(params, layers, emb, tied_embeddings)
    counts: tuple[int, ...] | None = split if split is not None and len(split) == p else None
    if counts is None:
        at = (layers, p, virtual_stages, head_layers)
        counts = splits.get(at) if splits is not None else None
        if counts is None:
            counts = balanced_split(layers, p, virtual_stages, head_layers)
            if splits is not None:
                splits[at] = counts
    moe = moe_layers_per_stage(counts, experts.dense_layers) if experts is not None else [0] * p
    if experts is not None:  # what every stage's routed experts share (the loop's invariants, computed once)
        routed, group, moe_layers = experts.routed_layer_params, experts.group, layers - experts.dense_layers
        edp_divisors = zero_divisors(expert_data_parallel(t, cp, dp, experts), zero)
        ffn = float(ffn_hidden or 4 * d_model)
        extra_kept = moe_activation_extra(seq_len, d_model, ffn, mlp, experts, t, recompute)
        extra_none = moe_activation_extra(seq_len, d_model, ffn, mlp, experts, t, "none") if block else 0.0
    out = []
    statics: dict[tuple, tuple] = {}  # the stages' parameter bytes, alike on the middle stages: once each
    for i, n in enumerate(counts):
        in_flight = (p - i) * interleave
        r = recomputed_layers(n, recompute, recompute_layers, virtual_stages) if block else 0
        if block:  # r layers at the full-recomputation size, the rest at the no-recomputation size (`working`)
            act = (per_layer * r + working * (n - r)) * in_flight + (working if r else 0.0)
        else:
            act = per_layer * n * in_flight + working
        logits = logit_bytes * seq_len * vocab / t if (vocab and i == p - 1) else 0.0
        key = (n, i == 0, i == p - 1, moe[i])
        held = statics.get(key)
        if held is None:
            local = stage_params(n, per_param, emb, i == 0, i == p - 1, p, tied_embeddings)
            if experts is not None:  # the routed experts: ÷ etp·ep, ZeRO over edp (budgetdsl.cost.experts)
                dense = (local - n * routed * moe_layers / layers) / t
                weights, grads, optimizer = static(dense, dense - (local - n * per_param) / t)
                own = static(moe[i] * routed / group, moe[i] * routed / group, edp_divisors)
                held = (weights + own[0], grads + own[1], optimizer + own[2], own)
            else:
                held = (*static(local / t, n * per_param / t), None)
            statics[key] = held
        weights, grads, optimizer, own = held
        if experts is not None:
            extra = extra_kept
            if block and n:  # the MoE layers recomputed in the same share as the stage's layers
                extra = (1.0 - r / n) * extra_none
            act += moe[i] * in_flight * extra
            out.append(StageMemory(i, n, weights, grads, optimizer, act / cp, logits / cp, own))
            continue
        out.append(StageMemory(i, n, weights, grads, optimizer, act / cp, logits / cp))
    return out


def heaviest(stages: list[StageMemory], micro_batch: int = 1) -> StageMemory:
    return max(stages, key=lambda st: (st.at(micro_batch), -st.stage))


def zero_divisors(dp: int, zero: int) -> tuple[int, int, int]:
    """What ZeRO divides the (weights, gradients, optimizer state) of a GPU by: stage 1 shards the
    optimizer state over the dp replicas, stage 2 the gradients too, stage 3 the weights too."""
    return (dp if zero >= 3 else 1), (dp if zero >= 2 else 1), (dp if zero >= 1 else 1)


def micro_batch_room(free: float, stages) -> int:
    """The largest micro-batch every stage of `stages`, (static bytes, bytes per sequence) each,
    fits in `free` bytes (memory − reserve); 0 when none."""
    best = math.inf
    for static, per_sequence in stages:
        room = free - static
        if room <= 0:
            return 0
        if per_sequence > 0:
            # the tiny relative tolerance keeps an exact fit (room = k·per_sequence) from losing k
            fits = math.floor(room / per_sequence * (1 + 1e-12))
            if fits < best:
                best = fits
    return 0 if best is math.inf else max(0, int(best))


def micro_batch_max(stages: list[StageMemory], free: float) -> int:
    """The largest micro-batch every stage fits in `free` bytes (memory − reserve); 0 when none."""
    return micro_batch_room(free, ((st.static, st.per_sequence) for st in stages))
