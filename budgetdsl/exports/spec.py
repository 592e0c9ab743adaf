"""What every export format reads: `LaunchSpec`, a small frozen record of one launchable run.

`launch_spec(plan, solution)` is the only place that reads a Plan and a Solution; the formats are
pure functions `LaunchSpec -> str`, tested on hand-built specs, that cannot drift with the
solver's internals. The adapter owns the two decisions no format should make alone: the launch
defaults (each recorded in `defaulted`, so the file says what the plan did not) and the learning
rate moved from `optimizer.at_batch` to the chosen batch (budgetdsl.theory.lr_scaling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from budgetdsl.hardware.layout import (
    accounted_problem,
    accounted_split,
    launch_problem,
    nodes_of,
    slot_names,
    stage_layers,
)
from budgetdsl.plan.launch import Launch
from budgetdsl.theory.lr_scaling import RULE as LR_RULE
from budgetdsl.theory.lr_scaling import scale_lr

DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"  # NGC PyTorch: torch, NCCL, torchrun
DEFAULT_COMMAND = ("train.py",)
DEFAULT_RUNTIME = "torch-distributed"  # Kubeflow Trainer v2's ClusterTrainingRuntime for torchrun

# The plan's GPU presets in the accelerator vocabulary of SkyPilot (`sky show-gpus`), and the
# Kubernetes extended resource of each vendor's device plugin.
SKY_ACCELERATORS = {
    "A100-SXM4-40GB": "A100",
    "A100-SXM4-80GB": "A100-80GB",
    "A100-PCIE-80GB": "A100-80GB",
    "H100-SXM5-80GB": "H100",
    "H100-PCIE-80GB": "H100",
    "H200-SXM-141GB": "H200",
    "B200-SXM-180GB": "B200",
    "MI300X": "MI300X",
    "L40S": "L40S",
    "V100-SXM2-32GB": "V100-32GB",
}
AMD_PRESETS = frozenset({"MI300X"})
NO_BF16_PRESETS = frozenset({"V100-SXM2-32GB"})  # fp16 tensor cores only

# Megatron-LM's tensor-parallel layers rely on one CUDA work queue so that a communication kernel
# is scheduled before the compute that overlaps it; `validate_args` (megatron/training/arguments.py,
# core_r0.16.0) asserts CUDA_DEVICE_MAX_CONNECTIONS == "1" whenever tensor parallelism > 1 on
# GPUs before Blackwell. Every launch format sets it for a run with tensor parallelism.
TP_ENV = ("CUDA_DEVICE_MAX_CONNECTIONS", "1")

# How far past B_crit a rescaling must reach before the export warns. B_crit is an estimate: the
# B_simple it usually comes from follows the measured critical batch only to within a factor
# (McCandlish et al. 2018 compare the two across tasks), so an excess of a few percent is not
# known to be an excess at all; and the launchable batch is a power-of-two-ish product that lands
# a few percent off any target (2**22 = 4,194,304 tokens for a 4,000,000-token B_crit is 4.9 % over).
# A 25 % excess is beyond both; a plan that states a larger relative uncertainty
# (frontier.b_crit_uncertainty) uses that instead.
LR_BCRIT_MARGIN = 0.25


def lr_rescaling_past_b_crit(at_batch: float, batch: float, b_crit: float,
                             uncertainty: float | None = None) -> float:
    """How far (relative) the lr rescaling from `at_batch` to `batch` tokens reaches past B_crit,
    or 0 when it stays within the margin. The scaling rules assume the gradient noise dominates
    (B below B_crit); past it a bigger batch buys ever less progress per step (McCandlish et al.
    2018) and the rules overshoot. The rule is applied over the interval between B₀ and B;
    only the part of that interval above B_crit is outside the rule's regime, so this is
    max(B, B₀) / max(min(B, B₀), B_crit) − 1: 0 reach for B = B₀ (nothing is rescaled), B/B_crit − 1
    when a batch tuned below B_crit is scaled above it."""
    margin = max(LR_BCRIT_MARGIN, uncertainty or 0.0)
    reach = max(batch, at_batch) / max(min(batch, at_batch), b_crit) - 1.0
    return reach if reach > margin else 0.0


def is_tpu(preset: str | None) -> bool:
    """A Google TPU preset (TPU-v4, TPU-v5p): chips that no export format can launch."""
    return preset is not None and preset.upper().startswith("TPU")


class ExportError(Exception):
    """The plan cannot be exported to a format (not a bug, not infeasibility): say what to change."""


@dataclass(frozen=True, slots=True)
class Defaulted:
    """A value the plan did not give and the export chose; `key` is the plan key to set."""

    key: str
    value: str
    why: str

    def __str__(self) -> str:
        return f"{self.key}: {self.value} ({self.why})"


@dataclass(frozen=True, slots=True)
class BatchStage:
    """One stage of a batch-size ramp: from `start_tokens` consumed on, `grad_accum` micro-steps of
    the spec's micro-batch on every replica (`sequences` in all) for `steps` optimizer steps."""

    start_tokens: int
    sequences: int
    grad_accum: int
    steps: int


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One launchable run. Counts are per the whole job unless the name says otherwise.

    `name` is the plan's name as written: untrusted text that each format must encode (shell
    quoting, YAML/JSON strings, DNS-1035 labels), never paste.
    """

    name: str
    nodes: int
    gpus_per_node: int  # GPUs used on each node (fewer than the node has when the run fits one node)
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    micro_batch: int  # sequences per GPU per micro-step
    grad_accum: int  # micro-steps per optimizer step
    seq_len: int  # tokens per sequence
    steps: int  # optimizer steps
    lr: float | None  # peak learning rate, already scaled to the global batch; None: not planned
    warmup_steps: int
    time_limit_s: int | None  # the plan's deadline; None: no limit
    zero_stage: int
    launch: Launch  # with image, command and rdzv_port resolved (see `defaulted`)
    accelerator: str | None = None  # SkyPilot's name of the GPU; None when unknown
    gpu_resource: str = "nvidia.com/gpu"  # the Kubernetes extended resource of one GPU
    precision: str = "bf16"  # bf16 | fp16
    lr_derivation: str | None = None  # how lr was obtained, for the exported file's header
    defaulted: tuple[Defaulted, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # A batch-size ramp (`run.batch_schedule`): the stages in order; the spec's grad_accum and
    # global batch are the last stage's, `steps` the total. Empty: one batch throughout.
    batch_stages: tuple[BatchStage, ...] = ()
    # The model's shape as far as the plan knows it (Megatron's --num-layers, --hidden-size,
    # --num-attention-heads, --vocab-size); None where the plan does not say.
    layers: int | None = None
    hidden_size: int | None = None
    heads: int | None = None
    vocab: int | None = None
    # The layer's shape where the plan describes it (model.kv_heads, ffn_hidden, mlp,
    # tied_embeddings; Megatron's --num-query-groups, --ffn-hidden-size, --swiglu,
    # --untie-embeddings-and-output-weights), and FP8 GEMMs (hardware.precision: fp8).
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    swiglu: bool = False
    untied_embeddings: bool = False
    detailed_shape: bool = False  # the plan writes one of those shape keys
    fp8: bool = False
    recompute: str = "none"  # none | selective | full, as the plan's memory model assumed
    recompute_layers: int | None = None  # with full: block recomputation, N layers per stage (chunk); None: all
    tpu: str | None = None  # the TPU preset when the plan runs on TPU chips (every format refuses it)
    # Context and expert parallelism (hardware.context_parallel, expert_parallel,
    # expert_tensor_parallel) and the mixture-of-experts layers (model.experts, ...): GPUs =
    # tensor × pipeline × context × data parallel; formats that cannot carry them refuse
    # (`parallel_refusal`).
    context_parallel: int = 1
    expert_parallel: int = 1
    expert_tensor_parallel: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    expert_ffn_hidden: int | None = None
    shared_experts: int = 0
    dense_layers: int = 0
    capacity_factor: float | None = None
    expert_groups: int | None = None  # group-limited routing (model.expert_groups, expert_groups_per_token)
    expert_groups_per_token: int | None = None
    expert_dispatch: str = "alltoall"  # alltoall | deepep (hardware.expert_dispatch)
    expert_overlap: bool = False  # hardware.expert_overlap
    # Multi-latent attention's dimensions (model.attention: mla; Megatron's --multi-latent-attention,
    # --q-lora-rank, --kv-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim); None: multi-head
    mla: tuple[int | None, int, int, int, int] | None = None  # (q_lora_rank, kv_lora_rank, nope, rope, v)
    # Layers per pipeline stage, first to last, where they are not L/p each: the plan's pinned
    # split (hardware.stage_layers) or the one the cost model balanced; None for an even split.
    stage_layers: tuple[int, ...] | None = None
    # Megatron's sequence parallelism and interleaved stages per GPU (hardware.sequence_parallel,
    # virtual_pipeline_stages: the plan's, or the search's where it writes auto).
    sequence_parallel: bool = False
    virtual_stages: int = 1
    # What the split counts as a layer beside the transformer layers: "embedding" and/or "loss"
    # (hardware.embedding_in_pipeline_split, loss_in_pipeline_split: Megatron-Core's accounted split,
    # whose stages `stage_layers` then holds, first and last one layer short).
    split_slots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key in ("nodes", "gpus_per_node", "tensor_parallel", "pipeline_parallel", "data_parallel",
                    "micro_batch", "grad_accum", "seq_len", "steps"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LaunchSpec.{key} must be a positive integer, not {value!r}")
        if self.tensor_parallel * self.pipeline_parallel * self.context_parallel * self.data_parallel != self.gpus:
            raise ValueError(f"tensor {self.tensor_parallel} × pipeline {self.pipeline_parallel} × "
                             + (f"context {self.context_parallel} × " if self.context_parallel > 1 else "")
                             + f"data {self.data_parallel} parallel ≠ {self.gpus} GPUs")
        if self.experts is not None and (self.experts % self.expert_parallel or self.experts_per_token is None
                                         or not 0 < self.experts_per_token <= self.experts):
            raise ValueError(f"expert parallel {self.expert_parallel} must divide experts {self.experts}, "
                             f"and 1 ≤ experts_per_token ≤ experts")
        if self.experts is None and self.expert_parallel != 1:
            raise ValueError("expert parallelism needs experts")
        if self.warmup_steps < 0:
            raise ValueError("LaunchSpec.warmup_steps must be ≥ 0")
        if self.time_limit_s is not None and self.time_limit_s < 1:
            raise ValueError("LaunchSpec.time_limit_s must be ≥ 1 second")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError("LaunchSpec.zero_stage must be 0, 1, 2 or 3")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError("LaunchSpec.lr must be a positive finite number")
        if self.precision not in ("bf16", "fp16"):
            raise ValueError("LaunchSpec.precision must be bf16 or fp16")
        if not self.launch.command or self.launch.image is None:
            raise ValueError("LaunchSpec.launch needs image and command resolved")
        for key in ("layers", "hidden_size", "heads", "vocab", "kv_heads", "ffn_hidden"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"LaunchSpec.{key} must be a positive integer or None, not {value!r}")
        if self.heads is not None and self.heads % self.tensor_parallel:
            raise ValueError(f"heads {self.heads} are not divisible by tensor parallel "
                             f"{self.tensor_parallel}")
        self._check_split()
        self._check_attention()
        if self.recompute not in ("none", "selective", "full"):
            raise ValueError("LaunchSpec.recompute must be none, selective or full")
        if self.recompute_layers is not None and (self.recompute != "full" or self.recompute_layers < 0):
            raise ValueError("LaunchSpec.recompute_layers (block recomputation) needs recompute full and N ≥ 0")

    def _check_split(self) -> None:
        """The stages hold every layer: an uneven `stage_layers`, Megatron-Core's accounted split
        (`split_slots`), or L/p each."""
        if self.split_slots:
            self._check_accounted()
        elif self.stage_layers is not None:
            if len(self.stage_layers) != self.pipeline_parallel or min(self.stage_layers) < 1 or (
                    self.layers is not None and sum(self.stage_layers) != self.layers):
                raise ValueError(f"stage_layers {list(self.stage_layers)} must give each of the "
                                 f"{self.pipeline_parallel} stages at least one layer, {self.layers} in all")
        elif self.layers is not None and self.layers % self.pipeline_parallel:
            raise ValueError(f"layers {self.layers} are not divisible by pipeline parallel "
                             f"{self.pipeline_parallel}: give stage_layers")

    def _check_accounted(self) -> None:
        """The accounted split runs (`layout.accounted_problem`) and is the one `stage_layers` holds."""
        flags = set(self.split_slots)
        if not flags <= {"embedding", "loss"} or self.layers is None:
            raise ValueError("LaunchSpec.split_slots holds 'embedding' and/or 'loss', and needs layers")
        embedding, loss = "embedding" in flags, "loss" in flags
        problem = accounted_problem(self.layers, self.pipeline_parallel, self.virtual_stages, embedding, loss)
        if problem is not None:
            raise ValueError(f"the accounted pipeline split does not run: {problem}")
        split = accounted_split(self.layers, self.pipeline_parallel, embedding, loss)
        if (self.stage_layers or split) != split:
            raise ValueError(f"stage_layers {list(self.stage_layers or ())} are not the accounted split {list(split)}")

    def _check_attention(self) -> None:
        """The heads split evenly: width over heads, heads over key/value groups, groups over TP."""
        if self.kv_heads is not None and (self.kv_heads % self.tensor_parallel
                                          or self.heads is None or self.heads % self.kv_heads):
            raise ValueError(f"kv_heads {self.kv_heads} must divide heads {self.heads} and be divisible by "
                             f"tensor parallel {self.tensor_parallel}")
        if self.heads is not None and self.hidden_size is not None and self.hidden_size % self.heads:
            raise ValueError(f"hidden size {self.hidden_size} is not divisible by heads {self.heads}")
        if self.batch_stages:
            st = self.batch_stages
            unit = self.micro_batch * self.data_parallel
            if st[0].start_tokens != 0 or any(b.start_tokens <= a.start_tokens for a, b in zip(st, st[1:])):
                raise ValueError("LaunchSpec.batch_stages must start at 0 tokens and increase")
            if any(b.sequences != b.grad_accum * unit or b.steps < 1 for b in st):
                raise ValueError("LaunchSpec.batch_stages: sequences = grad_accum × micro × data parallel")
            if st[-1].grad_accum != self.grad_accum or sum(b.steps for b in st) != self.steps:
                raise ValueError("LaunchSpec: the last stage's accumulation and the stages' steps "
                                 "must be the spec's")

    @property
    def total_sequences(self) -> int:
        """Sequences of the whole run (Megatron's --train-samples)."""
        if self.batch_stages:
            return sum(b.sequences * b.steps for b in self.batch_stages)
        return self.global_batch_sequences * self.steps

    def schedule_text(self) -> str:
        """`START_TOKENS:SEQUENCES` pairs, space-separated (Megatron's --step-batch-size-schedule)."""
        return " ".join(f"{b.start_tokens}:{b.sequences}" for b in self.batch_stages)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch_sequences(self) -> int:
        return self.micro_batch * self.grad_accum * self.data_parallel

    @property
    def global_batch_tokens(self) -> int:
        return self.global_batch_sequences * self.seq_len

    @property
    def command(self) -> tuple[str, ...]:
        assert self.launch.command is not None
        return tuple(self.launch.command)

    @property
    def image(self) -> str:
        assert self.launch.image is not None
        return self.launch.image

    @property
    def port(self) -> int:
        return self.launch.rdzv_port

    def env(self) -> list[tuple[str, str]]:
        """The job's environment: the plan's numbers as BUDGETDSL_* (for the training program to read
        and check), CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism (TP_ENV; unless
        `launch.env` sets it), then `launch.env` in the plan's order."""
        ours = [
            ("BUDGETDSL_RUN_NAME", self.name),
            ("BUDGETDSL_NODES", str(self.nodes)),
            ("BUDGETDSL_GPUS_PER_NODE", str(self.gpus_per_node)),
            ("BUDGETDSL_DATA_PARALLEL", str(self.data_parallel)),
            ("BUDGETDSL_TENSOR_PARALLEL", str(self.tensor_parallel)),
            ("BUDGETDSL_PIPELINE_PARALLEL", str(self.pipeline_parallel)),
            ("BUDGETDSL_MICRO_BATCH", str(self.micro_batch)),
            ("BUDGETDSL_GRAD_ACCUM", str(self.grad_accum)),
            ("BUDGETDSL_GLOBAL_BATCH", str(self.global_batch_sequences)),
            ("BUDGETDSL_GLOBAL_BATCH_TOKENS", str(self.global_batch_tokens)),
            ("BUDGETDSL_SEQ_LEN", str(self.seq_len)),
            ("BUDGETDSL_STEPS", str(self.steps)),
        ]
        if self.lr is not None:
            ours.append(("BUDGETDSL_LR", format_float(self.lr)))
        ours += [("BUDGETDSL_WARMUP_STEPS", str(self.warmup_steps)),
                 ("BUDGETDSL_ZERO_STAGE", str(self.zero_stage))]
        if self.batch_stages:  # from START tokens on, SEQUENCES per step (global batch)
            ours.append(("BUDGETDSL_BATCH_SCHEDULE", self.schedule_text()))
        if self.context_parallel > 1:
            ours.append(("BUDGETDSL_CONTEXT_PARALLEL", str(self.context_parallel)))
        if self.sequence_parallel:
            ours.append(("BUDGETDSL_SEQUENCE_PARALLEL", "1"))
        if self.virtual_stages > 1:
            ours.append(("BUDGETDSL_VIRTUAL_STAGES", str(self.virtual_stages)))
        if self.stage_layers is not None:  # layers per stage, first to last, comma-separated
            ours.append(("BUDGETDSL_STAGE_LAYERS", ",".join(str(n) for n in self.stage_layers)))
        if self.split_slots:  # the first chunk holds the embedding, the last the loss, each in a layer's place
            ours.append(("BUDGETDSL_SPLIT_SLOTS", ",".join(self.split_slots)))
        if self.recompute_layers is not None:  # block recomputation: the first N layers of each stage (chunk)
            ours.append(("BUDGETDSL_RECOMPUTE_LAYERS", str(self.recompute_layers)))
        if self.experts is not None:
            ours += [("BUDGETDSL_EXPERTS", str(self.experts)),
                     ("BUDGETDSL_EXPERTS_PER_TOKEN", str(self.experts_per_token)),
                     ("BUDGETDSL_EXPERT_PARALLEL", str(self.expert_parallel))]
        given = self.launch.env or {}
        if self.tensor_parallel > 1 and TP_ENV[0] not in given:
            ours.append(TP_ENV)
        return ours + list(given.items())

    def defaults_for(self, keys: frozenset[str] | set[str]) -> list[Defaulted]:
        """The defaulted values a format uses (by plan key), in a stable order."""
        return [d for d in self.defaulted if d.key in keys]


def parallel_refusal(spec: LaunchSpec, fmt: str, what: str) -> str | None:
    """Why format `fmt` (which configures `what` only) cannot carry the plan's context or expert
    parallelism, uneven pipeline split or interleaved stages, or None when the plan has none of them
    (a mixture-of-experts model with ep = 1 is a model like another: its experts replicated on
    every data-parallel rank)."""
    parts = []
    if spec.split_slots:
        parts.append(f"a pipeline split {list(spec.stage_layers or ())} counting the "
                     f"{' and the '.join(spec.split_slots)} as layers (hardware.embedding_in_pipeline_split, "
                     "loss_in_pipeline_split)")
    elif spec.stage_layers is not None:
        parts.append(f"an uneven pipeline split {list(spec.stage_layers)} (layers per stage; hardware.stage_layers)")
    if spec.virtual_stages > 1:
        parts.append(f"{spec.virtual_stages} interleaved stages per GPU (hardware.virtual_pipeline_stages)")
    if spec.context_parallel > 1:
        parts.append(f"context parallelism {spec.context_parallel} (hardware.context_parallel)")
    if spec.expert_parallel > 1:
        parts.append(f"expert parallelism {spec.expert_parallel} over its {spec.experts} routed experts "
                     "(hardware.expert_parallel)")
    if not parts:
        return None
    if (spec.stage_layers is not None or spec.virtual_stages > 1) and \
            spec.context_parallel == 1 and spec.expert_parallel == 1:
        return (f"the plan has {' and '.join(parts)}, and the {fmt} export configures {what}, which has no setting for "
                "it: the run would not be the one planned. Export megatron (Megatron-Core's "
                + ("--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split, "
                   if spec.split_slots else "--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers, ")
                + "--num-virtual-stages-per-pipeline-rank), or a launcher (torchrun, slurm, skypilot, "
                "pytorchjob, kubeflow) whose training program reads BUDGETDSL_STAGE_LAYERS"
                + (", BUDGETDSL_SPLIT_SLOTS" if spec.split_slots else "") + " and BUDGETDSL_VIRTUAL_STAGES")
    return (f"the plan has {' and '.join(parts)}, and the {fmt} export configures {what}, which has no "
            "setting for it: the run would not be the one planned. Export megatron (Megatron-Core's "
            "--context-parallel-size, --expert-model-parallel-size), or a launcher (torchrun, slurm, "
            "skypilot, pytorchjob, kubeflow) whose training program reads BUDGETDSL_CONTEXT_PARALLEL and "
            "BUDGETDSL_EXPERT_PARALLEL")


def recompute_refusal(spec: LaunchSpec, fmt: str, what: str) -> str | None:
    """Why format `fmt` (which configures `what` only) cannot carry the plan's block recomputation
    (`hardware.recompute_layers`: the first N layers of each stage recomputed, the rest not), or None
    when the plan recomputes every layer or none: the memory the plan counted on would differ."""
    if spec.recompute_layers is None:
        return None
    return (f"the plan recomputes the first {spec.recompute_layers} layers of each pipeline stage in full and keeps "
            f"the others' activations (block recomputation, hardware.recompute_layers), and the {fmt} export "
            f"configures {what}, which has no setting for it: the run's memory would not be the one planned. "
            "Export megatron (--recompute-granularity full --recompute-method block --recompute-num-layers N), or a "
            "launcher (torchrun, slurm, skypilot, pytorchjob, kubeflow) whose training program reads "
            "BUDGETDSL_RECOMPUTE_LAYERS")


def format_float(x: float) -> str:
    """Shortest round-tripping decimal: 0.0003, 1.5e-05 — the same in every format."""
    return repr(float(x))


# -- the adapter ---------------------------------------------------------------------------------

def _field(obj: Any, dotted: str) -> Any:
    """`solution.batch.micro_batch` from a Solution or from its JSON (a dict)."""
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def infeasible_reason(solution: Any) -> str:
    """Why there is nothing to launch, from the solver's own words."""
    lines = [str(c) for c in (_field(solution, "conflicts") or [])]
    for r in _field(solution, "relaxations") or []:
        message = _field(r, "message")
        if message:
            lines.append(str(message))
    return "; ".join(lines) if lines else "the solver found no feasible configuration"


def _tokens(x: float) -> str:
    return f"{x:,.0f}"


def resolve_launch(plan: Any) -> tuple[Launch, list[Defaulted]]:
    """The plan's `launch:` section with the defaults filled in, and what was defaulted."""
    given: Launch = plan.launch or Launch()
    defaulted: list[Defaulted] = []
    update: dict[str, Any] = {}
    if given.image is None:
        update["image"] = DEFAULT_IMAGE
        defaulted.append(Defaulted("launch.image", DEFAULT_IMAGE, "NGC PyTorch; set the image your "
                                   "training code is in"))
    if given.command is None:
        update["command"] = list(DEFAULT_COMMAND)
        defaulted.append(Defaulted("launch.command", " ".join(DEFAULT_COMMAND), "a stand-in for the "
                                   "training program and its arguments"))
    if given.partition is None:
        defaulted.append(Defaulted("launch.partition", "the cluster's default partition", "not set"))
    if given.account is None:
        defaulted.append(Defaulted("launch.account", "the user's default account", "not set"))
    if given.namespace is None:
        defaulted.append(Defaulted("launch.namespace", "the namespace of the kubectl context", "not set"))
    if given.runtime is None:
        update["runtime"] = DEFAULT_RUNTIME
        defaulted.append(Defaulted("launch.runtime", DEFAULT_RUNTIME, "Kubeflow Trainer's torchrun "
                                   "runtime"))
    return given.model_copy(update=update), defaulted


def launch_spec(plan: Any, solution: Any) -> LaunchSpec:
    """The launchable run of a feasible solution. Raises ExportError when there is none."""
    if not _field(solution, "feasible"):
        raise ExportError(f"plan {plan.name!r} is infeasible: {infeasible_reason(solution)}")
    hw = plan.hardware
    # the launched layout: the solution's (the solver searches `auto` keys), else the plan's
    tp = int(_field(solution, "batch.tensor_parallel") or hw.tensor_parallel)
    pp = int(_field(solution, "batch.pipeline_parallel") or hw.pipeline_parallel)
    zero = _field(solution, "batch.zero")
    zero = int(hw.zero if zero is None else zero)
    recompute = str(_field(solution, "batch.recompute") or hw.recompute)
    block = _field(solution, "batch.recompute_layers")  # block recomputation: the solution's, else the plan's
    if block is None and isinstance(hw.recompute_layers, int):  # kept below only with full recomputation
        block = hw.recompute_layers
    dp = _field(solution, "batch.data_parallel")
    micro = _field(solution, "batch.micro_batch")
    accum = _field(solution, "batch.grad_accum")
    steps = _field(solution, "steps")
    missing = [k for k, v in (("batch.data_parallel", dp), ("batch.micro_batch", micro),
                              ("batch.grad_accum", accum), ("steps", steps)) if v is None]
    if missing:
        raise ExportError("the solution lacks " + ", ".join(missing))
    dp, micro, accum, steps = int(dp), int(micro), int(accum), int(steps)
    cp = int(_field(solution, "batch.context_parallel") or hw.context_parallel)  # the search's, else the plan's
    ep = int(_field(solution, "batch.expert_parallel") or hw.expert_parallel)
    gpus = _field(solution, "gpus") or dp * tp * pp * cp
    if gpus != dp * tp * pp * cp:
        raise ExportError(f"the solution's {gpus} GPUs are not data {dp} × tensor {tp} × pipeline {pp}"
                          + (f" × context {cp}" if cp > 1 else ""))
    etp = hw.expert_tensor_parallel
    group = (etp or tp) * ep if (etp is not None or ep > 1) else 1
    problem = launch_problem(gpus, tp, pp, int(hw.gpus_per_node), cp, group)  # the one rule (budgetdsl.hardware.layout)
    if problem:
        raise ExportError(f"{problem} (hardware.gpus_per_node {int(hw.gpus_per_node)}, tensor {tp}, "
                          f"pipeline {pp}); choose a launchable count")
    nodes, per_node = nodes_of(gpus, int(hw.gpus_per_node))
    split = _launched_split(plan, solution, pp)

    seq_len = int(plan.model.seq_len)
    batch_tokens = micro * accum * dp * seq_len
    warnings: list[str] = []
    notes: list[str] = []
    defaulted: list[Defaulted] = []

    lr = derivation = None
    warmup = 0
    opt = plan.optimizer
    b_crit = _field(solution, "frontier.b_crit_tokens")
    if opt is None:
        defaulted.append(Defaulted("optimizer.lr", "the training program's own", "the plan has no "
                                   "optimizer section"))
    else:
        scaling = str(opt.scaling)
        lr = scale_lr(float(opt.lr), float(opt.at_batch), batch_tokens, scaling)
        warmup = int(opt.warmup_steps)
        ratio = batch_tokens / float(opt.at_batch)
        rule = LR_RULE[scaling]
        derivation = (f"lr {format_float(lr)} = {format_float(float(opt.lr))} tuned at "
                      f"B₀ = {_tokens(float(opt.at_batch))} tokens, {scaling} {rule}, "
                      f"B = {_tokens(batch_tokens)} tokens (B/B₀ = {ratio:.4g})")
        uncertainty = _field(solution, "frontier.b_crit_uncertainty")
        reach = (lr_rescaling_past_b_crit(float(opt.at_batch), batch_tokens, float(b_crit),
                                          None if uncertainty is None else float(uncertainty))
                 if scaling != "none" and b_crit else 0.0)
        if reach:
            warnings.append(f"{scaling} lr scaling from B₀ = {_tokens(float(opt.at_batch))} to "
                            f"B = {_tokens(batch_tokens)} tokens reaches {reach:.0%} past B_crit "
                            f"({_tokens(float(b_crit))} tokens), where the rule stops holding "
                            f"(McCandlish et al. 2018); tune lr at this batch")
        if scaling == "linear" and ratio > 1 and warmup == 0:
            warnings.append("linear lr scaling to a larger batch without warmup: Goyal et al. 2017 "
                            "need a gradual warmup (set optimizer.warmup_steps)")
        if warmup >= steps:
            warnings.append(f"optimizer.warmup_steps ({warmup}) is not below the run's {steps} steps")

    deadline = plan.budget.deadline
    time_limit = None if deadline is None else math.ceil(float(deadline))  # deadline ≥ 1 s (plan range)
    if time_limit is None:
        defaulted.append(Defaulted("budget.deadline", "no time limit", "the plan sets no deadline"))
    wall = _field(solution, "wall_clock_s")
    if time_limit is not None and wall is not None:
        notes.append(f"planned wall clock {float(wall) / 86400:.2f} days of the "
                     f"{time_limit / 86400:.2f}-day limit")

    stages: list[BatchStage] = []
    ramp = _field(solution, "ramp")
    if ramp is not None:
        micro = int(_field(ramp, "micro_batch"))
        start = 0
        for st in _field(ramp, "stages") or []:
            sequences, st_steps = int(_field(st, "sequences")), int(_field(st, "steps"))
            stages.append(BatchStage(start, sequences, int(_field(st, "grad_accum")), st_steps))
            start += sequences * seq_len * st_steps
        accum, steps = stages[-1].grad_accum, sum(b.steps for b in stages)
        notes.append(f"batch ramp ({_field(ramp, 'schedule')}, {len(stages)} stages, micro-batch {micro}): "
                     + "; ".join(f"from {_tokens(b.start_tokens)} tokens {b.sequences} sequences "
                                 f"(accumulation {b.grad_accum}) for {b.steps} steps" for b in stages))
        if lr is not None:
            notes.append("lr is scaled to the last stage's batch; scale each stage's lr by the same rule")

    launch, launch_defaults = resolve_launch(plan)
    preset = hw.gpu
    given_env = launch.env or {}
    if tp > 1 and given_env.get(TP_ENV[0], TP_ENV[1]) != TP_ENV[1]:
        warnings.append(f"launch.env sets {TP_ENV[0]}={given_env[TP_ENV[0]]}: Megatron-LM asserts it is "
                        f"1 with tensor parallelism ({tp}) on GPUs before Blackwell, unless FSDP runs too")
    tpu = preset if is_tpu(preset) else None
    accelerator = launch.accelerator or (None if tpu else SKY_ACCELERATORS.get(preset or ""))
    if launch.accelerator is None and accelerator is not None:
        defaulted.append(Defaulted("launch.accelerator", accelerator, f"SkyPilot's name of {preset}"))
    resource = launch.gpu_resource or ("amd.com/gpu" if preset in AMD_PRESETS else "nvidia.com/gpu")
    precision = "fp16" if preset in NO_BF16_PRESETS else "bf16"
    m = plan.model
    shape: dict[str, Any] = {key: None if getattr(m, attr) is None else int(getattr(m, attr))
                             for key, attr in (("layers", "layers"), ("hidden_size", "d_model"), ("heads", "heads"),
                                               ("vocab", "vocab"), ("kv_heads", "kv_heads"),
                                               ("ffn_hidden", "ffn_hidden"))}
    if m.experts:
        shape.update(experts=int(m.experts), experts_per_token=int(m.experts_per_token or m.experts),
                     expert_ffn_hidden=None if m.expert_ffn_hidden is None else int(m.expert_ffn_hidden),
                     shared_experts=int(m.shared_experts), dense_layers=int(m.dense_layers),
                     capacity_factor=m.capacity_factor, expert_parallel=ep,
                     expert_tensor_parallel=None if etp is None else int(etp),
                     expert_groups=m.expert_groups, expert_groups_per_token=m.expert_groups_per_token,
                     expert_dispatch=str(hw.expert_dispatch), expert_overlap=bool(hw.expert_overlap))
    mla = m.latent_attention
    if mla is not None:
        shape["mla"] = (mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim,
                        mla.v_head_dim)
    searched_sp = _field(solution, "batch.sequence_parallel")
    searched_v = _field(solution, "batch.virtual_pipeline_stages")
    slots = plan.hardware.split_slots()
    shape.update(context_parallel=cp, stage_layers=split,
                 split_slots=slot_names(slots, pp),
                 sequence_parallel=bool(searched_sp if searched_sp is not None else hw.sequence_parallel is True),
                 virtual_stages=int(searched_v if searched_v is not None else
                                    (1 if hw.virtual_pipeline_stages == "auto" else hw.virtual_pipeline_stages)))
    shape.update(swiglu=m.mlp == "swiglu", untied_embeddings=not m.tied_embeddings,
                 detailed_shape=bool(m.detailed()), fp8=getattr(hw, "precision", "bf16") == "fp8")
    if shape["fp8"]:
        notes.append("the plan prices FP8 GEMMs (hardware.precision: fp8, Transformer Engine): the megatron "
                     "export sets --fp8-format hybrid; elsewhere the training command must enable FP8 itself, "
                     "or the run is BF16 and slower than planned")

    return LaunchSpec(
        name=plan.name, nodes=nodes, gpus_per_node=per_node, tensor_parallel=tp, pipeline_parallel=pp,
        data_parallel=dp, micro_batch=micro, grad_accum=accum, seq_len=seq_len, steps=steps, lr=lr,
        warmup_steps=warmup, time_limit_s=time_limit, zero_stage=zero, launch=launch,
        accelerator=accelerator, gpu_resource=resource, precision=precision, lr_derivation=derivation,
        defaulted=tuple(launch_defaults + defaulted), warnings=tuple(warnings), notes=tuple(notes),
        batch_stages=tuple(stages), recompute=recompute, tpu=tpu,
        recompute_layers=None if block is None or recompute != "full" else int(block), **shape)


def _launched_split(plan: Any, solution: Any, pp: int) -> tuple[int, ...] | None:
    """The layers per stage the plan was costed with, where they are not L/p each: the pinned
    `hardware.stage_layers`, else the cost model's balanced split (the solution's
    throughput.stage_layers); None for an even split or without a pipeline."""
    layers = plan.model.layers
    if layers is None or pp <= 1:
        return None
    embedding, loss = plan.hardware.split_slots()
    if embedding or loss:  # Megatron-Core's accounted split (the plan validator checked it divides)
        return accounted_split(int(layers), pp, embedding, loss)
    pinned = plan.hardware.stage_layers
    split = pinned if pinned is not None and len(pinned) == pp else \
        (_field(solution, "throughput.stage_layers") or stage_layers(int(layers), pp))
    split = tuple(int(n) for n in split)
    return None if len(set(split)) == 1 else split


def tpu_refusal(spec: LaunchSpec, fmt: str) -> str:
    """The one message every format gives a TPU plan (`export` raises it as an ExportError)."""
    return (f"plan {spec.name!r} runs on {spec.tpu} chips (hardware.gpu), and the {fmt} export "
            "launches PyTorch on NVIDIA or AMD GPUs (torchrun, NCCL, CUDA images, GPU resources): no "
            "export format has a TPU form. To export, plan the run on a GPU preset (e.g. hardware.gpu: "
            "H100-SXM5-80GB); launch a TPU run with TPU tooling (JAX or torch_xla on a TPU VM or a GKE "
            "TPU node pool)")
