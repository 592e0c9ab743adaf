"""The cost model of docs/design.md section 2 on one plan and GPU count: FLOPs per token, step time in
its two honest modes, memory per device — each coefficient with where it came from (declared in the
plan, derived by a formula, taken from a GPU preset, or a default), so a reviewer sees which
numbers the answer rests on.

- FLOPs per token, training (forward + backward): f = 6N + 12·L·d·s (Chowdhery et al. 2022, PaLM,
  appendix B: 6N for the matmuls — N counts every parameter, embeddings and LM head included —
  plus 6·L·s·d·2 for attention scores and values); 6N when the shape is unknown (Kaplan et al.
  2020, section 2.1). The convention of MFU; hardware FLOPs (HFU) add recomputation.
- Step time, `budgetdsl.cost.throughput`:
  * declared `hardware.mfu` (a measured end-to-end MFU): it holds where it was measured — the
    plan's layout and micro-batch (`declared_anchor`) — and the modelled step, scaled by one factor
    to pass through it there, says how the step changes away from that point (batch, accumulation,
    layout, GPU count). Without a shape to model, T(B) = f·B/(G·P·u).
  * predicted (no mfu): T(B) = the sum of the modelled shares at the launched micro-batch; MFU and
    HFU follow from the layout.
  For the closed forms (deadline interval, minimum-time batch) T(B) is linear at a fixed
  micro-batch: T(B) = f·B/rate + c, rate and c taken at one-sequence micro-batches with a pipeline
  (the solver's choice there) and at the largest micro-batch that fits without one.
- Memory per device: `budgetdsl.cost.memory` (mixed-precision recipe, Korthikanti et al. 2022
  activations, uneven pipeline stages, logits), plus a reserve for what the process keeps beside
  them: the CUDA context and library workspaces, the NCCL buffers of the layout's communicators
  and the caching allocator's fragmentation (`budgetdsl.cost.reserve`), or `hardware.memory_reserve`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from budgetdsl.cost import memory as mem
from budgetdsl.cost.experts import Experts, expert_data_parallel, nodes_per_token
from budgetdsl.cost.flops import attention_width, gemm_flops_per_layer, training_flops_per_token
from budgetdsl.cost.memory import activation_bytes_per_layer  # noqa: F401 - re-exported
from budgetdsl.cost.reserve import Reserve, default_reserve
from budgetdsl.cost.stacks import STACKS
from budgetdsl.cost.throughput import (
    Breakdown,
    Device,
    Layout,
    Shape,
    StepCost,
    group_latency,
    linear_step_seconds,
    step_cost,
    step_seconds,
)
from budgetdsl.cost.throughput import step_time as _step_time
from budgetdsl.hardware.gpus import find_preset
from budgetdsl.hardware.layout import accounted_problem, accounted_slots, accounted_split, slot_names
from budgetdsl.hardware.layout import launchable_counts as _launchable_counts
from budgetdsl.plan.model import mlp_params
from budgetdsl.theory.xp import SCALAR

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan

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
    context_parallel: int | None = None  # None: the plan's (hardware.context_parallel)
    expert_parallel: int | None = None  # None: the plan's (hardware.expert_parallel)
    sequence_parallel: bool | None = None  # None: the plan's (hardware.sequence_parallel; auto as off)
    virtual_stages: int | None = None  # None: the plan's (hardware.virtual_pipeline_stages; auto as 1)
    recompute_layers: int | None = None  # with full: layers per stage (chunk) recomputed, block; None: every layer

    def parallel(self, plan: Plan) -> tuple[int, int]:
        """(cp, ep): this split's, else the plan's (`auto` counted as 1)."""
        hw = plan.hardware
        cp = self.context_parallel if self.context_parallel is not None else hw.context_parallel
        ep = self.expert_parallel if self.expert_parallel is not None else hw.expert_parallel
        return (1 if cp == "auto" else int(cp)), (1 if ep == "auto" else int(ep))

    def schedule(self, plan: Plan) -> tuple[bool, int]:
        """(sequence parallelism, interleaved stages v): this split's, else the plan's (`auto` as
        off and 1, the framework defaults, where no search has chosen them)."""
        hw = plan.hardware
        sp = self.sequence_parallel if self.sequence_parallel is not None else hw.sequence_parallel is True
        v = self.virtual_stages if self.virtual_stages is not None else hw.virtual_pipeline_stages
        return bool(sp), (1 if v == "auto" else int(v))

    def expert_group(self, plan: Plan) -> int:
        """etp·ep of the split on `plan` (1 where nothing constrains the GPU count)."""
        ep = self.parallel(plan)[1]
        etp = plan.hardware.expert_tensor_parallel
        return (etp or self.tensor_parallel) * ep if (etp is not None or ep > 1) else 1


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
    mode: str  # declared | predicted
    mfu: float | None  # the declared u; None when predicted
    rate: float  # FLOP/s of all GPUs on the batch-proportional part of T(B)
    fixed_time: float  # c: the part of a step that does not grow with the batch
    memory_per_device: float
    stages: tuple[mem.StageMemory, ...]
    reserve_bytes: float  # the fixed part: hardware.memory_reserve, or context + workspaces + NCCL buffers
    shape: Shape | None
    device: Device | None
    layout: Layout | None
    step_overhead: float
    _coefs: dict[str, Coef] = field(compare=False)  # the inputs; the derived ones added on first read
    anchor: Anchor | None = None  # declared mode with a shape: the modelled step × anchor.scale
    fragmentation: float = 0.0  # the reserve's share of the counted bytes (budgetdsl.cost.reserve); 0 declared
    reserve_data_parallel: float = 0.0  # the data-parallel communicator's buffers, in reserve_bytes where dp·cp > 1
    _heavy: mem.StageMemory | None = field(default=None, compare=False)  # cached on construction
    _micro_max: int = field(default=0, compare=False)
    _step: StepCost | None = field(default=None, compare=False)  # T(b, m) in closed form (predicted)
    _describe: Any = field(default=None, compare=False)  # adds the derived coefficients (lazily)
    _memory: dict = field(default_factory=dict, compare=False)  # memory_at by micro-batch (pure; kept)
    _shown: dict = field(default_factory=dict, compare=False)  # the answer's typed coefficients, built once
    _numbers: dict = field(default_factory=dict, compare=False)  # placement's evaluations by frontier (pure; kept)
    timed: bool = field(default=True, compare=False)  # False: memory only, no `_step` (`build_cost_model`)
    _upper: tuple = field(default=(), compare=False)  # the stages memory_at reads (`_upper_stages`), on first read

    @property
    def coefficients(self) -> dict[str, Coef]:
        """Every number the model rests on, with its origin. The derived ones and their wording are
        built on first read: a layout search builds hundreds of cost models and reports one."""
        if self._describe is not None:
            describe = self._describe
            object.__setattr__(self, "_describe", None)
            describe(self)
        return self._coefs

    def __post_init__(self) -> None:
        object.__setattr__(self, "_heavy", mem.heaviest(list(self.stages)))
        object.__setattr__(self, "_micro_max", mem.micro_batch_max(list(self.stages), self.free_bytes()))
        if self.timed and self._step is None and self.models_step:
            assert self.shape is not None and self.device is not None and self.layout is not None  # models_step
            step = step_cost(self.shape, self.device, self.layout, self.step_overhead)
            object.__setattr__(self, "_step", step if self.anchor is None else step.scaled(self.anchor.scale))

    @property
    def models_step(self) -> bool:
        """Whether the step is modelled in closed form (`_step`, `throughput.step_cost`): predicted,
        or a declared MFU anchored on a shape."""
        return self.shape is not None and self.device is not None and self.layout is not None and \
            (self.mode != DECLARED or self.anchor is not None)

    # -- time ----------------------------------------------------------------------------------
    def breakdown(self, batch_tokens: float, grad_accum: int | None = None) -> Breakdown | None:
        """Seconds per step by cause at `grad_accum` micro-batches per step (None: one-sequence
        micro-batches with a pipeline, the linearisation's micro-batch without); None when the
        shape is unknown."""
        if self.shape is None or self.device is None or self.layout is None:
            return None
        sequences = batch_tokens / self.seq_len
        micro = sequences / (self.data_parallel * grad_accum) if grad_accum else self._reference_micro
        bd = _step_time(self.shape, self.device, self.layout, micro, sequences, self.step_overhead)
        return bd if self.anchor is None else bd.scaled(bd.total * self.anchor.scale)

    @property
    def _reference_micro(self) -> float:
        if self.split.pipeline_parallel > 1:
            return 1.0
        return float(max(1, self.micro_batch_max))

    def step_time(self, batch_tokens: float, grad_accum: int | None = None) -> float:
        """T(B), seconds: the modelled step (anchored with a declared MFU) at `grad_accum`
        micro-batches per step; without it, the linear form f·B/rate + c; without a shape to model,
        a declared MFU's f·B/(G·P·u)."""
        return step_time(self, batch_tokens, grad_accum)

    def linear_at(self, micro_batch: float) -> tuple[float, float]:
        """(rate, c) of T(B) = f·B/rate + c at a fixed micro-batch."""
        if self._step is None:
            return self.rate, self.fixed_time
        per_token, fixed = self._step.linear(micro_batch, self.data_parallel, self.seq_len)
        return self.flops_per_token / per_token, fixed

    # -- memory --------------------------------------------------------------------------------
    @property
    def heaviest_stage(self) -> mem.StageMemory:
        assert self._heavy is not None
        return self._heavy

    @property
    def weights_bytes(self) -> float:
        return self.heaviest_stage.weights

    @property
    def grads_bytes(self) -> float:
        return self.heaviest_stage.grads

    @property
    def optimizer_bytes(self) -> float:
        return self.heaviest_stage.optimizer

    @property
    def activation_bytes_per_sequence(self) -> float:
        return self.heaviest_stage.per_sequence

    @property
    def static_bytes(self) -> float:
        return self.heaviest_stage.static

    def free_bytes(self, data_parallel: int | None = None) -> float:
        """The bytes the counted tensors may take on a device: (memory − fixed reserve) / (1 +
        fragmentation), at this cost model's replica count or at `data_parallel` replicas of the same
        layout (the data-parallel communicator's buffers are there only with more than one rank)."""
        fixed = self.reserve_bytes
        if data_parallel is not None and self.reserve_data_parallel:
            cp = self.layout.context_parallel if self.layout is not None else 1
            fixed += self.reserve_data_parallel * ((data_parallel * cp > 1) - (self.data_parallel * cp > 1))
        return (self.memory_per_device - fixed) / (1.0 + self.fragmentation)

    def reserve_at(self, micro_batch: int) -> float:
        """The reserve at `micro_batch`: the fixed part plus fragmentation × the counted bytes."""
        return self.memory_at(micro_batch) - max(st.at(micro_batch) for st in self.stages)

    def memory_at(self, micro_batch: int) -> float:
        """Bytes per device at `micro_batch` sequences per micro-step (the heaviest stage), reserve
        included: counted × (1 + fragmentation) + the fixed reserve."""
        value = self._memory.get(micro_batch)
        if value is None:
            if len(self.stages) == 1:
                counted = self.stages[0].at(micro_batch)
            else:
                counted = max([static + micro_batch * per for static, per in self._upper or self._upper_stages()])
            value = counted * (1.0 + self.fragmentation) + self.reserve_bytes
            if len(self._memory) < 4096:
                self._memory[micro_batch] = value
        return value

    @property
    def micro_batch_max(self) -> int:
        """The largest micro-batch (sequences per device) that fits every stage; 0 when not even
        one does."""
        return self._micro_max

    def _upper_stages(self) -> tuple[tuple[float, float], ...]:
        """(static, per-sequence bytes) of the stages no other stage matches or exceeds in both:
        StageMemory.at(b) = static + b·per_sequence of a stage so matched never exceeds the other's
        at any b ≥ 0 (rounded sums and products keep the order), so the heaviest at b is among these
        (a pipeline of p stages: mostly the first and the last). By per-sequence bytes, most first, a
        stage is kept where its static bytes exceed every one before it. Kept on first read, as the
        two numbers `at` adds (the same floats)."""
        upper, most = [], -math.inf
        for st in sorted(self.stages, key=lambda st: (st.per_sequence, st.static), reverse=True):
            if st.static > most:
                upper.append((st.static, st.per_sequence))
                most = st.static
        object.__setattr__(self, "_upper", tuple(upper))
        return self._upper


def step_time(cm, batch_tokens, grad_accum, xp=SCALAR):
    """`CostModel.step_time` of `cm`, or of a sweep's pairs (`cm`'s fields numpy arrays, `xp` numpy):
    the one dispatch between the line (a declared MFU without a shape, or no accumulation given)
    and the modelled step (`throughput.step_seconds`)."""
    if cm._step is None or grad_accum is None:
        return linear_step_seconds(cm.flops_per_token, batch_tokens, cm.rate, cm.fixed_time)
    micro_batch = batch_tokens / (cm.seq_len * cm.data_parallel * grad_accum)  # sequences per replica
    return step_seconds(cm._step, micro_batch, grad_accum, xp)


def _latency_coef(hw: Any, layout: Layout, cm: CostModel) -> Coef:
    """The data-parallel collective's latency α at this layout, and the stack's overlap assumptions."""
    stack = layout.stack
    ranks = cm.data_parallel * layout.context_parallel
    kind = "all_reduce" if layout.zero == 0 else "reduce_scatter"
    alpha = group_latency(kind, ranks, layout.tensor_parallel, cm.device) if cm.device is not None else 0.0
    what = {"default": "one gradient collective per step hidden behind the last backward; ZeRO-3 per block "
                       "prefetched; TP, pipeline sends and the ZeRO-1/2 weights' all-gather exposed",
            "megatron-core": "TP comm overlap (1/t exposed), param all-gather under the first forward, gradient "
                             "buckets of max(40M, 1M·dp) params under the backward, pipeline sends hidden with "
                             "interleaving",
            "fsdp2": "every data-parallel collective per block, parameter gathers prefetched under the forward; TP "
                     "and pipeline sends exposed; eager elementwise kernels (no torch.compile)",
            "fsdp2-compile": "every data-parallel collective per block, parameter gathers prefetched under the "
                             "forward; TP and pipeline sends exposed; elementwise ops fused by torch.compile",
            "deepspeed": "5e8-element buckets reduced under the backward; the ZeRO-1/2 all-gather, TP and pipeline "
                         "sends exposed"}[stack.name]
    return Coef(alpha, "s", DECLARED if _declared(hw, "stack") else DEFAULT,
                f"NCCL's latency of one data-parallel {kind.replace('_', '-')} over {ranks} ranks (src/graph/"
                f"tuning.cc: least of ring, tree, PAT; Simple protocol), paid once per collective; "
                f"stack {stack.name}: {what}")


def _declared(section: Any, key: str) -> bool:
    return key in section.model_fields_set


def flops_per_token(plan: Plan) -> Coef:
    """f, training FLOPs per token (forward + backward), in the MFU convention (module docstring):
    6 per matmul parameter and 12·L·d·s for attention. Tied embeddings (the default): 6N, N
    counting the one V×d matrix the LM head multiplies by (PaLM appendix B). Untied: the input
    embedding is a lookup, not a matmul, so 6(N − V·d): the convention of Megatron's model FLOPs,
    72·l·h²·(1 + s/(6h) + V/(12·l·h)) per token (Korthikanti et al. 2022, appendix A eq. 7; Narayanan
    et al. 2021 eq. 3 with recomputation), which counts the LM head and not the input embedding.
    GQA, the MLP width and a gated MLP enter through N (given, or counted from the shape:
    `budgetdsl.plan.model.transformer_params`); the attention scores and values do not depend on
    them (every query head attends: 12·L·d·s)."""
    m = plan.model
    if m.flops_per_token is not None:
        return Coef(m.flops_per_token, "FLOP/token", DECLARED, "model.flops_per_token")
    untied = 0.0 if m.tied_embeddings or m.vocab is None or m.d_model is None else float(m.vocab) * m.d_model
    counted = "" if "params" in m.model_fields_set else ", N counted from the shape"
    if m.experts:  # 6 per active parameter: the k routed experts a token is sent to (budgetdsl.cost.experts)
        counted += (f"; mixture of experts: N = the {m.active_param_count:.4g} active parameters of "
                    f"{m.param_count:.4g}, top-{m.experts_per_token} of {m.experts} routed experts"
                    + (f" + {m.shared_experts} shared" if m.shared_experts else ""))
    mla = m.latent_attention
    width = attention_width(m.d_model, m.heads, mla) if mla is not None and m.d_model is not None else None
    if mla is not None:  # the scores and values at the heads' widths (budgetdsl.cost.flops)
        counted += (f"; multi-latent attention: 12·L·d·s read as 6·L·s·(W_qk + W_v), W_qk + W_v = H·(d_n + d_r + "
                    f"d_v) = {width:.6g}")
    if m.layers is not None and m.d_model is not None:
        value = training_flops_per_token(m.active_param_count - untied, m.layers, m.d_model, m.seq_len, width)
        scores = "6·L·s·(W_qk + W_v)" if mla is not None else "12·L·d·s"
        if untied:
            return Coef(value, "FLOP/token", DERIVED, f"6(N − V·d) + {scores} (Korthikanti et al. 2022 appendix A "
                        "eq. 7: the LM head counted, the untied input embedding a lookup" + counted + ")")
        return Coef(value, "FLOP/token", DERIVED, f"6N + {scores} (PaLM, appendix B; N counts embeddings "
                    "and LM head" + counted + ")")
    return Coef(training_flops_per_token(m.param_count, None, None, m.seq_len), "FLOP/token", DERIVED,
                "6N (shape unknown; Kaplan et al. 2020)")


def _hardware_number(plan: Plan, key: str, preset_attr: str, unit: str) -> Coef:
    hw = plan.hardware
    value = getattr(hw, key, None)
    if value is not None:
        return Coef(float(value), unit, DECLARED, f"hardware.{key}")
    preset = find_preset(hw.gpu or "")
    if preset is None:
        raise ShapeUnknown(f"hardware.{key} is not set and there is no GPU preset")
    if preset_attr == "kernel_efficiency":
        return Coef(preset.kernel_efficiency, unit, PRESET, f"{preset.name} ({preset.efficiency_source})")
    return Coef(float(getattr(preset, preset_attr)), unit, PRESET, f"{preset.name} ({preset.source})")


def plan_split(plan: Plan) -> Split:
    """The plan's own layout; a ValueError when a key is `auto` (the solver chooses it: pass the
    solution's layout, `Split` of `solution.batch`, to `build_cost_model`)."""
    hw = plan.hardware
    if hw.searched():
        raise ValueError(f"the layout is searched ({', '.join(hw.searched())}: auto): the solution names it")
    return Split(int(hw.zero), *hw.model_parallel(), str(hw.recompute), hw.flash_attention,
                 recompute_layers=block_layers(hw))


def block_layers(hw) -> int | None:
    """The plan's pinned block recomputation (`hardware.recompute_layers` beside recompute: full), else None."""
    n = hw.recompute_layers
    return n if isinstance(n, int) and str(hw.recompute) == "full" else None


class ShapeUnknown(ValueError):
    """The memory or throughput model needs a shape the plan does not give."""


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a declared MFU holds, and the factor that makes the modelled step pass through it there."""

    scale: float  # k: every modelled time × k
    where: str  # the reference configuration, for the assumptions


_UNANCHORED = Anchor(1.0, "")  # the modelled step as it is: the reference's own cost model


def declared_anchor(plan: Plan) -> Anchor | None:
    """A declared `hardware.mfu` u is a measurement of one configuration (PaLM App. B's MFU of a
    real run): the plan's layout (silent keys at the framework defaults, `auto` as 1 or none) on
    its GPU count (a range: its first launchable count) at its micro-batch (`run.micro_batch`, else
    the one the predicted mode takes: the largest that fits, one sequence with a pipeline) and its
    global batch (`run.batch`; else many micro-batches per step, the per-step costs — exposed
    gradient reduction, optimizer, bubble — amortized). There T = f·B/(G·P·u); k is that over the
    modelled step, so the model keeps the batch, layout and GPU-count dependence (docs/cost-model.md,
    "Declared MFU"). None without a declared MFU or a shape to model."""
    hw, run = plan.hardware, plan.run
    if hw.mfu is None:
        return None
    split = Split(0 if hw.zero == "auto" else int(hw.zero),
                  1 if hw.tensor_parallel == "auto" else int(hw.tensor_parallel),
                  1 if hw.pipeline_parallel == "auto" else int(hw.pipeline_parallel),
                  "none" if hw.recompute == "auto" else str(hw.recompute), hw.flash_attention,
                  recompute_layers=block_layers(hw))
    cp, _ = split.parallel(plan)
    group = split.tensor_parallel * split.pipeline_parallel * cp
    if isinstance(hw.gpus, int):
        gpus = hw.gpus
    else:
        counts = _launchable_counts(hw.gpus.counts(), split.tensor_parallel, split.pipeline_parallel,
                                    hw.gpus_per_node, cp, split.expert_group(plan))
        gpus = counts[0] if counts else group
    try:
        ref = build_cost_model(plan, max(gpus, group), split, _UNANCHORED)
    except ShapeUnknown:  # the reference layout needs what the plan does not give: nothing to scale
        return None
    step = ref._step
    if step is None:
        return None
    dp, s = ref.data_parallel, ref.seq_len
    micro = float(run.micro_batch) if run is not None and isinstance(run.micro_batch, int) else ref._reference_micro
    per_token = ref.flops_per_token / (ref.gpus * ref.peak_flops * hw.mfu)  # the declared line, s per token
    layout = f"TP {split.tensor_parallel} · PP {split.pipeline_parallel}" + (f" · CP {cp}" if cp > 1 else "")
    where = f"{layout} on {ref.gpus:,} GPUs, micro-batch {micro:g}"
    if run is not None and run.batch is not None:
        n = max(1.0, run.batch / (s * dp))  # sequences per replica at the pinned batch
        micro = min(micro, n)
        m = n / micro  # micro-batches per step
        k = per_token * n * dp * s / step.total(micro, m)
        where += f", {m:g} per step (run.batch)"
    else:
        k = per_token / step.linear(micro, dp, s)[0]
        where += ", many per step (the per-step costs amortized)"
    return Anchor(k, where)


def _device(plan: Plan, coefs: dict[str, Coef]) -> Device | None:
    """The throughput model's device; None without a preset or the numbers (declared mode only)."""
    hw = plan.hardware
    try:
        eff = _hardware_number(plan, "kernel_efficiency", "kernel_efficiency", "1")
        hbm = _hardware_number(plan, "hbm_bandwidth", "hbm_bandwidth", "B/s")
        intra = _hardware_number(plan, "intra_node_network", "intra_node", "B/s")
        net = _hardware_number(plan, "network", "network", "B/s")
    except ShapeUnknown:
        return None
    preset = find_preset(hw.gpu or "")
    curve = preset.gemm if preset is not None else None
    if curve is not None:  # the efficiency holds for large GEMMs; each GEMM reaches its shape's share of it
        eff = Coef(eff.value, eff.unit, eff.origin, f"{eff.detail}; for large GEMMs, each GEMM at its shape's share "
                   f"of it (budgetdsl.cost.gemm_shape: {curve.source})")
    coefs.update(kernel_efficiency=eff, hbm_bandwidth=hbm, intra_node_network=intra, network=net)
    fp8 = _fp8_peak(plan)
    if fp8 is not None:
        coefs["fp8_peak_flops"] = fp8
    return Device(coefs["peak_flops"].value, hbm.value, eff.value, intra.value, net.value, int(hw.gpus_per_node),
                  fp8.value if fp8 is not None else 0.0, curve)


def _fp8_peak(plan: Plan) -> Coef | None:
    """The dense FP8 peak the layers' GEMMs run at with `hardware.precision: fp8` (the preset's;
    validation refuses fp8 on a part without one); None with BF16 GEMMs."""
    if getattr(plan.hardware, "precision", "bf16") != "fp8":
        return None
    preset = find_preset(plan.hardware.gpu or "")
    assert preset is not None and preset.fp8_peak_flops > 0  # Hardware._preset
    return Coef(preset.fp8_peak_flops, "FLOP/s", PRESET, f"{preset.name} ({preset.source}): dense FP8, the "
                "layers' GEMMs (6 FLOPs per layer parameter); attention scores, LM head and the memory-bound "
                "kernels stay BF16")


class Basis(NamedTuple):
    """What every cost model of one plan shares, whatever its GPU count and layout: the plan-level
    coefficients (each cost model adds its own to a copy), FLOPs per token, the device, the shape
    and the experts, the reserve and the step overhead (`cost_basis`). A pure function of the
    plan's model and hardware (the non-layout keys: `cost_model_key`), so a caller that builds
    many cost models of one plan (`budgetdsl.solve.cache.SolveCache`) computes it once. A named
    tuple: a frozen dataclass costs a cold start ~1 ms to build, this a tenth of it."""

    coefs: dict[str, Coef]
    f: Coef
    peak: Coef
    memory: Coef
    device: Device | None
    grad_dtype: str
    moe: Experts | None
    shape: Shape | None
    mode: str
    head_share: float
    reserve: Coef | None  # hardware.memory_reserve; None: the layout's default (budgetdsl.cost.reserve)
    overhead: float
    fp8: bool


def cost_basis(plan: Plan) -> Basis:
    """The `Basis` of `plan`'s cost models. Raises ShapeUnknown as `build_cost_model` does."""
    m, hw = plan.model, plan.hardware
    coefs: dict[str, Coef] = {}
    if "params" not in m.model_fields_set:
        coefs["params"] = Coef(m.param_count, "params", DERIVED, "counted from the shape (budgetdsl.plan.model."
                               "transformer_params: L·(2d² + 2·d·d_kv + k·d·F + 2d) + V·d (×2 untied) + d, "
                               "k = 2 GeLU, 3 SwiGLU; no biases"
                               + ("; multi-latent attention's low-rank projections in place of 2d² + 2·d·d_kv"
                                  if m.latent_attention is not None else "")
                               + ("; MoE layers: router d·E and E + S experts of k·d·F_e in place of the MLP"
                                  if m.experts else "") + ")")
    f = flops_per_token(plan)
    coefs["flops_per_token"] = f
    coefs["peak_flops"] = peak = _hardware_number(plan, "peak_flops", "peak_flops", "FLOP/s")
    memory = _hardware_number(plan, "memory_per_device", "memory", "B")
    device = _device(plan, coefs)
    moe = model_experts(plan)
    shape = None
    if m.layers is not None and m.d_model is not None and device is not None:
        shape = Shape(m.param_count, m.layers, m.d_model, m.seq_len, f.value, m.heads, m.vocab, m.kv_heads,
                      m.ffn_hidden, m.mlp, m.tied_embeddings, moe, m.latent_attention, m.dropout_masks)
    mode = DECLARED if hw.mfu is not None else "predicted"
    if mode != DECLARED and shape is None:
        raise ShapeUnknown("predicted utilization (no hardware.mfu) needs model.layers and model.d_model "
                           "and a GPU preset; or declare hardware.mfu, a measured end-to-end MFU")
    head_share = shape.head_layers if shape is not None else 0.0
    reserve = Coef(hw.memory_reserve, "B", DECLARED, "hardware.memory_reserve") \
        if hw.memory_reserve is not None else None
    return Basis(coefs, f, peak, memory, device, str(getattr(hw, "grad_dtype", "fp32")), moe, shape, mode, head_share,
                 reserve, float(hw.step_overhead or 0.0), getattr(hw, "precision", "bf16") == "fp8")


def build_cost_model(plan: Plan, gpus: int, split: Split | None = None,
                     anchor: Anchor | None | Literal["plan"] = "plan", basis: Basis | None = None,
                     timed: bool = True, step: StepCost | None = None, splits: dict | None = None) -> CostModel:
    """The cost model of `plan` on `gpus` GPUs (a count the plan allows), with `split` overriding
    the plan's ZeRO stage / parallel degrees / recomputation to evaluate a remedy. `anchor`: a
    declared MFU's (`declared_anchor(plan)`, computed here unless a caller that builds many cost
    models of one plan passes it); `basis`: `cost_basis(plan)`, likewise. `timed` False: the memory
    only — no step in closed form (`_step` None, `rate` and `fixed_time` 0 in predicted mode), for a
    layout search that reads only the stages and the reserve of a layout family. `step`: its step in
    closed form where the caller has it already (`throughput.step_cost` of this layout and count,
    anchored: a layout search's `Pair.step`, from the same `step_cost_columns`), not computed again.
    `splits`: where a caller that builds many keeps the stages' balanced splits (`mem.stage_memory`).

    Raises ShapeUnknown when activations cannot be estimated (no layers/d_model, no override), or
    utilization is to be predicted without a shape."""
    m, hw = plan.model, plan.hardware
    split = split or plan_split(plan)
    t, p = split.tensor_parallel, split.pipeline_parallel
    cp, ep = split.parallel(plan)
    dp = gpus // (t * p * cp)
    if basis is None:
        basis = cost_basis(plan)
    coefs = dict(basis.coefs)
    f, peak, memory, device, grad_dtype, moe, shape, mode, head_share, reserve, overhead = (
        basis.f, basis.peak, basis.memory, basis.device, basis.grad_dtype, basis.moe, basis.shape, basis.mode,
        basis.head_share, basis.reserve, basis.overhead)
    # Megatron-Core requires sequence parallelism for expert with tensor parallelism (validate_args)
    described: Coef | Reserve = reserve if reserve is not None else default_reserve(t, p, cp, ep, dp)
    if isinstance(described, Reserve):  # what the process keeps beside the counted tensors on this layout
        fixed_reserve, fragmentation, reserve_dp = described.fixed, described.fragmentation, described.data_parallel
    else:
        fixed_reserve, fragmentation, reserve_dp = described.value, 0.0, 0.0
    sp, v = split.schedule(plan)
    sequence_parallel = sp or bool(m.experts and ep > 1 and t > 1)
    layout = Layout(gpus, t, p, v, split.zero, split.recompute,
                    split.flash_attention, sequence_parallel,
                    mem.GRAD_BYTES[grad_dtype], hw.overlap, cp, ep,
                    int(hw.expert_tensor_parallel or 0), pinned_split(plan, p),
                    STACKS[str(getattr(hw, "stack", "default"))], split.recompute_layers)
    stages = mem.stage_memory(
        params=m.param_count, seq_len=m.seq_len, layers=m.layers, d_model=m.d_model, heads=m.heads, vocab=m.vocab,
        tensor_parallel=t, pipeline_parallel=p, data_parallel=dp, zero=split.zero,
        recompute=layout.stack.checkpoint(split.recompute),
        flash_attention=split.flash_attention, sequence_parallel=layout.sequence_parallel,
        virtual_stages=layout.virtual_stages, grad_dtype=grad_dtype,
        activation_bytes_per_token=m.activation_bytes_per_token, head_layers=head_share, kv_heads=m.kv_heads,
        ffn_hidden=m.ffn_hidden, mlp=m.mlp, tied_embeddings=m.tied_embeddings,
        fp8=basis.fp8, context_parallel=cp, experts=layout.place_experts(moe),
        split=layout.stage_split, mla=m.latent_attention, recompute_layers=layout.recompute_layers,
        dropout=m.dropout_masks, logit_bytes=layout.stack.logit_bytes, splits=splits)
    if stages is None:  # name what is missing: the scores' heads only where they are kept
        scores_kept = not split.flash_attention and (split.recompute == "none" or split.recompute_layers is not None)
        need = [f"model.{k}" for k, v in (("layers", m.layers), ("d_model", m.d_model)) if v is None]
        if scores_kept and m.heads is None:
            need.append("model.heads (layers keep their attention scores: no flash attention, and not every "
                        "layer recomputed)")
        raise ShapeUnknown(f"the memory model needs {' and '.join(need)}, or model.activation_bytes_per_token")

    if mode == DECLARED:
        assert hw.mfu is not None  # DECLARED is the mode of a plan that gives hardware.mfu
        rate, fixed = gpus * peak.value * hw.mfu, 0.0
    else:
        rate, fixed = 0.0, 0.0  # set below, once the micro-batch maximum is known
    if mode != DECLARED or shape is None:
        anchor = None
    elif anchor == "plan":
        anchor = declared_anchor(plan)
    cm = CostModel(gpus=gpus, split=split, data_parallel=dp, seq_len=m.seq_len, params=m.param_count,
                   flops_per_token=f.value, peak_flops=peak.value, mode=mode, mfu=hw.mfu, rate=rate,
                   fixed_time=fixed, memory_per_device=memory.value, stages=tuple(stages),
                   reserve_bytes=fixed_reserve, shape=shape, device=device, layout=layout,
                   step_overhead=overhead, _coefs=coefs, anchor=anchor, fragmentation=fragmentation,
                   reserve_data_parallel=reserve_dp, timed=timed, _step=step if timed else None)
    if cm._step is not None:  # T(B) = B·a + c at the reference micro-batch (throughput.StepCost.linear)
        per_token, fixed_time = cm._step.linear(cm._reference_micro, dp, m.seq_len)
        object.__setattr__(cm, "rate", f.value / per_token)
        object.__setattr__(cm, "fixed_time", fixed_time)
    object.__setattr__(cm, "_describe", functools.partial(
        _describe, plan, gpus, split, mode, peak, memory, overhead, layout, grad_dtype, described))
    return cm


def head_layers(plan: Plan) -> float:
    """The LM head's work in layers' worth, 6·d·V over one layer's FLOPs per token: what the
    balanced split weighs on the last stage (`layout.balanced_split`); 0 without the shape."""
    m = plan.model
    if m.layers is None or m.d_model is None:
        return 0.0
    shape = Shape(m.param_count, m.layers, m.d_model, m.seq_len, flops_per_token(plan).value, vocab=m.vocab)
    return shape.head_layers


def pinned_split(plan: Plan, pipeline_parallel: int) -> tuple[int, ...] | None:
    """The layers per stage the plan fixes where the layout has its pipeline depth: the one it pins
    (`hardware.stage_layers`), or Megatron-Core's with the embedding and/or the loss counted as layers
    (`hardware.embedding_in_pipeline_split`, `loss_in_pipeline_split`: `layout.accounted_split`)
    where the slots divide into the stages; None (the cost model balances the stages) otherwise — a
    remedy or a search that tries another depth cannot keep a split written for this one."""
    hw, layers = plan.hardware, plan.model.layers
    if layers is not None and pinned_split_accounted(hw, layers, pipeline_parallel):
        return accounted_split(layers, pipeline_parallel, *hw.split_slots())
    split = getattr(hw, "stage_layers", None)
    if split is None or len(split) != pipeline_parallel:
        return None
    return tuple(int(n) for n in split)


def _uneven_text(hw: Any, layers: int | None, p: int, uneven: bool, v: int) -> str:
    """Why the pipeline's stages differ: Megatron-Core's accounted split, or the LM head balanced."""
    names = slot_names(hw.split_slots(), p)
    if names and layers is not None and pinned_split_accounted(hw, layers, p):
        per = accounted_slots(layers, *hw.split_slots()) // (p * max(1, v))
        return (f" (the {' and the '.join(names)} counted as layers, Megatron-Core's accounted split: "
                f"{per} slot{'s' if per != 1 else ''} per chunk)")
    return " (uneven; the last carries the LM head)" if uneven else ""


def pinned_split_accounted(hw: Any, layers: int, p: int) -> bool:
    """Whether `pinned_split` gives the accounted split on a p-stage pipeline."""
    slots = hw.split_slots() if hasattr(hw, "split_slots") else (False, False)
    return any(slots) and p > 1 and accounted_problem(layers, p, 1, *slots) is None


def model_experts(plan: Plan) -> Experts | None:
    """The plan's mixture-of-experts layers for the cost model (budgetdsl.cost.experts), its layout
    degrees 1; None for a dense model."""
    m, hw = plan.model, plan.hardware
    if not m.experts or m.d_model is None:
        return None
    dispatcher = str(getattr(hw, "expert_dispatch", "alltoall"))
    return Experts(int(m.experts), int(m.experts_per_token or m.experts), mlp_params(m.d_model, m.expert_width, m.mlp),
                   int(m.shared_experts), int(m.dense_layers), m.capacity_factor,
                   groups=m.expert_groups, groups_per_token=m.expert_groups_per_token, dispatcher=dispatcher,
                   overlap=bool(getattr(hw, "expert_overlap", False)),
                   fp8_dispatch=dispatcher == "deepep" and getattr(hw, "precision", "bf16") == "fp8")


def _describe(plan: Plan, gpus: int, split: Split, mode: str, peak: Coef, memory: Coef, overhead: float,
              layout: Layout, grad_dtype: str, reserve: Coef | Reserve, cm: CostModel) -> None:
    """The derived coefficients of `cm` and how each was obtained (for the report)."""
    m, hw, coefs, stages = plan.model, plan.hardware, cm._coefs, cm.stages
    t, p = split.tensor_parallel, split.pipeline_parallel
    if mode == DECLARED:
        assert hw.mfu is not None
        coefs["mfu"] = Coef(hw.mfu, "1", DECLARED, "hardware.mfu: measured end-to-end (PaLM App. B); " + (
            f"holds at {cm.anchor.where}; elsewhere the modelled step × {cm.anchor.scale:.3g}"
            if cm.anchor is not None else "T(B) = f·B/(G·P·u), nothing added (no shape to model)"))
    else:
        coefs["mfu"] = Coef(cm.rate / (gpus * peak.value), "1", DERIVED,
                            "predicted from the layout (budgetdsl.cost.throughput), batch-proportional part")
    line = mode == DECLARED and cm.anchor is None
    coefs["achieved_flops"] = Coef(cm.rate, "FLOP/s", DERIVED, "G·P·u" if line else
                                   "f / (seconds per token of T(B))" + (", anchored" if cm.anchor else ", predicted"))
    coefs["fixed_time"] = Coef(cm.fixed_time, "s", DERIVED,
                               "nothing: inside the declared MFU" if line else
                               "bubble + exposed data-parallel reduction + optimizer step + step_overhead "
                               f"at micro-batch {cm._reference_micro:g}")
    if getattr(hw, "precision", "bf16") == "fp8" and cm.shape is not None:
        sh = cm.shape
        gemm = sh.layers * gemm_flops_per_layer(sh.layer_flops, sh.d_model, sh.seq_len, sh.attention_width)
        coefs["fp8_flop_share"] = Coef(gemm / sh.flops_per_token, "1", DERIVED, "share of f on FP8 tensor cores: "
                                       "L·(layer FLOPs − " + ("6·s·(W_qk + W_v)" if sh.mla is not None else "12·d·s")
                                       + ") / f; attention scores and values, LM head BF16")
    coefs["memory_per_device"] = memory
    if cm._step is not None:
        coefs["collective_latency"] = _latency_coef(hw, layout, cm)
    if hw.overlap is not None:
        coefs["overlap"] = Coef(hw.overlap, "1", DECLARED, "hardware.overlap")
    if _declared(hw, "step_overhead"):
        coefs["step_overhead"] = Coef(overhead, "s", DECLARED, "hardware.step_overhead" +
                                      (" (inside the declared MFU)" if mode == DECLARED else ""))
    heavy = cm.heaviest_stage
    shard = {3: "/ dp (ZeRO-3)", 2: "/ dp (ZeRO-2+)", 1: "/ dp (ZeRO-1+)"}
    where = f" (stage {heavy.stage + 1} of {p}, {heavy.layers} layers)" if p > 1 else ""
    fp8 = (" + 2 B per layer param (FP8 weight and its transpose, cached for the step; "
           "Transformer Engine)") if getattr(hw, "precision", "bf16") == "fp8" else ""
    ex = layout.place_experts(model_experts(plan))
    routed = ""
    if ex is not None:
        edp = expert_data_parallel(t, layout.context_parallel, cm.data_parallel, ex)
        routed = (f"; routed experts / (etp·ep = {ex.expert_tensor_parallel}·{ex.expert_parallel})"
                  + (f", their ZeRO shards over edp = {edp}" if split.zero else ""))
    if layout.context_parallel > 1 and split.zero:
        shard = {k: v.replace("/ dp", "/ (dp·cp)") for k, v in shard.items()}
    coefs["weights_bytes"] = Coef(heavy.weights, "B", DERIVED, "2 B/param (bf16)" + fp8 + " / t" + where
                                  + (" " + shard[3] if split.zero >= 3 else "") + routed)
    coefs["grads_bytes"] = Coef(heavy.grads, "B", DERIVED,
                                f"{mem.GRAD_BYTES[grad_dtype]:g} B/param ({grad_dtype} grads) / t"
                                + (" " + shard[2] if split.zero >= 2 else "") + routed)
    coefs["optimizer_bytes"] = Coef(heavy.optimizer, "B", DERIVED, "12 B/param (fp32 master, Adam m, v) / t"
                                    + (" " + shard[1] if split.zero >= 1 else "") + routed)
    if ex is not None:
        _describe_experts(plan, cm, ex, coefs)
    if layout.context_parallel > 1:
        coefs["context_parallel"] = Coef(
            float(layout.context_parallel), "ranks", DECLARED,
            "hardware.context_parallel: each sequence split into 2·cp chunks over cp GPUs (load-balanced causal ring "
            "attention, Megatron-Core; Liu et al. 2023): activations, logits, GEMMs and TP traffic ÷ cp; per layer "
            "the ring passes K and V 3·(cp − 1) times, 2·(s/cp)·d_kv bf16 values ÷ t each, exposed only where it "
            "outlasts the attention compute (budgetdsl.cost.context_parallel); gradients reduced over dp·cp")
    if m.activation_bytes_per_token is not None:
        act_detail = "model.activation_bytes_per_token × s / (t·p)" + (f" × {p} in flight (1F1B)" if p > 1 else "")
        coefs["activation_bytes_per_sequence"] = Coef(heavy.activations_per_sequence, "B/sequence", DECLARED,
                                                      act_detail)
    else:
        mla = m.latent_attention
        parted = mem.layer_activation_split(m.d_model or 1, m.heads, m.kv_heads, m.ffn_hidden, m.mlp, mla)
        dropout = m.dropout_masks
        whole = f"{mem.layer_activation_whole(1, None, dropout):g}"
        kept = f"{mem.layer_activation_whole(m.d_model or 1, mla, dropout) + parted:.4g}"
        scores = f"{mem.attention_score_bytes(dropout):g}·a·s/d"
        formula = {"full": "2·s·d", "selective": f"{kept}·s·d"}.get(
            split.recompute, f"{kept}·s·d" if split.flash_attention else f"s·d·({kept} + {scores})")
        if mla is not None:
            formula += (f" (the shape's: {whole} + 4·(d_c' + d_c)/d + (4·W_qk + 4·W_v + "
                        f"{'6' if m.mlp == 'swiglu' else '4'}·F)/d, multi-latent attention's latents and decompressed "
                        "heads, F = ffn_hidden)")
        elif kept != "34":
            formula += (f" (the shape's: {whole} + (4·d + 4·d_kv + {'6' if m.mlp == 'swiglu' else '4'}·F)/d, d_kv = "
                        f"kv_heads·d/heads, F = ffn_hidden)")
        why = {"full": "full recomputation", "selective": "selective recomputation"}.get(
            split.recompute, "flash attention" if split.flash_attention else "no recomputation")
        if layout.stack.checkpoint(split.recompute) == "ops":
            saved = mem.op_checkpoint_saved(m.d_model or 1, m.heads, m.kv_heads, m.ffn_hidden, m.mlp, mla)
            formula = f"{saved:.4g}·s·d"
            why = ("selective recomputation as torchtitan's op-level policy (stack fsdp2): the layer input, every "
                   "second matmul's output, the attention output and its log-sum-exp, plus the rest of one layer "
                   "while it is recomputed")
        if split.recompute == "full" and split.recompute_layers is not None:
            kept_formula = f"{kept}·s·d" if split.flash_attention else f"s·d·({kept} + {scores})"
            formula = f"2·s·d on the recomputed layers, {kept_formula} on the others,"
            why = "block recomputation"
        if not dropout and (split.recompute != "full" or split.recompute_layers is not None):
            scores_kept = not split.flash_attention and split.recompute != "selective"
            why += ", model.dropout 0: no dropout masks, 2·s·d" + (
                "; of the scores the softmax output alone" if scores_kept else "")
        sp = ", sequence parallel" if layout.sequence_parallel else (f", no sequence parallelism: {whole}·s·d not ÷ t"
                                                                     if t > 1 and split.recompute != "full" else "")
        moe = ("; each MoE layer + s·(M_e·(k·c + S) + 2·d·k·c − M)/t, its routed and shared experts' MLP "
               "activations and dispatched inputs instead of one MLP's (budgetdsl.cost.experts)"
               if m.experts and split.recompute != "full" else "")
        coefs["activation_bytes_per_sequence"] = Coef(
            heavy.activations_per_sequence, "B/sequence", DERIVED,
            f"{formula} per layer ({why}{sp}; Korthikanti et al. 2022 Table 2) × layers of the stage"
            + (f" × {p - heavy.stage} micro-batches in flight (1F1B)" if p > 1 else "") + " / t" + moe
            + (f" / cp ({layout.context_parallel})" if layout.context_parallel > 1 else ""))
    if split.recompute == "full" and split.recompute_layers is not None:
        v = layout.virtual_stages
        coefs["recompute_layers"] = Coef(
            float(split.recompute_layers), "layers", DECLARED if plan.hardware.recompute_layers != "auto" else DERIVED,
            f"block recomputation (Megatron-LM --recompute-method block): the first {split.recompute_layers} layers "
            + (f"of each of the {v} chunks " if v > 1 else "") + f"of every pipeline stage recomputed in full "
            f"(input kept, 2·s·d; one layer's full set while recomputed), the other layers keep every activation; "
            f"the heaviest stage recomputes {layout.recomputed(heavy.layers or 0)} of its {heavy.layers} layers, that "
            "share of full recomputation's extra forward (budgetdsl.cost.memory.recomputed_layers)")
    if heavy.logits_per_sequence:
        coefs["logits_bytes_per_sequence"] = Coef(heavy.logits_per_sequence, "B/sequence", DERIVED,
                                                  "s·V fp32 logits for the loss / t (last stage)"
                                                  if layout.stack.logit_bytes == mem.LOGIT_BYTES else
                                                  f"s·V logits at the loss × {layout.stack.logit_bytes:g} bytes / t "
                                                  f"(last stage; stack {layout.stack.name}: bf16 logits, their fp32 "
                                                  "copy and log-softmax's fp32 output)")
    # hardware.memory_reserve, else the layout's default, worded here (`Reserve.detail`)
    coefs["reserve_bytes"] = reserve if isinstance(reserve, Coef) else Coef(reserve.fixed, "B", DEFAULT, reserve.detail)
    if cm.fragmentation:
        coefs["fragmentation"] = Coef(cm.fragmentation, "1", DEFAULT, "the caching allocator's, a share of the "
                                      "counted bytes: the low end of GMLake's measurements (Guo et al. 2024; "
                                      "budgetdsl.cost.reserve)")
    coefs["micro_batch_max"] = Coef(float(cm.micro_batch_max), "sequences", DERIVED,
                                    "⌊((memory − reserve) / (1 + fragmentation) − weights − grads − optimizer) / "
                                    "per sequence⌋, every stage" if cm.fragmentation else
                                    "⌊(memory − reserve − weights − grads − optimizer) / per sequence⌋, "
                                    "every stage")
    if p > 1:
        counts = [st.layers for st in stages]
        coefs["pipeline_stages"] = Coef(float(p), "stages", DERIVED, "layers per stage "
                                        + ", ".join(str(c) for c in counts)
                                        + _uneven_text(hw, m.layers, p, len(set(counts)) > 1, split.schedule(plan)[1]))


def _describe_experts(plan: Plan, cm: CostModel, ex: Experts, coefs: dict[str, Coef]) -> None:
    """The mixture-of-experts coefficients: active parameters, and the routing and dispatch
    assumptions the step time rests on (budgetdsl.cost.experts)."""
    m, hw = plan.model, plan.hardware
    coefs["active_params"] = Coef(m.active_param_count, "params", DERIVED,
                                  f"N less the routed experts a token skips: {m.moe_layers} MoE layers × "
                                  f"({ex.experts} − {ex.top_k}) experts × {ex.expert_params:.4g} weights; "
                                  "FLOPs per token follow it, memory holds all N")
    gpn = int(hw.gpus_per_node)
    in_node = max(1, min(ex.expert_parallel, gpn // ex.expert_tensor_parallel)) \
        if ex.expert_tensor_parallel < gpn else 1
    capacity = ("dropless: the experts process exactly the routed tokens" if ex.capacity_factor is None else
                f"capacity factor {ex.capacity_factor:g}: buffers and expert GEMMs padded to "
                f"{ex.capacity_factor:g} × the mean load, tokens beyond it dropped")
    where = ("" if ex.expert_parallel <= 1 else
             f"; {in_node} of the {ex.expert_parallel} ep ranks share a node (NVLink), the rest over the NIC")
    if ex.groups is not None:
        where += (f"; group-limited routing: a token's experts in {ex.groups_per_token} of {ex.groups} groups "
                  "(DeepSeek-V3 §2.1.2)")
    if ex.dispatcher == "deepep" and ex.expert_parallel > 1:
        nodes = max(1, ex.expert_parallel // in_node)
        where += (f"; DeepEP: each token crosses the NIC once per destination node, {nodes_per_token(ex, nodes):.3g} "
                  f"of {nodes} nodes on average, then NVLink (DeepSeek-V3 §3.2.2)"
                  + (", dispatched in FP8 (§3.3.2)" if ex.fp8_dispatch else ""))
    if ex.overlap:
        where += ("; overlapped with another micro-batch's compute (DualPipe, DeepSeek-V3 §3.2.1; Megatron-Core "
                  "--overlap-moe-expert-parallel-comm): only what outlasts it is exposed")
    coefs["experts"] = Coef(float(ex.experts), "experts", DECLARED,
                            f"model.experts, top-{ex.top_k}" + (f" + {ex.shared} shared" if ex.shared else "")
                            + f", ep {ex.expert_parallel}, etp {ex.expert_tensor_parallel}. Router assumed balanced "
                            "(auxiliary loss or bias balancing): every expert at its mean load k·tokens/E, "
                            f"imbalance not modelled; {capacity}. Dispatch and combine: 4 all-to-alls per MoE "
                            "layer (6 with full recomputation) of k·c·s/(t·cp)·d bf16 values per sequence" + where
                            + (" (budgetdsl.cost.experts)" if ex.dispatcher == "deepep" else
                               " (Megatron-Core's all-to-all dispatcher; budgetdsl.cost.experts)"))


_LAYOUT_KEYS = {"gpus", "tensor_parallel", "pipeline_parallel", "zero", "recompute", "recompute_layers"}


def cost_model_key(plan: Plan) -> tuple:
    """What a cost model reads of a plan besides the GPU count and the layout (its `Split`): the
    key under which a caller's cache (`budgetdsl.solve.cache.SolveCache`) keeps cost models."""
    key = (plan.model.model_dump_json(), plan.hardware.model_dump_json(exclude=_LAYOUT_KEYS))
    if plan.hardware.mfu is None:
        return key
    run = plan.run  # a declared MFU's reference configuration (`declared_anchor`)
    return (*key, plan.hardware.model_dump_json(include=_LAYOUT_KEYS),
            None if run is None else (run.batch, run.micro_batch))


def launchable_counts(plan: Plan, counts: range | list[int]) -> list[int]:
    """The GPU counts of a range that launch the plan's layout (`budgetdsl.hardware.layout`)."""
    hw = plan.hardware
    split = Split(0, *hw.model_parallel(), "none", True)
    return _launchable_counts(counts, *hw.model_parallel(), hw.gpus_per_node, split.parallel(plan)[0],
                              split.expert_group(plan))
