"""The cost model of DESIGN.md section 2: FLOPs per token, step time, memory per device.

Pure arithmetic on a validated plan and a GPU count; every coefficient is reported with where it
came from (declared in the plan, derived by a formula, taken from a GPU preset, or a default), so
a reviewer sees which numbers the answer rests on.

Formulas and their sources:
- FLOPs per token, training (forward + backward): f = 6N + 12·L·d·s (Chowdhery et al. 2022, PaLM,
  appendix B: 6N for the matmuls plus 6·L·s·d·2 for attention scores and values); 6N when the shape
  is unknown (Kaplan et al. 2020, section 2.1, C ≈ 6N per token).
- Step time for a global batch of B tokens: T(B) = f·B/(G·P·u) + T_comm + T_fixed.
- Gradient synchronisation per optimizer step: a ring all-reduce moves 2·(dp−1)/dp of the gradient
  bytes through each GPU's link (Patarasuk & Yuan 2009); ZeRO stages 1 and 2 replace it by a
  reduce-scatter of gradients plus an all-gather of the updated 16-bit weights, the same volume,
  and stage 3 adds a second all-gather of the weights for the backward pass: 3·(dp−1)/dp
  (Rajbhandari et al. 2020, ZeRO, section 7.2). Gradient bytes per replica = 2 bytes/param (bf16)
  × N/(t·p). T_comm = k·(dp−1)/dp · 2·N/(t·p) / network · (1 − overlap), k = 2 (3 for ZeRO-3).
  Assumed: one collective per optimizer step (gradient accumulation does not repeat it; ZeRO-3
  re-gathers weights per micro-step in practice, which this under-counts), and the per-GPU
  inter-node bandwidth as the link even when all replicas share a node.
- Memory per device (mixed-precision Adam, Rajbhandari et al. 2020 section 3.1): 16-bit weights
  2 bytes, 16-bit gradients 2 bytes, fp32 master weights + Adam moments 12 bytes per parameter,
  each divided by t·p; ZeRO stage 1 also divides the optimizer state by dp, stage 2 the gradients
  too, stage 3 (FSDP full sharding) the weights too.
- Activations per sequence per layer, 16-bit (Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", eq. 2 and section 4): s·d·(34 + 5·a·s/d) bytes
  without recomputation; 34·s·d with selective recomputation or a fused (flash) attention that keeps
  no s×s scores; 2·s·d with full recomputation (only each layer's input is kept). Divided by t
  (tensor parallelism with sequence parallelism, their eq. 4), times L/p layers per device; with
  pipeline parallelism the 1F1B schedule keeps p micro-batches in flight on the first stage
  (Narayanan et al. 2021, section 2.2), so that stage holds L layers' worth (Korthikanti et al.
  2022, eq. 5). The embedding and output-logit activations are not counted.
  `model.activation_bytes_per_token` replaces the per-layer estimate: bytes per token for the whole
  model, divided by t (and by p, times the p micro-batches in flight).
- A reserve of RESERVE_FRACTION of device memory is kept free for the CUDA context, NCCL buffers
  and allocator fragmentation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from budgetdsl.gpus import find_preset

if TYPE_CHECKING:
    from budgetdsl.plan_model import Plan

# Fraction of device memory the model leaves free (CUDA context ~0.5–1 GiB, NCCL buffers, and the
# caching allocator's fragmentation). A stated assumption; a plan cannot override it yet.
RESERVE_FRACTION = 0.10
BYTES_WEIGHTS = 2.0  # bf16 weights per parameter
BYTES_GRADS = 2.0  # bf16 gradients per parameter
BYTES_OPTIMIZER = 12.0  # fp32 master weights (4) + Adam m (4) + v (4) per parameter
BYTES_GRAD_COMM = 2.0  # bf16 gradients on the wire

DECLARED, DERIVED, PRESET, DEFAULT = "declared", "derived", "preset", "default"


@dataclass(frozen=True, slots=True)
class Coef:
    """One number the answer rests on, with its unit, origin and how it was obtained."""

    value: float
    unit: str
    origin: str  # declared | derived | preset | default
    detail: str


@dataclass(frozen=True, slots=True)
class Split:
    """How the model is laid out on the devices: overridable to evaluate memory remedies."""

    zero: int
    tensor_parallel: int
    pipeline_parallel: int
    recompute: str  # none | selective | full
    flash_attention: bool


@dataclass(frozen=True, slots=True)
class CostModel:
    """The cost model of one plan on `gpus` GPUs."""

    gpus: int
    split: Split
    data_parallel: int
    seq_len: int
    params: float
    flops_per_token: float
    peak_flops: float
    mfu: float
    memory_per_device: float
    network: float
    overlap: float
    step_overhead: float
    comm_time: float  # T_comm, seconds per optimizer step
    weights_bytes: float  # per device
    grads_bytes: float
    optimizer_bytes: float
    activation_bytes_per_sequence: float | None  # per device; None when the shape is unknown
    reserve_bytes: float
    coefficients: dict[str, Coef] = field(compare=False)

    @property
    def rate(self) -> float:
        """Achieved FLOP/s of all GPUs: G·P·u."""
        return self.gpus * self.peak_flops * self.mfu

    @property
    def bubble_time(self) -> float:
        """The 1F1B bubble with one-sequence micro-batches, (p − 1) micro-batch compute times per
        step (Narayanan et al. 2021, section 2.2): (p − 1)/m of the compute for m = B/(dp·s)
        micro-batches is a constant time per step, independent of B."""
        p = self.split.pipeline_parallel
        return (p - 1) * self.flops_per_token * self.data_parallel * self.seq_len / self.rate if p > 1 else 0.0

    @property
    def fixed_time(self) -> float:
        """c = T_comm + T_fixed (+ the pipeline bubble): the part of a step that does not grow with
        the batch — what the closed forms of the deadline and the minimum-time batch see."""
        return self.comm_time + self.step_overhead + self.bubble_time

    def bubble(self, grad_accum: int) -> float:
        """The pipeline's compute-time factor 1 + (p − 1)/m for m micro-batches per step under
        1F1B (Narayanan et al. 2021, section 2.2: bubble fraction (p − 1)/m); 1 without a pipeline."""
        p = self.split.pipeline_parallel
        return 1.0 if p <= 1 else 1.0 + (p - 1) / grad_accum

    def step_time(self, batch_tokens: float, grad_accum: int | None = None) -> float:
        """T(B) = f·B/(G·P·u) · (1 + (p − 1)/m) + T_comm + T_fixed, seconds, for m = grad_accum
        micro-batches per step; without m, one-sequence micro-batches (the closed forms' model)."""
        compute = self.flops_per_token * batch_tokens / self.rate
        if grad_accum is None:
            return compute + self.fixed_time
        return compute * self.bubble(grad_accum) + self.comm_time + self.step_overhead

    @property
    def static_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes

    def memory_at(self, micro_batch: int) -> float:
        """Bytes per device at `micro_batch` sequences per micro-step, reserve included."""
        act = self.activation_bytes_per_sequence or 0.0
        return self.static_bytes + micro_batch * act + self.reserve_bytes

    @property
    def micro_batch_max(self) -> int:
        """The largest micro-batch (sequences per device) that fits; 0 when not even one does."""
        free = self.memory_per_device - self.reserve_bytes - self.static_bytes
        if free <= 0:
            return 0
        act = self.activation_bytes_per_sequence
        if not act:
            return 0
        # The tiny relative tolerance keeps an exact fit (free = k·act) from losing k to rounding.
        return max(0, int(math.floor(free / act * (1 + 1e-12))))


def _declared(section: Any, key: str) -> bool:
    return key in section.model_fields_set


def activation_bytes_per_layer(seq_len: int, d_model: int, heads: int | None, recompute: str,
                               flash_attention: bool) -> float | None:
    """Korthikanti et al. (2022) eq. 2 and section 4: 16-bit activation bytes of one sequence in
    one transformer layer, before tensor parallelism. None when `heads` is needed and unknown."""
    s, d = float(seq_len), float(d_model)
    if recompute == "full":
        return 2.0 * s * d  # only the layer input is stored
    if recompute == "selective" or flash_attention:
        return 34.0 * s * d  # the 5·a·s² attention-score terms are not kept
    if heads is None:
        return None
    return s * d * (34.0 + 5.0 * heads * s / d)


def flops_per_token(plan: "Plan") -> Coef:
    m = plan.model
    if m.flops_per_token is not None:
        return Coef(m.flops_per_token, "FLOP/token", DECLARED, "model.flops_per_token")
    if m.layers is not None and m.d_model is not None:
        value = 6.0 * m.params + 12.0 * m.layers * m.d_model * m.seq_len
        return Coef(value, "FLOP/token", DERIVED, "6N + 12·L·d·s (PaLM, appendix B)")
    return Coef(6.0 * m.params, "FLOP/token", DERIVED, "6N (shape unknown; Kaplan et al. 2020)")


def _hardware_number(plan: "Plan", key: str, preset_attr: str, unit: str) -> Coef:
    hw = plan.hardware
    value = getattr(hw, key)
    if value is not None:
        return Coef(float(value), unit, DECLARED, f"hardware.{key}")
    preset = find_preset(hw.gpu or "")
    if preset is None:  # pragma: no cover - the plan validator requires one or the other
        raise ValueError(f"hardware.{key} is not set and there is no GPU preset")
    return Coef(float(getattr(preset, preset_attr)), unit, PRESET, f"{preset.name} ({preset.source})")


def plan_split(plan: "Plan") -> Split:
    hw = plan.hardware
    return Split(hw.zero, hw.tensor_parallel, hw.pipeline_parallel, str(hw.recompute), hw.flash_attention)


class ShapeUnknown(ValueError):
    """The memory model needs a shape the plan does not give."""


def build_cost_model(plan: "Plan", gpus: int, split: Split | None = None) -> CostModel:
    """The cost model of `plan` on `gpus` GPUs (a count the plan allows), with `split` overriding
    the plan's ZeRO stage / parallel degrees / recomputation to evaluate a remedy.

    Raises ShapeUnknown when activations cannot be estimated (no layers/d_model, no override)."""
    m, hw = plan.model, plan.hardware
    split = split or plan_split(plan)
    t, p = split.tensor_parallel, split.pipeline_parallel
    dp = gpus // (t * p)
    coefs: dict[str, Coef] = {}

    f = flops_per_token(plan)
    peak = _hardware_number(plan, "peak_flops", "peak_flops", "FLOP/s")
    memory = _hardware_number(plan, "memory_per_device", "memory", "B")
    if dp > 1 and gpus <= hw.gpus_per_node:  # every replica in one node: NVLink, not the NICs
        link = _hardware_number(plan, "intra_node_network", "intra_node", "B/s")
        network = Coef(link.value, link.unit, link.origin, f"within one node: {link.detail}")
    else:
        network = _hardware_number(plan, "network", "network", "B/s")
    mfu = Coef(hw.mfu, "1", DECLARED if _declared(hw, "mfu") else DEFAULT, "hardware.mfu")
    overlap = Coef(hw.overlap, "1", DECLARED if _declared(hw, "overlap") else DEFAULT, "hardware.overlap")
    overhead = Coef(hw.step_overhead, "s", DECLARED if _declared(hw, "step_overhead") else DEFAULT,
                    "hardware.step_overhead (T_fixed)")

    k = 3.0 if split.zero == 3 else 2.0
    grad_bytes = BYTES_GRAD_COMM * m.params / (t * p)
    comm = k * (dp - 1) / dp * grad_bytes / network.value * (1.0 - hw.overlap) if dp > 1 else 0.0

    per_dp = float(dp)
    shard = m.params / (t * p)
    weights = BYTES_WEIGHTS * shard / (per_dp if split.zero >= 3 else 1.0)
    grads = BYTES_GRADS * shard / (per_dp if split.zero >= 2 else 1.0)
    optimizer = BYTES_OPTIMIZER * shard / (per_dp if split.zero >= 1 else 1.0)

    if m.activation_bytes_per_token is not None:
        act = m.activation_bytes_per_token * m.seq_len / (t * p) * p  # p micro-batches in flight (1F1B)
        act_coef = Coef(act, "B/sequence", DECLARED, "model.activation_bytes_per_token × s / (t·p)"
                        + (f" × {p} in flight (1F1B)" if p > 1 else ""))
    else:
        per_layer = (activation_bytes_per_layer(m.seq_len, m.d_model, m.heads, split.recompute,
                                                split.flash_attention)
                     if m.d_model is not None else None)
        if per_layer is None or m.layers is None:
            need = "model.layers and model.d_model" + ("" if split.flash_attention or split.recompute != "none"
                                                        else " and model.heads")
            raise ShapeUnknown(f"the memory model needs {need}, or model.activation_bytes_per_token")
        # L/p layers per device, and under the 1F1B pipeline schedule the first stage holds the
        # activations of p micro-batches in flight (Narayanan et al. 2021, section 2.2;
        # Korthikanti et al. 2022, eq. 5): L/p × p = L layers' worth, divided by t.
        act = per_layer * (m.layers / p) * p / t
        formula = {"full": "2·s·d", "selective": "34·s·d"}.get(
            split.recompute, "34·s·d" if split.flash_attention else "s·d·(34 + 5·a·s/d)")
        why = {"full": "full recomputation", "selective": "selective recomputation"}.get(
            split.recompute, "flash attention" if split.flash_attention else "no recomputation")
        act_coef = Coef(act, "B/sequence", DERIVED,
                        f"{formula} per layer ({why}; Korthikanti et al. 2022) × L/p layers"
                        + (f" × {p} micro-batches in flight (1F1B)" if p > 1 else "") + " / t")
    if hw.memory_reserve is not None:
        reserve_coef = Coef(hw.memory_reserve, "B", DECLARED, "hardware.memory_reserve")
    else:
        reserve_coef = Coef(RESERVE_FRACTION * memory.value, "B", DEFAULT,
                            f"{RESERVE_FRACTION:.0%} of device memory")
    reserve = reserve_coef.value

    coefs["flops_per_token"] = f
    coefs["peak_flops"] = peak
    coefs["mfu"] = mfu
    coefs["achieved_flops"] = Coef(gpus * peak.value * mfu.value, "FLOP/s", DERIVED, "G·P·u")
    coefs["memory_per_device"] = memory
    coefs["network"] = network
    coefs["overlap"] = overlap
    coefs["comm_time"] = Coef(comm, "s", DERIVED,
                              f"{k:g}·(dp−1)/dp · 2 B/param · N/(t·p) / network · (1 − overlap)"
                              + (" (ZeRO-3)" if split.zero == 3 else ""))
    coefs["step_overhead"] = overhead
    coefs["weights_bytes"] = Coef(weights, "B", DERIVED, "2 B/param / (t·p)" + (" / dp (ZeRO-3)" if split.zero >= 3 else ""))
    coefs["grads_bytes"] = Coef(grads, "B", DERIVED, "2 B/param / (t·p)" + (" / dp (ZeRO-2+)" if split.zero >= 2 else ""))
    coefs["optimizer_bytes"] = Coef(optimizer, "B", DERIVED,
                                    "12 B/param / (t·p)" + (" / dp (ZeRO-1+)" if split.zero >= 1 else ""))
    coefs["activation_bytes_per_sequence"] = act_coef
    coefs["reserve_bytes"] = reserve_coef
    cm = CostModel(
        gpus=gpus, split=split, data_parallel=dp, seq_len=m.seq_len, params=m.params,
        flops_per_token=f.value, peak_flops=peak.value, mfu=mfu.value, memory_per_device=memory.value,
        network=network.value, overlap=hw.overlap, step_overhead=hw.step_overhead, comm_time=comm,
        weights_bytes=weights, grads_bytes=grads, optimizer_bytes=optimizer,
        activation_bytes_per_sequence=act, reserve_bytes=reserve, coefficients=coefs)
    coefs["micro_batch_max"] = Coef(float(cm.micro_batch_max), "sequences", DERIVED,
                                    "⌊(memory − reserve − weights − grads − optimizer) / activations⌋")
    if p > 1:
        coefs["pipeline_bubble"] = Coef(cm.bubble_time, "s", DERIVED,
                                        f"(p − 1) = {p - 1} one-sequence micro-batches of compute per step "
                                        "(1F1B; Narayanan et al. 2021)")
    return cm


def launchable_counts(plan: "Plan", counts: range | list[int]) -> list[int]:
    """The GPU counts of a range that split into t·p groups and fill whole nodes."""
    hw = plan.hardware
    split = hw.tensor_parallel * hw.pipeline_parallel
    return [g for g in counts
            if g % split == 0 and (g <= hw.gpus_per_node or g % hw.gpus_per_node == 0)]
