"""Memory per GPU from the mixed-precision recipe, stage by stage (docs/design.md section 2).

The recipe (Micikevicius et al. 2018; Rajbhandari et al. 2020, ZeRO, section 3.1), per parameter:
- bf16 weights, 2 bytes — sharded over dp by ZeRO-3 / FSDP full sharding;
- gradients in `grad_dtype`: fp32 by default, 4 bytes (Megatron-LM accumulates and reduces into an
  fp32 `main_grad` for bf16 runs; DeepSpeed's bf16 optimizer keeps fp32 gradient accumulators) —
  sharded by ZeRO-2 and 3;
- Adam: fp32 master weights, first and second moments, 12 bytes — sharded by ZeRO-1, 2 and 3.
Parameters of a stage: its layers' share (N − V·d)/L each, the embedding V·d on the first stage and
the LM head V·d on the last (a tied head is a copy there, as Megatron keeps it), all ÷ t.

Activations per sequence per layer, 16-bit (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", Table 2):
- no recomputation, tensor parallel without sequence parallelism: s·d·(10 + 24/t + 5·a·s/(d·t));
  with sequence parallelism (or t = 1): s·d·(34 + 5·a·s/d)/t;
- flash attention or selective recomputation: the 5·a·s/d attention-score term is not kept;
- full recomputation: 2·s·d per layer (÷ t with sequence parallelism), plus one layer's full set
  while it is recomputed for the backward.
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

from budgetdsl.hardware.layout import stage_layers

BYTES_WEIGHTS = 2.0  # bf16
BYTES_OPTIMIZER = 12.0  # fp32 master weights (4) + Adam m (4) + v (4)
GRAD_BYTES = {"fp32": 4.0, "bf16": 2.0}
LOGIT_BYTES = 4.0  # fp32 logits for the loss


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

    @property
    def static(self) -> float:
        return self.weights + self.grads + self.optimizer

    @property
    def per_sequence(self) -> float:
        return self.activations_per_sequence + self.logits_per_sequence

    def at(self, micro_batch: int) -> float:
        return self.static + micro_batch * self.per_sequence


def activation_bytes_per_layer(seq_len: int, d_model: int, heads: int | None, recompute: str,
                               flash_attention: bool, tensor_parallel: int = 1,
                               sequence_parallel: bool = True) -> float | None:
    """Korthikanti et al. (2022) Table 2: 16-bit activation bytes of one sequence in one layer on
    one GPU. None when the attention-score term needs `heads` and it is unknown."""
    s, d, t = float(seq_len), float(d_model), float(tensor_parallel)
    split = sequence_parallel or t == 1
    if recompute == "full":
        return 2.0 * s * d / (t if split else 1.0)  # only the layer input is stored
    keep_scores = recompute != "selective" and not flash_attention
    if keep_scores and heads is None:
        return None
    scores = 5.0 * heads * s / d if keep_scores and heads else 0.0
    if split:
        return s * d * (34.0 + scores) / t
    return s * d * (10.0 + 24.0 / t + scores / t)


def stage_memory(*, params: float, seq_len: int, layers: int | None, d_model: int | None,
                 heads: int | None, vocab: int | None, tensor_parallel: int, pipeline_parallel: int,
                 data_parallel: int, zero: int, recompute: str, flash_attention: bool,
                 sequence_parallel: bool, virtual_stages: int = 1, grad_dtype: str = "fp32",
                 activation_bytes_per_token: float | None = None,
                 head_layers: float = 0.0) -> list[StageMemory] | None:
    """Memory of every pipeline stage's GPU, or None when the shape is too unknown to estimate
    activations (no layers/d_model and no `activation_bytes_per_token`)."""
    t, p, dp = tensor_parallel, pipeline_parallel, max(1, data_parallel)
    grad_bytes = GRAD_BYTES[grad_dtype]
    interleave = 1.0 + (p - 1) / (p * virtual_stages) if virtual_stages > 1 else 1.0

    d3, d2, d1 = zero_divisors(dp, zero)

    def static(local: float) -> tuple[float, float, float]:
        return BYTES_WEIGHTS * local / d3, grad_bytes * local / d2, BYTES_OPTIMIZER * local / d1

    if activation_bytes_per_token is not None or layers is None or d_model is None:
        if activation_bytes_per_token is None:
            return None
        # declared bytes per token for the whole model: ÷ t·p per stage, × p in flight (1F1B)
        act = activation_bytes_per_token * seq_len / (t * p) * p * interleave
        return [StageMemory(0, layers, *static(params / (t * p)), act, 0.0)]

    per_layer = activation_bytes_per_layer(seq_len, d_model, heads, recompute, flash_attention, t,
                                           sequence_parallel)
    if per_layer is None:
        return None
    working = 0.0
    if recompute == "full":  # the layer being recomputed holds its full set during its backward
        working = activation_bytes_per_layer(seq_len, d_model, heads, "none", flash_attention, t,
                                             sequence_parallel) or 0.0
    emb = float(vocab * d_model) if vocab else 0.0
    layer_params = (params - emb) / layers
    counts = stage_layers(layers, p, head_layers)
    out = []
    for i, n in enumerate(counts):
        local = n * layer_params + (emb if i == 0 else 0.0) + (emb if i == p - 1 and p > 1 else 0.0)
        in_flight = (p - i) * interleave
        act = per_layer * n * in_flight + working
        logits = LOGIT_BYTES * seq_len * vocab / t if (vocab and i == p - 1) else 0.0
        out.append(StageMemory(i, n, *static(local / t), act, logits))
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
